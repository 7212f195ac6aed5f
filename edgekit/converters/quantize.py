"""``edgekit quantize``: a Keras model → a verified full-int8 .tflite the Edge TPU compiler accepts.

Steps: load the model (:mod:`keras_io`), settle the preprocessing spec (recorded → model → flags),
read calibration data through that spec (:mod:`calibration`), convert with TFLITE_BUILTINS_INT8,
uint8 (or int8) I/O, a static batch-1 input and per-tensor Dense weights, then check the result
the way edgetpu_compiler 16 will (integer everywhere, static shapes, op versions within its table,
see :mod:`op_versions`), trying the remedies that work in TensorFlow 2.21 before giving up.
When nothing settles the preprocessing (or a Rescaling layer suggests it) and the calibration data
is labelled, it is found by measuring the float model's accuracy under each convention
(:mod:`preprocess_search`). Finally the int8 model is verified against the float one on held-back
samples (agreement, and top-1 accuracy of both when labelled), and the spec, labels (``--labels``,
else the class folder names), versions and numbers are recorded inside the model (metadata
``edgekit``) and beside it (``<stem>.edgekit.json``), so ``classify`` needs no flags.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgekit import __version__
from edgekit.board.preprocess import PreprocessSpec, with_mean_std
from edgekit.board.preprocess import quantize as quantize_tensor
from edgekit.converters import calibration, keras_io, onnx_io, preprocess_search
from edgekit.converters.converter import SettingMissing, apply_settings, make_converter  # noqa: F401 (re-exported)
from edgekit.converters.preprocess_search import ORIGIN_FLAGS, ORIGIN_MODEL, ORIGIN_RECORD, UNDECIDED
from edgekit.converters.quantize_options import QuantizeOptions
from edgekit.converters.tf_quiet import import_tensorflow, silenced
from edgekit.edgetpu import advice, compatibility
from edgekit.errors import ConversionError, InputError, InternalError, UsageError, VerificationError
from edgekit.fileio import refuse_folders, refuse_overwriting_input, require_output_folder, write_all_atomic
from edgekit.flags import QUANTIZE
from edgekit.records import freeze
from edgekit.report import SILENT, Reporter
from edgekit.results import metrics
from edgekit.results.check import CheckDigest, CheckProblem
from edgekit.results.quantize import (
    Decision,
    DetectionVerification,
    GateChecks,
    Misorder,
    ModelIO,
    Preprocess,
    SourceModel,
    TensorIO,
    Verification,
)
from edgekit.results.quantize import QuantizeResult as QuantizeDocument
from edgekit.tflite import model as tflite_model
from edgekit.tflite import model_record

CREATED_BY = "edgekit quantize"  # marks the records this command writes: records of a .tflite, not of a Keras model
IO_TYPES = next(o.choices for o in QUANTIZE if o.name == "io")
# Converter settings tried in order when the output fails a check. The old (TOCO) converter would
# be the classic remedy, but it is gone in TF 2.21 (experimental_new_converter=False raises).
REMEDIES: list[tuple[str, dict[str, bool]]] = [
    ("per-tensor Dense weights", {}),
    ("per-tensor weights for every layer", {"_experimental_disable_per_channel": True}),
    ("the legacy calibration quantizer", {"experimental_new_quantizer": False}),
]


@dataclass
class QuantizeOutcome:
    """What one quantize run wrote: the int8 model, its record (sidecar) and the command's document."""

    output: Path
    record_path: Path | None  # None: the input's own record sits where the sidecar would (the record is inside)
    summary: QuantizeDocument  # what the CLI prints (``--json`` is its to_dict()), warnings included


class AgreementError(VerificationError):
    """The int8 model failed verification; the output is kept and ``result`` (quantize's document) describes it,
    with the first measure that failed, its value, limit and 95% interval (:func:`failed_measure`).

    ``reason`` is the message without where the output was kept (build, which keeps nothing, says so itself).
    """

    def __init__(self, reason: str, output: Path, hint: str, result: QuantizeDocument):
        measure, value, limit, interval = failed_measure(result.verification)
        super().__init__(
            f"{reason}; output kept at {output}",
            hint,
            result=result,
            measure=measure,
            value=value,
            limit=limit,
            interval=interval,
        )
        self.reason = reason


def failed_measure(v: Any) -> tuple[str | None, Any, Any, Any]:
    """The numbers a failed verification rests on, as VerificationError carries them: the first measure that failed,
    its value, the limit and the 95% interval (all None without one)."""
    if v is None:
        return _numbers(None)
    if getattr(v, "kind", None) == "detection":  # a detector's: the mAP50 drop, else the detections kept
        gate = v.map50
        if gate and gate.verdict == "failed":
            return _numbers("map50_drop", gate.drop, gate.max_drop_points, gate.drop_interval)
        if v.agreement_verdict == "failed" or (
            v.agreement_verdict == "uncertain" and v.kept is not None and v.kept < v.min_agreement
        ):  # --strict
            return _numbers("detections_kept", v.kept, v.min_agreement, v.kept_interval)
        if gate and gate.verdict == "uncertain":  # --strict: past the limit, the data not settled
            return _numbers("map50_drop", gate.drop, gate.max_drop_points, gate.drop_interval)
        return _numbers(None)
    if v.accuracy_verdict == "failed":
        return _numbers("accuracy_drop", v.accuracy_drop, v.max_accuracy_drop, v.accuracy_drop_interval)
    if v.agreement_verdict == "failed":
        return _numbers("top1_agreement", v.top1_agreement, v.min_agreement, v.agreement_interval)
    if v.class_order:
        return _numbers("class_order")
    if v.float_near_chance:
        return _numbers("float_top1", v.float_top1, v.chance.chance if v.chance else None)
    if v.accuracy_verdict == "uncertain" and (v.accuracy_drop or 0.0) > v.max_accuracy_drop:  # --strict
        return _numbers("accuracy_drop", v.accuracy_drop, v.max_accuracy_drop, v.accuracy_drop_interval)
    if v.agreement_verdict == "uncertain":  # --strict: the estimate below --min-agreement
        return _numbers("top1_agreement", v.top1_agreement, v.min_agreement, v.agreement_interval)
    return _numbers(None)


def _numbers(
    measure: str | None, value: Any = None, limit: Any = None, interval: Any = None
) -> tuple[str | None, Any, Any, Any]:
    return measure, value, limit, interval


# ------------------------------------------------------------------------------------------ spec
def resolve_spec(
    loaded: keras_io.LoadedSource, opts: QuantizeOptions, recorded: PreprocessSpec | None
) -> tuple[PreprocessSpec, str, list[str]]:
    """The preprocessing spec, where it came from (flags/record/model, else ``UNDECIDED``) and any warnings.

    An undecided spec (0..1 as a placeholder) is settled on the calibration data by
    :func:`preprocess_search.settle`, or refused.
    """
    h, w, c = loaded.input_shape
    warnings: list[str] = []
    if opts.input_size:
        if (w and w != opts.input_size[0]) or (h and h != opts.input_size[1]):
            raise UsageError(
                f"--input-size {opts.input_size[0]}x{opts.input_size[1]} differs from the model's fixed input {w}x{h}",
                "leave --input-size out for this model",
            )
        w, h = opts.input_size
    elif not (h and w):
        if recorded:
            w, h = recorded.width, recorded.height
        else:
            raise UsageError("the model accepts any input size", "choose the size to compile for: --input-size 224x224")
    if recorded is not None:
        base_channels, base_resize = recorded.channels, recorded.resize
        mean, std, origin = recorded.mean, recorded.std, ORIGIN_RECORD
    else:
        base_channels, base_resize = ("L" if c == 1 else "RGB"), "lanczos"
        if loaded.raw_pixel_input:
            mean, std, origin = (0.0,), (1.0,), ORIGIN_MODEL
        else:
            mean, std, origin = (0.0,), (255.0,), UNDECIDED
    exporter = getattr(loaded, "exporter_scaling", None)  # an ONNX exporter whose preprocessing is known
    if exporter and origin == UNDECIDED:
        named = PreprocessSpec.with_scaling(1, 1, exporter)
        mean, std, origin = named.mean, named.std, onnx_io.ORIGIN_EXPORTER
    if opts.scaling:
        named = PreprocessSpec.with_scaling(1, 1, opts.scaling)
        mean, std, origin = named.mean, named.std, ORIGIN_FLAGS
    if opts.mean is not None or opts.std is not None:
        flags = with_mean_std(PreprocessSpec(1, 1), opts.mean, opts.std)
        mean, std, origin = flags.mean, flags.std, ORIGIN_FLAGS
    elif opts.channels and origin == UNDECIDED:  # --channels alone settles the order, not the scaling
        origin = ORIGIN_FLAGS
        warnings.append(f"--channels {opts.channels} without --scaling or --mean/--std: assuming pixels scaled to 0..1")
    channels = opts.channels or base_channels
    if (channels == "L") != (c == 1):
        raise UsageError(
            f"--channels {channels} does not fit the model's {c}-channel input",
            "use L for 1-channel models, RGB or BGR for 3-channel ones",
        )
    spec = PreprocessSpec(int(w), int(h), channels, opts.resize or base_resize, tuple(mean), tuple(std))
    return spec, origin, warnings


def read_labels(path: str) -> list[str]:
    """The labels file read exactly as ``classify`` reads it (pycoral's formats), as a list by class id.

    ``<id> <label>`` / ``<id>: <label>`` lines or one label per line; ids that are skipped get their number.
    An Ultralytics ``data.yaml`` (``.yaml``/``.yml``): its ``names``.
    """
    from edgekit.board.classes import read_labels as read_label_file

    if path.lower().endswith((".yaml", ".yml")):  # Ultralytics' data.yaml: its names, in their index order
        return yaml_labels(path)
    table = read_label_file(path)
    if not table:
        raise InputError(
            f"--labels {path}: the file is empty", "write one label per line, in the order of the model's outputs"
        )
    return [table.get(i, str(i)) for i in range(max(table) + 1)]


def yaml_labels(path: str) -> list[str]:
    """``--labels data.yaml``: the class names of an Ultralytics dataset file, read as evaluate reads them."""
    from edgekit.detection.data import yaml_names
    from edgekit.errors import regular_file

    regular_file(path, "labels file")
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as f:
            names = yaml_names(f.read(), f"--labels {path}")
    except OSError as exc:
        raise InputError(
            f"cannot read labels file {path}: {exc.strerror or exc}", "pass a readable data.yaml"
        ) from None
    if not names:
        raise InputError(
            f"--labels {path}: no 'names:' in it",
            "name the classes in it (names: [a, b]), or pass a labels file, one label per line",
        )
    return names


# ------------------------------------------------------------------------------------------ conversion
def convert(
    loaded: keras_io.LoadedSource,
    calib_x: np.ndarray,
    spec: PreprocessSpec,
    io_type: str = "uint8",
    settings: dict[str, bool] | None = None,
    report: Reporter = SILENT,
    verbose: bool = False,
) -> bytes:
    """Full-integer conversion with a static batch-1 input; raises ConversionError with TF's reason."""
    import_tensorflow(verbose)
    ours: list[BaseException] = []  # an error in edgekit's own calibration feed is a bug, not TF's refusal
    with silenced(verbose) as (real_err, log):

        def representative() -> Any:
            try:
                for x in report.iterate(calib_x, len(calib_x), "Calibrating", real_err):
                    yield [x[None].astype(np.float32)]
            except Exception as exc:
                ours.append(exc)
                raise

        conv = make_converter(loaded, spec, representative, io_type, settings)  # edgekit's code: bugs propagate
        try:
            return bytes(conv.convert())
        except Exception as exc:  # TensorFlow's refusal (ConverterError, ValueError, ...), unless it was ours
            if ours:
                raise ours[0] from None
            error = exc
    reasons = [ln for ln in str(error).splitlines() if "error" in ln.lower()] or log.error_lines()
    reason = "; ".join(r.strip() for r in reasons[:3])[:500] or f"{type(error).__name__}: {str(error)[:300]}"
    raise ConversionError(
        f"TensorFlow could not convert the model to full int8: {reason}",
        "every op must have an int8 kernel (TFLITE_BUILTINS_INT8); rerun with --verbose for TensorFlow's log",
    )


def convert_checked(
    loaded: keras_io.LoadedSource,
    calib_x: np.ndarray,
    spec: PreprocessSpec,
    io_type: str,
    report: Reporter,
    verbose: bool,
) -> tuple[bytes, str, list[str]]:
    """Convert, check, and retry with each remedy until the checks pass: (model, remedy used, tried)."""
    tried: list[str] = []
    first_problems: list[CheckProblem] | None = None
    outputs: list[bytes] = []
    for name, settings in REMEDIES:
        try:
            data = convert(loaded, calib_x, spec, io_type, settings, SILENT if tried else report, verbose)
        except SettingMissing as exc:  # say so rather than run the same conversion again under a false name
            tried.append(f"{name} (skipped: this TensorFlow has no converter setting {', '.join(exc.names)})")
            continue
        except ConversionError:
            if not tried:
                raise
            tried.append(name)
            continue
        if any(data == before for before in outputs):  # the setting was accepted but changed nothing
            tried.append(f"{name} (no effect: the same model as before)")
            continue
        outputs.append(data)
        tried.append(name)
        info = tflite_model.ModelInfo.from_bytes(data)
        problems = compatibility.quantize_gate(compatibility.check_model(info), io_type, info)
        if not problems:
            return data, name, tried
        first_problems = first_problems or problems
    assert first_problems is not None
    listed = "; ".join(dict.fromkeys(p.message for p in first_problems))
    raise ConversionError(
        f"the int8 model would not pass edgetpu_compiler 16: {listed}",
        f"tried {', '.join(tried)}; replace the named op in the Keras model with one the "
        "Edge TPU supports (e.g. relu for gelu/elu)",
    )


# ------------------------------------------------------------------------------------------ verification
def run_int8(model: bytes, x: np.ndarray) -> np.ndarray:
    """Dequantized scores of the int8 model for a float32 batch (already preprocessed), one at a time,
    run by the runtime the commands run models with (:mod:`edgekit.board.backends`)."""
    from edgekit.board import backends

    with backends.open_content(model, "the int8 model", num_threads=1) as opened:
        inp = opened.input
        in_scale, in_zp = inp["quantization"]
        dtype = np.dtype(inp["dtype"]).name
        scores = [opened.run(quantize_tensor(sample[None], dtype, in_scale, in_zp))[0] for sample in x]
    return np.stack(scores) if scores else np.zeros((0, 0), np.float32)


agreement = metrics.agreement


@dataclass
class VerificationSet:
    """The samples float and int8 are compared on, each with its label where the data has one.

    Held-back samples first; the calibration samples too (they set the int8 ranges but never any
    weight or label, so the paired float/int8 comparison on them is fair, if a little kind to clipping:
    the held-back ones keep it honest); ``--eval`` data last.
    """

    x: np.ndarray
    labels: np.ndarray | None
    sources: dict[str, int]

    def describe(self) -> str:
        parts = [f"{n} {name.replace('_', '-')}" for name, n in self.sources.items() if n]
        return f"{len(self.x)} samples ({', '.join(parts)})" if len(parts) > 1 else f"{len(self.x)} {parts[0]} samples"


def verification_set(
    data: calibration.CalibrationData, labelled: bool, extra: calibration.CalibrationData | None = None
) -> VerificationSet:
    """Every sample that can verify the int8 model: held back, calibration, and ``--eval`` data."""
    parts = [("held_back", data.holdout, data.holdout_labels), ("calibration", data.calib, data.calib_labels)]
    if extra is not None:
        parts.append(
            (
                "eval",
                np.concatenate([extra.calib, extra.holdout]),
                np.concatenate([extra.calib_labels, extra.holdout_labels]),
            )
        )
    parts = [(name, x, y) for name, x, y in parts if len(x)]
    x = np.concatenate([x for _, x, _ in parts])
    y = np.concatenate([y for _, _, y in parts]) if labelled else None
    return VerificationSet(x, y, {name: len(x) for name, x, _ in parts})


def _points(value: float) -> float:
    return round(100 * value, 4)


@dataclass
class _Findings:
    """What a verification found, sorted by weight: refusals, warnings (the estimate is beyond a limit), notes."""

    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def uncertain(self, line: str, past_limit: bool, strict: bool) -> None:
        """An uncertain verdict's line: a failure under ``--strict`` when the estimate is past the limit (a CI run
        that wants it settled), else a warning when it is past, a note when it is within."""
        if past_limit and strict:
            self.failures.append(f"{line}; {metrics.STRICT_FAILS}")
        else:
            (self.warnings if past_limit else self.notes).append(line)


@dataclass
class _Accuracy:
    """Top-1 of float and int8 on the labels, the paired drop, and the float model's own sanity checks."""

    float_top1: float
    int8_top1: float
    drop: float
    drop_interval: tuple[float, float]
    flips: dict[str, int]
    mcnemar_p: float
    verdict: str
    chance: metrics.ChanceTest
    class_order: list[dict[str, int]]


def verify(
    float_scores: np.ndarray,
    int8_scores: np.ndarray,
    labels: np.ndarray | None,
    opts: QuantizeOptions,
    sources: dict[str, int],
    names: list[str] | None = None,
) -> Verification:
    """The verification block: int8 against float on paired samples, decided on intervals, not point values.

    Refuses (``failures``) only what the data shows beyond doubt at 95%: agreement whose whole interval
    is below ``--min-agreement``, an accuracy drop whose whole interval is above ``--max-accuracy-drop``,
    a float model that cannot be told from chance (one-sided exact binomial, 1%), or labels the float model
    consistently reads as other classes. An interval that spans a threshold passes, with a line giving the
    interval and the sample size that would settle it: in ``warnings`` when the estimate itself is beyond
    the threshold, else in ``notes`` (the data then points the right way, it only cannot be sure yet).
    """
    found = _Findings()
    agreed = metrics.agreement(float_scores, int8_scores)
    agreement_verdict = _judge_agreement(agreed.samples, agreed.top1_agreement, agreed.agreement_interval, opts, found)
    acc = _judge_accuracy(float_scores, int8_scores, labels, opts, names, found) if labels is not None else None
    return Verification(
        agreed.samples,
        agreed.top1_agreement,
        agreed.agreement_interval,
        agreed.mean_abs_diff,
        agreed.max_abs_diff,
        opts.min_agreement,
        freeze(sources),
        bool(sources.get("held_back")),
        labels is not None,
        metrics.CONFIDENCE,
        acc.float_top1 if acc else None,
        acc.int8_top1 if acc else None,
        acc.drop if acc else None,
        acc.drop_interval if acc else None,
        opts.max_accuracy_drop,
        freeze(acc.flips) if acc else None,
        acc.mcnemar_p if acc else None,
        acc.chance.near_chance if acc else None,
        acc.chance.result() if acc else None,
        tuple(Misorder.from_dict(m) for m in acc.class_order) if acc else None,
        Decision(agreement_verdict),
        Decision(acc.verdict) if acc else None,
        not found.failures,
        tuple(found.failures),
        tuple(found.warnings),
        tuple(found.notes),
    )


def _judge_agreement(
    n: int, top1: float, interval: tuple[float, float], opts: QuantizeOptions, found: _Findings
) -> str:
    """Top-1 agreement against ``--min-agreement`` on its interval: the verdict, and what to say about it."""
    agree = metrics.at_least(top1, interval, opts.min_agreement, n)
    span = f"95% interval {interval[0]:.1%} to {interval[1]:.1%}"
    if agree.verdict == "failed":
        found.failures.append(
            f"int8 model agrees with the float model on {top1:.1%} (top-1; {span}), "
            f"below --min-agreement {opts.min_agreement:g}"
        )
    elif agree.verdict == "uncertain":  # a warning only when the estimate itself is below the limit
        found.uncertain(
            f"cannot tell yet whether top-1 agreement reaches --min-agreement {opts.min_agreement:g}: "
            f"{top1:.1%} ({span}) on {n} samples; " + metrics.settle_hint(agree, "samples"),
            top1 < opts.min_agreement,
            opts.strict,
        )
    return agree.verdict


def _judge_accuracy(
    float_scores: np.ndarray,
    int8_scores: np.ndarray,
    labels: np.ndarray,
    opts: QuantizeOptions,
    names: list[str] | None,
    found: _Findings,
) -> _Accuracy:
    """Accuracy on the labels: the paired drop against ``--max-accuracy-drop``, then the float model itself
    (classes it reads in another order, or no better than chance)."""
    n, classes = len(float_scores), float_scores.shape[1]
    order = metrics.class_order(float_scores.argmax(1), labels, classes)
    float_ok = float_scores.argmax(1) == labels
    int8_ok = int8_scores.argmax(1) == labels
    paired = metrics.paired_difference(float_ok, int8_ok)
    lo, hi = paired.interval
    difference = paired.difference
    if difference is None:  # None only without samples; a verification set always holds some
        raise ValueError("no labelled samples to measure an accuracy drop on")
    acc = _Accuracy(
        float(np.mean(float_ok)),
        float(np.mean(int8_ok)),
        _points(difference),
        (_points(lo), _points(hi)),
        {"float_only": paired.only_a, "int8_only": paired.only_b},
        paired.p_value,
        "",
        metrics.ChanceTest(int(float_ok.sum()), n, classes),
        list(order.misordered),
    )
    drop = metrics.at_most(difference, (lo, hi), opts.max_accuracy_drop / 100, n)
    if drop.verdict == "uncertain":  # solved on Tango's interval, the flips in the same shares
        drop.settle_at = metrics.paired_settle_at(paired.only_a, paired.only_b, n, opts.max_accuracy_drop / 100)
    acc.verdict = drop.verdict
    numbers = (
        f"int8 top-1 {acc.int8_top1:.1%} vs float {acc.float_top1:.1%}, {acc.drop:+.1f} points lost (95% "
        f"interval {acc.drop_interval[0]:+.1f} to {acc.drop_interval[1]:+.1f}; {paired.only_a} sample(s) "
        f"only float got right, {paired.only_b} only int8)"
    )
    if drop.verdict == "failed":
        found.failures.append(
            f"{numbers}: more than --max-accuracy-drop {opts.max_accuracy_drop:g} beyond doubt "
            f"(McNemar p={paired.p_value:.2g})"
        )
    elif drop.verdict == "uncertain":  # a warning only when the estimate itself is beyond the limit
        found.uncertain(
            f"cannot tell yet whether int8 loses more than --max-accuracy-drop "
            f"{opts.max_accuracy_drop:g} points: {numbers} on {n} labelled samples; " + metrics.settle_hint(drop),
            acc.drop > opts.max_accuracy_drop,
            opts.strict,
        )
    _judge_the_float_model(acc, order, names, found, n, classes)
    return acc


def _judge_the_float_model(
    acc: _Accuracy, order: metrics.ClassOrder, names: list[str] | None, found: _Findings, n: int, classes: int
) -> None:
    """The float model itself: classes it reads in another order than the labels (a failure), or no better than
    chance (a failure)."""
    chance = acc.chance
    _say_class_order(order, names, found)
    if acc.class_order:
        found.failures.append(preprocess_search.describe_misorder(acc.class_order, names))
    elif chance.near_chance:
        found.failures.append(
            f"the float model itself is no better than chance ({acc.float_top1:.1%} top-1 on {n} "
            f"labelled samples, {classes} classes: chance {chance.chance:.1%}, "
            f"p={chance.p_value:.2g})"
        )


def _say_class_order(order: metrics.ClassOrder, names: list[str] | None, found: _Findings) -> None:
    """What the class-order test found short of a misorder: a class read one way as another (a note: the model
    confuses it, the labels are not permuted), and swaps the counts point to that the data cannot show yet."""

    def name(k: int) -> str:
        return f"label {k} ({names[k]!r})" if names and k < len(names) else f"label {k}"

    for m in order.one_way:
        found.notes.append(
            f"{name(m['label'])} is read as class {m['predicted']} on {m['count']} of {m['of']} "
            f"samples, more often than as itself, while class {m['predicted']}'s own samples are "
            "not read as it: a class the model confuses, not misordered labels"
        )
    for cycle in order.unshown:
        labels = " and ".join(name(k) for k in cycle["labels"])
        settle = (
            f"about {cycle['per_class']:,} labelled samples per class would show it (--samples, --eval)"
            if cycle["per_class"]
            else "no sample size would show it at these shares"
        )
        found.warnings.append(
            f"the labels may not follow the model's class order: {labels} are read as one "
            f"another's classes more often than as their own, on too few samples to be sure; " + settle
        )


# ------------------------------------------------------------------------------------------ main
PROBE_SAMPLES = 64  # verification samples run again through the written model (it must not change)
MAX_EVAL_SAMPLES = 10_000  # --eval: labelled samples read for verification, at most


def match_folders_to_labels(data: calibration.CalibrationData, labels: list[str], flag: str) -> list[str]:
    """Number class folders by their name's place in ``labels`` when each names one of them (as evaluate does,
    :func:`edgekit.data.labelled.match_by_name`): all the classes in another order, or a few of many (20 folders
    of a 1000-class head). Sorted folder order is Keras's, but a model's labels say its own class order.
    Returns the notes to give (a warning: the folders' sorted order differs from the labels').
    """
    from edgekit.data.labelled import match_by_name

    if not data.classes or data.classes == list(labels) or data.calib_labels is None:
        return []
    order = match_by_name(data.classes, labels)
    if order is None:
        return []
    data.calib_labels, data.holdout_labels = order[data.calib_labels], order[data.holdout_labels]
    folders = len(data.classes)
    data.classes = list(labels)
    data.folders = folders if folders != len(labels) else None
    if folders == len(labels):
        return [f"{flag}: class folders matched to the labels by name (their sorted order differs from the labels')"]
    data.notes.append(f"{flag}: {folders} class folders matched by name to {folders} of the {len(labels)} labels")
    return []


def unused_labels_warning(unusable: str, labels_recorded: bool) -> str:
    """The warning when the data's labels cannot measure accuracy, true to what is recorded."""
    if labels_recorded:
        return (
            f"the calibration labels are not used to measure accuracy: {unusable} (the labels recorded are "
            "--labels's or the record's; name the class folders like them to have them matched by name)"
        )
    return f"the calibration labels are neither recorded nor used to measure accuracy: {unusable}"


def load_eval(opts: QuantizeOptions, spec: PreprocessSpec, labels: list[str] | None) -> calibration.CalibrationData:
    """``--eval DATA``: labelled samples (class folders, .npz, TFRecord) read through the same spec.

    Read before the preprocessing search, whose samples they add to (checked against the model's
    classes by :func:`check_eval` once the model's outputs are known).
    """
    if opts.eval is None:
        raise ValueError("load_eval reads --eval; it was not given")
    data = calibration.load(
        opts.eval, spec, MAX_EVAL_SAMPLES, 0, opts.seed, opts.tfrecord_key, _bars(opts), flag="--eval"
    )
    if labels is not None and data.kind == "images":
        match_folders_to_labels(data, labels, "--eval")
    return data


def check_eval(opts: QuantizeOptions, data: calibration.CalibrationData, classes: int) -> None:
    problem = preprocess_search.labels_problem(data, classes)
    if problem:
        raise InputError(
            f"--eval {opts.eval}: {problem}",
            "pass labelled data of the model's classes: class folders, or an .npz with x and y",
        )


def default_output(model: str | Path) -> Path:
    p = Path(model)
    base = p.resolve() if p.name in ("", "..") else p  # "." and ".." name no folder of their own
    return base.parent / f"{keras_io.default_output_stem(p)}_int8.tflite"


def source_name(model: str | Path) -> str:
    """The source model's file name as recorded (a SavedModel folder by its own name, also for `.`)."""
    p = Path(model)
    return p.resolve().name if p.is_dir() else p.name


def source_of(output: Path) -> str | None:
    """The source model name an existing edgekit output records (``source_model.name``), None when it records none."""
    try:
        meta = tflite_model.load(output).metadata.get(model_record.METADATA_NAME)
        record = model_record.ModelRecord.from_json(meta, str(output)) if meta else None
    except Exception:  # not a model, or not one of ours: it records no source
        return None
    source = (record.extra.get("source_model") or {}).get("name") if record else None
    return str(source) if source else None


def refuse_replacing_another_source(output: Path, model: str | Path) -> None:
    """Refuse a default output that exists and was made from another source (or not by edgekit).

    ``m.keras`` and ``m.weights.h5`` both default to ``m_int8.tflite``: the second run must not replace the
    first's output without a word. Rerunning on the same source replaces its own output, as before.
    """
    if not output.is_file():
        return
    name = source_name(model)
    source = source_of(output)
    if source == name:
        return
    made = f"was made from {source}" if source else "was not written by edgekit quantize"
    stem = Path(model).name.replace(".", "_") if not Path(model).is_dir() else name
    raise UsageError(
        f"the default output {output} exists and {made}, not from {name}: it would be replaced",
        f"choose another output with -o (e.g. -o {output.with_name(stem + '_int8.tflite')}), or delete "
        f"{output.name} first",
    )


def recorded_beside(model: str | Path) -> tuple[model_record.ModelRecord, Path] | None:
    """A record written beside the Keras model (``edgekit train`` writes ``<stem>.edgekit.json``).

    A record this command wrote is skipped: ``-o model.tflite`` puts the output's record at
    ``model.edgekit.json``, beside ``model.h5`` too, and it describes the .tflite, not the Keras model.
    """
    p = Path(model)
    p = p.resolve() if p.is_dir() else p  # `.` or `..` for a SavedModel: the record sits beside the folder
    candidates = [
        model_record.sidecar_path(p),
        p.with_name(keras_io.default_output_stem(p) + model_record.SIDECAR_SUFFIX),
    ]
    for c in dict.fromkeys(candidates):
        if c.is_file():
            record = model_record.ModelRecord.from_json(c.read_bytes(), str(c))
            if not str(record.extra.get("created_by", "")).startswith(CREATED_BY):
                return record, c
    return None


def _io_summary(t: tflite_model.TensorInfo) -> TensorIO:
    q = t.quantization
    return TensorIO(t.dtype, tuple(t.shape), q.scale if q else None, q.zero_point if q else None)


def settle_on_data(
    loaded: keras_io.LoadedSource,
    data: calibration.CalibrationData,
    spec: PreprocessSpec,
    origin: str,
    opts: QuantizeOptions,
    warn: Callable[[list[str]], None],
    labels_recorded: bool = False,
    eval_data: calibration.CalibrationData | None = None,
    note: Callable[[list[str]], None] | None = None,
) -> tuple[PreprocessSpec, str, preprocess_search.SearchResult | None, bool, int]:
    """Settle the spec on the labelled data (see :mod:`preprocess_search`) and apply it to ``data``
    (and ``eval_data``, whose labelled samples the search uses too).

    Returns (spec, origin, search result or None, whether the data's labels measure accuracy, model outputs).
    """
    with silenced(opts.verbose):
        first = loaded.predict(data.calib[:1])
    classes = int(np.asarray(first[0] if isinstance(first, (list, tuple)) else first).shape[1])  # a detector's: 4+nc
    if eval_data is not None:
        check_eval(opts, eval_data, classes)
    unusable = preprocess_search.labels_problem(data, classes)
    if data.labelled and unusable:
        warn([unused_labels_warning(unusable, labels_recorded)])

    with silenced(opts.verbose) as (real_err, _):

        def bar(names: list[str]) -> Any:
            return _bars(opts).iterate(names, len(names), "Trying preprocessing", real_err)

        spec, origin, search, warnings, notes = preprocess_search.settle(
            origin, spec, data, loaded.predict, classes, unusable, bar, extra=eval_data
        )
    warn(warnings)
    if note:
        note(notes)
    data.use(spec)
    if eval_data is not None:
        eval_data.use(spec)
    return spec, origin, search, unusable is None, classes


def _bars(opts: QuantizeOptions) -> Reporter:
    """Where quantize draws its progress bars: its reporter, unless show_progress is off."""
    return opts.report if opts.show_progress else SILENT


@dataclass
class _Run:
    """What one ``quantize`` run has settled so far, carried from stage to stage, and what it has told the user."""

    opts: QuantizeOptions
    output: Path
    labels: list[str] | None = None
    record: model_record.ModelRecord | None = None
    record_file: Path | None = None
    sidecar: Path | None = None  # None: the sidecar's name is the Keras model's own record
    calib_source: str = ""
    detection_eval_data: str | None = None
    eval_names: tuple[list[str], str] | None = None  # --eval's class names and their file (data.yaml...)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # a choice made for the user, an interval not yet settled

    def warn(self, messages: list[str]) -> None:
        for m in messages:
            self.warnings.append(m)
            self.opts.report.warn(m)

    def note(self, messages: list[str]) -> None:
        for m in messages:
            self.notes.append(m)
            self.opts.report.note(m)


@dataclass
class _Prepared:
    """The loaded model and the data read through the settled preprocessing."""

    loaded: keras_io.LoadedSource
    spec: PreprocessSpec
    origin: str
    data: calibration.CalibrationData
    eval_data: calibration.CalibrationData | None
    search: preprocess_search.SearchResult | None
    labelled: bool


@dataclass
class _Converted:
    """The converter's int8 model, checked, and what it is (a detector's layout, None for a classifier)."""

    model: bytes
    remedy: str
    tried: list[str]
    layout: Any  # detector_verify's DetectionLayout, or None


@dataclass
class _Verified:
    verification: Verification | DetectionVerification | None
    checked: VerificationSet | None
    int8_scores: np.ndarray | None


def _check_options(opts: QuantizeOptions) -> Path:
    """Stage 1: refuse bad options and outputs before any slow work; the output path."""
    if opts.io not in IO_TYPES:
        raise UsageError(f"--io {opts.io!r} is not one of {', '.join(IO_TYPES)}", "use --io uint8 or --io int8")
    if not 0.0 <= opts.min_agreement <= 1.0:
        raise UsageError(f"--min-agreement {opts.min_agreement} is not between 0 and 1", "e.g. --min-agreement 0.9")
    if not 0.0 <= opts.max_accuracy_drop <= 100.0:
        raise UsageError(
            f"--max-accuracy-drop {opts.max_accuracy_drop} is not between 0 and 100 (points)",
            "e.g. --max-accuracy-drop 1",
        )
    if opts.model_shown and not opts.output:
        raise UsageError(
            f"{opts.model_shown} has no file name to put the output beside", "pass output='model_int8.tflite'"
        )
    output = Path(opts.output) if opts.output else default_output(opts.model)
    if not Path(opts.model).exists():
        raise InputError(f"no such file or folder: {opts.model}", "check the path")
    if Path(opts.model).suffix.lower() == ".tflite":  # said before "no calibration data", which would mislead
        raise InputError(f"{opts.model} is already a TFLite model", "use `edgekit inspect` or `edgekit check` on it")
    if Path(opts.model).suffix.lower() in onnx_io.PYTORCH_SUFFIXES:  # a pickle: never loaded (refused before data)
        onnx_io.refuse_pytorch(Path(opts.model), opts.trust_model)
    refuse_overwriting_input(output, opts.model, *([opts.labels] if opts.labels else []))
    if opts.labels:  # the record written beside the output must not replace the labels file it is made from
        refuse_overwriting_input(model_record.sidecar_path(output), opts.labels)
    if not output.name.lower().endswith(".tflite") or output.name.lower() == ".tflite":
        raise UsageError(
            f"output {output} is not a file name ending in .tflite", "choose an output path like -o model_int8.tflite"
        )
    require_output_folder(output, opts.report)  # before the slow work, like every check below up to keras_io.load
    refuse_folders([output, model_record.sidecar_path(output)])
    return output


def _find_record(run: _Run) -> None:
    """Stage 2: the labels file, the record beside the Keras model, and where the output's record goes."""
    opts, output = run.opts, run.output
    run.labels = read_labels(opts.labels) if opts.labels else None
    try:
        found = recorded_beside(opts.model)
        unreadable_record = None
    except InputError as exc:  # a stray, broken record must not block a run that names its own data
        if opts.calib is None:
            raise
        found, unreadable_record = None, f"ignoring the record beside the model: {exc}"
        opts.report.warn(unreadable_record)  # said now: loading the model takes a while
    run.record, run.record_file = found if found else (None, None)
    # `quantize m.keras -o m.tflite`: the sidecar m.edgekit.json would be the Keras model's own record (its
    # training record, an input). The output's record goes inside the model only; that one stays as it is.
    run.sidecar = model_record.sidecar_path(output)
    if run.record_file and run.sidecar.resolve() == run.record_file.resolve():
        opts.report.note(
            f"{run.sidecar.name} beside the output is {Path(opts.model).name}'s own record and stays as "
            f"it is: the output's record is written inside {output.name} only"
        )
        run.sidecar = None
    if opts.output is None:
        refuse_replacing_another_source(output, opts.model)
    if unreadable_record:
        run.warnings.append(unreadable_record)


def _find_data(run: _Run) -> None:
    """Stage 3: the calibration data (given, else recorded beside the model) and ``--eval``'s, checked to exist."""
    opts, record, record_file = run.opts, run.record, run.record_file
    calib_source = opts.calib
    if calib_source is None:
        recorded_calib = (record.extra.get("calibration") or {}).get("source") if record else None
        if not recorded_calib or record_file is None:  # a record always comes with its file
            raise calibration.describe_missing(opts.model)
        calib_path = Path(recorded_calib)
        calib_source = str(calib_path if calib_path.is_absolute() else record_file.parent / calib_path)
    calibration.check_exists(calib_source, record_file if opts.calib is None else None)
    if opts.eval is not None:  # before the slow work too
        if opts.eval == "random":  # noise has no labels: it can measure no accuracy
            raise UsageError(
                "--eval random: --eval takes labelled data, and noise has no labels",
                "pass class folders, or an .npz with x and y; or leave --eval out",
            )
        calibration.check_exists(opts.eval, flag="--eval")

    from edgekit.detection.data import calibration_images, is_detection_data, read_detection_set

    if opts.eval is not None and is_detection_data(opts.eval):
        evaluated = read_detection_set(opts.eval, flag="--eval")  # every entry checked before the slow work
        if evaluated.names_from:  # Ultralytics' data.yaml (or classes.txt): the names to record, where none are given
            run.eval_names = ([c["name"] for c in evaluated.categories], evaluated.names_from)

    detection_images = calibration_images(calib_source)  # a COCO file or YOLO folder: calibrate on its images
    if detection_images is not None:
        opts.report.note(f"calibrating on the images of the detection data {calib_source}: {detection_images}")
        calib_source = detection_images
    run.calib_source = calib_source


def _load_source(opts: QuantizeOptions) -> keras_io.LoadedSource:
    """Stage 4: the Keras model, SavedModel or ONNX model (with its ONNX Runtime reference), with what loading
    it noted."""
    if Path(opts.model).suffix.lower() == onnx_io.ONNX_SUFFIX:
        if opts.arch or opts.custom_objects:
            raise UsageError(
                "--arch and --custom-objects apply to Keras models, not to an ONNX model", "leave them out"
            )
        onnx_io.require_onnx()  # the onnx extra named first; then TensorFlow, which converts the translation
        import_tensorflow(opts.verbose)
        loaded: keras_io.LoadedSource = onnx_io.load(
            opts.model, opts.input_size, opts.output_name, opts.verbose, opts.model_shown
        )
    else:
        loaded = keras_io.load(
            opts.model, opts.arch, opts.custom_objects, opts.trust_model, opts.verbose, opts.output_name
        )
    for note in loaded.notes:
        opts.report.note(note)
    if loaded.format == "savedmodel":  # docs/commands/quantize.md: a SavedModel is a program, and converting runs it
        if opts.trust_model:
            opts.report.warn(
                "a SavedModel is a program: converting it runs its graph, and with --trust-model its "
                "file and system operations were not looked for"
            )
        else:
            opts.report.note(
                "a SavedModel is a program: converting it runs its graph (read first: it has no file or "
                "system operations)"
            )
    return loaded


def _decide_preprocessing(run: _Run, loaded: keras_io.LoadedSource) -> _Prepared:
    """Stage 5: the preprocessing spec (flags, record, model, else measured on the labelled data), the
    calibration and ``--eval`` data read through it, and the labels to record."""
    opts, record = run.opts, run.record
    spec, spec_origin, spec_warnings = resolve_spec(loaded, opts, record.preprocess if record else None)
    run.warn(spec_warnings)
    if run.labels is None and record and record.labels:
        run.labels = record.labels
    class_names = getattr(loaded, "class_names", None)  # an ONNX exporter's metadata (Ultralytics)
    if run.labels is None and class_names:
        run.labels = list(class_names)
    if run.labels is None and run.eval_names:  # detect then needs no --labels
        run.labels, names_from = run.eval_names
        shown_names = ", ".join(run.labels[:5]) + (f"... ({len(run.labels)})" if len(run.labels) > 5 else "")
        run.note(
            [
                f"class names from --eval {opts.eval} ({names_from}): {shown_names}; recorded with the model "
                "(--labels FILE records others)"
            ]
        )
    holdout = opts.holdout if opts.verify else 0
    data = calibration.load(
        run.calib_source,
        spec,
        opts.samples,
        holdout,
        opts.seed,
        opts.tfrecord_key,
        _bars(opts),
        letterbox=getattr(loaded, "letterbox", False),
    )  # fed as it will be
    run.warn(data.warnings)
    if run.labels is not None and data.kind == "images":
        run.warn(match_folders_to_labels(data, run.labels, "--calib"))
    from edgekit.detection.data import is_detection_data

    run.detection_eval_data = opts.eval if opts.eval and is_detection_data(opts.eval) else None  # COCO JSON / YOLO
    # --eval's labelled samples are read first: the preprocessing search measures on them too
    eval_data = (
        load_eval(opts, spec, run.labels or data.class_names)
        if opts.verify and opts.eval and not run.detection_eval_data
        else None
    )
    spec, spec_origin, search, labelled, _ = settle_on_data(
        loaded, data, spec, spec_origin, opts, run.warn, run.labels is not None, eval_data, run.note
    )
    if run.labels is None and data.class_names and labelled:
        run.labels = data.class_names  # class folder names, in Keras's order: what classify should print
    return _Prepared(loaded, spec, spec_origin, data, eval_data, search, labelled)


def _convert_stage(run: _Run, p: _Prepared) -> _Converted:
    """Stage 6: convert and check (with the remedies), and tell a detector from a classifier. An ONNX model's
    translation is first checked against ONNX Runtime on the calibration samples."""
    opts = run.opts
    if isinstance(p.loaded, onnx_io.OnnxModel):
        with silenced(opts.verbose):
            matched = onnx_io.check_against_reference(p.loaded, p.data.calib)
        run.note(matched)
    model_bytes, remedy, tried = convert_checked(p.loaded, p.data.calib, p.spec, opts.io, _bars(opts), opts.verbose)
    info = tflite_model.ModelInfo.from_bytes(model_bytes)
    from edgekit.converters import detector_verify

    layout = detector_verify.layout_of(model_bytes, info, opts.layout, opts.model_shown or opts.model)  # None: a
    if opts.layout and layout is None:  # classifier
        raise UsageError(
            f"--layout {opts.layout}: {opts.model_shown or opts.model} is a classifier (one score per class)",
            "leave --layout out",
        )
    if layout is not None and getattr(p.loaded, "letterbox", False):  # an ONNX exporter that letterboxes
        layout = dataclasses.replace(
            layout,
            letterbox=True,
            source=tuple(
                "letterboxed input (the ONNX exporter's metadata: Ultralytics)" if "plain resize" in line else line
                for line in layout.source
            ),
        )
    if layout is not None:
        detector_verify.refuse_crushed_scores(layout, info)
        opts.report.note(f"a detector: {layout.describe()} ({'; '.join(layout.source)})")
    n_classes = layout.num_classes if layout is not None else int(np.prod(info.outputs[0].shape))
    if run.detection_eval_data and layout is None:
        raise InputError(
            f"--eval {opts.eval}: detection data (boxes), but the model is a classifier",
            "pass class folders or an .npz with x and y",
        )
    if run.labels is not None and len(run.labels) != n_classes:
        run.warn([f"{len(run.labels)} labels for {n_classes} model outputs"])
    return _Converted(model_bytes, remedy, tried, layout)


def _verify_stage(run: _Run, p: _Prepared, c: _Converted) -> _Verified:
    """Stage 7: the int8 model against the float one (detections matched for a detector, top-1 otherwise)."""
    opts = run.opts
    if not opts.verify:
        return _Verified(None, None, None)
    checked = verification_set(p.data, p.labelled, p.eval_data)
    verification: Verification | DetectionVerification
    if c.layout is not None:  # detections matched, not top-1 (labelled detection data: evaluate --against)
        from edgekit.converters import detector_verify

        with silenced(opts.verbose):
            verification = detector_verify.verify_detector(
                p.loaded.predict, c.model, c.layout, checked.x, opts.min_agreement, checked.sources, opts.strict
            )
            if run.detection_eval_data:
                verification = detector_verify.apply_map50_gate(
                    verification,
                    detector_verify.map50_gate(
                        p.loaded.predict,
                        c.model,
                        c.layout,
                        p.spec,
                        run.detection_eval_data,
                        opts.max_accuracy_drop,
                        run.labels,
                    ),
                    opts.strict,
                )
            int8_scores = run_int8(c.model, checked.x[:PROBE_SAMPLES])
    else:
        with silenced(opts.verbose):
            float_scores = p.loaded.predict(checked.x)
            int8_scores = run_int8(c.model, checked.x)
        verification = verify(float_scores, int8_scores, checked.labels, opts, checked.sources, run.labels)
    run.warn(list(verification.warnings))
    run.note(list(verification.notes))
    return _Verified(verification, checked, int8_scores)


def _write_stage(run: _Run, p: _Prepared, c: _Converted, v: _Verified) -> bytes:
    """Stage 8: the record put inside the model (its outputs must not change) and beside it, written all or none."""
    opts = run.opts
    tf = import_tensorflow()
    import keras

    rec = model_record.ModelRecord(
        p.spec,
        run.labels,
        {
            "created_by": f"{CREATED_BY} {__version__}",
            "source_model": {
                "name": opts.model_shown or source_name(opts.model),
                "format": p.loaded.format,
                "output": p.loaded.output.to_dict() if p.loaded.output else None,
                "notes": p.loaded.notes,
            },
            "versions": {
                "edgekit": __version__,
                "tensorflow": tf.__version__,
                "keras": keras.__version__,
                **onnx_io.versions(p.loaded),
            },
            "io": opts.io,
            # what was read, without the notes reading it gave (the record was written so before issue 33)
            "calibration": {k: v for k, v in p.data.summary().to_dict().items() if k != "notes"},
            "preprocess_origin": p.origin,
            "preprocess_search": p.search.record().to_dict() if p.search else None,
            "verification": v.verification.to_dict() if v.verification else None,
            **(
                {"detection": {"layout": c.layout.to_dict(), "letterbox": c.layout.letterbox}}
                if c.layout is not None
                else {}
            ),
        },
    )
    final = _with_record(c.model, rec)
    # What was verified is the converter's output; what is written is that model repacked with the
    # record. The repack must not change a single output: run the verification samples (or a few
    # calibration samples with --no-verify) through the final bytes too.
    probe = v.checked.x[:PROBE_SAMPLES] if v.checked is not None else p.data.calib[:8]
    with silenced(opts.verbose):
        before = v.int8_scores[:PROBE_SAMPLES] if v.int8_scores is not None else run_int8(c.model, probe)
        after = run_int8(final, probe)
    if not np.array_equal(before, after):
        raise InternalError(
            "adding the record to the model changed its outputs "
            f"(on {len(probe)} samples, max |difference| {float(np.abs(after - before).max()):g})",
            "this is a bug in edgekit (nothing was written); rerun with --debug and report it",
        )
    write_all_atomic({run.output: final, **({run.sidecar: rec.to_json().encode()} if run.sidecar else {})})
    return final


def _result_stage(
    run: _Run,
    p: _Prepared,
    c: _Converted,
    v: _Verified,
    final: bytes,
) -> tuple[QuantizeOutcome, advice.ModelFacts]:
    """Stage 9: check the written model as ``edgekit check`` would, advise on placement, and describe the run."""
    opts = run.opts
    out_info = tflite_model.ModelInfo.from_bytes(final)
    check = compatibility.check_model(out_info)
    facts = advice.keras_facts(p.loaded.owner).merged(advice.tflite_facts(out_info, check))
    src = Path(opts.model)
    src_size = sum(f.stat().st_size for f in src.rglob("*") if f.is_file()) if src.is_dir() else src.stat().st_size
    spec = p.spec
    summary = QuantizeDocument(
        output=str(run.output),
        record=str(run.sidecar) if run.sidecar else None,
        source=SourceModel(
            opts.model_shown or str(src), p.loaded.format, src_size, p.loaded.output, tuple(p.loaded.notes)
        ),
        size_bytes=out_info.size_bytes,
        preprocess=Preprocess(
            **asdict(spec), origin=p.origin, description=spec.describe(), search=p.search.record() if p.search else None
        ),
        labels=len(run.labels) if run.labels else None,
        calibration=p.data.summary(),
        io=ModelIO(_io_summary(out_info.inputs[0]), _io_summary(out_info.outputs[0])),
        op_histogram=tuple(out_info.op_histogram_rows()),
        checks=GateChecks.from_check(check),
        edgetpu=CheckDigest.from_check(check),  # check's real verdict, not a fixed "passed"
        advice=tuple(advice.placement_advice(facts, check.verdict)),
        remedy=c.remedy,
        remedies_tried=tuple(c.tried),
        verification=v.verification,
        warnings=tuple(run.warnings),
        notes=tuple(run.notes),
    )
    return QuantizeOutcome(run.output, run.sidecar, summary), facts


def _refuse_failed(
    run: _Run, p: _Prepared, c: _Converted, v: _Verified, result: QuantizeOutcome, facts: advice.ModelFacts
) -> None:
    """Stage 10: a failed verification, with advice on what int8 lost, raised as :class:`AgreementError`."""
    verification, checked, opts = v.verification, v.checked, run.opts
    if not verification or verification.passed or checked is None:  # checked is set with the verification
        return
    more = _accuracy_advice(p.loaded, checked.x, p.spec, verification, facts, c.tried, opts.verbose, opts.report)
    result.summary = dataclasses.replace(result.summary, advice=result.summary.advice + tuple(more))
    if c.layout is not None:
        from edgekit.converters.detector_verify import difference_said

        difference = difference_said(c.layout, verification.mean_abs_diff)
    else:
        difference = f"mean |score difference| {verification.mean_abs_diff:.4f}"
    raise AgreementError(
        f"on {checked.describe()}: " + "; ".join(verification.failures) + f"; {difference}",
        run.output,
        _refusal_hint(verification, c.layout is not None, result),
        result.summary,
    )


STRICT_HINT = (
    "give it more samples until the verdict settles (--samples, --eval: the line says how many), or "
    "leave out --strict to pass an uncertain verdict with a warning"
)


def _refusal_hint(verification: Verification | DetectionVerification, detector: bool, result: QuantizeOutcome) -> str:
    """What to do about a failed verification: fix the labels' order, settle a --strict verdict, or the data."""
    if verification.class_order:
        return preprocess_search.MISORDER_HINT
    if all(metrics.STRICT_FAILS in f for f in verification.failures):
        return STRICT_HINT
    if detector:
        return (
            "check that --calib holds real images of what the detector finds, preprocessed like training (see "
            "--scaling), or relax --min-agreement"
        )
    return (
        "check that --calib holds real training images of the model's classes, preprocessed like training "
        "(see --scaling), or relax --min-agreement / --max-accuracy-drop"
        + (
            "; the advice above names the layers int8 loses most in"
            if any(a.key == "worst_layers" for a in result.summary.advice)
            else ""
        )
    )


def quantize(opts: QuantizeOptions) -> QuantizeOutcome:
    """Run the whole ``edgekit quantize`` flow (see the module docstring), stage by stage. Raises EdgekitError
    subclasses (:class:`AgreementError` when the int8 model fails verification: the output is kept)."""
    run = _Run(opts, _check_options(opts))
    _find_record(run)
    _find_data(run)
    loaded = _load_source(opts)
    prepared = _decide_preprocessing(run, loaded)
    converted = _convert_stage(run, prepared)
    verified = _verify_stage(run, prepared, converted)
    final = _write_stage(run, prepared, converted, verified)
    result, facts = _result_stage(run, prepared, converted, verified, final)
    _refuse_failed(run, prepared, converted, verified, result, facts)
    return result


def _accuracy_advice(
    loaded: keras_io.LoadedSource,
    x: np.ndarray,
    spec: PreprocessSpec,
    verification: Verification | DetectionVerification,
    facts: advice.ModelFacts,
    tried: list[str],
    verbose: bool,
    report: Reporter = SILENT,
) -> list[advice.Advice]:
    """Advice for an int8 model that lost accuracy or agreement: the architecture's remedy, the layers int8 loses
    most in (TFLite's quantization debugger, as ``evaluate --reference``), the converter settings tried. Nothing
    for a failure the int8 conversion did not cause (labels misordered, a float model at chance)."""
    lost = getattr(verification, "accuracy_verdict", None) == "failed" or verification.agreement_verdict == "failed"
    if not lost or verification.class_order or getattr(verification, "float_near_chance", None):
        return []
    from edgekit.converters import reference

    layers, error = None, None
    report.status("Measuring each layer's int8 error (TensorFlow's quantization debugger)...")
    try:
        layers = reference.layer_errors(loaded, x, spec, verbose)
    except Exception as exc:  # an experimental TF API: say why, keep the rest of the report
        from edgekit.errors import first_line

        error = f"{type(exc).__name__}: {first_line(exc)}"
    return advice.accuracy_advice(facts, layers, error, tried)


def _with_record(model: bytes, rec: model_record.ModelRecord) -> bytes:
    from edgekit.tflite.metadata import set_metadata

    record = rec.to_json().encode()
    data = set_metadata(model, model_record.METADATA_NAME, record)
    if tflite_model.ModelInfo.from_bytes(data).metadata.get(model_record.METADATA_NAME) != record:
        raise InternalError(
            "the record written into the model does not read back",
            "this is a bug in edgekit (nothing was written); rerun with --debug and report it",
        )
    return data
