"""The deployable bundle: a folder with ``manifest.json``, the CPU int8 model, the compiled model, labels.

``manifest.json`` (format ``edgekit-bundle``, version 1)::

    {"format": "edgekit-bundle", "format_version": 1, "created": "<ISO-8601 UTC>",
     "models": {"cpu": "<file>.tflite", "edgetpu": "<file>_edgetpu.tflite" or null},
     "labels": "labels.txt" or null,
     "files": [{"path": "<relative posix path>", "sha256": "<hex>", "size_bytes": N}, ...],
     "preprocess": <PreprocessSpec.to_dict(), as edgekit/model_record.py records it>,
     "input": {"shape": [1, H, W, C], "dtype": "uint8" | "int8", "scale": s, "zero_point": z},
     "versions": {"edgekit": "...", "tensorflow": "..." or null, "edgetpu_compiler": "..." or null},
     "reports": {"check": <check --json>, "compile": <compile report> or null},
     "accuracy": <evaluate document> or null}

``files`` lists every file of the bundle but ``manifest.json``. Every path is relative, POSIX, inside
the bundle (no ``..``, not absolute, no symlink leading out); a manifest that breaks this is refused
before anything is read, and a file whose sha256 differs from its entry is refused when it is
verified (:meth:`Bundle.verified`). :func:`write_bundle` makes the whole folder appear at once.

Standard library only (and Python 3.7 syntax), so that a runner on a Coral board that cannot import
edgekit can copy this one file; inside edgekit its errors are :class:`edgekit.errors.InputError` (exit 3).
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import shutil
import signal
import tempfile
import threading
from pathlib import Path, PurePosixPath
from typing import Any, Dict, Iterator, List, Optional, Union

try:
    from edgekit.errors import InputError as _BundleErrorBase, UsageError as _UsageErrorBase
except ImportError:  # copied alone onto a board without edgekit
    class _BundleErrorBase(Exception):  # type: ignore[no-redef]
        exit_code = 3

        def __init__(self, message: str, hint: Optional[str] = None):
            super().__init__(message)
            self.message, self.hint = message, hint

        def __str__(self) -> str:
            return "%s (%s)" % (self.message, self.hint) if self.hint else self.message

    class _UsageErrorBase(_BundleErrorBase):  # type: ignore[no-redef]
        exit_code = 2

FORMAT = "edgekit-bundle"
FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
LABELS_NAME = "labels.txt"
EDGETPU_SUFFIX = "_edgetpu.tflite"


class BundleError(_BundleErrorBase):
    """A bundle that cannot be trusted or read: bad manifest, a path leading out, a sha256 mismatch (exit 3)."""


def sha256_file(path: Union[str, os.PathLike]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def is_bundle(path: Union[str, os.PathLike]) -> bool:
    """True for a folder holding a ``manifest.json`` (what it says is checked by :func:`load`)."""
    p = Path(path)
    return p.is_dir() and (p / MANIFEST_NAME).is_file()


def _inside(root: Path, rel: Any, what: str) -> Path:
    """``root / rel`` after checking that ``rel`` is a relative POSIX path that stays inside ``root``."""
    if not isinstance(rel, str) or not rel or "\\" in rel or "\x00" in rel:
        raise BundleError("%s: manifest %s %r is not a relative POSIX path" % (root, what, rel),
                          "rebuild the bundle with edgekit build")
    pure = PurePosixPath(rel)
    if pure.is_absolute() or ".." in pure.parts or rel.startswith("~") or (len(rel) > 1 and rel[1] == ":"):
        raise BundleError("%s: manifest %s %r points outside the bundle" % (root, what, rel),
                          "a bundle may only name files inside its own folder; rebuild it with edgekit build")
    path = root.joinpath(*pure.parts)
    real_root = os.path.realpath(str(root))
    real = os.path.realpath(str(path))
    if os.path.commonpath([real_root, real]) != real_root:
        raise BundleError("%s: manifest %s %r leads outside the bundle (through a symbolic link)" % (root, what, rel),
                          "a bundle may only name files inside its own folder; rebuild it with edgekit build")
    return path


class Bundle:
    """A bundle folder whose manifest has been read and whose paths all stay inside it."""

    def __init__(self, root: Path, manifest: Dict[str, Any]):
        self.root = root
        self.manifest = manifest
        self.entries = {e["path"]: e for e in manifest["files"]}

    @property
    def cpu_model(self) -> str:
        return self.manifest["models"]["cpu"]

    @property
    def edgetpu_model(self) -> Optional[str]:
        return self.manifest["models"].get("edgetpu")

    @property
    def labels(self) -> Optional[str]:
        return self.manifest.get("labels")

    @property
    def preprocess(self) -> Dict[str, Any]:
        return self.manifest["preprocess"]

    def path(self, rel: str) -> Path:
        return _inside(self.root, rel, "path")

    def verified(self, rel: str) -> Path:
        """The path of bundle file ``rel`` after checking its size and sha256 against the manifest."""
        entry = self.entries.get(rel)
        if entry is None:
            raise BundleError("%s: %s is not listed in the manifest's files" % (self.root, rel),
                              "rebuild the bundle with edgekit build")
        path = self.path(rel)
        if not path.is_file():
            raise BundleError("%s: %s is missing from the bundle" % (self.root, rel),
                              "copy the whole bundle folder, or rebuild it with edgekit build")
        size = path.stat().st_size
        digest = sha256_file(path)
        if digest != entry["sha256"] or size != entry["size_bytes"]:
            raise BundleError("%s: %s has changed since the bundle was built (sha256 %s..., manifest says %s...)"
                              % (self.root, rel, digest[:12], str(entry["sha256"])[:12]),
                              "copy the bundle again or rebuild it with edgekit build; edited bundles are refused")
        return path

    def verify_all(self) -> None:
        for rel in self.entries:
            self.verified(rel)


def _check_manifest(root: Path, m: Any) -> Dict[str, Any]:
    def bad(why: str) -> BundleError:
        return BundleError("%s: not a valid %s manifest: %s" % (root / MANIFEST_NAME, FORMAT, why),
                           "rebuild the bundle with edgekit build")

    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise bad("'format' is not %r" % FORMAT)
    version = m.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise bad("'format_version' is not a positive integer")
    if version > FORMAT_VERSION:
        raise BundleError("%s: bundle format version %d is newer than this edgekit reads (%d)"
                          % (root, version, FORMAT_VERSION), "update edgekit")
    files = m.get("files")
    if not isinstance(files, list):
        raise bad("'files' is not a list")
    seen = set()
    for e in files:
        if not (isinstance(e, dict) and isinstance(e.get("sha256"), str) and isinstance(e.get("size_bytes"), int)
                and not isinstance(e.get("size_bytes"), bool)):
            raise bad("each 'files' entry needs path, sha256 and size_bytes")
        _inside(root, e.get("path"), "file")
        if e["path"] in seen or e["path"] == MANIFEST_NAME:
            raise bad("file %r is listed twice, or is the manifest itself" % e["path"])
        seen.add(e["path"])
    models = m.get("models")
    if not isinstance(models, dict) or not models.get("cpu"):
        raise bad("'models' has no 'cpu' model")
    named = [("model", models["cpu"])]
    if models.get("edgetpu") is not None:
        named.append(("model", models["edgetpu"]))
        if models["edgetpu"] != str(models["cpu"])[:-len(".tflite")] + EDGETPU_SUFFIX or \
                not str(models["cpu"]).endswith(".tflite"):
            raise bad("the Edge TPU model must be named after the CPU model (x.tflite, x%s)" % EDGETPU_SUFFIX)
    if m.get("labels") is not None:
        named.append(("labels", m["labels"]))
    for what, rel in named:
        _inside(root, rel, what)
        if rel not in seen:
            raise bad("%s %r is not listed in 'files'" % (what, rel))
    if not isinstance(m.get("preprocess"), dict):
        raise bad("'preprocess' is not an object")
    return m


def load(path: Union[str, os.PathLike]) -> Bundle:
    """Read and check a bundle's manifest (format, every path inside the folder); files are verified on use."""
    root = Path(path)
    manifest_path = _inside(root, MANIFEST_NAME, "file") if root.is_dir() else root / MANIFEST_NAME
    if not root.is_dir():
        raise BundleError("%s: no such bundle folder" % root, "pass the folder edgekit build wrote")
    if not manifest_path.is_file():
        raise BundleError("%s: not a bundle (no %s)" % (root, MANIFEST_NAME), "pass the folder edgekit build wrote")
    try:
        m = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise BundleError("%s: manifest is not valid JSON (%s)" % (manifest_path, exc),
                          "rebuild the bundle with edgekit build") from None
    return Bundle(root, _check_manifest(root, m))


def make_manifest(*, models: Dict[str, Optional[str]], labels: Optional[str], preprocess: Dict[str, Any],
                  input: Dict[str, Any], versions: Dict[str, Optional[str]], reports: Dict[str, Any],
                  accuracy: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The manifest fields but ``files`` (which :func:`write_bundle` fills in from what it writes)."""
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "created": utc_now(),
            "models": {"cpu": models["cpu"], "edgetpu": models.get("edgetpu")}, "labels": labels, "files": [],
            "preprocess": preprocess, "input": input, "versions": versions,
            "reports": {"check": reports.get("check"), "compile": reports.get("compile")}, "accuracy": accuracy}


def check_target(target: Union[str, os.PathLike]) -> None:
    """Refuse an output that exists and is not a bundle, or whose folder is missing (before any slow work)."""
    target = Path(target)
    if target.exists() or target.is_symlink():
        if target.is_symlink() or not is_bundle(target):
            raise _UsageErrorBase("output %s exists and is not an edgekit bundle" % target,
                                  "choose a new folder with -o (an existing bundle is replaced, nothing else is)")
    if not target.parent.is_dir():
        raise BundleError("output folder %s does not exist" % target.parent, "create it first or choose another -o")


def _folder_mode() -> int:
    """The mode a new folder gets under the user's umask (0o777 & ~umask), as mkdir would give it."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o777 & ~mask


@contextlib.contextmanager
def _swap_guard(folder: Path) -> Iterator[None]:
    """Stop signals held and ``folder`` locked while a bundle is swapped.

    The twin of :func:`edgekit.fileio.renames_together` (this file must stand alone on a board, so it
    imports nothing from edgekit but errors): in the main thread SIGINT/SIGTERM/SIGHUP only get noted,
    whatever threads TensorFlow has started, then the previous handlers come back and what arrived is
    sent again; an exclusive flock on the folder keeps two builds from interleaving their swaps.
    """
    arrived = []  # type: List[int]
    previous = {}  # type: Dict[int, Any]
    fd = None
    try:
        if threading.current_thread() is threading.main_thread():
            for name in ("SIGINT", "SIGTERM", "SIGHUP"):
                sig = getattr(signal, name, None)
                handler = signal.getsignal(sig) if sig is not None else None
                if handler is not None and handler != signal.SIG_IGN:
                    previous[sig] = handler
                    signal.signal(sig, lambda signum, _frame: arrived.append(signum))
        try:
            import fcntl
        except ImportError:  # Windows: no flock
            pass
        else:
            fd = os.open(str(folder), os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        if fd is not None:
            os.close(fd)  # releases the lock
        late = None
        for sig, handler in previous.items():
            while True:  # signal.signal() first runs what is pending: the noting lambda, or a handler put back
                try:
                    signal.signal(sig, handler)
                    break
                except BaseException as exc:
                    late = late or exc
        send = getattr(signal, "raise_signal", None) or (lambda sig: os.kill(os.getpid(), sig))  # 3.8+, or 3.7
        for sig in dict.fromkeys(arrived):
            send(sig)  # as usual now: KeyboardInterrupt, edgekit's stop, or the default action
        if late is not None:
            raise late


def write_bundle(target: Union[str, os.PathLike], sources: Dict[str, Union[str, os.PathLike, bytes]],
                 manifest: Dict[str, Any]) -> Path:
    """Write a bundle folder at ``target`` all at once: ``sources`` maps bundle paths to files or bytes.

    The folder is built in a temporary folder beside ``target`` and renamed into place. An existing
    bundle at ``target`` is replaced; anything else there (a file, a folder that is not a bundle) is
    refused, so a wrong ``-o`` never deletes a user's folder. The swap (old bundle aside, new one in)
    runs with stop signals held and the folder locked, and the old bundle is put back on any failure:
    it is deleted only once the new one is in place. Files and folder get the modes the umask gives.
    """
    target = Path(target)
    check_target(target)
    parent = target.parent
    try:
        tmp = Path(tempfile.mkdtemp(prefix=".%s." % target.name, suffix=".tmp", dir=str(parent)))
    except OSError as exc:
        raise BundleError("cannot write in output folder %s (%s)" % (parent, exc.strerror or exc),
                          "choose another -o") from None
    old = None
    replaced = False
    try:
        entries = []
        for rel, src in sources.items():
            dest = _inside(tmp, rel, "file")
            dest.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(src, bytes):
                dest.write_bytes(src)
            else:
                shutil.copyfile(str(src), str(dest))  # created under the umask, as write_bytes
            entries.append({"path": rel, "sha256": sha256_file(dest), "size_bytes": dest.stat().st_size})
        doc = dict(manifest, files=sorted(entries, key=lambda e: e["path"]))
        _check_manifest(tmp, doc)  # never write a bundle that load() would refuse
        (tmp / MANIFEST_NAME).write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n", encoding="utf-8")
        os.chmod(str(tmp), _folder_mode())  # mkdtemp made it 0700
        with _swap_guard(parent):
            check_target(target)  # again, under the lock: still nothing but a bundle is replaced
            if target.exists():
                old = Path(tempfile.mkdtemp(prefix=".%s." % target.name, suffix=".old", dir=str(parent)))
                os.replace(str(target), str(old / "bundle"))
            try:
                os.replace(str(tmp), str(target))
            except BaseException:
                if old is not None:
                    os.replace(str(old / "bundle"), str(target))  # put the previous bundle back
                raise
            replaced = True
    except OSError as exc:
        hint = "choose another -o"
        if old is not None and not replaced and (old / "bundle").exists():  # even putting it back failed
            hint = "the previous bundle is in %s: move it back" % (old / "bundle")
        raise BundleError("cannot write bundle %s (%s)" % (target, exc.strerror or exc), hint) from None
    finally:
        shutil.rmtree(str(tmp), ignore_errors=True)
        if old is not None and (replaced or not (old / "bundle").exists()):
            shutil.rmtree(str(old), ignore_errors=True)  # never the previous bundle while it is all there is
    return target
