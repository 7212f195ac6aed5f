"""Find a model's input preprocessing from labelled data: try each convention, measure, pick or refuse.

A model trained with its preprocessing in the input pipeline carries no trace of it; agreement
between the float and the int8 model cannot reveal a wrong guess (both get the same wrong inputs).
Labelled calibration data can: the float model is run on one decoded sample under each convention
``keras.applications`` uses (``imagenet_utils.preprocess_input`` modes) plus raw pixels, and its
top-1 accuracy tells which one it was trained with. Each convention is a plain
:class:`~edgekit.board.preprocess.PreprocessSpec` (channel order, mean, std on 0..255 pixels), so the one
recorded is the one ``classify`` applies with no flags.

The decision is paired: every convention runs on the same samples, so only the samples where two
conventions differ in being right count (exact McNemar test; Tango's score interval for the paired
difference, :mod:`edgekit.results.metrics`). A convention the best one is shown better than is out; a clear
winner wins. Conventions the data cannot tell apart are a free choice when none of them could beat
the one used (the model's own layer first, then the record, then the common prior :data:`PRIOR`) by
:data:`CHOICE_MARGIN` top-1: the choice cannot change the result, and one note says it. Only a
choice that could change the result is refused (exit 6, with the table and the flags to choose),
as is a best convention near chance (the data does not fit the model, or the model never learned).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

import numpy as np

from edgekit.board.preprocess import PreprocessSpec, normalize_rgb
from edgekit.errors import UsageError, VerificationError
from edgekit.results import metrics
from edgekit.results.quantize import (
    ConventionComparison,
    ConventionTrial,
    PreprocessSearch,
    RefusedPreprocess,
    RefusedQuantize,
)

IMAGENET_MEAN_RGB = (0.485, 0.456, 0.406)  # keras.applications.imagenet_utils, mode 'torch' (on 0..1)
IMAGENET_STD_RGB = (0.229, 0.224, 0.225)
CAFFE_MEAN_BGR = (103.939, 116.779, 123.68)  # mode 'caffe': BGR, these means subtracted, no scaling

# name → (channel order, mean, std) on 0..255 pixels; "L" models try the first three only.
CONVENTIONS: dict[str, tuple[str, tuple[float, ...], tuple[float, ...]]] = {
    "raw": ("RGB", (0.0,), (1.0,)),  # 0..255 as they are
    "0..1": ("RGB", (0.0,), (255.0,)),  # x / 255
    "-1..1": ("RGB", (127.5,), (127.5,)),  # x / 127.5 - 1: mode 'tf' (MobileNet, Inception...)
    "torch": (
        "RGB",
        tuple(round(255 * m, 6) for m in IMAGENET_MEAN_RGB),
        tuple(round(255 * s, 6) for s in IMAGENET_STD_RGB),
    ),  # (x / 255 - mean) / std
    "caffe": ("BGR", CAFFE_MEAN_BGR, (1.0,)),  # BGR, x - mean (ResNet50, VGG)
}
GRAYSCALE_CONVENTIONS = ("raw", "0..1", "-1..1")
SEARCH_SAMPLES = 200


def convention_spec(name: str, base: PreprocessSpec) -> PreprocessSpec:
    """``base`` (size, resize filter) with the convention's channel order, mean and std."""
    channels, mean, std = CONVENTIONS[name]
    return replace(base, channels="L" if base.channels == "L" else channels, mean=mean, std=std)


def conventions_for(base: PreprocessSpec) -> list[str]:
    return list(GRAYSCALE_CONVENTIONS) if base.channels == "L" else list(CONVENTIONS)


def flags_for(spec: PreprocessSpec) -> str:
    """The quantize flags that give ``spec``'s channel order and scaling."""
    named = spec.scaling_name
    flags = (
        f"--scaling {named}"
        if named
        else (f"--mean {','.join(f'{v:g}' for v in spec.mean)} --std {','.join(f'{v:g}' for v in spec.std)}")
    )
    return flags + (" --channels BGR" if spec.channels == "BGR" else "")


@dataclass
class Trial:
    name: str
    spec: PreprocessSpec
    correct: np.ndarray  # (N,) bool: top-1 right on each sample
    predicted: np.ndarray | None = None  # (N,) the top-1 class of each sample

    @property
    def accuracy(self) -> float:
        return float(np.mean(self.correct)) if len(self.correct) else float("nan")


class SearchVerdict(str, Enum):
    """What the measurements settle."""

    CHOSEN = "chosen"  # one convention is shown better than every other
    CHOICE = "choice"  # several score alike, and which is used cannot change top-1 by CHOICE_MARGIN
    AMBIGUOUS = "ambiguous"  # several score alike, and the choice could change top-1 by more: the user says
    NEAR_CHANCE = "near-chance"  # even the best cannot be told from guessing


#: A convention is out of the race when the exact one-sided McNemar test shows the best one right on
#: more samples at this family-wise level (Bonferroni over the conventions compared).
EXCLUDE_ALPHA = 0.01
#: Conventions still in the race are a free choice when none could beat the one used by more than
#: this much top-1 (the one-sided 95% bound of the paired difference): the choice then cannot
#: change the model's result by more than that, and the data could never settle it cheaply.
CHOICE_MARGIN = 0.05
Z_ONE_SIDED_95 = 1.6448536269514722
#: The common prior among conventions the data cannot tell apart: x/255 (Keras tutorials and Colab
#: pipelines), then -1..1 (keras.applications MobileNet/Inception), torch, caffe, raw pixels (a
#: model with its own Rescaling/Normalization layer is preferred to take raw pixels before this).
PRIOR = ("0..1", "-1..1", "torch", "caffe", "raw")


@dataclass(frozen=True)
class TrialComparison:
    """Convention ``name`` against ``against`` on the same samples (top-1 right or not on each)."""

    name: str
    against: str
    difference: float  # top-1 of name minus top-1 of against
    interval: tuple[float, float]  # two-sided 95% (Tango, paired)
    upper_one_sided: float  # one-sided 95% upper bound of the difference
    only_name: int  # samples only ``name`` gets right
    only_against: int  # samples only ``against`` gets right
    p_value: float  # exact one-sided McNemar: ``against`` better than ``name``
    disagreement: float  # share of samples whose top-1 class differs between the two

    @classmethod
    def of(cls, a: Trial, b: Trial) -> TrialComparison:
        two = metrics.paired_difference(a.correct, b.correct)
        one = metrics.paired_difference(a.correct, b.correct, z=Z_ONE_SIDED_95)
        n = len(a.correct)
        differ = (
            float(np.mean(a.predicted != b.predicted))
            if a.predicted is not None and b.predicted is not None and n
            else float(np.mean(a.correct != b.correct))
            if n
            else 0.0
        )
        lo, hi = two.interval
        p_value = metrics.binomial_sf(two.only_b, two.only_a + two.only_b, 0.5)
        return cls(
            a.name,
            b.name,
            float(two.difference or 0.0),
            (float(lo), float(hi)),
            float(one.interval[1]),
            two.only_a,
            two.only_b,
            float(p_value),
            differ,
        )

    def record(self) -> ConventionComparison:
        """The comparison as quantize's ``preprocess.search.comparisons`` rows record it."""
        return ConventionComparison(
            self.name,
            self.against,
            self.difference,
            self.interval,
            self.upper_one_sided,
            self.only_name,
            self.only_against,
            self.p_value,
            self.disagreement,
        )


@dataclass
class SearchResult:
    trials: list[Trial]  # best first
    classes: int
    verdict: SearchVerdict
    tied: list[str]  # conventions the best one was not shown better than, best first
    chosen: str | None = None  # the convention used (verdicts chosen and choice)
    preferred_by: str | None = None  # why it was picked among the tied ones (verdict choice)
    comparisons: list[TrialComparison] = field(default_factory=list)  # each tied one against the chosen/best one

    @property
    def best(self) -> Trial:
        return self.trials[0]

    @property
    def used(self) -> Trial | None:
        return next((t for t in self.trials if t.name == self.chosen), None)

    @property
    def samples(self) -> int:
        return len(self.best.correct)

    def record(self) -> PreprocessSearch:
        """The search as quantize's ``preprocess.search`` (and the model's record) keep it."""
        return PreprocessSearch(
            self.samples,
            self.classes,
            1.0 / self.classes,
            self.verdict.value,
            self.chosen,
            tuple(self.tied),
            self.preferred_by,
            CHOICE_MARGIN,
            tuple(c.record() for c in self.comparisons),
            tuple(
                ConventionTrial(
                    t.name, t.spec.channels, tuple(t.spec.mean), tuple(t.spec.std), t.accuracy, flags_for(t.spec)
                )
                for t in self.trials
            ),
        )

    def table(self) -> str:
        """The accuracy of each convention, one line each, best first (the lines quantize prints)."""
        lines = [
            f"Preprocessing tried on {self.samples} labelled samples "
            f"({self.classes} classes, chance {1 / self.classes:.1%}):"
        ]
        for t in self.trials:
            lines.append(f"  {t.name:<6} {t.accuracy:6.1%}  {flags_for(t.spec)}")
        return "\n".join(lines)

    def choice_note(self) -> str | None:
        """The one note a free choice among tied conventions gets (None for other verdicts)."""
        if self.verdict != SearchVerdict.CHOICE or self.used is None:
            return None
        used = self.used
        others = [c for c in self.comparisons if c.name != used.name]
        alike = ", ".join(
            f"{c.name} {c.difference + used.accuracy:.1%} (at most "
            f"{100 * max(0.0, c.upper_one_sided):.1f} points better, one-sided 95%; top-1 class "
            f"differs on {c.disagreement:.0%} of samples)"
            for c in others
        )
        flags = "; ".join(flags_for(t.spec) for t in self.trials if t.name in {c.name for c in others})
        return (
            f"preprocessing: {self.samples} labelled samples do not clearly separate {used.name} "
            f"({used.accuracy:.1%}) from {alike}; none could beat {used.name} by {100 * CHOICE_MARGIN:g} points "
            f"of top-1, so the choice cannot change the result by that much: using {used.name} "
            f"({self.preferred_by}); if the model was trained otherwise, pass {flags}"
        )


def _preference(name: str, preferred: tuple[str, ...]) -> int:
    order = tuple(dict.fromkeys(preferred + PRIOR))
    return order.index(name) if name in order else len(order)


def decide(trials: list[Trial], classes: int, preferred: tuple[str, ...] = ()) -> SearchResult:
    """Rank the trials and settle one, with paired tests on the same samples (see :class:`SearchVerdict`).

    Conventions the best is shown better than (exact McNemar, :data:`EXCLUDE_ALPHA` over all) are out.
    Of those left, the first in ``preferred`` (the model's own layer, the record) then :data:`PRIOR`
    that none of the others could beat by :data:`CHOICE_MARGIN` top-1 (one-sided 95%) is used: a
    choice that cannot change the result. When every one could be beaten by more, the choice matters
    and the data cannot make it: ambiguous.
    """
    ranked = sorted(trials, key=lambda t: -t.accuracy)  # stable: equal accuracies keep the CONVENTIONS order
    best = ranked[0]
    alpha = EXCLUDE_ALPHA / max(1, len(ranked) - 1)
    tied = [t for t in ranked[1:] if TrialComparison.of(t, best).p_value >= alpha]
    if metrics.near_chance(best.accuracy, len(best.correct), classes):
        return SearchResult(ranked, classes, SearchVerdict.NEAR_CHANCE, [t.name for t in tied])
    if not tied:
        return SearchResult(ranked, classes, SearchVerdict.CHOSEN, [], best.name)
    race = sorted([best] + tied, key=lambda t: _preference(t.name, preferred))
    for rank, used in enumerate(race):
        comparisons = [TrialComparison.of(t, used) for t in race if t is not used]
        if all(c.upper_one_sided <= CHOICE_MARGIN for c in comparisons):
            why = (
                ("the model's own input layer" if used.name in preferred else "the common default among them")
                if rank == 0
                else (
                    f"{', '.join(t.name for t in race[:rank])} could be beaten by more than "
                    f"{100 * CHOICE_MARGIN:g} points"
                )
            )
            return SearchResult(
                ranked, classes, SearchVerdict.CHOICE, [t.name for t in tied], used.name, why, comparisons
            )
    return SearchResult(
        ranked,
        classes,
        SearchVerdict.AMBIGUOUS,
        [t.name for t in tied],
        None,
        None,
        [TrialComparison.of(t, best) for t in tied],
    )


def search(
    predict: Callable[[np.ndarray], np.ndarray],
    pixels: np.ndarray,
    labels: np.ndarray,
    base: PreprocessSpec,
    classes: int,
    names: list[str] | None = None,
    progress: Callable[[list[str]], Any] | None = None,
    preferred: tuple[str, ...] = (),
) -> SearchResult:
    """Run ``predict`` (float model: float32 batch → scores) on ``pixels`` under each convention.

    ``pixels`` are resized uint8 (N, H, W, C) images in RGB (or L) order, ``labels`` their class ids.
    """
    names = names or conventions_for(base)
    trials = []
    for name in progress(names) if progress else names:
        spec = convention_spec(name, base)
        scores = predict(normalize_rgb(pixels, spec))
        predicted = scores.argmax(1)
        trials.append(Trial(name, spec, predicted == labels, predicted))
    return decide(trials, classes, preferred)


def describe_refusal(result: SearchResult) -> tuple[str, str]:
    """(message, hint) for refusing to choose."""
    best = result.best
    if result.verdict == SearchVerdict.NEAR_CHANCE:
        return (
            f"the float model is near chance under every preprocessing convention (best: {best.name}, "
            f"{best.accuracy:.1%} on {result.samples} labelled samples, chance {1 / result.classes:.1%})",
            "check that the calibration classes are the model's, in the same order (class folders are "
            "read in sorted order, as Keras does), or pass the preprocessing the model was trained with, "
            "e.g. " + flags_for(best.spec),
        )
    others = ", ".join(
        f"{c.name} ({c.difference + best.accuracy:.1%}, top-1 class differs on {c.disagreement:.0%} of samples)"
        for c in result.comparisons
    )
    swing = max((max(abs(c.interval[0]), abs(c.interval[1])) for c in result.comparisons), default=0.0)
    return (
        f"cannot tell the preprocessing apart: {best.name} ({best.accuracy:.1%}) is not clearly better than "
        f"{others} on {result.samples} labelled samples, and the choice could change top-1 by up to "
        f"{100 * swing:.1f} points (95%)",
        "pass the one the model was trained with: "
        + "; or ".join(flags_for(t.spec) for t in result.trials if t.name == best.name or t.name in result.tied)
        + " (or give it more labelled samples: --holdout N or --eval DATA add samples to the search "
        "without adding calibration work)",
    )


def describe_misorder(found: list[dict[str, int]], names: list[str] | None) -> str:
    """'label 3 ("cat") is read as class 5 on 27 of 30 samples, ...': the mapping the data suggests."""

    def name(k: int) -> str:
        return f"label {k} ({names[k]!r})" if names and k < len(names) else f"label {k}"

    pairs = ", ".join(
        f"{name(f['label'])} is read as class {f['predicted']} on {f['count']} of {f['of']} samples" for f in found
    )
    return f"the labels do not follow the model's class order: {pairs}"


MISORDER_HINT = (
    "the calibration labels must be in the model's output order: class folders are read in sorted "
    "order (as Keras does: 'B' before 'a', '10' before '2'); rename the folders, or pass --labels "
    "with the model's class names in output order (folders named like them are matched by name)"
)


# ------------------------------------------------------------------------------------------ quantize's use
ORIGIN_RECORD = "the record beside the model"
ORIGIN_MODEL = "the model: Rescaling/Normalization at its input"
ORIGIN_FLAGS = "the flags"
ORIGIN_DATA = "the labelled calibration data"
ORIGIN_MODEL_CONFIRMED = ORIGIN_MODEL + ", confirmed on the labelled calibration data"
UNDECIDED = "undecided"  # nothing settled it before the data was read


class ClassOrderRefused(VerificationError):
    """The labelled data shows the model reading some labels as other classes: the labels are misordered."""

    def __init__(self, found: list[dict[str, int]], names: list[str] | None):
        super().__init__(describe_misorder(found, names), MISORDER_HINT)
        self.found = found


class PreprocessingRefused(VerificationError):
    """The labelled data leaves a preprocessing choice that could change the result (or all are near chance):
    the table goes with the error, as the search (``search``) and as quantize's document of a refusal (``result``,
    a RefusedQuantize: nothing was written)."""

    def __init__(self, search: SearchResult):
        message, hint = describe_refusal(search)
        said = f"{message} ({hint})" if hint else message
        super().__init__(message, hint, result=RefusedQuantize(None, said, RefusedPreprocess(None, search.record())))
        self.search = search


def labels_problem(data: Any, classes: int) -> str | None:
    """Why the calibration labels cannot be used to measure accuracy (None when they can)."""
    if not data.labelled:
        return "the calibration data has no labels"
    if data.kind == "images" and len(data.classes) != classes:
        return f"{len(data.classes)} class folders for {classes} model outputs"
    every = np.concatenate([data.calib_labels, data.holdout_labels])
    if len(every) and (every.min() < 0 or every.max() >= classes):
        return f"labels run from {every.min()} to {every.max()}, outside the model's {classes} outputs"
    return None


def refuse_unlabelled(why: str, base: PreprocessSpec) -> UsageError:
    names = conventions_for(base)
    return UsageError(
        f"no record, flag or Rescaling/Normalization layer says how the model's input was "
        f"preprocessed, and {why} to measure it",
        "calibrate on class folders (one subfolder per class, as for training) or pass one of: "
        + "; ".join(flags_for(convention_spec(n, base)) for n in names),
    )


def search_samples(data: Any, extra: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Every labelled sample read as pixels: calibration first (balanced over classes), then the held-back
    ones and ``extra`` (``--eval`` data), so the search is not limited to the calibration samples."""
    parts = [(data.calib_pixels, data.calib_labels)]
    for source in (data, extra):
        if source is None:
            continue
        if source is not data:
            parts.append((source.calib_pixels, source.calib_labels))
        held = getattr(source, "holdout_pixels", None)
        if held is not None and len(held):
            parts.append((held, source.holdout_labels))
    parts = [(x, y) for x, y in parts if x is not None and len(x) and y is not None and len(y) == len(x)]
    return np.concatenate([x for x, _ in parts]), np.concatenate([y for _, y in parts]).astype(np.int64)


def settle(
    origin: str,
    spec: PreprocessSpec,
    data: Any,
    predict: Callable[[np.ndarray], np.ndarray],
    classes: int,
    labels_unusable: str | None,
    progress: Callable[[list[str]], Any] | None = None,
    extra: Any = None,
) -> tuple[PreprocessSpec, str, SearchResult | None, list[str], list[str]]:
    """The spec quantize uses: searched on labelled data when nothing settled it or a layer suggests it.

    The first :data:`SEARCH_SAMPLES` labelled samples are tried; when they leave a choice, every labelled
    sample (calibration, held back, ``extra``) is. Returns (spec, origin, search result or None,
    warnings, notes). Raises PreprocessingRefused or UsageError.
    """
    if origin not in (UNDECIDED, ORIGIN_MODEL):
        return spec, origin, None, [], []
    if labels_unusable or data.calib_pixels is None:
        if origin == ORIGIN_MODEL:
            return spec, origin, None, [], []
        why = (
            labels_unusable
            if labels_unusable and data.calib_pixels is not None
            else "the calibration arrays are already preprocessed"
        )
        raise refuse_unlabelled(why, spec)
    preferred = ("raw",) if origin == ORIGIN_MODEL else ()
    px, labels = search_samples(data, extra)
    n = min(SEARCH_SAMPLES, len(px))
    result = search(predict, px[:n], labels[:n], spec, classes, progress=progress, preferred=preferred)
    if result.verdict != SearchVerdict.CHOSEN and len(px) > n:  # not settled outright: measure on every sample
        result = search(predict, px, labels, spec, classes, progress=progress, preferred=preferred)
    if result.verdict == SearchVerdict.NEAR_CHANCE:  # misordered labels look like chance: say which, when shown
        predicted = result.best.predicted  # search's trials carry it (a Trial read back from JSON may not)
        found = (
            metrics.misordered_classes(predicted, labels[: len(predicted)], classes) if predicted is not None else []
        )
        if found:
            raise ClassOrderRefused(found, data.classes if data.kind == "images" else None)
        raise PreprocessingRefused(result)
    if origin == ORIGIN_MODEL:
        return _settled_against_the_layer(spec, result)
    if result.chosen is None:
        raise PreprocessingRefused(result)
    used = result.used
    assert used is not None
    return used.spec, ORIGIN_DATA, result, [], [n for n in [result.choice_note()] if n]


def _settled_against_the_layer(
    spec: PreprocessSpec, result: SearchResult
) -> tuple[PreprocessSpec, str, SearchResult | None, list[str], list[str]]:
    """:func:`settle` for a model with a Rescaling/Normalization layer at its input: raw pixels unless the labelled
    data clearly scores another convention better (then that one, with a warning saying so)."""
    raw = next(t for t in result.trials if t.name == "raw")
    if result.chosen == "raw" or result.best.name == "raw" or "raw" in result.tied:
        return spec, ORIGIN_MODEL_CONFIRMED, result, [], []  # the layer settles what the data cannot
    if result.chosen is None:
        raise PreprocessingRefused(result)
    used = result.used
    assert used is not None
    return (
        used.spec,
        ORIGIN_DATA,
        result,
        [
            f"the model has a Rescaling/Normalization layer at its input, yet it scores {raw.accuracy:.1%} on raw "
            f"pixels and {used.accuracy:.1%} with {used.name} preprocessing: using {used.name} "
            "(its training pipeline scaled the images too)"
        ],
        [n for n in [result.choice_note()] if n],
    )
