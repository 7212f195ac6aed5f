"""The words edgekit's documents share with the engine that computes them: check's verdicts, targets and
confidence (:mod:`edgekit.edgetpu.compatibility` uses these very enums), sizes in MiB and the compiler's
operation table as check and compile print them, and the name of the command that cuts a detector.

Standard library only: the result layer sits below the engine, the runtime and the board.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum


class Word(str, Enum):
    """A word of check's JSON: equal to (and hashed, printed and formatted as) its string value."""

    __str__ = str.__str__

    def __format__(self, format_spec: str) -> str:  # str's, as a method: Enum's is typed apart
        return str.__format__(self, format_spec)

    __hash__ = str.__hash__


class Confidence(Word):
    """How sure a placement, a rule or a problem is."""

    CONFIRMED = "confirmed"  # a real compile shows it
    UNCERTAIN = "uncertain"  # no real compile shows it either way (documentation or inference only)


class Target(Word):
    """Where an op runs."""

    EDGETPU = "edgetpu"
    CPU = "cpu"


class Verdict(Word):
    """How much of the model runs on the Edge TPU."""

    FULL = "full"
    PARTIAL = "partial"
    NONE = "none"


#: How check's advice names the command that cuts a YOLO detector's decode tail off (quantize's and build's
#: summaries look for it in check's advice).
CUT_COMMAND = "`edgekit cut`"


def mib(n: int) -> str:
    """Bytes as MiB with two decimals, as check and compile print sizes."""
    return f"{n / 1024 / 1024:.2f} MiB"


def format_table(rows: Iterable[tuple[str, int, str]]) -> str:
    """The compiler's operation-log table: ``Operator<pad 31>Count<pad 11>Status``."""
    lines = [f"{'Operator':<31}{'Count':<11}Status", ""]
    lines += [f"{name:<31}{count:<11}{status}" for name, count, status in rows]
    return "\n".join(lines)
