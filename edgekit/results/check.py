"""``edgekit check``: where each op runs and the command's document (the check engine's Verdict, Target and
Confidence enums)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

from edgekit.converters.compatibility.words import Confidence, Target, Verdict  # noqa: F401 (the check engine's)
from edgekit.edgetpu_package import EdgeTpuSummary
from edgekit.records import Record


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
    edgetpu: Optional[EdgeTpuSummary] = None

    @property
    def fully_mappable(self) -> bool:
        return self.verdict is Verdict.FULL

    def _report(self) -> Any:
        """The check engine's CheckReport of this result (its text rendering and --strict live there)."""
        from edgekit.converters.compatibility import CheckReport

        return CheckReport.from_dict({k: v for k, v in self.to_dict().items() if k != "edgetpu"})

    def strict_error(self) -> Any:
        """What ``check --strict`` raises (a CompatibilityError, exit 7), or None."""
        return self._report().strict_error()

    def render_text(self) -> str:
        from edgekit.converters import compatibility

        text = compatibility.render(self._report())
        return text + (f"\n{self.edgetpu.describe()}" if self.edgetpu else "")
