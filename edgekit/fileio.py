"""Nothing half-written: outputs go to a temporary file in the target folder and are renamed into place."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator

from edgekit.errors import InputError, UsageError


def refuse_overwriting_input(output: str | os.PathLike, *inputs: str | os.PathLike) -> None:
    """Raise UsageError when ``output`` is (the same file as) one of ``inputs``."""
    out = Path(output)
    for i in inputs:
        src = Path(i)
        same = out.resolve() == src.resolve() or (out.exists() and src.exists() and os.path.samefile(out, src))
        if same:
            raise UsageError(f"output {out} would overwrite the input {src}", "choose another output path with -o")


def require_output_folder(target: str | os.PathLike) -> Path:
    """The folder ``target`` will be written in; InputError when it is missing or not writable.

    Meant to be called before slow work, so a wrong ``-o`` fails at once. Writability is probed by
    creating a temporary file (permission bits alone say nothing for root or a read-only mount).
    """
    folder = Path(target).parent
    if not folder.is_dir():
        raise InputError(f"output folder {folder} does not exist", "create it first or choose another -o")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise InputError(f"cannot write in output folder {folder} ({exc.strerror or exc})",
                         "choose another -o") from None
    return folder


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success rename it onto ``target``, else remove it."""
    target = Path(target)
    folder = require_output_folder(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, 0o644)
        os.replace(tmp_path, target)
    except OSError as exc:  # disk full, target is a folder, ...: the user's to fix, not a bug
        raise InputError(f"cannot write {target} ({exc.strerror or exc})", "choose another -o") from None
    finally:
        tmp_path.unlink(missing_ok=True)


def write_bytes_atomic(target: str | os.PathLike, data: bytes) -> Path:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)
    return Path(target)
