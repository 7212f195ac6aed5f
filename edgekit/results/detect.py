"""``edgekit detect``: the objects found in each image (the document of
:class:`edgekit.devices.detector.DetectReport`, which the board's runner also writes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

from edgekit.records import Record
from edgekit.results.classify import ImageError


@dataclass(frozen=True)
class DetectResult(Record):
    """``edgekit detect --json``: where the detector ran, the layout it was read with, the thresholds, each
    image's objects (``results``: image, width, height, invoke_ms, postprocess_ms, objects) and the images
    that could not be read."""

    model: str
    device: str
    backend: str
    layout: Mapping[str, Any]
    conf: float
    iou: float
    max_det: int
    first_inference_ms: Optional[float]
    results: Tuple[Mapping[str, Any], ...]
    errors: Tuple[ImageError, ...]
    notes: Tuple[str, ...] = ()

    @classmethod
    def of_report(cls, report: Any) -> "DetectResult":
        """From :class:`edgekit.devices.detector.DetectReport` (what the runtime, here or on a board, found)."""
        return cls.from_dict(report.to_dict())

    def report(self) -> Any:
        """The runtime's :class:`~edgekit.devices.detector.DetectReport` of this document (its boxes and layout)."""
        from edgekit.devices.detector import DetectReport

        return DetectReport.from_dict(self.to_dict())

    def render_text(self) -> str:
        # one rendering, beside the runtime's type (the board's runner prints the same lines)
        return self.report().render_text()
