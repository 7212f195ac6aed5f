"""``edgekit build``: the bundle written."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

from edgekit.records import Record
from edgekit.results.quantize import QuantizeResult, edgetpu_lines


@dataclass(frozen=True)
class BuildResult(Record):
    """``edgekit build --json``: the bundle written, its manifest, the quantize run behind it, and notes."""

    bundle: str
    manifest: Mapping[str, Any]
    quantize: Optional[QuantizeResult]  # None: built from an existing .tflite (the manifest's source says so)
    notes: Tuple[str, ...]

    def render_text(self) -> str:
        m = self.manifest
        check = m["reports"]["check"]
        lines = [f"{self.bundle}/: bundle of {len(m['files'])} file(s), sha256 of each in manifest.json"]
        lines += [f"  {e['path']}  {e['size_bytes']:,} bytes" for e in m["files"]]
        lines.append(f"CPU model: {m['models']['cpu']}; Edge TPU model: "
                     f"{m['models']['edgetpu'] or 'none (not compiled)'}")
        from edgekit.converters.check_summary import CheckSummary

        lines += CheckSummary.from_check(dict(check)).lines()
        lines += edgetpu_lines(None, self.quantize.advice) if self.quantize else []
        v = self.quantize.verification if self.quantize else None
        detector = getattr(v, "kind", None) == "detection"
        if detector and v.kept is not None:
            lines.append(f"Verification: int8 keeps {v.kept:.1%} of the float model's detections on {v.samples} "
                         "samples")
        elif v and not detector:
            lines.append(f"Verification: top-1 agreement {v.top1_agreement:.1%} on {v.samples} samples")
        acc = m["accuracy"]
        if acc and acc.get("task") == "detection":  # a detector's COCO mAP (pycocotools)
            detector = True
            r = acc["models"][0]

            def pct(x: Any) -> str:
                return "n/a" if x is None else f"{x:.1%}"
            lines.append(f"Accuracy on {acc['data']}: mAP {pct(r['map'])}, mAP50 {pct(r['map50'])} "
                         f"({acc['images']} images, the CPU int8 model)")
        elif acc:
            lines.append(f"Accuracy on {acc['data']}: top-1 {acc['top1']:.1%}, top-5 {acc['top5']:.1%} "
                         f"({acc['samples']} samples, the CPU int8 model)")
        lines.append(f"Run it: edgekit {'detect' if detector else 'classify'} IMAGES -m {self.bundle}")
        return "\n".join(lines)
