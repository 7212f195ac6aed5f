"""``edgekit evaluate``: accuracy on labelled data."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from edgekit.records import Record
from edgekit.results.classify import ImageError
from edgekit.results.metrics import LimitTest
from edgekit.results.preprocess import PreprocessSpec


@dataclass(frozen=True)
class ClassAccuracy(Record):
    """One class: recall (``top1``, with its 95% Wilson interval), how often it was predicted, and precision."""

    id: int
    label: str | None
    samples: int
    top1: float
    top1_interval: tuple[float, float] | None = None
    predicted: int | None = None
    precision: float | None = None


@dataclass(frozen=True, kw_only=True)
class Preprocessing(PreprocessSpec):
    """The preprocessing images went through and where it
    came from (``source``: recorded with the model, derived from its input, or the flags)."""

    source: str


@dataclass(frozen=True)
class ClassChange(Record):
    """One class's top-1 accuracy on the float model and on the int8 one (``change``: int8 minus float)."""

    id: int
    label: str | None
    samples: int
    float_top1: float
    int8_top1: float
    change: float


@dataclass(frozen=True)
class LayerError(Record):
    """One layer's int8 error against the float model on the same input (``relative_rms_error``: RMS error / RMS of
    the float output)."""

    op: str
    tensor: str
    relative_rms_error: float
    rms_error: float
    max_abs_error: float


@dataclass(frozen=True)
class ReferenceComparison(Record):
    """``evaluate --reference``: the float Keras model on the same samples, and how far the int8 model is from it."""

    model: str
    top1: float | None
    top5: float | None
    samples: int
    top1_agreement: float
    agreement_interval: tuple[float, float]
    mean_abs_diff: float
    max_abs_diff: float
    class_changes: tuple[ClassChange, ...]
    layers: tuple[LayerError, ...] | None
    layers_error: str | None


@dataclass(frozen=True)
class AccuracyDifference(Record):
    """``evaluate --against`` for a classifier: ``model``'s top-1 minus ``against``'s on the same samples, with
    Tango's paired 95% score interval, the samples only one of them gets right and the exact two-sided McNemar
    p-value on them; with ``--max-drop`` the drop's verdict (:class:`~edgekit.results.metrics.LimitTest`)."""

    model: str
    against: str
    samples: int
    top1: float | None
    against_top1: float | None
    top1_change: float | None
    top1_interval: tuple[float, ...]
    only_model: int
    only_against: int
    mcnemar_p: float
    max_drop_points: float | None = None
    verdict: LimitTest | None = None

    def line(self) -> str:
        if self.top1_change is None:
            return f"{self.model} against {self.against}: no sample scored by both"
        lo, hi = self.top1_interval
        return (
            "{} against {}: top-1 {:.1%} against {:.1%}, {:+.1f} points (95% interval {:+.1f} to {:+.1f}: {}); "
            "{} sample(s) only -m gets right, {} only the other (exact McNemar p = {:.3g}), {} samples".format(
                self.model,
                self.against,
                self.top1 or 0.0,
                self.against_top1 or 0.0,
                100 * self.top1_change,
                100 * lo,
                100 * hi,
                change_words(self.top1_interval, self.verdict, "samples"),
                self.only_model,
                self.only_against,
                self.mcnemar_p,
                self.samples,
            )
        )


PER_CLASS_ROWS = 10  # the text shows this many classes, worst first (--json has them all)


def per_class_lines(per_class: Sequence[ClassAccuracy], rows: int = PER_CLASS_ROWS) -> list[str]:
    """The per-class table of evaluate's text: worst recall first, at most ``rows`` classes.

    Recall is the top-1 accuracy on the class's own samples (with its 95% Wilson interval, since a
    class has few samples), precision the share of the predictions of the class that were right.
    """
    if len(per_class) < 2:
        return []
    worst = sorted(per_class, key=lambda c: (c.top1, -c.samples, c.id))
    shown = worst[:rows]
    lines = [
        f"Per class, worst first ({len(shown)} of {len(per_class)}"
        + ("" if len(shown) == len(per_class) else "; all in --json")
        + "):",
        f"  {'id':>4} {'label':<20} {'recall':>7} {'(95% interval)':>16} {'precision':>9} {'samples':>7}",
    ]
    for c in shown:
        lo, hi = c.top1_interval or (float("nan"), float("nan"))
        precision = "n/a" if c.precision is None else f"{c.precision:.1%}"
        lines.append(
            f"  {c.id:>4} {str(c.label or '')[:20]:<20} {c.top1:>7.1%} "
            f"{f'({lo:.0%} to {hi:.0%})':>16} {precision:>9} {c.samples:>7}"
        )
    return lines


@dataclass(frozen=True)
class EvaluateResult(Record):
    """``edgekit evaluate --json``: top-1/top-5 accuracy on labelled data (``reference``: against float)."""

    model: str
    device: str
    backend: str
    preprocess: Preprocessing
    labels_from: str
    samples: int
    classes: int
    top1: float | None
    top5: float | None
    per_class: tuple[ClassAccuracy, ...]
    errors: tuple[ImageError, ...]
    reference: ReferenceComparison | None = None
    against: tuple[AccuracyDifference, ...] = ()
    plots: tuple[str, ...] = ()  # the PNG files --plots wrote
    computes: str | None = None  # full-int8, mixed (float I/O around int8) or float: what the accuracy is of

    def render_text(self) -> str:
        def pct(v: float | None) -> str:
            return "n/a" if v is None else f"{v:.1%}"

        kind = "top-1" if self.computes == "float" else "int8 top-1"
        lines = [
            f"{self.model} on {self.device} ({self.backend}): {self.samples} samples, {self.classes} classes",
            f"Preprocessing: {self.preprocess.source}; labels: {self.labels_from}",
            f"{kind} {pct(self.top1)}, top-5 {pct(self.top5)}",
        ]
        lines += per_class_lines(self.per_class)
        r = self.reference
        if r:
            lines += [
                f"float ({r.model}) top-1 {pct(r.top1)}, top-5 {pct(r.top5)}",
                f"Agreement (top-1) {pct(r.top1_agreement)}; score difference mean "
                f"{r.mean_abs_diff:.4f}, max {r.max_abs_diff:.4f}",
            ]
            changed = [c for c in r.class_changes if c.change]
            lines.append(
                "Classes that changed most (float -> int8 top-1):"
                if changed
                else "No class's top-1 accuracy changed from float to int8"
            )
            lines += [
                f"  {c.id:>4} {c.label or '':<16} {pct(c.float_top1)} -> {pct(c.int8_top1)} ({c.samples} samples)"
                for c in changed
            ]
            if r.layers:
                lines.append(
                    "Layers with the largest int8 error (RMS error / RMS of the float output, each layer "
                    "on the same input):"
                )
                lines += [f"  {x.relative_rms_error:8.4f}  {x.op:<18} {x.tensor[:90]}" for x in r.layers[:5]]
            elif r.layers_error:
                lines.append(f"Per-layer report unavailable: {r.layers_error}")
        lines += [d.line() for d in self.against]
        if self.plots:
            lines.append("Plots: " + ", ".join(self.plots))
        return "\n".join(lines)


@dataclass(frozen=True)
class DetectionProtocol(Record):
    """How a detector was scored: its thresholds, whether they are COCO's standard ones, and the scorer."""

    conf: float
    iou: float
    max_det: int
    standard: bool
    scorer: str


@dataclass(frozen=True)
class ClassScore(Record):
    """One class's COCO AP (``ap``: mAP@[.5:.95]; None where the class has no ground truth)."""

    id: int
    name: str
    ap: float | None
    ap50: float | None
    objects: int


@dataclass(frozen=True)
class DetectorScore(Record):
    """One model's COCO mAP on the data (None where COCO has nothing of that size to score), with its median
    invoke and post-processing times per image and the images it could not read."""

    model: str
    device: str
    backend: str
    layout: str
    map: float | None
    map50: float | None
    map75: float | None
    map_small: float | None
    map_medium: float | None
    map_large: float | None
    per_class: tuple[ClassScore, ...]
    detections: int
    invoke_ms: float
    postprocess_ms: float
    errors: tuple[ImageError, ...]


@dataclass(frozen=True)
class MapDifference(Record):
    """``model`` minus ``against`` on the same images, with paired bootstrap 95% intervals over images; with
    ``--max-drop`` (``max_drop_points``), each drop's verdict (passed, failed, uncertain: the interval spans the
    limit, with the images that would likely settle it), mAP50 and mAP50-95 alike."""

    model: str
    against: str
    map50_change: float
    map50_interval: tuple[float, float]
    map_change: float
    map_interval: tuple[float, float]
    resamples: int
    seed: int
    max_drop_points: float | None = None
    map50_verdict: LimitTest | None = None
    map_verdict: LimitTest | None = None

    def line(self) -> str:
        lo, hi = self.map50_interval
        mlo, mhi = self.map_interval
        return (
            "{} against {}: mAP50 {:+.1f} points (95% interval {:+.1f} to {:+.1f}: {}), mAP50-95 {:+.1f} points "
            "({:+.1f} to {:+.1f}: {}); paired bootstrap over images, {} resamples, seed {}".format(
                self.model,
                self.against,
                100 * self.map50_change,
                100 * lo,
                100 * hi,
                change_words(self.map50_interval, self.map50_verdict, "images"),
                100 * self.map_change,
                100 * mlo,
                100 * mhi,
                change_words(self.map_interval, self.map_verdict, "images"),
                self.resamples,
                self.seed,
            )
        )


@dataclass(frozen=True)
class CutOffer(Record):
    """evaluate's offer of ``edgekit cut`` for a scored model whose YOLO decode runs inside it, in int8 (``command``:
    what to run: for a compiled model, the cut of its CPU twin, then its compile; ``decode_ops``: the ops the cut
    removes). With ``--try-cut``, ``score``: the model cut in memory
    and scored on the same data, and ``change``: the cut model minus the model, with its paired interval."""

    model: str
    command: str
    decode_ops: int
    score: DetectorScore | None = None
    change: MapDifference | None = None

    def line(self) -> str:
        head = (
            f"Cut: the decode of {self.model} ({self.decode_ops} ops) runs inside the model, in int8; "
            f"`{self.command}` cuts it off and detect decodes the head's maps on the host in float"
        )
        if self.score is None or self.change is None:
            return head + "; --try-cut measures the mAP it gives back on this data (one more evaluation)."
        c = self.change
        return (
            head
            + ": measured here, mAP50-95 {:.1f} ({:+.1f} points, 95% interval {:+.1f} to {:+.1f}: {}), "
            "mAP50 {:.1f} ({:+.1f} points).".format(
                100 * (self.score.map or 0.0),
                100 * c.map_change,
                100 * c.map_interval[0],
                100 * c.map_interval[1],
                change_words(c.map_interval, None, "images"),
                100 * (self.score.map50 or 0.0),
                100 * c.map50_change,
            )
        )


def change_words(interval: Sequence[float], verdict: LimitTest | None, unit: str) -> str:
    """What a change's interval says: against ``--max-drop`` where one was given (``verdict``), else whether it is
    a real loss, a real gain or not distinguishable from none at this sample size."""
    lo, hi = interval
    if verdict is None:
        return "a real loss" if hi < 0 else "a real gain" if lo > 0 else "not distinguishable from no change"
    limit = 100 * verdict.threshold
    if verdict.verdict == "passed":
        return f"passed: drops at most {limit:g} points"
    if verdict.verdict == "failed":
        return f"FAILED: drops more than {limit:g} points"
    settle = (
        f"about {verdict.settle_at} {unit} would settle it" if verdict.settle_at else "no sample size would settle it"
    )
    return f"uncertain at --max-drop {limit:g}: {settle}"


@dataclass(frozen=True)
class DetectionEvaluateResult(Record):
    """``edgekit evaluate --json`` for a detector (COCO or YOLO data; what
    :func:`edgekit.devices.evaluate_detector.evaluate_detector` returns): COCO mAP of each model scored by pycocotools, the
    protocol, the paired changes against ``--against`` models, warnings, and images that could not be read."""

    task: str
    data: str
    data_kind: str
    images: int
    objects: int
    protocol: DetectionProtocol
    models: tuple[DetectorScore, ...]
    differences: tuple[MapDifference, ...]
    warnings: tuple[str, ...]
    errors: tuple[ImageError, ...]
    plots: tuple[str, ...] = ()  # the PNG files --plots wrote
    cut: tuple[CutOffer, ...] = ()  # the offer of `edgekit cut` for each scored model it applies to

    def render_text(self) -> str:
        def pct(v: float | None) -> str:
            return "  -  " if v is None else f"{100 * v:5.1f}"

        p = self.protocol
        lines = [
            f"{self.data} ({self.data_kind}): {self.images} images, {self.objects} objects",
            "Protocol: conf >= {:g} for each class of a box (as Ultralytics' val), NMS IoU {:g}, at most {} "
            "detections per image; scored by pycocotools "
            "(COCO bbox AP, 101-point){}".format(
                p.conf, p.iou, p.max_det, "" if p.standard else " - NOT the standard protocol (conf 0.001, max 100)"
            ),
            "{:<44} {:>5} {:>5} {:>5} {:>5} {:>5} {:>5}  {}".format(
                "model", "mAP", "AP50", "AP75", "S", "M", "L", "device"
            ),
        ]
        for m in self.models:
            lines.append(
                f"{_short(m.model, 44):<44} {pct(m.map)} {pct(m.map50)} {pct(m.map75)} {pct(m.map_small)} {pct(m.map_medium)} {pct(m.map_large)}  {m.device} (invoke {m.invoke_ms:.1f} ms, post-processing {m.postprocess_ms:.1f} ms per image)"
            )
        first = self.models[0] if self.models else None
        if first and first.per_class:
            lines.append(
                f"Per class ({_short(first.model, 60)}): "
                + ", ".join(
                    f"{c.name} {c.objects} AP {pct(c.ap).strip()} AP50 {pct(c.ap50).strip()}" for c in first.per_class
                )
            )
        lines += [d.line() for d in self.differences]
        if self.plots:
            lines.append("Plots: " + ", ".join(self.plots))
        lines += [c.line() for c in self.cut]
        return "\n".join(lines)


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else "..." + text[-(n - 3) :]
