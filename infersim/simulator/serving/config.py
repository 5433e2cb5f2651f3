"""The configuration of one serving run: workload, scheduler, KV manager, SLO, seed and the
resolution of the iteration-cost memo (typed data, no side effects)."""

from __future__ import annotations

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
