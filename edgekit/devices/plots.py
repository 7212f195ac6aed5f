"""``evaluate --plots DIR``: a detector's precision-recall curves and confusion matrix as PNG files (a
classifier's confusion matrix of top-1 predictions).

The curves are pycocotools' own: ``COCOeval.eval["precision"][T, R, K, A, M]`` (IoU thresholds, the 101
recall points, classes, area ranges, max detections) at IoU 0.5, every area, the last max-detections
setting, one line per class and their mean ("all classes": the mAP50 printed); nothing is recomputed.
The confusion matrix is Ultralytics' ``val`` one: detections at conf >= 0.25 matched to ground truth per
image at IoU > 0.45 (one to one, best IoU first), rows the predicted class, columns the true one, plus
the background (a missed object: background row; a false detection: background column).
With ``--against`` each model gets its panel, side by side (the float model beside the int8 one).

matplotlib is the ``plots`` extra (``pip install matplotlib, or '.[plots]' in an edgekit checkout``, or ``pip install matplotlib``); without
it the command exits 4 saying so, before any model runs (:func:`require`).
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.errors import MissingDependencyError

CONFUSION_CONF = 0.25  # Ultralytics' ConfusionMatrix defaults
CONFUSION_IOU = 0.45
INSTALL = "pip install matplotlib (or '.[plots]' in an edgekit checkout), or drop --plots"


def require() -> Any:
    """matplotlib's pyplot on the Agg backend (no display); MissingDependencyError (exit 4) without it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingDependencyError("evaluate --plots needs matplotlib", INSTALL) from None
    return plt


def pr_curves(ev: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(recall points (R,), precision per class (K, R) with NaN where a class has no ground truth, their mean (R,))
    from pycocotools' accumulated ``ev.eval["precision"]`` at IoU 0.5, area all, the last maxDets."""
    p = np.array(ev.eval["precision"][0, :, :, 0, -1], float).T  # (K, R)
    p[p < 0] = np.nan
    scored = ~np.all(np.isnan(p), axis=1)
    mean = np.nanmean(p[scored], axis=0) if scored.any() else np.full(p.shape[1], np.nan)
    return np.asarray(ev.params.recThrs, float), p, mean


def confusion(gt: Any, detections: Sequence[Any], categories: Sequence[int]) -> np.ndarray:
    """(K+1, K+1) counts: rows predicted class (last: background), columns true class (last: background)."""
    index = {c: i for i, c in enumerate(categories)}
    k = len(categories)
    m = np.zeros((k + 1, k + 1), np.int64)
    truth: dict[int, list[tuple[int, Any]]] = {im["id"]: [] for im in gt["images"]}
    for a in gt["annotations"]:
        if not a.get("iscrowd") and a["category_id"] in index:
            truth[a["image_id"]].append((index[a["category_id"]], a["bbox"]))
    found: dict[int, list[tuple[int, Any]]] = {i: [] for i in truth}
    for d in detections:
        if d["score"] >= CONFUSION_CONF and d["category_id"] in index and d["image_id"] in found:
            found[d["image_id"]].append((index[d["category_id"]], d["bbox"]))
    for iid, gts in truth.items():
        dts = found[iid]
        iou = _iou(
            np.array([b for _, b in dts], float).reshape(-1, 4), np.array([b for _, b in gts], float).reshape(-1, 4)
        )
        pairs = sorted(((iou[i, j], i, j) for i, j in zip(*np.nonzero(iou > CONFUSION_IOU))), reverse=True)
        used_d, used_g = set(), set()
        for _, i, j in pairs:
            if i not in used_d and j not in used_g:
                used_d.add(i)
                used_g.add(j)
                m[dts[i][0], gts[j][0]] += 1
        for j, (c, _) in enumerate(gts):
            if j not in used_g:
                m[k, c] += 1  # missed: predicted background
        for i, (c, _) in enumerate(dts):
            if i not in used_d:
                m[c, k] += 1  # a detection of nothing: true background
    return m


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of COCO boxes (x, y, w, h): (len(a), len(b))."""
    ax1, ay1, ax2, ay2 = a[:, 0], a[:, 1], a[:, 0] + a[:, 2], a[:, 1] + a[:, 3]
    bx1, by1, bx2, by2 = b[:, 0], b[:, 1], b[:, 0] + b[:, 2], b[:, 1] + b[:, 3]
    w = np.clip(np.minimum(ax2[:, None], bx2) - np.maximum(ax1[:, None], bx1), 0, None)
    h = np.clip(np.minimum(ay2[:, None], by2) - np.maximum(ay1[:, None], by1), 0, None)
    inter = w * h
    union = (a[:, 2] * a[:, 3])[:, None] + b[:, 2] * b[:, 3] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def write_detection_plots(folder: str | os.PathLike, gt: Any, runs: Sequence[tuple[str, Any]]) -> list[str]:
    """``pr_curve.png`` and ``confusion_matrix.png`` in ``folder``, one panel per (model, its accumulated COCOeval)
    of ``runs`` (its detections are the ones COCOeval scored); the paths written. Each file is written whole or
    not at all (fileio's atomic writes)."""
    plt = require()
    categories = sorted(c["id"] for c in gt["categories"])  # COCOeval's class axis: category ids sorted
    name_of = {c["id"]: str(c["name"]) for c in gt["categories"]}
    names = [name_of[c] for c in categories]
    out = []
    fig, axes = plt.subplots(1, len(runs), figsize=(6.4 * len(runs), 5.2), squeeze=False)
    for ax, (model, ev) in zip(axes[0], runs):
        _pr_panel(ax, model, ev, names)
    out.append(_save(fig, plt, Path(folder) / "pr_curve.png"))
    fig, axes = plt.subplots(1, len(runs), figsize=(6.4 * len(runs), 5.6), squeeze=False)
    for ax, (model, ev) in zip(axes[0], runs):
        _confusion_panel(ax, model, confusion(gt, ev.cocoDt.dataset["annotations"], categories), names)
    out.append(_save(fig, plt, Path(folder) / "confusion_matrix.png"))
    return out


def write_classifier_plots(folder: str | os.PathLike, runs: Sequence[Any]) -> list[str]:
    """``confusion_matrix.png`` in ``folder`` (as Ultralytics' classify val: rows predicted, columns true), one
    panel per evaluation of ``runs`` (``model``, ``scores``, ``labels``, ``names``: -m first, then --against),
    over the classes that occur in the labels or the predictions; the path written."""
    plt = require()
    fig, axes = plt.subplots(1, len(runs), figsize=(6.4 * len(runs), 5.6), squeeze=False)
    for ax, ev in zip(axes[0], runs):
        predicted = ev.scores.argmax(1) if len(ev.scores) else np.zeros(0, np.int64)
        classes = sorted(set(ev.labels.tolist()) | set(predicted.tolist()))
        index = {c: i for i, c in enumerate(classes)}
        m = np.zeros((len(classes), len(classes)), np.int64)
        for p, t in zip(predicted.tolist(), ev.labels.tolist()):
            m[index[p], index[t]] += 1
        _confusion_panel(ax, ev.model, m, [str(ev.names.get(c, c)) for c in classes], background=False)
    return [_save(fig, plt, Path(folder) / "confusion_matrix.png")]


def _pr_panel(ax: Any, model: str, ev: Any, names: Sequence[str]) -> None:
    recall, per_class, mean = pr_curves(ev)
    many = len(per_class) > 20  # as Ultralytics: a legend entry per class only up to 20 classes
    for k, p in enumerate(per_class):
        if not np.all(np.isnan(p)):
            ax.plot(
                recall,
                p,
                linewidth=1,
                color="grey" if many else None,
                label=None if many else f"{names[k]} {np.nanmean(p):.3f}",
            )
    ax.plot(recall, mean, linewidth=3, color="blue", label=f"all classes {np.nanmean(mean):.3f} mAP@0.5")
    ax.set(
        xlabel="Recall",
        ylabel="Precision",
        xlim=(0, 1),
        ylim=(0, 1.01),
        title=f"{os.path.basename(model)}\nprecision-recall (pycocotools, IoU 0.5)",
    )
    ax.legend(loc="lower left", fontsize="small")


def _confusion_panel(ax: Any, model: str, m: np.ndarray, names: Sequence[str], background: bool = True) -> None:
    labels = list(names) + (["background"] if background else [])
    ax.imshow(m, cmap="Blues")
    if len(labels) <= 30:
        ticks = range(len(labels))
        ax.set_xticks(ticks, labels, rotation=90, fontsize="small")
        ax.set_yticks(ticks, labels, fontsize="small")
        for (i, j), v in np.ndenumerate(m):
            if v:
                ax.text(
                    j,
                    i,
                    str(v),
                    ha="center",
                    va="center",
                    fontsize="x-small",
                    color="white" if v > m.max() / 2 else "black",
                )
    ax.set(
        xlabel="True",
        ylabel="Predicted",
        title=f"{os.path.basename(model)}\nconfusion"
        + (f" (conf >= {CONFUSION_CONF:g}, IoU > {CONFUSION_IOU:g})" if background else " (top-1)"),
    )


def _save(fig: Any, plt: Any, target: Path) -> str:
    from edgekit.fileio import write_bytes_atomic

    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    write_bytes_atomic(target, buf.getvalue())
    return str(target)
