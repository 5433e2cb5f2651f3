"""Cost values the engines return. Costs are returned, never stored on the ops or the chip."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Bound = Literal[
    "compute", "memory", "sram", "vector", "link", "host", "pipeline", "overhead"
]
"""What set an op's time: the array, DRAM, the shared SRAM feeding the cores, the vector unit,
the chip or host link, a pipeline bubble, or only the fixed launch overhead."""


@dataclass(frozen=True, slots=True)
class OpCost:
    """The cost of one repetition of an operator on a chip (multiply by ``count`` for all).

    Times are seconds, traffic bytes, energy picojoules. ``bound`` names the resource that set
    the time.
    """

    name: str
    kind: str
    count: int
    flops: float
    dram_bytes: float
    compute_s: float
    memory_s: float
    time_s: float
    bound: Bound
    cycles: float
    energy_pj: float
    link_bytes: float = 0.0
    dataflow: str = ""
    utilization: float = 0.0
    onchip_bytes: float = 0.0
    """Activation bytes the chip's schedule kept on chip: read from the buffer instead of DRAM,
    or left there for the next operator instead of stored (see
    :mod:`infersim.simulator.schedule`)."""

    @property
    def intensity(self) -> float:
        """Operational intensity in FLOP per DRAM byte (the roofline x coordinate)."""
        return self.flops / self.dram_bytes if self.dram_bytes else float("inf")

    @property
    def achieved_flops(self) -> float:
        """FLOP/s achieved (the roofline y coordinate)."""
        return self.flops / self.time_s if self.time_s else 0.0

    @property
    def total_time_s(self) -> float:
        """Time of all ``count`` repetitions."""
        return self.time_s * self.count

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready fields."""
        return asdict(self)


@dataclass(frozen=True)
class MemoryReport:
    """Resident bytes against DRAM capacity."""

    weights_bytes: float
    kv_bytes: float
    activation_bytes: float
    capacity_bytes: float

    @property
    def total_bytes(self) -> float:
        """Everything resident."""
        return self.weights_bytes + self.kv_bytes + self.activation_bytes

    @property
    def fits(self) -> bool:
        """Whether it all fits in one chip's DRAM."""
        return self.total_bytes <= self.capacity_bytes

    @property
    def shortfall_bytes(self) -> float:
        """How much does not fit (0 when it fits)."""
        return max(0.0, self.total_bytes - self.capacity_bytes)

    @property
    def chips_needed(self) -> int:
        """Chips whose combined DRAM holds it (1 when it fits)."""
        return max(1, -(-int(self.total_bytes) // int(self.capacity_bytes)))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready fields, derived ones included."""
        return {
            **asdict(self),
            "total_bytes": self.total_bytes,
            "fits": self.fits,
            "shortfall_bytes": self.shortfall_bytes,
            "chips_needed": self.chips_needed,
        }


@dataclass(frozen=True)
class PhaseCost:
    """One prefill or one decode step of a model on a chip."""

    chip: str
    model: str
    phase: str
    batch: int
    prompt_len: int
    context_len: int
    engine: str
    latency_s: float
    tokens: float
    memory: MemoryReport
    ops: list[OpCost] = field(default_factory=list)
    techniques: str = "baseline"
    chips: int = 1
    tokens_per_seq: float = 1.0
    notes: tuple[str, ...] = ()
    ways_out: tuple[WayOut, ...] = ()
    """When the step does not fit: the same question asked other ways, each simulated (see
    :mod:`infersim.simulator.ways_out`)."""

    @property
    def tokens_per_s(self) -> float:
        """Tokens processed (prefill) or generated (decode) per second."""
        return self.tokens / self.latency_s if self.latency_s else 0.0

    @property
    def energy_per_token_j(self) -> float:
        """Dynamic energy per token processed or generated, over all chips, in joules."""
        return self.energy_j / self.tokens if self.tokens else 0.0

    @property
    def bound(self) -> str:
        """The bound of the ops that take most of the time."""
        shares = self.time_by_bound()
        return max(shares, key=shares.__getitem__) if shares else "overhead"

    @property
    def ttft_s(self) -> float | None:
        """Time to first token (prefill only)."""
        return self.latency_s if self.phase == "prefill" else None

    @property
    def tpot_s(self) -> float | None:
        """Time per output token of one sequence (decode only; a speculative step yields
        ``tokens_per_seq`` tokens on average)."""
        return self.latency_s / self.tokens_per_seq if self.phase == "decode" else None

    @property
    def flops(self) -> float:
        """FLOPs of one chip's share of the step (``ops`` is one chip's work)."""
        return sum(c.flops * c.count for c in self.ops)

    @property
    def dram_bytes(self) -> float:
        """DRAM traffic of one chip's share of the step."""
        return sum(c.dram_bytes * c.count for c in self.ops)

    @property
    def energy_j(self) -> float:
        """Dynamic energy of the whole step over all chips, in joules."""
        return sum(c.energy_pj * c.count for c in self.ops) * 1e-12 * self.chips

    def time_by_bound(self) -> dict[str, float]:
        """Seconds spent in ops of each bound."""
        out: dict[str, float] = {}
        for c in self.ops:
            out[c.bound] = out.get(c.bound, 0.0) + c.total_time_s
        return out

    def to_dict(self) -> dict[str, Any]:
        """The JSON document ``infersim simulate --json`` prints."""
        return {
            "chip": self.chip,
            "model": self.model,
            "phase": self.phase,
            "batch": self.batch,
            "prompt_len": self.prompt_len,
            "context_len": self.context_len,
            "engine": self.engine,
            "techniques": self.techniques,
            "chips": self.chips,
            "latency_s": self.latency_s,
            "tokens_per_s": self.tokens_per_s,
            "ttft_s": self.ttft_s,
            "tpot_s": self.tpot_s,
            "flops": self.flops,
            "dram_bytes": self.dram_bytes,
            "energy_j": self.energy_j,
            "energy_per_token_j": self.energy_per_token_j,
            "bound": self.bound,
            "tokens_per_seq": self.tokens_per_seq,
            "notes": list(self.notes),
            "memory": self.memory.to_dict(),
            "fits": self.memory.fits,
            "ways_out": [w.to_dict() for w in self.ways_out],
            "ops": [
                {
                    "name": c.name,
                    "kind": c.kind,
                    "count": c.count,
                    "flops": c.flops,
                    "dram_bytes": c.dram_bytes,
                    "time_s": c.time_s,
                    "bound": c.bound,
                    "intensity": c.intensity if c.dram_bytes else None,
                    "dataflow": c.dataflow or None,
                    "utilization": c.utilization,
                    "energy_pj": c.energy_pj,
                }
                for c in self.ops
            ],
        }


@dataclass(frozen=True)
class WayOut:
    """One way to make a step fit that does not: what changes, and its simulated cost."""

    kind: str
    techniques: str
    description: str
    cost: PhaseCost

    def to_dict(self) -> dict[str, Any]:
        """The figures a reader compares across ways out (JSON-ready)."""
        c = self.cost
        return {
            "kind": self.kind,
            "techniques": self.techniques,
            "description": self.description,
            "batch": c.batch,
            "prompt_len": c.prompt_len,
            "context_len": c.context_len,
            "chips": c.chips,
            "latency_s": c.latency_s,
            "ttft_s": c.ttft_s,
            "tpot_s": c.tpot_s,
            "tokens_per_s": c.tokens_per_s,
            "bound": c.bound,
            "fits": c.memory.fits,
            "memory": c.memory.to_dict(),
            "notes": list(c.notes),
        }
