"""``edgekit classify``: :class:`Class` records (like pycoral's) and the command's document.

The one type of that document, wherever it is made: the runtime core (:mod:`edgekit.board.classifier`) returns
it on the host and on a Python 3.7 board (this module ships there, so it stays 3.7: ``Optional``, ``Tuple``), the
board runner prints its ``to_dict()``, and the host reads a board's answer back with ``from_dict()``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from edgekit.records import Record


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

    def to_dict(self) -> Dict[str, Any]:  # the document's key order: id, label, score
        return {
            "image": self.image,
            "ms": self.ms,
            "top": [{"id": c.id, "label": c.label, "score": c.score} for c in self.top],
        }


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

    def render_text(self) -> str:
        first = "" if self.first_inference_ms is None else f", first inference {self.first_inference_ms:.1f} ms"
        lines = [f"{self.model} on {self.device} ({self.backend}){first}"]
        for r in self.results:
            lines.append(f"{r.image}  ({r.ms:.1f} ms)")
            lines += [
                f"  {t.score:8.5f}  {t.id:>5}  {t.label if t.label is not None else ''}".rstrip() for t in r.top
            ] or ["  (no class at or above the threshold)"]
        return "\n".join(lines)
