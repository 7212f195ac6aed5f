"""Small runnable detector .tflite models for each output layout, built without TensorFlow.

Each model's outputs are slices of its own input: RESHAPE the int8 image input to a row, STRIDED_SLICE
a span per output, RESHAPE it to the layout's shape (then optionally QUANTIZE to another scale or
DEQUANTIZE to float). So a test chooses the raw outputs exactly by writing the image that carries
them (:func:`image_for`), and the real interpreter runs the model. The ``postprocess`` model runs
TensorFlow Lite's real ``TFLite_Detection_PostProcess`` custom op (built into the interpreter) on
slices of the input, with constant anchors.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from flatbuffers import flexbuffers

from tests.tflite_builder import GraphBuilder, S

INPUT_SCALE = 1 / 128  # int8 input: real = (q + 128) / 128 = pixel / 128 (0..2)
INPUT_ZP = -128


def slice_model(
    input_hw: tuple[int, int],
    outputs: Sequence[dict[str, Any]],
    input_scale: float = INPUT_SCALE,
    input_zp: int = INPUT_ZP,
    names: Sequence[str] | None = None,
) -> bytes:
    """outputs: dicts with ``shape`` and optional ``requant`` ((scale, zp)) or ``float`` (True)."""
    g = GraphBuilder()
    h, w = input_hw
    total = h * w * 3
    x = g.tensor([1, h, w, 3], "int8", scale=input_scale, zero_point=input_zp, name="images")
    flat = g.tensor([1, total], "int8", scale=input_scale, zero_point=input_zp)
    g.op("RESHAPE", [x, g.const([1, total])], [flat], new_shape=[1, total])
    outs, offset = [], 0
    for k, spec in enumerate(outputs):
        shape = list(spec["shape"])
        size = int(np.prod(shape))
        assert offset + size <= total, "the input is too small for these outputs"
        part = g.tensor([1, size], "int8", scale=input_scale, zero_point=input_zp)
        g.op("STRIDED_SLICE", [flat, g.const([0, offset]), g.const([1, offset + size]), g.const([1, 1])], [part])
        name = names[k] if names else f"out{k}"
        last = spec.get("requant") is None and not spec.get("float")
        shaped = g.tensor(shape, "int8", scale=input_scale, zero_point=input_zp, name=name if last else None)
        g.op("RESHAPE", [part, g.const(shape)], [shaped], new_shape=shape)
        if spec.get("requant") is not None:
            s, z = spec["requant"]
            out = g.tensor(shape, "int8", scale=s, zero_point=z, name=name)
            g.op("QUANTIZE", [shaped], [out])
            shaped = out
        elif spec.get("float"):
            out = g.tensor(shape, "float32", scale=None, name=name)
            g.op("DEQUANTIZE", [shaped], [out])
            shaped = out
        outs.append(shaped)
        offset += size
    return g.build([x], outs)


def image_for(
    input_hw: tuple[int, int], values: Sequence[np.ndarray], input_scale: float = INPUT_SCALE, input_zp: int = INPUT_ZP
) -> np.ndarray:
    """The HxWx3 uint8 image whose int8 input (pixels - 128, the spec derived from the input quantization) makes
    the model's outputs (before any requantization) equal ``values`` (real numbers), one array per output."""
    h, w = input_hw
    row = np.zeros(h * w * 3, np.int64)
    offset = 0
    for v in values:
        q = np.rint(np.asarray(v, np.float64).ravel() / input_scale + input_zp).astype(np.int64)
        assert q.min() >= -128 and q.max() <= 127, "a value is outside the input's range"
        row[offset : offset + q.size] = q
        offset += q.size
    return (row + 128).astype(np.uint8).reshape(h, w, 3)


def save_png(path: Path, pixels: np.ndarray) -> Path:
    from PIL import Image

    Image.fromarray(pixels).save(path)
    return path


def with_ultralytics_metadata(model: bytes, names: Sequence[str], imgsz: Sequence[int]) -> bytes:
    """``model`` with Ultralytics' metadata.json appended as a ZIP, as its TFLite exports do."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(
            "metadata.json",
            json.dumps(
                {
                    "author": "Ultralytics",
                    "version": "8.3.0",
                    "task": "detect",
                    "stride": 32,
                    "imgsz": list(imgsz),
                    "names": {str(i): n for i, n in enumerate(names)},
                }
            ),
        )
    return model + buf.getvalue()


def postprocess_model(
    input_hw: tuple[int, int],
    anchors: np.ndarray,
    num_classes: int,
    order: str = "tf1",
    max_detections: int = 10,
    score_threshold: float = 0.3,
    iou_threshold: float = 0.5,
) -> bytes:
    """A model ending in the real TFLite_Detection_PostProcess op: box encodings [1, N, 4] and class scores
    [1, N, 1 + classes] (background first) sliced from the input and dequantized, constant anchors [N, 4]
    (ycenter, xcenter, h, w, normalized). ``order``: tf1 = boxes, classes, scores, count as graph outputs;
    tf2 = scores, boxes, count, classes (Model Maker's order)."""
    g = GraphBuilder()
    h, w = input_hw
    total = h * w * 3
    n = len(anchors)
    x = g.tensor([1, h, w, 3], "int8", scale=INPUT_SCALE, zero_point=INPUT_ZP, name="images")
    flat = g.tensor([1, total], "int8", scale=INPUT_SCALE, zero_point=INPUT_ZP)
    g.op("RESHAPE", [x, g.const([1, total])], [flat], new_shape=[1, total])
    floats, offset = [], 0
    for shape in ([1, n, 4], [1, n, num_classes + 1]):
        size = int(np.prod(shape))
        part = g.tensor([1, size], "int8", scale=INPUT_SCALE, zero_point=INPUT_ZP)
        g.op("STRIDED_SLICE", [flat, g.const([0, offset]), g.const([1, offset + size]), g.const([1, 1])], [part])
        shaped = g.tensor(shape, "int8", scale=INPUT_SCALE, zero_point=INPUT_ZP)
        g.op("RESHAPE", [part, g.const(shape)], [shaped], new_shape=shape)
        f = g.tensor(shape, "float32", scale=None)
        g.op("DEQUANTIZE", [shaped], [f])
        floats.append(f)
        offset += size
    anchor_t = g.tensor([n, 4], "float32", data=np.asarray(anchors, np.float32), scale=None, name="anchors")
    outs = [
        g.tensor([1, max_detections, 4], "float32", scale=None, name="TFLite_Detection_PostProcess"),
        g.tensor([1, max_detections], "float32", scale=None, name="TFLite_Detection_PostProcess:1"),
        g.tensor([1, max_detections], "float32", scale=None, name="TFLite_Detection_PostProcess:2"),
        g.tensor([1], "float32", scale=None, name="TFLite_Detection_PostProcess:3"),
    ]
    options = {
        "max_detections": max_detections,
        "max_classes_per_detection": 1,
        "detections_per_class": 100,
        "use_regular_nms": False,
        "nms_score_threshold": score_threshold,
        "nms_iou_threshold": iou_threshold,
        "num_classes": num_classes,
        "y_scale": 10.0,
        "x_scale": 10.0,
        "h_scale": 5.0,
        "w_scale": 5.0,
    }
    g.op("CUSTOM", [floats[0], floats[1], anchor_t], outs, custom_code="TFLite_Detection_PostProcess")
    g.ops[-1].customOptions = list(flexbuffers.Dumps(options))
    g.ops[-1].customOptionsFormat = S.CustomOptionsFormat.FLEXBUFFERS
    graph_outputs = outs if order == "tf1" else [outs[2], outs[0], outs[3], outs[1]]
    return g.build([x], graph_outputs)


def tflite_metadata(output_names: Sequence[str]) -> bytes:
    """A minimal ``ModelMetadata`` flatbuffer (file identifier M001, as TFLite Support writes) naming the outputs."""
    import flatbuffers

    b = flatbuffers.Builder(0)
    names = [b.CreateString(n) for n in output_names]
    tensors = []
    for n in names:
        b.StartObject(7)  # TensorMetadata: name is field 0
        b.PrependUOffsetTRelativeSlot(0, n, 0)
        tensors.append(b.EndObject())
    b.StartVector(4, len(tensors), 4)
    for t in reversed(tensors):
        b.PrependUOffsetTRelative(t)
    vec = b.EndVector()
    b.StartObject(8)  # SubGraphMetadata: output_tensor_metadata is field 3
    b.PrependUOffsetTRelativeSlot(3, vec, 0)
    sub = b.EndObject()
    b.StartVector(4, 1, 4)
    b.PrependUOffsetTRelative(sub)
    subs = b.EndVector()
    b.StartObject(8)  # ModelMetadata: subgraph_metadata is field 3
    b.PrependUOffsetTRelativeSlot(3, subs, 0)
    b.Finish(b.EndObject(), file_identifier=b"M001")
    return bytes(b.Output())


def cut_before(model: bytes, keep_ops: int, outputs: Sequence[int]) -> bytes:
    """``model`` with only its first ``keep_ops`` ops and ``outputs`` (tensor indices) as its outputs: a test
    stand-in for cutting a detector before its decode (tensors no op uses any more are left in place)."""
    import flatbuffers

    m = S.ModelT.InitFromPackedBuf(bytearray(model), 0)
    g = m.subgraphs[0]
    g.operators = g.operators[:keep_ops]
    g.outputs = list(outputs)
    m.signatureDefs = None
    b = flatbuffers.Builder(len(model) + 1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())
