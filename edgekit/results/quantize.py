"""``edgekit quantize``: the int8 model written and its verification (Decision per measure)."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from edgekit.records import Record
from edgekit.results.advice import Advice
from edgekit.results.check import CheckDigest, CheckResult
from edgekit.results.detect import DetectionLayout
from edgekit.results.inspect import OpCount
from edgekit.results.metrics import Chance
from edgekit.results.preprocess import PreprocessSpec


class Decision(str, enum.Enum):
    """A measurement against a limit at 95%: passed, failed (beyond doubt) or uncertain (the interval spans it)."""

    PASSED = "passed"
    FAILED = "failed"
    UNCERTAIN = "uncertain"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Misorder(Record):
    """Class ``label``'s samples read by the float model as class ``predicted``, ``count`` of ``of`` times."""

    label: int
    predicted: int
    count: int
    of: int


@dataclass(frozen=True)
class Map50Gate(Record):
    """A detector's mAP50, float against int8, on labelled ``--eval`` data (pycocotools), and the drop's verdict."""

    data: str
    images: int
    objects: int
    float_map50: float
    int8_map50: float
    drop: float
    drop_interval: tuple[float, float]
    max_drop_points: float
    verdict: Decision
    resamples: int
    seed: int
    scorer: str
    notes: tuple[str, ...]
    float_map: float | None = None  # mAP50-95, decided against the same limit
    int8_map: float | None = None
    map_drop: float | None = None
    map_drop_interval: tuple[float, ...] | None = None
    map_verdict: Decision | None = None


@dataclass(frozen=True)
class Verification(Record):
    """int8 against float on paired samples, each measure decided on its 95% interval (quantize)."""

    samples: int
    top1_agreement: float | None
    agreement_interval: tuple[float, float]
    mean_abs_diff: float | None
    max_abs_diff: float | None
    min_agreement: float
    sources: Mapping[str, int]
    held_back: bool
    labelled: bool
    confidence: float
    float_top1: float | None
    int8_top1: float | None
    accuracy_drop: float | None
    accuracy_drop_interval: tuple[float, float] | None
    max_accuracy_drop: float
    flips: Mapping[str, int] | None
    mcnemar_p: float | None
    float_near_chance: bool | None
    chance: Chance | None
    class_order: tuple[Misorder, ...] | None
    agreement_verdict: Decision
    accuracy_verdict: Decision | None  # None without labels
    passed: bool
    failures: tuple[str, ...]
    warnings: tuple[str, ...]
    notes: tuple[str, ...] = ()  # what the data cannot tell yet, while the estimate is within the limit

    def lines(self) -> list[str]:
        """Agreement and accuracy of int8 against float, each with its 95% interval and verdict."""
        sources = ", ".join(f"{n} {name.replace('_', '-')}" for name, n in self.sources.items() if n)
        lo, hi = self.agreement_interval
        agreement = "-" if self.top1_agreement is None else f"{self.top1_agreement:.1%}"
        diff = "-" if self.mean_abs_diff is None else f"{self.mean_abs_diff:.4f}"
        lines = [
            f"Verification on {self.samples} samples ({sources}): top-1 agreement {agreement} "
            f"(95% interval {lo:.1%} to {hi:.1%}; minimum {self.min_agreement:g}: {self.agreement_verdict}), "
            f"mean |score diff| {diff}" + ("" if self.passed else ": FAILED")
        ]
        if None not in (self.float_top1, self.int8_top1, self.accuracy_drop):
            lo, hi = self.accuracy_drop_interval or (0.0, 0.0)
            lines.append(
                f"Accuracy on the labels: float {self.float_top1:.1%}, int8 {self.int8_top1:.1%}: "
                f"{self.accuracy_drop:+.1f} points lost (95% interval {lo:+.1f} to {hi:+.1f}; at most "
                f"{self.max_accuracy_drop:g} allowed: {self.accuracy_verdict})"
            )
        return lines


@dataclass(frozen=True)
class DetectionVerification(Record):
    """A detector's int8 model against its float model (quantize): the share of the float model's detections
    the int8 model keeps (``kept``, same class at IoU >= ``match_iou``, with a bootstrap 95% interval) and,
    with labelled ``--eval`` data, the mAP50 drop (``map50``)."""

    kind: str
    samples: int
    sources: Mapping[str, int]
    conf: float
    match_iou: float
    float_detections: int
    int8_detections: int
    matched: int
    min_agreement: float
    mean_abs_diff: float | None
    class_order: None
    layout: DetectionLayout  # the layout verification read both models with (detect's block)
    failures: tuple[str, ...]
    warnings: tuple[str, ...]
    kept: float | None
    kept_interval: tuple[float, float] | None
    agreement_verdict: Decision
    passed: bool
    extra_int8: float | None = None
    map50: Map50Gate | None = None
    notes: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """Detections kept by int8 (with the interval and verdict), and the mAP50 gate when there was one."""
        sources = ", ".join(f"{n} {name.replace('_', '-')}" for name, n in self.sources.items() if n)
        if self.kept is None:
            kept = f"no float detections at conf {self.conf:g} to compare"
        else:
            lo, hi = self.kept_interval or (0.0, 0.0)
            kept = (
                f"int8 keeps {self.kept:.1%} of the float model's {self.float_detections} detections (95% "
                f"interval {lo:.1%} to {hi:.1%}; minimum {self.min_agreement:g}: {self.agreement_verdict})"
            )
        lines = [
            f"Verification on {self.samples} samples ({sources}): {kept}, mean |output diff| "
            f"{self.mean_abs_diff or 0.0:.4f}" + ("" if self.passed else ": FAILED")
        ]
        g = self.map50
        if g:
            lo, hi = g.drop_interval
            lines.append(
                f"mAP50 on the labels: float {100 * g.float_map50:.1f}, int8 {100 * g.int8_map50:.1f}: "
                f"{100 * g.drop:+.1f} points lost (95% interval {100 * lo:+.1f} to {100 * hi:+.1f}; at "
                f"most {g.max_drop_points:g} allowed: {g.verdict})"
            )
        if (
            g
            and g.map_verdict is not None
            and g.map_drop_interval is not None
            and g.float_map is not None
            and g.int8_map is not None
            and g.map_drop is not None
        ):  # set together by the mAP50 gate
            lo, hi = g.map_drop_interval
            lines.append(
                f"mAP50-95 on the labels: float {100 * g.float_map:.1f}, int8 {100 * g.int8_map:.1f}: "
                f"{100 * g.map_drop:+.1f} points lost (95% interval {100 * lo:+.1f} to {100 * hi:+.1f}; "
                f"at most {g.max_drop_points:g} allowed: {g.map_verdict})"
            )
        return lines


def edgetpu_lines(edgetpu: CheckDigest | None, advice: tuple[Advice, ...]) -> list[str]:
    """check's verdict on the written model and the advice for it (quantize's and build's summaries)."""
    lines = edgetpu.lines() if edgetpu else []
    return lines + [a.line() for a in advice or ()]


@dataclass(frozen=True)
class ModelOutput(Record):
    """The output quantize took of a model with several: its name, its index, and the names of all."""

    name: str
    index: int
    of: tuple[str, ...] | None


@dataclass(frozen=True)
class SourceModel(Record):
    """The Keras model (or SavedModel) quantized."""

    path: str
    format: str
    size_bytes: int
    output: ModelOutput | None
    notes: tuple[str, ...]


@dataclass(frozen=True)
class ConventionComparison(Record):
    """A preprocessing convention against the chosen one on the same samples (paired, Tango and McNemar)."""

    convention: str
    against: str
    difference: float
    interval: tuple[float, float]
    upper_one_sided: float
    only_convention: int
    only_against: int
    p_value: float
    disagreement: float


@dataclass(frozen=True)
class ConventionTrial(Record):
    """The float model's top-1 under one preprocessing convention, and the flags that select it."""

    convention: str
    channels: str
    mean: tuple[float, ...]
    std: tuple[float, ...]
    accuracy: float
    flags: str


@dataclass(frozen=True)
class PreprocessSearch(Record):
    """The preprocessing conventions measured on the labelled data (:mod:`edgekit.converters.preprocess_search`)."""

    samples: int
    classes: int
    chance: float
    verdict: str
    chosen: str | None
    tied: tuple[str, ...]
    preferred_by: str | None
    choice_margin: float
    comparisons: tuple[ConventionComparison, ...]
    table: tuple[ConventionTrial, ...]  # best first

    def render_text(self) -> str:
        """The accuracy of each preprocessing convention quantize tried, best first."""
        lines = [
            f"Preprocessing tried on {self.samples} labelled samples ({self.classes} classes, "
            f"chance {self.chance:.1%}):"
        ]
        for row in self.table:
            mark = "  <- chosen" if row.convention == self.chosen else ""
            lines.append(f"  {row.convention:<6} {row.accuracy:6.1%}   {row.flags}{mark}")
        return "\n".join(lines)


def render_search(search: PreprocessSearch) -> str:
    """The accuracy of each preprocessing convention quantize tried, best first."""
    return search.render_text()


@dataclass(frozen=True, kw_only=True)
class Preprocess(PreprocessSpec):
    """The preprocessing spec recorded, where it came from, and the search that settled it (None when the flags, the
    record or the model did)."""

    origin: str
    description: str
    search: PreprocessSearch | None


@dataclass(frozen=True)
class RefusedPreprocess(Record):
    """No preprocessing convention clearly won: no origin, and the search the refusal rests on."""

    origin: None
    search: PreprocessSearch


@dataclass(frozen=True)
class Calibration(Record):
    """The calibration data read and what reading it noted (the record inside the model keeps all but the notes)."""

    source: str
    kind: str
    samples: int
    holdout_samples: int
    classes: int | None
    random: bool
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TensorIO(Record):
    """An input or output tensor of the int8 model: type, shape, quantization."""

    dtype: str
    shape: tuple[int, ...]
    scale: float | None
    zero_point: int | None

    def line(self) -> str:
        scale = "-" if self.scale is None else f"{self.scale:.6g}"
        return f"{self.dtype} {'x'.join(map(str, self.shape))} scale={scale} zero_point={self.zero_point}"


@dataclass(frozen=True)
class ModelIO(Record):
    input: TensorIO
    output: TensorIO


@dataclass(frozen=True)
class GateChecks(Record):
    """What quantize requires of its output before writing it (all true), and check's verdict on it."""

    full_int8: bool
    static_shapes: bool
    op_versions_within_compiler: bool
    edgetpu_verdict: str

    @classmethod
    def from_check(cls, check: CheckResult) -> GateChecks:
        """From check's result on the written model."""
        codes = {p.code for p in check.problems}
        return cls(
            not codes & {"data_type", "not_quantized"},
            "dynamic_shapes" not in codes,
            not codes & {"op_version", "op_version_unsure"},
            check.verdict.value,
        )


@dataclass(frozen=True)
class QuantizeResult(Record):
    """``edgekit quantize --json``: the full-int8 model written, how it was calibrated, and its verification
    (None with ``verify=False``)."""

    output: str
    record: str | None  # None: the sidecar's name is the Keras model's own record (metadata inside only)
    source: SourceModel
    size_bytes: int
    preprocess: Preprocess
    labels: int | None
    calibration: Calibration
    io: ModelIO
    op_histogram: tuple[OpCount, ...]
    checks: GateChecks
    remedy: str | None
    remedies_tried: tuple[str | None, ...]
    verification: Verification | DetectionVerification | None  # a detector's: DetectionVerification
    warnings: tuple[str, ...]
    edgetpu: CheckDigest | None = None  # check's verdict on the written model
    advice: tuple[Advice, ...] = ()  # each with its evidence
    notes: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, document: Mapping[str, Any], where: str | None = None) -> QuantizeResult:
        """As :meth:`Record.from_dict`; the verification block read as a detector's when its ``kind`` says so."""
        where = where or cls.__name__
        v = document.get("verification") if isinstance(document, Mapping) else None
        if not isinstance(v, Mapping):
            return super().from_dict(document, where)
        kind = DetectionVerification if v.get("kind") == "detection" else Verification
        return dataclasses.replace(
            super().from_dict({**document, "verification": None}, where),
            verification=kind.from_dict(v, f"{where}.verification"),
        )

    def render_text(self) -> str:
        src, io, cal = self.source, self.io, self.calibration
        lines = [
            f"{self.output}: full-int8, {self.size_bytes:,} bytes (source {src.format}, {src.size_bytes:,} bytes)",
            f"Preprocessing: {self.preprocess.description} (from {self.preprocess.origin})",
            f"Calibration: {cal.samples} samples from {cal.source} ({cal.kind}"
            + (f", {cal.classes} classes" if cal.classes else "")
            + f"), {cal.holdout_samples} held back",
            f"Input:  {io.input.line()}",
            f"Output: {io.output.line()}"
            + (f" (the model's output {src.output.name!r} of {', '.join(src.output.of or ())})" if src.output else ""),
            "Ops: " + ", ".join(f"{h.count}x {h.name} v{h.version}" for h in self.op_histogram),
            "Int8 checks: integer ops, static batch-1 shapes, op versions within edgetpu_compiler 16: passed"
            + ("" if self.remedy == next(iter(self.remedies_tried), None) else f" (with {self.remedy})"),
        ]
        lines += edgetpu_lines(self.edgetpu, self.advice)
        if self.preprocess.search:
            lines[1:1] = [self.preprocess.search.render_text()]
        lines += self.verification.lines() if self.verification else ["Verification: skipped (--no-verify)"]
        lines.append(
            (
                f"Record: {self.record} and metadata 'edgekit' inside the model"
                if self.record
                else "Record: metadata 'edgekit' inside the model (the sidecar's name is the Keras model's own record)"
            )
            + (f" ({self.labels} labels)" if self.labels else "")
        )
        return "\n".join(lines)


@dataclass(frozen=True)
class RefusedQuantize(Record):
    """``edgekit quantize --json`` when no preprocessing convention clearly wins: nothing was written; the
    measurements the refusal rests on are in ``preprocess["search"]``."""

    output: None
    error: str
    preprocess: RefusedPreprocess

    def render_text(self) -> str:
        return self.preprocess.search.render_text()
