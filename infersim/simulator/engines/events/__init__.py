"""The event engine: a GEMM or convolution executed tile by tile on SimPy, contention included.

The op is mapped exactly as the analytic engine maps it (:func:`infersim.dataflow.map_op`,
latency objective; on a chip with a shared SRAM, the cores' mapping against the L2, searched
with the DRAM level behind it, and the L2-level mapping against DRAM, see
:func:`infersim.simulator.engines.analytic.level_views` and
:func:`~infersim.simulator.engines.analytic.op_backing`). The
mapping is then unrolled into each core's sequence of SRAM tiles (:mod:`.plan`: tiles
dealt to the cores in waves, so a last partial wave shows) and run by SimPy processes
(:mod:`.processes`: double-buffered DMA-in, one compute process per core group, DMA-out,
HBM channels with bandwidth and access latency shared by all cores, SRAM as capacity-limited
buffers). Every other operator (attention, vector work, transfers) is costed by the roofline,
as in the analytic engine.

The result is the analytic engine's :class:`OpCost` (same bytes, energy and dataflow) with the
simulated time: the makespan (or the vector work, if longer) plus the per-kernel overhead of
each kernel the mapping launches (:attr:`~infersim.dataflow.loopnest.Mapping.kernels`: a split
reduction's second kernel, as the analytic engine counts it);
``bound`` names the busiest resource (compute, ``memory`` = HBM, ``sram`` = the L2 port, or
vector). The timeline (:class:`Timeline`) holds one span per tile (or block of tiles) per
process and per transfer, and the stall accounting (:class:`EventStats`).

Results are memoized in a bounded LRU keyed by (op signature, chip key, dataflow, max_blocks):
identical operators are simulated once per process, across calls.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from infersim.arch_models.chip import Chip
from infersim.dataflow import traffic_of
from infersim.dataflow.loopnest import PY, Access, Mapping, problem_of
from infersim.dataflow.loopnest.figures import feed_bytes_per_cycle
from infersim.simulator.engines import analytic
from infersim.simulator.engines.events.plan import Kept, work_plan
from infersim.simulator.engines.events.processes import Link, Memory, RunResult, run
from infersim.simulator.engines.events.timeline import EventStats, Span, Timeline
from infersim.simulator.results import Bound, OpCost
from infersim.simulator.schedule import STANDALONE, Placement
from infersim.workloads.ops import Conv2d, Gemm, OpBase

MAX_BLOCKS = 1024
"""Default blocks per core group: more tiles than this are merged (see :mod:`.plan`)."""

_MEMO: OrderedDict[tuple[Any, ...], tuple[OpCost, Timeline]] = OrderedDict()
_MEMO_MAX = 1024

__all__ = [
    "MAX_BLOCKS",
    "EventStats",
    "Span",
    "Timeline",
    "clear_cache",
    "cost",
    "simulate_mapping",
    "simulate_op",
    "trace_ops",
]


def clear_cache() -> None:
    """Forget every memoized simulation."""
    _MEMO.clear()


def _hbm(chip: Chip, per_cycle: float) -> Link:
    return Link("hbm", per_cycle, chip.dram.channels, chip.dram.latency_s * chip.freq_hz)


def _run_mapping(op: OpBase, chip: Chip, mapping: Mapping, max_blocks: int,
                 outer: dict[str, Access] | None = None, kept: Kept | None = None) -> RunResult:
    """Simulate ``mapping`` (mapped on ``chip``); with ``outer`` (the DRAM traffic per operand
    of the L2-level tiling, :func:`~infersim.dataflow.traffic_of`) the
    cores load from the shared SRAM of ``chip`` and HBM fills it. ``kept``: what the chip's
    schedule keeps off DRAM (on a two-level chip, off the HBM share of the L2's traffic)."""
    prob = problem_of(op)
    efficiency = chip.calibration.compute(prob.mac_class)
    used = float(mapping.cores_used)
    if outer is None or chip.shared_sram is None:
        plan = work_plan(prob, mapping, chip, max_blocks, kept,
                         analytic.busy_factor(op, chip, mapping))
        hbm = _hbm(chip, feed_bytes_per_cycle(chip, used, PY))
        return run(plan, Memory(hbm), chip.sram.capacity_bytes, efficiency)
    hbm = _hbm(chip, analytic.dram_bandwidth(chip, used) / chip.freq_hz)
    cores_view, _ = analytic.level_views(chip)
    plan = work_plan(prob, mapping, cores_view, max_blocks, None,
                     analytic.busy_factor(op, cores_view, mapping))
    port = Link("l2", feed_bytes_per_cycle(cores_view, used, PY), 1, 0.0)
    dram, l2 = outer, mapping.traffic["dram"]
    reads = sum(a.reads_bytes for a in l2.values())
    writes = sum(a.writes_bytes for a in l2.values())
    dram_reads = sum(a.reads_bytes for a in dram.values())
    dram_writes = sum(a.writes_bytes for a in dram.values())
    if kept is not None:
        dram_reads -= (dram["input"].reads_bytes if kept.input_on_chip else 0.0)
        dram_reads -= min(kept.prefetched_bytes, dram["weight"].reads_bytes)
        dram_writes -= dram["output"].writes_bytes if kept.output_on_chip else 0.0
    read_share = max(dram_reads, 0.0) / reads if reads else 0.0
    write_share = max(dram_writes, 0.0) / writes if writes else 0.0
    memory = Memory(port, hbm, read_share, write_share, float(chip.shared_sram.capacity_bytes))
    return run(plan, memory, chip.sram.capacity_bytes, efficiency)


def simulate_mapping(op: OpBase, chip: Chip, mapping: Mapping,
                     max_blocks: int = MAX_BLOCKS) -> tuple[float, Timeline]:
    """Event-simulate one given ``mapping`` of ``op`` on ``chip`` with the cores fed straight
    from DRAM (as :func:`infersim.dataflow.map_op` maps a chip: no L2 level). Returns the
    makespan in cycles (no per-kernel overhead) and the timeline.

    Raises:
        InfersimError: an op kind without a loop nest.
        ValueError: ``max_blocks`` below 3.
    """
    res = _run_mapping(op, chip, mapping, max_blocks)
    return res.makespan_cycles, Timeline(chip.freq_hz, res.spans, res.stats)


def _simulate(op: OpBase, chip: Chip, dataflow: str, max_blocks: int,
              place: Placement = STANDALONE) -> tuple[OpCost, Timeline]:
    if not isinstance(op, Gemm | Conv2d):
        c = analytic.scheduled_cost(op, chip, place, dataflow)  # the roofline's, as placed
        span = Span(f"roofline:{c.bound}", 0.0, c.cycles, f"{op.kind} (roofline, {c.bound})")
        return c, Timeline(chip.freq_hz, (span,), EventStats(makespan_cycles=c.cycles))
    base = analytic.scheduled_cost(op, chip, place, dataflow)  # bytes, energy, dataflow
    kept = None
    if place != STANDALONE:
        prefetched = place.prefetch_s * chip.dram.bandwidth_bytes_per_s * \
            chip.calibration.dram_bandwidth_efficiency
        kept = Kept(place.input_on_chip, place.output_on_chip, prefetched)
    mapping = analytic.mapping_of(op, chip, dataflow)  # the analytic engine's pick
    if chip.shared_sram is None:
        res = _run_mapping(op, chip, mapping, max_blocks, kept=kept)
    else:
        outer = traffic_of(op, analytic.level_views(chip)[1])
        res = _run_mapping(op, chip, mapping, max_blocks, outer, kept)
    freq = chip.freq_hz
    vector_s = analytic.overlapped_vector_s(op, chip)
    terms: dict[Bound, float] = {"compute": res.compute_busy_cycles / freq, "vector": vector_s}
    terms["memory"] = res.link_busy_cycles["hbm"] / freq
    if "l2" in res.link_busy_cycles:
        terms["sram"] = res.link_busy_cycles["l2"] / freq
    bound: Bound = max(terms, key=terms.__getitem__)
    time_s = max(res.makespan_cycles / freq, vector_s) + mapping.kernels * chip.kernel_overhead_s
    prob = problem_of(op)
    rate = float(chip.array.macs_per_pe_per_cycle[prob.mac_class])  # type: ignore[index]
    peak = chip.array.pes * chip.cores * rate
    cost = replace(
        base,
        compute_s=max(terms["compute"], vector_s),
        memory_s=max(v for k, v in terms.items() if k in ("memory", "sram")),
        time_s=time_s,
        bound=bound,
        cycles=time_s * freq,
        dataflow=mapping.dataflow,
        utilization=prob.macs / (res.makespan_cycles * peak) if res.makespan_cycles else 0.0,
    )
    return cost, Timeline(freq, res.spans, res.stats)


def simulate_op(op: OpBase, chip: Chip, dataflow: str = "best",
                max_blocks: int = MAX_BLOCKS) -> tuple[OpCost, Timeline]:
    """Cost of one repetition of ``op`` on ``chip`` and its timeline (cycles of the chip clock).
    GEMMs and convolutions are mapped with ``dataflow`` (``ws``, ``os``, ``is``, ``rs`` or
    ``best``) and event-simulated; other ops get the roofline cost and one span. Memoized.

    Raises:
        UnsupportedDtypeError: the op needs a dtype the array cannot compute.
        InfersimError: no mapping fits the chip, or a transfer without its link.
        ValueError: ``max_blocks`` below 3.
    """
    c, timeline = _memoized(op, chip, dataflow, max_blocks, STANDALONE)
    return replace(c, name=op.name, count=op.count), timeline


def _memoized(op: OpBase, chip: Chip, dataflow: str, max_blocks: int,
              place: Placement) -> tuple[OpCost, Timeline]:
    """:func:`_simulate` memoized in the bounded LRU."""
    key = (op.signature(), chip.key, dataflow, max_blocks, place)
    found = _MEMO.get(key)
    if found is None:
        found = _simulate(op, chip, dataflow, max_blocks, place)
        _MEMO[key] = found
        while len(_MEMO) > _MEMO_MAX:
            _MEMO.popitem(last=False)
    else:
        _MEMO.move_to_end(key)
    return found


def cost(op: OpBase, chip: Chip, dataflow: str = "best") -> OpCost:
    """The engine function (op, chip, dataflow) → :class:`OpCost` of :func:`simulate_op`."""
    return simulate_op(op, chip, dataflow)[0]


def scheduled_cost(op: OpBase, chip: Chip, place: Placement, dataflow: str = "best") -> OpCost:
    """:func:`cost` of ``op`` under the chip schedule's ``place`` (see
    :mod:`infersim.simulator.schedule`): the op simulated with the bytes the schedule keeps
    off DRAM left out of its transfers (a prefetched weight load from its first tiles);
    operators the roofline costs are placed as the analytic engine places them. Memoized."""
    found, _ = _memoized(op, chip, dataflow, MAX_BLOCKS, place)
    return replace(found, name=op.name, count=op.count)


def trace_ops(ops: Sequence[OpBase], chip: Chip, dataflow: str = "best",
              max_blocks: int = MAX_BLOCKS) -> Timeline:
    """The timelines of ``ops`` laid end to end in order, one repetition of each (labels are
    prefixed with the op's name and its repetition count); stats are summed."""
    spans: list[Span] = []
    stats = EventStats()
    offset = 0.0
    for op in ops:
        c, tl = simulate_op(op, chip, dataflow, max_blocks)
        reps = f" x{op.count}" if op.count > 1 else ""
        spans.extend(tl.shifted(offset, f"{op.name}{reps}: ").spans)
        stats = stats.plus(tl.stats)
        offset += c.time_s * chip.freq_hz
    return Timeline(chip.freq_hz, tuple(spans), stats)
