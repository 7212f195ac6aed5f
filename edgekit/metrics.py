"""Accuracy arithmetic over plain arrays, shared by ``quantize`` (converters) and ``evaluate`` (devices).

Pure numpy: no TensorFlow, no interpreter. ``scores`` are (N, classes) arrays, ``labels`` (N,) class ids.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def top_k_accuracy(scores: np.ndarray, labels: np.ndarray, k: int = 1) -> float:
    """Share of samples whose label is among the ``k`` highest scores (ties: the lower class id wins)."""
    if len(labels) == 0:
        return float("nan")
    k = min(k, scores.shape[1])
    # stable argsort of -scores: equal scores keep the lower class id first, like devices.classify.top_k
    best = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return float(np.mean(np.any(best == np.asarray(labels)[:, None], axis=1)))


def chance_margin(samples: int, classes: int) -> float:
    """How far above chance (1/classes) an accuracy on ``samples`` must be to count as more than luck.

    The larger of chance itself (twice chance is the least a working classifier shows) and three
    standard errors of a coin that is right with probability 1/classes.
    """
    chance = 1.0 / max(classes, 1)
    return max(chance, 3.0 * math.sqrt(chance * (1 - chance) / max(samples, 1)))


def near_chance(accuracy: float, samples: int, classes: int) -> bool:
    """True when ``accuracy`` on ``samples`` labelled samples is no better than guessing among ``classes``."""
    return accuracy <= 1.0 / max(classes, 1) + chance_margin(samples, classes)


def clearly_better(a_correct: np.ndarray, b_correct: np.ndarray, sigmas: float = 3.0) -> bool:
    """Is A right on more samples than B by more than chance allows? (McNemar's test on the same samples.)

    Only the samples where exactly one of the two is right count: A-only ``b`` and B-only ``c``.
    Under "equally good" b - c has standard deviation sqrt(b + c); A wins when b - c > sigmas * that.
    """
    b = int(np.sum(a_correct & ~b_correct))
    c = int(np.sum(~a_correct & b_correct))
    return b - c > sigmas * math.sqrt(b + c) and b > c


def agreement(float_scores: np.ndarray, int8_scores: np.ndarray) -> dict[str, Any]:
    """Top-1 agreement and mean/max absolute score difference between two (N, classes) arrays."""
    diff = np.abs(float_scores - int8_scores)
    return {"samples": len(float_scores),
            "top1_agreement": float(np.mean(float_scores.argmax(1) == int8_scores.argmax(1))),
            "mean_abs_diff": float(diff.mean()), "max_abs_diff": float(diff.max())}
