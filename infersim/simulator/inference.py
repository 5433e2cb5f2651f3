"""Whole-model simulation: build the graph, cost each distinct operator once, sum a PhaseCost."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Literal

from infersim.arch_models.chip import Chip
from infersim.errors import InfersimError
from infersim.simulator import analytic
from infersim.simulator.results import MemoryReport, OpCost, PhaseCost
from infersim.workloads import graph
from infersim.workloads.models import ModelConfig
from infersim.workloads.ops import OpBase
from infersim.workloads.scenario import Scenario

Engine = Literal["roofline"]
ENGINES: dict[str, Callable[[OpBase, Chip], OpCost]] = {"roofline": analytic.cost}
"""Engine name → per-op cost function (one contract: op and chip in, OpCost out)."""


def engine_fn(engine: str) -> Callable[[OpBase, Chip], OpCost]:
    """The cost function of ``engine``.

    Raises:
        InfersimError: unknown engine; the message lists the known ones.
    """
    try:
        return ENGINES[engine]
    except KeyError:
        raise InfersimError(f"unknown engine {engine!r}; allowed: {', '.join(ENGINES)}") from None


def cost_ops(ops: Sequence[OpBase], chip: Chip, engine: str = "roofline") -> list[OpCost]:
    """Cost every operator; identical ones (same signature) are costed once."""
    fn = engine_fn(engine)
    memo: dict[tuple[Any, ...], OpCost] = {}
    out = []
    for op in ops:
        sig = op.signature()
        if sig not in memo:
            memo[sig] = fn(op, chip)
        out.append(replace(memo[sig], name=op.name, count=op.count))
    return out


def _phase_cost(
    chip: Chip,
    model_name: str,
    scenario: Scenario,
    engine: str,
    ops: Sequence[OpBase],
    weights_bytes: float,
    kv_bytes: float,
) -> PhaseCost:
    costs = cost_ops(ops, chip, engine)
    memory = MemoryReport(
        weights_bytes=weights_bytes,
        kv_bytes=kv_bytes,
        activation_bytes=graph.activation_bytes(list(ops)),
        capacity_bytes=float(chip.dram.capacity_bytes),
    )
    return PhaseCost(
        chip=chip.name,
        model=model_name,
        phase=scenario.phase,
        batch=scenario.batch,
        prompt_len=scenario.prompt_len,
        context_len=scenario.context_len,
        engine=engine,
        latency_s=sum(c.total_time_s for c in costs),
        tokens=scenario.new_tokens,
        memory=memory,
        ops=costs,
    )


def simulate(
    chip: Chip, model: ModelConfig, scenario: Scenario, engine: str = "roofline"
) -> PhaseCost:
    """Latency, throughput, per-op breakdown and memory footprint of one step.

    Raises:
        UnsupportedDtypeError: the chip cannot compute the scenario's activation dtype.
        InfersimError: unknown engine.
    """
    ops = graph.build(model, scenario)
    fp = graph.footprint(model, scenario, ops)
    return _phase_cost(chip, model.name, scenario, engine, ops, fp.weights_bytes, fp.kv_bytes)


def simulate_ops(
    chip: Chip, ops: Sequence[OpBase], name: str = "workload", engine: str = "roofline"
) -> PhaseCost:
    """Cost a user-defined operator list (one pass; its weights are every op's weight bytes)."""
    if not ops:
        raise InfersimError(f"workload {name!r} has no operators")
    weights = sum(op.weight_bytes * op.count for op in ops)
    scenario = Scenario(phase="prefill", batch=1, prompt_len=1)
    return _phase_cost(chip, name, scenario, engine, ops, weights, 0.0)
