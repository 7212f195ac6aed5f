"""The runner ``edgekit deploy`` ships to a Coral Dev Board: classify and benchmark a bundle there.

It runs on the board's own Python (Mendel: Debian 10, Python 3.7) with only numpy, Pillow and an
interpreter package (Google's pycoral or tflite_runtime from Coral's apt repo; ai_edge_litert where
installed), never edgekit's own dependencies. So this file, and every edgekit module it imports
(``SHIPPED_MODULES``: the one preprocessing, labels and scoring, errors), stays Python-3.7-compatible
and imports nothing else; tests check both with vermin and an import allowlist, and run it under a
real Python 3.7. Heavy imports wait until a command needs them: ``probe`` and ``unpack`` run before
anything is installed (sent over stdin by the host) and use the standard library only.

Layout on the board (``--path``, default ``edgekit`` in the login user's home)::

    DIR/runtime/edgekit/...       this runner and the modules it imports
    DIR/bundles/<name>/...        bundles, as ``edgekit build`` wrote them

Commands, each printing one JSON document on stdout (errors: ``error: ...`` on stderr, edgekit's
exit codes)::

    probe DIR SUBDIR...           Python version, usable packages, sha256 of the files under DIR/SUBDIR
    unpack DIR [--delete P]...    a tar on stdin -> files under DIR, each written beside and renamed
    classify --bundle B [--device D] [--top-k K] [--threshold=T] [--mean M] [--std S] IMAGES... | --images-tar -
                                  the document of ``edgekit classify --json``
    benchmark --bundle B [--device D] [-n N] [--warmup K] [--threads T]
                                  the document of ``edgekit benchmark --json``

On the board itself: ``cd DIR/runtime && python3 -m edgekit.devices.board_runner classify --bundle
../bundles/NAME image.jpg``.
"""

from __future__ import annotations

import json
import os
import sys
import time

# The modules this runner needs on the board, relative to the package root's parent (tests keep
# this list closed under imports: everything a shipped module imports from edgekit is shipped).
SHIPPED_MODULES = (
    "edgekit/__init__.py",
    "edgekit/errors.py",
    "edgekit/preprocess.py",
    "edgekit/classes.py",
    "edgekit/manifest.py",
    "edgekit/devices/__init__.py",
    "edgekit/devices/board_runner.py",
    "edgekit/devices/latency.py",
)
MIN_PYTHON = (3, 7)
# edgekit.preprocess.open_image uses ImageOps.exif_transpose (Pillow 6.0) and UnidentifiedImageError (7.0);
# Mendel's python3-pil (Debian 10) is 5.4, so a Dev Board needs a pip-installed Pillow.
MIN_PILLOW = (7, 0)
# The Edge TPU delegate library on Linux (pycoral/utils/edgetpu.py, _EDGETPU_SHARED_LIB).
EDGETPU_LIBRARY = "libedgetpu.so.1"
# Exit codes of edgekit/errors.py, for the commands that run before edgekit.errors is installed.
EXIT_INPUT, EXIT_DEVICE = 3, 9


# ------------------------------------------------------------------------------ probe / unpack
def sha256_file(path: str) -> str:
    """(edgekit.manifest has its twin: this one runs in ``probe``, before anything is installed.)"""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def module_available(name: str) -> bool:
    """True when ``name`` is installed, found without importing it (a failing import hook counts as absent)."""
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def google_pycoral_available() -> bool:
    """True for Google's pycoral (has ``pycoral/utils/edgetpu.py``), not the unrelated PyPI package of that
    name; without importing anything."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("pycoral")
    except (ImportError, ValueError):
        return False
    locations = (spec and spec.submodule_search_locations) or []
    return any(os.path.isfile(os.path.join(loc, "utils", "edgetpu.py")) for loc in locations)


def probe(root: str, subdirs: list[str]) -> dict:
    """What the host needs before it copies anything: this Python, its packages, the files already there."""
    pillow = None
    if module_available("PIL"):
        try:
            import PIL

            pillow = getattr(PIL, "__version__", None) or getattr(PIL, "PILLOW_VERSION", "0")
        except Exception:  # a broken install counts as missing
            pillow = None
    packages = {"numpy": module_available("numpy"), "pillow": pillow,
                "pycoral": google_pycoral_available(), "tflite_runtime": module_available("tflite_runtime"),
                "ai_edge_litert": module_available("ai_edge_litert")}
    files = {}
    root = os.path.expanduser(root)
    for sub in subdirs:
        top = os.path.join(root, sub)
        for folder, dirs, names in os.walk(top):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in names:
                path = os.path.join(folder, name)
                if os.path.isfile(path) and not name.startswith(".edgekit-tmp-"):
                    files[os.path.relpath(path, root).replace(os.sep, "/")] = sha256_file(path)
    return {"python": "%d.%d.%d" % sys.version_info[:3], "executable": sys.executable,
            "packages": packages, "files": files}


def _safe_relative(name: str) -> str:
    """A relative path inside the target folder, or ValueError (no absolute paths, no '..')."""
    parts = name.replace("\\", "/").split("/")
    if not name or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError("refusing the path %r" % name)
    return os.path.join(*parts)


def _write_atomically(path: str, source) -> None:
    import tempfile

    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".edgekit-tmp-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as out:
            for block in iter(lambda: source.read(1 << 20), b""):
                out.write(block)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def unpack(root: str, stream, delete: list) -> dict:
    """Regular files from the tar ``stream`` into ``root``, all or none, then the deletions.

    Every file is first written whole into a staging folder beside them; only once the whole stream
    has arrived are they renamed into place. A transfer cut short, or a member that is not a regular
    file (a link), leaves ``root`` as it was: no half-copied bundle.
    """
    import shutil
    import tarfile
    import tempfile

    root = os.path.expanduser(root)
    os.makedirs(root, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".edgekit-tmp-stage-", dir=root)
    try:
        staged = []
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                if not member.isfile():
                    raise ValueError("refusing the tar member %r: not a regular file" % member.name)
                rel = _safe_relative(member.name)
                _write_atomically(os.path.join(staging, rel), tar.extractfile(member))
                staged.append(rel)
        for rel in staged:  # everything arrived: into place (renames within one file system)
            final = os.path.join(root, rel)
            os.makedirs(os.path.dirname(final), exist_ok=True)
            os.replace(os.path.join(staging, rel), final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for name in delete:
        path = os.path.join(root, _safe_relative(name))
        if os.path.isfile(path):
            os.unlink(path)
    return {"written": len(staged), "deleted": len(delete)}


# ------------------------------------------------------------------------------ the model
class Loaded:
    """A bundle's model opened on a device: the interpreter, what runs where, and notes for the user."""

    def __init__(self, interpreter, model_path: str, device: str, backend: str, notes: list):
        self.interpreter, self.model_path, self.device, self.backend, self.notes = (
            interpreter, model_path, device, backend, notes)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _backend():
    """(name, Interpreter class, load_delegate, pycoral's make_interpreter or None), in preference order."""
    from edgekit.errors import MissingDependencyError

    if google_pycoral_available():
        from pycoral.utils.edgetpu import make_interpreter
        from tflite_runtime.interpreter import Interpreter, load_delegate

        return "pycoral", Interpreter, load_delegate, make_interpreter
    for name in ("tflite_runtime", "ai_edge_litert"):
        if module_available(name):
            module = __import__(name + ".interpreter", fromlist=["Interpreter", "load_delegate"])
            return name, module.Interpreter, module.load_delegate, None
    raise MissingDependencyError("no TFLite interpreter package is installed on this board",
                                 "apt-get install python3-pycoral (Coral's apt repo), or pip3 install tflite-runtime")


def _runtime_missing(exc: BaseException) -> bool:
    """True when loading the delegate failed because libedgetpu.so.1 itself is not there (not: no Edge TPU)."""
    return isinstance(exc, OSError) and "cannot open shared object" in str(exc)


def edgetpu_hint(device: str, runtime_missing: bool = False) -> str:
    """What to check on the board itself (edgekit does not run there) when the Edge TPU ``device`` cannot be opened."""
    usb = "that lsusb lists the USB Accelerator (1a6e:089a, or 18d1:9302 once its firmware is loaded)"
    pci = "that /dev/apex_0 exists (the Dev Board's or a PCIe/M.2 Edge TPU, its apex driver loaded)"
    where = {"usb": usb, "pci": pci}.get(device.split(":")[0], pci + " or " + usb)
    if runtime_missing:
        first = ("install the Edge TPU runtime on the board (sudo apt-get install libedgetpu1-std, from Coral's "
                 "apt repo) and check " + where)
    else:
        first = "on the board, check " + where + ", and that the Edge TPU runtime is installed (dpkg -s libedgetpu1-std)"
    return first + "; or use --device auto to fall back to the CPU model"


def open_bundle(path: str, device: str = "auto", num_threads=None) -> tuple:
    """(Loaded, edgekit.manifest.Bundle): the Edge TPU model when ``device`` allows and one works, else the CPU model.

    ``device``: ``auto`` (the Edge TPU, falling back to the CPU model with a note), ``cpu``, or the
    Edge TPU delegate's device option (``usb``, ``usb:0``, ``pci``, ``:0``, ...), which never falls back.
    Like ``edgekit classify -m BUNDLE``, every file it may load is checked against its sha256 first.
    """
    from edgekit import manifest
    from edgekit.errors import DeviceError, InputError, UsageError

    import ctypes

    bundle = manifest.load(path)
    etpu = None if device == "cpu" else bundle.edgetpu_model
    for rel in [bundle.cpu_model] + [r for r in (etpu, bundle.labels) if r]:
        bundle.verified(rel)  # before anything is opened: a changed file is refused, not loaded
    name, interpreter_cls, load_delegate, make_interpreter = _backend()
    cpu_path = str(bundle.path(bundle.cpu_model))
    etpu_path = str(bundle.path(etpu)) if etpu else None
    notes = []

    def on_cpu() -> Loaded:
        try:
            kwargs = {"num_threads": num_threads} if num_threads else {}
            interpreter = interpreter_cls(model_path=cpu_path, **kwargs)
            interpreter.allocate_tensors()
        except (ValueError, RuntimeError) as exc:
            raise InputError("%s: the %s interpreter cannot load the model (%s)" % (cpu_path, name, _first_line(exc)),
                             "deploy the bundle again; an interpreter older than the model's ops needs an update")
        return Loaded(interpreter, cpu_path, "cpu", name, notes)

    if device == "cpu":
        return on_cpu(), bundle
    if etpu_path is None:
        if device != "auto":
            raise UsageError("the bundle has no Edge TPU model, so it cannot run on %s" % device,
                             "build the bundle from a compiled model, or use --device cpu")
        notes.append("running on the CPU: the bundle has no Edge TPU model")
        return on_cpu(), bundle
    option = None if device == "auto" else device
    try:
        # Loaded here first: a missing library is then one OSError, not also the "Exception ignored in
        # Delegate.__del__" traceback tflite_runtime's half-made Delegate prints at exit.
        ctypes.CDLL(EDGETPU_LIBRARY)
        if make_interpreter is not None:
            interpreter = make_interpreter(etpu_path, device=option)
        else:
            delegate = load_delegate(EDGETPU_LIBRARY, {"device": option} if option else {})
            interpreter = interpreter_cls(model_path=etpu_path, experimental_delegates=[delegate])
        interpreter.allocate_tensors()
    except (OSError, ValueError, RuntimeError) as exc:
        missing = _runtime_missing(exc)
        reason = ("the Edge TPU runtime %s is not installed (%s)" if missing else
                  "the Edge TPU runtime %s found no usable Edge TPU (%s)") % (EDGETPU_LIBRARY, _first_line(exc))
        if device != "auto":
            raise DeviceError(reason, edgetpu_hint(device, missing))
        notes.append("running the CPU model %s instead of %s: %s"
                     % (os.path.basename(cpu_path), os.path.basename(etpu_path), reason))
        return on_cpu(), bundle
    return Loaded(interpreter, etpu_path, option or "edgetpu", name, notes), bundle


class BundleClassifier:
    """A loaded bundle with its recorded preprocessing and labels: image files in, top-k classes out."""

    def __init__(self, bundle: str, device: str = "auto", mean=None, std=None):
        import numpy as np

        from edgekit import preprocess
        from edgekit.classes import parse_labels
        from edgekit.errors import InputError

        self.loaded, opened = open_bundle(bundle, device)
        self.notes = self.loaded.notes
        interpreter = self.loaded.interpreter
        inp, out = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
        self._input_index, self._output_index = inp["index"], out["index"]
        self.input_dtype = np.dtype(inp["dtype"]).name
        self.input_scale, self.input_zero_point = float(inp["quantization"][0]) or None, int(inp["quantization"][1])
        self.output_scale, self.output_zero_point = float(out["quantization"][0]) or None, int(out["quantization"][1])
        self.num_classes = int(np.prod(out["shape"]))
        self._input_shape = tuple(int(d) for d in inp["shape"])
        shape = list(self._input_shape) + ([1] if len(self._input_shape) == 3 else [])
        if len(shape) != 4 or shape[0] != 1 or shape[3] not in (1, 3):
            raise InputError("%s: expected an image input [1, height, width, 1 or 3], got %s"
                             % (self.loaded.model_path, list(self._input_shape)),
                             "classify runs image classifiers; other models need their own code")
        _, height, width, channels = shape
        recorded = preprocess.PreprocessSpec.from_dict(opened.preprocess) if opened.preprocess else None
        spec, _, warnings = preprocess.spec_for_model(recorded, "recorded (bundle)", width, height, channels,
                                                      self.input_dtype, self.input_scale, self.input_zero_point,
                                                      mean, std, name=bundle)
        self.notes += warnings
        self.spec = spec
        self.labels = {}
        if opened.labels:
            path = str(opened.path(opened.labels))
            try:
                with open(path, encoding="utf-8-sig") as f:  # verified by the manifest: a regular file
                    self.labels = parse_labels(f.read())
            except (OSError, UnicodeDecodeError) as exc:
                raise InputError("cannot read the labels file %s (%s)" % (path, _first_line(exc)),
                                 "deploy the bundle again") from None
        if self.labels and len(self.labels) != self.num_classes:
            self.notes.append("warning: %d labels but the model has %d classes; labels may be shifted "
                              "(e.g. a missing 'background' line)" % (len(self.labels), self.num_classes))
        self.first_inference_ms = None

    def prepare(self, image_path: str):
        from edgekit.preprocess import prepare_file

        return prepare_file(image_path, self.spec, self.input_dtype, self.input_scale, self.input_zero_point,
                            self._input_shape)

    def infer(self, tensor) -> tuple:
        """The dequantized scores of one input and the invoke time in milliseconds."""
        from edgekit.errors import DeviceError
        from edgekit.preprocess import dequantize

        interpreter = self.loaded.interpreter
        interpreter.set_tensor(self._input_index, tensor)
        start = time.perf_counter()
        try:
            interpreter.invoke()
        except (RuntimeError, ValueError) as exc:
            raise DeviceError("inference failed on %s: %s" % (self.loaded.device, _first_line(exc)),
                              "try --device cpu; an Edge TPU that fails needs replugging or a reboot") from None
        ms = (time.perf_counter() - start) * 1000.0
        if self.first_inference_ms is None:
            self.first_inference_ms = ms
        raw = interpreter.get_tensor(self._output_index).ravel()
        return dequantize(raw, self.output_scale, self.output_zero_point), ms

    def classify(self, images: list, k: int = 5, threshold: float = float("-inf")) -> dict:
        """The document of ``edgekit classify --json``: one unreadable image is an entry in ``errors``."""
        from edgekit.classes import top_k
        from edgekit.errors import InputError

        results, errors = [], []
        for path in images:
            try:
                tensor = self.prepare(path)
            except InputError as exc:
                errors.append({"image": path, "error": str(exc)})
                continue
            scores, ms = self.infer(tensor)
            top = [{"id": i, "label": self.labels.get(i), "score": s} for i, s in top_k(scores, k, threshold)]
            results.append({"image": path, "ms": round(ms, 3), "top": top})
        first = None if self.first_inference_ms is None else round(self.first_inference_ms, 3)
        return {"model": self.loaded.model_path, "device": self.loaded.device, "backend": self.loaded.backend,
                "first_inference_ms": first, "results": results, "errors": errors}


# ------------------------------------------------------------------------------ command line
def benchmark(bundle: str, device: str = "auto", n: int = 100, warmup: int = 10, threads=None) -> dict:
    """The document of ``edgekit benchmark --json``: the bundle's model loaded, then invoke() alone timed."""
    import numpy as np

    from edgekit.devices import latency
    from edgekit.errors import DeviceError

    threads = threads or latency.default_threads()
    start = time.perf_counter()
    loaded, _ = open_bundle(bundle, device, threads)
    load_ms = (time.perf_counter() - start) * 1000.0
    interpreter = loaded.interpreter
    inp = interpreter.get_input_details()[0]
    dtype = np.dtype(inp["dtype"])
    shape = [int(d) for d in inp["shape"]]
    rng = np.random.RandomState(0)  # numpy 1.16 (Mendel's) has no default_rng
    if dtype.kind in "iu":
        data = rng.randint(np.iinfo(dtype).min, int(np.iinfo(dtype).max) + 1, shape).astype(dtype)
    else:
        data = rng.random_sample(shape).astype(dtype)
    interpreter.set_tensor(inp["index"], data)

    def run() -> None:
        try:
            interpreter.invoke()
        except (RuntimeError, ValueError) as exc:
            raise DeviceError("inference failed on %s: %s" % (loaded.device, _first_line(exc)),
                              "try --device cpu; an Edge TPU that fails needs replugging or a reboot") from None

    timing = latency.measure(run, n, warmup)
    governors = latency.cpu_governors()
    doc = {"model": loaded.model_path, "device": loaded.device, "backend": loaded.backend,
           "threads": threads if loaded.device == "cpu" else None, "load_ms": load_ms,
           "first_inference_ms": timing.pop("first_ms"), "iterations": n, "warmup": warmup}
    doc.update(timing)
    doc.update({"machine": latency.machine(governors), "notes": list(loaded.notes),
                "warnings": latency.governor_warnings(governors), "comparison": None})
    return doc


def _numbers(text):
    return None if text is None else tuple(float(v) for v in text.split(","))


def _parser():
    import argparse

    parser = argparse.ArgumentParser(prog="board_runner", description="edgekit's runner on a Coral board")
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("probe")
    p.add_argument("root")
    p.add_argument("subdirs", nargs="*")
    p = sub.add_parser("unpack")
    p.add_argument("root")
    p.add_argument("--delete", action="append", default=[])
    p = sub.add_parser("classify")
    p.add_argument("--bundle", required=True)
    p.add_argument("--device", default="auto")
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--threshold", type=float, default=float("-inf"))
    p.add_argument("--mean", type=_numbers)
    p.add_argument("--std", type=_numbers)
    p.add_argument("--images-tar", help="'-': the images come as a tar on stdin (named as its members)")
    p.add_argument("images", nargs="*")
    p = sub.add_parser("benchmark")
    p.add_argument("--bundle", required=True)
    p.add_argument("--device", default="auto")
    p.add_argument("-n", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--threads", type=int)
    return parser


def _classify(args) -> dict:
    classifier = BundleClassifier(args.bundle, args.device, args.mean, args.std)
    for note in classifier.notes:
        sys.stderr.write((note if note.startswith("warning:") else "note: " + note) + "\n")
    if args.images_tar != "-":
        return classifier.classify(args.images, args.top_k, args.threshold)
    import tarfile
    import tempfile

    folder = tempfile.mkdtemp(prefix="edgekit-images-")
    try:
        names = []
        with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as tar:
            for member in tar:
                name = os.path.basename(_safe_relative(member.name))
                if member.isfile():
                    _write_atomically(os.path.join(folder, name), tar.extractfile(member))
                    names.append(name)
        report = classifier.classify([os.path.join(folder, n) for n in names], args.top_k, args.threshold)
        prefix = folder + os.sep
        for entry in report["results"] + report["errors"]:  # name images as the host sent them
            entry["image"] = entry["image"][len(prefix):]
            if "error" in entry:
                entry["error"] = entry["error"].replace(prefix, "")
        return report
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def main(argv=None) -> int:
    import tarfile

    args = _parser().parse_args(argv)
    try:
        if args.command == "probe":
            doc = probe(args.root, args.subdirs)
        elif args.command == "unpack":
            doc = unpack(args.root, sys.stdin.buffer, args.delete)
        elif args.command == "classify":
            doc = _classify(args)
        elif args.command == "benchmark":
            doc = benchmark(args.bundle, args.device, args.n, args.warmup, args.threads)
        else:
            _parser().print_usage(sys.stderr)
            return 2
    except (ValueError, OSError, tarfile.TarError) as exc:
        if args.command in ("classify", "benchmark"):  # edgekit.errors is there: everything else is a bug
            raise
        sys.stderr.write("error: %s\n" % _first_line(exc))
        return EXIT_INPUT if isinstance(exc, (ValueError, tarfile.TarError)) else EXIT_DEVICE
    except Exception as exc:
        code = getattr(exc, "exit_code", None)
        if code is None:
            raise
        sys.stderr.write("error: %s\n" % exc)
        return code
    sys.stdout.write(json.dumps(doc) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
