"""Find a model's input preprocessing from labelled data: try each convention, measure, pick or refuse.

A model trained with its preprocessing in the input pipeline carries no trace of it; agreement
between the float and the int8 model cannot reveal a wrong guess (both get the same wrong inputs).
Labelled calibration data can: the float model is run on one decoded sample under each convention
``keras.applications`` uses (``imagenet_utils.preprocess_input`` modes) plus raw pixels, and its
top-1 accuracy tells which one it was trained with. Each convention is a plain
:class:`~edgekit.preprocess.PreprocessSpec` (channel order, mean, std on 0..255 pixels), so the one
recorded is the one ``classify`` applies with no flags.

The verdict is refused, with the table, when the best is near chance (the data does not fit the
model, or the model never learned) or when the runner-up is not clearly worse (McNemar's test on
the same samples, see :func:`edgekit.metrics.clearly_better`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from edgekit import metrics
from edgekit.errors import UsageError, VerificationError
from edgekit.preprocess import PreprocessSpec, normalize_rgb

IMAGENET_MEAN_RGB = (0.485, 0.456, 0.406)   # keras.applications.imagenet_utils, mode 'torch' (on 0..1)
IMAGENET_STD_RGB = (0.229, 0.224, 0.225)
CAFFE_MEAN_BGR = (103.939, 116.779, 123.68)  # mode 'caffe': BGR, these means subtracted, no scaling

# name → (channel order, mean, std) on 0..255 pixels; "L" models try the first three only.
CONVENTIONS: dict[str, tuple[str, tuple[float, ...], tuple[float, ...]]] = {
    "raw": ("RGB", (0.0,), (1.0,)),                        # 0..255 as they are
    "0..1": ("RGB", (0.0,), (255.0,)),                     # x / 255
    "-1..1": ("RGB", (127.5,), (127.5,)),                  # x / 127.5 - 1: mode 'tf' (MobileNet, Inception...)
    "torch": ("RGB", tuple(round(255 * m, 6) for m in IMAGENET_MEAN_RGB),
              tuple(round(255 * s, 6) for s in IMAGENET_STD_RGB)),  # (x / 255 - mean) / std
    "caffe": ("BGR", CAFFE_MEAN_BGR, (1.0,)),               # BGR, x - mean (ResNet50, VGG)
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
    flags = f"--scaling {named}" if named else (f"--mean {','.join(f'{v:g}' for v in spec.mean)} "
                                                 f"--std {','.join(f'{v:g}' for v in spec.std)}")
    return flags + (" --channels BGR" if spec.channels == "BGR" else "")


@dataclass
class Trial:
    name: str
    spec: PreprocessSpec
    correct: np.ndarray   # (N,) bool: top-1 right on each sample
    predicted: np.ndarray | None = None   # (N,) the top-1 class of each sample

    @property
    def accuracy(self) -> float:
        return float(np.mean(self.correct)) if len(self.correct) else float("nan")


@dataclass
class SearchResult:
    trials: list[Trial]        # best first
    classes: int
    verdict: str               # chosen | near-chance | too-close
    tied: list[str]            # the conventions the best one did not clearly beat (verdict too-close)

    @property
    def best(self) -> Trial:
        return self.trials[0]

    @property
    def samples(self) -> int:
        return len(self.best.correct)

    def to_dict(self) -> dict[str, Any]:
        return {"samples": self.samples, "classes": self.classes, "chance": 1.0 / self.classes,
                "verdict": self.verdict, "chosen": self.best.name if self.verdict == "chosen" else None,
                "tied": self.tied,
                "table": [{"convention": t.name, "channels": t.spec.channels, "mean": list(t.spec.mean),
                           "std": list(t.spec.std), "accuracy": t.accuracy, "flags": flags_for(t.spec)}
                          for t in self.trials]}

    def table(self) -> str:
        """The accuracy of each convention, one line each, best first (the lines quantize prints)."""
        lines = [f"Preprocessing tried on {self.samples} labelled calibration samples "
                 f"({self.classes} classes, chance {1 / self.classes:.1%}):"]
        for t in self.trials:
            lines.append(f"  {t.name:<6} {t.accuracy:6.1%}  {flags_for(t.spec)}")
        return "\n".join(lines)


def decide(trials: list[Trial], classes: int) -> SearchResult:
    """Rank the trials and say whether the best one is a clear, better-than-chance winner."""
    ranked = sorted(trials, key=lambda t: -t.accuracy)   # stable: equal accuracies keep the CONVENTIONS order
    best = ranked[0]
    tied = [t.name for t in ranked[1:] if not metrics.clearly_better(best.correct, t.correct)]
    if metrics.near_chance(best.accuracy, len(best.correct), classes):
        verdict = "near-chance"
    elif tied:
        verdict = "too-close"
    else:
        verdict = "chosen"
    return SearchResult(ranked, classes, verdict, tied)


def search(predict: Callable[[np.ndarray], np.ndarray], pixels: np.ndarray, labels: np.ndarray,
           base: PreprocessSpec, classes: int, names: list[str] | None = None,
           progress: Callable[[list[str]], Any] | None = None) -> SearchResult:
    """Run ``predict`` (float model: float32 batch → scores) on ``pixels`` under each convention.

    ``pixels`` are resized uint8 (N, H, W, C) images in RGB (or L) order, ``labels`` their class ids.
    """
    names = names or conventions_for(base)
    trials = []
    for name in (progress(names) if progress else names):
        spec = convention_spec(name, base)
        scores = predict(normalize_rgb(pixels, spec))
        predicted = scores.argmax(1)
        trials.append(Trial(name, spec, predicted == labels, predicted))
    return decide(trials, classes)


def describe_refusal(result: SearchResult) -> tuple[str, str]:
    """(message, hint) for refusing to choose."""
    best = result.best
    if result.verdict == "near-chance":
        return (f"the float model is near chance under every preprocessing convention (best: {best.name}, "
                f"{best.accuracy:.1%} on {result.samples} labelled samples, chance {1 / result.classes:.1%})",
                "check that the calibration classes are the model's, in the same order (class folders are "
                "read in sorted order, as Keras does), or pass the preprocessing the model was trained with, "
                "e.g. " + flags_for(best.spec))
    others = ", ".join(result.tied)
    return (f"cannot tell the preprocessing apart: {best.name} ({best.accuracy:.1%}) is not clearly better than "
            f"{others} on {result.samples} labelled samples",
            "pass the one the model was trained with: " + "; or ".join(
                flags_for(t.spec) for t in result.trials if t.name == best.name or t.name in result.tied)
            + " (or calibrate on more labelled samples, --samples N, to measure it better)")



def describe_misorder(found: list[dict[str, int]], names: list[str] | None) -> str:
    """'label 3 ("cat") is read as class 5 on 27 of 30 samples, ...': the mapping the data suggests."""
    def name(k: int) -> str:
        return f"label {k} ({names[k]!r})" if names and k < len(names) else f"label {k}"

    pairs = ", ".join(f"{name(f['label'])} is read as class {f['predicted']} on {f['count']} of {f['of']} samples"
                      for f in found)
    return f"the labels do not follow the model's class order: {pairs}"


MISORDER_HINT = ("the calibration labels must be in the model's output order: class folders are read in sorted "
                 "order (as Keras does: 'B' before 'a', '10' before '2'); rename the folders, or pass --labels "
                 "with the model's class names in output order (folders named like them are matched by name)")


# ------------------------------------------------------------------------------------------ quantize's use
ORIGIN_RECORD = "the record beside the model"
ORIGIN_MODEL = "the model: Rescaling/Normalization at its input"
ORIGIN_FLAGS = "the flags"
ORIGIN_DATA = "the labelled calibration data"
ORIGIN_MODEL_CONFIRMED = ORIGIN_MODEL + ", confirmed on the labelled calibration data"
UNDECIDED = "undecided"   # nothing settled it before the data was read


class ClassOrderRefused(VerificationError):
    """The labelled data shows the model reading some labels as other classes: the labels are misordered."""

    def __init__(self, found: list[dict[str, int]], names: list[str] | None):
        super().__init__(describe_misorder(found, names), MISORDER_HINT)
        self.found = found


class PreprocessingRefused(VerificationError):
    """No convention clearly wins (or all are near chance): the table goes with the error."""

    def __init__(self, result: SearchResult):
        message, hint = describe_refusal(result)
        super().__init__(message, hint)
        self.result = result


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
    return UsageError(f"no record, flag or Rescaling/Normalization layer says how the model's input was "
                      f"preprocessed, and {why} to measure it",
                      "calibrate on class folders (one subfolder per class, as for training) or pass one of: "
                      + "; ".join(flags_for(convention_spec(n, base)) for n in names))


def settle(origin: str, spec: PreprocessSpec, data: Any, predict: Callable[[np.ndarray], np.ndarray],
           classes: int, labels_unusable: str | None,
           progress: Callable[[list[str]], Any] | None = None) -> tuple[PreprocessSpec, str, SearchResult | None,
                                                                          list[str]]:
    """The spec quantize uses: searched on labelled data when nothing settled it or a layer suggests it.

    Returns (spec, origin, search result or None, warnings). Raises PreprocessingRefused or UsageError.
    """
    if origin not in (UNDECIDED, ORIGIN_MODEL):
        return spec, origin, None, []
    if labels_unusable or data.calib_pixels is None:
        if origin == ORIGIN_MODEL:
            return spec, origin, None, []
        why = ("the calibration arrays are already preprocessed" if data.calib_pixels is None
               else labels_unusable)
        raise refuse_unlabelled(why, spec)
    n = min(SEARCH_SAMPLES, len(data.calib_pixels))
    result = search(predict, data.calib_pixels[:n], data.calib_labels[:n], spec, classes, progress=progress)
    if result.verdict == "too-close" and len(data.calib_pixels) > n:  # a close call: measure on every sample
        result = search(predict, data.calib_pixels, data.calib_labels, spec, classes, progress=progress)
    if result.verdict == "near-chance":  # misordered labels look like chance: say which, when the data shows it
        found = metrics.misordered_classes(result.best.predicted, data.calib_labels[:len(result.best.predicted)],
                                           classes)
        if found:
            raise ClassOrderRefused(found, data.classes if data.kind == "images" else None)
    if origin == ORIGIN_MODEL:
        raw = next(t for t in result.trials if t.name == "raw")
        if result.verdict == "near-chance":
            raise PreprocessingRefused(result)
        if result.best.name == "raw" or "raw" in result.tied:
            return spec, ORIGIN_MODEL_CONFIRMED, result, []
        return result.best.spec, ORIGIN_DATA, result, [
            f"the model has a Rescaling/Normalization layer at its input, yet it scores {raw.accuracy:.1%} on raw "
            f"pixels and {result.best.accuracy:.1%} with {result.best.name} preprocessing: using {result.best.name} "
            "(its training pipeline scaled the images too)"]
    if result.verdict != "chosen":
        raise PreprocessingRefused(result)
    return result.best.spec, ORIGIN_DATA, result, []
