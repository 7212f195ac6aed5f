"""``edgekit detect``: :class:`Object` records (like pycoral's) with their :class:`BBox`, the layout a detector's
outputs were read with, and the command's document.

The one type of that document, wherever it is made: the runtime core (:mod:`edgekit.board.detector`) returns it on
the host and on a Python 3.7 board (this module ships there, so it stays 3.7: ``Optional``, ``Tuple``, an Enum where
a newer Python would take a ``Literal``), the board runner prints its ``to_dict()``, and the host reads a board's
answer back with ``from_dict()``. The layout goes the other way too: the host finds it and sends its document."""

from __future__ import annotations

import enum
import statistics
import types
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from edgekit.records import Record
from edgekit.results.classify import ImageError


@dataclass(frozen=True)
class BBox(Record):
    """A box: ``xmin, ymin`` the near corner, ``xmax, ymax`` the far one (pixels of the image, or 0..1 of it)."""

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


@dataclass(frozen=True)
class Object(Record):
    """One detection, like pycoral's ``Object(id, score, bbox)``, with its label when known; ``bbox_normalized``
    (the box in 0..1 of its image) as a document read back holds it: the runtime leaves it to :meth:`to_dict`."""

    id: int
    score: float
    bbox: BBox  # in the image's pixels
    label: Optional[str] = None
    bbox_normalized: Optional[BBox] = None

    def to_dict(self, width: Optional[int] = None, height: Optional[int] = None) -> Dict[str, Any]:
        """The document's key order (id, label, score, bbox); ``bbox`` to 2 decimals, and ``bbox_normalized`` (to 6,
        from that box) when the object holds it or its image's size is given. Written out, no record made on the
        way: the board writes this for every object of every image."""
        b = self.bbox
        x0, y0, x1, y1 = round(b.xmin, 2), round(b.ymin, 2), round(b.xmax, 2), round(b.ymax, 2)
        d = {
            "id": self.id,
            "label": self.label,
            "score": round(self.score, 6),
            "bbox": {"xmin": x0, "ymin": y0, "xmax": x1, "ymax": y1},
        }
        if self.bbox_normalized is not None:
            d["bbox_normalized"] = self.bbox_normalized.to_dict()
        elif width and height:
            sx, sy = 1.0 / width, 1.0 / height
            d["bbox_normalized"] = {
                "xmin": round(x0 * sx, 6),
                "ymin": round(y0 * sy, 6),
                "xmax": round(x1 * sx, 6),
                "ymax": round(y1 * sy, 6),
            }
        return d

    def line(self) -> str:
        b = self.bbox
        name = self.label if self.label is not None else f"class {self.id}"
        return f"{name:<16} {self.score:.3f}  [{b.xmin:.0f}, {b.ymin:.0f}, {b.xmax:.0f}, {b.ymax:.0f}]"


@dataclass(frozen=True)
class ImageObjects(Record):
    """The objects found in one image (pixels of that image), with its size and the invoke and host
    post-processing times in ms."""

    image: str
    width: int
    height: int
    invoke_ms: float
    postprocess_ms: float
    objects: Tuple[Object, ...] = ()

    def to_dict(self) -> Dict[str, Any]:  # each object's bbox_normalized from this image's size
        return {
            "image": self.image,
            "width": self.width,
            "height": self.height,
            "invoke_ms": self.invoke_ms,
            "postprocess_ms": self.postprocess_ms,
            "objects": [o.to_dict(self.width, self.height) for o in self.objects],
        }


class Layout(str, enum.Enum):
    """A detector's output layout (the names ``--layout`` takes; :mod:`edgekit.board.decode` reads each)."""

    POSTPROCESS = "postprocess"
    YOLO = "yolo"
    YOLOV5 = "yolov5"
    SPLIT_DFL = "split-dfl"
    END2END = "end2end"


@dataclass(frozen=True)
class DetectionLayout(Record):
    """What a detector's outputs mean, decided from the model itself (see :mod:`edgekit.detection.layout`);
    quantize's detector verification records the same block.

    ``roles`` maps a role (``boxes``, ``classes``, ``scores``, ``count`` for ``postprocess``; ``output``
    for the single-tensor layouts; ``boxes``/``scores`` or ``boxes@8``/``scores@8``... for split-dfl)
    to the position of that output in the interpreter's output list. ``boxes_normalized``: True when
    boxes are fractions of the input size, False for input pixels, None to decide per image from the
    values. ``scores_are_logits``: the same for sigmoid. ``transposed``: the anchors run along the
    last axis (``[1, C, N]``). ``letterbox``: the model was fed letterboxed images (Ultralytics)
    rather than plainly resized ones. ``source``: how each choice was made, for the user. ``options``: the
    postprocess op's custom options (sorted by name). ``description``: :meth:`describe`, always (what a
    document says there is not kept).
    """

    kind: Layout
    roles: Mapping[str, int]
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
    options: Mapping[str, Union[bool, int, float, str]] = field(default_factory=dict)
    pixel_scaling: Optional[str] = None  # "0..1" when the model's maker says so (Ultralytics divides by 255)
    description: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "roles", types.MappingProxyType(dict(self.roles)))
        object.__setattr__(self, "options", types.MappingProxyType(dict(sorted(self.options.items()))))
        object.__setattr__(self, "description", self.describe())

    def role(self, name: str) -> int:
        return self.roles[name]

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


@dataclass(frozen=True)
class DetectResult(Record):
    """``edgekit detect --json``: where the detector ran, the layout it was read with, the thresholds, each
    image's objects and the images that could not be read."""

    model: str
    device: str
    backend: str
    layout: DetectionLayout
    conf: float
    iou: float
    max_det: int
    first_inference_ms: Optional[float] = None
    results: Tuple[ImageObjects, ...] = ()
    errors: Tuple[ImageError, ...] = ()
    notes: Tuple[str, ...] = ()

    def render_text(self) -> str:
        lines = []
        for r in self.results:
            lines.append(
                "{}: {} object{} ({}x{}; invoke {:.1f} ms, post-processing {:.1f} ms)".format(
                    r.image,
                    len(r.objects),
                    "" if len(r.objects) == 1 else "s",
                    r.width,
                    r.height,
                    r.invoke_ms,
                    r.postprocess_ms,
                )
            )
            lines += ["  " + o.line() for o in r.objects]
        lines += [f"{e.image}: error: {e.error}" for e in self.errors]
        if self.results:
            n = len(self.results)
            lines.append(
                "{} image{} on {} ({}): invoke {:.1f} ms, post-processing {:.1f} ms per image (median); "
                "layout {}; conf {:g}, IoU {:g}, max {}".format(
                    n,
                    "" if n == 1 else "s",
                    self.device,
                    self.backend,
                    float(statistics.median(r.invoke_ms for r in self.results)),
                    float(statistics.median(r.postprocess_ms for r in self.results)),
                    self.layout.description,
                    self.conf,
                    self.iou,
                    self.max_det,
                )
            )
        return "\n".join(lines)
