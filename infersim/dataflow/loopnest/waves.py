"""The work items of a mapping dealt to the cores in waves, and what feeds them: the rates of
the level feeding the cores in a full and in the last wave, the waves pipelined with their
transfers, and the time of a chip whose cores are fed by a shared SRAM in front of DRAM (a
GPU's L2, a TPU's CMEM: :func:`two_level_cycles`).

A two-level chip's cores are mapped against the shared SRAM (its cores view, see
:func:`~infersim.simulator.engines.analytic.level_views`); what DRAM moves behind it is a
figure of the op (the shared-SRAM level's own tiling), not of the cores' tiling. A
:class:`Backing` carries that figure and the DRAM's rates into the cores' search, so that the
mapper prices every candidate with the time the engines give it.

Written once against a math namespace ``xp`` (see :mod:`infersim.dataflow.loopnest.numerics`):
arrays of candidate tilings or floats of one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from infersim.arch_models.chip import Chip
from infersim.dataflow.loopnest.numerics import MathNamespace

BOUNDS: tuple[str, ...] = ("compute", "sram", "memory")
"""What a mapping's time is bound by, by the code of the ``bound`` figure: the cores' compute,
the shared SRAM feeding them (a two-level chip), or the level below (DRAM; on a one-level view,
whatever feeds the cores)."""


def per_cycle_of(chip: Chip) -> float:
    """Achievable bytes per cycle of ``chip``'s DRAM (the level feeding its cores): its
    bandwidth times the calibrated efficiency, over the clock."""
    return (
        chip.dram.bandwidth_bytes_per_s * chip.calibration.dram_bandwidth_efficiency / chip.freq_hz
    )


def fill_latency_cycles(chip: Chip) -> float:
    """Cycles a core's load from the level feeding it waits (``sram.fill_latency_s``, else the
    DRAM latency)."""
    latency = chip.sram.fill_latency_s
    return (chip.dram.latency_s if latency is None else latency) * chip.freq_hz


def feed_of(per_cycle: Any, port: float | None, cores_used: Any, xp: MathNamespace) -> Any:
    """Bytes per cycle a feed of ``per_cycle`` delivers to ``cores_used`` cores of ``port``
    bytes per cycle each (None: no port limit)."""
    return per_cycle if port is None else xp.minimum(per_cycle, cores_used * port)


def feed_bytes_per_cycle(chip: Chip, cores_used: Any, xp: MathNamespace) -> Any:
    """Bytes per cycle the level feeding the cores delivers to ``cores_used`` busy cores:
    its achievable bandwidth, at most ``cores_used`` x each core's ``sram.fill_bytes_per_cycle``
    (the cores' ports)."""
    return feed_of(per_cycle_of(chip), chip.sram.fill_bytes_per_cycle, cores_used, xp)


class WaveSplit(NamedTuple):
    """Work items dealt to a chip's cores in waves (see :func:`split_of`)."""

    waves: Any
    per_wave: Any
    """Share of the work items in one full wave."""
    last_share: Any
    """Share of the work items in the last (maybe partial) wave."""
    last: Any
    """Work items in the last wave."""


def split_of(chip: Chip, iterations: Any, xp: MathNamespace) -> WaveSplit:
    """The :class:`WaveSplit` of ``iterations`` work items dealt to ``chip``'s cores."""
    cores = chip.cores
    if cores == 1:
        return WaveSplit(1.0, 1.0, 1.0, 1.0)
    waves = xp.ceil_div(iterations, cores)
    last = xp.minimum(iterations - (waves - 1.0) * cores, iterations)
    return WaveSplit(waves, xp.minimum(float(cores), iterations) / iterations,
                     last / iterations, last)  # fmt: skip


def _rates(
    chip: Chip, per_cycle: float, latency_cycles: float, in_flight: Any, split: WaveSplit,
    xp: MathNamespace,
) -> tuple[Any, Any]:
    """:func:`wave_rates` of a feed of ``per_cycle`` bytes per cycle and ``latency_cycles``
    (``chip``'s cores and ports), the work items dealt as ``split`` says."""
    cores, port = chip.cores, chip.sram.fill_bytes_per_cycle
    per_core = in_flight / latency_cycles if latency_cycles > 0 else None
    if cores == 1:
        rate = feed_of(per_cycle, port, 1.0, xp)
        rate = rate if per_core is None else xp.minimum(rate, per_core)
        return rate, rate
    last = split.last
    full = feed_of(per_cycle, port, float(cores), xp)
    tail = feed_of(per_cycle, port, last, xp)
    if per_core is None:
        return full, tail
    return xp.minimum(full, cores * per_core), xp.minimum(tail, last * per_core)


def wave_rates(
    chip: Chip, in_flight: Any, iterations: Any, xp: MathNamespace, split: WaveSplit | None = None
) -> tuple[Any, Any]:
    """Bytes per cycle the level feeding the cores delivers in a full wave of ``iterations``
    work items dealt to ``chip``'s cores, and in the last (maybe partial) wave (``split``:
    their :func:`split_of`, where the caller has it).

    The feed delivers :func:`feed_bytes_per_cycle` to the cores busy in a wave, and by Little's
    law each busy core draws at most ``in_flight`` bytes (its double-buffered tiles' loads)
    per fill latency (``sram.fill_latency_s``, else the DRAM latency; none without one)."""
    split = split_of(chip, iterations, xp) if split is None else split
    return _rates(chip, per_cycle_of(chip), fill_latency_cycles(chip), in_flight, split, xp)


def wave_split(chip: Chip, iterations: Any, xp: MathNamespace) -> tuple[Any, Any, Any]:
    """(waves, share of the work items in one full wave, share in the last wave) of
    ``iterations`` items dealt to ``chip``'s cores."""
    return split_of(chip, iterations, xp)[:3]


def in_flight_cycles(chip: Chip, nbytes: Any, in_flight: Any, iterations: Any,
                     xp: MathNamespace) -> Any:
    """Cycles the level feeding the cores takes to move ``nbytes`` for ``iterations`` work
    items dealt to ``chip``'s cores in waves, at the rates of :func:`wave_rates`: the full
    waves their share of the bytes at the full rate, the last wave its share at its own."""
    split = split_of(chip, iterations, xp)
    full, tail = wave_rates(chip, in_flight, iterations, xp, split)
    return nbytes * ((split.waves - 1.0) * split.per_wave / full + split.last_share / tail)


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


@dataclass(frozen=True)
class Backing:
    """The level behind the one that feeds a two-level chip's cores (DRAM behind the shared
    SRAM), as one op's mapping on the cores view needs it: what the op moves there, and the
    DRAM's rates, in cycles of the chip clock. Build it with :func:`backing_of`.

    A stacked search (:func:`~infersim.dataflow.loopnest.problem.stacked`) holds the op fields
    as arrays over its candidates, as a stacked :class:`~.problem.Problem` holds its own."""

    dram_bytes: float
    """Bytes the op moves between DRAM and the shared SRAM (the shared-SRAM level's tiling)."""
    dram_writes_bytes: float
    """Of ``dram_bytes``, those written to DRAM."""
    dequant_cycles_per_weight: float
    """Vector cycles one core spends converting one weight element it feeds the array (a
    weight-only quantized op; 0 otherwise)."""
    dram_bytes_per_cycle: float
    """The DRAM's achievable bytes per cycle (:func:`per_cycle_of` the whole chip)."""
    fill_latency_cycles: float
    """Cycles a core's load waits behind the shared SRAM (:func:`fill_latency_cycles` of the
    whole chip): what bounds the DRAM bytes its tiles keep in flight."""
    dram_latency_cycles: float
    """One DRAM access latency."""

    def __post_init__(self) -> None:
        for name in ("dram_bytes", "dram_writes_bytes", "dequant_cycles_per_weight",
                     "fill_latency_cycles", "dram_latency_cycles"):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, float | int) and not value >= 0:
                raise ValueError(f"{name}(={value}) must be >= 0")
        if not self.dram_bytes_per_cycle > 0:
            raise ValueError(f"dram_bytes_per_cycle(={self.dram_bytes_per_cycle}) must be > 0")

    def at(self, idx: Any) -> Backing:
        """The backing of the candidates ``idx`` of a stacked search (itself otherwise)."""
        if not isinstance(self.dram_bytes, np.ndarray):
            return self
        return Backing(self.dram_bytes[idx], self.dram_writes_bytes[idx],  # type: ignore[index]
                       self.dequant_cycles_per_weight[idx],  # type: ignore[index]
                       self.dram_bytes_per_cycle, self.fill_latency_cycles,
                       self.dram_latency_cycles)  # fmt: skip


def vector_per_cycle(chip: Chip) -> float:
    """Vector FLOPs one core of ``chip`` computes per cycle, at the calibrated efficiency."""
    return (chip.vector.lanes * chip.vector.flops_per_lane_per_cycle
            * chip.calibration.vector_efficiency)  # fmt: skip


def backing_of(chip: Chip, dram_bytes: float, dram_writes_bytes: float,
               dequant_flops_per_weight: float = 0.0) -> Backing:
    """The :class:`Backing` of an op that moves ``dram_bytes`` (``dram_writes_bytes`` of them
    written) between ``chip``'s DRAM and its shared SRAM, and spends
    ``dequant_flops_per_weight`` vector FLOPs on each weight element it feeds the array."""
    return Backing(
        dram_bytes=dram_bytes, dram_writes_bytes=dram_writes_bytes,
        dequant_cycles_per_weight=dequant_flops_per_weight / vector_per_cycle(chip),
        dram_bytes_per_cycle=per_cycle_of(chip), fill_latency_cycles=fill_latency_cycles(chip),
        dram_latency_cycles=chip.dram.latency_s * chip.freq_hz,
    )  # fmt: skip


def stacked_backing(backings: list[Backing], sizes: list[int]) -> Backing:
    """One :class:`Backing` of the candidates of several ops' searches (``sizes[i]`` of the
    ``i``-th, one after another) on one chip: the op fields as arrays over those candidates.

    Raises:
        ValueError: backings of different chips (their DRAM rates differ).
    """
    first = backings[0]
    rates = {(b.dram_bytes_per_cycle, b.fill_latency_cycles, b.dram_latency_cycles)
             for b in backings}  # fmt: skip
    if len(rates) != 1:
        raise ValueError(f"stacked backings must share their DRAM rates: got {rates}")

    counts = np.array(sizes, dtype=np.intp)  # (converted once, not by each repeat)

    def column(values: list[float]) -> Any:
        return np.array(values, dtype=np.float64).repeat(counts)

    return Backing(
        dram_bytes=column([b.dram_bytes for b in backings]),
        dram_writes_bytes=column([b.dram_writes_bytes for b in backings]),
        dequant_cycles_per_weight=column([b.dequant_cycles_per_weight for b in backings]),
        dram_bytes_per_cycle=first.dram_bytes_per_cycle,
        fill_latency_cycles=first.fill_latency_cycles,
        dram_latency_cycles=first.dram_latency_cycles,
    )


class Waves(NamedTuple):
    """What the time of a two-level chip's op needs of its cores' mapping on the cores view,
    in cycles of the chip's clock and bytes (floats of one mapping, or arrays of candidates)."""

    busy_cycles: Any
    """Compute cycles over all waves (calibrated, dequantization included)."""
    waves: Any
    per_wave: Any
    """Share of the work items in one full wave."""
    last_share: Any
    """Share of the work items in the last wave."""
    first_cycles: Any
    last_cycles: Any
    """The first tiles' load and the last tiles' store at the shared SRAM's rate."""
    sram_bytes: Any
    """What the cores load from and store to the shared SRAM."""
    sram_full: Any
    sram_tail: Any
    """Bytes per cycle the shared SRAM feeds a full and the last wave."""
    dram_full: Any
    dram_tail: Any
    """Bytes per cycle DRAM feeds a full and the last wave (the whole chip's rates, its
    cores' in-flight loads against the DRAM latency)."""
    sram_writes: Any
    """Of ``sram_bytes``, what the cores store."""
    first_bytes: Any
    """What the first wave's cores load for their first tiles."""
    last_bytes: Any
    """What the last wave's cores store after their last tiles."""
    sram_full_bw: Any
    sram_tail_bw: Any
    dram_full_bw: Any
    dram_tail_bw: Any
    """The four rates above at the levels' bandwidths alone (no latency bound on what a core
    keeps in flight: what its first tiles' loads, issued at once, draw)."""
    tile_cycles: Any
    """Compute cycles of one SRAM tile (the mean: calibrated, dequantization included)."""
    tile_folds: Any
    """Array folds of one SRAM tile (the mean)."""


class CoresFigures(NamedTuple):
    """What :func:`waves_of` reads of a mapping on the cores view (floats, or arrays of
    candidates)."""

    busy_cycles: Any
    """Compute cycles over all waves (calibrated, dequantization included)."""
    iterations: Any
    """Work items dealt to the cores."""
    cores_used: Any
    first_cycles: Any
    last_cycles: Any
    """The first tiles' load and the last tiles' store at the shared SRAM's rate."""
    sram_bytes: Any
    sram_writes: Any
    """Bytes the cores move to and from the shared SRAM, and of those what they store."""
    load_bytes: Any
    store_bytes: Any
    """One SRAM tile's input and weight bytes, and its output bytes."""
    tiles: Any
    folds: Any
    """SRAM tiles, and array folds over all of them."""


def waves_of(
    view: Chip, backing: Backing, c: CoresFigures, xp: MathNamespace,
    split: WaveSplit | None = None, feed: tuple[Any, Any] | None = None,
) -> Waves:
    """The :class:`Waves` of a mapping of figures ``c`` on the cores ``view`` of a two-level
    chip whose DRAM is ``backing``. A busy core keeps its double-buffered tiles' loads in
    flight (the rates of :func:`wave_rates`), or, issuing its first tiles' loads at once,
    draws at the levels' bandwidths alone. ``split`` and ``feed``: the :func:`split_of` of its
    work items and the shared SRAM's :func:`wave_rates`, where the caller has them."""
    items = c.iterations
    split = split_of(view, items, xp) if split is None else split
    in_flight = 2.0 * c.load_bytes
    per_cycle, latency = backing.dram_bytes_per_cycle, backing.fill_latency_cycles
    feed = wave_rates(view, in_flight, items, xp, split) if feed is None else feed
    return Waves(
        c.busy_cycles, split.waves, split.per_wave, split.last_share, c.first_cycles,
        c.last_cycles, c.sram_bytes, *feed,
        *_rates(view, per_cycle, latency, in_flight, split, xp),
        c.sram_writes, c.cores_used * c.load_bytes, split.last_share * items * c.store_bytes,
        *_rates(view, per_cycle_of(view), 0.0, in_flight, split, xp),
        *_rates(view, per_cycle, 0.0, in_flight, split, xp),
        c.busy_cycles / (split.waves * c.tiles / items), c.folds / c.tiles,
    )  # fmt: skip


def _share(part: Any, whole: Any, xp: MathNamespace) -> Any:
    """``part`` / ``whole``, 0 where ``whole`` is not positive."""
    some = whole > 0
    if some is True or (isinstance(some, np.ndarray)
                        and np.count_nonzero(some) == some.size):  # the quotient itself
        return part / whole
    return xp.where(some, part / xp.where(some, whole, 1.0), 0.0)


def _streamed(first: Any, w: Waves, xp: MathNamespace) -> Any:
    """Cycles until the array has the first tile's last fold, its first load taking ``first``
    (:func:`two_level_cycles`: the array starts on the first fold's data)."""
    folds = xp.maximum(w.tile_folds, 1.0)
    return xp.maximum(first / folds, first - w.tile_cycles * (folds - 1.0) / folds)


def two_level_cycles(w: Waves, dram_bytes: Any, dram_writes_bytes: Any, latency_cycles: float,
                     xp: MathNamespace) -> tuple[Any, Any]:
    """(cycles, the code in :data:`BOUNDS` of what binds) of a two-level chip's op whose cores
    run the waves ``w`` and whose DRAM moves ``dram_bytes`` (``dram_writes_bytes`` of them
    written; one access latency of ``latency_cycles``); no kernel launch. The largest of three
    paths, plus the one latency the cores and the shared SRAM wait for the first data:

    - the array's: it streams the first tile fold by fold (it starts on the first fold's data
      and ends one fold after the tile's last byte), computes, and the last store follows;
    - each level's (the shared SRAM's, DRAM's), the longer of two:

      - its waves pipelined with the compute, each taking the larger of its compute and the
        level's transfer of its share of the bytes (:func:`waves_cycles`). A core keeps its
        double-buffered loads in flight, one window per latency; its first window is the
        latency the op waits once, so the window-bound draw counts the rest (the first data
        is not counted twice: a tiny op's time is its latency and its data at the
        bandwidth);
      - the first load, the level's own transfer of the bytes between the first load and
        the last store at its bandwidth, and the last store. The shared SRAM passes data
        through, so the first load waits for its share of the DRAM reads as well as for the
        shared SRAM's port (the larger of the two), and the last store ends when both its
        store to the shared SRAM and its share of the DRAM writes have left;

      DRAM's path starts at once (its channels stream from the first request on), and the
      latency of its last reads overlaps the write-back of the earlier waves' outputs, as
      far as those last. Stores drain at a level's bandwidth: the window a core keeps in
      flight bounds its loads, not its writes.

    Every path grows as either level's bandwidth falls: a level's wait on the other level's
    first load or last store adds to its own transfers between them, never to its wave
    pipeline, where compute or the latency-bound draw may hide the first load and the last
    store (added there, it made a faster level slow some ops down)."""
    latency = latency_cycles
    # (the shares and quotients below as temporaries: an array over many candidates lives no
    # longer than its use, and the pricing's peak memory is what a cold point writes anew)
    dram_first_bytes = w.first_bytes * _share(dram_bytes - dram_writes_bytes,
                                              w.sram_bytes - w.sram_writes, xp)  # fmt: skip
    many = w.waves > 1.0

    def first_rate(full_bw: Any, tail_bw: Any) -> Any:
        """The first load's rate at a level's bandwidth alone: ``full_bw`` where there are
        several waves, else ``tail_bw`` (one number where both are that number, as they are
        where the level's port does not bound the last wave)."""
        if not isinstance(full_bw, np.ndarray) and not isinstance(tail_bw, np.ndarray) \
                and full_bw == tail_bw:
            return full_bw
        return xp.where(many, full_bw, tail_bw)

    dram_first_bw = first_rate(w.dram_full_bw, w.dram_tail_bw)
    last_writes = w.last_bytes * _share(dram_writes_bytes, w.sram_writes, xp)
    first = xp.maximum(w.first_cycles, dram_first_bytes / dram_first_bw)
    last = xp.maximum(w.last_cycles, last_writes / w.dram_tail_bw)
    busy = w.busy_cycles / w.waves  # one wave's compute

    full_waves = w.waves - 1.0

    def shares(per_full: Any, per_last: Any, full: Any, tail: Any) -> tuple[Any, Any]:
        """A level's transfer of its share of some bytes in a full wave and in the last
        (``per_full``, ``per_last``: the bytes times the full wave's and the last wave's share of
        the items), at the rates ``full`` and ``tail`` (see :func:`waves_cycles`): never below
        0, as bytes, shares and rates are not."""
        return per_full / full, per_last / tail

    def pipelined(compute: Any, transfer: tuple[Any, Any]) -> Any:
        """:func:`waves_cycles` of one wave's ``compute`` and a level's ``transfer``."""
        return full_waves * xp.maximum(compute, transfer[0]) + xp.maximum(compute, transfer[1])

    def path(nbytes: Any, first_bytes: Any, last_bytes: Any, full: Any, tail: Any,
             full_bw: Any, tail_bw: Any, first_bw: Any) -> Any:
        """One level's path (see above), its bytes at the rates ``full``, ``tail`` (in
        flight) and ``full_bw``, ``tail_bw`` (the bandwidth alone; ``first_bw``: the first
        load's, ``full_bw`` where there are several waves)."""
        per_full, per_last = nbytes * w.per_wave, nbytes * w.last_share
        piped_bw, between = at_bandwidth(shares(per_full, per_last, full_bw, tail_bw),
                                         last_bytes / tail_bw, first_bytes / first_bw)
        piped = xp.maximum(piped_bw,
                           pipelined(busy, shares(per_full, per_last, full, tail)) - latency)
        return xp.maximum(piped, first + xp.maximum(between, 0.0) + last)

    def at_bandwidth(at_bw: tuple[Any, Any], last_s: Any, first_s: Any) -> tuple[Any, Any]:
        """A level's waves pipelined at its bandwidth alone (``at_bw``: its transfer in a full
        and in the last wave), and its transfers between the first load and the last store
        (``last_s``, ``first_s``: theirs at that bandwidth): the transfers alone are
        pipelined(0.0, at_bw), whose shares are never below 0. (A function of its own:
        ``at_bw`` is freed before the level's in-flight shares are made.)"""
        return pipelined(busy, at_bw), full_waves * at_bw[0] + at_bw[1] - last_s - first_s

    array = _streamed(first, w, xp) + w.busy_cycles + last
    sram = path(w.sram_bytes, w.first_bytes, w.last_bytes, w.sram_full, w.sram_tail,
                w.sram_full_bw, w.sram_tail_bw, first_rate(w.sram_full_bw, w.sram_tail_bw))
    dram = path(dram_bytes, dram_first_bytes, last_writes, w.dram_full, w.dram_tail,
                w.dram_full_bw, w.dram_tail_bw, dram_first_bw)
    # the latency of DRAM's last reads, hidden behind the earlier waves' writes
    dram = dram - xp.minimum(latency, xp.maximum(dram_writes_bytes - last_writes, 0.0)
                             / w.dram_full_bw)  # fmt: skip
    level = xp.maximum(sram, dram)  # the slower level's path
    cycles = xp.maximum(array, level) + latency
    code = xp.where(array >= level, 0.0, xp.where(sram >= dram, 1.0, 2.0))
    return cycles, code
