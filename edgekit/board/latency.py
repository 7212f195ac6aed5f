"""Latency statistics for ``edgekit benchmark``, shared with the Dev Board runner.

Standard library only and Python 3.7 syntax (the Coral Dev Board's Mendel ships Python 3.7), with
no other edgekit import, so a runner on the board can copy or import this one file. The clock is
a parameter: tests drive :func:`measure` with a fake, deterministic one.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

PERCENTILES = (50, 90, 99)
# --compare flags a regression when p50 latency grows by more than this share. p50 rather than the
# mean (pulled by stalls) or the min (too optimistic); 20%, not pycoral's 30%, because p50 over
# >= 100 invocations moves by a few percent between runs on an idle machine, while a real slowdown
# (a layer falling off the Edge TPU, a lost thread) costs far more than 20%.
DEFAULT_MAX_SLOWDOWN = 0.20
MIN_SAMPLES = 8  # the fewest latencies whose median has a 97.5% order-statistic interval (median_interval)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of already sorted values, interpolated linearly (numpy's default)."""
    if not sorted_values:
        return float("nan")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(latencies_ms: Sequence[float]) -> Dict[str, float]:
    """min, p50, p90, p99, max, mean (ms) and throughput (invocations per second, one after another)."""
    values = sorted(latencies_ms)
    if not values:
        raise ValueError("no latencies to summarize")
    mean = sum(values) / len(values)
    out = {"count": len(values), "min_ms": values[0], "max_ms": values[-1], "mean_ms": mean}
    for q in PERCENTILES:
        out["p%d_ms" % q] = percentile(values, q)
    out["throughput_per_s"] = 1000.0 / mean if mean > 0 else float("inf")
    return out


def measure(
    run: Callable[[], object], n: int, warmup: int = 0, clock: Callable[[], float] = time.perf_counter
) -> Dict[str, Union[float, List[float]]]:
    """Time ``run``: the first call apart, then ``warmup`` untimed calls, then ``n`` timed ones.

    Returns ``{"first_ms", "latencies_ms": [...], **summarize(latencies_ms)}``; ``clock`` returns seconds.
    """
    if n < 1:
        raise ValueError("n must be at least 1")
    start = clock()
    run()
    first_ms = (clock() - start) * 1000.0
    for _ in range(warmup):
        run()
    latencies = []  # type: List[float]
    for _ in range(n):
        start = clock()
        run()
        latencies.append((clock() - start) * 1000.0)
    result = {"first_ms": first_ms, "latencies_ms": latencies}  # type: Dict[str, Union[float, List[float]]]
    result.update(summarize(latencies))
    return result


def _binomial_half_cdf(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2), exact (log space: n may be thousands)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    lg = math.lgamma(n + 1) - n * math.log(2.0)
    terms = [lg - math.lgamma(i + 1) - math.lgamma(n - i + 1) for i in range(k + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * math.fsum(math.exp(t - top) for t in terms))


def median_interval(values: Sequence[float], confidence: float = 0.975) -> Optional[Tuple[float, float]]:
    """A distribution-free interval for the median: order statistics whose coverage the binomial law gives.

    The median lies between the l-th and (n+1-l)-th smallest values with probability
    1 - 2 P(Bin(n, 1/2) < l), whatever the latencies' distribution (stalls and all). None when there are
    too few values for ``confidence`` (fewer than 8 at 97.5%).
    """
    x = sorted(values)
    n = len(x)
    alpha = 1.0 - confidence
    best = None
    for low in range(1, n // 2 + 1):
        if 2.0 * _binomial_half_cdf(low - 1, n) <= alpha:
            best = low
        else:
            break
    if best is None:
        return None
    return x[best - 1], x[n - best]


def compare(
    current: Mapping[str, object], baseline: Mapping[str, object], max_slowdown: float = DEFAULT_MAX_SLOWDOWN
) -> Dict[str, object]:
    """Is ``current`` a regression against ``baseline``? Judged on p50 latency, with an interval when both
    runs carry their ``latencies_ms``.

    With the samples, the ratio of medians gets a 95% interval (each median's 97.5% order-statistic
    interval, combined at their far ends): ``regression`` only when even its low end exceeds
    1 + ``max_slowdown``, ``verdict`` ``uncertain`` when the interval spans it (too few or too noisy
    samples to tell: more ``-n`` settles it, :func:`inferences_to_settle` says about how many); also, without an
    interval, when either run has too few latencies for one (fewer than 8). Without samples in the baseline (a
    file from an older edgekit), the two p50 values alone decide, and ``verdict`` says ``point``.
    """
    base, now = float(baseline["p50_ms"]), float(current["p50_ms"])  # type: ignore[arg-type]
    change = (now - base) / base if base > 0 else 0.0
    out = {
        "metric": "p50_ms",
        "baseline_ms": base,
        "current_ms": now,
        "change": change,
        "max_slowdown": max_slowdown,
        "change_interval": None,
        "confidence": None,
    }  # type: Dict[str, object]
    limit = 1.0 + max_slowdown
    now_samples = list(current.get("latencies_ms") or [])  # type: ignore[call-overload]
    base_samples = list(baseline.get("latencies_ms") or [])  # type: ignore[call-overload]
    if not now_samples or not base_samples:
        out.update(verdict="point", regression=change > max_slowdown)
        return out
    now_ci, base_ci = median_interval(now_samples), median_interval(base_samples)
    if now_ci is None or base_ci is None or base_ci[0] <= 0:  # too few latencies for a 95% interval
        out.update(verdict="uncertain", regression=False)
        return out
    low, high = now_ci[0] / base_ci[1], now_ci[1] / base_ci[0]
    out.update(change_interval=[low - 1.0, high - 1.0], confidence=0.95)
    if low > limit:
        out.update(verdict="regression", regression=True)
    elif high > limit:
        out.update(verdict="uncertain", regression=False)
    else:
        out.update(verdict="ok", regression=False)
    return out


def inferences_to_settle(
    current: Dict[str, object], baseline: Dict[str, object], max_slowdown: float = DEFAULT_MAX_SLOWDOWN
) -> Optional[int]:
    """About how many inferences (``-n``) this run would need for :func:`compare`'s interval to leave the limit
    (at least :data:`MIN_SAMPLES`), assuming its median stays and its latencies spread as they did (as the
    baseline's when it has too few to say), with 90% power: the 97.5% interval of a median of n values spans the
    quantiles 1/2 -+ 1.12/sqrt(n) (the binomial law's normal approximation), and its end falls short of that by
    up to 0.64/sqrt(n) more one time in ten; quantiles read off that spread. None when the baseline's own
    interval is too wide for any ``-n`` here, or the baseline has too few latencies itself."""
    base_samples = sorted(baseline.get("latencies_ms") or [])  # type: ignore[call-overload]
    now_samples = sorted(current.get("latencies_ms") or [])  # type: ignore[call-overload]
    base, now = float(baseline["p50_ms"]), float(current["p50_ms"])  # type: ignore[arg-type]
    base_ci = median_interval(base_samples)
    if base_ci is None or base_ci[0] <= 0 or now <= 0:
        return None
    spread = now_samples if len(now_samples) >= MIN_SAMPLES else base_samples
    middle = _quantile(spread, 0.5)
    limit = 1.0 + max_slowdown
    slower = now / base > limit

    def settled(n: int) -> bool:
        h = min(0.5, (1.1207 + 0.6408) / math.sqrt(n))  # z(0.9875) / 2 + z(0.9) / 2
        if slower:
            return now * _quantile(spread, 0.5 - h) / middle / base_ci[1] > limit
        return now * _quantile(spread, 0.5 + h) / middle / base_ci[0] < limit

    low, high = MIN_SAMPLES, 1 << 20
    if not settled(high):
        return None
    while low < high:  # settled(n) holds from some n on: the interval narrows as n grows
        mid = (low + high) // 2
        low, high = (low, mid) if settled(mid) else (mid + 1, high)
    return low


def _quantile(ordered: Sequence[float], p: float) -> float:
    """The ``p`` quantile of sorted values, linearly interpolated (numpy's default)."""
    at = p * (len(ordered) - 1)
    i = int(math.floor(at))
    j = min(i + 1, len(ordered) - 1)
    return float(ordered[i]) + (at - i) * (float(ordered[j]) - float(ordered[i]))


def cpu_governors(root: str = "/sys/devices/system/cpu") -> Optional[List[str]]:
    """The cpufreq scaling governor of each CPU (None where sysfs does not say: not Linux, a VM, a container)."""
    import glob

    found = []
    for path in sorted(glob.glob(root + "/cpu[0-9]*/cpufreq/scaling_governor")):
        try:
            with open(path) as f:
                found.append(f.read().strip())
        except OSError:
            continue
    return found or None


def default_threads() -> int:
    """CPU interpreter threads when none are asked for: one per core, at most 4."""
    import os

    return max(1, min(4, os.cpu_count() or 1))


def machine(governors: Optional[List[str]] = None) -> Dict[str, object]:
    """What a benchmark document says about the machine it ran on (``governors``: :func:`cpu_governors`)."""
    import os
    import platform

    return {
        "platform": platform.platform(),
        "processor": platform.machine(),
        "cpus": os.cpu_count(),
        "governors": sorted(set(governors)) if governors else None,
    }


def governor_warnings(governors: Optional[List[str]]) -> List[str]:
    """A warning when a CPU's frequency governor is not ``performance``: latencies then move with the clock."""
    if governors and any(g != "performance" for g in governors):
        return [
            "CPU frequency governor is %s, not performance: latencies vary with the clock "
            "(sudo cpupower frequency-set -g performance for stable numbers)" % "/".join(sorted(set(governors)))
        ]
    return []
