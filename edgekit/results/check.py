"""``edgekit check``: where each op runs (Verdict, Target, Confidence) and the command's document."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

from edgekit.records import Record


class Verdict(str, enum.Enum):
    """How much of a model the Edge TPU runs: every op, some, or none (``edgekit check``)."""

    FULL = "full"
    PARTIAL = "partial"
    NONE = "none"

    def __str__(self) -> str:
        return self.value


class Target(str, enum.Enum):
    """Where one op runs."""

    EDGETPU = "edgetpu"
    CPU = "cpu"

    def __str__(self) -> str:
        return self.value


class Confidence(str, enum.Enum):
    """How sure a placement is: ``confirmed`` (a real compile shows the rule) or ``uncertain``."""

    CONFIRMED = "confirmed"
    UNCERTAIN = "uncertain"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class OpPlacement(Record):
    """Where one op runs and why (``reason``: the compiler's status words where known)."""

    index: int
    name: str
    version: int
    target: Target
    reason: str
    detail: Optional[str]
    confidence: Confidence
    subgraph: Optional[int]


@dataclass(frozen=True)
class CheckSummary(Record):
    edgetpu_ops: int
    cpu_ops: int
    subgraphs: int
    uncertain_ops: int
    param_bytes: int
    on_chip_bytes_estimate: Optional[int]
    off_chip_bytes_estimate: Optional[int]


@dataclass(frozen=True)
class CheckProblem(Record):
    code: str
    message: str
    hint: Optional[str]
    ops: Tuple[int, ...]
    fatal: bool
    confidence: Confidence


@dataclass(frozen=True)
class CheckResult(Record):
    """``edgekit check --json``: which ops edgetpu_compiler 16 maps to the Edge TPU, and why not.

    ``edgetpu``: what the compiler wrote in a compiled model (None for a CPU model).
    """

    model: Optional[str]
    verdict: Verdict
    compiled: bool
    min_runtime: int
    multiple_subgraphs: bool
    ops: Tuple[OpPlacement, ...]
    summary: CheckSummary
    problems: Tuple[CheckProblem, ...]
    advice: Tuple[str, ...]
    edgetpu: Optional[Mapping[str, Any]] = None

    @property
    def fully_mappable(self) -> bool:
        return self.verdict is Verdict.FULL

    def _report(self) -> Any:
        """The converters' CheckReport of this result (its text rendering and --strict live there)."""
        from edgekit.converters import compatibility as c

        ops = [c.OpVerdict(o.index, o.name, o.version, o.target.value, o.reason, o.detail,
                           confidence=o.confidence.value, subgraph=o.subgraph) for o in self.ops]
        problems = [c.Problem(p.code, p.message, p.hint, tuple(p.ops), p.fatal, confidence=p.confidence.value)
                    for p in self.problems]
        s = self.summary
        return c.CheckReport(self.model, self.verdict.value, ops, s.subgraphs, s.param_bytes,
                             s.on_chip_bytes_estimate, s.off_chip_bytes_estimate, problems, list(self.advice),
                             self.min_runtime, self.compiled, self.multiple_subgraphs)

    def strict_error(self) -> Any:
        """What ``check --strict`` raises (a CompatibilityError, exit 7), or None."""
        return self._report().strict_error()

    def render_text(self) -> str:
        from edgekit import edgetpu_package
        from edgekit.converters import compatibility

        text = compatibility.render(self._report())
        return text + (f"\n{edgetpu_package.describe(self.to_dict()['edgetpu'])}" if self.edgetpu else "")
