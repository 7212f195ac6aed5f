"""FULLY_CONNECTED weights quantized per channel, requantized per tensor, for the runtimes a Coral board has.

TensorFlow's converter (and onnx2tf through it) now quantizes a FULLY_CONNECTED's weights per output channel
(one scale each), with no new op version to say so. tflite-runtime 2.7 (a Coral Dev Board's) reads only a
per-tensor scale there: measured on tests/fixtures/exports/digits_cnn_onnx2tf_full_integer_quant.tflite, it
outputs the zero point for every class (all scores 0), where LiteRT gives the right digit; TFLite Micro had the
same wrong output and now refuses such models (tensorflow/tflite-micro#2602). Requantized to the largest
channel scale (the weights ``round(q * s_c / s)``, the bias ``round(b * s_c / s)`` at ``input_scale * s``), every
runtime computes the same layer, at most one bit coarser on the channels of smaller scale.
"""

from __future__ import annotations

from typing import Any

import numpy as np

FULLY_CONNECTED = 9  # TFLite's BuiltinOperator


def per_channel_fc_ops(model: Any) -> list[int]:
    """The FULLY_CONNECTED ops of the first subgraph whose int8 weights hold a scale per channel."""
    graph = model.subgraphs[0]
    return [
        i
        for i, op in enumerate(graph.operators or [])
        if _code(model, op) == FULLY_CONNECTED
        and len(op.inputs) > 1
        and op.inputs[1] >= 0
        and _scales(graph.tensors[op.inputs[1]]).size > 1
        and _data(model, graph.tensors[op.inputs[1]]) is not None
    ]


def requantize(model: Any) -> list[int]:
    """Each FULLY_CONNECTED of :func:`per_channel_fc_ops` made per-tensor in ``model`` (the schema's object
    tree, changed in place); the indices of the ops changed."""
    graph = model.subgraphs[0]
    done = per_channel_fc_ops(model)
    for i in done:
        op = graph.operators[i]
        weights = graph.tensors[op.inputs[1]]
        scales = _scales(weights).astype(np.float64)
        s = float(scales.max())
        ratio = scales / s
        data = _data(model, weights)
        assert data is not None  # per_channel_fc_ops keeps only ops whose weights hold data
        w = data.astype(np.int8).astype(np.float64).reshape(len(scales), -1)
        _set_data(model, weights, np.clip(np.round(w * ratio[:, None]), -127, 127).astype(np.int8))
        _per_tensor(weights, s)
        bias = graph.tensors[op.inputs[2]] if len(op.inputs) > 2 and op.inputs[2] >= 0 else None
        bias_data = _data(model, bias) if bias is not None else None
        if bias is not None and bias_data is not None:
            b = bias_data.view(np.int32).astype(np.float64)
            _set_data(model, bias, np.clip(np.round(b * ratio), -(2**31), 2**31 - 1).astype(np.int32))
            input_scale = float(_scales(graph.tensors[op.inputs[0]])[0])
            _per_tensor(bias, input_scale * s)
    return done


def _code(model: Any, op: Any) -> int:
    code = model.operatorCodes[op.opcodeIndex]
    return max(int(code.builtinCode or 0), int(code.deprecatedBuiltinCode or 0))


def _scales(tensor: Any) -> np.ndarray:
    q = tensor.quantization
    return np.asarray(q.scale if q is not None and q.scale is not None else [], np.float64)


def _data(model: Any, tensor: Any) -> np.ndarray | None:
    buf = model.buffers[tensor.buffer] if 0 < tensor.buffer < len(model.buffers) else None
    if buf is None or buf.data is None or not len(buf.data):
        return None
    return np.frombuffer(bytes(bytearray(buf.data)), np.int8 if tensor.type == 9 else np.uint8)


def _set_data(model: Any, tensor: Any, values: np.ndarray) -> None:
    model.buffers[tensor.buffer].data = np.frombuffer(values.tobytes(), np.uint8)


def _per_tensor(tensor: Any, scale: float) -> None:
    tensor.quantization.scale = [scale]
    tensor.quantization.zeroPoint = [0]
    tensor.quantization.quantizedDimension = 0
