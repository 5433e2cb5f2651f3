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


def _rates(
    chip: Chip, per_cycle: float, latency_cycles: float, in_flight: Any, iterations: Any,
    xp: MathNamespace,
) -> tuple[Any, Any]:
    """:func:`wave_rates` of a feed of ``per_cycle`` bytes per cycle and ``latency_cycles``
    (``chip``'s cores and ports)."""
    cores, port = chip.cores, chip.sram.fill_bytes_per_cycle
    per_core = in_flight / latency_cycles if latency_cycles > 0 else None
    if cores == 1:
        rate = feed_of(per_cycle, port, 1.0, xp)
        rate = rate if per_core is None else xp.minimum(rate, per_core)
        return rate, rate
    waves = xp.ceil_div(iterations, cores)
    last = xp.minimum(iterations - (waves - 1.0) * cores, iterations)
    full = feed_of(per_cycle, port, float(cores), xp)
    tail = feed_of(per_cycle, port, last, xp)
    if per_core is None:
        return full, tail
    return xp.minimum(full, cores * per_core), xp.minimum(tail, last * per_core)


def wave_rates(chip: Chip, in_flight: Any, iterations: Any, xp: MathNamespace) -> tuple[Any, Any]:
    """Bytes per cycle the level feeding the cores delivers in a full wave of ``iterations``
    work items dealt to ``chip``'s cores, and in the last (maybe partial) wave.

    The feed delivers :func:`feed_bytes_per_cycle` to the cores busy in a wave, and by Little's
    law each busy core draws at most ``in_flight`` bytes (its double-buffered tiles' loads)
    per fill latency (``sram.fill_latency_s``, else the DRAM latency; none without one)."""
    return _rates(chip, per_cycle_of(chip), fill_latency_cycles(chip), in_flight, iterations, xp)


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


def backing_of(chip: Chip, dram_bytes: float, dram_writes_bytes: float,
               dequant_flops_per_weight: float = 0.0) -> Backing:
    """The :class:`Backing` of an op that moves ``dram_bytes`` (``dram_writes_bytes`` of them
    written) between ``chip``'s DRAM and its shared SRAM, and spends
    ``dequant_flops_per_weight`` vector FLOPs on each weight element it feeds the array."""
    per_cycle = (chip.vector.lanes * chip.vector.flops_per_lane_per_cycle
                 * chip.calibration.vector_efficiency)  # fmt: skip
    return Backing(
        dram_bytes=dram_bytes, dram_writes_bytes=dram_writes_bytes,
        dequant_cycles_per_weight=dequant_flops_per_weight / per_cycle,
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

    def column(values: list[float]) -> Any:
        return np.repeat(np.array(values, dtype=np.float64), sizes)

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


def waves_of(
    view: Chip, backing: Backing, busy: Any, iterations: Any, first: Any, last: Any,
    sram_bytes: Any, in_flight: Any, xp: MathNamespace,
) -> Waves:
    """The :class:`Waves` of a mapping on the cores ``view`` of a two-level chip whose DRAM is
    ``backing``: ``busy`` compute cycles (calibrated, dequantization included) over
    ``iterations`` work items, the first load and last store ``first`` and ``last`` cycles,
    ``sram_bytes`` moved to and from the shared SRAM, ``in_flight`` bytes each busy core keeps
    in flight (its double-buffered tiles' loads)."""
    waves, per_wave, share = wave_split(view, iterations, xp)
    return Waves(busy, waves, per_wave, share, first, last, sram_bytes,
                 *wave_rates(view, in_flight, iterations, xp),
                 *_rates(view, backing.dram_bytes_per_cycle, backing.fill_latency_cycles,
                         in_flight, iterations, xp))  # fmt: skip


def two_level_cycles(w: Waves, dram_bytes: Any, dram_writes_bytes: Any, latency_cycles: float,
                     xp: MathNamespace) -> tuple[Any, Any]:
    """(cycles, the code in :data:`BOUNDS` of what binds) of a two-level chip's op whose cores
    run the waves ``w`` and whose DRAM moves ``dram_bytes`` (``dram_writes_bytes`` of them
    written; one access latency of ``latency_cycles``); no kernel launch.

    Each wave takes the larger of its compute and each level's transfer of its share of the
    bytes (:func:`waves_cycles`); plus the first load, the last store and one DRAM access
    latency."""
    sram = (w.sram_bytes, w.sram_full, w.sram_tail)
    dram = (dram_bytes, w.dram_full, w.dram_tail)
    piped = waves_cycles(w.busy_cycles, [sram, dram], w.waves, w.per_wave, w.last_share, xp)
    rest = xp.maximum(piped - w.first_cycles - w.last_cycles, 0.0)
    cycles = w.first_cycles + xp.maximum(w.busy_cycles, rest) + w.last_cycles + latency_cycles
    moves = [nbytes * ((w.waves - 1.0) * w.per_wave / full + w.last_share / tail)
             for nbytes, full, tail in (sram, dram)]  # fmt: skip
    code = xp.where(w.busy_cycles >= rest, 0.0, xp.where(moves[0] > moves[1], 1.0, 2.0))
    return cycles, code
