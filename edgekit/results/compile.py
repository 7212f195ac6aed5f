"""``edgekit compile``: what edgetpu_compiler said, parsed.

:func:`edgekit.edgetpu.compiler.compile_model` fills a
:class:`~edgekit.edgetpu.compiler.CompileReport` as it reads the compiler's output; the
records here are its document (:meth:`CompilerOutput.of_report`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from edgekit.records import Record, freeze
from edgekit.results.words import format_table, mib

if TYPE_CHECKING:
    from edgekit.edgetpu.compiler import CompileReport, ModelSection

C = TypeVar("C", bound="CompilerOutput")


@dataclass(frozen=True)
class CompileOp(Record):
    """One row of the compiler's operation table (what :mod:`edgekit.edgetpu.compiler` parses it into)."""

    operator: str
    count: int
    status: str

    @property
    def mapped(self) -> bool:
        return self.status == "Mapped to Edge TPU"


@dataclass(frozen=True)
class CompileSegment(Record):
    """What the compiler printed about one output model (one per segment with ``--segments N``)."""

    input_model: str | None
    input_size_bytes: int | None
    output_model: str | None
    output_size_bytes: int | None
    on_chip_used_bytes: int | None
    on_chip_remaining_bytes: int | None
    off_chip_used_bytes: int | None
    subgraphs: int | None
    total_ops: int | None
    edgetpu_ops: int | None
    cpu_ops: int | None
    operation_log: str | None
    ops: tuple[CompileOp, ...]

    @classmethod
    def of_section(cls, s: ModelSection) -> CompileSegment:
        return cls(
            s.input_model,
            s.input_size_bytes,
            s.output_model,
            s.output_size_bytes,
            s.on_chip_used_bytes,
            s.on_chip_remaining_bytes,
            s.off_chip_used_bytes,
            s.subgraphs,
            s.total_ops,
            s.edgetpu_ops,
            s.cpu_ops,
            s.operation_log,
            tuple(s.ops),
        )


@dataclass(frozen=True)
class CompilerOutput(Record):
    """What one run of edgetpu_compiler said, parsed: the last (or only) model's figures, every op table row, and
    each segment's figures when it wrote more than one model (what build's manifest records as ``compile``)."""

    compiler_version: str | None
    succeeded: bool
    compile_ms: int | None
    returncode: int | None
    command: tuple[str, ...]
    input_model: str | None
    input_size_bytes: int | None
    output_model: str | None
    output_size_bytes: int | None
    on_chip_used_bytes: int | None
    on_chip_remaining_bytes: int | None
    off_chip_used_bytes: int | None
    subgraphs: int | None
    total_ops: int | None
    edgetpu_ops: int | None
    cpu_ops: int | None
    ops_per_status: Mapping[str, int]
    ops: tuple[CompileOp, ...]
    segments: tuple[CompileSegment, ...]
    outputs: tuple[str, ...]
    errors: tuple[str, ...]

    @classmethod
    def of_report(cls: type[C], report: CompileReport) -> C:
        m = report.main
        segments: Sequence[ModelSection] = report.sections if len(report.sections) > 1 else ()
        return cls(
            report.compiler_version,
            report.succeeded,
            report.compile_ms,
            report.returncode,
            tuple(report.command),
            m.input_model,
            m.input_size_bytes,
            m.output_model,
            m.output_size_bytes,
            m.on_chip_used_bytes,
            m.on_chip_remaining_bytes,
            m.off_chip_used_bytes,
            m.subgraphs,
            m.total_ops,
            m.edgetpu_ops,
            m.cpu_ops,
            freeze(report.ops_per_status()),
            tuple(report.ops),
            tuple(CompileSegment.of_section(s) for s in segments),
            tuple(report.outputs),
            tuple(report.errors),
        )


@dataclass(frozen=True)
class CompileResult(CompilerOutput):
    """``edgekit compile --json``: what edgetpu_compiler said, parsed; ``check_disagreements``: where the
    offline check predicted otherwise (None when not compared)."""

    check_disagreements: tuple[str, ...] | None = None

    @classmethod
    def of_report(cls, report: CompileReport, check_disagreements: Sequence[str] | None = None) -> CompileResult:
        """The document of ``report``, with where check's prediction disagreed (None: not compared)."""
        return dataclasses.replace(
            super().of_report(report),
            check_disagreements=None if check_disagreements is None else tuple(check_disagreements),
        )

    def render_text(self) -> str:
        def size(n: int | None) -> str:
            return "?" if n is None else mib(n)

        lines = [
            f"edgetpu_compiler {self.compiler_version}: compiled {self.input_model}"
            + (f" in {self.compile_ms} ms" if self.compile_ms is not None else "")
        ]
        if self.segments:
            for s in self.segments:
                lines.append(
                    f"  segment {s.output_model}: {s.total_ops} ops, "
                    f"on-chip {size(s.on_chip_used_bytes)}, off-chip {size(s.off_chip_used_bytes)}"
                )
        else:
            lines.append(
                f"Output: {self.output_model} ({size(self.output_size_bytes)}); Edge TPU subgraphs: {self.subgraphs}"
            )
            lines.append(
                f"Parameters on-chip {size(self.on_chip_used_bytes)}, off-chip (streamed) "
                f"{size(self.off_chip_used_bytes)}, on-chip remaining {size(self.on_chip_remaining_bytes)}"
            )
        if self.ops:
            lines += ["", format_table((r.operator, r.count, r.status) for r in self.ops), ""]
        per = self.ops_per_status
        if per:
            mapped = per.get("Mapped to Edge TPU", 0)
            lines.append(f"Ops: {mapped} on the Edge TPU, {sum(per.values()) - mapped} on the CPU")
        elif self.edgetpu_ops is not None:  # no op table, only the compiler's summary lines
            lines.append(f"Ops: {self.edgetpu_ops} on the Edge TPU, {self.cpu_ops} on the CPU")
        lines.append("Files: " + ", ".join(self.outputs))
        dis = self.check_disagreements
        if dis is not None:
            lines.append(
                "edgekit check agreed with the compiler on every op type"
                if not dis
                else "edgekit check disagreed with the compiler:\n  " + "\n  ".join(dis)
            )
        return "\n".join(lines)
