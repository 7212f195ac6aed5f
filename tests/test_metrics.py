"""The statistics edgekit decides on: exact tests and intervals that fit the sample size."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgekit.results import metrics


def _pairs(n: int, only_a: int, only_b: int, both_wrong: int = 0) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.ones(n, bool), np.ones(n, bool)
    a[:both_wrong] = b[:both_wrong] = False
    a[both_wrong : both_wrong + only_b] = False
    b[both_wrong + only_b : both_wrong + only_b + only_a] = False
    return a, b


def test_binomial_tail_is_exact():
    assert metrics.binomial_sf(0, 10, 0.3) == 1.0 and metrics.binomial_sf(11, 10, 0.3) == 0.0
    assert metrics.binomial_sf(10, 10, 0.5) == pytest.approx(0.5**10)
    exact = sum(math.comb(20, i) * 0.1**i * 0.9 ** (20 - i) for i in range(5, 21))
    assert metrics.binomial_sf(5, 20, 0.1) == pytest.approx(exact, rel=1e-12)
    assert 0.0 < metrics.binomial_sf(5200, 10000, 0.5) < 1e-4  # large n stays finite


def test_wilson_interval_covers_zero_and_full_counts():
    lo, hi = metrics.wilson(0, 30)
    assert lo == 0.0 and 0.08 < hi < 0.13  # 0 of 30 is not "exactly 0"
    lo, hi = metrics.wilson(30, 30)
    assert hi == 1.0 and 0.87 < lo < 0.92


def test_one_flip_in_75_is_noise_and_a_real_loss_is_not():
    """The issue's case: one held-back image of 75 that flips was a refusal (1.3 points > 1)."""
    a, b = _pairs(75, 1, 0, both_wrong=9)
    d = metrics.paired_difference(a, b)
    assert d.difference == pytest.approx(1 / 75) and d.p_value == 0.5
    assert metrics.at_most(d.difference, d.interval, 0.01, 75).verdict == "uncertain"
    # 22 samples only float got right, 3 only int8, of 375: a 5-point loss no interval can explain away
    a, b = _pairs(375, 22, 3, both_wrong=30)
    d = metrics.paired_difference(a, b)
    assert d.interval[0] > 0.02 and d.p_value < 0.001
    assert metrics.at_most(d.difference, d.interval, 0.01, 375).verdict == "failed"


def test_tangos_interval_matches_the_published_worked_example():
    """Fagerland, Lydersen & Laake, Statistical Analysis of Contingency Tables (CRC 2017), chapter 8, Cavo et al.
    2012 (n11 59, n12 6, n21 16, n22 80): Tango's asymptotic score interval -0.0621 (95% CI -0.1240 to -0.0054),
    as the book's own R package (contingencytables, tests/testthat/test-ch8.R) prints it."""
    assert metrics.tango_interval(6, 16, 161) == (pytest.approx(-0.1240, abs=5e-5), pytest.approx(-0.0054, abs=5e-5))
    lo, hi = metrics.tango_interval(16, 6, 161)  # the mirror image: A and B exchanged
    assert (lo, hi) == (pytest.approx(0.0054, abs=5e-5), pytest.approx(0.1240, abs=5e-5))
    a, b = _pairs(161, 6, 16, both_wrong=80)  # through paired_difference: A is the table's rows
    d = metrics.paired_difference(a, b)
    assert d.difference == pytest.approx(-10 / 161) and d.interval == metrics.tango_interval(6, 16, 161)


def test_no_flip_keeps_a_width_that_falls_as_1_over_n():
    """Newcombe's interval was about ±0 when nothing flipped (the two Wilson intervals cancel): 300 samples that
    all agree 'settled' a 1-point limit. With no flip, Tango's reaches z²/(n + z²) either side."""
    for n in (75, 300, 400, 2000):
        a, b = _pairs(n, 0, 0, both_wrong=n // 10)
        lo, hi = metrics.paired_difference(a, b).interval
        assert hi == pytest.approx(metrics.Z95**2 / (n + metrics.Z95**2)) and lo == pytest.approx(-hi)
    assert metrics.paired_settle_at(0, 0, 300, 0.01) == 381  # 1.96² x 99 = 380.3


def test_no_flip_passes_only_with_enough_samples_and_says_how_many_would_do():
    a, b = _pairs(75, 0, 0, both_wrong=9)
    d = metrics.paired_difference(a, b)
    small = metrics.at_most(d.difference, d.interval, 0.01, 75)
    assert small.verdict == "uncertain" and small.settle_at > 75
    a, b = _pairs(400, 0, 0, both_wrong=40)
    d = metrics.paired_difference(a, b)
    assert metrics.at_most(d.difference, d.interval, 0.01, 400).verdict == "passed"


def test_at_least_mirrors_at_most():
    lo, hi = metrics.wilson(60, 100)
    assert metrics.at_least(0.6, (lo, hi), 0.9, 100).verdict == "failed"
    lo, hi = metrics.wilson(99, 100)
    assert metrics.at_least(0.99, (lo, hi), 0.9, 100).verdict == "passed"
    lo, hi = metrics.wilson(68, 75)
    d = metrics.at_least(68 / 75, (lo, hi), 0.9, 75)
    assert d.verdict == "uncertain" and d.settle_at > 75


def test_misordered_labels_are_found_and_a_weak_class_is_not():
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(10), 30)
    predicted = labels.copy()
    noisy = rng.random(300) < 0.1
    predicted[noisy] = rng.integers(0, 10, int(noisy.sum()))  # a model right ~91% of the time
    swapped = predicted.copy()
    swapped[labels == 3], swapped[labels == 7] = 7, 3  # folders 3 and 7 exchanged
    found = metrics.misordered_classes(swapped, labels, 10)
    assert [(f["label"], f["predicted"]) for f in found] == [(3, 7), (7, 3)]
    shifted = (labels + 1) % 10
    assert len(metrics.misordered_classes(shifted, labels, 10)) == 10
    weak = labels.copy()
    weak[labels == 3] = 7  # the model reads every 3 as a 7; 7s are still 7s
    assert metrics.misordered_classes(weak, labels, 10) == []
    assert metrics.misordered_classes(labels, labels, 10) == []


def _predictions(confusion: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(predicted, labels) whose confusion matrix (rows: labels, columns: predictions) is ``confusion``."""
    labels, predicted = [], []
    for i, row in enumerate(confusion):
        for j, count in enumerate(row):
            labels += [i] * int(count)
            predicted += [j] * int(count)
    return np.array(predicted), np.array(labels)


def _confusion(right: list[int], per_class: int = 30) -> np.ndarray:
    """A 10-class confusion: label k read as itself ``right[k]`` times, the rest spread one by one over the
    following classes (a mediocre model whose errors go nowhere in particular)."""
    c = np.zeros((10, 10), int)
    for k, r in enumerate(right):
        c[k, k] = r
        for e in range(per_class - r):
            c[k, (k + 1 + e % 9) % 10] += 1
    return c


def test_a_swap_is_found_though_another_class_is_weak_and_a_weak_class_is_only_said():
    """Issue 31: the old test gave up when any other class was read mostly as another (one class at 40%)."""
    c = _confusion([27] * 10)
    c[[3, 5]] = c[[5, 3]]  # folders 3 and 5 swapped: label 3 holds 5s
    c[8] = [0, 16, 0, 0, 0, 0, 0, 0, 12, 2]  # label 8: 12 of 30 right, 16 read as 1 (1s stay 1s)
    order = metrics.class_order(*_predictions(c), 10)
    assert [(m["label"], m["predicted"], m["count"], m["of"]) for m in order.misordered] == [
        (3, 5, 27, 30),
        (5, 3, 27, 30),
    ]
    assert order.one_way == () and order.unshown == ()  # 16 against 12 shows no move (not refused, not said)
    assert metrics.misordered_classes(*_predictions(c), 10) == list(order.misordered)
    c[8] = [0, 28, 0, 0, 0, 0, 0, 0, 2, 0]  # a class the model reads as another, one way: a note
    order = metrics.class_order(*_predictions(c), 10)
    assert [(m["label"], m["predicted"]) for m in order.misordered] == [(3, 5), (5, 3)]
    assert [(m["label"], m["predicted"]) for m in order.one_way] == [(8, 1)]


def test_a_merely_bad_model_is_not_misordered():
    weak = _confusion([5] * 10)  # 17% right, errors spread: bad, not permuted
    assert metrics.class_order(*_predictions(weak), 10) == metrics.ClassOrder((), (), ())
    collapsed = np.zeros((10, 10), int)
    collapsed[:, 0] = 30  # everything read as class 0: one-way moves, no cycle
    order = metrics.class_order(*_predictions(collapsed), 10)
    assert order.misordered == () and [m["label"] for m in order.one_way] == list(range(1, 10))
    pairs = np.zeros((10, 10), int)  # classes confused in pairs, each still read mostly right
    for k in range(0, 10, 2):
        pairs[k, k], pairs[k, k + 1], pairs[k + 1, k + 1], pairs[k + 1, k] = 16, 14, 16, 14
    assert metrics.class_order(*_predictions(pairs), 10) == metrics.ClassOrder((), (), ())
    rng = np.random.default_rng(31)  # guessing models: never refused, never warned (1% each)
    labels = np.repeat(np.arange(10), 30)
    found = [metrics.class_order(rng.integers(0, 10, 300), labels, 10) for _ in range(100)]
    assert sum(bool(o.misordered) + bool(o.unshown) for o in found) <= 3


def test_a_shift_is_one_cycle_and_a_swap_on_too_few_samples_says_how_many_would_show_it():
    labels = np.repeat(np.arange(10), 30)
    assert len(metrics.class_order((labels + 1) % 10, labels, 10).misordered) == 10
    few = np.repeat(np.arange(10), 8)
    swapped = few.copy()
    swapped[few == 3], swapped[few == 7] = 7, 3
    order = metrics.class_order(swapped, few, 10)
    # 8 of 8 each way: p = 0.5**8 = 0.004 alone, above Holm's 0.01 / 90; 14 of 14 (p = 6e-5) would show it
    assert order.misordered == () and order.unshown == ({"labels": (3, 7), "per_class": 14},)
    assert metrics.binomial_sf(14, 14, 0.5) < 0.01 / 90 <= metrics.binomial_sf(13, 13, 0.5)
