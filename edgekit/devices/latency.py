"""Latency statistics for ``edgekit benchmark``, shared with the Dev Board runner.

Standard library only and Python 3.7 syntax (the Coral Dev Board's Mendel ships Python 3.7), with
no other edgekit import, so a runner on the board can copy or import this one file. The clock is
a parameter: tests drive :func:`measure` with a fake, deterministic one.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Dict, List, Optional, Sequence

PERCENTILES = (50, 90, 99)
# --compare flags a regression when p50 latency grows by more than this share. p50 rather than the
# mean (pulled by stalls) or the min (too optimistic); 20%, not pycoral's 30%, because p50 over
# >= 100 invocations moves by a few percent between runs on an idle machine, while a real slowdown
# (a layer falling off the Edge TPU, a lost thread) costs far more than 20%.
DEFAULT_MAX_SLOWDOWN = 0.20


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


def measure(run: Callable[[], object], n: int, warmup: int = 0,
            clock: Callable[[], float] = time.perf_counter) -> Dict[str, object]:
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
    result = {"first_ms": first_ms, "latencies_ms": latencies}  # type: Dict[str, object]
    result.update(summarize(latencies))
    return result


def compare(current: Dict[str, float], baseline: Dict[str, float],
            max_slowdown: float = DEFAULT_MAX_SLOWDOWN) -> Dict[str, object]:
    """Is ``current`` (a summarize() dict) a regression against ``baseline``? Judged on p50 latency."""
    base, now = float(baseline["p50_ms"]), float(current["p50_ms"])
    change = (now - base) / base if base > 0 else 0.0
    return {"metric": "p50_ms", "baseline_ms": base, "current_ms": now, "change": change,
            "max_slowdown": max_slowdown, "regression": change > max_slowdown}


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

    return {"platform": platform.platform(), "processor": platform.machine(), "cpus": os.cpu_count(),
            "governors": sorted(set(governors)) if governors else None}


def governor_warnings(governors: Optional[List[str]]) -> List[str]:
    """A warning when a CPU's frequency governor is not ``performance``: latencies then move with the clock."""
    if governors and any(g != "performance" for g in governors):
        return ["CPU frequency governor is %s, not performance: latencies vary with the clock "
                "(sudo cpupower frequency-set -g performance for stable numbers)" % "/".join(sorted(set(governors)))]
    return []
