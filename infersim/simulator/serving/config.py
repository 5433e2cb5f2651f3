"""The configuration of one serving run: workload, scheduler, KV manager, SLO, seed and the
resolution of the iteration-cost memo (typed data, no side effects)."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

from infersim.simulator.serving.cost import BUCKET_STEPS_PER_OCTAVE
from infersim.simulator.serving.kv import KVConfig, PagedKV
from infersim.simulator.serving.metrics import SLO
from infersim.simulator.serving.scheduler import ContinuousBatching, Scheduler
from infersim.simulator.serving.workload import Workload


class ServingConfig(BaseModel):
    """Everything one serving run needs besides the chip, the model and the techniques."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    workload: Workload = Field(description="Arrivals and request lengths")
    scheduler: Scheduler = Field(default_factory=ContinuousBatching, description="Batching policy")
    kv: KVConfig = Field(default_factory=PagedKV, description="KV-cache memory manager")
    slo: SLO = Field(default_factory=SLO, description="Latency objective for goodput")
    seed: int = Field(default=0, ge=0, le=2**63 - 1, description="Seed of every random stream")
    bucket_steps_per_octave: int = Field(
        default=BUCKET_STEPS_PER_OCTAVE, ge=0, le=1024,
        description="Cost memo resolution: lengths rounded to this many steps per power of two "
                    "(0 = exact, no rounding)",
    )


SECONDS_PER_ITERATION = 8e-6
"""Wall time the serving engine spends per simulated iteration once its costs are memoized
(measured: 200,000 decode iterations of one request in 1.5 s)."""


def estimated_iterations(config: ServingConfig) -> int | None:
    """About how many iterations ``config`` simulates: the output tokens over the batch (at
    least the longest output), plus the prompt tokens over the token budget; None for trace
    lengths (known only once the trace is read)."""
    from infersim.simulator.serving.workload import (
        FixedLength,
        LognormalLength,
        UniformLength,
    )

    def mean_and_longest(dist: object) -> tuple[float, int] | None:
        if isinstance(dist, FixedLength):
            return float(dist.tokens), dist.tokens
        if isinstance(dist, UniformLength):
            return (dist.lo + dist.hi) / 2, dist.hi
        if isinstance(dist, LognormalLength):
            longest = dist.upper_bound
            return min(dist.median * math.exp(dist.sigma**2 / 2), float(longest)), longest
        return None  # trace lengths

    work = config.workload
    out, prompt = mean_and_longest(work.output_len), mean_and_longest(work.prompt_len)
    if work.requests is None or out is None or prompt is None:
        return None
    n = work.requests
    longest = min(out[1], work.max_output_tokens or out[1])
    batch = min(config.scheduler.max_batch_size, n)
    budget = getattr(config.scheduler, "max_tokens_per_iteration", 8192)
    decode = max(float(longest), n * min(out[0], longest) / batch)
    return math.ceil(decode + n * (prompt[0] + work.shared_prefix_tokens) / budget)
