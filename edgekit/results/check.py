"""``edgekit check``: where each op runs and the command's document (the check engine's Verdict, Target and
Confidence enums).

The check engine (:mod:`edgekit.edgetpu.compatibility`) works in its own values (a
:class:`~edgekit.edgetpu.compatibility.CheckReport` of
:class:`~edgekit.edgetpu.compatibility.OpVerdict` and
:class:`~edgekit.edgetpu.compatibility.Problem`); the records here are their documents:
:meth:`CheckResult.of_report` makes one from a report, :meth:`CheckResult.report` gives the
report back (without what only the engine's text used, each op's fix), for the text and ``--strict``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Tuple, TypeVar

from edgekit.edgetpu.compatibility.words import Confidence, Target, Verdict  # noqa: F401 (the check engine's)
from edgekit.tflite.edgetpu_package import EdgeTpuSummary
from edgekit.errors import CompatibilityError
from edgekit.records import Record

if TYPE_CHECKING:
    from edgekit.edgetpu.compatibility.check import CheckReport
    from edgekit.edgetpu.compatibility.values import OpVerdict, Problem

C = TypeVar("C", bound="CheckResult")


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

    @classmethod
    def of_verdict(cls, v: OpVerdict) -> OpPlacement:
        return cls(v.index, v.name, v.version, v.target, v.reason, v.detail, v.confidence, v.subgraph)

    def verdict(self) -> OpVerdict:
        """The check engine's value (its ``fix``, which only the engine's own text shows, is gone)."""
        from edgekit.edgetpu.compatibility.values import OpVerdict

        return OpVerdict(self.index, self.name, self.version, self.target, self.reason, self.detail, None,
                         self.confidence, self.subgraph)


@dataclass(frozen=True)
class CheckSummary(Record):
    edgetpu_ops: int
    cpu_ops: int
    subgraphs: int
    uncertain_ops: int
    param_bytes: int
    on_chip_bytes_estimate: Optional[int]
    off_chip_bytes_estimate: Optional[int]

    @classmethod
    def of_report(cls, r: CheckReport) -> CheckSummary:
        return cls(r.edgetpu_ops, r.cpu_ops, r.subgraphs, r.uncertain_ops, r.param_bytes, r.on_chip_bytes_estimate,
                   r.off_chip_bytes_estimate)


@dataclass(frozen=True)
class CheckProblem(Record):
    code: str
    message: str
    hint: Optional[str]
    ops: Tuple[int, ...]
    fatal: bool
    confidence: Confidence

    @classmethod
    def of_problem(cls, p: Problem) -> CheckProblem:
        return cls(p.code, p.message, p.hint, tuple(p.ops), p.fatal, p.confidence)

    def problem(self) -> Problem:
        """The check engine's value (a fatal problem's words for every op, ``status``, are gone)."""
        from edgekit.edgetpu.compatibility.values import Problem

        return Problem(self.code, self.message, self.hint, self.ops, self.fatal, None, self.confidence)


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
    edgetpu: Optional[EdgeTpuSummary] = None

    @classmethod
    def of_report(cls: type[C], report: CheckReport, edgetpu: Optional[EdgeTpuSummary] = None) -> C:
        """The document of the engine's ``report``, with ``edgetpu`` (what the compiler wrote, when compiled)."""
        return cls(report.model, report.verdict, report.compiled, report.min_runtime, report.multiple_subgraphs,
                   tuple(OpPlacement.of_verdict(o) for o in report.ops), CheckSummary.of_report(report),
                   tuple(CheckProblem.of_problem(p) for p in report.problems), tuple(report.advice), edgetpu)

    def report(self) -> CheckReport:
        """The check engine's CheckReport of this document (its text rendering and --strict live there)."""
        from edgekit.edgetpu.compatibility.check import CheckReport

        s = self.summary
        return CheckReport(self.model, self.verdict, [o.verdict() for o in self.ops], s.subgraphs, s.param_bytes,
                           s.on_chip_bytes_estimate, s.off_chip_bytes_estimate, [p.problem() for p in self.problems],
                           list(self.advice), self.min_runtime, self.compiled, self.multiple_subgraphs)

    @property
    def fully_mappable(self) -> bool:
        return self.verdict is Verdict.FULL

    def strict_error(self) -> Optional[CompatibilityError]:
        """What ``check --strict`` raises (a CompatibilityError, exit 7, carrying this result), or None."""
        return self.report().strict_error(self)

    def render_text(self) -> str:
        from edgekit.edgetpu.compatibility.render import render

        text = render(self.report())
        return text + (f"\n{self.edgetpu.describe()}" if self.edgetpu else "")
