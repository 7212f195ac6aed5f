"""``edgekit cut``: a YOLO detector cut before its decode (what :func:`edgekit.detection.cut.cut` returns)."""

from __future__ import annotations

from dataclasses import dataclass

from edgekit.records import Record


@dataclass(frozen=True)
class CutCheck(Record):
    """check's prediction for the cut model: its verdict and the ops it still puts on the CPU (None: not checked)."""

    verdict: str | None
    cpu_ops: int | None


@dataclass(frozen=True)
class CutOutput(Record):
    """An output tensor of the cut model: its role in the layout (``boxes@8``: the box distributions of stride 8,
    ``scores@8`` its class logits), name, shape, type and quantization (None: not quantized, or per channel)."""

    role: str
    name: str
    shape: tuple[int, ...]
    dtype: str
    scale: float | None
    zero_point: int | None


@dataclass(frozen=True)
class CutResult(Record):
    """``edgekit cut --json``: the model cut, its head, the decode ops removed, and check's verdict on it."""

    model: str | None
    output: str | None
    layout: str
    head: str
    ops_before: int
    ops_after: int
    decode_ops_removed: int
    outputs: tuple[CutOutput, ...]
    strides: tuple[int, ...]
    reg_max: int
    num_classes: int
    check: CutCheck

    def render_text(self) -> str:
        lines = [
            f"{self.output}: {self.model} cut before its decode",
            f"  head: {self.head}",
            f"  ops: {self.ops_after} of {self.ops_before} kept ({self.decode_ops_removed} decode ops "
            "removed: edgekit decodes them on the host)",
            f"  outputs: per level, box distributions then class logits ({len(self.outputs)} tensors, "
            f"layout {self.layout})",
        ]
        if self.check.verdict is not None:
            lines.append(f"  check: {self.check.verdict.upper()}, {self.check.cpu_ops} op(s) predicted on the CPU")
        lines.append(f"next: edgekit compile {self.output}; edgekit detect IMAGE -m {self.output}")
        return "\n".join(lines)
