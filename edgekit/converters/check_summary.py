"""What ``edgekit check`` says about a model, in the few lines quantize's and build's summaries carry.

Quantize used to print a fixed "Edge TPU checks: ... passed" while check rated the same model
PARTIAL (issue 24: MobileNetV3Small, 4 of 113 ops on the Edge TPU). The summary is now made from
check's own report (:class:`edgekit.edgetpu.compatibility.CheckReport`, or its typed result):
its verdict, the ops left on the CPU by type, how many placements rest on no real compile, and the
parameters that would not fit the on-chip cache. Pure data: no TensorFlow.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from edgekit.edgetpu.compatibility.words import Target, Verdict
from edgekit.records import Record

if TYPE_CHECKING:
    from edgekit.edgetpu.compatibility.check import CheckReport
    from edgekit.results.check import CheckResult


def _mib(n: int) -> str:
    return f"{n / 1024 / 1024:.2f} MiB"


@dataclass(frozen=True)
class CpuOps(Record):
    """An op type check leaves on the CPU and how many of it."""

    op: str
    count: int


@dataclass(frozen=True)
class CheckSummary(Record):
    """check's verdict on one model, as a summary line or two."""

    verdict: Verdict                                # check's own (full | partial | none)
    edgetpu_ops: int
    total_ops: int
    cpu_ops_by_type: tuple[CpuOps, ...]             # most first
    uncertain_ops: int                              # placements no real compile shows
    subgraphs: int
    min_runtime: int
    edgetpu_param_bytes: int | None                 # parameters of the Edge TPU ops (None: not estimated)
    off_chip_bytes_estimate: int | None             # of those, beyond the ~8 MiB on-chip cache
    cut: str | None = None                          # check's offer of `edgekit cut` (a YOLO detector it can cut)

    @classmethod
    def from_check(cls, check: CheckReport | CheckResult) -> CheckSummary:
        """From check's report, or its result (build's manifest holds one: a
        :class:`~edgekit.results.build.BundleCheck`)."""
        from edgekit.results.check import CheckResult

        r = check if isinstance(check, CheckResult) else CheckResult.of_report(check)
        s = r.summary
        cpu = Counter(o.name for o in r.ops if o.target == Target.CPU)
        on, off = s.on_chip_bytes_estimate, s.off_chip_bytes_estimate
        from edgekit.detection.head import CUT_COMMAND

        return cls(Verdict(r.verdict), s.edgetpu_ops, len(r.ops),
                   tuple(CpuOps(name, n) for name, n in sorted(cpu.items(), key=lambda kv: (-kv[1], kv[0]))),
                   s.uncertain_ops, s.subgraphs, r.min_runtime,
                   None if on is None else on + (off or 0), off,
                   next((a for a in r.advice if CUT_COMMAND in a), None))

    def lines(self) -> list[str]:
        """'Edge TPU (edgekit check): PARTIAL: 4 of 113 ops ...' and the parameters line."""
        word = self.verdict.value.upper()
        first = (f"Edge TPU (edgekit check, compiler 16 rules, runtime {self.min_runtime}): {word}: {self.edgetpu_ops} "
                 f"of {self.total_ops} ops on the Edge TPU")
        if self.subgraphs > 1:
            first += f" in {self.subgraphs} subgraphs"
        if self.cpu_ops_by_type:
            shown = ", ".join(f"{c.count}x {c.op}" for c in self.cpu_ops_by_type[:8])
            more = len(self.cpu_ops_by_type) - 8
            first += f"; on the CPU: {shown}" + (f" and {more} more type(s)" if more > 0 else "")
        if self.uncertain_ops:
            first += (f"; {self.uncertain_ops} placement(s) uncertain (no real compile shows their rule: "
                      "`edgekit check` lists them)")
        lines = [first]
        if self.edgetpu_param_bytes is not None:
            if self.off_chip_bytes_estimate:
                lines.append(f"Parameters on the Edge TPU: ~{_mib(self.edgetpu_param_bytes)}, ~"
                             f"{_mib(self.off_chip_bytes_estimate)} of them off-chip (streamed from host memory "
                             "at every inference: slower)")
            else:
                lines.append(f"Parameters on the Edge TPU: ~{_mib(self.edgetpu_param_bytes)}, all within the "
                             "~8 MiB on-chip cache")
        if self.cut:
            lines.append(self.cut)
        return lines
