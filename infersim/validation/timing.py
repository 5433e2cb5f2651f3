"""Host-side timing: clocks and the summary of repeated samples (median and spread).

On a shared machine wall time counts the time a neighbour holds the core; the ``cpu`` clock
(this process's CPU time) does not, and with one torch thread it is the kernel's own run time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

Timer = Literal["wall", "cpu"]
TIMERS: tuple[str, ...] = ("wall", "cpu")

_CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


def clock(timer: Timer) -> Callable[[], float]:
    """The clock function for ``timer`` (seconds).

    Raises:
        ValueError: an unknown timer.
    """
    try:
        return _CLOCKS[timer]
    except KeyError:
        raise ValueError(f"timer {timer!r} unknown; allowed: {', '.join(TIMERS)}") from None


Statistic = Literal["median", "min"]
STATISTICS: tuple[str, ...] = ("median", "min")


@dataclass(frozen=True, slots=True)
class Measurement:
    """Repeated timings of one kernel: median, minimum and spread, in seconds, and which of
    median and minimum is *the* measurement (``measured_s``).

    ``spread`` is the interquartile range over the median (0.1 = the middle half of the samples
    lies within 10% of the median).
    """

    median_s: float
    min_s: float
    spread: float
    reps: int
    statistic: Statistic = "median"

    @property
    def measured_s(self) -> float:
        """The median or the minimum, as ``statistic`` says."""
        return self.min_s if self.statistic == "min" else self.median_s

    @classmethod
    def of(cls, samples_s: Sequence[float], statistic: Statistic = "median") -> Measurement:
        """Summarize raw samples (seconds).

        Raises:
            ValueError: no samples, a sample that is not > 0, or an unknown statistic.
        """
        if not samples_s:
            raise ValueError("no timing samples")
        if statistic not in STATISTICS:
            raise ValueError(f"statistic {statistic!r} unknown; allowed: {', '.join(STATISTICS)}")
        arr = np.asarray(samples_s, dtype=float)
        if not np.all(arr > 0):
            raise ValueError(f"timing samples must be > 0, got min {arr.min()}")
        q1, med, q3 = np.percentile(arr, [25, 50, 75])
        return cls(float(med), float(arr.min()), float((q3 - q1) / med), len(arr), statistic)


@dataclass(frozen=True, slots=True)
class Step:
    """Where a timed run stands, for a progress bar: ``done`` of ``total`` units of work
    (seconds of expected run time on the cpu backend and the host microbenchmarks, kernels
    elsewhere; ``total`` None while not known) and what runs now."""

    done: float
    total: float | None
    what: str


Progress = Callable[[Step], None]
"""A progress callback, called as a run's work advances."""


def time_once(fn: Callable[[], object], timer: Timer) -> float:
    """Seconds one call of ``fn`` takes on ``timer``'s clock."""
    now = clock(timer)
    start = now()
    fn()
    return now() - start


def repeat(fn: Callable[[], object], reps: int, warmup: int, timer: Timer) -> list[float]:
    """``warmup`` untimed calls, then ``reps`` timed ones; the samples in seconds."""
    for _ in range(warmup):
        fn()
    return [time_once(fn, timer) for _ in range(reps)]
