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

import os
import sys

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
    "edgekit/devices/backends.py",
    "edgekit/devices/classifier.py",
    "edgekit/devices/delegate_probe.py",
    "edgekit/devices/delegate_child.py",
    "edgekit/devices/latency.py",
)
MIN_PYTHON = (3, 7)
# edgekit.preprocess.open_image uses ImageOps.exif_transpose (Pillow 6.0) and UnidentifiedImageError (7.0);
# Mendel's python3-pil (Debian 10) is 5.4, so a Dev Board needs a pip-installed Pillow.
MIN_PILLOW = (7, 0)
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


# Twins of edgekit.devices.backends' (this file runs alone in ``probe``): tests/test_structure.py keeps them equal.
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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


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


# ------------------------------------------------------------------------------ classify / benchmark
# The runtime is the host's (edgekit.devices.backends: backends, delegate, fallback, errors; and
# edgekit.devices.classifier): this runner only speaks the board's protocol around it.
def _classifier(args):
    from edgekit.devices import backends
    from edgekit.devices.classifier import Classifier, load_bundle

    backends.ON_BOARD = True
    return Classifier(load_bundle(args.bundle, args.device), mean=args.mean, std=args.std, name=args.bundle)


def benchmark(bundle: str, device: str = "auto", n: int = 100, warmup: int = 10, threads=None) -> dict:
    """The document of ``edgekit benchmark --json``: the bundle's model loaded, then invoke() alone timed."""
    from edgekit.devices import backends, latency
    from edgekit.devices.classifier import load_bundle

    backends.ON_BOARD = True
    threads = threads or latency.default_threads()
    return backends.benchmark(lambda: load_bundle(bundle, device, num_threads=threads), n, warmup, threads)


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
    classifier = _classifier(args)
    from edgekit.errors import Caution

    for note in classifier.notes:  # read back by the host (remote.py) as its own notes and warnings
        sys.stderr.write(("warning: " if isinstance(note, Caution) else "note: ") + note + "\n")
    if args.images_tar != "-":
        return classifier.run(args.images, args.top_k, args.threshold, workers=1).to_dict()
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
        report = classifier.run([os.path.join(folder, n) for n in names], args.top_k, args.threshold,
                                workers=1).to_dict()
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
    import json  # here: host commands import this module for two helpers and need no JSON from it

    sys.stdout.write(json.dumps(doc) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
