"""``edgekit inspect``: a .tflite model summarized."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from edgekit.records import Record


# --------------------------- a compiled model's Edge TPU packages (read by edgekit.tflite.edgetpu_package)
@dataclass(frozen=True)
class ExecutableSummary(Record):
    """One executable of a package, as ``inspect --json`` / ``check --json`` show it (its caching token aside)."""

    type: str
    parameter_bytes: int
    estimated_cycles: int | None
    chip: str | None


@dataclass(frozen=True)
class PackageSummary(Record):
    """One Edge TPU subgraph's package, with its parameter bytes cached on chip and streamed."""

    subgraph: int
    op: int
    min_runtime_version: int | None
    compiler_version: str | None
    cached_parameter_bytes: int
    streamed_parameter_bytes: int
    estimated_cycles: int | None
    executables: tuple[ExecutableSummary, ...]
    error: str | None


@dataclass(frozen=True)
class EdgeTpuSummary(Record):
    """The ``edgetpu`` block of ``inspect --json`` and ``check --json``: a compiled model's Edge TPU side."""

    subgraphs: int
    executables: int
    cached_parameter_bytes: int
    streamed_parameter_bytes: int
    estimated_cycles: int | None
    min_runtime_version: int | None
    unreadable: int
    packages: tuple[PackageSummary, ...]

    def describe(self) -> str:
        """One line for people: the figures the compiler printed when it made the model (MiB, as check prints)."""
        cycles = f"; estimated {self.estimated_cycles:,} cycles" if self.estimated_cycles else ""
        runtime = f"; needs Edge TPU runtime {self.min_runtime_version}+" if self.min_runtime_version else ""
        bad = f"; {self.unreadable} package(s) unreadable" if self.unreadable else ""
        return (
            f"Edge TPU: {self.subgraphs} subgraph(s), {self.executables} executable(s); parameters cached on "
            f"chip {self.cached_parameter_bytes / 2**20:.2f} MiB, streamed off chip "
            f"{self.streamed_parameter_bytes / 2**20:.2f} MiB{cycles}{runtime}{bad}"
        )


@dataclass(frozen=True)
class TensorSummary(Record):
    name: str | None
    dtype: str
    shape: tuple[int, ...]
    shape_signature: tuple[int, ...]
    scale: float | tuple[float, ...] | None  # one per tensor, one per channel, or None (not quantized)
    zero_point: int | tuple[int, ...] | None

    def line(self) -> str:
        shape = "x".join(map(str, self.shape))
        sig = "" if self.shape_signature == self.shape else f" (signature {list(self.shape_signature)})"
        q = (
            ""
            if self.scale is None
            else (
                f"  scale={self.scale:.6g} zero_point={self.zero_point}"
                if not isinstance(self.scale, tuple)
                else f"  per-channel ({len(self.scale)} scales)"
            )
        )
        return f"  {self.name or '<unnamed>'}: {self.dtype} [{shape}]{sig}{q}"


@dataclass(frozen=True)
class InspectOp(Record):
    """One op of the model; ``subgraph`` is in the document only for ops outside the main subgraph (0)."""

    index: int
    name: str
    version: int
    custom_code: str | None
    subgraph: int | None = None

    def to_dict(self) -> dict[str, int | str | None]:
        doc: dict[str, int | str | None] = {
            "index": self.index,
            "name": self.name,
            "version": self.version,
            "custom_code": self.custom_code,
        }
        return doc if self.subgraph is None else {**doc, "subgraph": self.subgraph}


@dataclass(frozen=True)
class OpCount(Record):
    """A row of the ``op_histogram`` of inspect and quantize: how many ops of one name and version
    (:meth:`edgekit.tflite.model.ModelInfo.op_histogram_rows`)."""

    name: str
    version: int
    count: int


@dataclass(frozen=True)
class UltralyticsExport(Record):
    """Ultralytics' ``metadata.json`` packed after the flatbuffer: what ``detect`` takes from it (``names`` by class
    index, ``imgsz``, ``stride``, ``task``) and what else it says; a value of another type than written here is
    None (the file is untrusted); ``error`` when the file is no JSON object."""

    task: str | None = None
    version: str | None = None
    names: tuple[str, ...] | None = None
    imgsz: tuple[int, ...] | None = None
    stride: int | None = None
    batch: int | None = None
    channels: int | None = None
    end2end: bool | None = None
    description: str | None = None
    author: str | None = None
    date: str | None = None
    license: str | None = None
    error: str | None = None

    def line(self) -> str:
        if self.error:
            return f"Ultralytics metadata.json: {self.error}"
        names = self.names or ()
        listed = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
        imgsz = "x".join(map(str, self.imgsz)) if self.imgsz else None
        return (
            f"Ultralytics metadata.json: task {self.task}, imgsz {imgsz}, stride {self.stride}, version "
            f"{self.version}, {len(names)} class names" + (f" ({listed})" if names else "")
        )


@dataclass(frozen=True)
class TfliteMetadataInfo(Record):
    """TFLite metadata's (``TFLITE_METADATA``) model-level strings; ``error`` when it cannot be read."""

    name: str | None = None
    description: str | None = None
    version: str | None = None
    author: str | None = None
    license: str | None = None
    error: str | None = None

    def line(self) -> str:
        said = [
            f"{k} {v!r}"
            for k, v in (
                ("name", self.name),
                ("description", self.description),
                ("version", self.version),
                ("author", self.author),
                ("license", self.license),
            )
            if v
        ]
        return "TFLite metadata: " + (self.error or ", ".join(said) or "no name or description")


@dataclass(frozen=True)
class EdgekitRecordInfo(Record):
    """edgekit's record with the model: ``found_in`` (its metadata or a sidecar file), its preprocessing document,
    how many labels, and the rest (``provenance``); ``error`` when it cannot be read."""

    found_in: str | None = None
    preprocess: Mapping[str, Any] | None = None
    labels: int | None = None
    provenance: Mapping[str, Any] | None = None
    error: str | None = None

    def line(self) -> str:
        if self.error:
            return f"edgekit record: {self.error}"
        p = self.preprocess
        spec = (
            f"preprocessing {p.get('width')}x{p.get('height')} {p.get('channels')}, mean "
            f"{','.join(map(str, p.get('mean') or ()))}, std {','.join(map(str, p.get('std') or ()))}"
            if p
            else "no preprocessing"
        )
        return f"edgekit record: from {self.found_in}; {spec}; {self.labels} labels"


@dataclass(frozen=True)
class ConverterInfo(Record):
    """The converter that wrote the flatbuffer: the model's ``description`` (``MLIR Converted.``) and, from
    ``CONVERSION_METADATA`` (TensorFlow 2.9+, LiteRT), the TensorFlow version and converter API version."""

    description: str | None = None
    tensorflow_version: str | None = None
    api_version: int | None = None

    def line(self) -> str:
        tf = f", TensorFlow {self.tensorflow_version}" if self.tensorflow_version else ""
        api = f" (converter API v{self.api_version})" if self.api_version else ""
        return f"Converter: {self.description!r}{tf}{api}" if self.description else f"Converter:{tf[1:]}{api}"


@dataclass(frozen=True)
class ExporterMetadata(Record):
    """What the exporter wrote besides the graph (:mod:`edgekit.tflite.exporter_metadata`), each None when absent."""

    ultralytics: UltralyticsExport | None
    tflite_metadata: TfliteMetadataInfo | None
    edgekit: EdgekitRecordInfo | None
    converter: ConverterInfo | None = None

    def lines(self) -> list[str]:
        return [
            part.line()
            for part in (self.converter, self.ultralytics, self.tflite_metadata, self.edgekit)
            if part is not None
        ]


@dataclass(frozen=True)
class InspectResult(Record):
    """``edgekit inspect --json``: a .tflite model's I/O, quantization, ops and shapes, read without TensorFlow."""

    path: str | None  # None for a model read from bytes (tflite_model.ModelInfo.from_bytes)
    size_bytes: int
    edgetpu_compiled: bool
    subgraphs: int
    schema_version: int | None
    description: str | None
    min_runtime_version: str | None
    quantization: str
    dynamic_shapes: bool
    param_bytes: int
    edgetpu_bytes: int
    edgetpu: EdgeTpuSummary | None
    inputs: tuple[TensorSummary, ...]
    outputs: tuple[TensorSummary, ...]
    ops: tuple[InspectOp, ...]
    op_histogram: tuple[OpCount, ...]
    metadata: tuple[str, ...]
    exporter: ExporterMetadata | None = None

    def render_text(self) -> str:
        lines = [
            f"{self.path or 'the model (no file)'}: {self.size_bytes:,} bytes, {self.subgraphs} subgraph(s), {len(self.ops)} ops",
            f"Edge TPU compiled: {'yes' if self.edgetpu_compiled else 'no'}",
            f"Quantization: {self.quantization}",
            f"Shapes: {'DYNAMIC (some dimension is -1 in shape_signature)' if self.dynamic_shapes else 'static'}",
            f"Parameters: {self.param_bytes:,} bytes"
            + (
                f" on the CPU, {self.edgetpu_bytes:,} bytes of compiled Edge TPU program"
                if self.edgetpu_compiled
                else ""
            ),
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
        if self.exporter:
            lines += self.exporter.lines()
        return "\n".join(lines)
