"""Synthetic int8 .tflite models of chosen op count and weight bytes, for benchmarks.

A chain of FULLY_CONNECTED ops (int8 activations, int8 weights, int32 bias) written with the
flatbuffer object API that ships with ai-edge-litert, so no TensorFlow conversion is needed.
"""

from __future__ import annotations

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as S


def _quant(scale: float, zero_point: int = 0):
    q = S.QuantizationParametersT()
    q.scale, q.zeroPoint = [scale], [zero_point]
    return q


def fc_chain(num_ops: int, width: int, weight_bytes_per_op: int | None = None) -> bytes:
    """``num_ops`` FC layers of ``width`` units; weights padded to ``weight_bytes_per_op`` if given.

    Padding goes into an unused constant buffer per op, so the graph stays small while the file grows.
    """
    rng = np.random.default_rng(0)
    model = S.ModelT()
    model.version = 3
    model.description = "edgekit synthetic benchmark model"
    code = S.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = S.BuiltinOperator.FULLY_CONNECTED
    code.version = 4
    model.operatorCodes = [code]
    buffers = [S.BufferT()]  # buffer 0: empty, by convention
    tensors, ops = [], []

    def tensor(name, shape, ttype, data=None, scale=0.02):
        t = S.TensorT()
        t.name, t.shape, t.type, t.quantization = name, list(shape), ttype, _quant(scale)
        t.buffer = 0
        if data is not None:
            b = S.BufferT()
            b.data = np.frombuffer(data.tobytes(), np.uint8)
            buffers.append(b)
            t.buffer = len(buffers) - 1
        tensors.append(t)
        return len(tensors) - 1

    x = tensor("input", (1, width), S.TensorType.INT8)
    first = x
    for i in range(num_ops):
        w = tensor(f"fc{i}/weights", (width, width), S.TensorType.INT8,
                   rng.integers(-127, 127, (width, width), dtype=np.int8))
        b = tensor(f"fc{i}/bias", (width,), S.TensorType.INT32, np.zeros(width, np.int32), scale=0.0004)
        if weight_bytes_per_op and weight_bytes_per_op > width * width:
            tensor(f"fc{i}/padding", (weight_bytes_per_op,), S.TensorType.INT8,
                   np.zeros(weight_bytes_per_op, np.int8))
        y = tensor(f"fc{i}/out", (1, width), S.TensorType.INT8)
        op = S.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = 0, [x, w, b], [y]
        op.builtinOptionsType = S.BuiltinOptions.FullyConnectedOptions
        op.builtinOptions = S.FullyConnectedOptionsT()
        ops.append(op)
        x = y
    g = S.SubGraphT()
    g.tensors, g.operators, g.inputs, g.outputs, g.name = tensors, ops, [first], [x], "main"
    model.subgraphs, model.buffers = [g], buffers
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())
