"""Accuracy arithmetic over plain arrays, shared by ``quantize`` (converters) and ``evaluate`` (devices).

Pure numpy and math: no TensorFlow, no interpreter, no scipy. ``scores`` are (N, classes) arrays,
``labels`` (N,) class ids. Every decision taken on a measurement comes with its interval: a gate that
refuses a user's model must be sure, and say how sure it is (two-sided 95% unless said otherwise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from edgekit.records import Record

CONFIDENCE = 0.95  # the intervals edgekit prints and decides on
CHANCE_ALPHA = 0.01  # "better than chance" must be shown at this one-sided level
Z95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval


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
    accuracy: float | None  # None without samples
    interval: tuple[float, float]
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
        return Chance(
            self.chance,
            self.correct / self.samples if self.samples else None,
            wilson(self.correct, self.samples),
            self.p_value,
            self.near_chance,
        )


def near_chance(accuracy: float, samples: int, classes: int) -> bool:
    """True when ``accuracy`` on ``samples`` labelled samples cannot be told from guessing among ``classes``."""
    return ChanceTest(round(accuracy * samples), samples, classes).near_chance


# ------------------------------------------------------------------------------------------ paired tests
@dataclass(frozen=True)
class PairedDifference(Record):
    """Accuracy of A minus accuracy of B on the same samples (:func:`paired_difference`)."""

    samples: int
    difference: float | None  # None without samples
    interval: tuple[float, float]  # Tango's score interval, at the ``z`` asked for
    only_a: int  # samples only A gets right
    only_b: int  # samples only B gets right
    p_value: float  # exact one-sided McNemar: A better than B


def tango_statistic(only_a: float, only_b: float, n: int, delta: float) -> float:
    """Tango's (1998) score statistic for a paired difference ``delta`` (A's accuracy minus B's): the observed
    ``only_a - only_b - n * delta`` over its standard error, with the share of samples only B gets right
    estimated by maximum likelihood under ``delta``. Falls as ``delta`` rises."""
    a2 = 2 * n
    b2 = -only_a - only_b + (2 * n - only_a + only_b) * delta
    c2 = -only_b * delta * (1 - delta)
    only_b_share = (math.sqrt(max(0.0, b2 * b2 - 4 * a2 * c2)) - b2) / (2 * a2)
    variance = n * (2 * only_b_share + delta * (1 - delta))
    excess = only_a - only_b - n * delta
    if variance <= 0.0:
        return 0.0 if excess == 0 else math.copysign(math.inf, excess)
    return excess / math.sqrt(variance)


def tango_interval(only_a: float, only_b: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Tango's asymptotic score interval for a paired difference: every ``delta`` whose statistic lies within
    ``±z`` (found by bisection; the statistic is monotone). Fagerland, Lydersen & Laake (2014) recommend it for
    paired proportions; unlike a Wald or a Newcombe interval it keeps a width when nothing flipped."""
    if n <= 0:
        return -1.0, 1.0
    estimate = (only_a - only_b) / n

    def where(target: float, lo: float, hi: float) -> float:
        for _ in range(100):  # 2^-100 of the range: far below any digit printed
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if tango_statistic(only_a, only_b, n, mid) > target else (lo, mid)
        return (lo + hi) / 2

    lower = -1.0 if tango_statistic(only_a, only_b, n, -1.0) <= z else where(z, -1.0, estimate)
    upper = 1.0 if tango_statistic(only_a, only_b, n, 1.0) >= -z else where(-z, estimate, 1.0)
    return lower, upper


def paired_settle_at(
    only_a: int, only_b: int, n: int, limit: float, z: float = Z95, most: int = 10_000_000
) -> int | None:
    """Samples in all at which Tango's interval, the flips in the same shares, would no longer span ``limit``
    (a paired difference as a fraction): solved on the interval itself, not scaled from its width (with no
    flip the width falls as 1/n, not 1/sqrt(n)). None when no number up to ``most`` would."""
    if n <= 0 or abs((only_a - only_b) / n - limit) <= 1e-12:
        return None

    def settled(total: int) -> bool:
        lo, hi = tango_interval(only_a * total / n, only_b * total / n, total, z)
        return lo > limit or hi <= limit

    lo, hi = n, 2 * n
    while not settled(hi):
        lo, hi = hi, 2 * hi
        if hi > most:
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if settled(mid) else (mid, hi)
    return hi


def paired_difference(a_correct: np.ndarray, b_correct: np.ndarray, z: float = Z95) -> PairedDifference:
    """Accuracy of A minus accuracy of B on the same samples, with its interval and McNemar's exact test.

    The interval is Tango's score interval for paired proportions (:func:`tango_interval`): it rests on the
    samples only one of the two gets right, and stays sound when none flips (0 of n is not "exactly 0 with
    certainty": with no flip in n samples the interval is about ±z²/(n + z²)). ``p_value`` is the one-sided
    exact McNemar test that A is better: P(at least ``only_a`` of the ``only_a + only_b`` flips go A's way |
    each flip is a coin toss).
    """
    a_correct, b_correct = np.asarray(a_correct, bool), np.asarray(b_correct, bool)
    n = len(a_correct)
    only_a = int(np.sum(a_correct & ~b_correct))
    only_b = int(np.sum(~a_correct & b_correct))
    if n == 0:
        return PairedDifference(0, None, (-1.0, 1.0), 0, 0, 1.0)
    return PairedDifference(
        n,
        (only_a - only_b) / n,
        tango_interval(only_a, only_b, n, z),
        only_a,
        only_b,
        binomial_sf(only_a, only_a + only_b, 0.5),
    )


@dataclass
class LimitTest(Record):
    """A measured value against a threshold: ``passed``, ``failed`` or ``uncertain`` (the interval spans it)."""

    verdict: str
    estimate: float
    interval: tuple[float, float]
    threshold: float
    samples: int
    settle_at: int | None  # samples in all that would likely settle an uncertain verdict (None: none would)
    confidence: float = CONFIDENCE


def at_most(estimate: float, interval: tuple[float, float], limit: float, samples: int) -> LimitTest:
    """Is a quantity at most ``limit``? failed when even the interval's low end exceeds it, passed when its
    high end does not reach it, uncertain between (with the sample size that would settle it)."""
    lo, hi = interval
    if lo > limit:
        return LimitTest("failed", estimate, interval, limit, samples, None)
    if hi <= limit:
        return LimitTest("passed", estimate, interval, limit, samples, None)
    half = (hi - estimate) if estimate <= limit else (estimate - lo)
    return LimitTest(
        "uncertain", estimate, interval, limit, samples, samples_to_settle(samples, half, abs(limit - estimate))
    )


STRICT_FAILS = "--strict fails an uncertain verdict whose estimate is past the limit"


def settle_hint(decision: LimitTest, what: str = "labelled samples", flags: str = "--samples, --eval") -> str:
    """How many ``what`` would settle an uncertain ``decision``: computed from its interval (the half facing the
    threshold shrinks as 1/sqrt(n)), for every uncertain line to say."""
    if decision.settle_at is None:
        return f"no number of {what} settles it while the estimate sits on the limit itself"
    return (
        f"about {decision.settle_at:,} {what} in all would settle it "
        f"({decision.settle_at - decision.samples:,} more: {flags})"
    )


def drop_within(change: float, interval: tuple[float, float], max_drop_points: float, samples: int) -> LimitTest:
    """Is the drop of a change (A minus B, shares; its interval) at most ``max_drop_points`` points?
    :func:`at_most` on the drop (B minus A): ``estimate``, ``interval`` and ``threshold`` are the drop's, in shares."""
    return at_most(-change, (-interval[1], -interval[0]), max_drop_points / 100.0, samples)


def at_least(estimate: float, interval: tuple[float, float], limit: float, samples: int) -> LimitTest:
    """The mirror of :func:`at_most`: is a quantity at least ``limit``?"""
    flipped = at_most(-estimate, (-interval[1], -interval[0]), -limit, samples)
    return LimitTest(flipped.verdict, estimate, interval, limit, samples, flipped.settle_at)


@dataclass(frozen=True)
class Agreement(Record):
    """How often two models' top-1 classes agree, with its Wilson interval, and how far their scores differ."""

    samples: int
    top1_agreement: float  # NaN without samples
    agreement_interval: tuple[float, float]
    mean_abs_diff: float
    max_abs_diff: float


def agreement(float_scores: np.ndarray, int8_scores: np.ndarray) -> Agreement:
    """Top-1 agreement (with its interval) and mean/max absolute score difference of two (N, classes) arrays."""
    diff = np.abs(float_scores - int8_scores)
    agree = int(np.sum(float_scores.argmax(1) == int8_scores.argmax(1)))
    n = len(float_scores)
    return Agreement(
        n,
        agree / n if n else float("nan"),
        wilson(agree, n),
        float(diff.mean()) if n else float("nan"),
        float(diff.max()) if n else float("nan"),
    )


# ------------------------------------------------------------------------------------------ class order
@dataclass(frozen=True)
class ClassOrder:
    """What :func:`class_order` found in a confusion of labels and predictions.

    ``misordered``: moves that close a cycle (labels permuted, refused); ``one_way``: moves that close none
    (a class the model reads as another: a weak class, said as a note); ``unshown``: cycles the counts point
    to that the data cannot show yet, with the images per class that would show them. Each move is
    ``{"label": i, "predicted": j, "count": C[i, j], "of": images of label i}``."""

    misordered: tuple[dict, ...]
    one_way: tuple[dict, ...]
    unshown: tuple[dict, ...]  # {"labels": (i, j, ...), "per_class": n or None (no number would)}


def _confusion(predicted: np.ndarray, labels: np.ndarray, classes: int) -> np.ndarray:
    predicted, labels = np.asarray(predicted, np.int64), np.asarray(labels, np.int64)
    width = max(classes, int(labels.max(initial=-1)) + 1, int(predicted.max(initial=-1)) + 1)
    confusion = np.zeros((width, width), np.int64)
    np.add.at(confusion, (labels, predicted), 1)
    return confusion


def _move_p(confusion: np.ndarray, i: int, j: int) -> float:
    """One-sided exact sign test: label i's images go to class j more often than they stay at i."""
    return binomial_sf(int(confusion[i, j]), int(confusion[i, j] + confusion[i, i]), 0.5)


def _in_cycles(edges: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """The edges of ``edges`` that lie on a closed cycle (the edge's target reaches its source)."""
    out: dict[int, set[int]] = {}
    for i, j in edges:
        out.setdefault(i, set()).add(j)

    def reaches(start: int, goal: int) -> bool:
        seen, todo = {start}, [start]
        while todo:
            for nxt in out.get(todo.pop(), ()):
                if nxt == goal:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return False

    return {(i, j) for i, j in edges if reaches(j, i)}


def _cycles(edges: set[tuple[int, int]]) -> list[tuple[int, ...]]:
    """The groups of labels the cycle edges join (each group sorted, groups in order)."""
    groups: list[set[int]] = []
    for i, j in sorted(edges):
        touching = [g for g in groups if i in g or j in g]
        merged = {i, j}.union(*touching)
        groups = [g for g in groups if g not in touching] + [merged]
    return sorted(tuple(sorted(g)) for g in groups)


def _per_class_to_show(
    confusion: np.ndarray, moves: list[tuple[int, int]], level: float, limit: int = 100_000
) -> int | None:
    """Images per class at which every move of ``moves``, its shares as now, would pass a sign test at
    ``level`` (the strictest step of the Holm correction): the largest such count over the moves."""
    needed = 0
    for i, j in moves:
        n_i = int(confusion[i].sum())
        pair_now = int(confusion[i, j] + confusion[i, i])
        share, towards = pair_now / n_i, confusion[i, j] / pair_now

        def shown(n: int, share: float = share, towards: float = towards) -> bool:
            pair = round(share * n)
            return binomial_sf(round(towards * pair), pair, 0.5) < level

        lo, hi = n_i - 1, n_i
        while not shown(hi):
            lo, hi = hi, 2 * hi
            if hi > limit:
                return None
        while hi - lo > 1:  # the least count shown (the test grows surer with n at fixed shares)
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if shown(mid) else (mid, hi)
        needed = max(needed, hi)
    return needed


def class_order(predicted: np.ndarray, labels: np.ndarray, classes: int, alpha: float = CHANCE_ALPHA) -> ClassOrder:
    """Labels the model reads as other classes, told apart from weak classes and bad models by cycles.

    Label i *moves* to class j (j != i) when its images go to j significantly more often than they stay at i:
    the exact one-sided sign test on C[i, j] against C[i, i], Holm-corrected at ``alpha`` over every (label,
    class) pair, so that a model guessing at random moves nothing (at most ``alpha`` of the time). Swapped or
    shifted labels are a permutation: their moves close cycles (3 -> 7 -> 3, or 0 -> 1 -> ... -> 0), and only
    those are misordered. A class the model confuses with another (every 3 read as a 7 while 7s stay 7s), or a
    model that collapses onto a few classes, moves one way and closes no cycle, whatever the other classes'
    accuracy: said, never refused. Where each move of a cycle of the point counts (C[i, j] > C[i, i]) passes
    the sign test alone at ``alpha`` but not all pass the correction, the cycle is ``unshown``: with the images
    per class that would show it, were the shares the same.
    """
    confusion = _confusion(predicted, labels, classes)
    present = [int(k) for k in np.unique(np.asarray(labels, np.int64))]
    pairs = len(present) * (len(confusion) - 1)
    candidates = sorted(
        (_move_p(confusion, i, j), i, j)
        for i in present
        for j in range(len(confusion))
        if j != i and confusion[i, j] > confusion[i, i]
    )
    moves = set()
    for rank, (p, i, j) in enumerate(candidates):  # Holm: the r-th smallest p against alpha / (pairs - r)
        if p >= alpha / (pairs - rank):
            break
        moves.add((i, j))
    cyclic = _in_cycles(moves)

    def move(i: int, j: int) -> dict:
        return {"label": i, "predicted": j, "count": int(confusion[i, j]), "of": int(confusion[i].sum())}

    suggestive = {(i, j) for p, i, j in candidates if p < alpha}
    pending = _in_cycles(suggestive) - cyclic
    unshown = tuple(
        {
            "labels": group,
            "per_class": _per_class_to_show(confusion, sorted((i, j) for i, j in pending if i in group), alpha / pairs),
        }
        for group in _cycles(pending)
    )
    return ClassOrder(
        tuple(move(i, j) for i, j in sorted(cyclic)), tuple(move(i, j) for i, j in sorted(moves - cyclic)), unshown
    )


def misordered_classes(
    predicted: np.ndarray, labels: np.ndarray, classes: int, alpha: float = CHANCE_ALPHA
) -> list[dict[str, int]]:
    """The moves of :func:`class_order` that close a cycle: labels permuted, evidence of misordering.
    Returns [{"label": k, "predicted": j, "count": c, "of": n_k}, ...]."""
    return list(class_order(predicted, labels, classes, alpha).misordered)
