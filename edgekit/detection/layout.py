"""Which detection layout a model has, read from the model file itself (host side; no TensorFlow).

In this order, each step naming why it decided:

1. the ``TFLite_Detection_PostProcess`` custom op: its four outputs are boxes, classes, scores and
   count in the op's own order, followed to the model's output positions by tensor index (so TF1's
   order and TF2/Model Maker's permuted one both come out right), with the op's custom options;
2. TFLite metadata (Model Maker, MediaPipe): its output tensor names (``location``, ``category``,
   ``score``, ``number of detections``) where the op is not there, and its associated label map packed
   as a ZIP after the flatbuffer; Ultralytics' ``metadata.json``, packed the same way (task, names, imgsz, stride: a
   letterboxed input, boxes normalized to it in its TFLite exports);
3. the signature's output names (pycoral's ``output_0`` = count ... ``output_3`` = boxes convention);
4. shapes: the number of anchors a YOLO head has for the input size (sum over strides 8/16/32 of
   the grid cells; three times that with YOLOv5's anchor boxes) tells ``[1, 4+nc, N]`` from
   ``[1, N, 5+nc]``; 4*reg_max (64) channels tell DFL boxes from class scores.

A model that fits several layouts is refused (exit 3) naming the candidates and ``--layout``;
one that fits none is refused saying what its outputs are. Whether boxes are normalized or in
pixels and whether scores are logits is read from the output's quantization range (a probability
is never negative; a pixel box needs a range as large as the input), or from Ultralytics'
metadata; for float outputs without either it is decided per image from the values and said.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from edgekit.board.decode import LAYOUT_HELP, anchor_count
from edgekit.errors import InputError
from edgekit.results.detect import DetectionLayout, Layout
from edgekit.tflite.packed_zip import (  # noqa: F401 (read here, and
    UltralyticsMetadata,
    appended_zip,
    packed_files,
    ultralytics_metadata,  # callers import them from here)
    ultralytics_names,
)

POSTPROCESS_OP = "TFLite_Detection_PostProcess"
POSTPROCESS_ROLES = ("boxes", "classes", "scores", "count")  # the op's output order
# pycoral's detect.get_objects, for a model with a signature: output_0..3 = count, scores, classes, boxes
SIGNATURE_ROLES = {"output_0": "count", "output_1": "scores", "output_2": "classes", "output_3": "boxes"}
# TFLite metadata's output tensor names for detectors (Model Maker, TFLite Support's ObjectDetector)
METADATA_ROLES = {"location": "boxes", "category": "classes", "score": "scores", "number of detections": "count"}
LAYOUT_NAMES = tuple(layout.value for layout in Layout)


class AmbiguousLayoutError(InputError):
    """The outputs fit several layouts: refused rather than guessed."""

    def __init__(self, name: str, candidates: Sequence[tuple[Layout, str]]):
        listed = "; ".join(f"{k.value} ({why})" for k, why in candidates)
        super().__init__(
            f"{name}: the outputs fit several detection layouts: {listed}",
            "name the right one with --layout {}".format("|".join(k.value for k, _ in candidates)),
        )
        self.candidates = [k.value for k, _ in candidates]


def signature_outputs(info: Any) -> dict[int, str]:
    """{tensor index: output name} of the model's single signature (empty without one, or with several)."""
    from edgekit.board.flatbuffer import Reader

    try:
        r = Reader(info._data)
        model = r.table(r.deref(0, "root table"), "model")
        defs = model.tables(7, "signature defs")
        if len(defs) != 1:
            return {}
        out = {}
        for m in defs[0].tables(1, "signature outputs"):
            out[int(m.scalar(1, "I"))] = m.string(0, "signature output name") or ""
        return out
    except Exception:  # a malformed optional table: no names, the shapes still decide
        return {}


def metadata_output_names(info: Any) -> list[str] | None:
    """The output tensor names TFLite metadata (``TFLITE_METADATA``: a ``ModelMetadata`` flatbuffer, as Model Maker
    and MediaPipe write) gives, in output order; None without it or when it cannot be read."""
    raw = info.metadata.get("TFLITE_METADATA")
    if not raw:
        return None
    from edgekit.board.flatbuffer import Reader

    try:
        r = Reader(raw)
        root = r.table(r.deref(0, "metadata root"), "model metadata")
        subgraphs = root.tables(3, "subgraph metadata")
        if not subgraphs:
            return None
        return [(t.string(0, "tensor metadata name") or "") for t in subgraphs[0].tables(3, "output tensor metadata")]
    except Exception:  # damaged optional metadata: the other steps still decide
        return None


def postprocess_options(info: Any, op: Any) -> dict[str, int | float | str]:
    """The op's flexbuffer custom options (max_detections, nms_iou_threshold, num_classes, ...); {} if unreadable."""
    if not op.custom_options_bytes:
        return {}
    data = bytes(info._data[op.custom_options_offset : op.custom_options_offset + op.custom_options_bytes])
    try:
        from flatbuffers import flexbuffers

        doc = flexbuffers.Loads(data)
    except Exception:
        return {}
    if not isinstance(doc, dict):
        return {}
    return {
        str(k): (round(v, 6) if isinstance(v, float) else v)
        for k, v in doc.items()
        if isinstance(v, (int, float, bool, str))
    }


# ------------------------------------------------------------------------------------ finding
def _range(t: Any) -> tuple[float, float] | None:
    """The real values an integer tensor can hold, from its quantization; None for a float tensor."""
    q = t.quantization
    if t.dtype not in ("int8", "uint8", "int16") or q is None or not q.scales or q.per_channel or q.scale <= 0:
        return None
    lo, hi = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}[t.dtype]
    return q.scale * (lo - q.zero_point), q.scale * (hi - q.zero_point)


def find_layout(
    model_path: str | os.PathLike,
    forced: str | None = None,
    record_labels: Sequence[str] | None = None,
    record: dict[str, Any] | None = None,
    info: Any = None,
) -> DetectionLayout:
    """The :class:`DetectionLayout` of a .tflite detector (``forced``: the ``--layout`` name that settles an
    ambiguity). ``record``: what edgekit recorded about the model (``detection`` entry: letterbox, labels).
    InputError (exit 3) when the outputs fit no layout, or several and ``forced`` is None.

    The stages follow the module's reading order: what the file says besides its graph (edgekit's record,
    Ultralytics' metadata, packed labels: :func:`_what_the_file_says`), a layout edgekit recorded, the
    postprocess op, then the output names and shapes (:func:`_by_shape`); :func:`_settle` applies ``forced``
    and refuses none or several.
    """
    from edgekit.tflite import model as tflite_model

    name = str(model_path)
    if forced is not None and forced not in LAYOUT_NAMES:
        from edgekit.errors import UsageError

        raise UsageError(f"unknown layout {forced!r}", "use one of " + ", ".join(LAYOUT_NAMES))
    info = info or tflite_model.load(model_path)
    g = info.main
    outputs = [g.tensors[i] for i in g.outputs]
    input_hw = _image_input(name, [g.tensors[i] for i in g.inputs])
    recorded_letterbox, recorded_layout = _read_record(record)
    packed = packed_files(model_path)
    said = _what_the_file_says(name, packed.files, recorded_letterbox, record_labels)
    if packed.skipped:
        said.source.append("the ZIP packed after the model: " + packed.skipped)
    base = _Shared(input_hw, said.letterbox, said.labels, "0..1" if said.meta is not None else None)
    recorded = _recorded_layout(recorded_layout, outputs, input_hw, said.labels, forced, said.source)
    if recorded is not None:
        return recorded
    candidates = _by_postprocess_op(info, g.ops, outputs, base, said.source)
    if not candidates:
        try:
            candidates = _by_shape(
                outputs, input_hw, said.meta, signature_outputs(info), base, said.source, metadata_output_names(info)
            )
        except InputError as exc:
            if forced is None:
                raise InputError(f"{name}: {exc.message}", exc.hint) from None
            candidates = []
    return _settle(name, candidates, forced, outputs, input_hw, base, said.source)


def _image_input(name: str, inputs: list) -> tuple[int, int]:
    """(height, width) of the detector's one image input; InputError for anything else."""
    from edgekit.board.preprocess import image_input

    if len(inputs) != 1 or len(inputs[0].shape) != 4:
        raise InputError(
            "{}: not an image detector: it has {} input(s){}".format(
                name, len(inputs), "" if len(inputs) != 1 else f" of shape {list(inputs[0].shape)}"
            ),
            "edgekit detect needs one image input [1, height, width, channels] or [1, channels, height, width]",
        )
    image = image_input(inputs[0].shape, name, "edgekit detect runs image detectors")
    return image.height, image.width


def _read_record(record: dict[str, Any] | None) -> tuple[bool | None, dict[str, Any] | None]:
    """(letterboxed input or not, the layout document) of the ``detection`` entry edgekit recorded with the model
    (raw JSON from the model file); None for what it does not hold."""
    entry = record.get("detection") if isinstance(record, dict) else None
    if not isinstance(entry, dict):
        return None, None
    layout = entry.get("layout")
    return bool(entry.get("letterbox", False)), layout if isinstance(layout, dict) else None


@dataclass(frozen=True)
class _Shared:
    """What every candidate layout of one model shares: its input size and what the file said."""

    input_hw: tuple[int, int]
    letterbox: bool
    labels: tuple[str, ...] | None
    pixel_scaling: str | None

    def layout(self, kind: Layout, roles: dict[str, int], num_classes: int, **choices: Any) -> DetectionLayout:
        """A :class:`DetectionLayout` of this model (``choices``: its other fields: boxes_normalized, source...)."""
        return DetectionLayout(
            kind,
            roles,
            num_classes,
            self.input_hw,
            letterbox=self.letterbox,
            labels=self.labels,
            pixel_scaling=self.pixel_scaling,
            **choices,
        )


@dataclass
class _Said:
    """What the model file says besides its graph, in reading order; ``source`` says where each came from."""

    meta: UltralyticsMetadata | None
    labels: tuple[str, ...] | None
    letterbox: bool
    source: list[str]


def _what_the_file_says(
    name: str, files: dict[str, bytes], recorded_letterbox: bool | None, record_labels: Sequence[str] | None
) -> _Said:
    """Letterboxing and labels from edgekit's record, Ultralytics' metadata (letterboxed, pixels / 255, names;
    InputError for a model of another task), then a label file packed with the model."""
    meta = ultralytics_metadata(files)
    source: list[str] = []
    labels = tuple(record_labels) if record_labels else None
    letterbox = False
    if recorded_letterbox is not None:
        letterbox = recorded_letterbox
        source.append("input {} (edgekit record)".format("letterboxed" if letterbox else "resized"))
    if meta is not None:
        if meta.task not in (None, "detect"):
            raise InputError(
                f"{name}: an Ultralytics {meta.task} model, not a detector",
                "edgekit detect runs detection models (task=detect)",
            )
        labels = labels or ultralytics_names(meta)
        letterbox = True
        source.append(f"Ultralytics metadata (version {meta.version}): letterboxed input, pixels / 255, labels")
    elif not source:
        source.append("plain resize to the input (no record of letterboxing)")
    if labels is None:
        texts = [f for f in files if f.lower().endswith(".txt")]
        named = [f for f in ("labelmap.txt", "labels.txt") if f in files] or (texts if len(texts) == 1 else [])
        if named:  # TFLite metadata's associated label file (Model Maker, MediaPipe: labelmap.txt)
            text = files[named[0]].decode("utf-8", "replace")
            labels = tuple(line.strip() for line in text.splitlines() if line.strip())
            source.append(f"labels from the model's packed {named[0]}")
    return _Said(meta, labels, letterbox, source)


def _by_postprocess_op(
    info: Any, ops: list, outputs: list, base: _Shared, source: list[str]
) -> list[tuple[DetectionLayout, str]]:
    """The ``TFLite_Detection_PostProcess`` op's outputs, followed to the model's output positions by tensor."""
    post_ops = [op for op in ops if op.custom_code == POSTPROCESS_OP]
    if not post_ops:
        return []
    op = post_ops[0]
    position = {t.index: i for i, t in enumerate(outputs)}
    roles = [(role, position[tensor]) for role, tensor in zip(POSTPROCESS_ROLES, op.outputs) if tensor in position]
    options = postprocess_options(info, op)
    if len(roles) < 3:
        return []
    nc = int(options.get("num_classes", 0) or 0)
    return [
        (
            base.layout(
                Layout.POSTPROCESS,
                dict(roles),
                nc,
                boxes_normalized=True,
                source=tuple(source) + (f"the {POSTPROCESS_OP} op's outputs, by tensor",),
                options=options,
            ),
            f"the {POSTPROCESS_OP} op",
        )
    ]


def _settle(
    name: str,
    candidates: list[tuple[DetectionLayout, str]],
    forced: str | None,
    outputs: list,
    input_hw: tuple[int, int],
    base: _Shared,
    source: list[str],
) -> DetectionLayout:
    """The one candidate (``forced`` picks among them, or builds its layout by convention); InputError when none
    fits, AmbiguousLayoutError when several do."""
    if forced is not None:
        candidates = [c for c in candidates if c[0].kind.value == forced] or _forced(
            forced, outputs, input_hw, base, source, name
        )
    if not candidates:
        shapes = ", ".join(f"{list(t.shape)} {t.dtype}" for t in outputs)
        raise InputError(
            f"{name}: no detection layout edgekit knows fits its outputs ({shapes})",
            "supported: " + "; ".join(f"{k.value}: {v}" for k, v in LAYOUT_HELP.items()),
        )
    if len(candidates) > 1:
        raise AmbiguousLayoutError(name, [(c.kind, why) for c, why in candidates])
    return candidates[0][0]


def _recorded_layout(
    doc: dict[str, Any] | None,
    outputs: list,
    input_hw: tuple[int, int],
    labels: tuple[str, ...] | None,
    forced: str | None,
    source: list[str],
) -> DetectionLayout | None:
    """The layout ``edgekit quantize`` recorded with the model (never re-guessed), when it still fits the outputs.
    A record is a file anyone can edit: one that is malformed or does not fit the model's outputs is ignored, said
    in ``source`` (shown as a note), and the layout read from the outputs as for a model without a record."""
    if doc is None:
        return None
    why, layout = _record_misfit(doc, outputs, input_hw), None
    if why is None:
        # the fields this edgekit reads (a newer one's are left, as the description, which is derived)
        known = {k: v for k, v in doc.items() if k in _RECORD_FIELDS}
        try:
            layout = DetectionLayout.from_dict(known)
            why = _roles_misfit(layout, outputs)
        except ValueError as exc:  # what _record_misfit does not look into (the options' values)
            why = str(exc)
    if why is not None or layout is None:
        source.append(f"the layout recorded with the model ignored: {why}")
        return None
    if forced is not None and forced != layout.kind.value:
        return None
    return replace(
        layout,
        labels=labels or layout.labels,
        source=("recorded by edgekit quantize with the model",) + tuple(layout.source),
    )


def _is_int(v: Any, low: int = 0, high: int = 1 << 20) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


_RECORD_FIELDS = frozenset(f.name for f in fields(DetectionLayout)) - {"description"}
_RECORD_TYPES = (
    ("boxes_normalized", (bool, type(None))),
    ("scores_are_logits", (bool, type(None))),
    ("transposed", bool),
    ("letterbox", bool),
    ("options", dict),
    ("source", list),
    ("labels", (list, type(None))),
    ("pixel_scaling", (str, type(None))),
    ("strides", list),
)


def _record_misfit(doc: Any, outputs: list, input_hw: tuple[int, int]) -> str | None:
    """Why a recorded layout document cannot be used for these outputs (its types, its roles' positions, its input
    size), or None when it can be read (:func:`_roles_misfit` then checks what its roles read)."""
    from edgekit.results.preprocess import SCALINGS

    kinds = {k.value for k in Layout}
    if not isinstance(doc, dict) or not isinstance(doc.get("kind"), str) or doc["kind"] not in kinds:
        return "no layout kind of {}".format(", ".join(sorted(kinds)))
    roles = doc.get("roles")
    if not (
        isinstance(roles, dict)
        and roles
        and all(isinstance(k, str) and _is_int(v, 0, len(outputs) - 1) for k, v in roles.items())
    ):
        return "its roles are not outputs of the model"
    hw = doc.get("input_hw")
    if not (isinstance(hw, list) and len(hw) == 2 and all(_is_int(v, 1) for v in hw)) or tuple(hw) != input_hw:
        return "recorded for another input size"
    if not _is_int(doc.get("num_classes"), 0) or not _is_int(doc.get("reg_max", 16), 1, 256):
        return "its class or DFL bin count is no count"
    for key, types in _RECORD_TYPES:
        if key in doc and not isinstance(doc[key], types):
            return f"its {key} is of the wrong type"
    if not all(_is_int(s, 1, 1024) for s in doc.get("strides", [8])) or not all(
        isinstance(x, str) for x in (doc.get("labels") or []) + list(doc.get("source", []))
    ):
        return "its strides or labels are malformed"
    if doc.get("pixel_scaling") is not None and doc["pixel_scaling"] not in SCALINGS:
        return "unknown pixel scaling {!r}".format(doc["pixel_scaling"])
    return None


def _roles_misfit(layout: DetectionLayout, outputs: list) -> str | None:
    """Why the recorded roles do not fit the layout's kind or the shape of the tensor they name, or None."""
    kind, roles, nc, transposed = layout.kind, layout.roles, layout.num_classes, layout.transposed
    if kind == Layout.POSTPROCESS:
        fits = set(roles) <= set(POSTPROCESS_ROLES) and {"boxes", "classes", "scores"} <= set(roles)
        return None if fits else "its roles are not the postprocess op's"
    if kind == Layout.SPLIT_DFL:
        strides = list(layout.strides)
        per_level = [{f"{r}@{s}" for r in parts for s in strides} for parts in (("combined",), ("boxes", "scores"))]
        fits = bool(strides) and set(roles) in [{"combined"}, {"boxes", "scores"}] + per_level
        return None if fits else f"its roles are not a split head's at strides {strides}"
    if set(roles) != {"output"}:
        return f"{kind.value} reads one output"
    shape = list(outputs[roles["output"]].shape)
    want = {Layout.YOLO: 4 + nc, Layout.YOLOV5: 5 + nc, Layout.END2END: 6}[kind]
    channels = shape[-2 if transposed else -1] if len(shape) >= 2 else None
    if channels != want or (kind != Layout.END2END and nc < 1):
        return "{}{} cannot read its output of shape {}".format(
            kind.value, f" of {nc} classes" if kind != Layout.END2END else "", shape
        )
    return None


def _forced(
    forced: str, outputs: list, input_hw: tuple[int, int], base: _Shared, source: list[str], name: str
) -> list[tuple[DetectionLayout, str]]:
    """``--layout`` naming a layout the shapes did not single out: build it by the layout's own convention."""
    kind = Layout(forced)
    shapes = [list(t.shape) for t in outputs]
    src = tuple(source) + (f"--layout {forced}",)
    if kind == Layout.POSTPROCESS and len(outputs) == 4:  # TF1's order unless the sizes say otherwise
        order = (
            POSTPROCESS_ROLES
            if len(outputs[3].shape) == 1 or outputs[3].shape[-1] == 1
            else ("scores", "boxes", "count", "classes")
        )
        return [
            (
                base.layout(
                    Layout.POSTPROCESS, {r: i for i, r in enumerate(order)}, 0, boxes_normalized=True, source=src
                ),
                forced,
            )
        ]
    if kind in (Layout.YOLO, Layout.YOLOV5, Layout.END2END) and len(outputs) == 1 and len(shapes[0]) == 3:
        _, a, b = shapes[0]
        transposed = kind == Layout.YOLO and a < b
        channels = a if transposed else b
        nc = channels - {Layout.YOLO: 4, Layout.YOLOV5: 5, Layout.END2END: 4}[kind]
        if kind == Layout.END2END:
            nc = 0
        said = list(src)  # and how the box scale was read
        normalized = _boxes_normalized(outputs[0], input_hw, None, said)
        return [
            (
                base.layout(
                    kind,
                    {"output": 0},
                    max(nc, 0),
                    transposed=transposed,
                    boxes_normalized=normalized,
                    source=tuple(said),
                ),
                forced,
            )
        ]
    if kind == Layout.SPLIT_DFL and len(outputs) == 1 and len(shapes[0]) == 3 and max(shapes[0][1:]) > 64:
        _, a, b = shapes[0]
        transposed = a < b
        src2 = list(src) + ["one tensor: 64 DFL bins then the class scores (Ultralytics' order)"]
        return [
            (
                base.layout(
                    Layout.SPLIT_DFL,
                    {"combined": 0},
                    (a if transposed else b) - 64,
                    scores_are_logits=_scores_logits(outputs[0], src2),
                    transposed=transposed,
                    source=tuple(src2),
                ),
                forced,
            )
        ]
    if kind == Layout.SPLIT_DFL and len(outputs) == 2:  # Ultralytics' head concatenates boxes before classes
        return [
            (
                _split_layout(outputs, (0,), (1,), input_hw, base, list(src) + ["boxes first (Ultralytics' order)"]),
                forced,
            )
        ]
    raise InputError(
        f"{name}: --layout {forced} does not fit its outputs ({shapes})",
        "pick a layout that matches, or leave --layout out to have it found",
    )


def _boxes_normalized(
    t: Any, input_hw: tuple[int, int], meta: UltralyticsMetadata | None, source: list[str]
) -> bool | None:
    if meta is not None:
        source.append("boxes normalized to the input (Ultralytics' TFLite export)")
        return True
    rng = _range(t)
    if rng is None:
        source.append("float output: box scale read from the values of each image")
        return None
    side = min(input_hw)
    if rng[1] <= min(4.0, side / 4.0):
        normalized = True  # a pixel box could not be stored: the range ends far below the input's size
    elif rng[1] >= side / 2.0:
        normalized = False  # room for pixel coordinates; normalized ones would waste all but a few steps
    else:
        source.append(
            f"box scale read from the values of each image (output range {rng[0]:.3g}..{rng[1]:.3g} fits neither "
            f"normalized nor {side}-pixel boxes well)"
        )
        return None
    source.append(
        "boxes {} (output quantization range {:.3g}..{:.3g})".format(
            "normalized" if normalized else "in input pixels", rng[0], rng[1]
        )
    )
    return normalized


def _scores_logits(t: Any, source: list[str]) -> bool | None:
    rng = _range(t)
    if rng is None:
        source.append("float scores: logits or probabilities read from the values of each image")
        return None
    logits = rng[0] < -1e-3
    source.append(
        "scores are {} (quantization range {:.3g}..{:.3g})".format(
            "logits: sigmoid applied" if logits else "probabilities", rng[0], rng[1]
        )
    )
    return logits


def _split_layout(
    outputs: list,
    box_idx: Sequence[int],
    score_idx: Sequence[int],
    input_hw: tuple[int, int],
    base: _Shared,
    source: list[str],
    strides: Sequence[int] = (8, 16, 32),
    reg_max: int = 16,
) -> DetectionLayout:
    src = list(source)
    logits = _scores_logits(outputs[score_idx[0]], src)
    if len(box_idx) == 1:
        roles = {"boxes": box_idx[0], "scores": score_idx[0]}
        s = outputs[score_idx[0]].shape
        nc = int(min(s[1], s[2]))
        if anchor_count(input_hw, strides) in (s[1], s[2]):
            nc = int(s[2] if s[1] == anchor_count(input_hw, strides) else s[1])
    else:
        roles = {f"boxes@{st}": b for st, b in zip(strides, box_idx)}
        roles.update((f"scores@{st}", c) for st, c in zip(strides, score_idx))
        nc = int(outputs[score_idx[0]].shape[-1])
    return base.layout(
        Layout.SPLIT_DFL,
        roles,
        nc,
        scores_are_logits=logits,
        strides=tuple(strides),
        reg_max=reg_max,
        source=tuple(src),
    )


def _by_shape(
    outputs: list,
    input_hw: tuple[int, int],
    meta: UltralyticsMetadata | None,
    sig: dict[int, str],
    base: _Shared,
    source: list[str],
    metadata_names: list[str] | None = None,
) -> list[tuple[DetectionLayout, str]]:
    """The layouts the outputs' names (postprocess-like outputs) and shapes fit: one tensor (a YOLO head, decoded
    or cut), a split head's boxes and scores, or per-level maps."""
    shapes = [tuple(int(d) for d in t.shape) for t in outputs]
    if len(outputs) == 4 and sorted(len(s) for s in shapes) == [1, 2, 2, 3]:
        return _postprocess_by_names(outputs, shapes, sig, base, source, metadata_names)
    if len(outputs) == 1 and len(shapes[0]) == 3 and shapes[0][0] == 1:
        nc_meta = len(base.labels) if meta is not None and base.labels else None
        return _combined_head(outputs[0], shapes[0], input_hw, nc_meta, base, source) + _decoded_head(
            outputs[0], shapes[0], input_hw, meta, nc_meta, base, source
        )
    if len(outputs) == 2 and all(len(s) == 3 for s in shapes):
        return _split_pair(outputs, shapes, input_hw, sig, base, source)
    if len(outputs) == 3 and all(len(s) == 4 for s in shapes):  # per level [1, h, w, 64+nc]: cut before the concat
        return _combined_levels(outputs, shapes, input_hw, meta, base, source)
    if len(outputs) in (4, 6, 8, 10) and all(len(s) == 4 for s in shapes):
        return _split_levels(outputs, shapes, input_hw, base, source)
    return []


def _postprocess_by_names(
    outputs: list,
    shapes: list[tuple[int, ...]],
    sig: dict[int, str],
    base: _Shared,
    source: list[str],
    metadata_names: list[str] | None,
) -> list[tuple[DetectionLayout, str]]:
    """Postprocess-style outputs without the op (its name lost): the roles by TFLite metadata's output names, else
    by the signature's (pycoral's convention); InputError when neither says."""
    names = [sig.get(t.index) for t in outputs]
    meta_names = [n.lower() for n in (metadata_names or [])]
    named = sorted(METADATA_ROLES.get(n, "") for n in meta_names)
    if len(meta_names) == 4 and named == sorted(METADATA_ROLES.values()):
        roles = {METADATA_ROLES[n]: i for i, n in enumerate(meta_names)}
        return [
            (
                base.layout(
                    Layout.POSTPROCESS,
                    roles,
                    0,
                    boxes_normalized=True,
                    source=tuple(source) + ("TFLite metadata output names ({})".format(", ".join(meta_names)),),
                ),
                "TFLite metadata names",
            )
        ]
    signature_roles = [SIGNATURE_ROLES.get(n) if n is not None else None for n in names]
    if all(r is not None for r in signature_roles):
        roles = {r: i for i, r in enumerate(signature_roles) if r is not None}
        return [
            (
                base.layout(
                    Layout.POSTPROCESS,
                    roles,
                    0,
                    boxes_normalized=True,
                    source=tuple(source) + ("signature output names (pycoral's convention)",),
                ),
                "signature output names",
            )
        ]
    raise InputError(
        f"outputs shaped like TFLite_Detection_PostProcess's ({[list(s) for s in shapes]}) but neither the op nor the "
        "signature names say which is classes and which is scores",
        "pass --layout postprocess to take TF1's order (boxes, classes, scores, count)",
    )


def _combined_head(
    t: Any, shape: tuple[int, ...], input_hw: tuple[int, int], nc_meta: int | None, base: _Shared, source: list[str]
) -> list[tuple[DetectionLayout, str]]:
    """split-dfl, uncut concatenation: ``[1, 64+nc, N]`` / ``[1, N, 64+nc]`` (a YOLO head cut before its DFL
    decode), either way round."""
    _, a, b = shape
    anchors = anchor_count(input_hw)
    rng = _range(t)
    found: list[tuple[DetectionLayout, str]] = []
    for transposed, channels, n in ((True, a, b), (False, b, a)):
        if (
            n == anchors
            and channels > 64
            and (nc_meta is None or channels == 64 + nc_meta)
            and (rng is None or rng[0] < 0)
        ):  # DFL bins and class scores before sigmoid are logits
            src = list(source) + [
                f"[1, {a}, {b}]: 64 DFL bins (4 sides x 16) + {channels - 64} class scores over {n} anchors, in "
                "one tensor"
            ]
            logits = _scores_logits(t, src)
            found.append(
                (
                    base.layout(
                        Layout.SPLIT_DFL,
                        {"combined": 0},
                        channels - 64,
                        scores_are_logits=logits,
                        transposed=transposed,
                        source=tuple(src),
                    ),
                    f"{channels} = 64 DFL bins + {channels - 64} classes over {n} anchors",
                )
            )
    return found


def _decoded_head(
    t: Any,
    shape: tuple[int, ...],
    input_hw: tuple[int, int],
    meta: UltralyticsMetadata | None,
    nc_meta: int | None,
    base: _Shared,
    source: list[str],
) -> list[tuple[DetectionLayout, str]]:
    """One decoded tensor: yolo ``[1, 4+nc, N]`` / ``[1, N, 4+nc]``, yolov5 ``[1, N, 5+nc]`` (three anchor boxes per
    cell), end2end ``[1, K, 6]``."""
    _, a, b = shape
    anchors = anchor_count(input_hw)
    rng = _range(t)
    found: list[tuple[DetectionLayout, str]] = []
    # decoded heads hold coordinates in the image and scores in 0..1: an int8 range reaching well below 0 is
    # not one of them (logits are)
    decoded_range = rng is None or rng[0] >= -0.5
    for transposed, channels, n in ((True, a, b), (False, b, a)):
        if (nc_meta is not None and channels != 4 + nc_meta) or not decoded_range:
            continue
        if channels > 4 and (n == anchors or (nc_meta is not None and n > channels)):
            src = list(source) + [
                "[1, {}, {}]: {} anchors{}".format(
                    a, b, n, f" for strides 8/16/32 at {input_hw[1]}x{input_hw[0]}" if n == anchors else ""
                )
            ]
            normalized = _boxes_normalized(t, input_hw, meta, src)
            found.append(
                (
                    base.layout(
                        Layout.YOLO,
                        {"output": 0},
                        channels - 4,
                        transposed=transposed,
                        boxes_normalized=normalized,
                        source=tuple(src),
                    ),
                    f"{channels} = 4 + {channels - 4} classes over {n} anchors",
                )
            )
    grid = (
        f"3 anchor boxes x {anchors} cells" if a == 3 * anchors else single_grid(a, input_hw) if a > b else None
    )  # rows of 5+nc values: more rows than values
    if b > 5 and grid and meta is None and decoded_range:
        src = list(source) + [f"[1, {a}, {b}]: {grid}"]
        normalized = _boxes_normalized(t, input_hw, meta, src)
        found.append(
            (
                base.layout(Layout.YOLOV5, {"output": 0}, b - 5, boxes_normalized=normalized, source=tuple(src)),
                f"{b} = 5 + {b - 5} classes over {a} anchors",
            )
        )
    if b == 6 and a not in (anchors, 3 * anchors) and decoded_range:
        src = list(source) + [f"[1, {a}, 6]: x1, y1, x2, y2, score, class"]
        normalized = _boxes_normalized(t, input_hw, meta, src)
        nc = len(base.labels) if base.labels else 0
        found.append(
            (
                base.layout(Layout.END2END, {"output": 0}, nc, boxes_normalized=normalized, source=tuple(src)),
                f"{a} detections of 6 values",
            )
        )
    return found


def single_grid(n: int, input_hw: tuple[int, int]) -> str | None:
    """How ``n`` rows fit one grid over the input (a single-grid head, e.g. YOLOv2/v3-tiny-like or a custom one):
    1 to 9 anchor boxes per cell of one stride's grid (strides 2 to 64 dividing the input); None when none fits."""
    h, w = input_hw
    for stride in (2, 4, 8, 16, 32, 64):
        cells = (h // stride) * (w // stride)
        if h % stride == 0 and w % stride == 0 and cells and n % cells == 0 and 1 <= n // cells <= 9:
            return f"{n // cells} anchor box(es) x {w // stride}x{h // stride} cells (one grid, stride {stride})"
    return None


def _split_pair(
    outputs: list,
    shapes: list[tuple[int, ...]],
    input_hw: tuple[int, int],
    sig: dict[int, str],
    base: _Shared,
    source: list[str],
) -> list[tuple[DetectionLayout, str]]:
    """split-dfl: boxes ``[1, N, 64]`` + scores ``[1, N, nc]`` (or transposed); with 64 classes too, the names
    tell which is which, or InputError."""
    anchors = anchor_count(input_hw)

    def channels(s: tuple) -> int | None:
        return s[2] if s[1] == anchors else s[1] if s[2] == anchors else None

    ch = [channels(s) for s in shapes]
    if None in ch:
        return []
    box_at = [i for i in (0, 1) if ch[i] == 64]
    if len(box_at) == 1:
        return [
            (
                _split_layout(
                    outputs,
                    box_at,
                    (1 - box_at[0],),
                    input_hw,
                    base,
                    source + [f"{anchors} anchors: 64 = 4 sides x 16 DFL bins"],
                ),
                f"boxes at output {box_at[0]}",
            )
        ]
    if len(box_at) == 2:  # 64 classes: names may tell which is which
        named = _split_by_names(outputs, sig)
        if named is not None:
            return [
                (
                    _split_layout(
                        outputs,
                        (named,),
                        (1 - named,),
                        input_hw,
                        base,
                        source + ["64 classes: boxes told by the output names"],
                    ),
                    "names",
                )
            ]
        raise InputError(
            "both outputs have 64 channels (4 x 16 DFL bins, and 64 classes?): which one holds "
            "the boxes is not written in the model",
            "pass --layout split-dfl to take Ultralytics' order (boxes first)",
        )
    return []


def _combined_levels(
    outputs: list,
    shapes: list[tuple[int, ...]],
    input_hw: tuple[int, int],
    meta: UltralyticsMetadata | None,
    base: _Shared,
    source: list[str],
) -> list[tuple[DetectionLayout, str]]:
    """split-dfl cut before the concatenation: one NHWC map ``[1, h, w, 64+nc]`` per stride 8/16/32."""
    nc_meta = len(base.labels) if meta is not None and base.labels else None
    order = sorted(range(3), key=lambda i: -shapes[i][1])
    strides = [input_hw[0] // shapes[i][1] for i in order if shapes[i][1]]
    chans = {shapes[i][3] for i in order}
    if not (
        strides == [8, 16, 32]
        and len(chans) == 1
        and min(chans) > 64
        and (nc_meta is None or min(chans) == 64 + nc_meta)
    ):
        return []
    src = list(source) + [
        f"per-level maps [1, h, w, {min(chans)}] for strides 8/16/32: 64 DFL bins + {min(chans) - 64} class scores"
    ]
    logits = _scores_logits(outputs[order[0]], src)
    roles = {f"combined@{st}": i for st, i in zip((8, 16, 32), order)}
    return [
        (
            base.layout(Layout.SPLIT_DFL, roles, min(chans) - 64, scores_are_logits=logits, source=tuple(src)),
            "per-level maps",
        )
    ]


def _split_levels(
    outputs: list, shapes: list[tuple[int, ...]], input_hw: tuple[int, int], base: _Shared, source: list[str]
) -> list[tuple[DetectionLayout, str]]:
    """split-dfl per level (a YOLO head cut before its decode, its record lost): a boxes map and a scores map for
    each of two or more strides of 4, 8, 16, 32, 64. The boxes have 64 channels (4 sides x 16 DFL bins) or 4 (YOLO26:
    no DFL); where the channels do not tell (64 and 4), the first map of a level is taken as the boxes (the order of
    ``edgekit cut`` and Ultralytics' ``cat(cv2, cv3)``) and said."""
    levels: dict[tuple[int, int], list[int]] = {}
    for i, s in enumerate(shapes):
        levels.setdefault((s[1], s[2]), []).append(i)
    strides = sorted(((input_hw[0] // hw[0], hw) for hw in levels if hw[0]), key=lambda x: x[0])
    if not (
        len(levels) >= 2
        and all(len(v) == 2 for v in levels.values())
        and all(s in (4, 8, 16, 32, 64) and hw[0] * s == input_hw[0] and hw[1] * s == input_hw[1] for s, hw in strides)
    ):
        return []
    pairs = {tuple(shapes[i][3] for i in levels[hw]) for _, hw in strides}
    if len(pairs) != 1:
        return []
    first, second = pairs.pop()
    src = source + ["per-level NHWC maps for strides {}".format("/".join(str(s) for s, _ in strides))]
    if {first, second} == {64, 4}:
        src.append("64 and 4 channels: the first map of each level taken as the boxes (edgekit cut's order)")
        box_first = True
    elif (first in (64, 4)) != (second in (64, 4)):
        box_first = first in (64, 4)
    else:
        raise InputError(
            f"per-level outputs with {first} and {second} channels: which holds the boxes (64 DFL bins or 4 "
            "distances) is not written in the model",
            "cut the uncut model again with edgekit cut, which records the layout",
        )
    box_idx = [levels[hw][0 if box_first else 1] for _, hw in strides]
    score_idx = [levels[hw][1 if box_first else 0] for _, hw in strides]
    reg_max = (first if box_first else second) // 4
    return [
        (
            _split_layout(outputs, box_idx, score_idx, input_hw, base, src, [s for s, _ in strides], reg_max),
            "per-level maps",
        )
    ]


def _split_by_names(outputs: list, sig: dict[int, str]) -> int | None:
    for i, t in enumerate(outputs):
        text = (sig.get(t.index, "") + " " + t.name).lower()
        if any(w in text for w in ("box", "dfl", "reg", "loc")):
            return i
    return None
