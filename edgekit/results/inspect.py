"""``edgekit inspect``: a .tflite model summarized, and what the Edge TPU compiler wrote inside a compiled one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple, Union

from edgekit.records import Record


@dataclass(frozen=True)
class EdgeTpuExecutable(Record):
    """One executable of an Edge TPU package (``type``: stand_alone, parameter_caching or execution_only)."""

    type: str
    parameter_bytes: int
    estimated_cycles: Optional[int]
    chip: Optional[str]


@dataclass(frozen=True)
class EdgeTpuPackage(Record):
    """The package of one ``edgetpu-custom-op`` (one Edge TPU subgraph); ``error``: why it could not be read."""

    subgraph: int
    op: int
    min_runtime_version: Optional[int]
    compiler_version: Optional[str]
    cached_parameter_bytes: int
    streamed_parameter_bytes: int
    estimated_cycles: Optional[int]
    executables: Tuple[EdgeTpuExecutable, ...]
    error: Optional[str]


@dataclass(frozen=True)
class EdgeTpuSummary(Record):
    """What the compiler wrote in a compiled model (:func:`edgekit.edgetpu_package.summary`), summed over its
    packages; ``inspect --json`` and ``check --json`` carry it as ``edgetpu``."""

    subgraphs: int
    executables: int
    cached_parameter_bytes: int
    streamed_parameter_bytes: int
    estimated_cycles: Optional[int]
    min_runtime_version: Optional[int]
    unreadable: int
    packages: Tuple[EdgeTpuPackage, ...]

    def line(self) -> str:
        """One line for people: the figures the compiler printed when it made the model (MiB, as check prints)."""
        cycles = f"; estimated {self.estimated_cycles:,} cycles" if self.estimated_cycles else ""
        runtime = f"; needs Edge TPU runtime {self.min_runtime_version}+" if self.min_runtime_version else ""
        bad = f"; {self.unreadable} package(s) unreadable" if self.unreadable else ""
        return (f"Edge TPU: {self.subgraphs} subgraph(s), {self.executables} executable(s); parameters cached on "
                f"chip {self.cached_parameter_bytes / 2**20:.2f} MiB, streamed off chip "
                f"{self.streamed_parameter_bytes / 2**20:.2f} MiB{cycles}{runtime}{bad}")


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
    """How many ops of one type and version the model has (a row of ``op_histogram``)."""

    name: str
    version: int
    count: int


@dataclass(frozen=True)
class InspectResult(Record):
    """``edgekit inspect --json``: a .tflite model's I/O, quantization, ops and shapes, read without TensorFlow."""

    path: str
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
            f"{self.path}: {self.size_bytes:,} bytes, {self.subgraphs} subgraph(s), {len(self.ops)} ops",
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
            lines.append(self.edgetpu.line())
        lines.append("Inputs:")
        lines += [t.line() for t in self.inputs]
        lines.append("Outputs:")
        lines += [t.line() for t in self.outputs]
        lines.append("Ops:")
        lines += [f"  {h.count:>4} x {h.name} v{h.version}" for h in self.op_histogram]
        if self.metadata:
            lines.append(f"Metadata: {', '.join(self.metadata)}")
        return "\n".join(lines)
