"""``edgekit compile``: what edgetpu_compiler said, parsed.

:func:`edgekit.edgetpu.compiler.compile_model` returns a :class:`CompileResult` as it reads the compiler's output:
the same record is ``compile --json``, a bundle manifest's ``compile`` and a failed compile's ``report``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from edgekit.records import Record
from edgekit.results.words import format_table, mib


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


#: A model the compiler printed nothing about (yet): what the parser starts each one from.
NO_SEGMENT = CompileSegment(*(None,) * 12, ())


@dataclass(frozen=True)
class CompileResult(Record):
    """What one run of edgetpu_compiler said, parsed: the last (or only) model's figures, every op table row, and
    each segment's figures when it wrote more than one model. ``check_disagreements``: where the offline check
    predicted otherwise (``edgekit compile --json``); None where not compared, and then left out of the document
    (what a bundle's manifest records as ``compile``, and a failed compile's ``report``)."""

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
    check_disagreements: tuple[str, ...] | None = None

    def to_dict(self) -> dict:
        doc = super().to_dict()
        if self.check_disagreements is None:
            del doc["check_disagreements"]
        return doc

    def split_by_type(self) -> dict[str, Counter[str]]:
        """{"edgetpu": Counter(op -> n), "cpu": Counter(...)} from the operation table."""
        out: dict[str, Counter[str]] = {"edgetpu": Counter(), "cpu": Counter()}
        for r in self.ops:
            out["edgetpu" if r.mapped else "cpu"][r.operator] += r.count
        return out

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
