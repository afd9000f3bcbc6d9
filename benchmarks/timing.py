"""Timing helper shared by the benchmark scripts (the script's folder is on sys.path when run)."""

from __future__ import annotations

import time


def best_of(repeat: int, run) -> float:
    """The fastest of `repeat` calls of `run()`, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)
