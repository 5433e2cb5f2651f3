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
mapping's time (see :func:`loop_nest_cycles`). On the cores view of a two-level chip, given the
op's DRAM level (a :class:`~infersim.dataflow.loopnest.waves.Backing`), the time is instead the
two-level chip's (:func:`~infersim.dataflow.loopnest.waves.two_level_cycles`).

One evaluation, :func:`figures_of`, serves both callers: :func:`evaluate_orders` (and
:func:`evaluate`) for batches of candidate tilings in arrays, and the builder of one
:class:`~infersim.dataflow.loopnest.mapping.Mapping` for one tiling in plain floats.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from infersim.arch_models.chip import Chip
from infersim.dataflow.loopnest.dram import REDUCTION, DramFigures, dram_figures, held_chunks
from infersim.dataflow.loopnest.folds import KEYS, rf_need
from infersim.dataflow.loopnest.numerics import (
    NP,
    PY,
    Arr,
    Candidates,
    Figures,
    MathNamespace,
    prod,
    prod_skipping_ones,
)
from infersim.dataflow.loopnest.problem import (
    Nest,
    Order,
    Orders,
    Problem,
    footprint,
    nest_of,
    tile_bytes,
    tile_factors,
    total_footprint,
)
from infersim.dataflow.loopnest.tiles import all_tiles, tile_classes
from infersim.dataflow.loopnest.waves import (
    Backing,
    CoresFigures,
    Waves,
    feed_bytes_per_cycle,
    feed_of,
    split_of,
    two_level_cycles,
    vector_per_cycle,
    wave_rates,
    waves_cycles,
    waves_of,
)
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
    prob: Problem, tpl: Template, chip: Chip, tile: Candidates, orders: Orders, rf: Candidates,
    backing: Backing | None = None,
) -> Figures:
    """:func:`evaluate` for several DRAM loop orders (all orders of the same dims) at once: the
    figures broadcast to shape (orders, candidates); those that depend on the order have it,
    the others have shape (candidates,) or are one number (each element computed exactly as
    :func:`evaluate` computes it). With a ``backing`` (``chip`` the cores view of a two-level
    chip), the time is the two-level chip's (see :func:`figures_of`)."""
    return figures_of(nest_of(prob, tpl, chip), tile, orders, rf, NP, backing)


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
    folds: Arr
    """Array folds summed over every SRAM tile, per candidate."""
    footprints: Figures
    """Bytes of each operand's tiles, each once (input halos included), per candidate: what
    :func:`~infersim.dataflow.loopnest.dram.dram_figures` fetches once per refetch."""
    weight_fed: Arr | None = None
    """Weight elements fed to the array over every SRAM tile, per candidate, where the search
    asked for them (a weight-only quantized op's dequantization, :func:`prepare`)."""


def compulsory_bytes(prob: Problem, counts: Figures, footprints: Figures | None = None) -> Any:
    """DRAM bytes every loop order moves at least with ``counts[d]`` SRAM tiles along each dim:
    each operand's tiles once (input halos included: its :func:`footprint_bytes`, or
    ``footprints`` where given), the output written once at its epilogue scale: input +
    weight + output × scale, in that order (bit for bit a sum from 0 of every operand times
    1.0 or the scale: bytes are never -0.0, and a scale of 1.0 is skipped)."""
    once = footprint_bytes(prob, counts) if footprints is None else footprints
    written = prod_skipping_ones((once["output"], prob.output_write_scale))
    return once["input"] + once["weight"] + written


def footprint_bytes(prob: Problem, counts: Figures) -> Figures:
    """Per operand, the bytes of its tiles each once (input halos included) with ``counts[d]``
    SRAM tiles along each dim."""
    return {name: total_footprint(prob, name, counts) * prob.operand_bytes[name]
            for name in OPERANDS}  # fmt: skip


def prepare(
    prob: Problem, tpl: Template, chip: Chip, tile: Candidates, rf: Candidates,
    weight_fed: bool = False,
) -> Prepared:
    """The :class:`Prepared` figures of candidate tilings ``tile`` with RF factors ``rf``
    (with ``weight_fed``, the weight elements each feeds the array too)."""
    nest = nest_of(prob, tpl, chip)
    classes = tile_classes(prob, tile, NP)
    sums = all_tiles(nest, classes, rf, NP, cycles_only=not weight_fed)
    cycles = sums["cycles"]
    counts = classes.counts
    # a dim whole in every tile: its extent (one tile of it, the float 1.0), so that the
    # products below skip it (x · 1.0 is x exactly: the same figures, fewer array operations)
    whole = {**tile, **classes.whole}
    ones = {d: 1.0 if d in classes.whole else n for d, n in counts.items()}
    footprints = footprint_bytes(prob, ones)
    compulsory = compulsory_bytes(prob, ones, footprints)
    sram: Figures = {name: prod_skipping_ones(tile_factors(prob, name, whole, NP))
                     for name in OPERANDS}  # fmt: skip
    shape = cycles.shape
    fed = _over(sums[KEYS["weight"][0]], shape) if weight_fed else None
    return Prepared(cycles, counts, sram, _over(compulsory, shape),
                    _over(prod_skipping_ones(ones.values()), shape), _over(sums["folds"], shape),
                    footprints, fed)  # fmt: skip


def _over(x: Any, shape: tuple[int, ...]) -> Arr:
    """``x`` over the candidates, of ``shape``: itself where it is an array of that shape
    already (``np.broadcast_to`` costs as much as a figure's arithmetic), else a read-only
    view."""
    return x if isinstance(x, np.ndarray) and x.shape == shape else np.broadcast_to(x, shape)


def lanes_cycles(prob: Problem, chip: Chip, converting: Any, cores_used: Any) -> Any:
    """Busy cycles per core of running the op's MACs as multiply-adds (2 FLOPs each) on the
    cores' vector lanes, with ``converting`` lane cycles of weight conversion, over
    ``cores_used`` cores at the calibrated vector efficiency: what a template whose lanes
    can run the MACs (``Template.vector_macs``, a GPU's CUDA cores running a decode GEMV)
    takes where that beats the array (see
    :func:`infersim.simulator.engines.analytic.busy_factor`, the same rule on one mapping)."""
    return (2.0 * prob.macs / vector_per_cycle(chip) + converting) / cores_used


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


def lower_bound_cycles(
    prob: Problem, tpl: Template, chip: Chip, prep: Prepared, backing: Backing | None = None
) -> Arr:
    """Per candidate, a bound no loop order's ``total_cycles`` falls below, from the figures
    that do not depend on the order (with a ``backing``, of the two-level time):

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
    - the launch of a second kernel (a split reduction) only adds time: it is left out;
    - with a ``backing``, the array starts on the first fold's data: of the first load, at
      least its share of one of the tile's folds is exposed (the mean folds of a tile do not
      depend on the order); the shared SRAM's transfers take at least the compulsory bytes
      at its rate, plus the one DRAM access latency; DRAM's, the op's DRAM bytes at its rate
      to the most cores used (every wave draws its share at most at that rate; its latency
      may hide behind the write-back).
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
        held = held_chunks(prob, prep.counts, partials_capacity_bytes(chip), NP,
                           prep.footprints["output"])  # fmt: skip
        cut = np.minimum(float(cores // 2 + 1), np.floor(held / 2.0) + 1.0)
        fewest = np.where(chunked, np.minimum(used, cut), used)
    # a core's first load (last store) over its feed grows with the cores: the fewest bound it
    per_fewest = feed_bytes_per_cycle(chip, fewest, NP)
    first = fewest * (prep.sram["input"] + prep.sram["weight"]) / per_fewest
    last = fewest * prep.sram["output"] / per_fewest
    compute = np.maximum(np.ceil(prep.cycles / used - 1e-9) - 1, bound_cycles)
    busy = compute / chip.calibration.compute(prob.mac_class)
    if tpl.vector_macs and backing is not None:  # the lanes' MACs alone, on the most cores
        busy = np.minimum(busy, lanes_cycles(prob, chip, 0.0, used))
    overlap = np.maximum(first + busy + last, prep.compulsory / per_cycle)
    if backing is None:
        return (overlap + chip.dram.latency_s * chip.freq_hz) * (1.0 - LOWER_BOUND_MARGIN)  # type: ignore[no-any-return]
    folds = np.maximum(prep.folds / prep.tiles, 1.0)
    overlap = np.maximum(first / folds + busy + last, prep.compulsory / per_cycle)
    dram = backing.dram_bytes / feed_of(backing.dram_bytes_per_cycle,
                                        chip.sram.fill_bytes_per_cycle, used, NP)  # fmt: skip
    bound = np.maximum(overlap + backing.dram_latency_cycles, dram)
    return bound * (1.0 - LOWER_BOUND_MARGIN)  # type: ignore[no-any-return]


class Access(NamedTuple):
    """Bytes read from and written to one level for one operand (floats of one mapping, or
    arrays over candidates in a search's figures): a named pair, so that a pick's twelve
    cost a tuple each (:data:`_access`)."""

    reads_bytes: float = 0.0
    writes_bytes: float = 0.0

    @property
    def total_bytes(self) -> float:
        """Reads plus writes."""
        return self.reads_bytes + self.writes_bytes


_access = functools.partial(tuple.__new__, Access)
"""``Access(r, w)`` given the pair ``(r, w)``, without the named tuple's ``__new__`` frame."""


class Timed(NamedTuple):
    """The DRAM figures and the time figures (:func:`_time`) of priced candidates: arrays over
    them (an order-dependent figure of shape (orders, candidates)), or one number where every
    candidate has the same (see :func:`timed_at`)."""

    dram: DramFigures
    time: Figures


def timed_at(
    prob: Problem, tpl: Template, chip: Chip, prep: Prepared, orders: Orders, idx: Any,
    backing: Backing | None = None,
) -> Timed:
    """The DRAM and time figures of :func:`evaluate_orders` of the candidates ``idx`` (an
    index array into the prepared ones, or a slice): the same operations, element for element,
    as the full call makes for them (a loop no chosen candidate iterates is left out, which
    changes no product). A ``backing`` of a weight-only quantized op needs ``prep`` prepared
    with its weight elements fed."""
    every = isinstance(idx, slice) and idx == slice(None)  # all of them: the arrays as they are

    def at(v: Any) -> Any:
        return v if every or not (isinstance(v, np.ndarray) and v.ndim) else v[idx]

    counts = {d: at(v) for d, v in prep.counts.items()}
    fig = dram_figures(prob, counts, orders, chip.cores, NP, multicast_of(chip),
                       partials_capacity_bytes(chip),
                       {name: at(v) for name, v in prep.footprints.items()})  # fmt: skip
    dram_bytes, writes = fig.moved()
    sram = {name: at(v) for name, v in prep.sram.items()}
    outer = None
    if backing is not None:
        fed = None if prep.weight_fed is None else at(prep.weight_fed)
        outer = _Outer(backing if every else backing.at(idx), fed, writes, at(prep.tiles),
                       at(prep.folds))  # fmt: skip
    time = _time(nest_of(prob, tpl, chip), at(prep.cycles), fig.iterations, fig.longest, sram,
                 dram_bytes, fig.kernels, NP, outer)
    return Timed(fig, time)


def total_cycles_at(
    prob: Problem, tpl: Template, chip: Chip, prep: Prepared, orders: Orders, idx: Any,
    backing: Backing | None = None,
) -> Arr:
    """The ``total_cycles`` figure of :func:`timed_at`, shape (orders, len(idx))."""
    return timed_at(prob, tpl, chip, prep, orders, idx, backing).time["total_cycles"]  # type: ignore[no-any-return]


class _Layout(NamedTuple):
    """How the figures of a :class:`Timed` lie one after another (:func:`_flattened`): the DRAM
    reads, then writes, per operand (these names); the iterations, the longest item and the
    kernels; the time figures but ``levels`` (these keys); then the fields of ``levels`` where
    there are some."""

    reads: tuple[str, ...]
    writes: tuple[str, ...]
    keys: tuple[str, ...]
    levels: bool
    """Whether the time figures hold :class:`~infersim.dataflow.loopnest.waves.Waves`."""


def _flattened(timed: Timed) -> tuple[list[Any], _Layout]:
    """The figures of ``timed`` one after another, and their :class:`_Layout`."""
    d, time = timed.dram, timed.time
    keys = tuple(k for k in time if k != "levels")
    levels = time["levels"]
    figures = [*d.reads.values(), *d.writes.values(), d.iterations, d.longest, d.kernels,
               *(time[k] for k in keys), *(() if levels is None else levels)]  # fmt: skip
    return figures, _Layout(tuple(d.reads), tuple(d.writes), keys, levels is not None)


def _unflattened(row: list[float], layout: _Layout) -> Timed:
    """The :class:`Timed` of one candidate's floats ``row`` laid out as ``layout`` says."""
    figures = iter(row)  # read one after another, in the layout's order
    dram = DramFigures({name: next(figures) for name in layout.reads},
                       {name: next(figures) for name in layout.writes},
                       next(figures), next(figures), next(figures))  # fmt: skip
    picked: Figures = {key: next(figures) for key in layout.keys}
    picked["levels"] = Waves._make(figures) if layout.levels else None
    return Timed(dram, picked)


def one_of(timed: Timed, o: int, i: int) -> Timed:
    """Candidate ``i`` in order ``o`` of priced figures, in floats."""
    figures, layout = _flattened(timed)
    return _unflattened(figures_at(figures, o, i), layout)


class PickedRows(NamedTuple):
    """The floats of a few priced candidates (:class:`Timed`), each read in one order: what
    a search keeps of a pricing once it knows which candidate each op may pick
    (:func:`picked_rows`), instead of every figure of every candidate."""

    rows: dict[tuple[int, int], list[float]]
    """By (order index, candidate index): the candidate's figures as :attr:`layout` lays
    them out."""
    layout: _Layout


def picked_rows(timed: Timed, picks: Sequence[tuple[int, int]]) -> PickedRows:
    """The :class:`PickedRows` of the candidates ``picks`` ((order index, candidate index)
    each) of ``timed``: each figure read as :func:`figure_at` reads it (an array over orders
    and candidates, over candidates, or one number), for all of them at once. A pricing of a
    group of 167 candidates in 6 orders has 38 figures: its picks' floats are a few hundred
    bytes where the whole table was 300 KB, written on every cold point."""
    figures, layout = _flattened(timed)
    size = int(np.shape(timed.time["total_cycles"])[-1])
    fixed: list[float] = []  # the figures one number on every candidate, as floats
    by_order: list[tuple[int, Any]] = []  # (position, its item reader) of (orders, candidates)
    by_candidate: list[tuple[int, Any]] = []  # ... of the figures over candidates alone
    for k, v in enumerate(figures):
        if isinstance(v, np.ndarray) and v.ndim:
            fixed.append(0.0)
            (by_order if v.ndim == 2 else by_candidate).append((k, v.item))
        else:
            fixed.append(float(v))
    rows = {}
    for o, i in picks:  # each figure read as a Python float (.item of float64) at the pick
        row = fixed.copy()
        at = o * size + i  # the pick's index in a figure's C order
        for k, item in by_order:
            row[k] = item(at)
        for k, item in by_candidate:
            row[k] = item(i)
        rows[(o, i)] = row
    return PickedRows(rows, layout)


def picked_row(rows: PickedRows, o: int, i: int) -> Timed:
    """:func:`one_of` of candidate ``i`` in order ``o``, read from :class:`PickedRows` that
    hold it: the same floats.

    Raises:
        KeyError: a candidate the rows do not hold.
    """
    return _unflattened(rows.rows[(o, i)], rows.layout)


def figure_at(x: Any, o: int, i: int) -> float:
    """Candidate ``i`` in order ``o`` of one figure of :func:`evaluate_orders` or
    :func:`timed_at` (an array over orders and candidates, over candidates, or one number)."""
    return figures_at((x,), o, i)[0]


def figures_at(values: Iterable[Any], o: int, i: int) -> list[float]:
    """:func:`figure_at` of each of ``values`` (one call for many figures: the rule is
    written here once)."""
    out = []
    for x in values:
        if isinstance(x, np.ndarray):
            out.append(float(x[o, i] if x.ndim == 2 else x[i] if x.ndim == 1 else x))
        else:
            out.append(float(x))
    return out


def total_cycles_orders(
    prob: Problem, tpl: Template, chip: Chip, tile: Candidates, orders: Orders, rf: Candidates
) -> Arr:
    """The ``total_cycles`` figure of :func:`evaluate_orders` alone, shape (orders, candidates):
    the same operations, in the same order, as the full call makes for them."""
    prep = prepare(prob, tpl, chip, tile, rf)
    return total_cycles_at(prob, tpl, chip, prep, orders, np.arange(len(prep.cycles)))


def dequantizes(backing: Backing | None) -> bool:
    """Whether the op of ``backing`` converts weights on the cores (its time needs the weight
    elements each candidate feeds the array)."""
    if backing is None:
        return False
    cycles = backing.dequant_cycles_per_weight
    return bool(np.any(cycles > 0)) if isinstance(cycles, np.ndarray) else cycles > 0


def figures_of(
    nest: Nest, tile: Figures, orders: Orders, rf: Figures, xp: MathNamespace,
    backing: Backing | None = None,
) -> Figures:
    """The figures of :func:`evaluate_orders` of SRAM tiles of extents ``tile`` and RF factors
    ``rf``: arrays over candidates with ``xp`` = :data:`NP`, floats of one tiling (and one
    order) with :data:`PY`. With a ``backing`` (``nest``'s chip the cores view of a two-level
    chip whose DRAM it describes), ``total_cycles`` is the two-level time
    (:func:`~infersim.dataflow.loopnest.waves.two_level_cycles`, plus the launches beyond the
    first), ``bound`` says which level binds, and ``levels`` holds the
    :class:`~infersim.dataflow.loopnest.waves.Waves` it was made of; the other figures are the
    cores view's."""
    prob, _, chip, _ = nest
    classes = tile_classes(prob, tile, xp)
    sums = all_tiles(nest, classes, rf, xp)
    dram = dram_figures(prob, classes.counts, orders, chip.cores, xp, multicast_of(chip),
                        partials_capacity_bytes(chip))  # fmt: skip
    dram_bytes, writes = dram.moved()
    sram: Figures = {name: tile_bytes(prob, name, tile, xp) for name in OPERANDS}
    outer = None
    if backing is not None:
        fed = sums[KEYS["weight"][0]] if dequantizes(backing) else None
        outer = _Outer(backing, fed, writes, prod(classes.counts.values()), sums["folds"])
    time = _time(nest, sums["cycles"], dram.iterations, dram.longest, sram, dram_bytes,
                 dram.kernels, xp, outer)  # fmt: skip
    return _figures(nest, tile, rf, xp, classes.counts, sums, sram, Timed(dram, time))


def picked_figures(nest: Nest, tile: Figures, rf: Figures, timed: Timed) -> Figures:
    """:func:`figures_of` in plain floats of one tiling (extents ``tile``, RF factors ``rf``)
    whose DRAM and time figures a search priced already (``timed``, in floats: see
    :func:`one_of`): its fold sums are computed, its DRAM traffic and time taken."""
    prob, tpl = nest.prob, nest.tpl
    classes = tile_classes(prob, tile, PY)
    # the bytes of the operands the SRAM holds of one tile (all that _figures reads of them)
    held = OPERANDS[:2] if tpl.output_in_registers else OPERANDS
    sram: Figures = {name: tile_bytes(prob, name, tile, PY) for name in held}
    return _figures(nest, tile, rf, PY, classes.counts, all_tiles(nest, classes, rf, PY), sram,
                    timed)  # fmt: skip


def _figures(
    nest: Nest, tile: Figures, rf: Figures, xp: MathNamespace, counts: Figures, sums: Figures,
    sram: Figures, timed: Timed,
) -> Figures:
    """The figures of :func:`figures_of` from the tiles' ``counts`` along each dim, their fold
    ``sums``, the ``sram`` bytes per operand of one tile (the output's read only where the
    SRAM holds it: not ``output_in_registers``), and their DRAM and time figures."""
    prob, tpl, chip, rate = nest
    rows, cols, cores = chip.array.rows, chip.array.cols, chip.cores
    dram, time = timed
    ob = prob.operand_bytes
    out_elems = footprint("output", prob.dims, prob.stride, window=False)
    # the traffic at each level of LEVELS, per operand
    at_dram: dict[str, Access] = {}
    at_sram: dict[str, Access] = {}
    at_array: dict[str, Access] = {}
    at_rf: dict[str, Access] = {}
    zero = xp.zeros_like(tile["G"])
    dram_bytes: Any = 0  # the operands' DRAM reads and writes, added in operand order
    for name, (feed_key, deliver_key, rf_key) in KEYS.items():
        b = ob[name]
        rd, wr = dram.reads[name], dram.writes[name]
        at_dram[name] = _access((rd, wr))
        dram_bytes = dram_bytes + (rd + wr)
        feed, deliver, rf_slots = sums[feed_key], sums[deliver_key], sums[rf_key]
        if name == "output":
            at_sram[name] = _access(((feed - out_elems) * b + wr, feed * b + rd))
            at_array[name] = _access((zero, deliver * b))
            at_rf[name] = _access((rf_slots * b, rf_slots * b))
        else:
            at_sram[name] = _access((feed * b, rd))
            at_array[name] = _access((deliver * b, zero))
            at_rf[name] = _access((rf_slots * b, xp.where(rf_slots > 0, deliver * b, 0.0)))
    # the bytes of one tile held in SRAM (0 + x is x exactly: bytes are never -0.0)
    held = sram["input"] + sram["weight"]
    if not tpl.output_in_registers:
        held = held + sram["output"]
    return {
        "traffic": {"dram": at_dram, "sram": at_sram, "array": at_array, "register_file": at_rf},
        "iterations": dram.iterations,
        "tiles": prod(counts.values()),
        "folds": sums["folds"],
        "mapping_efficiency": sums["used"] / (sums["folds"] * rows * cols),
        "compute_utilization": sums["util_num"] / sums["util_den"],
        "overall_utilization": prob.macs / (time["total_cycles"] * rows * cols * cores * rate),
        "sram_bytes": 2.0 * held,
        "rf_bytes": rf_need(prob, tpl, tile, rf, xp),
        "dram_bytes": dram_bytes,
        **time,
    }


class _Outer(NamedTuple):
    """What the two-level time of candidates adds to their cores-view figures."""

    backing: Backing
    weight_fed: Any | None
    """Weight elements fed to the array over every tile (None: the op converts no weights)."""
    writes: Any
    """Bytes the cores store to the level feeding them."""
    tiles: Any
    folds: Any
    """SRAM tiles, and array folds over all of them."""


def _time(
    nest: Nest, cycles: Any, iterations: Any, longest: Any, sram: Figures, dram_bytes: Any,
    kernels: Any, xp: MathNamespace, outer: _Outer | None = None,
) -> Figures:
    """Waves, cores used, compute cycles and time of ``cycles`` summed over every SRAM tile,
    ``iterations`` work items of the DRAM loops dealt to the cores (the longest ``longest``
    times the mean item), ``sram`` bytes per operand of one tile and ``dram_bytes``, launching
    ``kernels`` kernels (each beyond the first adds :func:`launch_cycles`); with ``outer``, the
    two-level time (see :func:`figures_of`)."""
    prob, tpl, chip, rate = nest
    cores = chip.cores
    bound_cycles = peak_bound_cycles(prob, chip, rate)
    load = sram["input"] + sram["weight"]
    split = split_of(chip, iterations, xp)
    if cores > 1:
        waves = split.waves
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
    full, tail = wave_rates(chip, 2.0 * load, iterations, xp, split)
    n_waves, per_wave, share = split[:3]
    busy = compute_cycles / chip.calibration.compute(prob.mac_class)
    levels = None
    if outer is None:
        piped = waves_cycles(busy, [(dram_bytes, full, tail)], n_waves, per_wave, share, xp)
        rest = xp.maximum(piped - first - last, 0.0)
        total_cycles = first + xp.maximum(busy, rest) + last + chip.dram.latency_s * chip.freq_hz
        bound = xp.where(busy >= rest, 0.0, 2.0)
    else:
        backing = outer.backing
        converting = 0.0
        if outer.weight_fed is not None:  # the cores convert the weights they feed the array
            converting = outer.weight_fed * backing.dequant_cycles_per_weight
            busy = busy + converting / cores_used
        if tpl.vector_macs:  # or their vector lanes run the MACs too, where that is faster
            busy = xp.minimum(busy, lanes_cycles(prob, chip, converting, cores_used))
        levels = waves_of(chip, backing, CoresFigures(
            busy, iterations, cores_used, first, last, dram_bytes, outer.writes, load,
            sram["output"], outer.tiles, outer.folds), xp, split, (full, tail))  # fmt: skip
        total_cycles, bound = two_level_cycles(levels, backing.dram_bytes,
                                               backing.dram_writes_bytes,
                                               backing.dram_latency_cycles, xp)  # fmt: skip
    if chip.kernel_overhead_s > 0:  # one per chip: x + 0.0 would change no figure either
        total_cycles = total_cycles + launch_cycles(chip, kernels)
    # DRAM's transfer alone, last: an array over many candidates that the time does not read,
    # not alive through it (the pricing's peak memory is what a cold point writes anew)
    dram_cycles = dram_bytes * ((n_waves - 1.0) * per_wave / full + share / tail)
    return {
        "kernels": kernels,
        "waves": waves,
        "cores_used": cores_used,
        "compute_cycles": compute_cycles,
        "dram_cycles": dram_cycles,
        "first_load_cycles": first,
        "last_store_cycles": last,
        "total_cycles": total_cycles,
        "bound": bound,
        "levels": levels,
    }
