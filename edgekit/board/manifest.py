"""The deployable bundle: a folder with ``manifest.json``, the CPU int8 model, the compiled model, labels.

``manifest.json`` (format ``edgekit-bundle``, version 1)::

    {"format": "edgekit-bundle", "format_version": 1, "created": "<ISO-8601 UTC>",
     "models": {"cpu": "<file>.tflite", "edgetpu": "<file>_edgetpu.tflite" or null},
     "labels": "labels.txt" or null,
     "files": [{"path": "<relative posix path>", "sha256": "<hex>", "size_bytes": N}, ...],
     "source": {"model": "<file name>", "format": "...", "output": <the output chosen> or null} or null,
     "preprocess": <PreprocessSpec.to_dict(), as edgekit/tflite/model_record.py records it>,
     "input": {"shape": [1, H, W, C], "dtype": "uint8" | "int8", "scale": s, "zero_point": z},
     "versions": {"edgekit": "...", "tensorflow": "..." or null, "edgetpu_compiler": "..." or null},
     "reports": {"check": <check --json>, "compile": <compile report> or null},
     "accuracy": <evaluate document> or null}

``files`` lists every file of the bundle but ``manifest.json``. Every path is relative, POSIX, inside
the bundle (no ``..``, not absolute, no symlink leading out); a manifest that breaks this is refused
before anything is read, and a file whose sha256 differs from its entry is refused when it is
verified (:meth:`Bundle.verified`). :func:`edgekit.pipeline.build.write_bundle` (host only) makes the whole folder
appear at once, from a typed :class:`edgekit.results.build.BundleManifest`; on the board, a manifest is
read as the raw JSON it is, checked (:func:`check_manifest`), then read through :class:`Bundle`.

Standard library only (and Python 3.7 syntax), so that a runner on a Coral board that cannot import
edgekit can copy this one file; inside edgekit its errors are :class:`edgekit.errors.InputError` (exit 3).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Union

if TYPE_CHECKING:
    from edgekit.board.preprocess import PreprocessSpec

try:
    from edgekit.errors import InputError as _BundleErrorBase
except ImportError:  # copied alone onto a board without edgekit

    class _BundleErrorBase(Exception):  # type: ignore[no-redef]
        exit_code = 3

        def __init__(self, message: str, hint: Optional[str] = None):
            super().__init__(message)
            self.message, self.hint = message, hint

        def __str__(self) -> str:
            return "%s (%s)" % (self.message, self.hint) if self.hint else self.message


FORMAT = "edgekit-bundle"
FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
LABELS_NAME = "labels.txt"
EDGETPU_SUFFIX = "_edgetpu.tflite"
_SHA256 = re.compile(r"[0-9a-f]{64}")


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


def inside(root: Path, rel: Any, what: str) -> Path:
    """``root / rel`` after checking that ``rel`` is a relative POSIX path that stays inside ``root``."""
    if not isinstance(rel, str) or not rel or "\\" in rel or "\x00" in rel:
        raise BundleError(
            "%s: manifest %s %r is not a relative POSIX path" % (root, what, rel),
            "rebuild the bundle with edgekit build",
        )
    pure = PurePosixPath(rel)
    if pure.is_absolute() or ".." in pure.parts or rel.startswith("~") or (len(rel) > 1 and rel[1] == ":"):
        raise BundleError(
            "%s: manifest %s %r points outside the bundle" % (root, what, rel),
            "a bundle may only name files inside its own folder; rebuild it with edgekit build",
        )
    if any(part in ("", ".") for part in rel.split("/")):
        # one spelling per file: '.', 'a/./b', 'a//b' and 'labels.txt/' name the folder itself or a file under
        # a second name ('./manifest.json' would pass as a file other than the manifest)
        raise BundleError(
            "%s: manifest %s %r is not a plain relative path (an empty or '.' part)" % (root, what, rel),
            "rebuild the bundle with edgekit build",
        )
    path = root.joinpath(*pure.parts)
    real_root = os.path.realpath(str(root))
    real = os.path.realpath(str(path))
    if os.path.commonpath([real_root, real]) != real_root:
        raise BundleError(
            "%s: manifest %s %r leads outside the bundle (through a symbolic link)" % (root, what, rel),
            "a bundle may only name files inside its own folder; rebuild it with edgekit build",
        )
    return path


@dataclass(frozen=True)
class FileEntry:
    """A file of the bundle: its relative POSIX path, sha256 and size."""

    path: str
    sha256: str
    size_bytes: int

    def to_dict(self) -> Dict[str, Union[str, int]]:
        return {"path": self.path, "sha256": self.sha256, "size_bytes": self.size_bytes}

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> FileEntry:
        """An entry :func:`check_manifest` has checked."""
        return cls(str(d["path"]), str(d["sha256"]), int(d["size_bytes"]))  # type: ignore[call-overload]


class Bundle:
    """A bundle folder whose manifest has been read and whose paths all stay inside it."""

    def __init__(self, root: Path, manifest: Dict[str, Any]):
        """``manifest``: the raw JSON of manifest.json, after :func:`check_manifest`."""
        self.root = root
        self.manifest = manifest
        self.entries = {e["path"]: FileEntry.from_dict(e) for e in manifest["files"]}

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
    def preprocess(self) -> Optional[PreprocessSpec]:
        """The recorded preprocessing (None for an empty one); a malformed one is an InputError (exit 3)."""
        from edgekit.board.preprocess import PreprocessSpec

        recorded = self.manifest["preprocess"]
        return PreprocessSpec.read(recorded) if recorded else None

    def path(self, rel: str) -> Path:
        return inside(self.root, rel, "path")

    def verified(self, rel: str) -> Path:
        """The path of bundle file ``rel`` after checking its size and sha256 against the manifest."""
        entry = self.entries.get(rel)
        if entry is None:
            raise BundleError(
                "%s: %s is not listed in the manifest's files" % (self.root, rel),
                "rebuild the bundle with edgekit build",
            )
        path = self.path(rel)
        if path.is_symlink():
            raise BundleError(
                "%s: %s is a symbolic link; a bundle holds its files themselves" % (self.root, rel),
                "copy the file in place of the link (cp --remove-destination TARGET LINK), or "
                "rebuild the bundle with edgekit build",
            )
        if not path.is_file():
            raise BundleError(
                "%s: %s is missing from the bundle" % (self.root, rel),
                "copy the whole bundle folder, or rebuild it with edgekit build",
            )
        size = path.stat().st_size
        digest = sha256_file(path)
        if digest != entry.sha256 or size != entry.size_bytes:
            raise BundleError(
                "%s: %s has changed since the bundle was built (sha256 %s..., manifest says %s...)"
                % (self.root, rel, digest[:12], entry.sha256[:12]),
                "copy the bundle again or rebuild it with edgekit build; edited bundles are refused",
            )
        return path

    def verify_all(self) -> None:
        for rel in self.entries:
            self.verified(rel)


def check_manifest(root: Path, m: Any) -> None:
    """Refuse (BundleError) a manifest document that is not one edgekit reads, or names a path leading out."""

    def bad(why: str) -> BundleError:
        return BundleError(
            "%s: not a valid %s manifest: %s" % (root / MANIFEST_NAME, FORMAT, why),
            "rebuild the bundle with edgekit build",
        )

    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise bad("'format' is not %r" % FORMAT)
    version = m.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise bad("'format_version' is not a positive integer")
    if version > FORMAT_VERSION:
        raise BundleError(
            "%s: bundle format version %d is newer than this edgekit reads (%d)" % (root, version, FORMAT_VERSION),
            "update edgekit",
        )
    files = m.get("files")
    if not isinstance(files, list):
        raise bad("'files' is not a list")
    seen = set()
    for e in files:
        if not (
            isinstance(e, dict)
            and isinstance(e.get("sha256"), str)
            and isinstance(e.get("size_bytes"), int)
            and not isinstance(e.get("size_bytes"), bool)
            and e["size_bytes"] >= 0
        ):
            raise bad("each 'files' entry needs path, sha256 and size_bytes")
        if not _SHA256.fullmatch(e["sha256"]):
            raise bad("file %r: 'sha256' is not 64 hex digits" % (e.get("path"),))
        path = inside(root, e.get("path"), "file")
        if path.is_dir() and not path.is_symlink():
            raise bad("file %r is a folder" % e["path"])
        if e["path"] in seen or e["path"] == MANIFEST_NAME:
            raise bad("file %r is listed twice, or is the manifest itself" % e["path"])
        seen.add(e["path"])
    models = m.get("models")
    if not isinstance(models, dict) or not models.get("cpu"):
        raise bad("'models' has no 'cpu' model")
    named = [("model", models["cpu"])]
    if models.get("edgetpu") is not None:
        named.append(("model", models["edgetpu"]))
        if models["edgetpu"] != str(models["cpu"])[: -len(".tflite")] + EDGETPU_SUFFIX or not str(
            models["cpu"]
        ).endswith(".tflite"):
            raise bad("the Edge TPU model must be named after the CPU model (x.tflite, x%s)" % EDGETPU_SUFFIX)
    if m.get("labels") is not None:
        named.append(("labels", m["labels"]))
    for what, rel in named:
        inside(root, rel, what)
        if rel not in seen:
            raise bad("%s %r is not listed in 'files'" % (what, rel))
    if not isinstance(m.get("preprocess"), dict):
        raise bad("'preprocess' is not an object")


def _no_constant(name: str) -> Any:
    """json's ``parse_constant``: NaN, Infinity and -Infinity are not JSON (Python's json reads them by default)."""
    raise ValueError("%s is not a JSON number" % name)


def load(path: Union[str, os.PathLike]) -> Bundle:
    """Read and check a bundle's manifest (format, every path inside the folder); files are verified on use."""
    root = Path(path)
    manifest_path = inside(root, MANIFEST_NAME, "file") if root.is_dir() else root / MANIFEST_NAME
    if not root.is_dir():
        raise BundleError("%s: no such bundle folder" % root, "pass the folder edgekit build wrote")
    if not manifest_path.is_file():
        raise BundleError("%s: not a bundle (no %s)" % (root, MANIFEST_NAME), "pass the folder edgekit build wrote")
    if manifest_path.is_symlink():
        raise BundleError(
            "%s: %s is a symbolic link; a bundle holds its files themselves" % (root, MANIFEST_NAME),
            "copy the bundle folder again (cp -rL), or rebuild it with edgekit build",
        )
    try:
        m = json.loads(manifest_path.read_text(encoding="utf-8"), parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BundleError(
            "%s: manifest is not valid JSON (%s)" % (manifest_path, exc), "rebuild the bundle with edgekit build"
        ) from None
    except RecursionError:
        raise BundleError(
            "%s: manifest is nested too deeply to be read" % manifest_path, "rebuild the bundle with edgekit build"
        ) from None
    check_manifest(root, m)
    return Bundle(root, m)
