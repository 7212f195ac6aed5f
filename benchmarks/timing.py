"""Timing helper shared by the benchmark scripts."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_of(fn: Callable[[], object], repeat: int = 7) -> float:
    """Best wall time of ``repeat`` calls, after one warm-up call (page cache, lazy imports)."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)
