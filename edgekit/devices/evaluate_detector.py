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

import contextlib
import io
import json
import os
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from edgekit.detection.data import CocoDataset, CocoDetection, DetectionSet
from edgekit.errors import Caution, InputError, MissingDependencyError
from edgekit.report import SILENT, Reporter
from edgekit.results.evaluate import (ClassScore, CutOffer, DetectionEvaluateResult, DetectionProtocol,
                                      DetectorScore, MapDifference)

STANDARD_CONF = 0.001
STANDARD_MAX_DET = 100
DEFAULT_EVAL_IOU = 0.7     # Ultralytics' val default (YOLOv5's was 0.6): NMS IoU is not part of COCO's protocol
BOOTSTRAP = 500
MIN_BOOTSTRAP = 100
BOOTSTRAP_WORK = 50000     # images x categories re-accumulated per resample before resamples are cut down
SEED = 0
SCORER = "pycocotools COCOeval (bbox)"


def _pycocotools() -> Tuple[Any, Any]:
    try:
        from pycocotools.coco import COCO
        from pycocotools.cocoeval import COCOeval
    except ImportError:
        raise MissingDependencyError("evaluating a detector needs pycocotools",
                                     "pip install pycocotools, or pip install '.[detect]' in an edgekit checkout") from None
    return COCO, COCOeval


# ------------------------------------------------------------------------------------ scoring
def coco_detections(dataset: DetectionSet, per_image: Dict[int, Sequence[Any]],
                    category_of: Dict[int, int]) -> List[CocoDetection]:
    """Objects (edgekit.board.decode.Object, image pixels xyxy) by image id → COCO results (x, y, w, h).
    Classes the dataset has no category for are dropped (``category_of`` maps model class → category id)."""
    out: List[CocoDetection] = []
    for iid, objects in per_image.items():
        for o in objects:
            cat = category_of.get(o.id)
            if cat is None:
                continue
            b = o.bbox
            out.append({"image_id": iid, "category_id": cat, "score": float(o.score),
                        "bbox": [float(b.xmin), float(b.ymin), float(b.xmax - b.xmin), float(b.ymax - b.ymin)]})
    return out


def run_cocoeval(gt: CocoDataset, detections: List[CocoDetection], max_det: int = STANDARD_MAX_DET) -> Any:
    """pycocotools' COCOeval (bbox) evaluated, accumulated and summarized (its printing swallowed).

    No detections at all is scored too (pycocotools' ``loadRes`` cannot read an empty list: the empty result
    set is built directly)."""
    COCO, COCOeval = _pycocotools()
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO()
        coco_gt.dataset = {"images": gt["images"], "annotations": gt["annotations"], "categories": gt["categories"],
                           "info": gt.get("info", {}), "licenses": []}
        coco_gt.createIndex()
        if detections:
            coco_dt = coco_gt.loadRes([dict(d) for d in detections])
        else:
            coco_dt = COCO()
            coco_dt.dataset = {"images": gt["images"], "categories": gt["categories"], "annotations": []}
            coco_dt.createIndex()
        ev = COCOeval(coco_gt, coco_dt, "bbox")
        ev.params.maxDets = [1, 10, max(max_det, 1)] if max_det != 100 else ev.params.maxDets
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return ev


def _stat(v: float) -> Optional[float]:
    return None if v < 0 else float(v)


@dataclass(frozen=True)
class MapResult:
    """pycocotools' summary (``stats``; None where COCO prints -1: nothing of that kind to score) and per class."""

    map: Optional[float]
    map50: Optional[float]
    map75: Optional[float]
    small: Optional[float]
    medium: Optional[float]
    large: Optional[float]
    per_class: Tuple[ClassScore, ...] = ()


def map_result(ev: Any, names: Dict[int, str]) -> MapResult:
    s = ev.stats
    precision = ev.eval["precision"]          # [T, R, K, A, M]
    per_class = []
    for k, cat in enumerate(ev.params.catIds):
        p = precision[:, :, k, 0, -1]
        p50 = precision[0, :, k, 0, -1]
        objects = len(ev.cocoGt.getAnnIds(catIds=[cat], iscrowd=False))
        per_class.append(ClassScore(int(cat), names.get(cat, str(cat)),
                                    float(p[p > -1].mean()) if (p > -1).any() else None,
                                    float(p50[p50 > -1].mean()) if (p50 > -1).any() else None, objects))
    return MapResult(_stat(s[0]), _stat(s[1]), _stat(s[2]), _stat(s[3]), _stat(s[4]), _stat(s[5]), tuple(per_class))


def accumulate_images(ev: Any, image_positions: np.ndarray) -> Tuple[float, float]:
    """(mAP@[.5:.95], mAP50) over the images at ``image_positions`` (indices into ``ev.params.imgIds``, repeats
    allowed), re-accumulated from ``ev.evalImgs`` exactly as ``COCOeval.accumulate`` does (area all, last maxDet)."""
    p = ev.params
    K0, A0, I0 = len(p.catIds), len(p.areaRng), len(p.imgIds)
    max_det = p.maxDets[-1]
    rec_thrs = p.recThrs
    T, R = len(p.iouThrs), len(rec_thrs)
    precision = -np.ones((T, R, K0))
    for k in range(K0):
        entries = [ev.evalImgs[k * A0 * I0 + i] for i in image_positions]
        entries = [e for e in entries if e is not None]
        if not entries:
            continue
        scores = np.concatenate([e["dtScores"][0:max_det] for e in entries])
        inds = np.argsort(-scores, kind="mergesort")
        dtm = np.concatenate([e["dtMatches"][:, 0:max_det] for e in entries], axis=1)[:, inds]
        dt_ig = np.concatenate([e["dtIgnore"][:, 0:max_det] for e in entries], axis=1)[:, inds]
        gt_ig = np.concatenate([e["gtIgnore"] for e in entries])
        npig = np.count_nonzero(gt_ig == 0)
        if npig == 0:
            continue
        tps = np.logical_and(dtm, np.logical_not(dt_ig))
        fps = np.logical_and(np.logical_not(dtm), np.logical_not(dt_ig))
        tp_sum = np.cumsum(tps, axis=1).astype(float)
        fp_sum = np.cumsum(fps, axis=1).astype(float)
        for t in range(T):
            tp, fp = tp_sum[t], fp_sum[t]
            rc = tp / npig
            pr = tp / (fp + tp + np.spacing(1))
            pr = np.maximum.accumulate(pr[::-1])[::-1] if len(pr) else pr   # the envelope, as its loop makes it
            q = np.zeros(R)
            idx = np.searchsorted(rc, rec_thrs, side="left")
            ok = idx < len(pr)
            q[ok] = pr[idx[ok]]
            precision[t, :, k] = q
    valid = precision > -1
    m = float(precision[valid].mean()) if valid.any() else -1.0
    p50 = precision[0]
    m50 = float(p50[p50 > -1].mean()) if (p50 > -1).any() else -1.0
    return m, m50


def paired_bootstrap(ev_a: Any, ev_b: Any, resamples: int = BOOTSTRAP, seed: int = SEED
                     ) -> Tuple[Tuple[float, float], Tuple[float, float]]:
    """95% percentile intervals of (mAP50 a - b, mAP a - b) over images resampled with replacement, the same
    resample for both models (paired)."""
    n = len(ev_a.params.imgIds)
    rng = np.random.RandomState(seed)
    d50, d = [], []
    for _ in range(resamples):
        pick = rng.randint(0, n, n)
        a, a50 = accumulate_images(ev_a, pick)
        b, b50 = accumulate_images(ev_b, pick)
        if a < 0 or b < 0:
            continue
        d50.append(a50 - b50)
        d.append(a - b)
    if not d:
        return (0.0, 0.0), (0.0, 0.0)
    return ((float(np.percentile(d50, 2.5)), float(np.percentile(d50, 97.5))),
            (float(np.percentile(d, 2.5)), float(np.percentile(d, 97.5))))


def map_difference(a: DetectorScore, b: DetectorScore, intervals: Tuple[Tuple[float, float], Tuple[float, float]],
                   resamples: int, seed: int, max_drop: Optional[float], images: int) -> MapDifference:
    """``a`` minus ``b`` in mAP50 and mAP50-95 with their paired intervals; with ``max_drop`` (points) each drop
    decided by :func:`edgekit.results.metrics.drop_within`, as quantize's mAP50 gate decides its own."""
    from edgekit.results import metrics

    (i50, imap) = intervals
    c50, c = (a.map50 or 0.0) - (b.map50 or 0.0), (a.map or 0.0) - (b.map or 0.0)
    if max_drop is None:
        return MapDifference(a.model, b.model, c50, i50, c, imap, resamples, seed)
    return MapDifference(a.model, b.model, c50, i50, c, imap, resamples, seed, max_drop,
                         metrics.drop_within(c50, i50, max_drop, images), metrics.drop_within(c, imap, max_drop, images))


# ------------------------------------------------------------------------------------ the offer of the cut
def cut_head(model: str) -> Optional[Tuple[str, Any]]:
    """(the .tflite ``edgekit cut`` would cut, the YOLO head it would cut off) for ``model``, or None: not a .tflite
    file, cut already, no head, one whose decode reads other tensors (Segment, Pose), or compiled without its CPU
    twin beside it (``x_edgetpu.tflite``: the cut takes ``x.tflite``, then compile the cut model). Reads the file and
    walks its graph: ~20 ms on the 8.4 exports, against seconds for their evaluation."""
    from edgekit.tflite import model as tflite_model
    from edgekit.tflite.yolo_head import find_yolo_head
    from edgekit.errors import EdgekitError
    from edgekit.tflite.model_record import cpu_model_path

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


def offer_cut(model: str, score: DetectorScore, ev: Any, dataset: DetectionSet, run_one: Any, resamples: int,
              seed: int, try_cut: bool, report: Reporter) -> Optional[CutOffer]:
    """evaluate's offer of ``edgekit cut`` for ``model`` where it applies; with ``try_cut``, the model cut in memory,
    written to a temporary file for the interpreter, scored on the same data by ``run_one`` (the model's own
    settings) and compared with it, image by image."""
    import tempfile

    from edgekit.detection.cut import cut_decode

    found = cut_head(model)
    if found is None:
        return None
    given, (model, head) = model, found   # a compiled model's CPU twin, which the cut takes

    def quoted(path: str) -> str:
        return path if " " not in path else repr(path)

    command = "edgekit cut " + quoted(model)
    if model != given:
        from edgekit.detection.cut import default_output

        command += " && edgekit compile " + quoted(str(default_output(model)))
    offer = CutOffer(score.model, command, len(head.decode_ops))
    if not try_cut:
        return offer
    from edgekit.tflite import model_record
    from edgekit.tflite import model as tflite_model
    from edgekit.errors import EdgekitError

    record = model_record.find_record(model, tflite_model.load(model).metadata)
    try:
        with open(model, "rb") as f:
            data, _ = cut_decode(f.read(), json.loads(record[0].to_json()) if record else None)
    except EdgekitError as exc:   # what cut itself would refuse: no offer
        report.note(f"--try-cut: {os.path.basename(model)} cannot be cut: {exc}")
        return None
    with tempfile.TemporaryDirectory(prefix="edgekit-try-cut-") as tmp:
        path = os.path.join(tmp, os.path.basename(model)[:-len(".tflite")] + "_cut.tflite")
        with open(path, "wb") as f:
            f.write(data)
        report.status("--try-cut: scoring " + os.path.basename(model) + " cut before its decode")
        cut_score, cut_ev = run_one(path)
    cut_score = replace(cut_score, model="{} (cut)".format(score.model))
    change = map_difference(cut_score, score, paired_bootstrap(cut_ev, ev, resamples, seed), resamples, seed, None,
                            len(dataset))
    return CutOffer(score.model, command, len(head.decode_ops), cut_score, change)


# ------------------------------------------------------------------------------------ the command
def category_map(dataset: DetectionSet, labels: Dict[int, str], num_classes: int,
                 notes: List[str]) -> Dict[int, int]:
    """Model class index → dataset category id: by name when every category's name is among the model's labels
    (and no two categories share a name), else YOLO's class k = category k, or COCO's class k = the k-th category
    by id, said in ``notes``."""
    cats = dataset.categories
    by_name = {v: k for k, v in labels.items()}
    if labels and all(c["name"] in by_name for c in cats) and len({c["name"] for c in cats}) == len(cats):
        return {by_name[c["name"]]: c["id"] for c in cats}
    if dataset.kind == "yolo":   # a YOLO label's class is the model's class index
        if labels:
            notes.append("the model's labels are not the data's class names: class k is scored as the data's class k")
        return {c["id"]: c["id"] for c in cats}
    if num_classes and len(cats) != num_classes:
        notes.append(Caution("the data has {} categories but the model {} classes: class k is scored as the k-th "
                             "category by id".format(len(cats), num_classes)))
    elif labels:
        notes.append("the model's labels are not the data's category names: class k is scored as the k-th "
                     "category by id")
    return {k: c["id"] for k, c in enumerate(cats)}


def _evaluate_one(model: str, dataset: DetectionSet, conf: float, iou: float, max_det: int, layout: Optional[str],
                  device: str, mean: Any, std: Any, num_threads: Optional[int], labels: Optional[str],
                  report: Reporter) -> Tuple[DetectorScore, Any]:
    from edgekit.detection.data import check_classes
    from edgekit.devices.detect import open_detector

    detector = open_detector(model, device=device, labels=labels, layout=layout, mean=mean, std=std,
                             num_threads=num_threads)
    notes: List[str] = []
    with detector.opened:
        for n in detector.notes:
            report.tell(n)
        check_classes(dataset, detector.layout.num_classes)   # before any image runs
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
        raise InputError("{} image(s) of the data could not be read, e.g. {}".format(len(run.errors),
                                                                                    run.errors[0]["error"]),
                         "fix or remove them: mAP over a subset would not be the set's")
    dets = coco_detections(dataset, per_image, category_of)
    ev = run_cocoeval(dataset.coco, dets, max_det)
    names = {c["id"]: c["name"] for c in dataset.categories}
    inv = [r.invoke_ms for r in run.results] or [0.0]
    post = [r.postprocess_ms for r in run.results] or [0.0]
    m = map_result(ev, names)
    return DetectorScore(run.model, run.device, run.backend, run.layout.describe(), m.map, m.map50, m.map75, m.small,
                         m.medium, m.large, m.per_class, len(dets), round(float(np.median(inv)), 3),
                         round(float(np.median(post)), 3), ()), ev


def evaluate_detector(model: str | os.PathLike, data: str | os.PathLike, *, images: str | os.PathLike | None = None,
                      against: Sequence[str] = (), conf: float = STANDARD_CONF, iou: float = DEFAULT_EVAL_IOU,
                      max_det: int = STANDARD_MAX_DET, layout: Optional[str] = None, device: str = "auto",
                      mean: Any = None, std: Any = None, num_threads: Optional[int] = None,
                      labels: Optional[str] = None, resamples: int = BOOTSTRAP, seed: int = SEED,
                      max_drop: Optional[float] = None, plots: Optional[str] = None, try_cut: bool = False,
                      report: Reporter = SILENT) -> DetectionEvaluateResult:
    """Score ``model`` (and each of ``against``) on a COCO or YOLO set; the differences with bootstrap intervals,
    each drop (mAP50 and mAP50-95) decided against ``max_drop`` points where given; ``plots``: the folder
    :mod:`edgekit.devices.plots` writes the precision-recall curves and confusion matrices in. Each scored model whose YOLO
    decode runs inside it is offered ``edgekit cut``; ``try_cut``: cut it in memory and score it too."""
    from edgekit.detection.data import read_detection_set
    from edgekit.devices.detect import check_thresholds

    check_thresholds(conf, iou, max_det)
    _pycocotools()
    if plots is not None:   # before any model runs: no matplotlib, or a folder that cannot be written, fail now
        from edgekit.devices import plots as plots_mod
        from edgekit.fileio import require_output_folder

        plots_mod.require()
        require_output_folder(os.path.join(plots, "pr_curve.png"), report, "--plots")
    dataset = read_detection_set(data, images)
    warnings: List[str] = list(dataset.notes)   # e.g. the one split scored of a root holding several
    if conf > STANDARD_CONF or max_det != STANDARD_MAX_DET:
        warnings.append("not COCO's standard protocol (conf 0.001, max 100 detections per image): conf {:g}, max {}; "
                        "mAP is not comparable with published numbers".format(conf, max_det))
    if len(dataset) < 50:
        warnings.append("only {} images: mAP moves by several points between such small sets".format(len(dataset)))
    warnings += [str(n) for n in dataset.notes if isinstance(n, Caution)]   # two categories of one name...
    for w in warnings:
        report.warn(w)
    for n in dataset.notes:
        if not isinstance(n, Caution):
            report.note(n)   # boxes clipped or skipped, counted
    results, evs = [], []

    def run_one(m: str) -> Tuple[DetectorScore, Any]:
        return _evaluate_one(m, dataset, conf, iou, max_det, layout, device, mean, std, num_threads, labels, report)

    for m in [str(model)] + [str(a) for a in against]:
        r, ev = run_one(m)
        results.append(r)
        evs.append(ev)
    diffs = []
    work = len(dataset) * max(len(dataset.categories), 1)
    if work > BOOTSTRAP_WORK and resamples > MIN_BOOTSTRAP:   # COCO val: 5000 images x 80 classes
        resamples = max(MIN_BOOTSTRAP, int(resamples * BOOTSTRAP_WORK / work))
        report.note(f"{resamples} bootstrap resamples (fewer on a set this large: the interval's ends move by a "
                    "few tenths of a point between seeds)")
    for r, ev in zip(results[1:], evs[1:]):
        diffs.append(map_difference(results[0], r, paired_bootstrap(evs[0], ev, resamples, seed), resamples, seed,
                                    max_drop, len(dataset)))
    protocol = DetectionProtocol(conf, iou, max_det, conf <= STANDARD_CONF and max_det == STANDARD_MAX_DET,
                                 SCORER)
    written = () if plots is None else tuple(plots_mod.write_detection_plots(
        plots, dataset.coco, [(r.model, ev) for r, ev in zip(results, evs)]))
    offers = [offer_cut(m, r, ev, dataset, run_one, resamples, seed, try_cut, report)
              for m, r, ev in zip([str(model)] + [str(a) for a in against], results, evs)]
    return DetectionEvaluateResult("detection", str(data), dataset.kind, len(dataset), len(dataset.coco["annotations"]),
                                   protocol, tuple(results), tuple(diffs), tuple(warnings),
                                   tuple(e for m in results for e in m.errors), written, tuple(o for o in offers if o))
