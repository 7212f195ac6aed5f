"""``edgekit compile``: what edgetpu_compiler said, parsed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

from edgekit.records import Record


@dataclass(frozen=True)
class CompileResult(Record):
    """``edgekit compile --json``: what edgetpu_compiler said, parsed; ``check_disagreements``: where the
    offline check predicted otherwise (None when not compared)."""

    compiler_version: Optional[str]
    succeeded: bool
    compile_ms: Optional[int]
    returncode: Optional[int]
    command: Tuple[str, ...]
    input_model: Optional[str]
    input_size_bytes: Optional[int]
    output_model: Optional[str]
    output_size_bytes: Optional[int]
    on_chip_used_bytes: Optional[int]
    on_chip_remaining_bytes: Optional[int]
    off_chip_used_bytes: Optional[int]
    subgraphs: Optional[int]
    total_ops: Optional[int]
    edgetpu_ops: Optional[int]
    cpu_ops: Optional[int]
    ops_per_status: Mapping[str, int]
    ops: Tuple[Mapping[str, Any], ...]
    segments: Tuple[Mapping[str, Any], ...]
    outputs: Tuple[str, ...]
    errors: Tuple[str, ...]
    check_disagreements: Optional[Tuple[str, ...]] = None

    def render_text(self) -> str:
        from edgekit.converters.compatibility import format_table, mib

        def size(n: int | None) -> str:
            return "?" if n is None else mib(n)

        lines = [f"edgetpu_compiler {self.compiler_version}: compiled {self.input_model}"
                 + (f" in {self.compile_ms} ms" if self.compile_ms is not None else "")]
        if self.segments:
            for s in self.segments:
                lines.append(f"  segment {s['output_model']}: {s['total_ops']} ops, "
                             f"on-chip {size(s['on_chip_used_bytes'])}, off-chip {size(s['off_chip_used_bytes'])}")
        else:
            lines.append(f"Output: {self.output_model} ({size(self.output_size_bytes)}); "
                         f"Edge TPU subgraphs: {self.subgraphs}")
            lines.append(f"Parameters on-chip {size(self.on_chip_used_bytes)}, off-chip (streamed) "
                         f"{size(self.off_chip_used_bytes)}, on-chip remaining {size(self.on_chip_remaining_bytes)}")
        if self.ops:
            lines += ["", format_table((r["operator"], r["count"], r["status"]) for r in self.ops), ""]
        per = self.ops_per_status
        if per:
            mapped = per.get("Mapped to Edge TPU", 0)
            lines.append(f"Ops: {mapped} on the Edge TPU, {sum(per.values()) - mapped} on the CPU")
        elif self.edgetpu_ops is not None:  # no op table, only the compiler's summary lines
            lines.append(f"Ops: {self.edgetpu_ops} on the Edge TPU, {self.cpu_ops} on the CPU")
        lines.append("Files: " + ", ".join(self.outputs))
        dis = self.check_disagreements
        if dis is not None:
            lines.append("edgekit check agreed with the compiler on every op type" if not dis else
                         "edgekit check disagreed with the compiler:\n  " + "\n  ".join(dis))
        return "\n".join(lines)
