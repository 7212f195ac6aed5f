"""benchmark --compare decides a regression on an interval fitted to the samples, not on two p50 values."""

from __future__ import annotations

import numpy as np
import pytest

from edgekit.devices import latency


def _run(median: float, n: int, spread: float, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    values = (median * (1 + spread * rng.standard_normal(n))).clip(0.01).tolist()
    return {"latencies_ms": values, **latency.summarize(values)}


def test_median_interval_covers_the_median_at_its_confidence():
    rng = np.random.default_rng(0)
    misses = 0
    for _ in range(400):
        sample = rng.exponential(10.0, 50)   # skewed, like latencies with stalls; true median 10 ln 2
        lo, hi = latency.median_interval(sample.tolist(), 0.95)
        misses += not lo <= 10 * np.log(2) <= hi
    assert misses / 400 <= 0.08
    assert latency.median_interval([1.0, 2.0, 3.0]) is None      # too few values to say anything at 97.5%


def test_a_real_slowdown_is_a_regression_and_noise_is_not():
    base = _run(10.0, 200, 0.05, 0)
    assert latency.compare(_run(10.3, 200, 0.05, 1), base)["verdict"] == "ok"
    slow = latency.compare(_run(14.0, 200, 0.05, 2), base)
    assert slow["verdict"] == "regression" and slow["regression"] and slow["change_interval"][0] > 0.2


def test_too_few_noisy_samples_cannot_call_a_borderline_change():
    base = _run(10.0, 10, 0.3, 3)
    result = latency.compare(_run(12.2, 10, 0.3, 4), base)
    assert result["verdict"] == "uncertain" and not result["regression"]
    lo, hi = result["change_interval"]
    assert lo < 0.2 < hi


def test_files_without_samples_are_judged_on_p50_alone():
    base = {"p50_ms": 10.0}
    point = latency.compare({"p50_ms": 12.5}, base)
    assert point["verdict"] == "point" and point["regression"] and point["change"] == pytest.approx(0.25)


@pytest.mark.parametrize("median, warned", [(12.5, True), (10.5, False)])
def test_an_uncertain_change_is_a_warning_only_past_the_limit(median, warned):
    """benchmark --compare: an interval spanning --max-slowdown is a warning when the estimate itself is past it,
    a note when the data points the right way and only cannot be sure yet."""
    from edgekit.devices.benchmark import SavedRun, compare_to_saved
    from edgekit.results.benchmark import BenchmarkResult

    base, now = _run(10.0, 10, 0.3, 3), _run(median, 10, 0.3, 4)
    probe = latency.compare(now, base, 0.2)
    assert probe["verdict"] == "uncertain" and (probe["change"] > 0.2) == warned  # the case this test is about
    fields = {f: None for f in BenchmarkResult.__dataclass_fields__}
    fields.update(model="m.tflite", device="cpu", p50_ms=now["p50_ms"], latencies_ms=tuple(now["latencies_ms"]),
                  warnings=(), notes=())
    result = BenchmarkResult(**fields)
    judged, warnings, notes = compare_to_saved(result, SavedRun("m.tflite", "cpu", base["p50_ms"],
                                                                tuple(base["latencies_ms"])), "base.json", 20.0)
    said = warnings if warned else notes
    assert len(said) == 1 and said[0].startswith("cannot tell whether p50 grew by more than --max-slowdown 20%")
    assert (warnings if not warned else notes) == []
    assert (judged.warnings if warned else judged.notes) == tuple(said)
