"""The analytic engine: GEMMs and convolutions costed from their dataflow mapping, fused
attention on a GPU's tensor cores from its CTA grid (:mod:`~.attention`); every other operator
(vector work, transfers, attention elsewhere) from the roofline.

A chip with a shared SRAM (a GPU's L2, a TPU's CMEM) is costed at two levels, because the cores
do not fetch from DRAM directly: the cores' tiles are mapped against the shared SRAM (its
bandwidth feeds them, each core re-fetching what it needs), and the DRAM traffic is that of a
mapping whose tiles are sized for the shared SRAM itself (one fetch of what all the cores
share: the tiling that moves the fewest DRAM bytes, as a cache that serves reuse would).
Both levels run in the cores' waves: each wave of work items takes the larger of its compute,
its shared-SRAM transfer and its DRAM transfer
(:func:`~infersim.dataflow.loopnest.waves.two_level_cycles`). The cores' search prices every
candidate with that time, given the op's DRAM traffic (:func:`op_backing`), so the mapping's
own time is the two-level time (re-timed under a chip's schedule with what the schedule kept
and prefetched, :func:`scheduled_cost`). A chip without a shared SRAM maps straight from
DRAM.

For a mapped op, time = the mapping's time (per SRAM tile the larger of compute and transfer
cycles, plus the first load and the last store, see :mod:`infersim.dataflow.loopnest`),
overlapped with the vector work the op carries (dequant, fused epilogue), plus the calibrated
per-kernel overhead once per kernel the mapping launches (a split reduction launches a second
kernel that sums the partials: :attr:`~infersim.dataflow.loopnest.Mapping.kernels`; the
mapping's time includes that launch, taken out of the overlap and added after it). The
mapping's compute is scaled by :func:`busy_factor` (the dequantization of a weight-only
quantized operand; or, on a GPU where that is faster, as a decode GEMV: the MACs as FMAs on
the CUDA cores). Energy = the mappings' per-level energy (DRAM bytes at DRAM cost, the cores'
fetches at shared-SRAM cost) plus the vector work (the MACs too where the lanes run them).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar, cast

from infersim.arch_models.chip import Chip
from infersim.dataflow import (
    TEMPLATES,
    map_op,
    search_many,
    traffic_many,
    traffic_of,
)
from infersim.dataflow.energy import total_and_mac_pj
from infersim.dataflow.loopnest import PY, Mapping, problem_of, tile_operand_bytes
from infersim.dataflow.loopnest.figures import loop_nest_cycles
from infersim.dataflow.loopnest.waves import (
    BOUNDS,
    Backing,
    Waves,
    backing_of,
    feed_bytes_per_cycle,
    two_level_cycles,
    vector_per_cycle,
)
from infersim.errors import InfersimError
from infersim.simulator.engines import attention, roofline, store
from infersim.simulator.results import Bound, OpCost
from infersim.simulator.schedule import STANDALONE, Placement, tensors
from infersim.workloads.ops import Conv2d, Gemm, OpBase

_VIEWS: OrderedDict[str, tuple[Chip, Chip]] = OrderedDict()
_VIEWS_MAX = 64

_COSTS: OrderedDict[tuple[Any, ...], OpCost] = OrderedDict()
_COSTS_MAX = 16384
"""Finished op costs by (op signature, chip key, dataflow): the warm path of :func:`cost` (the
persistent :mod:`~infersim.simulator.engines.store` keeps them across processes)."""


_BACKINGS: OrderedDict[tuple[Any, ...], Backing] = OrderedDict()
""":func:`op_backing` by (op signature, chip key): each op's cost asks for it several times."""


def clear_cache() -> None:
    """Forget every memoized level view, backing and op cost (the mapper's caches are its
    own)."""
    _VIEWS.clear()
    _BACKINGS.clear()
    _COSTS.clear()
    _RETIMES.clear()


def level_views(chip: Chip) -> tuple[Chip, Chip]:
    """(cores view, shared-SRAM view) of a chip with a shared SRAM: the cores fed at the shared
    SRAM's bandwidth from a backing store of the shared SRAM's capacity (where the partial sums
    of a split reduction meet, so no more chunks are dealt than it holds: see
    :mod:`infersim.dataflow.loopnest.dram`), and one virtual core whose SRAM is the shared
    SRAM, fed from DRAM. Both keep the chip's launch settings, and are keyed by the chip's
    key and their role (:meth:`~infersim.arch_models.chip.Chip.view`). Cached per chip
    (bounded)."""
    views = _VIEWS.get(chip.key)
    if views is None:
        shared = chip.shared_sram
        assert shared is not None
        cores_view = chip.view("cores", **{
            "dram.bandwidth_bytes_per_s": shared.bandwidth_bytes_per_cycle * chip.freq_hz
            * chip.calibration.shared_sram_bandwidth_efficiency,
            "dram.latency_s": 0.0,
            "sram.fill_latency_s": chip.dram.latency_s,  # a load may miss the L2
            "dram.capacity_bytes": shared.capacity_bytes,
            "calibration.dram_bandwidth_efficiency": 1.0,
            "energy.dram_pj_per_byte": chip.energy.shared_sram_pj_per_byte,
        })
        shared_view = chip.view("shared SRAM", **{
            "cores": 1,
            "sram.capacity_bytes": shared.capacity_bytes,
            "sram.fill_bytes_per_cycle": None,
            "calibration.compute_efficiency": 1.0,
        })
        views = (cores_view, shared_view)
        _VIEWS[chip.key] = views
        while len(_VIEWS) > _VIEWS_MAX:
            _VIEWS.popitem(last=False)
    return views


def cost(op: OpBase, chip: Chip, dataflow: str = "best") -> OpCost:
    """Cost of one repetition of ``op`` on ``chip``; GEMMs and convolutions are mapped with
    ``dataflow`` (``ws``, ``os``, ``is``, ``rs`` or ``best``) minimizing latency.

    Raises:
        UnsupportedDtypeError: the op needs a dtype the array cannot compute.
        InfersimError: no mapping fits the chip, or a transfer without its link.
    """
    if not isinstance(op, Gemm | Conv2d):
        if attention.on_tensor_cores(op, chip):  # its KV split searched once
            found = _remembered(_COSTS, OpCost, "attention:", op, chip, dataflow,
                                lambda: attention.cost(op, chip))  # type: ignore[arg-type]
            return _named(found, op)
        return roofline.cost(op, chip)
    found = _remembered(_COSTS, OpCost, "", op, chip, dataflow,
                        lambda: _cost(op, chip, dataflow))  # fmt: skip
    return _named(found, op)


def _named(found: OpCost, op: OpBase) -> OpCost:
    """The remembered cost ``found`` under ``op``'s name and count (itself where they are
    its own: a cost is a frozen value)."""
    if found.name == op.name and found.count == op.count:
        return found
    return replace(found, name=op.name, count=op.count)


def prefetch(ops: Sequence[OpBase], chip: Chip, dataflow: str = "best") -> None:
    """Warm :func:`cost` for the op list of a step: the GEMMs and convolutions not costed yet
    (in memory or in the persistent store) have their mappings searched in one vectorized
    batch (:func:`~infersim.dataflow.search_many`, and on a chip with a shared SRAM its level's
    :func:`~infersim.dataflow.traffic_many`) instead of one search each; the answers are those
    of the searches one by one."""
    disk = store.store()

    def known(memo: OrderedDict[tuple[Any, ...], Any], kind: type, prefix: str,
              key: tuple[Any, ...]) -> bool:  # in memory, or on disk (then kept in memory)
        if key in memo:
            return True
        found = disk.get(prefix + store.cost_key(*key), kind) if disk is not None else None
        if found is not None:
            memo[key] = found
        return found is not None

    todo = []
    for op in ops:
        if not isinstance(op, Gemm | Conv2d):
            continue
        key = (op.signature(), chip.key, dataflow)
        if known(_COSTS, OpCost, "", key) and (
            chip.schedule is None or known(_RETIMES, Retime, "retime:", key)
        ):
            continue
        todo.append(op)
    if len(todo) < 2:  # nothing to share
        return
    if chip.shared_sram is None:
        search_many(todo, chip, dataflow)
        return
    cores_view, shared_view = level_views(chip)
    traffic_many(todo, shared_view)  # the DRAM level first: the cores' search times with it
    backed: list[tuple[OpBase, Backing]] = []
    for op in todo:
        try:
            backed.append((op, op_backing(op, chip)))  # type: ignore[arg-type]
        except InfersimError:
            continue  # cost raises it where the op is costed
    search_many([op for op, _ in backed], cores_view, dataflow, [b for _, b in backed])


def mapping_of(op: Gemm | Conv2d, chip: Chip, dataflow: str = "best") -> Mapping:
    """The mapping both engines cost ``op`` with on ``chip`` (latency objective): on a chip
    with a shared SRAM, the cores' mapping on its cores view (:func:`level_views`), searched
    with the DRAM level behind it (:func:`op_backing`: its time is the two-level time); else
    the chip's own.

    Raises:
        UnsupportedDtypeError: the array cannot compute the op's dtype.
        InfersimError: as :func:`~infersim.dataflow.map_op`, or no tiling fits the shared
            SRAM.
    """
    if chip.shared_sram is None:
        return map_op(op, chip, dataflow=dataflow, objective="latency")
    return map_op(op, level_views(chip)[0], dataflow=dataflow, objective="latency",
                  backing=op_backing(op, chip))  # fmt: skip


def op_backing(op: Gemm | Conv2d, chip: Chip) -> Backing:
    """What the cores' search of ``op`` on the two-level ``chip`` needs of the level behind
    them (:func:`~infersim.dataflow.loopnest.waves.backing_of`): the DRAM traffic of the
    shared-SRAM level's tiling (:func:`~infersim.dataflow.traffic_of` on its view of
    :func:`level_views`), the chip's DRAM rates, and the op's weight conversion.

    Raises:
        InfersimError: no tiling of ``op`` fits the shared SRAM.
    """
    key = (op.signature(), chip.key)
    found = _BACKINGS.get(key)
    if found is None:
        outer = traffic_of(op, level_views(chip)[1])
        found = backing_of(
            chip, sum(a.total_bytes for a in outer.values()),
            sum(a.writes_bytes for a in outer.values()),
            op.dequant_flops_per_weight if isinstance(op, Gemm) else 0.0,
        )  # fmt: skip
        _BACKINGS[key] = found
        while len(_BACKINGS) > _COSTS_MAX:
            _BACKINGS.popitem(last=False)
    return found


T = TypeVar("T")


def _remembered(
    memo: OrderedDict[tuple[Any, ...], T], kind: type[T], prefix: str, op: OpBase, chip: Chip,
    dataflow: str, make: Callable[[], T],
) -> T:
    """``make()`` for (``op``, ``chip``, ``dataflow``), memoized in ``memo`` (bounded) and in
    the persistent store (under ``prefix`` + the cost key)."""
    key = (op.signature(), chip.key, dataflow)
    found = memo.get(key)
    if found is None:
        disk = store.store()
        stored = prefix + store.cost_key(*key) if disk is not None else ""
        found = disk.get(stored, kind) if disk is not None else None
        if found is None:
            found = make()
            if disk is not None:
                disk.put(stored, found)
        memo[key] = found
        while len(memo) > _COSTS_MAX:
            memo.popitem(last=False)
    return found


def _array_cycles(view: Chip, mapping: Mapping) -> float:
    """The array cycles ``mapping`` computes, summed over the cores it keeps busy (calibrated
    for its op's MAC class)."""
    return (float(mapping.compute_cycles) * max(mapping.cores_used, 1)
            / view.calibration.compute(mapping.mac_class))  # fmt: skip


def dequant_ratio(op: OpBase, view: Chip, mapping: Mapping) -> float:
    """Dequantization cycles per compute cycle of ``mapping`` (mapped on ``view``): 0 unless
    the op's weights are stored in another format than the compute dtype.

    Weight-only quantized kernels (W4A16, W8A16) convert a weight where it is read from the
    core's SRAM into the array (a GPU: from shared memory into the MMA's register fragments,
    by the warps that issue the MMAs): every weight element the mapping feeds the array (one
    per fold that uses it: a weight tile reused by another block of rows is converted again)
    costs ``dequant_flops_per_weight`` vector FLOPs on the core, at the calibrated vector
    efficiency. On the array that work adds to the cores' compute time and overlaps the
    memory transfers (:func:`busy_factor`)."""
    if not isinstance(op, Gemm) or not op.dequant_flops_per_weight:
        return 0.0
    return _converting(dequant_flops(op, mapping), vector_per_cycle(view),
                       _array_cycles(view, mapping))  # fmt: skip


def _converting(converted: float, per_cycle: float, array_cycles: float) -> float:
    """Cycles of ``converted`` vector FLOPs at ``per_cycle`` FLOPs a cycle on one core per
    array cycle of ``array_cycles`` (0 where there are none): :func:`dequant_ratio`."""
    return converted / per_cycle / array_cycles if array_cycles > 0 else 0.0


def busy_factor(op: OpBase, view: Chip, mapping: Mapping) -> float:
    """Core-busy cycles per (calibrated) array compute cycle of ``mapping`` (mapped on
    ``view``); both engines scale every tile's compute by it, so they share the rule.

    On the array: 1 + :func:`dequant_ratio` (the MMAs, then the dequantization of what they
    are fed). Where the mapping's template lets the vector lanes run the MACs
    (``Template.vector_macs``: a GPU's CUDA cores) and that is faster, the lanes do all of
    it: one multiply-add (2 FLOPs) per MAC of the op and the dequantization of every weight
    the mapping feeds, on the same lanes, at the calibrated vector efficiency, the tiles'
    transfers unchanged. A GEMV (one or a few rows) is that kernel: the array's folds would
    spend a whole fold's rows on its one row (a Hopper warpgroup MMA's 64), the lanes spend
    nothing on rows it lacks."""
    factor, lanes = _busy_factors(op, view, mapping, dequant_flops(op, mapping))
    return factor if lanes is None else min(factor, lanes)


def _busy_factors(
    op: OpBase, view: Chip, mapping: Mapping, converted: float
) -> tuple[float, float | None]:
    """(:func:`busy_factor` on the array, on the vector lanes or None where the mapping's
    template cannot run its MACs there) of ``mapping``, which converts ``converted`` vector
    FLOPs of weights (:func:`dequant_flops`)."""
    if not isinstance(op, Gemm):
        return 1.0, None
    dequantizes = bool(op.dequant_flops_per_weight)
    lanes_macs = TEMPLATES[mapping.dataflow].vector_macs
    if not dequantizes and not lanes_macs:
        return 1.0, None
    array_cycles = _array_cycles(view, mapping)
    per_cycle = vector_per_cycle(view)  # on one core
    ratio = _converting(converted, per_cycle, array_cycles) if dequantizes else 0.0
    if not lanes_macs or array_cycles <= 0:
        return 1.0 + ratio, None
    return 1.0 + ratio, (2.0 * op.macs + converted) / per_cycle / array_cycles


def on_lanes(op: OpBase, view: Chip, mapping: Mapping) -> bool:
    """Whether :func:`busy_factor` runs ``mapping``'s MACs on the vector lanes (then they cost
    2 vector FLOPs each instead of the array's MAC energy)."""
    factor, lanes = _busy_factors(op, view, mapping, dequant_flops(op, mapping))
    return lanes is not None and lanes < factor


def overlapped_vector_s(op: OpBase, chip: Chip) -> float:
    """Seconds of the vector work of a mapped op that overlaps its array work (its fused
    epilogue): every vector FLOP but the dequantization, which the mapping's time counts."""
    return _overlapped_vector(op, chip)[1]


def _overlapped_vector(op: OpBase, chip: Chip) -> tuple[float, float]:
    """(vector FLOPs, seconds) of :func:`overlapped_vector_s`."""
    flops = op.vector_flops - (op.dequant_flops if isinstance(op, Gemm) else 0.0)
    return flops, flops / (chip.vector_flops * chip.calibration.vector_efficiency)


def dequant_flops(op: OpBase, mapping: Mapping) -> float:
    """Vector FLOPs of dequantizing every weight element ``mapping`` feeds the array."""
    if not isinstance(op, Gemm) or not op.dequant_flops_per_weight:
        return 0.0
    fed = mapping.traffic["sram"]["weight"].reads_bytes / problem_of(op).operand_bytes["weight"]
    return fed * op.dequant_flops_per_weight


def mapping_seconds(op: OpBase, view: Chip, mapping: Mapping) -> float:
    """The time of ``mapping`` (mapped on ``view``) with its dequantization, less the launches
    of its kernels beyond the first (:func:`~infersim.dataflow.loopnest.figures.
    loop_nest_cycles`; :func:`_bound_and_time` adds every kernel's overhead): the loop nest's
    rule, first load + max(compute x :func:`busy_factor`, the other transfers) + last
    store + latency (where the factor is below 1, its lower bound: the tiles' overlap less
    the compute saved, at least the compute and the transfers)."""
    total = loop_nest_cycles(view, mapping.total_cycles, mapping.kernels)
    factor = busy_factor(op, view, mapping)
    if factor == 1.0:
        return total / view.freq_hz
    busy = mapping.compute_cycles / view.calibration.compute(problem_of(op).mac_class)
    edges = mapping.first_load_cycles + mapping.last_store_cycles
    overlap = total - edges - view.dram.latency_s * view.freq_hz  # the tiles' overlap, summed
    if factor > 1.0:
        middle = max(overlap, busy * factor)
    else:  # the lanes' faster compute: at least the compute and at least the transfers
        middle = max(busy * factor, overlap - busy * (1.0 - factor), mapping.dram_cycles - edges)
    return (total - overlap + middle) / view.freq_hz


def _cost(op: Gemm | Conv2d, chip: Chip, dataflow: str) -> OpCost:
    overlapped_flops, vector_s = _overlapped_vector(op, chip)
    if chip.shared_sram is None:
        mapping = mapping_of(op, chip, dataflow)
        dram_bytes, dram_s = mapping.dram_bytes, 0.0
        map_s = mapping_seconds(op, chip, mapping)
        view, (energy_pj, mac_pj) = chip, total_and_mac_pj(mapping, chip)
        bound, time_s = _bound_and_time(chip, map_s, mapping.bound == "memory", vector_s,
                                        mapping.kernels)  # fmt: skip
        compute_s = (mapping.compute_cycles / chip.freq_hz + map_s
                     - loop_nest_cycles(chip, mapping.total_cycles, mapping.kernels)
                     / chip.freq_hz)  # fmt: skip
    else:  # the cores' mapping timed with the DRAM level: its own time is the two-level time
        cores_view, _ = level_views(chip)
        mapping = mapping_of(op, chip, dataflow)
        assert mapping.levels is not None
        dram_bytes = op_backing(op, chip).dram_bytes
        dram_s = dram_level_s(chip, mapping, dram_bytes)
        view, (energy_pj, mac_pj) = cores_view, total_and_mac_pj(mapping, cores_view)
        energy_pj += dram_bytes * chip.energy.dram_pj_per_byte
        bound, both_s = cast(Bound, mapping.bound), two_level_s(cores_view, mapping)
        if vector_s > both_s:
            bound, both_s = "vector", vector_s
        time_s = both_s + mapping.kernels * chip.kernel_overhead_s
        # the array's cycles and the cores' conversion of the weights they feed it
        efficiency = cores_view.calibration.compute(mapping.mac_class)
        converting = mapping.levels.busy_cycles - mapping.compute_cycles / efficiency
        compute_s = (mapping.compute_cycles + converting) / chip.freq_hz
    vector_flops = overlapped_flops
    if isinstance(op, Gemm):  # the weights it converts, and its MACs where the lanes run them
        converted = dequant_flops(op, mapping)
        vector_flops += converted
        factor, lanes = _busy_factors(op, view, mapping, converted)
        if lanes is not None and lanes < factor:  # FMAs on the lanes (:func:`on_lanes`)
            energy_pj -= mac_pj
            vector_flops += 2.0 * op.macs
    return OpCost(
        name=op.name,
        kind=op.kind,
        count=op.count,
        flops=op.flops,
        dram_bytes=dram_bytes,
        compute_s=max(compute_s, vector_s),
        memory_s=max(dram_s, mapping.dram_cycles / chip.freq_hz),
        time_s=time_s,
        bound=bound,
        cycles=time_s * chip.freq_hz,
        energy_pj=energy_pj + vector_flops * chip.energy.vector_pj_per_flop,
        dataflow=mapping.dataflow,
        utilization=mapping.overall_utilization,
    )


def dram_bandwidth(chip: Chip, cores_used: float) -> float:
    """Achievable DRAM bytes per second of a two-level chip's op that keeps ``cores_used``
    cores busy: the DRAM's, at most what their ports to the shared SRAM carry
    (``sram.fill_bytes_per_cycle``)."""
    bandwidth = chip.dram.bandwidth_bytes_per_s * chip.calibration.dram_bandwidth_efficiency
    port = chip.sram.fill_bytes_per_cycle
    return bandwidth if port is None else min(bandwidth, cores_used * port * chip.freq_hz)


def dram_level_s(chip: Chip, mapping: Mapping, dram_bytes: float) -> float:
    """Seconds a two-level chip's DRAM takes to move ``dram_bytes`` behind the cores'
    ``mapping`` (against the shared SRAM), one access latency included: the cores' waves
    draw it as they draw their loads (:func:`~infersim.dataflow.loopnest.figures.
    in_flight_cycles`: each busy core keeps its double-buffered tiles' loads in flight
    against the DRAM latency, so a last partial wave cannot draw the whole bandwidth). Read
    from the mapping's levels, which hold its waves and the DRAM's rates for them (the cores
    view has the chip's cores and ports; the rates are those of the chip's DRAM, the op's
    :func:`op_backing`)."""
    w = mapping.levels
    assert w is not None  # a two-level chip's mapping
    cycles = dram_bytes * ((w.waves - 1.0) * w.per_wave / w.dram_full + w.last_share / w.dram_tail)
    return float(cycles) / chip.freq_hz + chip.dram.latency_s


def two_level_s(view: Chip, mapping: Mapping) -> float:
    """Seconds of a two-level chip's op whose cores' ``mapping`` was made on the cores
    ``view`` with the op's :func:`op_backing`: its time
    (:func:`~infersim.dataflow.loopnest.waves.two_level_cycles`) less the launches of its
    kernels beyond the first, which the engines add with the first's."""
    return loop_nest_cycles(view, mapping.total_cycles, mapping.kernels) / view.freq_hz


def _bound_and_time(
    chip: Chip, map_s: float, fed_bound: bool, vector_s: float, kernels: int
) -> tuple[Bound, float]:
    """(bound, seconds) of a mapped op on a chip without a shared SRAM: its mapping
    (``map_s``, bound by compute or, when ``fed_bound``, by DRAM) or its vector work, plus the
    per-kernel overhead of each of its ``kernels`` (they run one after another: no level's time
    hides a launch). A two-level chip's op is timed by its mapping (:func:`two_level_s`)."""
    terms: dict[Bound, float] = {"memory" if fed_bound else "compute": map_s, "vector": vector_s}
    bound: Bound = max(terms, key=terms.__getitem__)
    return bound, terms[bound] + kernels * chip.kernel_overhead_s


def scheduled_cost(op: OpBase, chip: Chip, place: Placement, dataflow: str = "best") -> OpCost:
    """:func:`cost` of ``op`` under the chip schedule's ``place`` (see
    :mod:`infersim.simulator.schedule`): the bytes the schedule kept on chip leave the DRAM
    traffic, and the time is the mapping's time rule again with what moved (a resident input
    leaves the first load, a resident output the last store, a prefetched weight load the
    first load too, at most the DRAM's idle time before the op). Other operators are the
    roofline's with the same bytes taken out, or, fused behind the array, their vector time
    beyond the array's compute and no kernel overhead."""
    base = cost(op, chip, dataflow)
    if place == STANDALONE:
        return base
    flow = tensors(op)
    if flow is None:
        return base
    if not isinstance(op, Gemm | Conv2d):
        return _scheduled_roofline(op, chip, place, base, flow)
    return _scheduled_mapping(op, chip, place, base, dataflow)


def _scheduled_roofline(
    op: OpBase, chip: Chip, place: Placement, base: OpCost, flow: tuple[float, float]
) -> OpCost:
    cal = chip.calibration
    kept = (flow[0] if place.input_on_chip else 0.0) + (flow[1] if place.output_on_chip else 0.0)
    kept = min(kept, base.dram_bytes)
    dram_bytes = base.dram_bytes - kept
    memory_s = dram_bytes / (chip.dram.bandwidth_bytes_per_s * cal.dram_bandwidth_efficiency)
    vector_s = op.vector_flops / (chip.vector_flops * cal.vector_efficiency)
    array_s = max(base.compute_s - vector_s, 0.0) if op.array_flops else 0.0
    if place.overlap_s is not None:  # in the pipeline behind the array: no kernel of its own
        exposed = max(vector_s - place.overlap_s, 0.0)
        time_s = max(exposed, memory_s)
        bound: Bound = "vector" if exposed >= memory_s else "memory"
    else:
        terms: dict[Bound, float] = {"compute": array_s, "vector": vector_s, "memory": memory_s}
        bound = max(terms, key=terms.__getitem__)
        time_s = terms[bound] + chip.kernel_overhead_s
    return replace(
        base, dram_bytes=dram_bytes, memory_s=memory_s, time_s=time_s, bound=bound,
        cycles=time_s * chip.freq_hz, onchip_bytes=kept,
        energy_pj=base.energy_pj - kept * (chip.energy.dram_pj_per_byte
                                           - chip.energy.sram_pj_per_byte),
    )  # fmt: skip


@dataclass(frozen=True)
class Retime:
    """What re-timing a mapped op under a schedule needs from its mappings (kept beside its
    cost, in memory and in the persistent store, so a warm run searches nothing)."""

    shared: bool
    """The chip has a shared SRAM: the cores' time is against it, DRAM is the outer level."""
    map_s: float
    """The cores' mapping time, less the launches of its kernels beyond the first
    (:func:`mapping_seconds`)."""
    memory_bound: bool
    """The cores' mapping is bound by what feeds them."""
    cores_used: float
    """Cores the cores' mapping keeps busy."""
    busy_factor: float
    """Core-busy cycles per compute cycle (:func:`busy_factor`)."""
    first_load_cycles: float
    last_store_cycles: float
    compute_cycles: float
    input_share: float
    """The input's share of the first tile's load (the rest is weights)."""
    dram_bytes: float
    input_reads: float
    output_writes: float
    weight_reads: float
    kernels: int = 1
    """Kernels the cores' mapping launches (:attr:`Mapping.kernels`)."""
    waves: tuple[float, ...] = ()
    """On a two-level chip, the fields of the cores' mapping's
    :class:`~infersim.dataflow.loopnest.waves.Waves` (its ``levels``)."""


_RETIMES: OrderedDict[tuple[Any, ...], Retime] = OrderedDict()


def retime_inputs(op: Gemm | Conv2d, chip: Chip, dataflow: str) -> Retime:
    """The :class:`Retime` of ``op`` on ``chip`` (memoized; persisted with the costs)."""
    return _remembered(_RETIMES, Retime, "retime:", op, chip, dataflow,
                       lambda: _retime_of(op, chip, dataflow))  # fmt: skip


def _retime_of(op: Gemm | Conv2d, chip: Chip, dataflow: str) -> Retime:
    shared = chip.shared_sram is not None
    view, outer_view = level_views(chip) if shared else (chip, chip)
    mapping = mapping_of(op, chip, dataflow)
    # the DRAM level: the chip's own mapping, or the shared-SRAM level's on a two-level chip
    traffic = traffic_of(op, outer_view) if shared else mapping.traffic["dram"]
    prob = problem_of(op)
    tile_in = tile_operand_bytes(prob, "input", mapping.sram_tile)
    tile_w = tile_operand_bytes(prob, "weight", mapping.sram_tile)
    return Retime(
        shared=shared, map_s=mapping_seconds(op, view, mapping),
        memory_bound=mapping.bound == "memory",
        busy_factor=busy_factor(op, view, mapping),
        cores_used=float(mapping.cores_used),
        first_load_cycles=mapping.first_load_cycles, last_store_cycles=mapping.last_store_cycles,
        compute_cycles=float(mapping.compute_cycles),
        input_share=tile_in / (tile_in + tile_w) if tile_in + tile_w else 0.0,
        dram_bytes=sum(a.total_bytes for a in traffic.values()),
        input_reads=traffic["input"].reads_bytes,
        output_writes=traffic["output"].writes_bytes, weight_reads=traffic["weight"].reads_bytes,
        kernels=mapping.kernels,
        waves=tuple(mapping.levels) if mapping.levels is not None else (),
    )  # fmt: skip


def _scheduled_mapping(
    op: Gemm | Conv2d, chip: Chip, place: Placement, base: OpCost, dataflow: str
) -> OpCost:
    cal, freq = chip.calibration, chip.freq_hz
    r = retime_inputs(op, chip, dataflow)
    kept_in = r.input_reads if place.input_on_chip else 0.0
    kept_out = r.output_writes if place.output_on_chip else 0.0
    dram_bytes = r.dram_bytes - kept_in - kept_out
    vector_s = overlapped_vector_s(op, chip)
    if r.shared:  # the cores' waves as before; DRAM moves less (the prefetch hid some)
        per_s = dram_bandwidth(chip, r.cores_used)
        hidden = min(place.prefetch_s, r.weight_reads / per_s)
        moved = max(dram_bytes - hidden * per_s, 0.0)
        writes = max(r.output_writes - kept_out, 0.0)  # the schedule hides reads only
        cycles, code = two_level_cycles(Waves(*r.waves), moved, min(writes, moved),
                                        chip.dram.latency_s * chip.freq_hz, PY)  # fmt: skip
        bound: Bound = cast(Bound, BOUNDS[round(code)])
        both_s = cycles / freq
        if vector_s > both_s:
            bound, both_s = "vector", vector_s
        time_s = both_s + r.kernels * chip.kernel_overhead_s
        memory_s = moved / per_s + chip.dram.latency_s
    else:  # the mapping's time rule with what the schedule kept and hid
        per_cycle = float(feed_bytes_per_cycle(chip, r.cores_used, PY))  # its ports' cap too
        first = r.first_load_cycles * (1.0 - r.input_share if place.input_on_chip else 1.0)
        weight_first = r.first_load_cycles * (1.0 - r.input_share)
        hidden_cycles = min(place.prefetch_s * freq, weight_first, first)
        first -= hidden_cycles
        last = 0.0 if place.output_on_chip else r.last_store_cycles
        dram_cycles = max(dram_bytes / per_cycle - hidden_cycles, 0.0)
        busy = r.compute_cycles / cal.compute(problem_of(op).mac_class) * r.busy_factor
        rest = max(dram_cycles - first - last, 0.0)
        total = first + max(busy, rest) + last + chip.dram.latency_s * freq
        memory_s = dram_cycles / freq
        bound, time_s = _bound_and_time(chip, total / freq, r.memory_bound, vector_s, r.kernels)
    kept = kept_in + kept_out
    return replace(
        base, dram_bytes=dram_bytes, memory_s=memory_s, time_s=time_s, bound=bound,
        cycles=time_s * freq, onchip_bytes=kept,
        energy_pj=base.energy_pj - kept * (chip.energy.dram_pj_per_byte
                                           - chip.energy.sram_pj_per_byte),
    )  # fmt: skip
