"""The click-free half of the command line: the command registry, output, the error line, and the fast parse.

A one-image ``edgekit classify`` should cost about what the script it replaces costs (issue 25), and
importing click costs more than all of edgekit's own modules on that path. So a command line made only of
a runtime command's declared arguments and options (:mod:`edgekit.flags`) in their plain forms
(``--flag value``, ``--flag=value``, ``-f value``, ``--switch``), each value one its declared type takes
as it is, is turned here into the keywords click would give (:func:`parse`), and the command runs without
click. Anything else (``--help``, an unknown, repeated or attached option, a value click would refuse or
convert, a value starting with ``-``, shell completion) returns None and click parses it
(:mod:`edgekit.cli.app`), saying what is wrong exactly as before. tests/test_cli.py checks that both give
the same keywords. Both run the command through :func:`guarded`: one error line and its exit code.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from edgekit import flags
from edgekit.errors import EdgekitError, InputError, InternalError, regular_file, shown

#: Each subcommand's function, registered by :func:`command` (edgekit.cli.commands); its click command is made on first use.
RUNS: dict[str, Callable[..., None]] = {}

#: The commands whose plain command lines skip click: those that run a model, where start-up shows.
FAST_COMMANDS = frozenset({"classify", "detect", "benchmark", "inspect"})

#: A parsed value: text or a path, a number, a switch, an option left out, or the images of ``IMAGES...``.
Value = str | int | float | bool | None | tuple[str, ...]

_INT = re.compile(r"-?[0-9]+")
_FLOAT = re.compile(r"-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?")


def command(name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register a function as the subcommand ``name``; each keyword it takes is one of the arguments and options
    :data:`edgekit.flags.COMMANDS` declares for ``name``."""

    def register(fn: Callable[..., None]) -> Callable[..., None]:
        RUNS[name] = fn
        return fn

    return register


# ------------------------------------------------------------------------------------------ output
def _write(message: Any, err: bool, **kwargs: Any) -> None:
    """click.echo, or where click was not imported (a command line :func:`parse` took, on streams it checked)
    what click.echo does with a line of text there: write it and a newline, then flush."""
    if "click" in sys.modules or kwargs or not isinstance(message, str):
        import click

        click.echo(message, err=err, **kwargs)
        return
    stream = sys.stderr if err else sys.stdout
    if stream is None:  # as click: nowhere to write
        return
    stream.write(message + "\n")  # no ANSI code to strip: every line went through shown()
    stream.flush()


def echo(message: Any = "", err: bool = False, **kwargs: Any) -> None:
    """click.echo with every line strict UTF-8 and nothing a terminal obeys but the newline (:func:`shown`): a file
    name that is not UTF-8 prints as \\xNN, never as a lone surrogate the terminal cannot show (or an encoding
    error), and an escape sequence from a model as \\x1b[..., never as a change of the terminal."""
    if not err and sys.stdout is None and kwargs.get("file") is None:  # edgekit started with stdout closed
        from edgekit.errors import OutputError

        raise OutputError(
            "cannot write to standard output (it is closed)",
            "run edgekit with its standard output open: redirect it to a file or /dev/null",
        )
    try:
        _write(shown(message, newlines=True) if isinstance(message, str) else message, err, **kwargs)
    except OSError as exc:  # a full disk or device behind > (/dev/full), a closed pipe
        if err:
            raise
        from edgekit.errors import OutputError

        raise OutputError(
            f"cannot write to standard output ({exc.strerror or exc})",
            "check where the output goes: the disk may be full, or the reader gone",
        ) from None


def debug_env() -> bool:
    """EDGEKIT_DEBUG set to anything but empty, 0, false, no or off."""
    return os.environ.get("EDGEKIT_DEBUG", "").strip().lower() not in ("", "0", "false", "no", "off")


def fail(exc: EdgekitError, debug: bool = False) -> None:
    """The one error line and the documented exit code; with debug, the traceback first (same exit code)."""
    if debug:
        import traceback

        traceback.print_exc(file=sys.stderr)
    echo(f"error: {shown(str(exc))}", err=True)  # one line, whatever names the message holds
    if getattr(exc, "hard_exit", False):  # threads that may never let the interpreter end, or a stdout whose
        for stream in (sys.stdout, sys.stderr):  # buffer would fail again at exit: go now
            try:
                if stream is not None:  # None: the stream was closed when edgekit started
                    stream.flush()
            except OSError:
                pass
        os._exit(exc.exit_code)
    sys.exit(exc.exit_code)


def guarded(
    run: Callable[[], Any], debug: Callable[[], bool], passthrough: tuple[type[BaseException], ...] = ()
) -> Any:
    """``run()``, every EdgekitError turned into one line on stderr and its exit code; anything else is a bug.
    ``passthrough``: exceptions left to the caller (click's own)."""
    import signal

    try:
        return run()
    except passthrough:
        raise
    except EdgekitError as exc:
        fail(exc, debug())
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP (edgekit.cli.commands._Stopped): cleanups have run
        signum = getattr(exc, "signum", signal.SIGINT)
        echo("interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}", err=True)
        sys.exit(128 + signum)
    except Exception as exc:  # a bug: say so, briefly
        from edgekit.errors import first_line

        fail(
            InternalError(
                f"internal error: {type(exc).__name__}: {first_line(exc)}",
                "this is a bug in edgekit; rerun with --debug and report the traceback",
            ),
            debug(),
        )


# -------------------------------------------------------------------------------------- fast parse
class _Declined(Exception):
    """Not a plain command line: click parses it."""


def _plain_streams() -> bool:
    """Standard output and error where click.echo writes a line as it is (no console or ASCII rewrapping)."""
    import codecs

    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None)
        if stream is None or not encoding or getattr(stream, "errors", None) is None:
            return False
        try:
            if codecs.lookup(encoding).name == "ascii":
                return False
        except LookupError:
            return False
    return True


def _path(kind: str, value: str, flag: str) -> str:
    """A path as click.Path (and edgekit.cli.app's FilePath / DirPath) takes it without a word, else declined."""
    import stat

    if kind in ("file", "dir"):
        try:
            regular_file(value, flag)
        except InputError:
            raise _Declined from None
    try:
        st = os.stat(value)
    except OSError:
        return value  # a path that need not exist (click.Path's exists=False)
    if (
        (kind == "file" and stat.S_ISDIR(st.st_mode))
        or (kind == "dir" and not stat.S_ISDIR(st.st_mode))
        or not os.access(value, os.R_OK)
    ):
        raise _Declined
    return value


def _value(p: Any, value: Any, flag: str = "") -> Any:
    """``value`` as click converts it for the declared argument or option ``p`` (a given string or the default)."""
    kind = p.type
    if kind == "text":
        return value
    if kind == "choice":
        if value not in p.choices:
            raise _Declined
        return value
    if kind in ("path", "file", "dir"):
        return _path(kind, value, flag)
    if kind not in ("int", "float"):
        raise _Declined
    if isinstance(value, str) and not (_INT if kind == "int" else _FLOAT).fullmatch(value):
        raise _Declined
    try:
        number = int(value) if kind == "int" else float(value)
    except ValueError:  # an integer past Python's 4,300 digits: click refuses it (exit 2)
        raise _Declined from None
    low, high = getattr(p, "minimum", None), getattr(p, "maximum", None)
    if (low is not None and (number < low or (p.minimum_open and number == low))) or (
        high is not None and number > high
    ):
        raise _Declined
    if kind == "float" and (low is not None or high is not None) and not math.isfinite(number):  # 1e999 (click: exit 2)
        raise _Declined
    return number


def _tokens(declared: tuple[Any, ...], argv: list) -> tuple[dict[str, Value], list]:
    """The options given (name -> converted value) and the positional arguments of a plain command line."""
    by_flag = {f: p for p in declared if isinstance(p, flags.Option) for f in p.flags}
    given: dict[str, Value] = {}
    positional = []
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if not token.startswith("-"):
            positional.append(token)
            continue
        flag, eq, value = token.partition("=") if token.startswith("--") else (token, "", "")
        p = by_flag.get(flag)
        if p is None or p.name in given or p.multiple:
            raise _Declined
        if p.type == "flag":
            if eq:
                raise _Declined
            given[p.name] = True
            continue
        if not eq:
            if i >= len(argv) or argv[i].startswith("-"):
                raise _Declined
            value, i = argv[i], i + 1
        given[p.name] = _value(p, value, flag)
    return given, positional


def _arguments(declared: tuple[Any, ...], positional: list) -> dict[str, Value]:
    """The positional arguments as click binds them (one argument: ``nargs`` 1, or -1 for one or more)."""
    arguments = [p for p in declared if isinstance(p, flags.Argument)]
    if not arguments:
        if positional:
            raise _Declined
        return {}
    if len(arguments) > 1:
        raise _Declined
    arg = arguments[0]
    if (arg.nargs == 1 and len(positional) != 1) or (arg.nargs == -1 and not positional) or arg.nargs not in (1, -1):
        raise _Declined
    values = tuple(_value(arg, v) for v in positional)
    return {arg.name: values if arg.nargs == -1 else values[0]}


def parse(argv: list) -> tuple[str, dict[str, Value]] | None:
    """(command, the keywords click would call it with) for a plain command line of a runtime command, else None."""
    if (
        not argv
        or argv[0] not in FAST_COMMANDS
        or argv[0] not in RUNS
        or os.name == "nt"
        or "_EDGEKIT_COMPLETE" in os.environ
        or not _plain_streams()
    ):
        return None
    declared = flags.COMMANDS[argv[0]]
    try:
        given, positional = _tokens(declared, argv[1:])
        keywords = _arguments(declared, positional)
        for p in declared:
            if isinstance(p, flags.Option):
                if p.name in given:
                    keywords[p.name] = given[p.name]
                elif p.required:
                    raise _Declined
                else:
                    keywords[p.name] = (
                        False if p.type == "flag" else None if p.default is None else _value(p, p.default)
                    )
    except _Declined:
        return None
    return argv[0], {p.name: keywords[p.name] for p in declared}


def run(name: str, keywords: dict[str, Value]) -> None:
    """Run a command :func:`parse` took, as click's main would (exit 0 after it, 1 on a closed pipe)."""
    import errno

    try:
        guarded(lambda: RUNS[name](**keywords), debug_env)
    except OSError as exc:  # writing the error line itself failed
        if exc.errno != errno.EPIPE:
            raise
        from click.utils import _PacifyFlushWrapper

        sys.stdout = _PacifyFlushWrapper(sys.stdout)
        sys.stderr = _PacifyFlushWrapper(sys.stderr)
        sys.exit(1)
    sys.exit(0)
