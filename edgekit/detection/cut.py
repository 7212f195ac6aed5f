"""Cut a YOLO detector before its decode, so that all of what is left maps to the Edge TPU.

The decode of a YOLO export (DFL softmax, anchors, the class sigmoid, the levels flattened and
concatenated: :mod:`edgekit.tflite.yolo_head`) is what the Edge TPU compiler leaves on the CPU, and its
TRANSPOSEs split the model in two. Cut there, the model ends with the per-level box distributions and
class logits, every op of it maps, and edgekit decodes on the host (``edgekit detect``): the same
numbers the uncut model computed before its decode, with no int8 rounding of the decode itself.

The cut keeps the graph's ops that the head needs, in their order, and drops every tensor and buffer
nothing uses any more; the model's inputs, metadata (an edgekit record gains a ``detection`` entry
naming the layout) and anything appended to the file (Ultralytics' ZIP of ``metadata.json``, which a
tool may have dropped: the cut never needs it) are kept. Writing uses TensorFlow Lite's generated schema
(ai-edge-litert or TensorFlow) with ``flatbuffers``.

Refused (exit 3, one line): a malformed graph (a tensor written twice, a cycle), no YOLO head, a head whose
decode also reads other tensors of the network (Segment, Pose, OBB: the cut would drop their masks,
keypoints or angles), a compiled model.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from edgekit.detection.layout import appended_zip, ultralytics_metadata, ultralytics_names
from edgekit.errors import InputError, InvalidModelError
from edgekit.report import SILENT, Reporter
from edgekit.results.cut import CutCheck, CutOutput, CutResult
from edgekit.tflite.model import ModelInfo
from edgekit.tflite.schema_names import TENSOR_TYPES
from edgekit.tflite.yolo_head import YoloHead, ancestors, find_yolo_head, graph_problem

#: The layout a cut model has, as ``edgekit detect --layout`` names it.
LAYOUT = "split-dfl"


def default_output(model: str | Path) -> Path:
    p = Path(model)
    return p.with_name(p.stem + "_cut.tflite")


def cut(model: str | Path, output: str | Path | None = None, report: Reporter = SILENT) -> CutResult:
    """Cut the YOLO detector ``model`` (.tflite) before its decode and write it to ``output``.

    The default output is ``<stem>_cut.tflite`` beside the model; it never replaces the input.
    The result carries check's prediction for the cut model.
    """
    from edgekit.board.quant_params import refuse_bad_quantization
    from edgekit.edgetpu.compatibility import check_model
    from edgekit.fileio import refuse_overwriting_input, write_bytes_atomic
    from edgekit.tflite import model as tflite_model
    from edgekit.tflite import model_record

    out = Path(output) if output is not None else default_output(model)
    refuse_overwriting_input(out, model)
    info = tflite_model.load(model)
    refuse_bad_quantization(info._data, str(model))  # its cut would crash LiteRT as it does
    found = model_record.find_record(model, info.metadata)
    record = json.loads(found[0].to_json()) if found else None
    report.status(f"cutting {model} before its decode")
    data, result = cut_decode(Path(model).read_bytes(), record)  # load() vouched it is a regular file
    checked = check_model(tflite_model.ModelInfo.from_bytes(data, str(out)))
    result = replace(
        result, model=str(model), output=str(out), check=CutCheck(checked.verdict, checked.summary.cpu_ops)
    )
    result.render_text()  # the text stands before anything is written
    write_bytes_atomic(out, data)
    return result


def _schema() -> Any:
    from edgekit.tflite.metadata import metadata_schema as schema

    return schema()


def detection_record(
    head: YoloHead,
    letterbox: bool,
    labels: tuple[str, ...] | None,
    before: dict | None = None,
    pixel_scaling: str | None = None,
) -> dict:
    """The ``detection`` entry of the record a cut model carries: its layout as ``edgekit detect`` reads it
    (:class:`edgekit.results.detect.DetectionLayout`), never guessed again (``before``: the source's entry, kept)."""
    from edgekit.results.detect import DetectionLayout, Layout

    roles = {f"boxes@{lv.stride}": 2 * k for k, lv in enumerate(head.levels)}
    roles.update((f"scores@{lv.stride}", 2 * k + 1) for k, lv in enumerate(head.levels))
    layout = DetectionLayout(
        Layout.SPLIT_DFL,
        roles,
        head.num_classes,
        head.input_hw,
        scores_are_logits=True,
        reg_max=head.reg_max,
        strides=head.strides,
        letterbox=letterbox,
        labels=labels,
        pixel_scaling=pixel_scaling,
        source=(
            f"cut before its decode by edgekit cut: per level, box distributions then class logits ({head.describe()})",
        ),
    )
    return {**(before or {}), "letterbox": letterbox, "layout": layout.to_dict(), "cut_before_decode": True}


def cut_decode(data: bytes, record: dict | None = None) -> tuple[bytes, CutResult]:
    """``data`` (a .tflite) cut before its YOLO decode, and what was cut (no files named, not checked yet).

    ``record``: the source's edgekit record (a dict), to carry over with the ``detection`` entry added.
    Raises InputError for a model with no YOLO head (:func:`find_yolo_head`), one whose head is not a detector's,
    a malformed graph, or a model already compiled.
    """
    info = ModelInfo.from_bytes(data)
    appended = appended_zip(data)
    ultralytics = ultralytics_metadata(appended)
    head = _head_to_cut(info, ultralytics, record)
    model, schema = object_model(data)
    graph = model.subgraphs[0]
    keep = sorted(ancestors(info.main, head.output_tensors))
    graph.operators = [graph.operators[i] for i in keep]
    graph.outputs = list(head.output_tensors)
    _drop_unused_tensors(graph)
    outputs = tuple(_output(role, graph.tensors[t]) for role, t in zip(_roles(head), graph.outputs))
    _rewrite_signature(model, schema, graph)
    _drop_unused_buffers(model)
    rec = dict(record or {})
    before = rec.get("detection") if isinstance(rec.get("detection"), dict) else None
    letterbox = bool(before.get("letterbox")) if before and "letterbox" in before else ultralytics is not None
    names = ultralytics_names(ultralytics) if ultralytics else None
    labels = (
        tuple(str(x) for x in rec["labels"])
        if isinstance(rec.get("labels"), list)
        else (names if names and len(names) == head.num_classes else None)
    )
    # Ultralytics' exports take pixels / 255 (its metadata says so to edgekit detect); a recorded spec wins
    scaling = "0..1" if ultralytics is not None and not rec.get("preprocess") else None
    rec["detection"] = detection_record(head, letterbox, labels, before, scaling)
    rec.setdefault("record_version", 1)
    _set_metadata(model, schema, "edgekit", json.dumps(rec, indent=2).encode())
    result = CutResult(
        None,
        None,
        LAYOUT,
        head.describe(),
        len(info.ops),
        len(keep),
        len(info.ops) - len(keep),
        outputs,
        head.strides,
        head.reg_max,
        head.num_classes,
        CutCheck(None, None),
    )
    return packed_model(model, len(data), appended), result


def _head_to_cut(info: ModelInfo, ultralytics: Any, record: dict | None) -> YoloHead:
    """The head of ``info`` a cut can take, or InputError saying why there is none (``record``: the model's)."""
    if info.is_compiled:
        raise InputError(
            "this model is already compiled for the Edge TPU: its decode cannot be cut",
            "cut the CPU model it was compiled from, then compile the cut model",
        )
    problem = graph_problem(info.main)
    if problem:
        raise InvalidModelError(f"malformed graph: {problem}", "re-export the model")
    task = getattr(ultralytics, "task", None)
    if task not in (None, "detect"):
        raise InputError(
            f"an Ultralytics {task} model: cut handles detection heads only (task=detect)",
            "cut a detection model; the uncut model keeps its masks or keypoints",
        )
    head = find_yolo_head(info)
    detection = (record or {}).get("detection")
    if head is None and isinstance(detection, dict) and detection.get("cut_before_decode") is True:
        raise InputError(
            "this model was cut before its decode already (its edgekit record says so): its outputs are "
            "the head's maps",
            "compile it (edgekit compile) or run it (edgekit detect)",
        )
    if head is None:
        raise InputError(
            "no YOLO detection head found: per-level box-distribution and class convolutions, joined "
            "per level or each across the levels (Ultralytics' Detect head)",
            "cut works on YOLOv5u/v8/v9/11/26-style exports; `edgekit check` shows the model's ops",
        )
    if head.foreign:
        raise InputError(
            f"the head's decode also reads {len(head.foreign)} tensor(s) of the network besides the box "
            "and class maps (the mask coefficients and prototypes of a Segment head, the keypoints of a "
            "Pose head, the angles of an OBB head): cut handles detection heads only",
            "cut a detection model; the uncut model keeps its masks, keypoints or angles",
        )
    return head


def object_model(data: bytes) -> tuple[Any, Any]:
    """The model as the schema's object tree, and the schema; InvalidModelError where the object API cannot read
    what edgekit's own reader accepted."""
    schema = _schema()
    try:
        model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
    except (
        ValueError,
        IndexError,
        TypeError,
        AttributeError,
        struct.error,
        OverflowError,
        MemoryError,
        RecursionError,
        UnicodeDecodeError,
    ) as exc:
        raise InvalidModelError(f"malformed flatbuffer ({type(exc).__name__}: {exc})", "re-export the model") from None
    if not model.subgraphs or model.buffers is None:
        raise InvalidModelError("the model has no subgraph or no buffers", "re-export the model")
    return model, schema


def _roles(head: YoloHead) -> tuple[str, ...]:
    return tuple(f"{kind}@{lv.stride}" for lv in head.levels for kind in ("boxes", "scores"))


def _output(role: str, tensor: Any) -> CutOutput:
    """An output tensor of the cut model as ``edgekit cut --json`` lists it."""
    q = tensor.quantization
    scale = [float(x) for x in q.scale] if q is not None and q.scale is not None and len(q.scale) else None
    zero = [int(x) for x in q.zeroPoint] if scale and q.zeroPoint is not None and len(q.zeroPoint) else None
    return CutOutput(
        role,
        _name(tensor.name),
        tuple(int(d) for d in tensor.shape),
        TENSOR_TYPES.get(int(tensor.type), f"type_{int(tensor.type)}"),
        scale[0] if scale and len(scale) == 1 else None,
        zero[0] if zero and len(zero) == 1 else (0 if scale and len(scale) == 1 else None),
    )


def packed_model(model: Any, size: int, appended: dict[str, bytes]) -> bytes:
    """The model packed, with the files that were appended to the source appended again."""
    import flatbuffers

    builder = flatbuffers.Builder(size + 4096)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    out = bytes(builder.Output())
    if appended:
        buf = io.BytesIO(out)
        buf.seek(0, io.SEEK_END)
        with zipfile.ZipFile(buf, "a", zipfile.ZIP_DEFLATED) as zf:
            for name, content in appended.items():
                zf.writestr(name, content)
        out = buf.getvalue()
    return out


def _name(n: Any) -> str:
    """A name as the schema holds it (bytes, in any encoding a file may have), as text."""
    return n.decode("utf-8", "replace") if isinstance(n, bytes) else "" if n is None else str(n)


def _drop_unused_tensors(graph: Any) -> None:
    """Renumber the graph's tensors to those its ops, inputs and outputs still use."""
    used = {
        int(t)
        for op in graph.operators
        for seq in (op.inputs, op.outputs, op.intermediates)
        if seq is not None
        for t in seq
        if int(t) >= 0
    }
    used |= {int(t) for t in list(graph.inputs) + list(graph.outputs)}
    order = sorted(used)
    new = {old: i for i, old in enumerate(order)}

    def remap(seq: Any) -> Any:
        return None if seq is None else [new[int(t)] if int(t) >= 0 else -1 for t in seq]

    graph.tensors = [graph.tensors[i] for i in order]
    for op in graph.operators:
        op.inputs, op.outputs, op.intermediates = remap(op.inputs), remap(op.outputs), remap(op.intermediates)
    graph.inputs, graph.outputs = remap(graph.inputs), remap(graph.outputs)


def _rewrite_signature(model: Any, schema: Any, graph: Any) -> None:
    """The main graph's signature names the new outputs (by their tensor names)."""
    for sig in model.signatureDefs or []:
        if sig.subgraphIndex != 0:
            continue
        outputs = []
        for t in graph.outputs:
            m = schema.TensorMapT()
            m.name, m.tensorIndex = graph.tensors[t].name, t
            outputs.append(m)
        sig.outputs = outputs
        for m in sig.inputs or []:  # inputs keep their tensors, which were renumbered
            m.tensorIndex = list(graph.inputs)[0] if len(graph.inputs) == 1 else m.tensorIndex


def _drop_unused_buffers(model: Any) -> None:
    """Renumber the buffers to those a tensor or a metadata entry uses (buffer 0, the empty one, stays)."""
    used = {0} | {t.buffer for g in model.subgraphs for t in g.tensors} | {m.buffer for m in model.metadata or []}
    order = sorted(used)
    new = {old: i for i, old in enumerate(order)}
    model.buffers = [model.buffers[i] for i in order]
    for g in model.subgraphs:
        for t in g.tensors:
            t.buffer = new[t.buffer]
    for m in model.metadata or []:
        m.buffer = new[m.buffer]


def _set_metadata(model: Any, schema: Any, name: str, data: bytes) -> None:
    import numpy as np

    model.metadata = list(model.metadata or [])
    entry = next((e for e in model.metadata if _name(e.name) == name), None)
    if entry is None:
        model.buffers.append(schema.BufferT())
        entry = schema.MetadataT()
        entry.name, entry.buffer = name, len(model.buffers) - 1
        model.metadata.append(entry)
    model.buffers[entry.buffer].data = np.frombuffer(data, dtype=np.uint8)
