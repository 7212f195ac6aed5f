"""One exception family for everything a user can cause.

Each error carries a message (what is wrong), an optional hint (what to do) and an exit code.
The CLI prints ``error: <message> (<hint>)`` as one line on stderr and exits with the code;
anything else escaping a command is a bug and becomes :class:`InternalError`.

Exit codes (documented in the README):

====  ============================================================
0     success
1     generic failure
2     usage error (bad flag or argument value)
3     bad input: file missing or unreadable, not a valid model or image
4     a required tool or package is missing (TensorFlow, edgetpu_compiler, ...)
5     conversion failed
6     verification failed (int8 disagrees with float or loses accuracy; preprocessing not established)
7     the model is not (fully) Edge TPU compatible (``check --strict``)
8     the Edge TPU compiler failed or timed out
9     device or runtime failure (delegate, interpreter, invoke)
10    ``benchmark --compare``: slower than the saved run by more than allowed
70    internal error (a bug in edgekit: please report it with ``--debug``)
====  ============================================================
"""

from __future__ import annotations

import re

# What libedgetpu says when a model was compiled for a newer runtime than its own (edgetpu.md §3):
# read by `classify` (the delegate's error) and by `compile` (the compiler's own output) alike.
RUNTIME_MISMATCH = re.compile(
    r"requires runtime version \((?P<need>\d+)\), which is newer than this runtime version "
    r"\((?P<have>\d+)\)"
)


class Caution(str):
    """A kept message for the user that is a warning (shown as ``warning: ...``); plain strings are notes."""


class EdgekitError(Exception):
    """Base class: an error a user can act on."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class OutputError(EdgekitError):
    """Standard output cannot be written (a full disk, /dev/full, a closed pipe): exit 1, straight away."""

    exit_code = 1
    hard_exit = True  # its unwritten buffer would fail again when Python exits


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of an exception's text (its type name when it has none), for one-line messages."""
    text = str(exc).strip()
    return text.splitlines()[0][:limit] if text else type(exc).__name__


def regular_file(path, what: str = "") -> None:
    """Refuse (InputError) a path that exists but is neither a regular file nor a folder.

    Reading a FIFO blocks until something writes to it (for ever, often) and a device such as
    /dev/zero never ends, so no input is opened before this says it is a plain file. A missing path,
    a folder or an open file object are left to the caller, whose own message fits better.
    """
    import os
    import stat

    if not isinstance(path, (str, bytes, os.PathLike)):
        return
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return
    kind = (
        "a FIFO (named pipe)"
        if stat.S_ISFIFO(mode)
        else "a device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "a special file"
    )
    shown = os.fsdecode(path) if isinstance(path, bytes) else str(path)
    raise InputError(
        f"{what + ' ' if what else ''}{shown} is {kind}, not a regular file",
        "pass a regular file (save what the pipe or device gives to a file first)",
    )


def parse_json(text, what: str, hint: str):
    """``json.loads`` for files a user hands edgekit: NaN/Infinity (not JSON) and nesting too deep to parse
    (RecursionError) are an InputError naming ``what``, like any other malformed document."""
    import json

    def no_constant(name: str):
        raise ValueError(f"{name} is not a JSON number")

    try:
        return json.loads(text, parse_constant=no_constant)
    except RecursionError:
        raise InputError(f"{what}: nested too deeply to be read", hint) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{what}: not valid JSON ({first_line(exc, 200)})", hint) from None


def printable(text: str) -> str:
    """``text`` as strict UTF-8: the undecodable bytes of a file name that is not UTF-8 (lone surrogates,
    PEP 383) become ``\\xNN``; any other lone surrogate ``\\udNNN``."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        try:
            return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a surrogate no file system decoding made
            return text.encode("utf-8", "backslashreplace").decode("utf-8")


def shown(text: str, newlines: bool = False) -> str:
    """``text`` safe to print on a terminal: every character that is not printable (control characters such as
    ESC, CR, BEL and, unless ``newlines``, the newline; C1 controls; bidirectional overrides; line separators)
    is written as Python writes it in a string literal (``\\x1b``, ``\\n``, ``\\u202e``), and the undecodable
    bytes of a file name as ``\\xNN`` (see :func:`printable`).

    The one helper for text output: names from a model (tensor names, custom op codes, labels, metadata) or a
    file can then neither change the terminal nor fake a line of edgekit's own. ``--json`` needs none of it
    (JSON escapes control characters itself) and stays exact.
    """
    text = printable(text)
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable() or (newlines and ch == "\n"):
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    return "".join(out)


class UsageError(EdgekitError):
    exit_code = 2


class InputError(EdgekitError):
    """A file the user gave is missing, unreadable or not what it should be."""

    exit_code = 3


class InvalidModelError(InputError):
    """The bytes are not a valid TFLite flatbuffer."""

    DEFAULT_HINT = (
        "pass a .tflite file (a Keras model goes to `edgekit quantize` first); "
        "a damaged file must be copied or exported again"
    )

    def __init__(self, why: str, hint: str | None = None):
        super().__init__(f"not a valid TFLite model: {why}", hint or self.DEFAULT_HINT)
        self.why = why


class MissingDependencyError(EdgekitError):
    """A tool or package is missing. ``check``: what edgekit could tell without it, where something (``compile``
    without a compiler: the offline prediction, a CheckResult)."""

    exit_code = 4

    def __init__(self, message: str, hint: str | None = None, *, check=None):
        super().__init__(message, hint)
        self.check = check


class ConversionError(EdgekitError):
    exit_code = 5


class VerificationError(EdgekitError):
    """A verification failed: ``measure`` (e.g. ``top1_agreement``, ``accuracy_drop``), its ``value``, the
    ``limit`` it had to meet and its 95% ``interval``, where the failure is a measurement (else None)."""

    exit_code = 6

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        measure: str | None = None,
        value: float | None = None,
        limit: float | None = None,
        interval=None,
        result=None,
    ):
        super().__init__(message, hint)
        self.measure, self.value, self.limit = measure, value, limit
        self.interval = None if interval is None else tuple(interval)
        self.result = result  # the typed result of what was made anyway (quantize keeps its output), if there is one


class CompatibilityError(EdgekitError):
    exit_code = 7

    def __init__(self, message: str, hint: str | None = None, *, result=None):
        super().__init__(message, hint)
        self.result = result  # the CheckResult the failure rests on (edgekit.check(..., strict=True))


class CompilerError(EdgekitError):
    exit_code = 8

    def __init__(self, message: str, hint: str | None = None, *, report=None):
        super().__init__(message, hint)
        self.report = report  # what the compiler said (a CompileResult), when it ran to the end (compile --json)


class DeviceError(EdgekitError):
    exit_code = 9


class RegressionError(EdgekitError):
    """``benchmark --compare``: slower than the saved run by more than allowed."""

    exit_code = 10

    def __init__(self, message: str, hint: str | None = None, *, result=None):
        super().__init__(message, hint)
        self.result = result  # the BenchmarkResult of the run (edgekit.benchmark(..., compare=...))


class InternalError(EdgekitError):
    exit_code = 70


EXIT_CODES = {
    0: "success",
    1: "generic failure",
    UsageError.exit_code: "usage error",
    InputError.exit_code: "bad input (file missing/unreadable, invalid model or image)",
    MissingDependencyError.exit_code: "required tool or package missing",
    ConversionError.exit_code: "conversion failed",
    VerificationError.exit_code: "verification failed",
    CompatibilityError.exit_code: "not fully Edge TPU compatible (--strict)",
    CompilerError.exit_code: "Edge TPU compiler failed or timed out",
    DeviceError.exit_code: "device or runtime failure",
    RegressionError.exit_code: "benchmark slower than the saved run (--compare)",
    InternalError.exit_code: "internal error (a bug)",
}
