"""COCO mAP computed by pycocotools, and the paired bootstrap of a difference in mAP between two detectors.

Boxes go to pycocotools' ``COCOeval`` in COCO's results format, and its numbers are reported as they come:
mAP@[.5:.95], mAP50, mAP75, small/medium/large and per-class AP. The difference of two models on the same images
gets a 95% interval from a paired bootstrap over images (seeded): the per-image matches pycocotools made are
re-accumulated for each resample exactly as ``COCOeval.accumulate`` does (checked against it in the tests), so
each resample costs no new matching. :mod:`edgekit.devices.evaluate_detector` runs the detectors and calls these.

pycocotools is the ``detect`` extra; without it this exits 4 with that line.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgekit.detection.data import CocoDataset, CocoDetection, DetectionSet
from edgekit.errors import MissingDependencyError
from edgekit.results.evaluate import ClassScore, DetectorScore, MapDifference

STANDARD_CONF = 0.001
STANDARD_MAX_DET = 100
DEFAULT_EVAL_IOU = 0.7  # Ultralytics' val default (YOLOv5's was 0.6): NMS IoU is not part of COCO's protocol
BOOTSTRAP = 500
MIN_BOOTSTRAP = 100
BOOTSTRAP_WORK = 50000  # images x categories re-accumulated per resample before resamples are cut down
SEED = 0
SCORER = "pycocotools COCOeval (bbox)"


def pycocotools_api() -> tuple[Any, Any]:
    try:
        from pycocotools.coco import COCO
        from pycocotools.cocoeval import COCOeval
    except ImportError:
        raise MissingDependencyError(
            "evaluating a detector needs pycocotools",
            "pip install pycocotools, or pip install '.[detect]' in an edgekit checkout",
        ) from None
    return COCO, COCOeval


# ------------------------------------------------------------------------------------ scoring
def coco_detections(
    dataset: DetectionSet, per_image: Mapping[int, Sequence[Any]], category_of: dict[int, int]
) -> list[CocoDetection]:
    """Objects (edgekit.results.detect.Object, image pixels xyxy) by image id → COCO results (x, y, w, h).
    Classes the dataset has no category for are dropped (``category_of`` maps model class → category id)."""
    out: list[CocoDetection] = []
    for iid, objects in per_image.items():
        for o in objects:
            cat = category_of.get(o.id)
            if cat is None:
                continue
            b = o.bbox
            out.append(
                {
                    "image_id": iid,
                    "category_id": cat,
                    "score": float(o.score),
                    "bbox": [float(b.xmin), float(b.ymin), float(b.xmax - b.xmin), float(b.ymax - b.ymin)],
                }
            )
    return out


def run_cocoeval(gt: CocoDataset, detections: list[CocoDetection], max_det: int = STANDARD_MAX_DET) -> Any:
    """pycocotools' COCOeval (bbox) evaluated, accumulated and summarized (its printing swallowed).

    No detections at all is scored too (pycocotools' ``loadRes`` cannot read an empty list: the empty result
    set is built directly)."""
    COCO, COCOeval = pycocotools_api()
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO()
        coco_gt.dataset = {
            "images": gt["images"],
            "annotations": gt["annotations"],
            "categories": gt["categories"],
            "info": gt.get("info", {}),
            "licenses": [],
        }
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


def _stat(v: float) -> float | None:
    return None if v < 0 else float(v)


@dataclass(frozen=True)
class MapResult:
    """pycocotools' summary (``stats``; None where COCO prints -1: nothing of that kind to score) and per class."""

    map: float | None
    map50: float | None
    map75: float | None
    small: float | None
    medium: float | None
    large: float | None
    per_class: tuple[ClassScore, ...] = ()


def map_result(ev: Any, names: dict[int, str]) -> MapResult:
    s = ev.stats
    precision = ev.eval["precision"]  # [T, R, K, A, M]
    per_class = []
    for k, cat in enumerate(ev.params.catIds):
        p = precision[:, :, k, 0, -1]
        p50 = precision[0, :, k, 0, -1]
        objects = len(ev.cocoGt.getAnnIds(catIds=[cat], iscrowd=False))
        per_class.append(
            ClassScore(
                int(cat),
                names.get(cat, str(cat)),
                float(p[p > -1].mean()) if (p > -1).any() else None,
                float(p50[p50 > -1].mean()) if (p50 > -1).any() else None,
                objects,
            )
        )
    return MapResult(_stat(s[0]), _stat(s[1]), _stat(s[2]), _stat(s[3]), _stat(s[4]), _stat(s[5]), tuple(per_class))


def accumulate_images(ev: Any, image_positions: np.ndarray) -> tuple[float, float]:
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
            pr = np.maximum.accumulate(pr[::-1])[::-1] if len(pr) else pr  # the envelope, as its loop makes it
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


def paired_bootstrap(
    ev_a: Any, ev_b: Any, resamples: int = BOOTSTRAP, seed: int = SEED
) -> tuple[tuple[float, float], tuple[float, float]]:
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
    return (
        (float(np.percentile(d50, 2.5)), float(np.percentile(d50, 97.5))),
        (float(np.percentile(d, 2.5)), float(np.percentile(d, 97.5))),
    )


def map_difference(
    a: DetectorScore,
    b: DetectorScore,
    intervals: tuple[tuple[float, float], tuple[float, float]],
    resamples: int,
    seed: int,
    max_drop: float | None,
    images: int,
) -> MapDifference:
    """``a`` minus ``b`` in mAP50 and mAP50-95 with their paired intervals; with ``max_drop`` (points) each drop
    decided by :func:`edgekit.results.metrics.drop_within`, as quantize's mAP50 gate decides its own."""
    from edgekit.results import metrics

    (i50, imap) = intervals
    c50, c = (a.map50 or 0.0) - (b.map50 or 0.0), (a.map or 0.0) - (b.map or 0.0)
    if max_drop is None:
        return MapDifference(a.model, b.model, c50, i50, c, imap, resamples, seed)
    return MapDifference(
        a.model,
        b.model,
        c50,
        i50,
        c,
        imap,
        resamples,
        seed,
        max_drop,
        metrics.drop_within(c50, i50, max_drop, images),
        metrics.drop_within(c, imap, max_drop, images),
    )


# ------------------------------------------------------------------------------------ the offer of the cut
