"""benchmark --compare decides a regression on an interval fitted to the samples, not on two p50 values."""

from __future__ import annotations

import numpy as np
import pytest

from edgekit.board import latency


def _run(median: float, n: int, spread: float, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    values = (median * (1 + spread * rng.standard_normal(n))).clip(0.01).tolist()
    return {"latencies_ms": values, **latency.summarize(values)}


def test_median_interval_covers_the_median_at_its_confidence():
    rng = np.random.default_rng(0)
    misses = 0
    for _ in range(400):
        sample = rng.exponential(10.0, 50)  # skewed, like latencies with stalls; true median 10 ln 2
        lo, hi = latency.median_interval(sample.tolist(), 0.95)
        misses += not lo <= 10 * np.log(2) <= hi
    assert misses / 400 <= 0.08
    assert latency.median_interval([1.0, 2.0, 3.0]) is None  # too few values to say anything at 97.5%


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
    fields = dict.fromkeys(BenchmarkResult.__dataclass_fields__)
    fields.update(
        model="m.tflite",
        device="cpu",
        p50_ms=now["p50_ms"],
        latencies_ms=tuple(now["latencies_ms"]),
        warnings=(),
        notes=(),
    )
    result = BenchmarkResult(**fields)
    judged, warnings, notes = compare_to_saved(
        result, SavedRun("m.tflite", "cpu", base["p50_ms"], tuple(base["latencies_ms"])), "base.json", 20.0
    )
    said = warnings if warned else notes
    assert len(said) == 1 and said[0].startswith("cannot tell whether p50 grew by more than --max-slowdown 20%")
    assert (warnings if not warned else notes) == []
    assert (judged.warnings if warned else judged.notes) == tuple(said)


def _judged(now: dict, base: dict):
    from edgekit.devices.benchmark import SavedRun, compare_to_saved
    from edgekit.results.benchmark import BenchmarkResult

    fields = dict.fromkeys(BenchmarkResult.__dataclass_fields__)
    fields.update(
        model="m.tflite",
        device="cpu",
        p50_ms=now["p50_ms"],
        latencies_ms=tuple(now["latencies_ms"]),
        warnings=(),
        notes=(),
    )
    return compare_to_saved(
        BenchmarkResult(**fields),
        SavedRun("m.tflite", "cpu", base["p50_ms"], tuple(base["latencies_ms"])),
        "base.json",
        20.0,
    )


def test_a_short_run_against_a_saved_one_is_uncertain_and_names_the_n_that_settles_it():
    """Issue 31: `benchmark -n 5 --compare base.json` said the file "holds no latencies_ms (an older edgekit)" when it
    held 30. Too few latencies here for an interval: uncertain, and the -n it names does settle it."""
    base = _run(10.0, 30, 0.05, 0)
    now = _run(13.5, 5, 0.05, 1)
    judged, warnings, notes = _judged(now, base)
    c = judged.comparison
    assert c.verdict == "uncertain" and not c.regression and c.change_interval is None
    assert len(warnings) == 1 and not notes and "older edgekit" not in warnings[0]
    assert "5 inferences here and 30 in base.json: a 95% interval of each median needs 8 at least" in warnings[0]
    n = latency.inferences_to_settle(now, base, 0.2)
    assert f"about -n {n} on a machine as quiet would settle it" in warnings[0]
    # the estimate aims at 90% power for a run whose median stays where this one's is: 176 of 200 measured
    settled = [latency.compare(_run(now["p50_ms"], n, 0.05, seed), base, 0.2)["verdict"] for seed in range(200)]
    assert settled.count("regression") >= 150 and "ok" not in settled, (n, settled.count("regression"))


def test_too_few_latencies_in_the_saved_run_say_to_save_it_again():
    judged, warnings, notes = _judged(_run(13.5, 50, 0.05, 1), _run(10.0, 5, 0.05, 0))
    assert judged.comparison.verdict == "uncertain"
    assert len(warnings) == 1 and "save base.json again with -n 8 or more" in warnings[0]


def test_a_baseline_too_noisy_for_any_n_here_says_so():
    base = _run(10.0, 10, 0.3, 3)
    now = _run(12.2, 10, 0.3, 4)
    assert latency.inferences_to_settle(now, base, 0.2) is None
    judged, warnings, notes = _judged(now, base)
    assert "spread too wide for any -n here to settle it" in (warnings + notes)[0]
