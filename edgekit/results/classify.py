"""``edgekit classify``: :class:`Class` records (like pycoral's) and the command's document."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Tuple

from edgekit.records import Record

if TYPE_CHECKING:  # pragma: no cover
    from edgekit.board.classifier import ImageResultDocument


@dataclass(frozen=True)
class Class(Record):
    """One class of a classification, like pycoral's ``classify.Class`` (with the label beside the id)."""

    id: int
    score: float
    label: Optional[str] = None


@dataclass(frozen=True)
class ImageClasses(Record):
    image: str
    ms: float
    top: Tuple[Class, ...]

    def to_dict(self) -> ImageResultDocument:  # type: ignore[override]  # the document's key order: id, label, score
        return {"image": self.image, "ms": self.ms,
                "top": [{"id": c.id, "label": c.label, "score": c.score} for c in self.top]}


@dataclass(frozen=True)
class ImageError(Record):
    image: str
    error: str


@dataclass(frozen=True)
class ClassifyResult(Record):
    """``edgekit classify --json``: the top classes of each image, and the images that could not be read."""

    model: str
    device: str
    backend: str
    first_inference_ms: Optional[float]
    results: Tuple[ImageClasses, ...]
    errors: Tuple[ImageError, ...]

    @classmethod
    def of_report(cls, report: Any) -> "ClassifyResult":
        """From the runtime core's :class:`~edgekit.board.classifier.ClassifyReport` (built directly: a
        folder of images makes many records)."""
        return cls(report.model, report.device, report.backend, report.first_inference_ms,
                   tuple(ImageClasses(r.image, r.ms, tuple(Class(t["id"], t["score"], t["label"]) for t in r.top))
                         for r in report.results),
                   tuple(ImageError(e["image"], e["error"]) for e in report.errors))

    def render_text(self) -> str:
        first = "" if self.first_inference_ms is None else f", first inference {self.first_inference_ms:.1f} ms"
        lines = [f"{self.model} on {self.device} ({self.backend}){first}"]
        for r in self.results:
            lines.append(f"{r.image}  ({r.ms:.1f} ms)")
            lines += [f"  {t.score:8.5f}  {t.id:>5}  {t.label if t.label is not None else ''}".rstrip()
                      for t in r.top] or ["  (no class at or above the threshold)"]
        return "\n".join(lines)
