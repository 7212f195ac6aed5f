"""Accuracy arithmetic over plain arrays, shared by ``quantize`` (converters) and ``evaluate`` (devices).

Pure numpy and math: no TensorFlow, no interpreter, no scipy. ``scores`` are (N, classes) arrays,
``labels`` (N,) class ids. Every decision taken on a measurement comes with its interval: a gate that
refuses a user's model must be sure, and say how sure it is (two-sided 95% unless said otherwise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from edgekit.records import Record

CONFIDENCE = 0.95           # the intervals edgekit prints and decides on
CHANCE_ALPHA = 0.01         # "better than chance" must be shown at this one-sided level
Z95 = 1.959963984540054     # the normal quantile of a two-sided 95% interval


def top_k_accuracy(scores: np.ndarray, labels: np.ndarray, k: int = 1) -> float:
    """Share of samples whose label is among the ``k`` highest scores (ties: the lower class id wins)."""
    if len(labels) == 0:
        return float("nan")
    k = min(k, scores.shape[1])
    # stable argsort of -scores: equal scores keep the lower class id first, like devices.classify.top_k
    best = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return float(np.mean(np.any(best == np.asarray(labels)[:, None], axis=1)))


# ------------------------------------------------------------------------------------------ distributions
def binomial_sf(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), exact (summed in log space: n may be tens of thousands)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    lp, lq = math.log(p), math.log1p(-p)
    lg = math.lgamma(n + 1)
    terms = [lg - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq for i in range(k, n + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * math.fsum(math.exp(t - top) for t in terms))


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval for a proportion (sound at 0 and n successes, unlike successes/n ± z·se)."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (0.0 if successes == 0 else max(0.0, centre - half)), (1.0 if successes == n else min(1.0, centre + half))


def samples_to_settle(n: int, half_width: float, distance: float) -> int | None:
    """Samples in all at which an interval of ``half_width`` on ``n`` samples would clear a threshold
    ``distance`` away from the estimate (the width shrinks as 1/sqrt(n)); None when no number would."""
    if distance <= 1e-12:
        return None
    return max(n + 1, math.ceil(n * (half_width / distance) ** 2))


# ------------------------------------------------------------------------------------------ chance
@dataclass(frozen=True)
class Chance(Record):
    """What :class:`ChanceTest` found: the chance level, the accuracy with its Wilson interval, the p-value."""

    chance: float
    accuracy: Optional[float]           # None without samples
    interval: Tuple[float, float]
    p_value: float
    near_chance: bool


@dataclass
class ChanceTest:
    """Is an accuracy better than guessing among ``classes``? (exact one-sided binomial test)."""

    correct: int
    samples: int
    classes: int

    @property
    def chance(self) -> float:
        return 1.0 / max(self.classes, 1)

    @property
    def p_value(self) -> float:
        return binomial_sf(self.correct, self.samples, self.chance)

    @property
    def near_chance(self) -> bool:
        """True when the data cannot show the accuracy to be above chance (at CHANCE_ALPHA)."""
        return self.samples == 0 or self.p_value >= CHANCE_ALPHA

    def result(self) -> Chance:
        return Chance(self.chance, self.correct / self.samples if self.samples else None,
                      wilson(self.correct, self.samples), self.p_value, self.near_chance)


def near_chance(accuracy: float, samples: int, classes: int) -> bool:
    """True when ``accuracy`` on ``samples`` labelled samples cannot be told from guessing among ``classes``."""
    return ChanceTest(round(accuracy * samples), samples, classes).near_chance


# ------------------------------------------------------------------------------------------ paired tests
@dataclass(frozen=True)
class PairedDifference(Record):
    """Accuracy of A minus accuracy of B on the same samples (:func:`paired_difference`)."""

    samples: int
    difference: Optional[float]         # None without samples
    interval: Tuple[float, float]       # Newcombe's, at the ``z`` asked for
    only_a: int                         # samples only A gets right
    only_b: int                         # samples only B gets right
    p_value: float                      # exact one-sided McNemar: A better than B


def paired_difference(a_correct: np.ndarray, b_correct: np.ndarray, z: float = Z95) -> PairedDifference:
    """Accuracy of A minus accuracy of B on the same samples, with its interval and McNemar's exact test.

    The interval is Newcombe's (1998) method 10 for paired proportions: Wilson intervals for each
    accuracy, joined through the correlation of the two classifiers' hits. Unlike the Wald interval it
    stays sound when no sample flips (0 of n is not "exactly 0 with certainty"). ``p_value`` is the
    one-sided exact McNemar test that A is better: P(at least ``only_a`` of the ``only_a + only_b``
    flips go A's way | each flip is a coin toss).
    """
    a_correct, b_correct = np.asarray(a_correct, bool), np.asarray(b_correct, bool)
    n = len(a_correct)
    both = int(np.sum(a_correct & b_correct))
    only_a = int(np.sum(a_correct & ~b_correct))
    only_b = int(np.sum(~a_correct & b_correct))
    neither = n - both - only_a - only_b
    if n == 0:
        return PairedDifference(0, None, (-1.0, 1.0), 0, 0, 1.0)
    p1, p2 = (both + only_a) / n, (both + only_b) / n
    l1, u1 = wilson(both + only_a, n, z)
    l2, u2 = wilson(both + only_b, n, z)
    denominator = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    phi = (both * neither - only_a * only_b) / math.sqrt(denominator) if denominator else 0.0
    lower = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    upper = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    diff = p1 - p2
    return PairedDifference(n, diff, (max(-1.0, diff - lower), min(1.0, diff + upper)), only_a, only_b,
                            binomial_sf(only_a, only_a + only_b, 0.5))


@dataclass
class Decision(Record):
    """A measured value against a threshold: ``passed``, ``failed`` or ``uncertain`` (the interval spans it)."""

    verdict: str
    estimate: float
    interval: tuple[float, float]
    threshold: float
    samples: int
    settle_at: int | None    # samples in all that would likely settle an uncertain verdict (None: none would)
    confidence: float = CONFIDENCE


def at_most(estimate: float, interval: tuple[float, float], limit: float, samples: int) -> Decision:
    """Is a quantity at most ``limit``? failed when even the interval's low end exceeds it, passed when its
    high end does not reach it, uncertain between (with the sample size that would settle it)."""
    lo, hi = interval
    if lo > limit:
        return Decision("failed", estimate, interval, limit, samples, None)
    if hi <= limit:
        return Decision("passed", estimate, interval, limit, samples, None)
    half = (hi - estimate) if estimate <= limit else (estimate - lo)
    return Decision("uncertain", estimate, interval, limit, samples, samples_to_settle(samples, half,
                                                                                     abs(limit - estimate)))


def drop_within(change: float, interval: tuple[float, float], max_drop_points: float, samples: int) -> Decision:
    """Is the drop of a change (A minus B, shares; its interval) at most ``max_drop_points`` points?
    :func:`at_most` on the drop (B minus A): ``estimate``, ``interval`` and ``threshold`` are the drop's, in shares."""
    return at_most(-change, (-interval[1], -interval[0]), max_drop_points / 100.0, samples)


def at_least(estimate: float, interval: tuple[float, float], limit: float, samples: int) -> Decision:
    """The mirror of :func:`at_most`: is a quantity at least ``limit``?"""
    flipped = at_most(-estimate, (-interval[1], -interval[0]), -limit, samples)
    return Decision(flipped.verdict, estimate, interval, limit, samples, flipped.settle_at)


@dataclass(frozen=True)
class Agreement(Record):
    """How often two models' top-1 classes agree, with its Wilson interval, and how far their scores differ."""

    samples: int
    top1_agreement: float               # NaN without samples
    agreement_interval: Tuple[float, float]
    mean_abs_diff: float
    max_abs_diff: float


def agreement(float_scores: np.ndarray, int8_scores: np.ndarray) -> Agreement:
    """Top-1 agreement (with its interval) and mean/max absolute score difference of two (N, classes) arrays."""
    diff = np.abs(float_scores - int8_scores)
    agree = int(np.sum(float_scores.argmax(1) == int8_scores.argmax(1)))
    n = len(float_scores)
    return Agreement(n, agree / n if n else float("nan"), wilson(agree, n),
                     float(diff.mean()) if n else float("nan"), float(diff.max()) if n else float("nan"))


# ------------------------------------------------------------------------------------------ class order
def misordered_classes(predicted: np.ndarray, labels: np.ndarray, classes: int,
                       alpha: float = CHANCE_ALPHA) -> list[dict[str, int]]:
    """Labels the model consistently calls another class, where that class is free: evidence of misordering.

    Label k is mapped to class j (j != k) when the model predicts j for most of label k's samples, j
    beats k by a sign test at ``alpha`` (the two counts, as a coin), label j's own samples are not
    mostly predicted as j (else k is merely a class the model confuses with j: a weak class, not a
    misorder), no other label maps to j, and every other label is mostly read as itself (a misorder is a
    permutation of classes the model knows; labels read as arbitrary classes are a model that has not
    learned). A partial swap, a shift or a reversal of the class order
    all show up; a model that is only bad at a class, or at all of them, does not. Returns [{"label": k, "predicted": j, "count": c, "of": n_k}, ...].
    """
    predicted, labels = np.asarray(predicted, np.int64), np.asarray(labels, np.int64)
    width = max(classes, int(labels.max(initial=-1)) + 1, int(predicted.max(initial=-1)) + 1)
    confusion = np.zeros((width, width), np.int64)
    np.add.at(confusion, (labels, predicted), 1)
    top = confusion.argmax(1)
    found = []
    for k in np.unique(labels):
        k = int(k)
        j = int(top[k])
        n_k = int(confusion[k].sum())
        if j == k or 2 * confusion[k, j] <= n_k:
            continue
        if binomial_sf(int(confusion[k, j]), int(confusion[k, j] + confusion[k, k]), 0.5) >= alpha:
            continue
        if confusion[j].sum() and top[j] == j:
            continue
        found.append({"label": k, "predicted": j, "count": int(confusion[k, j]), "of": n_k})
    targets = [f["predicted"] for f in found]
    found = [f for f in found if targets.count(f["predicted"]) == 1]
    # every other label must be read as itself: the labels are then a permutation of classes the model
    # knows (a model that has not learned reads labels as arbitrary classes, some of them consistently)
    mapped = {f["label"] for f in found}
    if any(int(top[k]) != k and int(k) not in mapped for k in np.unique(labels)):
        return []
    return found
