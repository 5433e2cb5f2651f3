"""Request-level serving simulation on SimPy: arrivals, a scheduler forming iteration batches, a
KV memory manager, a prefix cache and speculative decoding, with each iteration's time taken
from the chip model (:func:`infersim.simulator.inference.iteration_time`).

One run owns its SimPy environment, its random streams (one per quantity, spawned from the
seed), its request ids and its memo of iteration costs: same seed, same result; nothing is
shared between runs except what the caller passes in (a :class:`StepCost` to reuse in a sweep).

The KV pool per chip is DRAM × (1 − reserve fraction) − resident weights (this chip's TP/PP
shard, minus what is offloaded, plus a speculative draft model) − the peak activations of the
largest iteration. Requests that could never fit alone, or whose prompt exceeds an unchunked
scheduler's token budget, are rejected at arrival; every other request finishes.

Simplifications, stated: an iteration's prefill chunks are costed as equal chunks of their mean
length at their mean prior context, and its decodes at their mean context (attention is linear
in context, so the decode mean is exact for traffic); sliding-window KV caps are ignored; a
draft model runs its K steps at the target's context; swap transfers stall the iteration that
issues them.

The parts: :mod:`.config` (:class:`ServingConfig`), :mod:`.workload` (arrivals and lengths),
:mod:`.scheduler` (batching policies), :mod:`.kv` (KV pool and prefix cache), :mod:`.cost` (the
step-cost oracle), :mod:`.metrics` (per-request records and the summary) and :mod:`.engine` (the
SimPy processes of one run). This module holds the entry points.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from infersim.arch_models.chip import Chip
from infersim.errors import ConfigError
from infersim.simulator.defaults import DEFAULT_ENGINE
from infersim.simulator.inference import plan_for
from infersim.simulator.serving.config import ServingConfig
from infersim.simulator.serving.cost import StepCost, bucket, kv_budget
from infersim.simulator.serving.engine import Progress, Run
from infersim.simulator.serving.kv import ContiguousKV, PagedKV
from infersim.simulator.serving.metrics import SLO, summarize, timeline_sample
from infersim.simulator.serving.scheduler import (
    ChunkedPrefill,
    ContinuousBatching,
    StaticBatching,
)
from infersim.simulator.serving.workload import Fixed, Poisson, Workload
from infersim.workloads.models import ModelConfig
from infersim.workloads.techniques import Plan, TechniqueStack

__all__ = [
    "SLO",
    "ChunkedPrefill",
    "ContiguousKV",
    "ContinuousBatching",
    "PagedKV",
    "ServingConfig",
    "ServingResult",
    "StaticBatching",
    "StepCost",
    "SweepResult",
    "Workload",
    "bucket",
    "kv_budget",
    "simulate_serving",
    "sweep_rate",
]


@dataclass(frozen=True)
class ServingResult:
    """One run: the aggregates (``summary``, JSON-ready), one row per request and one per
    iteration (see :data:`~infersim.simulator.serving.metrics.TIMELINE_COLUMNS`)."""

    summary: dict[str, Any]
    requests: pd.DataFrame
    timeline: pd.DataFrame
    notes: tuple[str, ...] = ()

    def to_dict(self, timeline_points: int = 200) -> dict[str, Any]:
        """The summary, the notes and a timeline sampled to ``timeline_points`` rows."""
        return {**self.summary, "notes": list(self.notes),
                "timeline": timeline_sample(self.timeline, timeline_points)}


def _plan(chip: Chip, model: ModelConfig, techniques: str | TechniqueStack | None
          ) -> tuple[Plan, list[str]]:
    plan, notes = plan_for(chip, model, techniques=techniques)
    return plan, list(notes)


def simulate_serving(
    chip: Chip,
    model: ModelConfig,
    config: ServingConfig,
    techniques: str | TechniqueStack | None = None,
    engine: str = DEFAULT_ENGINE,
    progress: Progress | None = None,
    cost: StepCost | None = None,
) -> ServingResult:
    """Simulate serving ``config.workload`` on ``chip`` with ``model`` and a technique stack.

    ``engine`` costs each distinct iteration once (the analytic engine unless named; the
    roofline is the fast baseline). ``cost`` reuses another run's iteration-cost memo (same
    chip, plan and engine); by default the run makes its own. ``progress`` is called now and
    then with (done, total) requests.

    Raises:
        ConfigError: a bad workload or trace, no room for the KV cache, swap without a host
            link, or an unusable technique stack (as :func:`infersim.simulator.inference.
            plan_for`).
    """
    plan, notes = _plan(chip, model, techniques)
    if cost is None:
        cost = StepCost(chip, plan, engine, config.bucket_steps_per_octave)
    run = Run(chip, plan, config, cost, progress)
    frame, timeline, totals = run.run()
    summary = summarize(frame, timeline, totals, config.slo)
    summary = {
        "chip": chip.name, "model": model.name,
        "techniques": techniques.name if isinstance(techniques, TechniqueStack)
        else (techniques or "baseline"),
        "scheduler": config.scheduler.kind, "kv": config.kv.kind, "seed": config.seed,
        **summary,
    }
    rejected = summary["requests_rejected"]
    if rejected:
        notes.append(f"{rejected} request(s) rejected at arrival: longer than the KV pool or "
                     f"than the scheduler's token budget")
    if summary["requests_unfinished"]:
        notes.append(f"{summary['requests_unfinished']} request(s) did not finish")
    return ServingResult(summary=summary, requests=frame, timeline=timeline, notes=tuple(notes))


@dataclass(frozen=True)
class SweepResult:
    """The highest arrival rate (requests/s) whose run met the SLO, and every run tried."""

    rate_per_s: float
    runs: list[dict[str, Any]] = field(default_factory=list)


def sweep_rate(
    chip: Chip,
    model: ModelConfig,
    config: ServingConfig,
    techniques: str | TechniqueStack | None = None,
    engine: str = DEFAULT_ENGINE,
    tolerance: float = 0.05,
    max_runs: int = 24,
    on_run: Callable[[dict[str, Any]], None] | None = None,
) -> SweepResult:
    """Bisect the arrival rate for the largest one at which at least ``slo.attainment`` of the
    requests meet the SLO; the workload's rate is the first guess, bracketed by doubling or
    halving, then bisected (geometrically) until the bracket is within ``tolerance``. Every run
    uses the same seed and shares one cost memo. ``rate_per_s`` is 0 when even the lowest rate
    tried fails.

    Raises:
        ConfigError: the workload is not ``poisson`` or ``fixed`` arrivals; as
            :func:`simulate_serving`.
    """
    arrivals = config.workload.arrivals
    if not isinstance(arrivals, Poisson | Fixed):
        raise ConfigError("--sweep-rate needs poisson:RATE or fixed:RATE arrivals")
    plan, _ = _plan(chip, model, techniques)
    cost = StepCost(chip, plan, engine, config.bucket_steps_per_octave)
    runs: list[dict[str, Any]] = []

    def passes(rate: float) -> bool:
        workload = config.workload.model_copy(
            update={"arrivals": arrivals.model_copy(update={"rate_per_s": rate})})
        result = simulate_serving(chip, model, config.model_copy(update={"workload": workload}),
                                  techniques, engine, cost=cost)
        s = result.summary
        ok = s["slo_attainment"] >= config.slo.attainment
        row = {"rate_per_s": rate, "passes": ok, "slo_attainment": s["slo_attainment"],
               "goodput_requests_per_s": s["goodput_requests_per_s"],
               "throughput_requests_per_s": s["throughput_requests_per_s"],
               "ttft_p90_s": s["ttft_s"]["p90"], "tpot_p90_s": s["tpot_s"]["p90"]}
        runs.append(row)
        if on_run is not None:
            on_run(row)
        return ok

    rate = arrivals.rate_per_s
    if passes(rate):
        lo, hi = rate, None
        while hi is None and len(runs) < max_runs:
            if passes(lo * 2):
                lo *= 2
            else:
                hi = lo * 2
    else:
        lo, hi = None, rate
        while lo is None and len(runs) < max_runs:
            if passes(hi / 2):
                lo = hi / 2
            else:
                hi /= 2
    if lo is None or hi is None:
        return SweepResult(rate_per_s=lo or 0.0, runs=runs)
    while hi / lo > 1 + tolerance and len(runs) < max_runs:
        mid = math.sqrt(lo * hi)
        if passes(mid):
            lo = mid
        else:
            hi = mid
    return SweepResult(rate_per_s=lo, runs=runs)
