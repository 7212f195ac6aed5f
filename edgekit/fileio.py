"""Nothing half-written: outputs go to temporary files in the target folder and are renamed into place.

A run with several outputs (quantize's model and record, compile's models and logs) publishes them
together: every file is written first, then all are renamed under a lock on their folder, with
SIGINT/SIGTERM/SIGHUP held back meanwhile, so a run leaves all its outputs or none, and two runs
writing the same outputs cannot leave a mix of both. Files get the mode the user's umask gives.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from edgekit.errors import InputError, UsageError

STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


def refuse_overwriting_input(output: str | os.PathLike, *inputs: str | os.PathLike) -> None:
    """Raise UsageError when ``output`` is (the same file as) one of ``inputs``."""
    out = Path(output)
    for i in inputs:
        src = Path(i)
        same = out.resolve() == src.resolve() or (out.exists() and src.exists() and os.path.samefile(out, src))
        if same:
            raise UsageError(f"output {out} would overwrite the input {src}", "choose another output path with -o")


def require_output_folder(target: str | os.PathLike, report: Any = None, flag: str = "-o") -> Path:
    """The folder ``target`` will be written in, created (and ``report`` told) when it is missing.

    Meant to be called before slow work, so a wrong ``-o`` fails at once: InputError when the folder
    cannot be created or written in (its hint names ``flag``, the option that chose it). Writability
    is probed by creating a temporary file (permission bits alone say nothing for root or a read-only
    mount).
    """
    folder = Path(target).parent
    if not folder.is_dir():
        if folder.exists() or folder.is_symlink():
            raise InputError(f"output folder {folder} is not a folder", f"choose another {flag}")
        try:
            folder.mkdir(parents=True)
        except OSError as exc:
            raise InputError(
                f"cannot create output folder {folder} ({exc.strerror or exc})",
                f"create it yourself or choose another {flag}",
            ) from None
        if report is not None:
            report.note(f"created output folder {folder}")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise InputError(
            f"cannot write in output folder {folder} ({exc.strerror or exc})", f"choose another {flag}"
        ) from None
    return folder


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode a new file gets under the user's umask (0o666 & ~umask), as open() would give it."""
    return 0o666 & ~_umask()


def folder_mode() -> int:
    """The mode a new folder gets under the user's umask (0o777 & ~umask), as mkdir would give it."""
    return 0o777 & ~_umask()


def refuse_folders(targets: Sequence[Path]) -> None:
    """InputError when an output path is taken by a folder (renaming a file onto it would fail)."""
    for t in targets:
        if t.is_dir():
            raise InputError(
                f"cannot write {t}: a folder of that name is in the way",
                "move or remove that folder, or choose another -o",
            )


@contextlib.contextmanager
def _folder_lock(folders: Sequence[Path]) -> Iterator[None]:
    """An exclusive flock on each folder (sorted, so two runs cannot deadlock); none where unsupported."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock; renames are still atomic one by one
        yield
        return
    fds = []
    try:
        for folder in sorted({f.resolve() for f in folders}):
            fd = os.open(folder, os.O_RDONLY)
            fds.append(fd)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        for fd in fds:
            os.close(fd)  # closing releases the lock


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT/SIGTERM/SIGHUP wait until the block ends (then act as usual): renames are not cut in half.

    Blocking them with ``pthread_sigmask`` is not enough: the mask is per thread, TensorFlow has
    started threads of its own, and the kernel hands a process-directed signal to one of those;
    Python then runs the handler in the main thread at its next bytecode, between two renames. So
    in the main thread, each stop signal gets a handler that only notes it; afterwards the previous
    handlers are put back and what arrived is raised again. A signal whose handler was ignored, or
    set outside Python, is left alone. Called from another thread (where handlers cannot be
    changed), Python's handlers still run in the main thread only, never cutting this thread's
    renames; the signals are blocked in this thread as before.
    """
    if threading.current_thread() is not threading.main_thread():
        old_mask = (
            signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS) if hasattr(signal, "pthread_sigmask") else None
        )
        try:
            yield
        finally:
            if old_mask is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        return
    arrived: list[int] = []

    def note(signum: int, _frame: Any) -> None:
        arrived.append(signum)

    previous = {}
    try:
        for sig in STOP_SIGNALS:
            handler = signal.getsignal(sig)
            if handler is None or handler == signal.SIG_IGN:
                continue
            previous[sig] = handler
            signal.signal(sig, note)
        yield
    finally:
        late: BaseException | None = None
        pending = list(previous.items())
        while pending:  # a handler put back may run at any bytecode of this loop, not only in signal.signal()
            try:
                while pending:
                    signal.signal(*pending[0])
                    pending.pop(0)
            except BaseException as exc:  # a stop that came after its handler was back: raised below
                late = late or exc
        for sig in dict.fromkeys(arrived):
            signal.raise_signal(sig)  # as usual now: KeyboardInterrupt, edgekit's stop, or the default action
        if late is not None:
            raise late


@contextlib.contextmanager
def renames_together(folders: Sequence[Path]) -> Iterator[None]:
    """Lock ``folders`` (sorted), then hold stop signals, for a group of renames that must not be cut or mixed.

    The lock first: a run waiting for another's lock can still be stopped.
    """
    with _folder_lock(folders), signals_held():
        yield


def publish(sources: Sequence[Path], targets: Sequence[Path]) -> None:
    """Rename every ``sources[i]`` onto ``targets[i]`` (same filesystem), all or none.

    Under a lock on the target folders, with stop signals held. A target taken by a folder is refused
    before anything moves; if a rename still fails, the targets already renamed are removed.
    """
    targets = [Path(t) for t in targets]
    mode = file_mode()
    with renames_together([t.parent for t in targets]):
        refuse_folders(targets)
        done: list[Path] = []
        try:
            for src, dst in zip(sources, targets):
                os.chmod(src, mode)
                os.replace(src, dst)
                done.append(dst)
        except OSError as exc:
            for d in done:
                d.unlink(missing_ok=True)
            raise InputError(f"cannot write {dst} ({exc.strerror or exc})", "choose another -o") from None


@contextlib.contextmanager
def atomic_paths(*targets: str | os.PathLike) -> Iterator[list[Path]]:
    """Yield one temporary path beside each target; on success :func:`publish` them all, else remove them."""
    paths = [Path(t) for t in targets]
    for t in paths:
        require_output_folder(t)
    refuse_folders(paths)
    tmps: list[Path] = []
    try:
        for t in paths:
            fd, tmp = tempfile.mkstemp(prefix=f".{t.name}.", suffix=".tmp", dir=t.parent)
            os.close(fd)
            tmps.append(Path(tmp))
        yield tmps
        publish(tmps, paths)
    except OSError as exc:  # disk full while writing, ...: the user's to fix, not a bug
        raise InputError(
            f"cannot write {', '.join(str(p) for p in paths)} ({exc.strerror or exc})",
            "free some space or choose another -o",
        ) from None
    finally:
        for made in tmps:
            made.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success rename it onto ``target``, else remove it."""
    with atomic_paths(target) as (tmp,):
        yield tmp


def write_bytes_atomic(target: str | os.PathLike, data: bytes) -> Path:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)
    return Path(target)


def write_all_atomic(files: dict[Path, bytes]) -> None:
    """Write every ``{target: bytes}`` together: all of them end up in place, or none."""
    with atomic_paths(*files) as tmps:
        for tmp, data in zip(tmps, files.values()):
            tmp.write_bytes(data)
