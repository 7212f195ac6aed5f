"""Keep TensorFlow's log noise off the terminal, and import TensorFlow only when a command needs it.

TensorFlow and Keras write to stdout ("Saved artifact at ...") and stderr (absl and C++ logs, some
of which ignore TF_CPP_MIN_LOG_LEVEL in 2.21), so :func:`silenced` redirects file descriptors 1
and 2 (and ``sys.stdout``/``sys.stderr``) into a temporary log while it runs. It yields the real
stderr so progress bars still reach the user. With ``verbose=True`` nothing is hidden, but what
TensorFlow writes to stdout goes to stderr, so that stdout holds only the command's output.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator
from typing import Any, TextIO

from edgekit.errors import MissingDependencyError


class CapturedLog:
    """What TensorFlow printed while silenced (text), for error messages."""

    def __init__(self) -> None:
        self.text = ""

    def error_lines(self, limit: int = 3) -> list[str]:
        """The last few lines that look like errors."""
        keys = ("error", "Error", "failed", "not supported", "unsupported")
        lines = [ln.strip() for ln in self.text.splitlines() if any(k in ln for k in keys)]
        return lines[-limit:]


@contextlib.contextmanager
def silenced(verbose: bool = False) -> Iterator[tuple[TextIO, CapturedLog]]:
    """Run a block with stdout/stderr (fds and Python streams) captured; yield (real stderr, log)."""
    log = CapturedLog()
    if verbose:  # show everything, but on stderr: stdout carries the command's own output (--json)
        with _stdout_to_stderr():
            yield sys.stderr, log
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    real_err_fd = None
    saved: list[tuple[int, int]] = []
    tmp = tempfile.TemporaryFile(mode="w+b")
    real_err: TextIO = sys.stderr
    sink = None
    try:
        for fd in (1, 2):
            try:
                saved.append((fd, os.dup(fd)))
            except OSError:
                continue
        if any(fd == 2 for fd, _ in saved):
            real_err_fd = os.dup(dict(saved)[2])
            real_err = io.TextIOWrapper(os.fdopen(real_err_fd, "wb", buffering=0), write_through=True)
        for fd, _ in saved:
            os.dup2(tmp.fileno(), fd)
        sink = io.TextIOWrapper(os.fdopen(os.dup(tmp.fileno()), "wb", buffering=0), write_through=True)
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield real_err, log
    finally:
        if sink is not None:
            sink.close()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        for fd, copy in saved:
            os.dup2(copy, fd)
            os.close(copy)
        if real_err is not sys.stderr:
            with contextlib.suppress(Exception):
                real_err.close()
        tmp.seek(0)
        log.text = tmp.read().decode("utf-8", "replace")
        tmp.close()


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    try:
        saved = os.dup(1)
    except OSError:
        saved = None
    if saved is not None:
        os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def import_tensorflow(verbose: bool = False) -> Any:
    """Import TensorFlow quietly (TF_CPP_MIN_LOG_LEVEL set first) or raise MissingDependencyError."""
    if not verbose:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    try:
        with silenced(verbose):
            import tensorflow as tf

            if not verbose:
                tf.get_logger().setLevel(logging.ERROR)
                logging.getLogger("absl").setLevel(logging.ERROR)
    except ImportError as exc:
        raise MissingDependencyError(
            f"TensorFlow is needed to train, read or quantize Keras models ({exc})",
            "pip install 'tensorflow-cpu==2.21.*', or pip install '.[convert]' in an edgekit"
            " checkout; PyPI's 'edgekit' is another project",
        ) from None
    return tf
