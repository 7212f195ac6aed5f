"""``edgekit evaluate``: a .tflite model's top-1/top-5 accuracy over a labelled set, on the Edge TPU or the CPU.

Runtime half: no TensorFlow. The model is opened like ``classify`` opens it (a compiled model on the
Edge TPU when there is one, else its CPU twin, said in ``notes``) and each sample is preprocessed
with the model's recorded spec (or the spec derived from its input quantization, or ``--mean/--std``)
by the same function. The scores and labels are kept so a float reference can be compared
(:mod:`edgekit.converters.reference`, which needs TensorFlow).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.errors import EdgekitError, InputError
from edgekit.report import SILENT, Reporter
from edgekit.results import metrics
from edgekit.results.classify import ImageError
from edgekit.results.evaluate import (  # noqa: F401 (the text table, beside its type)
    PER_CLASS_ROWS,
    AccuracyDifference,
    ClassAccuracy,
    EvaluateResult,
    Preprocessing,
    ReferenceComparison,
    per_class_lines,
)


@dataclass
class LabelledSet:
    """What ``--data`` names: image files with class ids, or arrays (uint8 images / float inputs) with ids."""

    source: str
    kind: str  # images | npz
    labels: np.ndarray
    paths: list[str] | None = None
    arrays: np.ndarray | None = None
    class_names: list[str] | None = None  # class folder names, by class id

    def __len__(self) -> int:
        return len(self.labels)


def read_set(source: str | os.PathLike, flag: str = "--data") -> LabelledSet:
    """A class-folder tree (folders sorted = class ids, as Keras reads them) or an .npz with x and y.

    ``flag`` is the option that named it, for the error messages (evaluate's --data, build's --eval).
    """
    from edgekit.data.labelled import list_images, read_labelled_arrays

    p = Path(source)
    if p.is_dir():
        groups, classes = list_images(p, flag)
        if classes is None:
            raise InputError(
                f"{flag} {p}: a flat folder has no labels",
                "put the images in one subfolder per class (named as the classes, sorted as trained)",
            )
        paths = [str(f) for g in groups for f in g]
        labels = np.asarray([k for k, g in enumerate(groups) for _ in g], np.int64)
        return LabelledSet(str(p), "images", labels, paths=paths, class_names=classes)
    if p.suffix.lower() == ".npz" and p.is_file():
        x, y = read_labelled_arrays(p, flag)
        return LabelledSet(str(p), "npz", y, arrays=x)
    if not p.exists():
        raise InputError(f"{flag} {p}: no such file or folder", "check the path")
    raise InputError(
        f"{flag} {p}: not a class-folder tree or an .npz",
        "pass a folder with one subfolder per class, or an .npz with x (images) and y (labels)",
    )


def align_labels(data: LabelledSet, recorded: dict[int, str], classes: int) -> tuple[np.ndarray, str]:
    """Class ids for the model's outputs, and how they were matched.

    Folder names found among the model's labels are matched by name (a model with a 'background'
    class 0 still lines up); otherwise folder k is output k, which needs as many folders as outputs.
    """
    from edgekit.data.labelled import match_by_name

    ids = match_by_name(data.class_names, recorded) if data.class_names and recorded else None
    if ids is not None:
        return ids[data.labels], "class folder names matched to the model's labels"
    if data.class_names:
        if len(data.class_names) != classes:
            raise InputError(
                f"--data {data.source}: {len(data.class_names)} class folders for {classes} model "
                "outputs, and their names are not the model's labels",
                "use one folder per output class, named as the labels (or sorted as in training)",
            )
        return data.labels, "class folders in sorted order (Keras's order)"
    if len(data.labels) and (data.labels.min() < 0 or data.labels.max() >= classes):
        raise InputError(
            f"--data {data.source}: labels run from {data.labels.min()} to {data.labels.max()}, "
            f"outside the model's {classes} outputs",
            f"label each sample with its output index, 0 to {classes - 1}",
        )
    return data.labels, "the labels in the arrays"


@dataclass
class Evaluation:
    model: str
    device: str
    backend: str
    spec_source: str
    spec: Any
    labels_from: str
    scores: np.ndarray  # (N, classes), dequantized
    labels: np.ndarray  # (N,) class ids
    names: dict[int, str]
    notes: list[str] = field(default_factory=list)
    errors: list[ImageError] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)  # indices into the set of the samples scored
    computes: str | None = None  # full-int8, mixed or float (tflite_model's quantization_state)

    def per_class(self) -> list[ClassAccuracy]:
        """Each class's recall (with its Wilson interval), how often it was predicted, and precision."""
        n = self.scores.shape[0] if self.scores.ndim == 2 else 0
        predicted = self.scores.argmax(1) if n else np.zeros(0, np.int64)
        rows = []
        for c in sorted(set(self.labels.tolist())):
            mask = self.labels == c
            right, chosen = int(np.sum(predicted[mask] == c)), int(np.sum(predicted == c))
            rows.append(
                ClassAccuracy(
                    int(c),
                    self.names.get(int(c)),
                    int(mask.sum()),
                    right / int(mask.sum()),
                    metrics.wilson(right, int(mask.sum())),
                    chosen,
                    right / chosen if chosen else None,
                )
            )
        return rows

    def result(
        self,
        reference: ReferenceComparison | None = None,
        against: tuple[AccuracyDifference, ...] = (),
        plots: tuple[str, ...] = (),
    ) -> EvaluateResult:
        """evaluate's typed result (``reference``: the float model's comparison, where one was made; ``against``:
        the paired changes against other .tflite models)."""
        n, classes = self.scores.shape if self.scores.ndim == 2 else (0, 0)
        return EvaluateResult(
            self.model,
            self.device,
            self.backend,
            Preprocessing(**asdict(self.spec), source=self.spec_source),
            self.labels_from,
            int(n),
            int(classes),
            metrics.top_k_accuracy(self.scores, self.labels, 1) if n else None,
            metrics.top_k_accuracy(self.scores, self.labels, 5) if n else None,
            tuple(self.per_class()),
            tuple(self.errors),
            reference,
            tuple(against),
            tuple(plots),
            self.computes,
        )


def evaluate(
    model: str | os.PathLike,
    data: LabelledSet,
    device: str = "auto",
    mean: tuple[float, ...] | None = None,
    std: tuple[float, ...] | None = None,
    num_threads: int | None = None,
    labels: str | os.PathLike | None = None,
    report: Reporter = SILENT,
) -> Evaluation:
    """Run the model over every sample of ``data``; unreadable images go to ``errors``, the rest are scored.

    ``report`` is told where the model runs and why (before the work) and draws the progress."""
    from edgekit.devices.classify import HostClassifier

    clf = HostClassifier(model, device, labels, mean, std, num_threads=num_threads)
    ids, labels_from = align_labels(data, clf.labels, clf.num_classes)
    for note in clf.notes:
        report.tell(note)
    with report.progress(len(data), "evaluating") as bar:
        scores, kept, errors = _run(clf, data, bar)
    matrix = np.stack(scores) if scores else np.zeros((0, clf.num_classes), np.float32)
    names = clf.labels or dict(enumerate(data.class_names or []))
    return Evaluation(
        clf.opened.model_path,
        clf.opened.device,
        clf.opened.backend.name,
        clf.spec_source,
        clf.spec,
        labels_from,
        matrix,
        ids[kept],
        names,
        list(clf.notes),
        errors,
        kept,
        _computes(clf),
    )


def _computes(clf: Any) -> str | None:
    """How the model runs: full-int8, mixed (float I/O around int8) or float, for the accuracy's label."""
    from edgekit.tflite import model as tflite_model

    try:
        return tflite_model.load(clf.opened.model_path).quantization_state
    except EdgekitError:
        return None


def _run(clf: Any, data: LabelledSet, bar: Any) -> tuple[list, list, list]:
    """(scores, indices of the samples scored, errors) of every sample, ``bar`` told of each."""
    from edgekit.board import preprocess

    scores, kept, errors = [], [], []
    if data.paths is not None:
        for i, (path, tensor, error) in enumerate(clf.prepared(data.paths)):
            if error is not None:
                errors.append(ImageError(path, str(error)))
            else:
                scores.append(clf.infer(tensor)[0])
                kept.append(i)
            bar.update(1)
    elif data.arrays is not None:  # read_set gives paths or arrays
        x = data.arrays
        for i in range(len(x)):
            if x.dtype == np.uint8:
                image = x[i][..., 0] if x[i].ndim == 3 and x[i].shape[-1] == 1 else x[i]
                tensor = preprocess.prepare(image, clf.spec, clf.input_dtype, clf.input_scale, clf.input_zero_point)
            else:  # float arrays are model inputs already
                tensor = preprocess.quantize(
                    x[i][None].astype(np.float32), clf.input_dtype, clf.input_scale, clf.input_zero_point
                )
            model_order = tensor.shape[1:] == tuple(clf._input_shape[1:])  # a float array in the model's own order
            scores.append(
                clf.infer(tensor.reshape(clf._input_shape) if model_order else clf.image_input.from_hwc(tensor))[0]
            )
            kept.append(i)
            bar.update(1)
    return scores, kept, errors


def paired_change(a: Evaluation, b: Evaluation, max_drop: float | None) -> AccuracyDifference:
    """``a``'s top-1 minus ``b``'s on the samples both scored: Tango's paired interval and the exact two-sided
    McNemar test (:func:`edgekit.results.metrics.paired_difference`); with ``max_drop`` (points) the drop's verdict."""
    both = sorted(set(a.kept) & set(b.kept))
    ia, ib = {k: i for i, k in enumerate(a.kept)}, {k: i for i, k in enumerate(b.kept)}
    pa, pb = [ia[k] for k in both], [ib[k] for k in both]
    right_a = a.scores[pa].argmax(1) == a.labels[pa] if both else np.zeros(0, bool)
    right_b = b.scores[pb].argmax(1) == b.labels[pb] if both else np.zeros(0, bool)
    d = metrics.paired_difference(right_a, right_b)
    flips = d.only_a + d.only_b
    two_sided = min(1.0, 2 * min(metrics.binomial_sf(d.only_a, flips, 0.5), metrics.binomial_sf(d.only_b, flips, 0.5)))
    verdict = None
    if max_drop is not None and d.difference is not None:
        verdict = metrics.drop_within(d.difference, d.interval, max_drop, d.samples)
    n = len(both)
    return AccuracyDifference(
        a.model,
        b.model,
        n,
        float(right_a.mean()) if n else None,
        float(right_b.mean()) if n else None,
        d.difference,
        tuple(d.interval),
        d.only_a,
        d.only_b,
        two_sided,
        max_drop if verdict else None,
        verdict,
    )


def compare_against(
    ev: Evaluation,
    data: LabelledSet,
    against: tuple[str, ...],
    device: str,
    mean: tuple[float, ...] | None,
    std: tuple[float, ...] | None,
    num_threads: int | None,
    labels: str | os.PathLike | None,
    max_drop: float | None,
    report: Reporter = SILENT,
) -> tuple[tuple[AccuracyDifference, ...], list[Evaluation]]:
    """``evaluate --against`` for classifiers: each model run over the same samples (the same ``--mean/--std``
    and ``--labels``), and the paired change of ``ev``'s model against it (with the other models' evaluations).
    Preprocessing that differs between the two is a warning: the change would then measure the preprocessing as
    well as the model."""
    out, others = [], []
    for model in against:
        other = evaluate(model, data, device, mean, std, num_threads=num_threads, labels=labels, report=report)
        if ev.spec.to_dict() != other.spec.to_dict():
            report.warn(
                f"{other.model} is preprocessed unlike {ev.model} ({_spec_words(other)} against "
                f"{_spec_words(ev)}): the change measures the preprocessing too; --mean/--std apply to both"
            )
        out.append(paired_change(ev, other, max_drop))
        others.append(other)
    return tuple(out), others


def _spec_words(ev: Evaluation) -> str:
    s = ev.spec
    return "{}x{} {}, mean {}, std {}: {}".format(
        s.width,
        s.height,
        s.channels,
        ",".join(f"{v:g}" for v in s.mean),
        ",".join(f"{v:g}" for v in s.std),
        ev.spec_source,
    )
