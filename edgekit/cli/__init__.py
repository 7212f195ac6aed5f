"""The ``edgekit`` command line: the click group (``app``), the fast path (``base``), the commands (``commands``)
and the generated docs tables (``docs``). Options are declared once, in :mod:`edgekit.flags`.

:func:`main` is the console script (``edgekit.cli:main``, ``python -m edgekit``): a plain command line of a runtime
command runs on the fast path (:func:`edgekit.cli.base.parse`), without importing click; anything else is parsed by
the click group, :data:`edgekit.cli.app.cli` (which holds every command: tests and the docs generator use it).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any


class _Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised like Ctrl-C so the same cleanups run (temporary files, the compiler's group)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_stopped(signum: int, _frame: Any) -> None:
    raise _Stopped(signum)


def _stop_like_ctrl_c() -> None:
    """SIGTERM and SIGHUP stop a run as Ctrl-C does (a SIGHUP ignored by nohup stays ignored)."""
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _raise_stopped)


def _fill_closed_std_fds() -> None:
    """A closed standard descriptor (``>&-``) gets /dev/null, as OpenSSH's sanitise_stdfd does: else the next file
    edgekit or a child opens would take its number and receive what is written to standard output or error.
    Python already set ``sys.stdout`` (``sys.stderr``) to None for it, so a write to it still fails (exit 1)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                null = os.open(os.devnull, os.O_RDWR)
            except OSError:
                return
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def main(argv=None):
    """The ``edgekit`` console script: each command registered (:mod:`edgekit.cli.commands`), then the fast path or
    click."""
    from edgekit.cli import base, commands  # noqa: F401 (commands: registers each command's run in base.RUNS)

    _fill_closed_std_fds()
    _stop_like_ctrl_c()
    parsed = base.parse(sys.argv[1:] if argv is None else list(argv))
    if parsed is not None:  # a plain command line of a runtime command: no click (start-up, issue 25)
        base.run(*parsed)
    from edgekit.cli.app import cli

    cli.main(args=argv, prog_name="edgekit")
