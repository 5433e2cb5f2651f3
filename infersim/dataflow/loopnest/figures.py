"""Every figure of a mapping from its tile factors: traffic per level and operand, compute
cycles, utilizations, SRAM and RF need, and time (the analytic rule).

Time: the first tile's load, then per tile the larger of its compute and its DRAM transfer
(computed in aggregate: max(compute, remaining DRAM)), then the last tile's store, plus one DRAM
access latency. DRAM bytes per cycle = dram.bandwidth_bytes_per_s ×
calibration.dram_bandwidth_efficiency / freq_hz; compute cycles are divided by the calibrated
compute efficiency. With several cores, compute cycles = mean cycles per dealt iteration ×
ceil(iterations / cores) × the longest item's share (a chunked reduction loop's chunks may
differ by a slice, see :mod:`~infersim.dataflow.loopnest.dram`), never below MACs / (PEs ×
cores × r). A mapping that deals a reduction loop in more than one chunk launches a second
kernel that sums the partials: its time adds one more ``kernel_overhead_s`` of the chip mapped
(:func:`launch_cycles`), so that the search splits only where splitting saves more than the
launch. The engines add every kernel's overhead, the first one included, outside the
mapping's time (see :func:`loop_nest_cycles`).

One evaluation, :func:`figures_of`, serves both callers: :func:`evaluate_orders` (and
:func:`evaluate`) for batches of candidate tilings in arrays, and the builder of one
:class:`~infersim.dataflow.loopnest.mapping.Mapping` for one tiling in plain floats.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from infersim.arch_models.chip import Chip
from infersim.dataflow.loopnest.dram import REDUCTION, dram_figures, held_chunks
from infersim.dataflow.loopnest.folds import KEYS, rf_need
from infersim.dataflow.loopnest.numerics import NP, Arr, Candidates, Figures, MathNamespace, prod
from infersim.dataflow.loopnest.problem import (
    Nest,
    Order,
    Orders,
    Problem,
    footprint,
    nest_of,
    tile_bytes,
    total_footprint,
)
from infersim.dataflow.loopnest.tiles import all_tiles, tile_classes
from infersim.dataflow.templates import OPERANDS, Template

LEVELS: tuple[str, ...] = ("dram", "sram", "array", "register_file")
"""Storage levels, outer to inner."""


def multicast_of(chip: Chip) -> int:
    """Cores one read of the level feeding the cores serves at once (the shared SRAM's
    ``multicast_cores``; 1 without a shared SRAM)."""
    return chip.shared_sram.multicast_cores if chip.shared_sram is not None else 1


def partials_capacity_bytes(chip: Chip) -> float:
    """Bytes the level above the cores of ``chip`` holds, where a split reduction's partial
    sums meet: its DRAM's capacity (a chip mapped straight from DRAM, where it never binds; in
    the cores view of a chip with a shared SRAM, the shared SRAM's, which
    :func:`~infersim.simulator.engines.analytic.level_views` puts there)."""
    return float(chip.dram.capacity_bytes)


def launch_cycles(chip: Chip, kernels: Any) -> Any:
    """Cycles the launches of a mapping's ``kernels`` beyond the first take on ``chip``: its
    ``kernel_overhead_s`` each (0 on a chip without one)."""
    return (kernels - 1.0) * (chip.kernel_overhead_s * chip.freq_hz)


def loop_nest_cycles(chip: Chip, total_cycles: float, kernels: int) -> float:
    """The ``total_cycles`` of a mapping on ``chip`` less the launches of its kernels beyond
    the first (:func:`launch_cycles`): what the engines overlap with the other levels before
    they add every kernel's overhead."""
    return total_cycles - float(launch_cycles(chip, float(kernels)))


def feed_bytes_per_cycle(chip: Chip, cores_used: Any, xp: MathNamespace) -> Any:
    """Bytes per cycle the level feeding the cores delivers to ``cores_used`` busy cores:
    its achievable bandwidth, at most ``cores_used`` x each core's ``sram.fill_bytes_per_cycle``
    (the cores' ports)."""
    per_cycle = (
        chip.dram.bandwidth_bytes_per_s * chip.calibration.dram_bandwidth_efficiency / chip.freq_hz
    )
    port = chip.sram.fill_bytes_per_cycle
    return per_cycle if port is None else xp.minimum(per_cycle, cores_used * port)


def wave_rates(chip: Chip, in_flight: Any, iterations: Any, xp: MathNamespace) -> tuple[Any, Any]:
    """Bytes per cycle the level feeding the cores delivers in a full wave of ``iterations``
    work items dealt to ``chip``'s cores, and in the last (maybe partial) wave.

    The feed delivers :func:`feed_bytes_per_cycle` to the cores busy in a wave, and by Little's
    law each busy core draws at most ``in_flight`` bytes (its double-buffered tiles' loads)
    per fill latency (``sram.fill_latency_s``, else the DRAM latency; none without one)."""
    cores = chip.cores
    latency = chip.sram.fill_latency_s
    latency = chip.dram.latency_s if latency is None else latency
    per_core = in_flight / (latency * chip.freq_hz) if latency > 0 else None
    if cores == 1:
        rate = feed_bytes_per_cycle(chip, 1.0, xp)
        rate = rate if per_core is None else xp.minimum(rate, per_core)
        return rate, rate
    waves = xp.ceil_div(iterations, cores)
    last = xp.minimum(iterations - (waves - 1.0) * cores, iterations)
    full = feed_bytes_per_cycle(chip, float(cores), xp)
    tail = feed_bytes_per_cycle(chip, last, xp)
    if per_core is None:
        return full, tail
    return xp.minimum(full, cores * per_core), xp.minimum(tail, last * per_core)


def wave_split(chip: Chip, iterations: Any, xp: MathNamespace) -> tuple[Any, Any, Any]:
    """(waves, share of the work items in one full wave, share in the last wave) of
    ``iterations`` items dealt to ``chip``'s cores."""
    cores = chip.cores
    if cores == 1:
        return 1.0, 1.0, 1.0
    waves = xp.ceil_div(iterations, cores)
    last = xp.minimum(iterations - (waves - 1.0) * cores, iterations)
    return waves, xp.minimum(float(cores), iterations) / iterations, last / iterations


def in_flight_cycles(chip: Chip, nbytes: Any, in_flight: Any, iterations: Any,
                     xp: MathNamespace) -> Any:
    """Cycles the level feeding the cores takes to move ``nbytes`` for ``iterations`` work
    items dealt to ``chip``'s cores in waves, at the rates of :func:`wave_rates`: the full
    waves their share of the bytes at the full rate, the last wave its share at its own."""
    full, tail = wave_rates(chip, in_flight, iterations, xp)
    waves, per_wave, last = wave_split(chip, iterations, xp)
    return nbytes * ((waves - 1.0) * per_wave / full + last / tail)


def waves_cycles(busy: Any, transfers: list[tuple[Any, Any, Any]], waves: Any, per_wave: Any,
                 last: Any, xp: MathNamespace) -> Any:
    """Cycles of the waves of a mapping pipelined wave by wave: each wave takes the larger of
    its compute (``busy`` over the waves) and each level's transfer of its share of the bytes
    (``transfers``: bytes, full-wave rate, last-wave rate per level); the full waves share
    ``per_wave`` of the items each, the last ``last``. Equal to max(compute, transfers) when
    every wave is full; a memory-bound op's partial last wave may be compute-bound alone."""
    c = busy / waves
    t_full: Any = 0.0
    t_last: Any = 0.0
    for nbytes, full, tail in transfers:
        t_full = xp.maximum(t_full, nbytes * per_wave / full)
        t_last = xp.maximum(t_last, nbytes * last / tail)
    return (waves - 1.0) * xp.maximum(c, t_full) + xp.maximum(c, t_last)


def evaluate(
    prob: Problem, tpl: Template, chip: Chip, tile: Candidates, order: Order, rf: Candidates
) -> Figures:
    """Every figure of :class:`~infersim.dataflow.loopnest.mapping.Mapping` for a batch of
    candidate tilings (arrays, one element per candidate; ``tile`` holds all of :data:`DIMS`,
    ``rf`` all of the template's rf_split) with the DRAM loop ``order``. Traffic is
    ``traffic[level][operand] = (reads, writes)`` bytes. A figure the same on every candidate
    (one core: iterations, waves, cores used) may be one number.
    """
    return _pick(evaluate_orders(prob, tpl, chip, tile, (order,), rf), 0, slice(None))  # type: ignore[no-any-return]


def _pick(x: Any, o: int, i: Any) -> Any:
    """Element ``i`` of every figure of :func:`evaluate_orders` for its ``o``-th order."""
    if isinstance(x, dict):
        return {k: _pick(v, o, i) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(_pick(v, o, i) for v in x)
    if isinstance(x, np.ndarray):
        return x[o, i] if x.ndim == 2 else x[i]
    return x


def evaluate_orders(
    prob: Problem, tpl: Template, chip: Chip, tile: Candidates, orders: Orders, rf: Candidates
) -> Figures:
    """:func:`evaluate` for several DRAM loop orders (all orders of the same dims) at once: the
    figures broadcast to shape (orders, candidates); those that depend on the order have it,
    the others have shape (candidates,) or are one number (each element computed exactly as
    :func:`evaluate` computes it)."""
    return figures_of(nest_of(prob, tpl, chip), tile, orders, rf, NP)


class Prepared(NamedTuple):
    """What the timing of a batch of candidates needs and no DRAM bandwidth, clock or
    calibration changes (a chip that differs only in those re-times it): see :func:`prepare`."""

    cycles: Arr
    """Fold cycles summed over every SRAM tile, per candidate."""
    counts: Figures
    """SRAM tiles along each dim of :data:`DIMS`, per candidate."""
    sram: Figures
    """Bytes per operand of one SRAM tile, per candidate."""
    compulsory: Arr
    """DRAM bytes every loop order moves at least: each operand's tiles once (input halos
    included), the output written once at its epilogue scale."""
    tiles: Arr
    """SRAM tiles per candidate."""


def compulsory_bytes(prob: Problem, counts: Figures) -> Any:
    """DRAM bytes every loop order moves at least with ``counts[d]`` SRAM tiles along each dim:
    each operand's tiles once (input halos included), the output written once at its epilogue
    scale."""
    return sum(
        total_footprint(prob, name, counts) * prob.operand_bytes[name]
        * (prob.output_write_scale if name == "output" else 1.0)
        for name in OPERANDS
    )


def prepare(
    prob: Problem, tpl: Template, chip: Chip, tile: Candidates, rf: Candidates
) -> Prepared:
    """The :class:`Prepared` figures of candidate tilings ``tile`` with RF factors ``rf``."""
    nest = nest_of(prob, tpl, chip)
    classes = tile_classes(prob, tile, NP)
    cycles = all_tiles(nest, classes, rf, NP, cycles_only=True)["cycles"]
    counts = classes.counts
    compulsory = compulsory_bytes(prob, counts)
    sram: Figures = {name: tile_bytes(prob, name, tile, NP) for name in OPERANDS}
    tiles = np.broadcast_to(prod(counts.values()), cycles.shape)
    return Prepared(cycles, counts, sram, np.broadcast_to(compulsory, cycles.shape), tiles)


def peak_bound_cycles(prob: Problem, chip: Chip, rate: float) -> Any:
    """Cycles the op's MACs take on every PE of every core at ``rate`` MACs per PE per cycle:
    the compute cycles no mapping goes below (a float, or an array over the candidates of a
    :func:`~infersim.dataflow.loopnest.problem.stacked` problem)."""
    peak = chip.array.rows * chip.array.cols * chip.cores * rate
    if isinstance(prob.macs, np.ndarray):
        return np.ceil(prob.macs / peak - 1e-9)
    return float(math.ceil(prob.macs / peak - 1e-9))


LOWER_BOUND_MARGIN = 1e-9
"""Relative slack :func:`lower_bound_cycles` leaves below its bound, so that no rounding of the
two evaluations' different operations can put a bound above the figure it bounds."""


def lower_bound_cycles(prob: Problem, tpl: Template, chip: Chip, prep: Prepared) -> Arr:
    """Per candidate, a bound no loop order's ``total_cycles`` falls below, from the figures
    that do not depend on the order:

    - the cores used are at most min(tiles, cores) in every order (the outer loops are dealt
      until the dealt iterations reach the cores, or every loop is dealt), and at least that
      or, where a reduction loop iterates, min(floor(cores / 2), floor(held / 2)) + 1 (held:
      :func:`~infersim.dataflow.loopnest.dram.held_chunks`): a reduction loop cut into chunks
      after ``above`` items leaves above × chunks items, and chunks of ceil(n / s) iterations
      number more than s / 2 when s < n; with s = floor(cores / above), above × chunks >
      cores / 2, with s = held (C is the only reduction loop that iterates: filter rows and
      columns are whole), above × chunks > held / 2. The first load and the last store grow
      with the cores used: they are bounded with the fewest;
    - the dealt compute cycles are at least the fold cycles over the most cores used (equal
      when every tile gets a core: one wave);
    - DRAM moves at least the compulsory bytes, and the transfers beyond the first load and the
      last store overlap compute at best;
    - the launch of a second kernel (a split reduction) only adds time: it is left out.
    """
    nest = nest_of(prob, tpl, chip)
    _, _, chip, rate = nest
    cores = chip.cores
    bound_cycles = peak_bound_cycles(prob, chip, rate)
    used = np.minimum(prep.tiles, float(cores)) if cores > 1 else 1.0
    per_cycle = feed_bytes_per_cycle(chip, used, NP)  # the dealt cores are never more
    fewest = used
    if cores > 1:
        chunked = prod(prep.counts[d] for d in REDUCTION) > 1.5
        held = held_chunks(prob, prep.counts, partials_capacity_bytes(chip), NP)
        cut = np.minimum(float(cores // 2 + 1), np.floor(held / 2.0) + 1.0)
        fewest = np.where(chunked, np.minimum(used, cut), used)
    # a core's first load (last store) over its feed grows with the cores: the fewest bound it
    per_fewest = feed_bytes_per_cycle(chip, fewest, NP)
    first = fewest * (prep.sram["input"] + prep.sram["weight"]) / per_fewest
    last = fewest * prep.sram["output"] / per_fewest
    compute = np.maximum(np.ceil(prep.cycles / used - 1e-9) - 1, bound_cycles)
    busy = compute / chip.calibration.compute(prob.mac_class)
    overlap = np.maximum(first + busy + last, prep.compulsory / per_cycle)
    return (overlap + chip.dram.latency_s * chip.freq_hz) * (1.0 - LOWER_BOUND_MARGIN)  # type: ignore[no-any-return]


def total_cycles_at(
    prob: Problem, tpl: Template, chip: Chip, prep: Prepared, orders: Orders, idx: Any
) -> Arr:
    """The ``total_cycles`` figure of :func:`evaluate_orders` of the candidates ``idx`` (an
    index array into the prepared ones), shape (orders, len(idx)): the same operations, element
    for element, as the full call makes for them (a loop no chosen candidate iterates is left
    out, which changes no product)."""
    counts = {d: v[idx] for d, v in prep.counts.items()}
    fig = dram_figures(prob, counts, orders, chip.cores, NP, multicast_of(chip),
                       partials_capacity_bytes(chip))
    dram_bytes = sum(fig.reads[name] + fig.writes[name] for name in OPERANDS)
    sram = {name: v[idx] for name, v in prep.sram.items()}
    time = _time(nest_of(prob, tpl, chip), prep.cycles[idx], fig.iterations, fig.longest, sram,
                 dram_bytes, fig.kernels, NP)
    return time["total_cycles"]  # type: ignore[no-any-return]


def total_cycles_orders(
    prob: Problem, tpl: Template, chip: Chip, tile: Candidates, orders: Orders, rf: Candidates
) -> Arr:
    """The ``total_cycles`` figure of :func:`evaluate_orders` alone, shape (orders, candidates):
    the same operations, in the same order, as the full call makes for them."""
    prep = prepare(prob, tpl, chip, tile, rf)
    return total_cycles_at(prob, tpl, chip, prep, orders, np.arange(len(prep.cycles)))


def figures_of(
    nest: Nest, tile: Figures, orders: Orders, rf: Figures, xp: MathNamespace
) -> Figures:
    """The figures of :func:`evaluate_orders` of SRAM tiles of extents ``tile`` and RF factors
    ``rf``: arrays over candidates with ``xp`` = :data:`NP`, floats of one tiling (and one
    order) with :data:`PY`."""
    prob, tpl, chip, rate = nest
    rows, cols, cores = chip.array.rows, chip.array.cols, chip.cores
    classes = tile_classes(prob, tile, xp)
    sums = all_tiles(nest, classes, rf, xp)
    dram_rd, dram_wr, iterations, longest, kernels = dram_figures(
        prob, classes.counts, orders, cores, xp, multicast_of(chip), partials_capacity_bytes(chip))
    ob = prob.operand_bytes
    out_elems = footprint("output", prob.dims, prob.stride, window=False)
    traffic: dict[str, dict[str, tuple[Any, Any]]] = {level: {} for level in LEVELS}
    zero = xp.zeros_like(tile["G"])
    for name, keys in KEYS.items():
        b = ob[name]
        traffic["dram"][name] = (dram_rd[name], dram_wr[name])
        feed, deliver, rf_slots = (sums[key] for key in keys)
        if name == "output":
            traffic["sram"][name] = (
                (feed - out_elems) * b + dram_wr[name],
                feed * b + dram_rd[name],
            )
            traffic["array"][name] = (zero, deliver * b)
            traffic["register_file"][name] = (rf_slots * b, rf_slots * b)
        else:
            traffic["sram"][name] = (feed * b, dram_rd[name])
            traffic["array"][name] = (deliver * b, zero)
            traffic["register_file"][name] = (
                rf_slots * b,
                xp.where(rf_slots > 0, deliver * b, 0.0),
            )
    dram_bytes = sum(r + w for r, w in traffic["dram"].values())
    sram: Figures = {name: tile_bytes(prob, name, tile, xp) for name in OPERANDS}
    time = _time(nest, sums["cycles"], iterations, longest, sram, dram_bytes, kernels, xp)
    return {
        "traffic": traffic,
        "iterations": iterations,
        "tiles": prod(classes.counts.values()),
        "folds": sums["folds"],
        "mapping_efficiency": sums["used"] / (sums["folds"] * rows * cols),
        "compute_utilization": sums["util_num"] / sums["util_den"],
        "overall_utilization": prob.macs / (time["total_cycles"] * rows * cols * cores * rate),
        "sram_bytes": 2.0 * sum(v for name, v in sram.items()
                                if name != "output" or not tpl.output_in_registers),
        "rf_bytes": rf_need(prob, tpl, tile, rf, xp),
        "dram_bytes": dram_bytes,
        **time,
    }


def _time(
    nest: Nest, cycles: Any, iterations: Any, longest: Any, sram: Figures, dram_bytes: Any,
    kernels: Any, xp: MathNamespace,
) -> Figures:
    """Waves, cores used, compute cycles and time of ``cycles`` summed over every SRAM tile,
    ``iterations`` work items of the DRAM loops dealt to the cores (the longest ``longest``
    times the mean item), ``sram`` bytes per operand of one tile and ``dram_bytes``, launching
    ``kernels`` kernels (each beyond the first adds :func:`launch_cycles`)."""
    prob, _, chip, rate = nest
    cores = chip.cores
    bound_cycles = peak_bound_cycles(prob, chip, rate)
    load = sram["input"] + sram["weight"]
    if cores > 1:
        waves = xp.ceil_div(iterations, cores)
        cores_used = xp.minimum(iterations, float(cores))
        per_cycle = feed_bytes_per_cycle(chip, cores_used, xp)
        dealt_cycles = cycles / iterations * waves * longest
        first = cores_used * load / per_cycle
        last = cores_used * sram["output"] / per_cycle
    else:  # iterations, waves and cores used are 1.0: x / 1.0 * 1.0 and 1.0 * x are x exactly
        waves = cores_used = 1.0
        per_cycle = feed_bytes_per_cycle(chip, 1.0, xp)
        dealt_cycles, first, last = cycles, load / per_cycle, sram["output"] / per_cycle
    compute_cycles = xp.maximum(xp.ceil_div(dealt_cycles, 1.0) - 1, bound_cycles)
    full, tail = wave_rates(chip, 2.0 * load, iterations, xp)
    n_waves, per_wave, share = wave_split(chip, iterations, xp)
    dram_cycles = dram_bytes * ((n_waves - 1.0) * per_wave / full + share / tail)
    busy = compute_cycles / chip.calibration.compute(prob.mac_class)
    piped = waves_cycles(busy, [(dram_bytes, full, tail)], n_waves, per_wave, share, xp)
    rest = xp.maximum(piped - first - last, 0.0)
    total_cycles = first + xp.maximum(busy, rest) + last + chip.dram.latency_s * chip.freq_hz
    if chip.kernel_overhead_s > 0:  # one per chip: x + 0.0 would change no figure either
        total_cycles = total_cycles + launch_cycles(chip, kernels)
    return {
        "kernels": kernels,
        "waves": waves,
        "cores_used": cores_used,
        "compute_cycles": compute_cycles,
        "dram_cycles": dram_cycles,
        "first_load_cycles": first,
        "last_store_cycles": last,
        "total_cycles": total_cycles,
        "compute_bound": busy >= rest,
    }
