"""``edgekit inspect``: a .tflite model summarized."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple, Union

from edgekit.edgetpu_package import EdgeTpuSummary
from edgekit.records import Record


@dataclass(frozen=True)
class TensorSummary(Record):
    name: Optional[str]
    dtype: str
    shape: Tuple[int, ...]
    shape_signature: Tuple[int, ...]
    scale: Union[float, Tuple[float, ...], None]      # one per tensor, one per channel, or None (not quantized)
    zero_point: Union[int, Tuple[int, ...], None]

    def line(self) -> str:
        shape = "x".join(map(str, self.shape))
        sig = "" if self.shape_signature == self.shape else f" (signature {list(self.shape_signature)})"
        q = "" if self.scale is None else (
            f"  scale={self.scale:.6g} zero_point={self.zero_point}" if not isinstance(self.scale, tuple)
            else f"  per-channel ({len(self.scale)} scales)")
        return f"  {self.name or '<unnamed>'}: {self.dtype} [{shape}]{sig}{q}"


@dataclass(frozen=True)
class InspectOp(Record):
    """One op of the model; ``subgraph`` is in the document only for ops outside the main subgraph (0)."""

    index: int
    name: str
    version: int
    custom_code: Optional[str]
    subgraph: Optional[int] = None

    def to_dict(self) -> dict[str, int | str | None]:
        doc = {"index": self.index, "name": self.name, "version": self.version, "custom_code": self.custom_code}
        return doc if self.subgraph is None else {**doc, "subgraph": self.subgraph}


@dataclass(frozen=True)
class OpCount(Record):
    """A row of the ``op_histogram`` of inspect and quantize: how many ops of one name and version
    (:meth:`edgekit.tflite_model.ModelInfo.op_histogram_rows`)."""

    name: str
    version: int
    count: int


@dataclass(frozen=True)
class InspectResult(Record):
    """``edgekit inspect --json``: a .tflite model's I/O, quantization, ops and shapes, read without TensorFlow."""

    path: Optional[str]        # None for a model read from bytes (tflite_model.ModelInfo.from_bytes)
    size_bytes: int
    edgetpu_compiled: bool
    subgraphs: int
    schema_version: Optional[int]
    description: Optional[str]
    min_runtime_version: Optional[str]
    quantization: str
    dynamic_shapes: bool
    param_bytes: int
    edgetpu_bytes: int
    edgetpu: Optional[EdgeTpuSummary]
    inputs: Tuple[TensorSummary, ...]
    outputs: Tuple[TensorSummary, ...]
    ops: Tuple[InspectOp, ...]
    op_histogram: Tuple[OpCount, ...]
    metadata: Tuple[str, ...]

    def render_text(self) -> str:
        lines = [
            f"{self.path or 'the model (no file)'}: {self.size_bytes:,} bytes, {self.subgraphs} subgraph(s), {len(self.ops)} ops",
            f"Edge TPU compiled: {'yes' if self.edgetpu_compiled else 'no'}",
            f"Quantization: {self.quantization}",
            f"Shapes: {'DYNAMIC (some dimension is -1 in shape_signature)' if self.dynamic_shapes else 'static'}",
            f"Parameters: {self.param_bytes:,} bytes"
            + (f" on the CPU, {self.edgetpu_bytes:,} bytes of compiled Edge TPU program" if self.edgetpu_compiled
               else ""),
        ]
        if self.min_runtime_version:
            lines.append(f"Min TFLite runtime: {self.min_runtime_version}")
        if self.edgetpu:
            lines.append(self.edgetpu.describe())
        lines.append("Inputs:")
        lines += [t.line() for t in self.inputs]
        lines.append("Outputs:")
        lines += [t.line() for t in self.outputs]
        lines.append("Ops:")
        lines += [f"  {h.count:>4} x {h.name} v{h.version}" for h in self.op_histogram]
        if self.metadata:
            lines.append(f"Metadata: {', '.join(self.metadata)}")
        return "\n".join(lines)
