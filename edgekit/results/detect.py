"""``edgekit detect``: the objects found in each image (the document of
:class:`edgekit.board.detector.DetectReport`, which the board's runner also writes)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from edgekit.records import Record
from edgekit.results.classify import ImageError


@dataclass(frozen=True)
class DetectedBox(Record):
    """A box: ``xmin, ymin`` the near corner, ``xmax, ymax`` the far one (pixels of the image, or 0..1 of it)."""

    xmin: float
    ymin: float
    xmax: float
    ymax: float


@dataclass(frozen=True)
class DetectedObject(Record):
    """One object as ``--json`` writes it (:meth:`edgekit.board.decode.Object.to_dict`): the class id, its label, the
    score, the box in the image's pixels and normalized to its size."""

    id: int
    label: str | None
    score: float
    bbox: DetectedBox
    bbox_normalized: DetectedBox


@dataclass(frozen=True)
class ImageObjects(Record):
    """The objects found in one image (its size; invoke and host post-processing times in ms)."""

    image: str
    width: int
    height: int
    invoke_ms: float
    postprocess_ms: float
    objects: tuple[DetectedObject, ...]


@dataclass(frozen=True)
class DetectLayout(Record):
    """The layout the detector's outputs were read with (:meth:`edgekit.board.decode.DetectionLayout.to_dict`):
    ``kind`` (postprocess | yolo | yolov5 | split-dfl | end2end), each role's output position, and how each
    choice was made (``source``). quantize's detector verification records the same block."""

    kind: Literal["postprocess", "yolo", "yolov5", "split-dfl", "end2end"]  # edgekit.board.decode.Layout's values
    roles: Mapping[str, int]
    num_classes: int
    input_hw: tuple[int, int]
    boxes_normalized: bool | None
    scores_are_logits: bool | None
    transposed: bool
    reg_max: int
    strides: tuple[int, ...]
    letterbox: bool
    labels: tuple[str, ...] | None
    source: tuple[str, ...]
    options: Mapping[str, bool | int | float | str]  # the postprocess op's custom options
    pixel_scaling: str | None
    description: str


@dataclass(frozen=True)
class DetectResult(Record):
    """``edgekit detect --json``: where the detector ran, the layout it was read with, the thresholds, each
    image's objects and the images that could not be read."""

    model: str
    device: str
    backend: str
    layout: DetectLayout
    conf: float
    iou: float
    max_det: int
    first_inference_ms: float | None
    results: tuple[ImageObjects, ...]
    errors: tuple[ImageError, ...]
    notes: tuple[str, ...] = ()

    @classmethod
    def of_report(cls, report: Any) -> DetectResult:
        """From :class:`edgekit.board.detector.DetectReport` (what the runtime, here or on a board, found)."""
        return cls.from_dict(report.to_dict())

    def render_text(self) -> str:
        """The text the runtime's :meth:`edgekit.board.detector.DetectReport.render_text` prints (the board's
        runner prints it there; tests/test_detect.py keeps the two equal)."""
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
            lines += [
                "  {:<16} {:.3f}  [{:.0f}, {:.0f}, {:.0f}, {:.0f}]".format(
                    o.label if o.label is not None else f"class {o.id}",
                    o.score,
                    o.bbox.xmin,
                    o.bbox.ymin,
                    o.bbox.xmax,
                    o.bbox.ymax,
                )
                for o in r.objects
            ]
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
