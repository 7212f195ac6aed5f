"""``edgekit evaluate``: accuracy on labelled data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

from edgekit.records import Record
from edgekit.results.classify import ImageError


@dataclass(frozen=True)
class ClassAccuracy(Record):
    id: int
    label: Optional[str]
    samples: int
    top1: float


@dataclass(frozen=True)
class EvaluateResult(Record):
    """``edgekit evaluate --json``: top-1/top-5 accuracy on labelled data (``reference``: against float)."""

    model: str
    device: str
    backend: str
    preprocess: Mapping[str, Any]
    labels_from: str
    samples: int
    classes: int
    top1: Optional[float]
    top5: Optional[float]
    per_class: Tuple[ClassAccuracy, ...]
    errors: Tuple[ImageError, ...]
    reference: Optional[Mapping[str, Any]] = None

    def render_text(self) -> str:
        def pct(v: float | None) -> str:
            return "n/a" if v is None else f"{v:.1%}"

        lines = [f"{self.model} on {self.device} ({self.backend}): {self.samples} samples, {self.classes} classes",
                 f"Preprocessing: {self.preprocess['source']}; labels: {self.labels_from}",
                 f"int8 top-1 {pct(self.top1)}, top-5 {pct(self.top5)}"]
        r = self.reference
        if r:
            lines += [f"float ({r['model']}) top-1 {pct(r['top1'])}, top-5 {pct(r['top5'])}",
                      f"Agreement (top-1) {pct(r['top1_agreement'])}; score difference mean "
                      f"{r['mean_abs_diff']:.4f}, max {r['max_abs_diff']:.4f}"]
            changed = [c for c in r["class_changes"] if c["change"]]
            lines.append("Classes that changed most (float -> int8 top-1):" if changed else
                         "No class's top-1 accuracy changed from float to int8")
            lines += [f"  {c['id']:>4} {c['label'] or '':<16} {pct(c['float_top1'])} -> {pct(c['int8_top1'])} "
                      f"({c['samples']} samples)" for c in changed]
            if r["layers"]:
                lines.append("Layers with the largest int8 error (RMS error / RMS of the float output, each layer "
                             "on the same input):")
                lines += [f"  {x['relative_rms_error']:8.4f}  {x['op']:<18} {x['tensor'][:90]}"
                          for x in r["layers"][:5]]
            elif r["layers_error"]:
                lines.append(f"Per-layer report unavailable: {r['layers_error']}")
        return "\n".join(lines)
