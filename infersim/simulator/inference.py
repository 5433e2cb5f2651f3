"""Whole-model simulation: apply the techniques, build the graph, cost each distinct operator
once, and compose a :class:`PhaseCost` (pipeline stages, offload streaming and speculative
decoding are composed here from simulated step costs)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Literal

from pydantic import ValidationError

from infersim import dtypes
from infersim.arch_models.chip import Chip
from infersim.errors import InfersimError, UnsupportedDtypeError
from infersim.simulator import engines
from infersim.simulator.defaults import DEFAULT_ENGINE
from infersim.simulator.results import MemoryReport, OpCost, PhaseCost, WayOut
from infersim.simulator.schedule import schedule_ops
from infersim.simulator.ways_out import ways_out as find_ways
from infersim.workloads import graph
from infersim.workloads.models import ModelConfig
from infersim.workloads.ops import Collective, HostTransfer, OpBase
from infersim.workloads.scenario import Precision, Scenario
from infersim.workloads.techniques import Plan, TechniqueStack, parse

Engine = Literal["roofline", "analytic", "events"]
CostFn = Callable[[OpBase, Chip, str], OpCost]


class _Engines(MutableMapping[str, CostFn]):
    """Engine name → per-op cost function, each engine imported on first use (an entry may
    be replaced, e.g. by a test that counts calls)."""

    def __init__(self) -> None:
        self._loaded: dict[str, CostFn] = {}

    def __getitem__(self, name: str) -> CostFn:
        if name not in self._loaded:
            self._loaded[name] = engines.load(name)
        return self._loaded[name]

    def __setitem__(self, name: str, fn: CostFn) -> None:
        if name not in engines.ENGINE_NAMES:
            raise KeyError(name)
        self._loaded[name] = fn

    def __delitem__(self, name: str) -> None:
        self._loaded.pop(name, None)  # back to the engine's own cost function

    def __iter__(self) -> Iterator[str]:
        return iter(engines.ENGINE_NAMES)

    def __len__(self) -> int:
        return len(engines.ENGINE_NAMES)


ENGINES: MutableMapping[str, CostFn] = _Engines()
"""Engine name → per-op cost function (one contract: op, chip and dataflow in, OpCost out)."""

EMULATION_ORDER = ("bf16", "fp16", "fp32")
"""Wider classes a chip may emulate an unsupported compute dtype at, in order of preference."""


def engine_fn(engine: str) -> Callable[[OpBase, Chip, str], OpCost]:
    """The cost function of ``engine``.

    Raises:
        InfersimError: unknown engine; the message lists the known ones.
    """
    try:
        return ENGINES[engine]
    except KeyError:
        raise InfersimError(f"unknown engine {engine!r}; allowed: {', '.join(ENGINES)}") from None


def cost_ops(
    ops: Sequence[OpBase], chip: Chip, engine: str = DEFAULT_ENGINE, dataflow: str = "best"
) -> list[OpCost]:
    """Cost every operator with ``engine`` (by default :data:`~infersim.simulator.defaults.
    DEFAULT_ENGINE`); identical ones (same signature) are costed once. On a chip with a
    schedule (an accelerator that chains operators on chip), the cycle-model engines cost the
    list in order under it (:mod:`infersim.simulator.schedule`)."""
    fn = engine_fn(engine)
    prefetch = engines.load_prefetch(engine)
    if prefetch is not None:
        prefetch(ops, chip, dataflow)
    scheduled = engines.load_scheduled(engine) if chip.schedule is not None else None
    if scheduled is not None:
        def price(op: OpBase, place: Any) -> OpCost:
            return scheduled(op, chip, place, dataflow)  # type: ignore[no-any-return]

        costs = schedule_ops(ops, chip, price)
        return [replace(c, name=op.name, count=op.count) for op, c in zip(ops, costs,
                                                                          strict=True)]
    memo: dict[tuple[Any, ...], OpCost] = {}
    out = []
    for op in ops:
        sig = op.signature()
        if sig not in memo:
            memo[sig] = fn(op, chip, dataflow)
        out.append(replace(memo[sig], name=op.name, count=op.count))
    return out


def _resolve(plan: Plan, chip: Chip) -> tuple[Plan, list[str]]:
    """Chip-dependent decisions: 2:4 without hardware support, dtype support and emulation."""
    notes = []
    if plan.graph.sparsity == "2:4" and not chip.array.sparsity_2_4:
        plan = plan.with_graph(sparsity="dense", density=1.0)
        notes.append(f"2:4 sparsity: {chip.name} has no 2:4 support, weights stay dense (no gain)")
    act = plan.precision.act
    if not chip.supports(act):
        fallback = next((d for d in EMULATION_ORDER if chip.supports(d)), None)
        if not plan.allow_emulation or fallback is None:
            supported = ", ".join(chip.array.macs_per_pe_per_cycle)
            raise UnsupportedDtypeError(
                f"chip {chip.name!r} cannot compute {act} on its systolic array; supported: "
                f"{supported} (the 'emulate' technique / --allow-emulation costs it emulated)"
            )
        plan = plan.with_precision(act=fallback)
        notes.append(f"{act} emulated: computed at {fallback} rate, {act} kept for storage")
    return plan, notes


def launched(chip: Chip, plan: Plan) -> Chip:
    """``chip`` in the plan's kernel-launch mode: with the ``cuda-graphs`` technique its
    kernels replay from a graph (``launch.graph_s``); a chip without a launch overhead is
    unchanged."""
    if plan.cuda_graphs and chip.launch is not None and not chip.launch.graphs:
        return chip.with_(**{"launch.graphs": True})
    return chip


def _needs_link(chip: Chip, plan: Plan) -> None:
    if (plan.graph.tp > 1 or plan.pp > 1) and chip.chip_link is None:
        raise InfersimError(f"chip {chip.name!r} has no chip_link; tp/pp need one")


def _stage_ops(
    plan: Plan, stage_model: ModelConfig, scenario: Scenario, decode_tokens: int = 1
) -> tuple[int, int, Any, list[OpBase]]:
    """(micro-batches, micro-batch size, graph options, ops of one micro-batch on one stage)."""
    micro = plan.microbatches or min(scenario.batch, plan.pp)
    micro = min(micro, scenario.batch)
    micro_batch = math.ceil(scenario.batch / micro)
    options = plan.graph.model_copy(update={"decode_tokens": decode_tokens})
    micro_scenario = scenario.model_copy(update={"batch": micro_batch})
    with within_bounds(stage_model, scenario):
        ops = graph.build(stage_model, micro_scenario, options)
    return micro, micro_batch, options, ops


OFFLOAD_REMEDY = "offload a smaller fraction, or shard the model (tp=N, pp=S)"
"""What to change when the offloaded weights are beyond one host transfer's bound."""


@contextmanager
def within_bounds(
    model: ModelConfig, scenario: Scenario | None = None, what: str | None = None,
    remedy: str = "lower the batch or the lengths",
) -> Iterator[None]:
    """Turn an operator that overflows the operator IR's bounds (a tensor of more than 2^40
    elements, say) into an error that names the user's inputs, not the internal field.
    ``what`` names the inputs that set the operator when they are not the batch and lengths
    (the offloaded weights, say), and ``remedy`` what to change then.

    Raises:
        InfersimError: in place of the operator's ValidationError.
    """
    try:
        yield
    except ValidationError as exc:
        detail = exc.errors()[0]
        where = ".".join(str(part) for part in detail.get("loc", ())) or "an operator"
        value = detail.get("input")
        shown = f"{value:.4g}" if isinstance(value, float) else repr(value)
        if what is not None:
            asked = what
        else:
            asked = (
                f"batch {scenario.batch}, "
                + (f"prompt_len {scenario.prompt_len}" if scenario.phase == "prefill"
                   else f"context_len {scenario.context_len}")
                if scenario is not None else "this step"
            )  # fmt: skip
        raise InfersimError(
            f"{model.name}: {asked} is too large to cost (an operator's {where} would be "
            f"{shown}, beyond infersim's bound); {remedy}"
        ) from None


def step_ops(
    chip: Chip,
    model: ModelConfig,
    scenario: Scenario,
    techniques: str | TechniqueStack | None = None,
) -> list[OpBase]:
    """The operators :func:`simulate` costs for one step on one chip: one micro-batch on one
    pipeline stage, in graph order (without the pipeline hop, offload stream or draft steps).
    What ``infersim simulate --trace`` lays out.

    Raises:
        UnsupportedDtypeError, InfersimError: as :func:`simulate`.
    """
    precision, _ = checkpoint_precision(model, scenario.precision)
    plan, _ = _resolve(parse(techniques).plan(model, precision), chip)
    _needs_link(chip, plan)
    scenario = scenario.model_copy(update={"precision": plan.precision})
    stage_model = plan.model
    if plan.pp > 1:
        layers = math.ceil(plan.model.num_hidden_layers / plan.pp)
        stage_model = plan.model.model_copy(update={"num_hidden_layers": layers})
    return _stage_ops(plan, stage_model, scenario)[3]


def _step(
    chip: Chip, plan: Plan, scenario: Scenario, engine: str, dataflow: str = "best",
    decode_tokens: int = 1,
) -> tuple[list[OpCost], MemoryReport, int]:
    """One step on one chip of a (tp × pp) group: its op costs in time order, its memory, and
    the number of chips in the group."""
    _needs_link(chip, plan)
    chip = launched(chip, plan)
    stages = plan.pp
    stage_model = plan.model
    if stages > 1:
        layers = math.ceil(plan.model.num_hidden_layers / stages)
        stage_model = plan.model.model_copy(update={"num_hidden_layers": layers})
    micro, micro_batch, options, ops = _stage_ops(plan, stage_model, scenario, decode_tokens)
    costs = [replace(c, count=c.count * micro) for c in cost_ops(ops, chip, engine, dataflow)]
    stage_s = sum(c.total_time_s for c in costs) / micro
    if stages > 1:
        tokens = micro_batch * (scenario.prompt_len if scenario.phase == "prefill" else 1)
        payload = tokens * plan.model.hidden_size * dtypes.nbytes(plan.precision.act)
        with within_bounds(plan.model, scenario):
            hop = Collective(name="pipeline.send", collective="send-recv", payload_bytes=payload)
        hop_cost = cost_ops([hop], chip, engine)[0]
        costs.append(replace(hop_cost, count=micro))
        bubble_s = (stages - 1) * (stage_s + hop_cost.time_s)
        costs.append(OpCost(
            name="pipeline.bubble", kind="bubble", count=1, flops=0.0, dram_bytes=0.0,
            compute_s=0.0, memory_s=0.0, time_s=bubble_s, bound="pipeline",
            cycles=bubble_s * chip.freq_hz, energy_pj=0.0,
        ))
    footprint = graph.footprint(stage_model, scenario, ops, options)
    weights = footprint.weights_bytes
    if plan.offload_fraction > 0:
        streamed = weights * plan.offload_fraction
        weights -= streamed
        with within_bounds(plan.model, what=f"offloading {streamed:.4g} bytes of weights",
                           remedy=OFFLOAD_REMEDY):
            stream = HostTransfer(name="offload.stream", transfer_bytes=streamed)
        costs.extend(cost_ops([stream], chip, engine))
    memory = MemoryReport(
        weights_bytes=weights,
        kv_bytes=footprint.kv_bytes,
        activation_bytes=footprint.activation_bytes,
        capacity_bytes=float(chip.dram.capacity_bytes),
    )
    return costs, memory, plan.graph.tp * stages


def _speculative(
    chip: Chip, plan: Plan, scenario: Scenario, engine: str, dataflow: str
) -> tuple[list[OpCost], MemoryReport, int, float]:
    """One draft-and-verify iteration: K draft steps, one target pass over K+1 tokens."""
    spec = plan.speculative
    assert spec is not None
    verify, memory, chips = _step(chip, plan, scenario, engine, dataflow, spec.k + 1)
    draft: list[OpCost] = []
    if spec.draft is not None:
        draft_plan = replace(plan, model=spec.draft, speculative=None, pp=1, offload_fraction=0)
        draft_costs, draft_memory, _ = _step(chip, draft_plan, scenario, engine, dataflow)
        draft = [replace(c, name=f"draft.{c.name}", count=c.count * spec.k) for c in draft_costs]
        memory = replace(memory, weights_bytes=memory.weights_bytes + draft_memory.weights_bytes,
                         kv_bytes=memory.kv_bytes + draft_memory.kv_bytes)
    elif spec.cost_fraction > 0:
        target, _, _ = _step(chip, plan, scenario, engine, dataflow)
        f = spec.cost_fraction
        t = sum(c.total_time_s for c in target)
        draft = [OpCost(
            name="draft.heads", kind="draft", count=spec.k,
            flops=f * sum(c.flops * c.count for c in target),
            dram_bytes=f * sum(c.dram_bytes * c.count for c in target),
            compute_s=0.0, memory_s=0.0, time_s=f * t, bound="memory",
            cycles=f * t * chip.freq_hz, energy_pj=f * sum(c.energy_pj * c.count for c in target),
        )]
    return draft + verify, memory, chips, spec.expected_tokens


def checkpoint_precision(model: ModelConfig, precision: Precision) -> tuple[Precision, list[str]]:
    """``precision`` with the weights in the checkpoint's format (``quantization_config``) when
    the caller did not set the weights dtype, and the note that says so."""
    if model.quantized_weights is None or "weights" in precision.model_fields_set:
        return precision, []
    note = f"weights as the checkpoint's quantization_config: {model.quantized_weights}"
    return precision.model_copy(update={"weights": model.quantized_weights}), [note]


def simulate(
    chip: Chip,
    model: ModelConfig,
    scenario: Scenario,
    engine: str = DEFAULT_ENGINE,
    techniques: str | TechniqueStack | None = None,
    dataflow: str = "best",
    ways_out: bool = True,
) -> PhaseCost:
    """Latency, throughput, per-op breakdown and memory footprint of one step, with a
    technique stack applied (``"int4-awq+kv-fp8+flash"``; ``None`` is the baseline).
    A step that does not fit is still costed (``memory.fits`` is False) and, with
    ``ways_out``, carries every way out priced (:mod:`infersim.simulator.ways_out`). The
    weights default to the checkpoint's format when the model has one and the scenario's
    precision does not set the weights.

    ``engine`` is ``analytic`` (the default, :data:`~infersim.simulator.defaults.
    DEFAULT_ENGINE`: GEMMs mapped with ``dataflow``: ws, os, is, rs, nlr or best), ``events`` (the
    same mappings run tile by tile on SimPy: contention, waves, stalls; see
    :mod:`infersim.simulator.engines.events`) or ``roofline`` (the baseline bound).

    Raises:
        UnsupportedDtypeError: the chip cannot compute the activation dtype (and the stack
            does not ask for emulation).
        InfersimError: unknown engine or technique, or a technique the chip cannot run
            (tp/pp without a chip link, offload without a host link).
    """
    stack = parse(techniques)
    precision, notes = checkpoint_precision(model, scenario.precision)
    plan, resolved = _resolve(stack.plan(model, precision), chip)
    notes += resolved
    length = scenario.prompt_len if scenario.phase == "prefill" else scenario.context_len + 1
    if length > model.max_position_embeddings:
        notes.append(
            f"{length:,} tokens exceed {model.name}'s max_position_embeddings "
            f"({model.max_position_embeddings:,}): costed as asked, but the model was not "
            "trained for it"
        )
    asked = scenario
    scenario = scenario.model_copy(update={"precision": plan.precision})
    tokens_per_seq = 1.0
    if plan.speculative is not None and scenario.phase == "decode":
        costs, memory, chips, tokens_per_seq = _speculative(
            chip, plan, scenario, engine, dataflow
        )
    else:
        if plan.speculative is not None:
            notes.append("speculative decoding does not change a prefill")
        costs, memory, chips = _step(chip, plan, scenario, engine, dataflow)
    alternatives: tuple[WayOut, ...] = ()
    if ways_out and not memory.fits:
        base = "" if stack.name == "baseline" else stack.name
        alternatives = tuple(find_ways(simulate, chip, model, asked, engine, base, dataflow))
    return PhaseCost(
        chip=chip.name,
        model=plan.model.name,
        phase=scenario.phase,
        batch=scenario.batch,
        prompt_len=scenario.prompt_len,
        context_len=scenario.context_len,
        engine=engine,
        latency_s=sum(c.total_time_s for c in costs),
        tokens=scenario.new_tokens * tokens_per_seq,
        memory=memory,
        ops=costs,
        techniques=stack.name,
        chips=chips,
        tokens_per_seq=tokens_per_seq,
        notes=tuple(notes),
        ways_out=alternatives,
    )


def plan_for(
    chip: Chip,
    model: ModelConfig,
    precision: Precision | None = None,
    techniques: str | TechniqueStack | None = None,
) -> tuple[Plan, list[str]]:
    """The technique stack applied to ``model`` and resolved against ``chip`` (2:4 support,
    dtype support or emulation): what a serving simulation costs every iteration with.

    Raises:
        UnsupportedDtypeError, InfersimError: as :func:`simulate`.
    """
    precision, notes = checkpoint_precision(model, precision or Precision())
    plan, resolved = _resolve(parse(techniques).plan(model, precision), chip)
    _needs_link(chip, plan)
    return plan, notes + resolved


def iteration_time(
    chip: Chip,
    plan: Plan,
    prefill_chunks: Sequence[tuple[int, int, int]],
    decode_batch: int,
    decode_context: int,
    engine: str = DEFAULT_ENGINE,
    decode_tokens: int = 1,
    model: ModelConfig | None = None,
    dataflow: str = "best",
) -> float:
    """Seconds of one serving iteration on ``chip`` under ``plan`` (see
    :func:`infersim.workloads.graph.mixed_step` for the arguments); ``model`` overrides the
    plan's model (a speculative drafter). Weights streamed from the host (offload) are paid
    every iteration."""
    chip = launched(chip, plan)
    options = plan.graph.model_copy(update={"decode_tokens": decode_tokens})
    with within_bounds(model or plan.model):
        ops = graph.mixed_step(model or plan.model, prefill_chunks, decode_batch,
                               decode_context, plan.precision, options)
    seconds = sum(c.total_time_s for c in cost_ops(ops, chip, engine, dataflow))
    if plan.offload_fraction > 0 and model is None:
        streamed = graph.weights_bytes(plan.model, plan.precision, options) / options.tp
        streamed *= plan.offload_fraction
        with within_bounds(plan.model, what=f"offloading {streamed:.4g} bytes of weights",
                           remedy=OFFLOAD_REMEDY):
            transfer = HostTransfer(name="offload.stream", transfer_bytes=streamed)
        seconds += cost_ops([transfer], chip, engine)[0].time_s
    return seconds


def simulate_ops(
    chip: Chip, ops: Sequence[OpBase], name: str = "workload", engine: str = DEFAULT_ENGINE,
    dataflow: str = "best",
) -> PhaseCost:
    """Cost a user-defined operator list (one pass; its weights are every op's weight bytes)."""
    if not ops:
        raise InfersimError(f"workload {name!r} has no operators")
    costs = cost_ops(ops, chip, engine, dataflow)
    memory = MemoryReport(
        weights_bytes=sum(op.weight_bytes * op.count for op in ops),
        kv_bytes=0.0,
        activation_bytes=graph.activation_bytes(list(ops)),
        capacity_bytes=float(chip.dram.capacity_bytes),
    )
    return PhaseCost(
        chip=chip.name, model=name, phase="prefill", batch=1, prompt_len=1, context_len=0,
        engine=engine, latency_s=sum(c.total_time_s for c in costs), tokens=1, memory=memory,
        ops=costs,
    )
