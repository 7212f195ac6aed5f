"""Object detection, the pure part: output layouts, decoding, class-wise NMS and the image geometry.

Everything here works on plain numpy arrays and small records, so the same code runs on the host
and on a Coral Dev Board (``board_runner.SHIPPED_MODULES``: Python 3.7, numpy only; no TensorFlow,
no Pillow at import). Which layout a model has is decided on the host from the model file itself
(:mod:`edgekit.detection.layout`) and handed here as a :class:`DetectionLayout`.

Layouts (the names ``--layout`` takes):

``postprocess``
    the ``TFLite_Detection_PostProcess`` op's four outputs: boxes ``[1, K, 4]`` (ymin, xmin, ymax,
    xmax, normalized), classes ``[1, K]``, scores ``[1, K]``, count ``[1]``; the model already ran
    NMS. The output order differs between TF1 exports (boxes, classes, scores, count) and TF2 /
    Model Maker ones (scores, boxes, count, classes): :attr:`DetectionLayout.roles` maps each role
    to its output position.
``yolo``
    one tensor ``[1, 4+nc, N]`` (or ``[1, N, 4+nc]``): cx, cy, w, h then nc class probabilities per
    anchor (Ultralytics YOLOv8/11, YOLOv5u); boxes normalized to the input (Ultralytics' TFLite
    exports) or in input pixels.
``yolov5``
    one tensor ``[1, N, 5+nc]``: cx, cy, w, h, objectness, nc class probabilities (score = obj * cls).
``split-dfl``
    class scores ``[1, N, nc]`` and DFL box distributions ``[1, N, 4*reg_max]`` (or transposed, or one
    pair per stride as NHWC maps): decoded by :func:`decode_split_dfl`, as Ultralytics' head does.
``end2end``
    one tensor ``[1, K, 6]``: x1, y1, x2, y2, score, class (heads with NMS built in: YOLOv10, YOLO26).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

if TYPE_CHECKING:  # the documents' shapes, for type checkers only: typing.TypedDict is Python 3.8, the board's is 3.7
    from typing import TypedDict  # novm

    class BoxDoc(TypedDict):
        """:meth:`BBox.to_dict`."""

        xmin: float
        ymin: float
        xmax: float
        ymax: float

    class _ObjectRequired(TypedDict):
        id: int
        label: Optional[str]
        score: float
        bbox: BoxDoc  # in the image's pixels

    class ObjectDoc(_ObjectRequired, total=False):
        """:meth:`Object.to_dict` (``bbox_normalized``, the box as shares of the image's size, when it is given)."""

        bbox_normalized: BoxDoc

    class LayoutDoc(TypedDict, total=False):
        """:meth:`DetectionLayout.to_dict` (what ``from_dict`` reads; the keys after ``input_hw`` may be left out)."""

        kind: str
        roles: Dict[str, int]
        num_classes: int
        input_hw: List[int]
        boxes_normalized: Optional[bool]
        scores_are_logits: Optional[bool]
        transposed: bool
        reg_max: int
        strides: List[int]
        letterbox: bool
        labels: Optional[List[str]]
        source: List[str]
        options: Dict[str, Union[bool, int, float, str]]
        pixel_scaling: Optional[str]
        description: str


DEFAULT_CONF = 0.25
DEFAULT_IOU = 0.45
DEFAULT_MAX_DET = 100
MAX_NMS_BOXES = 30000  # boxes kept (best first) before NMS, as Ultralytics' non_max_suppression
LETTERBOX_FILL = 114  # the grey Ultralytics pads with


class Layout(str, Enum):
    POSTPROCESS = "postprocess"
    YOLO = "yolo"
    YOLOV5 = "yolov5"
    SPLIT_DFL = "split-dfl"
    END2END = "end2end"


LAYOUT_HELP = {
    Layout.POSTPROCESS: "TFLite_Detection_PostProcess outputs (boxes, classes, scores, count)",
    Layout.YOLO: "[1, 4+nc, N]: cx, cy, w, h + class scores (YOLOv8/11, v5u)",
    Layout.YOLOV5: "[1, N, 5+nc]: cx, cy, w, h, objectness + class scores (YOLOv5)",
    Layout.SPLIT_DFL: "class scores + DFL box distributions (split YOLO head)",
    Layout.END2END: "[1, K, 6]: x1, y1, x2, y2, score, class (NMS in the model)",
}


# ----------------------------------------------------------------------------------- records
def _document(d: Any, where: str) -> None:
    if not isinstance(d, Mapping):
        raise ValueError(f"{where}: expected an object, got {type(d).__name__}")


def _field(d: Mapping[str, Any], key: str, where: str, kind: type) -> Any:
    """``d[key]`` as ``kind`` (int: an integer, no bool; float: any real number, no bool; dict: an object)."""
    if key not in d:
        raise ValueError(f"{where}: the field {key!r} is missing")
    v = d[key]
    if kind is dict:
        ok = isinstance(v, Mapping)
    else:
        ok = isinstance(v, numbers.Integral if kind is int else numbers.Real) and not isinstance(v, (bool, np.bool_))
    if ok and kind is int:
        ok = -(1 << 63) <= v < (1 << 63)
    elif ok and kind is float:
        ok = not isinstance(v, numbers.Integral) or abs(int(v)) <= 1 << 1023
    if not ok:
        raise ValueError(
            "{}.{}: expected {}, got {}".format(
                where,
                key,
                {int: "an integer of at most 64 bits", float: "a number", dict: "an object"}[kind],
                type(v).__name__,
            )
        )
    return v if kind is dict else kind(v)


@dataclass(frozen=True)
class BBox:
    """A box in pixels of the original image: ``xmin, ymin`` inclusive corner, ``xmax, ymax`` the far one."""

    xmin: float
    ymin: float
    xmax: float
    ymax: float

    @property
    def width(self) -> float:
        return self.xmax - self.xmin

    @property
    def height(self) -> float:
        return self.ymax - self.ymin

    @property
    def area(self) -> float:
        return max(0.0, self.width) * max(0.0, self.height)

    def scale(self, sx: float, sy: float) -> BBox:
        return BBox(self.xmin * sx, self.ymin * sy, self.xmax * sx, self.ymax * sy)

    def to_dict(self) -> BoxDoc:
        return {"xmin": self.xmin, "ymin": self.ymin, "xmax": self.xmax, "ymax": self.ymax}

    @classmethod
    def from_dict(cls, d: Mapping[str, float], where: str = "BBox") -> BBox:
        """ValueError naming the field for what is not a box document (a key missing, a value no number)."""
        _document(d, where)
        return cls(*(_field(d, k, where, float) for k in ("xmin", "ymin", "xmax", "ymax")))


@dataclass(frozen=True)
class Object:
    """One detection, like pycoral's ``Object(id, score, bbox)``, with its label when known."""

    id: int
    score: float
    bbox: BBox
    label: Optional[str] = None

    def to_dict(self, width: Optional[int] = None, height: Optional[int] = None) -> ObjectDoc:
        """``bbox`` in pixels; ``bbox_normalized`` (0..1 of the image) when its size is given."""
        shown = BBox(*(round(v, 2) for v in (self.bbox.xmin, self.bbox.ymin, self.bbox.xmax, self.bbox.ymax)))
        d = {"id": self.id, "label": self.label, "score": round(self.score, 6), "bbox": shown.to_dict()}  # type: ObjectDoc
        if width and height:
            normalized = shown.scale(1.0 / width, 1.0 / height)
            d["bbox_normalized"] = {
                "xmin": round(normalized.xmin, 6),
                "ymin": round(normalized.ymin, 6),
                "xmax": round(normalized.xmax, 6),
                "ymax": round(normalized.ymax, 6),
            }
        return d

    @classmethod
    def from_dict(cls, d: ObjectDoc, where: str = "Object") -> Object:
        """ValueError naming the field for what is not an object document (as the records' ``from_dict``)."""
        _document(d, where)
        label = d.get("label")
        if label is not None and not isinstance(label, str):
            raise ValueError(f"{where}.label: expected a string or null, got {type(label).__name__}")
        return cls(
            _field(d, "id", where, int),
            _field(d, "score", where, float),
            BBox.from_dict(_field(d, "bbox", where, dict), where + ".bbox"),
            label,
        )

    def line(self) -> str:
        b = self.bbox
        name = self.label if self.label is not None else f"class {self.id}"
        return f"{name:<16} {self.score:.3f}  [{b.xmin:.0f}, {b.ymin:.0f}, {b.xmax:.0f}, {b.ymax:.0f}]"


@dataclass(frozen=True)
class DetectionLayout:
    """What a detector's outputs mean, decided from the model itself (see :mod:`edgekit.detection.layout`).

    ``roles`` maps a role (``boxes``, ``classes``, ``scores``, ``count`` for ``postprocess``; ``output``
    for the single-tensor layouts; ``boxes``/``scores`` or ``boxes@8``/``scores@8``... for split-dfl)
    to the position of that output in the interpreter's output list. ``boxes_normalized``: True when
    boxes are fractions of the input size, False for input pixels, None to decide per image from the
    values. ``scores_are_logits``: the same for sigmoid. ``transposed``: the anchors run along the
    last axis (``[1, C, N]``). ``letterbox``: the model was fed letterboxed images (Ultralytics)
    rather than plainly resized ones. ``source``: how each choice was made, for the user.
    """

    kind: Layout
    roles: Tuple[Tuple[str, int], ...]
    num_classes: int
    input_hw: Tuple[int, int]
    boxes_normalized: Optional[bool] = None
    scores_are_logits: Optional[bool] = None
    transposed: bool = False
    reg_max: int = 16
    strides: Tuple[int, ...] = (8, 16, 32)
    letterbox: bool = False
    labels: Optional[Tuple[str, ...]] = None
    source: Tuple[str, ...] = ()
    options: Tuple[Tuple[str, Any], ...] = ()  # e.g. the postprocess op's custom options
    pixel_scaling: Optional[str] = None  # "0..1" when the model's maker says so (Ultralytics divides by 255)

    def role(self, name: str) -> int:
        return dict(self.roles)[name]

    def describe(self) -> str:
        parts = [self.kind.value, f"{self.num_classes} classes"]
        if self.kind in (Layout.YOLO, Layout.YOLOV5, Layout.END2END):
            parts.append(
                {True: "normalized boxes", False: "pixel boxes", None: "box scale read per image"}[
                    self.boxes_normalized
                ]
            )
        if self.kind == Layout.SPLIT_DFL:
            parts.append(
                {True: "score logits (sigmoid applied)", False: "score probabilities", None: "scores read per image"}[
                    self.scores_are_logits
                ]
            )
        parts.append("letterboxed input" if self.letterbox else "resized input")
        return ", ".join(parts)

    def to_dict(self) -> LayoutDoc:
        return {
            "kind": self.kind.value,
            "roles": dict(self.roles),
            "num_classes": self.num_classes,
            "input_hw": list(self.input_hw),
            "boxes_normalized": self.boxes_normalized,
            "scores_are_logits": self.scores_are_logits,
            "transposed": self.transposed,
            "reg_max": self.reg_max,
            "strides": list(self.strides),
            "letterbox": self.letterbox,
            "labels": list(self.labels) if self.labels is not None else None,
            "source": list(self.source),
            "options": dict(self.options),
            "pixel_scaling": self.pixel_scaling,
            "description": self.describe(),
        }

    @classmethod
    def from_dict(cls, d: LayoutDoc) -> DetectionLayout:
        labels = d.get("labels")
        return cls(
            Layout(d["kind"]),
            tuple((str(k), int(v)) for k, v in d["roles"].items()),
            int(d["num_classes"]),
            (int(d["input_hw"][0]), int(d["input_hw"][1])),
            d.get("boxes_normalized"),
            d.get("scores_are_logits"),
            bool(d.get("transposed", False)),
            int(d.get("reg_max", 16)),
            tuple(int(s) for s in d.get("strides", (8, 16, 32))),
            bool(d.get("letterbox", False)),
            tuple(labels) if labels is not None else None,
            tuple(d.get("source", ())),
            tuple(sorted((d.get("options") or {}).items())),
            d.get("pixel_scaling"),
        )


# ----------------------------------------------------------------------------------- geometry
@dataclass(frozen=True)
class Geometry:
    """How an image of ``image_wh`` became the model's ``input_wh``: scaled by ``gain`` (x, y) then shifted by
    ``pad`` (x, y) pixels. Plain resize: gains differ, no pad; letterbox: one gain, centred with grey bars."""

    image_wh: Tuple[int, int]
    input_wh: Tuple[int, int]
    gain: Tuple[float, float]
    pad: Tuple[int, int] = (0, 0)
    letterbox: bool = False

    @classmethod
    def resize(cls, image_wh: Tuple[int, int], input_wh: Tuple[int, int]) -> Geometry:
        return cls(
            (image_wh[0], image_wh[1]),
            (input_wh[0], input_wh[1]),
            (input_wh[0] / image_wh[0], input_wh[1] / image_wh[1]),
        )

    @classmethod
    def letterboxed(cls, image_wh: Tuple[int, int], input_wh: Tuple[int, int]) -> Geometry:
        """Ultralytics' ``LetterBox`` (auto=False, centred): one gain, the rest padded, pads rounded as it does."""
        w, h = image_wh
        W, H = input_wh
        r = min(W / w, H / h)
        new_w, new_h = _scaled(w, r), _scaled(h, r)
        dw, dh = (W - new_w) / 2.0, (H - new_h) / 2.0
        return cls((w, h), (W, H), (r, r), (int(round(dw - 0.1)), int(round(dh - 0.1))), True)

    @property
    def scaled_wh(self) -> Tuple[int, int]:
        if self.letterbox:
            return _scaled(self.image_wh[0], self.gain[0]), _scaled(self.image_wh[1], self.gain[1])
        return self.input_wh

    def to_image(self, boxes: np.ndarray) -> np.ndarray:
        """xyxy boxes in input pixels → xyxy in image pixels, clipped to the image."""
        out = np.array(boxes, dtype=np.float64).reshape(-1, 4)
        out[:, [0, 2]] = (out[:, [0, 2]] - self.pad[0]) / self.gain[0]
        out[:, [1, 3]] = (out[:, [1, 3]] - self.pad[1]) / self.gain[1]
        out[:, [0, 2]] = out[:, [0, 2]].clip(0, self.image_wh[0])
        out[:, [1, 3]] = out[:, [1, 3]].clip(0, self.image_wh[1])
        return out

    def apply(self, image: Any, resample: Any = None) -> Any:
        """A PIL image → the PIL image the model sees (letterboxed; a plain resize is left to preprocessing)."""
        if not self.letterbox:
            return image
        from PIL import Image

        filters = getattr(Image, "Resampling", Image)
        scaled = (
            image.resize(self.scaled_wh, resample if resample is not None else filters.BILINEAR)
            if image.size != self.scaled_wh
            else image
        )
        bands = len(scaled.getbands())
        canvas = Image.new(scaled.mode, self.input_wh, LETTERBOX_FILL if bands == 1 else (LETTERBOX_FILL,) * bands)
        canvas.paste(scaled, self.pad)
        return canvas


def _scaled(side: int, gain: float) -> int:
    """One side scaled and rounded, at least 1 pixel (a 4000x3 image's short side would round to 0)."""
    return max(1, int(round(side * gain)))


# ----------------------------------------------------------------------------------- math
def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(x, -80, 80)))


def logit(p: float) -> float:
    p = min(max(p, 1e-12), 1 - 1e-12)
    return math.log(p / (1 - p))


def dequantize(q: np.ndarray, quant: Tuple[float, int]) -> np.ndarray:
    scale, zero_point = quant
    if not scale or q.dtype.kind == "f":
        return q.astype(np.float32)
    return (float(scale) * (q.astype(np.int32) - int(zero_point))).astype(np.float32)


def quantized_threshold(value: float, quant: Tuple[float, int], dtype: Any) -> Optional[int]:
    """The smallest integer whose dequantized value is ``>= value`` (None for a float tensor), clamped to the
    dtype (its maximum + 1 when none is), computed in one step whatever the scale (a loop from ~1e44 hung
    on a scale below ~1e-25).

    Dequantization ``scale * (q - zero_point)`` is increasing for a positive scale, so ``q >= t``
    keeps exactly the entries whose real value is ``>= value``: filtering before dequantizing is exact.
    """
    scale, zero_point = quant
    if not scale or np.dtype(dtype).kind == "f" or scale <= 0:
        return None
    scale, zero_point, value = float(scale), int(zero_point), float(value)
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    x = value / scale + zero_point  # the real threshold on the integer grid (inf for a tiny scale)
    t = hi + 1 if not x < hi + 1 else lo if not x > lo else int(math.ceil(x))  # hi + 1 keeps nothing
    # floating-point edges: the division and the dequantization round apart; one step settles either side
    if t > lo and scale * (t - 1 - zero_point) >= value:
        t -= 1
    elif t <= hi and scale * (t - zero_point) < value:
        t += 1
    return t


def xywh_to_xyxy(b: np.ndarray) -> np.ndarray:
    out = np.empty_like(b)
    half_w, half_h = b[:, 2] / 2, b[:, 3] / 2
    out[:, 0], out[:, 1] = b[:, 0] - half_w, b[:, 1] - half_h
    out[:, 2], out[:, 3] = b[:, 0] + half_w, b[:, 1] + half_h
    return out


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box in ``a`` [n, 4] with every box in ``b`` [m, 4] (xyxy)."""
    a = np.asarray(a, np.float64).reshape(-1, 4)
    b = np.asarray(b, np.float64).reshape(-1, 4)
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = (rb - lt).clip(0)
    inter = wh[..., 0] * wh[..., 1]
    area_a = ((a[:, 2] - a[:, 0]).clip(0) * (a[:, 3] - a[:, 1]).clip(0))[:, None]
    area_b = ((b[:, 2] - b[:, 0]).clip(0) * (b[:, 3] - b[:, 1]).clip(0))[None, :]
    union = area_a + area_b - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def nms(
    boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray, iou: float = DEFAULT_IOU, max_det: int = DEFAULT_MAX_DET
) -> np.ndarray:
    """Class-wise greedy NMS: indices kept, best score first (boxes of different classes never suppress
    each other: each class is moved to its own region, as torchvision's ``batched_nms`` does)."""
    n = len(scores)
    if n == 0 or max_det <= 0:
        return np.zeros(0, dtype=np.int64)
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    span = float(np.abs(boxes).max()) * 2 + 1
    shifted = boxes + (np.asarray(classes, np.float64) * span)[:, None]
    order = np.argsort(-np.asarray(scores), kind="stable")[:MAX_NMS_BOXES]
    x1, y1, x2, y2 = shifted[:, 0], shifted[:, 1], shifted[:, 2], shifted[:, 3]
    areas = (x2 - x1).clip(0) * (y2 - y1).clip(0)
    keep: List[int] = []
    while order.size and len(keep) < max_det:
        i = order[0]
        keep.append(i)
        rest = order[1:]
        w = (np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest])).clip(0)
        h = (np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest])).clip(0)
        inter = w * h
        union = areas[i] + areas[rest] - inter
        overlap = np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)
        order = rest[overlap <= iou]
    return np.asarray(keep, dtype=np.int64)


# ----------------------------------------------------------------------------------- decoders
@dataclass
class Candidates:
    """Boxes (xyxy, input pixels) with their best class and score, before NMS; and what was decided on the way."""

    boxes: np.ndarray
    scores: np.ndarray
    classes: np.ndarray
    notes: List[str] = field(default_factory=list)
    nms_done: bool = False


def _empty() -> Candidates:
    return Candidates(np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros(0, np.int64))


def _normalized(values: np.ndarray, decided: Optional[bool], notes: List[str]) -> bool:
    if decided is not None:
        return decided
    normalized = values.size == 0 or float(np.abs(values).max()) <= 2.0
    notes.append(
        "boxes read from their values as {}".format(
            "normalized (no coordinate above 2)" if normalized else "pixels (coordinates above 2)"
        )
    )
    return normalized


def make_anchors(
    input_hw: Tuple[int, int], strides: Sequence[int] = (8, 16, 32), offset: float = 0.5
) -> Tuple[np.ndarray, np.ndarray]:
    """Anchor points (cell centres, in grid units) and their strides, level by level, row-major, as
    Ultralytics' ``make_anchors``: for each stride s a grid of ceil(h/s) x ceil(w/s) cells."""
    points, stride_col = [], []
    for s in strides:
        h, w = int(math.ceil(input_hw[0] / float(s))), int(math.ceil(input_hw[1] / float(s)))
        sy, sx = np.meshgrid(
            np.arange(h, dtype=np.float32) + offset, np.arange(w, dtype=np.float32) + offset, indexing="ij"
        )
        points.append(np.stack([sx.ravel(), sy.ravel()], axis=1))
        stride_col.append(np.full(h * w, s, dtype=np.float32))
    return np.concatenate(points), np.concatenate(stride_col)


def anchor_count(input_hw: Tuple[int, int], strides: Sequence[int] = (8, 16, 32)) -> int:
    return int(sum(int(math.ceil(input_hw[0] / float(s))) * int(math.ceil(input_hw[1] / float(s))) for s in strides))


def dfl(distributions: np.ndarray, reg_max: int = 16) -> np.ndarray:
    """[N, 4*reg_max] bin logits → [N, 4] distances: softmax over each side's bins, then the expectation. With one
    bin (YOLO26: Ultralytics' ``Detect`` has no DFL when ``reg_max`` is 1) the values are the distances."""
    x = np.asarray(distributions, np.float32).reshape(-1, 4, reg_max)
    if reg_max == 1:
        return x[:, :, 0]
    x = x - x.max(axis=2, keepdims=True)
    e = np.exp(x)
    p = e / e.sum(axis=2, keepdims=True)
    return (p * np.arange(reg_max, dtype=np.float32)).sum(axis=2)


def decode_split_dfl(
    boxes: Any,
    scores: Any,
    input_hw: Tuple[int, int],
    strides: Sequence[int] = (8, 16, 32),
    reg_max: int = 16,
    scores_are_logits: Optional[bool] = None,
    conf: float = 0.0,
    anchors: Optional[Tuple[np.ndarray, np.ndarray]] = None,
    multi_label: bool = False,
) -> Candidates:
    """A split YOLO head → candidate boxes (xyxy in input pixels), best class and score per anchor, score >= conf.

    ``boxes``: DFL distributions, one array ``[1, N, 4*reg_max]`` / ``[1, 4*reg_max, N]`` or a list with one
    NHWC map ``[1, h, w, 4*reg_max]`` per stride (finest first); ``scores`` the same with ``nc`` channels.
    Float arrays (dequantize first). Anchors are the cell centres of each stride's grid (Ultralytics'
    ``make_anchors``); a side's distance is the expectation of the softmax over its ``reg_max`` bins, in
    the order left, top, right, bottom, times the stride. ``scores_are_logits`` None: logits when any
    score is negative (a probability never is), said in the notes.
    """
    notes = []  # type: List[str]
    box_flat = _flatten_levels(boxes, 4 * reg_max, "boxes")
    score_flat = _flatten_levels(scores, None, "scores", box_flat.shape[0])
    if box_flat.shape[0] != score_flat.shape[0]:
        raise ValueError(f"split head: {box_flat.shape[0]} box rows but {score_flat.shape[0]} score rows")
    if anchors is None:
        anchors = make_anchors(input_hw, strides)
    points, stride_col = anchors
    if points.shape[0] != box_flat.shape[0]:
        raise ValueError(
            f"split head: {box_flat.shape[0]} anchors, but strides {list(strides)} on a {input_hw[1]}x{input_hw[0]} input make {points.shape[0]}"
        )
    if scores_are_logits is None:
        scores_are_logits = bool(score_flat.size) and float(score_flat.min()) < 0
        notes.append(
            "scores read from their values as {}".format(
                "logits (some negative; sigmoid applied)" if scores_are_logits else "probabilities (none negative)"
            )
        )
    threshold = logit(conf) if scores_are_logits else conf
    if multi_label:  # every class at or above conf is a candidate of its own (Ultralytics' val)
        keep, best = np.nonzero(score_flat >= threshold) if conf > 0 else np.nonzero(np.ones_like(score_flat))
        best_score = score_flat[keep, best]
        keep_idx = np.arange(len(keep))
    else:
        best = score_flat.argmax(axis=1)
        best_score = score_flat[np.arange(len(best)), best]
        keep = np.nonzero(best_score >= threshold)[0] if conf > 0 else np.arange(len(best))
        keep_idx = keep
    dist = dfl(box_flat[keep], reg_max)
    p, s = points[keep], stride_col[keep][:, None]
    xyxy = np.concatenate([p - dist[:, :2], p + dist[:, 2:]], axis=1) * s
    sc = best_score[keep_idx]
    if scores_are_logits:
        sc = sigmoid(sc)
    return Candidates(xyxy.astype(np.float32), sc.astype(np.float32), best[keep_idx].astype(np.int64), notes)


def _flatten_levels(x: Any, channels: Optional[int], what: str, rows: Optional[int] = None) -> np.ndarray:
    """One array [1, N, C] / [1, C, N] or a list of NHWC maps → [N, C] (C = ``channels`` when known, else
    N = ``rows``)."""
    if isinstance(x, (list, tuple)):
        return np.concatenate([np.asarray(a, np.float32).reshape(-1, np.asarray(a).shape[-1]) for a in x], axis=0)
    a = np.asarray(x, np.float32)
    if a.ndim == 4:
        return a.reshape(-1, a.shape[-1])
    a = a.reshape(a.shape[-2], a.shape[-1]) if a.ndim == 3 else a
    if channels is not None:
        if a.shape[1] == channels:
            return a
        if a.shape[0] == channels:
            return a.T
        raise ValueError(f"split head: {what} has shape {list(a.shape)}, no axis of {channels}")
    if rows is not None and a.shape[0] != rows and a.shape[1] == rows:
        return a.T
    return a


def _best_class(rows: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    best = rows.argmax(axis=1)
    return best, rows[np.arange(len(best)), best]


def decode(
    outputs: List[np.ndarray],
    quant: List[Tuple[float, int]],
    layout: DetectionLayout,
    conf: float = DEFAULT_CONF,
    multi_label: bool = False,
) -> Candidates:
    """The model's raw outputs (in interpreter order, quantized as they come) → candidates with score >= conf.

    ``multi_label``: every class of a YOLO box scoring >= conf is a candidate (Ultralytics' val), not only its best
    one (Ultralytics' predict, edgekit's detect).

    Where a tensor is quantized with a positive scale, scores are compared with ``conf`` as integers
    (:func:`quantized_threshold`) and only the anchors kept are dequantized.
    """
    kind = layout.kind
    if kind == Layout.POSTPROCESS:
        return _decode_postprocess(outputs, quant, layout, conf)
    if kind == Layout.SPLIT_DFL:
        return _decode_split(outputs, quant, layout, conf, multi_label)
    index = layout.role("output")
    raw = np.asarray(outputs[index])
    rows = raw.reshape(raw.shape[-2], raw.shape[-1]) if raw.ndim >= 2 else raw.reshape(1, -1)
    if layout.transposed:
        rows = rows.T  # [N, C]
    if kind == Layout.END2END:
        return _decode_end2end(rows, quant[index], layout, conf)
    return _decode_one_tensor(rows, quant[index], layout, conf, multi_label)


def _decode_postprocess(
    outputs: List[np.ndarray], quant: List[Tuple[float, int]], layout: DetectionLayout, conf: float
) -> Candidates:
    """The postprocess op's outputs (NMS done in the model): its first ``count`` boxes scoring >= conf."""
    H, W = layout.input_hw
    get = lambda role: dequantize(np.asarray(outputs[layout.role(role)]), quant[layout.role(role)])
    boxes = get("boxes").reshape(-1, 4)
    scores = get("scores").ravel()
    classes = get("classes").ravel()
    n = min(len(scores), len(boxes), len(classes))
    if "count" in dict(layout.roles):
        said = get("count").ravel()
        count = float(said[0]) if said.size else math.nan
        if not math.isfinite(count):  # the rows past the count are the op's uninitialized memory: none is read
            raise ValueError(f"its detection count is {count}, not a number of boxes")
        n = min(n, max(int(round(count)), 0))
    boxes, scores, classes = boxes[:n], scores[:n], classes[:n]
    keep = scores >= conf
    yx = boxes[keep].clip(0.0, 1.0)
    xyxy = (
        np.stack([yx[:, 1] * W, yx[:, 0] * H, yx[:, 3] * W, yx[:, 2] * H], axis=1)
        if len(yx)
        else np.zeros((0, 4), np.float32)
    )
    return Candidates(xyxy.astype(np.float32), scores[keep], np.rint(classes[keep]), [], nms_done=True)


def _kept(values_q: np.ndarray, q: Tuple[float, int], dtype: Any, conf: float) -> np.ndarray:
    """Indices of the rows whose value is >= conf: compared as integers where the tensor is quantized."""
    t = quantized_threshold(conf, q, dtype)
    return np.nonzero(values_q >= t)[0] if t is not None else np.nonzero(dequantize(values_q, q) >= conf)[0]


def _in_pixels(box: np.ndarray, layout: DetectionLayout, notes: List[str]) -> np.ndarray:
    """Boxes in input pixels: normalized ones (as the layout says, or as their values show) scaled up."""
    H, W = layout.input_hw
    if _normalized(box, layout.boxes_normalized, notes):
        return box * np.array([W, H, W, H], np.float32)
    return box


def _decode_end2end(rows: np.ndarray, q: Tuple[float, int], layout: DetectionLayout, conf: float) -> Candidates:
    """``[K, 6]`` rows (x1, y1, x2, y2, score, class; NMS done in the model) scoring >= conf."""
    notes = []  # type: List[str]
    sel = dequantize(rows[_kept(rows[:, 4], q, rows.dtype, conf)], q)
    box = _in_pixels(sel[:, :4], layout, notes)
    return Candidates(box, sel[:, 4], np.rint(sel[:, 5]), notes, nms_done=True)  # class ids checked in _sane


def _decode_one_tensor(
    rows: np.ndarray, q: Tuple[float, int], layout: DetectionLayout, conf: float, multi_label: bool = False
) -> Candidates:
    """``[N, 4+nc]`` (yolo: the best class's score) or ``[N, 5+nc]`` (yolov5: objectness times the best class's
    probability) rows → the anchors scoring >= conf, boxes as xyxy in input pixels."""
    notes = []  # type: List[str]
    first = 4 if layout.kind == Layout.YOLO else 5
    cls_q = rows[:, first:]
    if cls_q.shape[1] == 0:
        return _empty()
    if layout.kind == Layout.YOLO:
        sel = dequantize(rows[_kept(cls_q.max(axis=1), q, rows.dtype, conf)], q)
        if multi_label:
            row, best = np.nonzero(sel[:, 4:] >= conf)
            sel, score = sel[row], sel[row, 4 + best]
        else:
            best, score = _best_class(sel[:, 4:])
    else:  # yolov5: score = objectness * class probability; objectness >= conf is necessary (cls <= 1)
        sel = dequantize(rows[_kept(rows[:, 4], q, rows.dtype, conf)], q)
        best, cls_score = _best_class(sel[:, 5:])
        score = sel[:, 4] * cls_score
        ok = score >= conf
        sel, best, score = sel[ok], best[ok], score[ok]
    box = _in_pixels(sel[:, :4], layout, notes)
    return Candidates(xywh_to_xyxy(box), score.astype(np.float32), best.astype(np.int64), notes)


def _decode_split(
    outputs: List[np.ndarray],
    quant: List[Tuple[float, int]],
    layout: DetectionLayout,
    conf: float,
    multi_label: bool = False,
) -> Candidates:
    roles = dict(layout.roles)
    if "combined" in roles or f"combined@{layout.strides[0]}" in roles:
        return _decode_combined(outputs, quant, layout, conf, roles, multi_label)
    if "boxes" in roles:
        b = [roles["boxes"]]
        s = [roles["scores"]]
    else:
        b = [roles[f"boxes@{st}"] for st in layout.strides]
        s = [roles[f"scores@{st}"] for st in layout.strides]
    boxes = [dequantize(np.asarray(outputs[i]), quant[i]) for i in b]
    scores = [dequantize(np.asarray(outputs[i]), quant[i]) for i in s]
    one = len(b) == 1  # one tensor each, or one per level
    return decode_split_dfl(
        boxes[0] if one else boxes,
        scores[0] if one else scores,
        layout.input_hw,
        layout.strides,
        layout.reg_max,
        layout.scores_are_logits,
        conf,
        multi_label=multi_label,
    )


def _decode_combined(
    outputs: List[np.ndarray],
    quant: List[Tuple[float, int]],
    layout: DetectionLayout,
    conf: float,
    roles: Dict[str, int],
    multi_label: bool = False,
) -> Candidates:
    """DFL bins and class scores in one tensor (``[1, 4*reg_max + nc, N]``, transposed, or one NHWC map per stride):
    a YOLO head cut right after its last concatenation. Anchors are kept on the quantized class scores first."""
    c = 4 * layout.reg_max
    if "combined" in roles:
        i = roles["combined"]
        raw = np.asarray(outputs[i])
        rows = raw.reshape(raw.shape[-2], raw.shape[-1])
        rows = rows.T if layout.transposed else rows  # [N, C]
        qs = [quant[i]]
        parts = [rows]
    else:
        idx = [roles[f"combined@{st}"] for st in layout.strides]
        parts = [np.asarray(outputs[i]).reshape(-1, np.asarray(outputs[i]).shape[-1]) for i in idx]
        qs = [quant[i] for i in idx]
    points, stride_col = make_anchors(layout.input_hw, layout.strides)
    logits = layout.scores_are_logits
    keep_rows, keep_anchor, start = [], [], 0
    for part, q in zip(parts, qs):
        n = part.shape[0]
        t = (
            quantized_threshold(logit(conf) if logits else conf, q, part.dtype)
            if logits is not None and conf > 0
            else None
        )
        sel = np.nonzero(part[:, c:].max(axis=1) >= t)[0] if t is not None else np.arange(n)
        keep_rows.append(dequantize(part[sel], q))
        keep_anchor.append(sel + start)
        start += n
    rows = np.concatenate(keep_rows) if keep_rows else np.zeros((0, c + layout.num_classes), np.float32)
    anchor = np.concatenate(keep_anchor) if keep_anchor else np.zeros(0, np.int64)
    if rows.shape[0] == 0:
        return _empty()
    return decode_split_dfl(
        rows[None, :, :c],
        rows[None, :, c:],
        layout.input_hw,
        layout.strides,
        layout.reg_max,
        logits,
        conf,
        anchors=(points[anchor], stride_col[anchor]),
        multi_label=multi_label,
    )


def postprocess(
    outputs: List[np.ndarray],
    quant: List[Tuple[float, int]],
    layout: DetectionLayout,
    geometry: Geometry,
    conf: float = DEFAULT_CONF,
    iou: float = DEFAULT_IOU,
    max_det: int = DEFAULT_MAX_DET,
    labels: Optional[Dict[int, str]] = None,
    multi_label: bool = False,
) -> Tuple[List[Object], List[str]]:
    """Raw outputs → the objects found, in original-image pixels, best first; and notes on what was decided
    (``multi_label``: see :func:`decode`)."""
    with np.errstate(all="ignore"):  # hostile float outputs (NaN, inf) are dropped below, never warned about raw
        cand, dropped = _sane(decode(outputs, quant, layout, conf, multi_label), layout.num_classes)
        if cand.nms_done:
            order = np.argsort(-cand.scores, kind="stable")[: max(max_det, 0)]
        else:
            order = nms(cand.boxes, cand.scores, cand.classes, iou, max_det)
        boxes = geometry.to_image(cand.boxes[order]) if len(order) else np.zeros((0, 4))
    names = labels or {}
    objects = [
        Object(
            int(cand.classes[i]), float(cand.scores[i]), BBox(*(float(v) for v in box)), names.get(int(cand.classes[i]))
        )
        for i, box in zip(order, boxes)
    ]
    return objects, cand.notes + ([dropped] if dropped else [])


class Dropped(str):
    """The note on the candidates that could not be detections: ``dropped`` of them (a NaN or infinite
    coordinate or score, a class id outside the model's classes) and ``ordered`` boxes whose corners came
    inverted. A detector sums them over its images into one note (:meth:`total`)."""

    dropped = ordered = num_classes = 0

    def __new__(cls, dropped: int, ordered: int, num_classes: int) -> Dropped:
        parts = []
        if dropped:
            parts.append(
                "{} candidate detection{} dropped: a NaN or infinite box or score, or a class id outside "
                "the model's {}".format(
                    dropped, "" if dropped == 1 else "s", f"{num_classes} classes" if num_classes else "classes"
                )
            )
        if ordered:
            parts.append("{} box{} with inverted corners ordered".format(ordered, "" if ordered == 1 else "es"))
        self = str.__new__(cls, "; ".join(parts) + " (the model's raw outputs)")
        self.dropped, self.ordered, self.num_classes = dropped, ordered, num_classes
        return self

    @classmethod
    def total(cls, notes: Sequence[Dropped]) -> Dropped:
        return cls(sum(n.dropped for n in notes), sum(n.ordered for n in notes), notes[0].num_classes)


UNKNOWN_CLASSES_LIMIT = 1 << 31  # class ids kept where the model does not say how many classes it has


def _sane(c: Candidates, num_classes: int) -> Tuple[Candidates, Optional[Dropped]]:
    """``c`` without what cannot be a detection (NaN or infinite values, class ids that are not one of the model's
    ``num_classes``: below :data:`UNKNOWN_CLASSES_LIMIT` when 0) and with inverted corners ordered; and the note
    saying so, if any."""
    boxes = np.asarray(c.boxes, np.float64).reshape(-1, 4)
    scores = np.asarray(c.scores, np.float64).ravel()
    ids = np.asarray(c.classes, np.float64).ravel()
    ok = (
        np.isfinite(boxes).all(axis=1)
        & np.isfinite(scores)
        & np.isfinite(ids)
        & (ids >= 0)
        & (ids < (num_classes if num_classes > 0 else UNKNOWN_CLASSES_LIMIT))
    )
    boxes, scores, ids = boxes[ok], scores[ok], ids[ok]
    inverted = int(((boxes[:, 0] > boxes[:, 2]) | (boxes[:, 1] > boxes[:, 3])).sum())
    boxes = np.concatenate([np.minimum(boxes[:, :2], boxes[:, 2:]), np.maximum(boxes[:, :2], boxes[:, 2:])], axis=1)
    dropped = int(len(ok) - ok.sum())
    note = Dropped(dropped, inverted, num_classes) if dropped or inverted else None
    return Candidates(boxes, scores, ids.astype(np.int64), c.notes, c.nms_done), note
