"""The text of ``edgekit check``: the compiler-style operation table and the report."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from edgekit.edgetpu.compatibility.words import UNCERTAIN, Target, Verdict, mib

if TYPE_CHECKING:
    from edgekit.edgetpu.compatibility.check import CheckReport


def format_table(rows: Iterable[tuple[str, int, str]]) -> str:
    """The compiler's operation-log table: ``Operator<pad 31>Count<pad 11>Status``."""
    lines = [f"{'Operator':<31}{'Count':<11}Status", ""]
    lines += [f"{name:<31}{count:<11}{status}" for name, count, status in rows]
    return "\n".join(lines)


def render(report: CheckReport) -> str:
    """Human-readable text for ``edgekit check``."""
    flags = f"--min-runtime {report.min_runtime}" + (", -a" if report.multiple_subgraphs and not report.compiled
                                                      else "")
    lines = [f"Edge TPU check: {report.model or '<model>'} (edgetpu_compiler 16 rules, {flags})"]
    if report.compiled:
        lines.append("This model is ALREADY COMPILED for the Edge TPU.")
    lines += ["", format_table(report.table()), ""]
    lines.append("Ops:")
    many = report.subgraphs > 1
    for v in report.ops:
        mark = "TPU" if v.target == Target.EDGETPU else "CPU"
        if many and v.subgraph is not None:
            mark += str(v.subgraph)
        extra = "" if v.target == Target.EDGETPU and not v.detail else f"  {v.reason}" + (
            f" ({v.detail})" if v.detail else "")
        unsure = "  [uncertain]" if v.confidence == UNCERTAIN else ""
        lines.append(f"  #{v.index:<4} {mark:<4} {v.name} v{v.version}{extra}{unsure}")
    if any(v.confidence == UNCERTAIN for v in report.ops):
        lines.append("  [uncertain]: rests on Coral's documentation or an inference; no real compile seen shows it "
                     "either way")
    lines.append("")
    if report.on_chip_bytes_estimate is not None:
        lines.append(f"Parameters: {report.param_bytes:,} bytes; Edge TPU ops ~{mib(report.on_chip_bytes_estimate)} "
                     f"on-chip, ~{mib(report.off_chip_bytes_estimate or 0)} off-chip (streamed), of a ~8 MiB cache")
    else:
        lines.append(f"Parameters{' of the CPU ops' if report.compiled else ''}: {report.param_bytes:,} bytes")
    for p in report.problems:
        if p.code == "already_compiled":
            continue
        tag = "FATAL" if p.fatal else "Problem"
        if p.confidence == UNCERTAIN:
            tag += " (uncertain)"
        lines.append(f"{tag}: {p.message}" + (f"\n  fix: {p.hint}" if p.hint else ""))
    total = len(report.ops)
    word = Verdict(report.verdict).value.upper()
    unsure = (f"; {report.uncertain_ops} of these placements uncertain (no real compile shows their rule)"
              if report.uncertain_ops else "")
    lines.append(f"Verdict: {word}: {report.edgetpu_ops} of {total} ops on the Edge TPU "
                 f"({report.subgraphs} Edge TPU subgraph{'s' if report.subgraphs != 1 else ''}), "
                 f"{report.cpu_ops} on the CPU{unsure}")
    for a in report.advice:
        lines.append(f"Advice: {a}")
    return "\n".join(lines)
