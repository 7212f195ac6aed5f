"""``edgekit evaluate`` for detectors: COCO mAP computed by pycocotools, and the loss against another model.

The detector runs over every image of a COCO or YOLO set (:mod:`edgekit.detection.data`) with the
evaluation protocol (``conf`` 0.001, at most 100 detections per image: COCO's standard; the NMS IoU
is printed too), its boxes go to pycocotools' ``COCOeval`` in COCO's results format, and its numbers
are reported as they come: mAP@[.5:.95], mAP50, mAP75, small/medium/large and per-class AP.

With ``against`` models (a float .tflite, the int8 one, the compiled one...) the same images go
through each, and the difference in mAP50 and mAP of the main model against each is given with a
95% interval from a paired bootstrap over images (seeded): the per-image matches pycocotools made
are re-accumulated for each resample exactly as ``COCOeval.accumulate`` does (checked against it
in the tests), so each resample costs no new matching.

pycocotools is the ``detect`` extra (``pip install '.[detect]'`` in a checkout); without it this exits 4 with
that line. The runtime half (``edgekit detect``) does not need it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from edgekit.detection.data import DetectionSet
from edgekit.detection.map import (  # noqa: F401
    BOOTSTRAP,
    BOOTSTRAP_WORK,
    DEFAULT_EVAL_IOU,
    MIN_BOOTSTRAP,
    SCORER,
    SEED,
    STANDARD_CONF,
    STANDARD_MAX_DET,
    MapResult,
    accumulate_images,
    coco_detections,
    map_difference,
    map_result,
    paired_bootstrap,
    pycocotools_api,
    run_cocoeval,
)
from edgekit.errors import Caution, InputError
from edgekit.report import SILENT, Reporter
from edgekit.results.evaluate import CutOffer, DetectionEvaluateResult, DetectionProtocol, DetectorScore


def cut_head(model: str) -> tuple[str, Any] | None:
    """(the .tflite ``edgekit cut`` would cut, the YOLO head it would cut off) for ``model``, or None: not a .tflite
    file, cut already, no head, one whose decode reads other tensors (Segment, Pose), or compiled without its CPU
    twin beside it (``x_edgetpu.tflite``: the cut takes ``x.tflite``, then compile the cut model). Reads the file and
    walks its graph: ~20 ms on the 8.4 exports, against seconds for their evaluation."""
    from edgekit.errors import EdgekitError
    from edgekit.tflite import model as tflite_model
    from edgekit.tflite.model_record import cpu_model_path
    from edgekit.tflite.yolo_head import find_yolo_head

    if not (os.path.isfile(model) and model.lower().endswith(".tflite")):
        return None
    try:
        info = tflite_model.load(model)
        if info.is_compiled:
            twin = str(cpu_model_path(model))
            return cut_head(twin) if twin != model else None
        head = find_yolo_head(info)
    except EdgekitError:
        return None
    return (model, head) if head is not None and not head.foreign else None


def offer_cut(
    model: str,
    score: DetectorScore,
    ev: Any,
    dataset: DetectionSet,
    run_one: Any,
    resamples: int,
    seed: int,
    try_cut: bool,
    report: Reporter,
) -> CutOffer | None:
    """evaluate's offer of ``edgekit cut`` for ``model`` where it applies; with ``try_cut``, the model cut in memory,
    written to a temporary file for the interpreter, scored on the same data by ``run_one`` (the model's own
    settings) and compared with it, image by image."""
    import tempfile

    from edgekit.detection.cut import cut_decode

    found = cut_head(model)
    if found is None:
        return None
    given, (model, head) = model, found  # a compiled model's CPU twin, which the cut takes

    def quoted(path: str) -> str:
        return path if " " not in path else repr(path)

    command = "edgekit cut " + quoted(model)
    if model != given:
        from edgekit.detection.cut import default_output

        command += " && edgekit compile " + quoted(str(default_output(model)))
    offer = CutOffer(score.model, command, len(head.decode_ops))
    if not try_cut:
        return offer
    from edgekit.errors import EdgekitError
    from edgekit.tflite import model as tflite_model
    from edgekit.tflite import model_record

    record = model_record.find_record(model, tflite_model.load(model).metadata)
    try:
        with open(model, "rb") as f:
            data, _ = cut_decode(f.read(), json.loads(record[0].to_json()) if record else None)
    except EdgekitError as exc:  # what cut itself would refuse: no offer
        report.note(f"--try-cut: {os.path.basename(model)} cannot be cut: {exc}")
        return None
    with tempfile.TemporaryDirectory(prefix="edgekit-try-cut-") as tmp:
        path = os.path.join(tmp, os.path.basename(model)[: -len(".tflite")] + "_cut.tflite")
        with open(path, "wb") as out:
            out.write(data)
        report.status("--try-cut: scoring " + os.path.basename(model) + " cut before its decode")
        cut_score, cut_ev = run_one(path)
    cut_score = replace(cut_score, model=f"{score.model} (cut)")
    change = map_difference(
        cut_score, score, paired_bootstrap(cut_ev, ev, resamples, seed), resamples, seed, None, len(dataset)
    )
    return CutOffer(score.model, command, len(head.decode_ops), cut_score, change)


# ------------------------------------------------------------------------------------ the command
def category_map(dataset: DetectionSet, labels: dict[int, str], num_classes: int, notes: list[str]) -> dict[int, int]:
    """Model class index → dataset category id: by name when every category's name is among the model's labels
    (and no two categories share a name), else YOLO's class k = category k, or COCO's class k = the k-th category
    by id, said in ``notes``."""
    cats = dataset.categories
    by_name = {v: k for k, v in labels.items()}
    if labels and all(c["name"] in by_name for c in cats) and len({c["name"] for c in cats}) == len(cats):
        return {by_name[c["name"]]: c["id"] for c in cats}
    if dataset.kind == "yolo":  # a YOLO label's class is the model's class index
        if labels:
            notes.append("the model's labels are not the data's class names: class k is scored as the data's class k")
        return {c["id"]: c["id"] for c in cats}
    if num_classes and len(cats) != num_classes:
        notes.append(
            Caution(
                f"the data has {len(cats)} categories but the model {num_classes} classes: class k is scored as the k-th "
                "category by id"
            )
        )
    elif labels:
        notes.append(
            "the model's labels are not the data's category names: class k is scored as the k-th category by id"
        )
    return {k: c["id"] for k, c in enumerate(cats)}


def _evaluate_one(
    model: str,
    dataset: DetectionSet,
    conf: float,
    iou: float,
    max_det: int,
    layout: str | None,
    device: str,
    mean: Any,
    std: Any,
    num_threads: int | None,
    labels: str | None,
    report: Reporter,
) -> tuple[DetectorScore, Any]:
    from edgekit.detection.data import check_classes
    from edgekit.devices.detect import open_detector

    detector = open_detector(
        model, device=device, labels=labels, layout=layout, mean=mean, std=std, num_threads=num_threads
    )
    notes: list[str] = []
    with detector.opened:
        for n in detector.notes:
            report.tell(n)
        check_classes(dataset, detector.layout.num_classes)  # before any image runs
        category_of = category_map(dataset, detector.labels, detector.layout.num_classes, notes)
        ids = [im["id"] for im in dataset.coco["images"]]
        paths = [dataset.paths[i] for i in ids]
        with report.progress(len(paths), "evaluating " + os.path.basename(str(model))) as bar:
            # every class of a box above conf, as Ultralytics' val scores (its predict and edgekit's detect keep the
            # best one): measured on tests/fixtures/exports, this is what makes evaluate agree with yolo val
            run = detector.run(paths, conf, iou, max_det, None, lambda _p: bar.update(1), multi_label=True)
    for n in notes + list(run.notes):
        report.tell(n)
    by_path = {r.image: r for r in run.results}
    per_image = {i: by_path[p].objects for i, p in zip(ids, paths) if p in by_path}
    if run.errors:
        raise InputError(
            f"{len(run.errors)} image(s) of the data could not be read, e.g. {run.errors[0].error}",
            "fix or remove them: mAP over a subset would not be the set's",
        )
    dets = coco_detections(dataset, per_image, category_of)
    ev = run_cocoeval(dataset.coco, dets, max_det)
    names = {c["id"]: c["name"] for c in dataset.categories}
    inv = [r.invoke_ms for r in run.results] or [0.0]
    post = [r.postprocess_ms for r in run.results] or [0.0]
    m = map_result(ev, names)
    return DetectorScore(
        run.model,
        run.device,
        run.backend,
        run.layout.describe(),
        m.map,
        m.map50,
        m.map75,
        m.small,
        m.medium,
        m.large,
        m.per_class,
        len(dets),
        round(float(np.median(inv)), 3),
        round(float(np.median(post)), 3),
        (),
    ), ev


def evaluate_detector(
    model: str | os.PathLike,
    data: str | os.PathLike,
    *,
    images: str | os.PathLike | None = None,
    against: Sequence[str] = (),
    conf: float = STANDARD_CONF,
    iou: float = DEFAULT_EVAL_IOU,
    max_det: int = STANDARD_MAX_DET,
    layout: str | None = None,
    device: str = "auto",
    mean: Any = None,
    std: Any = None,
    num_threads: int | None = None,
    labels: str | None = None,
    resamples: int = BOOTSTRAP,
    seed: int = SEED,
    max_drop: float | None = None,
    plots: str | None = None,
    try_cut: bool = False,
    report: Reporter = SILENT,
) -> DetectionEvaluateResult:
    """Score ``model`` (and each of ``against``) on a COCO or YOLO set; the differences with bootstrap intervals,
    each drop (mAP50 and mAP50-95) decided against ``max_drop`` points where given; ``plots``: the folder
    :mod:`edgekit.devices.plots` writes the precision-recall curves and confusion matrices in. Each scored model whose YOLO
    decode runs inside it is offered ``edgekit cut``; ``try_cut``: cut it in memory and score it too."""
    from edgekit.detection.data import read_detection_set
    from edgekit.devices.detect import check_thresholds

    check_thresholds(conf, iou, max_det)
    pycocotools_api()
    if plots is not None:  # before any model runs: no matplotlib, or a folder that cannot be written, fail now
        from edgekit.devices import plots as plots_mod
        from edgekit.fileio import require_output_folder

        plots_mod.require()
        require_output_folder(os.path.join(plots, "pr_curve.png"), report, "--plots")
    dataset = read_detection_set(data, images)
    warnings: list[str] = list(dataset.notes)  # e.g. the one split scored of a root holding several
    if conf > STANDARD_CONF or max_det != STANDARD_MAX_DET:
        warnings.append(
            f"not COCO's standard protocol (conf 0.001, max 100 detections per image): conf {conf:g}, max {max_det}; "
            "mAP is not comparable with published numbers"
        )
    if len(dataset) < 50:
        warnings.append(f"only {len(dataset)} images: mAP moves by several points between such small sets")
    warnings += [str(n) for n in dataset.notes if isinstance(n, Caution)]  # two categories of one name...
    for w in warnings:
        report.warn(w)
    for n in dataset.notes:
        if not isinstance(n, Caution):
            report.note(n)  # boxes clipped or skipped, counted
    results, evs = [], []

    def run_one(m: str) -> tuple[DetectorScore, Any]:
        return _evaluate_one(m, dataset, conf, iou, max_det, layout, device, mean, std, num_threads, labels, report)

    for m in [str(model)] + [str(a) for a in against]:
        r, ev = run_one(m)
        results.append(r)
        evs.append(ev)
    diffs = []
    work = len(dataset) * max(len(dataset.categories), 1)
    if work > BOOTSTRAP_WORK and resamples > MIN_BOOTSTRAP:  # COCO val: 5000 images x 80 classes
        resamples = max(MIN_BOOTSTRAP, int(resamples * BOOTSTRAP_WORK / work))
        report.note(
            f"{resamples} bootstrap resamples (fewer on a set this large: the interval's ends move by a "
            "few tenths of a point between seeds)"
        )
    for r, ev in zip(results[1:], evs[1:]):
        diffs.append(
            map_difference(
                results[0], r, paired_bootstrap(evs[0], ev, resamples, seed), resamples, seed, max_drop, len(dataset)
            )
        )
    protocol = DetectionProtocol(conf, iou, max_det, conf <= STANDARD_CONF and max_det == STANDARD_MAX_DET, SCORER)
    written = (
        ()
        if plots is None
        else tuple(plots_mod.write_detection_plots(plots, dataset.coco, [(r.model, ev) for r, ev in zip(results, evs)]))
    )
    offers = [
        offer_cut(m, r, ev, dataset, run_one, resamples, seed, try_cut, report)
        for m, r, ev in zip([str(model)] + [str(a) for a in against], results, evs)
    ]
    return DetectionEvaluateResult(
        "detection",
        str(data),
        dataset.kind,
        len(dataset),
        len(dataset.coco["annotations"]),
        protocol,
        tuple(results),
        tuple(diffs),
        tuple(warnings),
        tuple(e for m in results for e in m.errors),
        written,
        tuple(o for o in offers if o),
    )
