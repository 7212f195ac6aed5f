"""quantize's verification for detectors: the int8 model's detections against the float model's.

A Keras model whose output is not one score per class is a detector when its converted int8 model
fits a detection layout (:func:`edgekit.detection.layout.find_layout`, read from the converted bytes).
Then, on the same paired samples quantize verifies classifiers on, both models' outputs are decoded
by the same code ``edgekit detect`` runs (:func:`edgekit.board.decode.postprocess`, conf 0.25, class-wise
NMS) and matched per image (same class, IoU >= 0.5, greedily by score). The gate is the share of the
float model's detections the int8 model keeps, with a 95% interval from a bootstrap over images
(detections of one image are not independent), decided against ``--min-agreement`` by
:func:`edgekit.results.metrics.at_least`, as the classifier's top-1 agreement is: refused only when the whole
interval lies below, "uncertain" (a warning saying how many samples would settle it) when it spans it.

Before any of that, a single output that holds pixel-scale boxes beside 0..1 scores is refused with
the reason: one int8 scale for both leaves the scores a handful of steps.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

from edgekit.board import decode as detection
from edgekit.board.decode import Geometry
from edgekit.errors import ConversionError, VerificationError
from edgekit.records import freeze
from edgekit.results import metrics
from edgekit.results.detect import DetectionLayout, Layout, Object
from edgekit.results.quantize import Decision, DetectionVerification, Map50Gate
from edgekit.tflite import model as tflite_model

MATCH_IOU = 0.5
VERIFY_CONF = detection.DEFAULT_CONF
BOOTSTRAP = 1000
SEED = 0
MIN_SCORE_STEPS = 32  # a 0..1 score needs at least this many int8 steps
# A float detection is kept when int8 finds it with a score at most this far under conf: a score that moves from
# 0.26 to 0.24 is no lost object (mAP, which has no threshold, counts it alike). Without it a trained YOLOv8
# (tests/fixtures/exports/yolov8t_256_float32.onnx) was refused at 82% kept while its int8 mAP50-95 matched
# the float model's (evaluate: 8.7 against yolo val's 8.6): its weak detections sit near 0.25.
SCORE_SLACK = 0.05


def is_classifier_output(info: tflite_model.ModelInfo) -> bool:
    outs = info.outputs
    return len(outs) == 1 and sum(d > 1 for d in outs[0].shape) <= 1


def layout_of(
    model_bytes: bytes, info: tflite_model.ModelInfo | None = None, forced: str | None = None, source: str | None = None
) -> DetectionLayout | None:
    """The detection layout of converted bytes; None for a classifier (one score per class). InputError when the
    outputs are not a classifier's and fit no layout, or several and ``forced`` (``--layout``) is None. Its
    message names ``source`` (the user's model: "the int8 model of SOURCE"), never the temporary file read."""
    from edgekit.detection.layout import find_layout
    from edgekit.errors import InputError, UsageError

    info = info or tflite_model.ModelInfo.from_bytes(model_bytes)
    if is_classifier_output(info):
        return None
    fd, name = tempfile.mkstemp(suffix=".tflite")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(model_bytes)
        return find_layout(name, forced, info=info)
    except (InputError, UsageError) as exc:
        shown = f"the int8 model of {source}" if source else "the int8 model"
        kind = type(exc) if type(exc) in (InputError, UsageError) else InputError
        raise kind(exc.message.replace(name, shown), (exc.hint or "").replace(name, shown) or None) from None
    finally:
        os.unlink(name)


def refuse_crushed_scores(layout: DetectionLayout, info: tflite_model.ModelInfo) -> None:
    """ConversionError when pixel boxes and 0..1 scores share one int8 output (the scores keep too few steps)."""
    if layout.kind not in (Layout.YOLO, Layout.YOLOV5, Layout.END2END) or layout.boxes_normalized is not False:
        return
    t = info.outputs[layout.role("output")]
    scale = t.quantization.scale if t.quantization and t.quantization.scales else 0.0
    if scale and 1.0 / scale < MIN_SCORE_STEPS:
        raise ConversionError(
            f"the model's one output holds pixel-scale boxes beside 0..1 scores: its int8 scale {scale:.3g} leaves "
            f"the scores {int(1.0 / scale)} steps between 0 and 1, so int8 detections would be mostly lost",
            "divide the boxes by the input size inside the model (normalized, as Ultralytics' TFLite exports do), "
            "or return boxes and scores as two outputs",
        )


def run_outputs(model_bytes: bytes, x: np.ndarray) -> tuple[list[list[np.ndarray]], list[tuple[float, int]]]:
    """Every output of the int8 model, as it gives them (quantized), for each float32 sample (preprocessed)."""
    from edgekit.board import backends
    from edgekit.board.preprocess import quantize as quantize_tensor

    with backends.open_content(model_bytes, "the int8 model", num_threads=1) as opened:
        interp = opened.interpreter
        inp = opened.input
        outs = interp.get_output_details()
        quant = [(float(o["quantization"][0]), int(o["quantization"][1])) for o in outs]
        dtype = np.dtype(inp["dtype"]).name
        results = []
        for sample in x:
            interp.set_tensor(inp["index"], quantize_tensor(sample[None], dtype, *inp["quantization"]))
            opened.invoke()
            results.append([interp.get_tensor(o["index"]).copy() for o in outs])
    return results, quant


def difference_said(layout: DetectionLayout, mean_abs_diff: float | None) -> str:
    """The mean |difference| :func:`verify_detector` measures, said for what it is: the int8 model's output 0 against
    the float model's, named by its role (a split head's box output, boxes and scores in one output...), not a score
    difference (quantize's refusal said "score difference" for a box output)."""
    role = next((name for name, index in layout.roles.items() if index == 0), "output").split("@")[0]
    what = {"output": "boxes and scores"}.get(role, role)
    return f"mean |difference| on output 0 ({what}) {mean_abs_diff or 0.0:.4f}"


def _float_outputs(predicted: Any, int8_shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    """Keras's outputs (an array or a list, batch first) in the int8 model's output order, matched by shape."""
    arrays = [np.asarray(p) for p in (predicted if isinstance(predicted, (list, tuple)) else [predicted])]
    if len(arrays) == 1 and len(int8_shapes) == 1:  # keras_io's predict gives each sample's output flattened
        a = arrays[0]
        return [a.reshape((a.shape[0],) + tuple(int8_shapes[0][1:]))]
    if len(arrays) == 1:
        raise VerificationError(
            "detectors with several outputs are not verified by quantize yet",
            "pass --no-verify, then compare with edgekit evaluate -m INT8 --data COCO_OR_YOLO --against FLOAT.tflite",
        )
    order = []
    for shape in int8_shapes:
        found = [i for i, a in enumerate(arrays) if tuple(a.shape[1:]) == tuple(shape[1:]) and i not in order]
        if not found:
            raise VerificationError(
                "cannot pair the float model's outputs with the int8 model's by shape",
                "pass --no-verify, and check the int8 model with edgekit evaluate --against",
            )
        order.append(found[0])
    return [arrays[i] for i in order]


def match(a: list[Object], b: list[Object], iou: float = MATCH_IOU) -> int:
    """Greedy one-to-one matches of ``a`` (best first) to ``b``: same class and IoU >= ``iou``."""
    used: set[int] = set()
    matched = 0
    for o in a:
        best, best_iou = None, iou
        for j, p in enumerate(b):
            if j in used or p.id != o.id:
                continue
            v = float(
                detection.box_iou(
                    np.array([[o.bbox.xmin, o.bbox.ymin, o.bbox.xmax, o.bbox.ymax]]),
                    np.array([[p.bbox.xmin, p.bbox.ymin, p.bbox.xmax, p.bbox.ymax]]),
                )[0, 0]
            )
            if v >= best_iou:
                best, best_iou = j, v
        if best is not None:
            used.add(best)
            matched += 1
    return matched


def image_counts(float_objs: list[Object], int8_near: list[Object]) -> tuple[int, int, int]:
    """(float detections, int8 detections at conf, float ones int8 keeps) for one image: ``float_objs`` at
    ``VERIFY_CONF``, ``int8_near`` down to ``VERIFY_CONF - SCORE_SLACK`` (matched, but not counted as int8's)."""
    near = [o for o in int8_near if o.score >= VERIFY_CONF - SCORE_SLACK]
    return len(float_objs), sum(o.score >= VERIFY_CONF for o in near), match(float_objs, near)


def verify_detector(
    predict: Callable[[np.ndarray], Any],
    model_bytes: bytes,
    layout: DetectionLayout,
    x: np.ndarray,
    min_agreement: float,
    sources: dict[str, int],
    strict: bool = False,
) -> DetectionVerification:
    """The verification block for a detector (the keys quantize's classifier block has that quantize reads:
    ``passed``, ``failures``, ``warnings``, ``mean_abs_diff``, ``class_order``)."""
    int8, quant = run_outputs(model_bytes, x)
    shapes = [tuple(o.shape) for o in int8[0]] if int8 else []
    floats = _float_outputs(predict(x), shapes)
    h, w = layout.input_hw
    geometry = Geometry.resize((w, h), (w, h))
    float_quant = [(0.0, 0)] * len(floats)
    per_image = []
    diffs = []
    for i, raw in enumerate(int8):
        f_out = [f[i : i + 1] for f in floats]
        f_objs, _ = detection.postprocess(f_out, float_quant, layout, geometry, VERIFY_CONF)
        q_near, _ = detection.postprocess(raw, quant, layout, geometry, VERIFY_CONF - SCORE_SLACK)
        per_image.append(image_counts(f_objs, q_near))
        diffs.append(
            float(
                np.abs(detection.dequantize(raw[0], quant[0]).ravel() - np.asarray(f_out[0], np.float32).ravel()).mean()
            )
        )
    counts = np.asarray(per_image, np.int64).reshape(-1, 3)
    n_float, n_int8, matched = (int(v) for v in counts.sum(axis=0)) if len(counts) else (0, 0, 0)
    block = DetectionVerification(
        kind="detection",
        samples=len(x),
        sources=freeze(sources),
        conf=VERIFY_CONF,
        match_iou=MATCH_IOU,
        float_detections=n_float,
        int8_detections=n_int8,
        matched=matched,
        min_agreement=min_agreement,
        mean_abs_diff=float(np.mean(diffs)) if diffs else 0.0,
        class_order=None,
        layout=layout,
        failures=(),
        warnings=(),
        kept=None,
        kept_interval=None,
        agreement_verdict=Decision.UNCERTAIN,
        passed=True,
    )
    if n_float == 0:
        return dataclasses.replace(
            block,
            warnings=(
                f"the float model detects nothing at conf {VERIFY_CONF:g} on {len(x)} samples: the int8 model's "
                "detections could not be compared (calibrate and verify on images with objects)",
            ),
        )
    return _judge_kept(block, counts, len(x), strict)


def _judge_kept(
    block: DetectionVerification, counts: np.ndarray, images: int, strict: bool = False
) -> DetectionVerification:
    """The share of the float model's detections int8 keeps, with a bootstrap interval over images, decided
    against ``--min-agreement`` (``strict``: an uncertain verdict whose estimate is below it fails)."""
    n_float, n_int8, matched, min_agreement = (
        block.float_detections,
        block.int8_detections,
        block.matched,
        block.min_agreement,
    )
    kept = matched / n_float
    rng = np.random.RandomState(SEED)
    shares = []
    for _ in range(BOOTSTRAP):
        pick = counts[rng.randint(0, len(counts), len(counts))]
        f = pick[:, 0].sum()
        if f:
            shares.append(pick[:, 2].sum() / f)
    interval = (float(np.percentile(shares, 2.5)), float(np.percentile(shares, 97.5)))
    decision = metrics.at_least(kept, interval, min_agreement, images)
    failures: list[str] = []
    warnings: list[str] = []
    notes: list[str] = []
    span = f"95% interval {interval[0]:.1%} to {interval[1]:.1%}, bootstrap over {images} images"
    if decision.verdict == "failed":
        failures.append(
            f"the int8 model keeps {kept:.1%} of the float model's {n_float} detections (same "
            f"class, IoU >= {MATCH_IOU:g}; {span}), below --min-agreement {min_agreement:g}"
        )
    elif decision.verdict == "uncertain":  # a warning only when the estimate itself is short (issue 24), else a note
        line = (
            f"cannot tell yet whether the int8 model keeps --min-agreement {min_agreement:g} of the float "
            f"model's detections: {kept:.1%} ({span}); " + metrics.settle_hint(decision, "images")
        )
        if kept < min_agreement and strict:
            failures.append(line + "; " + metrics.STRICT_FAILS)
        else:
            (warnings if kept < min_agreement else notes).append(line)
    return dataclasses.replace(
        block,
        kept=kept,
        kept_interval=interval,
        agreement_verdict=Decision(decision.verdict),
        extra_int8=(n_int8 - matched) / max(n_int8, 1),
        passed=not failures,
        failures=tuple(failures),
        warnings=tuple(warnings),
        notes=tuple(notes),
    )


# ------------------------------------------------------------------------------------ labelled: the mAP50 gate
def _detections_of_both(
    predict: Callable[[np.ndarray], Any],
    model_bytes: bytes,
    layout: DetectionLayout,
    x: np.ndarray,
    ids: list[int],
    geometries: list[Any],
) -> tuple[dict[int, Any], dict[int, Any]]:
    """{image id: objects} of the float model (``predict``) and of the int8 one on the same inputs, decoded under
    evaluate's protocol (conf, NMS IoU, detections per image)."""
    from edgekit.devices import evaluate_detector as detection_eval

    int8, quant = run_outputs(model_bytes, x)
    floats = _float_outputs(predict(x), [tuple(o.shape) for o in int8[0]])
    conf, iou, max_det = detection_eval.STANDARD_CONF, detection_eval.DEFAULT_EVAL_IOU, detection_eval.STANDARD_MAX_DET
    per_f, per_q = {}, {}
    for k, (iid, g) in enumerate(zip(ids, geometries)):
        per_f[iid], _ = detection.postprocess(
            [f[k : k + 1] for f in floats], [(0.0, 0)] * len(floats), layout, g, conf, iou, max_det
        )
        per_q[iid], _ = detection.postprocess(int8[k], quant, layout, g, conf, iou, max_det)
    return per_f, per_q


def _gate_inputs(paths: list[str], layout: DetectionLayout, spec: Any) -> tuple[list[Any], np.ndarray]:
    """The images at ``paths`` as evaluate feeds the model (letterboxed or resized to its input): their geometries
    (to map boxes back) and the float batch."""
    from edgekit.board.preprocess import open_image, to_float

    images = [open_image(p) for p in paths]
    h, w = layout.input_hw
    fit = Geometry.letterboxed if layout.letterbox else Geometry.resize  # as evaluate feeds the model
    geometries = [fit(im.size, (w, h)) for im in images]
    channels = "L" if spec.channels == "L" else "RGB"
    return geometries, np.stack([to_float(g.apply(im.convert(channels)), spec) for im, g in zip(images, geometries)])


def map50_gate(
    predict: Callable[[np.ndarray], Any],
    model_bytes: bytes,
    layout: DetectionLayout,
    spec: Any,
    data: str,
    max_drop_points: float,
    labels: list[str] | None = None,
    resamples: int = 500,
    seed: int = SEED,
) -> Map50Gate:
    """``--eval`` detection data (COCO JSON or YOLO folder): mAP50 of the float and the int8 model on its images,
    both scored by pycocotools under COCO's protocol (conf 0.001, 100 per image), and the drop with a paired
    bootstrap interval over images, decided against ``max_drop_points`` by :func:`edgekit.results.metrics.at_most`."""
    from edgekit.detection.data import check_classes, read_detection_set
    from edgekit.devices import evaluate_detector as detection_eval

    ds = read_detection_set(data, flag="--eval")
    check_classes(ds, layout.num_classes, "--eval")  # before any image runs
    detection_eval.pycocotools_api()
    ids = [im["id"] for im in ds.coco["images"]]
    geometries, x = _gate_inputs([ds.paths[i] for i in ids], layout, spec)
    conf, max_det = detection_eval.STANDARD_CONF, detection_eval.STANDARD_MAX_DET
    per_f, per_q = _detections_of_both(predict, model_bytes, layout, x, ids, geometries)
    notes: list[str] = list(ds.notes)
    names = dict(enumerate(labels)) if labels else {}
    category_of = detection_eval.category_map(ds, names, layout.num_classes, notes)
    ev_f = detection_eval.run_cocoeval(ds.coco, detection_eval.coco_detections(ds, per_f, category_of))
    ev_q = detection_eval.run_cocoeval(ds.coco, detection_eval.coco_detections(ds, per_q, category_of))
    (f50, f), (q50, q) = [(max(float(e.stats[1]), 0.0), max(float(e.stats[0]), 0.0)) for e in (ev_f, ev_q)]
    (lo, hi), (mlo, mhi) = detection_eval.paired_bootstrap(ev_q, ev_f, resamples, seed)  # int8 - float
    decision = metrics.drop_within(q50 - f50, (lo, hi), max_drop_points, len(ids))
    on_map = metrics.drop_within(q - f, (mlo, mhi), max_drop_points, len(ids))  # mAP50-95: the same limit
    return Map50Gate(
        str(data),
        len(ids),
        len(ds.coco["annotations"]),
        f50,
        q50,
        f50 - q50,
        (-hi, -lo),
        max_drop_points,
        Decision(decision.verdict),
        resamples,
        seed,
        f"{detection_eval.SCORER}, conf {conf:g}, {max_det} per image",
        tuple(str(n) for n in notes),
        f,
        q,
        f - q,
        (-mhi, -mlo),
        Decision(on_map.verdict),
    )


def apply_map50_gate(v: DetectionVerification, gate: Map50Gate, strict: bool = False) -> DetectionVerification:
    """The verification block with the mAP50 gate folded in: a drop beyond ``--max-accuracy-drop`` for sure
    fails it; an uncertain one is a warning (the estimate beyond the limit; ``strict``: a failure) or a note."""
    lo, hi = gate.drop_interval
    span = f"95% interval {100 * lo:+.1f} to {100 * hi:+.1f} points, paired bootstrap over {gate.images} images"
    v = dataclasses.replace(v, map50=gate)
    if gate.verdict == "failed":
        return dataclasses.replace(
            v,
            passed=False,
            failures=v.failures
            + (
                f"mAP50 drops from {100 * gate.float_map50:.1f} (float) to {100 * gate.int8_map50:.1f} (int8) on "
                f"--eval ({span}), more than --max-accuracy-drop {gate.max_drop_points:g}",
            ),
        )
    # map50_gate sets the mAP50-95 fields together with map_verdict; a gate without them says nothing of mAP50-95
    if (
        gate.map_verdict == "failed"
        and gate.map_drop_interval is not None
        and gate.float_map is not None
        and gate.int8_map is not None
    ):  # boxes found but drawn loosely: said, not refused (the gate is mAP50's)
        mlo, mhi = gate.map_drop_interval
        v = dataclasses.replace(
            v,
            warnings=v.warnings
            + (
                f"mAP50-95 drops from {100 * gate.float_map:.1f} (float) to {100 * gate.int8_map:.1f} (int8) on --eval "
                f"(95% interval {100 * mlo:+.1f} to {100 * mhi:+.1f} points, paired bootstrap over {gate.images} "
                f"images), more than {gate.max_drop_points:g} beyond doubt: int8 finds the boxes but draws them "
                "loosely; quantize gates on mAP50, `edgekit evaluate --against FLOAT.tflite --max-drop` on both",
            ),
        )
    elif gate.map_verdict == "uncertain" and gate.map_drop is not None and 100 * gate.map_drop > gate.max_drop_points:
        v = dataclasses.replace(
            v,
            notes=v.notes
            + (
                f"mAP50-95 drops {100 * gate.map_drop:.1f} points on --eval, beyond {gate.max_drop_points:g}, but "
                f"{gate.images} images cannot tell for sure; more labelled images would settle it",
            ),
        )
    if gate.verdict == "uncertain":
        settle = metrics.at_most(gate.drop, gate.drop_interval, gate.max_drop_points / 100, gate.images)
        line = (
            f"cannot tell yet whether the mAP50 drop ({100 * gate.drop:+.1f} points, {span}) is "
            f"within --max-accuracy-drop {gate.max_drop_points:g}; "
            + metrics.settle_hint(settle, "labelled images", "--eval")
        )
        if 100 * gate.drop > gate.max_drop_points and strict:
            return dataclasses.replace(v, passed=False, failures=v.failures + (line + "; " + metrics.STRICT_FAILS,))
        if 100 * gate.drop > gate.max_drop_points:
            return dataclasses.replace(v, warnings=v.warnings + (line,))
        return dataclasses.replace(v, notes=v.notes + (line,))
    return v
