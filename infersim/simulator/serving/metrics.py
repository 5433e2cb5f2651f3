"""Serving metrics: per-request latencies and the run's aggregates (percentiles, throughput,
goodput under an SLO, KV and batch timelines, Little's law), as DataFrames and a JSON dict."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from infersim.simulator.serving.scheduler import Request, State

PERCENTILES = (50, 90, 99)
"""The latency percentiles reported."""

TIMELINE_POINTS = 200
"""Timeline rows kept in the JSON summary (evenly spaced over the iterations)."""


class SLO(BaseModel):
    """A latency objective per request; goodput counts the requests that meet both bounds."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    ttft_s: float = Field(default=1.0, gt=0, le=1e6, description="Time to first token bound (s)")
    tpot_s: float = Field(default=0.05, gt=0, le=1e6, description="Time per output token bound (s)")
    attainment: float = Field(
        default=0.9, gt=0, le=1,
        description="Fraction of requests that must meet the SLO for a rate to pass (sweep)",
    )


TIMELINE_COLUMNS = (
    "start_s", "duration_s", "prefill_sequences", "prefill_tokens", "decode_sequences",
    "batch_size", "running", "waiting", "kv_allocated_tokens", "kv_stored_tokens",
)
"""One row per iteration: its start and length (simulated s), what it ran, the queues after
scheduling, and the KV tokens allocated and actually holding data."""


def request_frame(requests: list[Request]) -> pd.DataFrame:
    """One row per request: lengths (tokens), state, and times/latencies in seconds (NaN when
    not reached). TPOT is (finish − first token) / (output − 1), NaN for one-token outputs."""
    def col(name: str) -> np.ndarray:
        return np.array([getattr(r, name) for r in requests], dtype=np.float64)

    arrival, first, finish = col("arrival_s"), col("first_token_s"), col("finish_s")
    output = col("output_tokens")
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(output > 1, (finish - first) / (output - 1), np.nan)
    return pd.DataFrame({
        "id": [r.id for r in requests],
        "state": [r.state.value for r in requests],
        "arrival_s": arrival,
        "prompt_tokens": [r.prompt_tokens for r in requests],
        "output_tokens": [r.output_tokens for r in requests],
        "generated_tokens": [r.generated for r in requests],
        "cached_prompt_tokens": [r.cached_tokens for r in requests],
        "preemptions": [r.preemptions for r in requests],
        "queue_s": col("scheduled_s") - arrival,
        "ttft_s": first - arrival,
        "tpot_s": tpot,
        "e2e_s": finish - arrival,
    })


def distribution(values: np.ndarray | pd.Series) -> dict[str, float | None]:
    """``{mean, p50, p90, p99}`` of the finite values (None when there are none)."""
    arr = np.asarray(values, dtype=np.float64)
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        return {"mean": None, **{f"p{p}": None for p in PERCENTILES}}
    out: dict[str, float | None] = {"mean": float(arr.mean())}
    for p, v in zip(PERCENTILES, np.percentile(arr, PERCENTILES), strict=True):
        out[f"p{p}"] = float(v)
    return out


def _weighted_mean(values: pd.Series, weights: pd.Series) -> float:
    total = float(weights.sum())
    return float((values * weights).sum() / total) if total > 0 else 0.0


@dataclass(frozen=True)
class RunTotals:
    """Counters the engine keeps that are not in the per-request or timeline rows."""

    kv_capacity_tokens: int
    kv_bytes_per_token: float
    in_system_area_s: float
    preemptions: int
    swap_s: float
    prefix_hit_tokens: int
    prefix_lookup_tokens: int
    spec_passes: int
    spec_tokens: int
    memo_entries: int
    memo_calls: int


def summarize(frame: pd.DataFrame, timeline: pd.DataFrame, totals: RunTotals, slo: SLO
              ) -> dict[str, Any]:
    """The JSON-ready aggregates of one run: request counts, duration and throughput over the
    span from the first arrival to the last completion (s, req/s, output tok/s), goodput and
    SLO attainment, ``{mean, p50, p90, p99}`` of queueing, TTFT, TPOT and end-to-end latency
    (s), KV utilization and waste and batch size (means weighted by iteration time), and
    Little's law (time-average requests in system vs arrival rate × mean latency)."""
    done = frame[frame["state"] == State.FINISHED.value]
    accepted = frame[frame["state"] != State.REJECTED.value]
    start = float(accepted["arrival_s"].min()) if len(accepted) else 0.0
    end = float(done["arrival_s"].add(done["e2e_s"]).max()) if len(done) else start
    duration = max(end - start, 0.0)

    def rate(count: int) -> float:
        return count / duration if duration > 0 else 0.0

    tpot_ok = done["tpot_s"].isna() | (done["tpot_s"] <= slo.tpot_s)
    good = int(((done["ttft_s"] <= slo.ttft_s) & tpot_ok).sum())
    output_tokens = int(done["generated_tokens"].sum())
    busy = timeline["duration_s"]
    capacity = max(totals.kv_capacity_tokens, 1)
    allocated = timeline["kv_allocated_tokens"]
    waste = (allocated - timeline["kv_stored_tokens"]).clip(lower=0)
    in_system_mean = totals.in_system_area_s / duration if duration > 0 else 0.0
    arrival_rate = rate(len(accepted))
    e2e_mean = float(done["e2e_s"].mean()) if len(done) else 0.0
    little = arrival_rate * e2e_mean
    return {
        "requests_total": len(frame),
        "requests_completed": len(done),
        "requests_rejected": int((frame["state"] == State.REJECTED.value).sum()),
        "requests_unfinished": len(accepted) - len(done),
        "requests_preempted": int((frame["preemptions"] > 0).sum()),
        "preemptions": totals.preemptions,
        "duration_s": duration,
        "iterations": len(timeline),
        "busy_s": float(busy.sum()),
        "throughput_requests_per_s": rate(len(done)),
        "throughput_tokens_per_s": rate(output_tokens),
        "output_tokens": output_tokens,
        "output_tokens_requested": int(accepted["output_tokens"].sum()),
        "goodput_requests_per_s": rate(good),
        "slo": slo.model_dump(),
        "slo_attainment": good / len(frame) if len(frame) else 0.0,
        "ttft_s": distribution(done["ttft_s"]),
        "tpot_s": distribution(done["tpot_s"]),
        "e2e_s": distribution(done["e2e_s"]),
        "queue_s": distribution(done["queue_s"]),
        "kv_capacity_tokens": totals.kv_capacity_tokens,
        "kv_capacity_bytes": totals.kv_capacity_tokens * totals.kv_bytes_per_token,
        "kv_utilization_mean": _weighted_mean(allocated / capacity, busy),
        "kv_utilization_max": float((allocated / capacity).max()) if len(timeline) else 0.0,
        "kv_stored_fraction_mean": _weighted_mean(timeline["kv_stored_tokens"] / capacity, busy),
        "kv_waste_fraction_mean": _weighted_mean(waste / allocated.where(allocated > 0, 1), busy),
        "batch_size_mean": _weighted_mean(timeline["batch_size"], busy),
        "batch_size_max": int(timeline["batch_size"].max()) if len(timeline) else 0,
        "concurrency_mean": _weighted_mean(timeline["running"], busy),
        "concurrency_max": int(timeline["running"].max()) if len(timeline) else 0,
        "littles_law": {
            "in_system_mean": in_system_mean,
            "arrival_rate_per_s": arrival_rate,
            "e2e_mean_s": e2e_mean,
            "relative_error": abs(in_system_mean - little) / little if little > 0 else 0.0,
        },
        "swap_s": totals.swap_s,
        "prefix_cache_hit_tokens": totals.prefix_hit_tokens,
        "prefix_cache_hit_rate": (totals.prefix_hit_tokens / totals.prefix_lookup_tokens
                                  if totals.prefix_lookup_tokens else 0.0),
        "spec_tokens_per_pass_mean": (totals.spec_tokens / totals.spec_passes
                                      if totals.spec_passes else None),
        "cost_memo": {"entries": totals.memo_entries, "calls": totals.memo_calls},
    }


def timeline_sample(timeline: pd.DataFrame, points: int = TIMELINE_POINTS) -> dict[str, list]:
    """At most ``points`` evenly spaced timeline rows, column by column (for JSON)."""
    if len(timeline) > points:
        rows = np.unique(np.linspace(0, len(timeline) - 1, points).round().astype(int))
        timeline = timeline.iloc[rows]
    return {c: [v if not isinstance(v, float) or math.isfinite(v) else None
                for v in timeline[c].tolist()] for c in timeline.columns}
