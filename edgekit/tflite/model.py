"""Read a .tflite model without TensorFlow.

:func:`load` (a path) and :meth:`ModelInfo.from_bytes` parse the TensorFlow Lite flatbuffer with a
small bounds-checked reader written against TensorFlow Lite's ``schema.fbs``: every offset, vector
length and string is checked against the file before it is followed, so a damaged or hostile file
raises :class:`~edgekit.errors.InvalidModelError` ("not a valid TFLite model: <why>") and never
crashes, hangs or allocates more than the file's own size. Large files are memory-mapped and
constant buffers are never copied, so parsing time grows with the number of ops and tensors, not
with the parameter bytes.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgekit.board.flatbuffer import Reader, Table
from edgekit.errors import InputError, InvalidModelError, regular_file
from edgekit.results.inspect import OpCount  # the rows of op_histogram_rows (inspect and quantize show them)
from edgekit.tflite.schema_names import BUILTIN_OPS, TENSOR_TYPES

if TYPE_CHECKING:
    from edgekit.results.inspect import InspectResult, TensorSummary
    from edgekit.tflite.edgetpu_package import Package

EDGETPU_CUSTOM_OP = "edgetpu-custom-op"
#: Tensor types that make an op a float op (the Edge TPU computes on 8-bit integers only).
FLOAT_DTYPES = frozenset({"float32", "float16", "float64", "bfloat16"})
FILE_IDENTIFIER = b"TFL3"

_NUMPY_DTYPES = {
    "float32": "<f4",
    "float16": "<f2",
    "float64": "<f8",
    "int8": "i1",
    "uint8": "u1",
    "int16": "<i2",
    "uint16": "<u2",
    "int32": "<i4",
    "uint32": "<u4",
    "int64": "<i8",
    "uint64": "<u8",
    "bool": "?",
}


# Scalar builtin options worth exposing, by op name: (field name, slot, struct format, default).
_FUSED = ("fused_activation_function", "b")
_OPTIONS: dict[str, list[tuple[str, int, str, Any]]] = {
    "CONV_2D": [
        ("padding", 0, "b", 0),
        ("stride_w", 1, "i", 0),
        ("stride_h", 2, "i", 0),
        ("fused_activation_function", 3, "b", 0),
        ("dilation_w_factor", 4, "i", 1),
        ("dilation_h_factor", 5, "i", 1),
    ],
    "DEPTHWISE_CONV_2D": [
        ("padding", 0, "b", 0),
        ("stride_w", 1, "i", 0),
        ("stride_h", 2, "i", 0),
        ("depth_multiplier", 3, "i", 0),
        ("fused_activation_function", 4, "b", 0),
        ("dilation_w_factor", 5, "i", 1),
        ("dilation_h_factor", 6, "i", 1),
    ],
    "FULLY_CONNECTED": [
        ("fused_activation_function", 0, "b", 0),
        ("weights_format", 1, "b", 0),
        ("keep_num_dims", 2, "?", False),
    ],
    "CONCATENATION": [("axis", 0, "i", 0), ("fused_activation_function", 1, "b", 0)],
    "STRIDED_SLICE": [
        ("begin_mask", 0, "i", 0),
        ("end_mask", 1, "i", 0),
        ("ellipsis_mask", 2, "i", 0),
        ("new_axis_mask", 3, "i", 0),
        ("shrink_axis_mask", 4, "i", 0),
        ("offset", 5, "?", False),
    ],
    "PACK": [("values_count", 0, "i", 0), ("axis", 1, "i", 0)],
    "UNPACK": [("num", 0, "i", 0), ("axis", 1, "i", 0)],
    "SOFTMAX": [("beta", 0, "f", 0.0)],
    "RESIZE_BILINEAR": [("align_corners", 2, "?", False), ("half_pixel_centers", 3, "?", False)],
    "RESIZE_NEAREST_NEIGHBOR": [("align_corners", 0, "?", False), ("half_pixel_centers", 1, "?", False)],
    "ADD": [("fused_activation_function", 0, "b", 0)],
    "SUB": [("fused_activation_function", 0, "b", 0)],
    "MUL": [("fused_activation_function", 0, "b", 0)],
    "SPLIT": [("num_splits", 0, "i", 0)],
    "TRANSPOSE_CONV": [
        ("padding", 0, "b", 0),
        ("stride_w", 1, "i", 0),
        ("stride_h", 2, "i", 0),
        ("fused_activation_function", 3, "b", 0),
    ],
}
for _pool in ("AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D"):
    _OPTIONS[_pool] = [
        ("padding", 0, "b", 0),
        ("stride_w", 1, "i", 0),
        ("stride_h", 2, "i", 0),
        ("filter_width", 3, "i", 0),
        ("filter_height", 4, "i", 0),
        ("fused_activation_function", 5, "b", 0),
    ]
for _reducer in ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD", "REDUCE_ANY"):
    _OPTIONS[_reducer] = [("keep_dims", 0, "?", False)]
_OPTIONS["UNIDIRECTIONAL_SEQUENCE_LSTM"] = [("fused_activation_function", 0, "b", 0), ("time_major", 3, "?", False)]


@dataclass(frozen=True)
class Quantization:
    """Affine quantization: ``real = scale * (q - zero_point)``, per tensor or per channel."""

    scales: tuple[float, ...]
    zero_points: tuple[int, ...]
    quantized_dimension: int = 0

    @property
    def per_channel(self) -> bool:
        return len(self.scales) > 1

    @property
    def scale(self) -> float:
        return self.scales[0]

    @property
    def zero_point(self) -> int:
        return self.zero_points[0] if self.zero_points else 0


@dataclass(frozen=True)
class TensorInfo:
    index: int
    name: str
    shape: tuple[int, ...]
    shape_signature: tuple[int, ...]
    dtype: str
    quantization: Quantization | None
    buffer: int
    buffer_bytes: int
    is_variable: bool = False

    @property
    def is_constant(self) -> bool:
        """A compile-time constant: its data is stored in the model."""
        return self.buffer_bytes > 0

    @property
    def is_dynamic(self) -> bool:
        return any(d < 0 for d in self.shape_signature)


@dataclass(frozen=True)
class OpInfo:
    index: int
    name: str
    version: int
    custom_code: str | None
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: dict[str, int | float | bool] = field(default_factory=dict, compare=False)  # see _OPTIONS
    custom_options_bytes: int = 0  # for edgetpu-custom-op: the compiled Edge TPU program and its parameters
    custom_options_offset: int = field(default=0, compare=False)  # where those bytes start in the file


@dataclass(frozen=True)
class SubgraphInfo:
    index: int
    name: str
    tensors: tuple[TensorInfo, ...]
    ops: tuple[OpInfo, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]

    def tensor(self, i: int) -> TensorInfo | None:
        """Tensor ``i``, or None for an optional input (index -1)."""
        return self.tensors[i] if 0 <= i < len(self.tensors) else None


@dataclass(frozen=True)
class _Buffer:
    start: int
    size: int


class ModelInfo:
    """Everything edgekit needs to know about a .tflite model, read from its bytes."""

    def __init__(self, data: Any, path: str | None = None):
        self._data = data
        self.path = path
        self.size_bytes = len(data)
        try:
            self._parse(Reader(data))
        except InvalidModelError:
            raise
        except (struct.error, ValueError, IndexError, OverflowError, MemoryError, RecursionError) as exc:
            raise InvalidModelError(f"malformed flatbuffer ({type(exc).__name__}: {exc})") from exc

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, path: str | None = None) -> ModelInfo:
        return cls(memoryview(data).cast("B") if not isinstance(data, (bytes, bytearray)) else data, path)

    # -- parsing -------------------------------------------------------------------------------
    def _parse(self, r: Reader) -> None:
        if r.size < 8:
            raise InvalidModelError(f"file is too small ({r.size} bytes)")
        ident = bytes(r.buf[4:8])
        if ident != FILE_IDENTIFIER:
            raise InvalidModelError(f"file identifier is {ident!r}, expected {FILE_IDENTIFIER!r}")
        model = r.table(r.deref(0, "root table"), "model")
        self.schema_version: int = model.scalar(0, "I")
        self.description: str = model.string(3, "model description") or ""

        self._buffers: list[_Buffer] = []
        for b in model.tables(4, "buffers"):
            offset, size = b.scalar(1, "Q"), b.scalar(2, "Q")
            if offset > 1:  # data outside the flatbuffer (models over 2 GB)
                r._check(offset, size, "external buffer")
                self._buffers.append(_Buffer(offset, size))
            else:
                start, n = b.raw_vector(0, 1, "buffer data")
                self._buffers.append(_Buffer(start, n))

        opcodes = []
        for oc in model.tables(1, "operator codes"):
            code = max(oc.scalar(0, "b"), oc.scalar(3, "i"))  # codes >127 only in builtin_code
            name = BUILTIN_OPS.get(code, f"BUILTIN_{code}")
            opcodes.append((name, oc.scalar(2, "i", 1), oc.string(1, "custom code")))

        self.subgraphs: tuple[SubgraphInfo, ...] = tuple(
            self._parse_subgraph(i, g, opcodes) for i, g in enumerate(model.tables(2, "subgraphs"))
        )
        if not self.subgraphs:
            raise InvalidModelError("the model has no subgraph")

        self.metadata: dict[str, bytes] = {}
        for i, m in enumerate(model.tables(6, "metadata")):
            name = m.string(0, "metadata name") or f"metadata_{i}"
            self.metadata[name] = self._buffer_bytes(m.scalar(1, "I"), "metadata buffer")

    def _parse_subgraph(self, index: int, g: Table, opcodes: list) -> SubgraphInfo:
        tensors = []
        for t_index, t in enumerate(g.tables(0, f"subgraph {index} tensors")):
            shape = t.scalars(0, "i", "tensor shape")
            signature = t.scalars(7, "i", "tensor shape signature") or shape
            type_code = t.scalar(1, "b")
            q = t.table(4, "quantization")
            quant = None
            if q is not None:
                scales = q.scalars(2, "f", "quantization scales")
                if scales:
                    quant = Quantization(scales, q.scalars(3, "q", "quantization zero points"), q.scalar(6, "i"))
            buf_index = t.scalar(2, "I")
            if buf_index >= len(self._buffers) and self._buffers:
                raise InvalidModelError(f"tensor {t_index} refers to buffer {buf_index} of {len(self._buffers)}")
            buf_bytes = self._buffers[buf_index].size if buf_index < len(self._buffers) else 0
            tensors.append(
                TensorInfo(
                    index=t_index,
                    name=t.string(3, "tensor name") or "",
                    shape=tuple(shape),
                    shape_signature=tuple(signature),
                    dtype=TENSOR_TYPES.get(type_code, f"type_{type_code}"),
                    quantization=quant,
                    buffer=buf_index,
                    buffer_bytes=buf_bytes,
                    is_variable=bool(t.scalar(5, "?")),
                )
            )
        n = len(tensors)

        def tensor_refs(values: tuple, what: str) -> tuple[int, ...]:
            for v in values:
                if v < -1 or v >= n:
                    raise InvalidModelError(f"{what} refers to tensor {v}, but subgraph {index} has {n}")
            return tuple(values)

        ops = []
        for o_index, o in enumerate(g.tables(3, f"subgraph {index} operators")):
            code_index = o.scalar(0, "I")
            if code_index >= len(opcodes):
                raise InvalidModelError(
                    f"operator {o_index} uses opcode {code_index}, but the model has {len(opcodes)}"
                )
            name, version, custom = opcodes[code_index]
            options = {}
            if name in _OPTIONS:
                opt = o.table(4, f"operator {o_index} options")
                options = {k: (opt.scalar(slot, fmt, d) if opt else d) for k, slot, fmt, d in _OPTIONS[name]}
            ops.append(
                OpInfo(
                    o_index,
                    name,
                    version,
                    custom,
                    tensor_refs(o.scalars(1, "i", "operator inputs"), f"operator {o_index}"),
                    tensor_refs(o.scalars(2, "i", "operator outputs"), f"operator {o_index}"),
                    options,
                    *self._custom_options_span(o),
                )
            )
        return SubgraphInfo(
            index,
            g.string(4, "subgraph name") or "",
            tuple(tensors),
            tuple(ops),
            tensor_refs(g.scalars(1, "i", "subgraph inputs"), "subgraph inputs"),
            tensor_refs(g.scalars(2, "i", "subgraph outputs"), "subgraph outputs"),
        )

    @staticmethod
    def _custom_options_span(op: Table) -> tuple[int, int]:
        """(size, offset) of an op's custom options bytes."""
        start, n = op.raw_vector(5, 1, "custom options")
        large = op.scalar(10, "Q")  # custom options stored after the flatbuffer (models over 2 GB)
        if not n and large:
            start = op.scalar(9, "Q")
            op.r._check(start, large, "large custom options")
        return (n, start) if n else (large, start if large else 0)

    def _buffer_bytes(self, index: int, what: str) -> bytes:
        if index >= len(self._buffers):
            raise InvalidModelError(f"{what} {index} does not exist ({len(self._buffers)} buffers)")
        b = self._buffers[index]
        return bytes(self._data[b.start : b.start + b.size])

    # -- views -----------------------------------------------------------------------------------
    @property
    def main(self) -> SubgraphInfo:
        return self.subgraphs[0]

    @property
    def ops(self) -> tuple[OpInfo, ...]:
        """Ops of the main subgraph in execution order."""
        return self.main.ops

    @property
    def tensors(self) -> tuple[TensorInfo, ...]:
        return self.main.tensors

    @property
    def inputs(self) -> list[TensorInfo]:
        return [self.main.tensors[i] for i in self.main.inputs if i >= 0]

    @property
    def outputs(self) -> list[TensorInfo]:
        return [self.main.tensors[i] for i in self.main.outputs if i >= 0]

    @cached_property
    def is_compiled(self) -> bool:
        """True when the Edge TPU compiler has replaced ops with its custom op."""
        return any(op.custom_code == EDGETPU_CUSTOM_OP for g in self.subgraphs for op in g.ops)

    @cached_property
    def param_bytes(self) -> int:
        """Bytes of constant tensor data (weights, biases, constants), each buffer counted once."""
        used = {t.buffer for g in self.subgraphs for t in g.tensors if t.buffer_bytes}
        return sum(self._buffers[i].size for i in used)

    @cached_property
    def edgetpu_bytes(self) -> int:
        """Bytes of the compiled Edge TPU programs (their parameters included); 0 when not compiled."""
        return sum(
            op.custom_options_bytes for g in self.subgraphs for op in g.ops if op.custom_code == EDGETPU_CUSTOM_OP
        )

    @cached_property
    def edgetpu_packages(self) -> list[Package]:
        """The package the compiler wrote in each ``edgetpu-custom-op`` (:mod:`edgekit.tflite.edgetpu_package`)."""
        from edgekit.tflite import edgetpu_package

        return [
            edgetpu_package.read(
                self._data[op.custom_options_offset : op.custom_options_offset + op.custom_options_bytes],
                g.index,
                op.index,
            )
            for g in self.subgraphs
            for op in g.ops
            if op.custom_code == EDGETPU_CUSTOM_OP
        ]

    @property
    def min_runtime_version(self) -> str | None:
        raw = self.metadata.get("min_runtime_version")
        return raw.rstrip(b"\0").decode("ascii", "replace") if raw else None

    @cached_property
    def has_dynamic_shapes(self) -> bool:
        return any(t.is_dynamic for g in self.subgraphs for t in g.tensors)

    @cached_property
    def quantization_state(self) -> str:
        """``full-int8`` (no float computation), ``float`` (no integer ops) or ``mixed``.

        Looks at every op's activation tensors (non-constant inputs and outputs): an op computing
        on float32/float16 is a float op. Compiled Edge TPU ops count as integer.
        """
        float_ops = int_ops = 0
        for g in self.subgraphs:
            for op in g.ops:
                if op.custom_code == EDGETPU_CUSTOM_OP:
                    int_ops += 1
                    continue
                dtypes = {t.dtype for i in op.inputs + op.outputs if (t := g.tensor(i)) and not t.is_constant}
                if dtypes & FLOAT_DTYPES:
                    float_ops += 1
                else:
                    int_ops += 1
        if float_ops and int_ops:
            return "mixed"
        return "float" if float_ops else "full-int8"

    def op_histogram(self) -> dict[tuple[str, int], int]:
        """Count of ops by (name, version) over all subgraphs."""
        hist: dict[tuple[str, int], int] = {}
        for g in self.subgraphs:
            for op in g.ops:
                key = (op.custom_code if op.name == "CUSTOM" and op.custom_code else op.name, op.version)
                hist[key] = hist.get(key, 0) + 1
        return hist

    def op_histogram_rows(self) -> list[OpCount]:
        """:meth:`op_histogram` as the ``op_histogram`` rows of inspect and quantize: sorted by name, version."""
        return [OpCount(n, v, c) for (n, v), c in sorted(self.op_histogram().items())]

    def constant_value(self, tensor: TensorInfo):
        """The data of a constant tensor as a numpy array (a view, not a copy), or None. Shaped as the tensor when
        its buffer holds exactly the shape's elements; flat otherwise (a damaged model, or a shape with -1)."""
        import numpy as np

        if not tensor.is_constant or tensor.dtype not in _NUMPY_DTYPES:
            return None
        b = self._buffers[tensor.buffer]
        dtype = np.dtype(_NUMPY_DTYPES[tensor.dtype])
        count = b.size // dtype.itemsize
        arr = np.frombuffer(self._data, dtype=dtype, count=count, offset=b.start)
        n = 1
        for d in tensor.shape:
            n *= d
        return arr.reshape(tensor.shape) if n == count and all(d >= 0 for d in tensor.shape) else arr


def load(path: str | os.PathLike) -> ModelInfo:
    """Parse the model file at ``path`` (memory-mapped, never copied)."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{p} is a folder, not a .tflite file", "pass the .tflite file itself")
    regular_file(p)
    try:
        with open(p, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            data: Any = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    except FileNotFoundError:
        raise InputError(f"no such file: {p}", "check the path") from None
    except OSError as exc:
        raise InputError(f"cannot read {p}: {exc.strerror or exc}", "check the file's permissions") from None
    try:
        return ModelInfo(data, str(p))
    except InvalidModelError:
        source = source_model_kind(bytes(data[:64]), p)
        if source:
            kind, hint = source
            raise InvalidModelError(f"{p} is {kind}", hint) from None
        raise


#: The first bytes of an ONNX ModelProto: field 1 (ir_version, a varint), then another field of ModelProto
#: (producer_name 0x12, producer_version 0x1a, domain 0x22, model_version 0x28, doc_string 0x32, graph 0x3a,
#: opset_import 0x42, metadata_props 0x72, functions 0xa2): protobuf as torch.onnx.export and onnx.save write it.
_ONNX_NEXT_TAGS = (0x12, 0x1A, 0x22, 0x28, 0x32, 0x3A, 0x42, 0x72, 0xA2)


def source_model_kind(head: bytes, path: Path) -> tuple[str, str] | None:
    """(what the file is, which command takes it) for a model that is not a .tflite: Keras, ONNX or PyTorch,
    told by its first bytes (and, for a zip, its entries: torch.save writes ``<name>/data.pkl``)."""
    if head.startswith(b"\x89HDF\r\n\x1a\n"):
        return "a Keras .h5 (HDF5) file", f"quantize it first: edgekit quantize {path}"
    if head.startswith(b"PK\x03\x04"):
        import zipfile

        try:
            with zipfile.ZipFile(path) as z:
                names = z.namelist()
        except (zipfile.BadZipFile, OSError):
            names = []
        if any(n == "data.pkl" or n.endswith("/data.pkl") for n in names):
            return (
                "a PyTorch file (torch.save: a zip holding a pickle)",
                "export it to ONNX (torch.onnx.export), then: edgekit quantize model.onnx --calib IMAGES",
            )
        return "a zip file (a Keras .keras?)", f"quantize it first: edgekit quantize {path}"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return (
            "a Python pickle (a PyTorch file?)",
            "export it to ONNX (torch.onnx.export), then: edgekit quantize model.onnx --calib IMAGES",
        )
    if len(head) > 3 and head[0] == 0x08 and 0 < head[1] < 0x80 and head[2] in _ONNX_NEXT_TAGS:
        hint = (
            f"quantize it to a full-int8 .tflite first: edgekit quantize {path} --calib IMAGES; that needs the "
            "onnx extra: pip install onnx onnxruntime, or '.[onnx]' in an edgekit checkout"
        )
        return "an ONNX model", hint
    return None


def tensor_summary(t: TensorInfo) -> TensorSummary:
    """A tensor as inspect shows it: one scale and zero point, or one per channel (tuples)."""
    from edgekit.results.inspect import TensorSummary

    q = t.quantization
    return TensorSummary(
        t.name,
        t.dtype,
        tuple(t.shape),
        tuple(t.shape_signature),
        q.scale if q and not q.per_channel else (tuple(q.scales) if q else None),
        q.zero_point if q and not q.per_channel else (tuple(q.zero_points) if q else None),
    )


def summary(info: ModelInfo) -> InspectResult:
    """What ``edgekit inspect`` reports (its ``--json`` schema in docs/commands/inspect.md)."""
    from edgekit.results.inspect import InspectResult
    from edgekit.tflite import edgetpu_package

    edgetpu = edgetpu_package.summary(info.edgetpu_packages)
    return InspectResult.from_dict(
        {
            "path": info.path,
            "size_bytes": info.size_bytes,
            "edgetpu_compiled": info.is_compiled,
            "subgraphs": len(info.subgraphs),
            "schema_version": info.schema_version,
            "description": info.description,
            "min_runtime_version": info.min_runtime_version,
            "quantization": info.quantization_state,
            "dynamic_shapes": info.has_dynamic_shapes,
            "param_bytes": info.param_bytes,
            "edgetpu_bytes": info.edgetpu_bytes,
            "edgetpu": edgetpu.to_dict() if edgetpu else None,
            "inputs": [tensor_summary(t).to_dict() for t in info.inputs],
            "outputs": [tensor_summary(t).to_dict() for t in info.outputs],
            "ops": [
                {
                    "index": op.index,
                    "name": op.name,
                    "version": op.version,
                    "custom_code": op.custom_code,
                    **({"subgraph": g.index} if g.index else {}),
                }
                for g in info.subgraphs
                for op in g.ops
            ],
            "op_histogram": [row.to_dict() for row in info.op_histogram_rows()],
            "metadata": sorted(info.metadata),
        }
    )
