"""Synthesize small .tflite flatbuffers for tests and benchmarks (no TensorFlow).

Uses the generated object API of TensorFlow Lite's schema shipped in ``ai_edge_litert``
(``schema_py_generated``). The models are structurally valid; they are meant for edgekit's
offline readers and rules, not necessarily for running.
"""

from __future__ import annotations

from typing import Any

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as S

_TYPES = {
    "float32": S.TensorType.FLOAT32,
    "int8": S.TensorType.INT8,
    "uint8": S.TensorType.UINT8,
    "int32": S.TensorType.INT32,
    "int16": S.TensorType.INT16,
    "int64": S.TensorType.INT64,
}
_NP = {
    "float32": np.float32,
    "int8": np.int8,
    "uint8": np.uint8,
    "int32": np.int32,
    "int16": np.int16,
    "int64": np.int64,
}


def _options(name: str, kw: dict[str, Any]) -> tuple[int, Any]:
    """(BuiltinOptions type, options object) for the op ``name`` with fields from ``kw``."""
    table = {
        "CONV_2D": ("Conv2DOptions", S.Conv2DOptionsT),
        "DEPTHWISE_CONV_2D": ("DepthwiseConv2DOptions", S.DepthwiseConv2DOptionsT),
        "FULLY_CONNECTED": ("FullyConnectedOptions", S.FullyConnectedOptionsT),
        "CONCATENATION": ("ConcatenationOptions", S.ConcatenationOptionsT),
        "SOFTMAX": ("SoftmaxOptions", S.SoftmaxOptionsT),
        "RESIZE_BILINEAR": ("ResizeBilinearOptions", S.ResizeBilinearOptionsT),
        "ADD": ("AddOptions", S.AddOptionsT),
        "AVERAGE_POOL_2D": ("Pool2DOptions", S.Pool2DOptionsT),
        "MAX_POOL_2D": ("Pool2DOptions", S.Pool2DOptionsT),
        "RESHAPE": ("ReshapeOptions", S.ReshapeOptionsT),
        "MEAN": ("ReducerOptions", S.ReducerOptionsT),
        "STRIDED_SLICE": ("StridedSliceOptions", S.StridedSliceOptionsT),
    }
    if name not in table:
        if kw:  # options silently dropped would make a test check something else than it says
            raise ValueError(f"tflite_builder has no options table for {name}: add it to _options")
        return 0, None
    kind, cls = table[name]
    obj = cls()
    for k, v in kw.items():
        setattr(obj, k, v)
    return getattr(S.BuiltinOptions, kind), obj


class GraphBuilder:
    """Tensors, ops and constant buffers of one subgraph, packed into a TFLite model."""

    def __init__(self) -> None:
        self.buffers: list[Any] = [S.BufferT()]  # buffer 0: the empty buffer
        self.tensors: list[Any] = []
        self.opcodes: dict[tuple[str, int, str | None], int] = {}
        self.codes: list[Any] = []
        self.ops: list[Any] = []

    def tensor(
        self,
        shape,
        dtype: str = "int8",
        data: np.ndarray | None = None,
        scale: float | list | None = 0.05,
        zero_point: int | list = 0,
        name: str | None = None,
        signature=None,
        variable: bool = False,
    ) -> int:
        t = S.TensorT()
        t.shape = list(shape)
        if signature is not None:
            t.shapeSignature = list(signature)
        t.type = _TYPES[dtype]
        t.name = name or f"t{len(self.tensors)}"
        t.isVariable = variable
        if data is not None:
            b = S.BufferT()
            b.data = np.ascontiguousarray(np.asarray(data, dtype=_NP[dtype])).view(np.uint8).reshape(-1)
            self.buffers.append(b)
            t.buffer = len(self.buffers) - 1
        else:
            t.buffer = 0
        if scale is not None and dtype in ("int8", "uint8", "int16", "int32"):
            q = S.QuantizationParametersT()
            q.scale = list(scale) if isinstance(scale, (list, tuple)) else [scale]
            zp = zero_point if isinstance(zero_point, (list, tuple)) else [zero_point] * len(q.scale)
            q.zeroPoint = list(zp)
            t.quantization = q
        self.tensors.append(t)
        return len(self.tensors) - 1

    def const(self, values, dtype: str = "int32") -> int:
        arr = np.asarray(values, dtype=_NP[dtype])
        return self.tensor(arr.shape, dtype, data=arr, scale=None)

    def op(
        self,
        name: str,
        inputs: list[int],
        outputs: list[int],
        version: int = 1,
        custom_code: str | None = None,
        **options,
    ) -> int:
        key = (name, version, custom_code)
        if key not in self.opcodes:
            oc = S.OperatorCodeT()
            code = getattr(S.BuiltinOperator, name)
            oc.builtinCode = code
            oc.deprecatedBuiltinCode = min(code, 127)
            oc.version = version
            if custom_code:
                oc.customCode = custom_code
            self.codes.append(oc)
            self.opcodes[key] = len(self.codes) - 1
        o = S.OperatorT()
        o.opcodeIndex = self.opcodes[key]
        o.inputs = list(inputs)
        o.outputs = list(outputs)
        o.builtinOptionsType, o.builtinOptions = _options(name, options)
        self.ops.append(o)
        return len(self.ops) - 1

    def build(self, inputs: list[int], outputs: list[int]) -> bytes:
        g = S.SubGraphT()
        g.tensors, g.operators, g.name = self.tensors, self.ops, "main"
        g.inputs, g.outputs = list(inputs), list(outputs)
        m = S.ModelT()
        m.version = 3
        m.operatorCodes = self.codes
        m.subgraphs = [g]
        m.buffers = self.buffers
        m.description = "edgekit test model"
        b = flatbuffers.Builder(1024)
        b.Finish(m.Pack(b), file_identifier=b"TFL3")
        return bytes(b.Output())


def conv_chain(n_convs: int, channels: int = 32, size: int = 16, seed: int = 0) -> bytes:
    """An int8 CNN: input -> n x (CONV_2D 3x3 + ReLU) -> AVERAGE_POOL -> RESHAPE -> FULLY_CONNECTED -> SOFTMAX."""
    rng = np.random.default_rng(seed)
    gb = GraphBuilder()
    x = gb.tensor([1, size, size, channels], "int8", name="input")
    first = x
    for _ in range(n_convs):
        w = gb.tensor(
            [channels, 3, 3, channels],
            "int8",
            data=rng.integers(-127, 127, (channels, 3, 3, channels)),
            scale=[0.01] * channels,
            zero_point=[0] * channels,
        )
        bias = gb.tensor(
            [channels],
            "int32",
            data=rng.integers(-100, 100, channels),
            scale=[0.0005] * channels,
            zero_point=[0] * channels,
        )
        y = gb.tensor([1, size, size, channels], "int8")
        gb.op(
            "CONV_2D",
            [x, w, bias],
            [y],
            version=3,
            padding=S.Padding.SAME,
            strideW=1,
            strideH=1,
            fusedActivationFunction=S.ActivationFunctionType.RELU,
            dilationWFactor=1,
            dilationHFactor=1,
        )
        x = y
    pooled = gb.tensor([1, 1, 1, channels], "int8")
    gb.op(
        "AVERAGE_POOL_2D",
        [x],
        [pooled],
        version=2,
        padding=S.Padding.VALID,
        strideW=1,
        strideH=1,
        filterWidth=size,
        filterHeight=size,
    )
    flat = gb.tensor([1, channels], "int8")
    gb.op("RESHAPE", [pooled, gb.const([1, channels])], [flat])
    w = gb.tensor([10, channels], "int8", data=rng.integers(-127, 127, (10, channels)))
    b = gb.tensor([10], "int32", data=np.zeros(10), scale=0.0005)
    logits = gb.tensor([1, 10], "int8")
    gb.op("FULLY_CONNECTED", [flat, w, b], [logits], version=4)
    probs = gb.tensor([1, 10], "int8", scale=1 / 256, zero_point=-128)
    gb.op("SOFTMAX", [logits], [probs], version=2, beta=1.0)
    return gb.build([first], [probs])


def fc_chain(num_ops: int, width: int, padding_bytes: int = 0, seed: int = 0) -> bytes:
    """``num_ops`` int8 FULLY_CONNECTED layers of ``width`` units; each adds an unused constant of
    ``padding_bytes``, so the file grows while the graph stays the same (for size-scaling benchmarks)."""
    rng = np.random.default_rng(seed)
    gb = GraphBuilder()
    x = first = gb.tensor([1, width], "int8", name="input")
    for i in range(num_ops):
        w = gb.tensor([width, width], "int8", data=rng.integers(-127, 127, (width, width)), name=f"fc{i}/weights")
        b = gb.tensor([width], "int32", data=np.zeros(width), scale=0.0004, name=f"fc{i}/bias")
        if padding_bytes:
            gb.tensor([padding_bytes], "int8", data=np.zeros(padding_bytes), name=f"fc{i}/padding")
        y = gb.tensor([1, width], "int8", name=f"fc{i}/out")
        gb.op("FULLY_CONNECTED", [x, w, b], [y], version=4)
        x = y
    return gb.build([first], [x])


def cut_chain(num_ops: int) -> bytes:
    """``num_ops`` int8 ADDs in a chain with an op the Edge TPU lacks (SIN) halfway: every ADD after it is cut off
    the one Edge TPU subgraph (for check's scaling with many cut-off ops)."""
    gb = GraphBuilder()
    x = first = gb.tensor([1, 4], "int8", name="input")
    for i in range(num_ops):
        y = gb.tensor([1, 4], "int8")
        gb.op("SIN" if i == num_ops // 2 else "ADD", [x] if i == num_ops // 2 else [x, x], [y])
        x = y
    return gb.build([first], [x])
