"""The SimPy processes of the event engine: per core group a DMA-in, a compute and a DMA-out
process (and, under a shared SRAM, an L2-fill process), over shared memory links.

Time is in core clock cycles. The engine owns time and ordering: SimPy orders events by (time,
priority, event id), and processes are created in core-group order, so the same plan gives the
same timeline.

- **Links** (:class:`Link`): HBM is ``channels`` FIFO channels of equal bandwidth; a transfer
  is striped over ``min(channels, ceil(bytes / INTERLEAVE_BYTES))`` channels, the earliest free
  first, and completes one access latency after its last stripe (the latency is pipelined: it
  does not hold a channel). A shared SRAM port is a one-channel link without latency.
- **SRAM**: each core's SRAM is a container of ``min(capacity, 2 × largest tile)`` bytes
  (double buffering); DMA-in reserves a tile's footprint before loading it and DMA-out frees it
  once the tile is computed and its outputs are posted, so a tile cannot load until space is
  free.
- **Double buffering**: DMA-in loads the next tile while compute runs the current one; compute
  waits for data (the compute stall), DMA-in waits for SRAM space (the DMA stall). The array
  streams a tile fold by fold, as SCALE-Sim's demand rows do: a tile's compute may start once
  its first fold's share of the data has arrived, and ends no earlier than one fold after its
  last byte (a block of merged tiles streams the same way).
- **Shared SRAM (L2)**: the cores load from the L2 through its port; an L2-fill process brings
  each tile's share of the DRAM traffic (the L2-level mapping's bytes, spread over the cores'
  tiles in proportion to what they load) from HBM, running ahead of the loads by at most the
  group's share of half the L2 (double buffering in the L2). The L2 passes data through as it
  arrives (cut-through): a tile's L2→SRAM read may start once its fill starts arriving, and the
  tile is ready when both are done. Outputs go to the L2 and are written back to HBM.
- **Writes are posted**: DMA-out hands a tile's outputs to the link's write queue and frees its
  SRAM at once; the write takes link time in issue order (delaying later transfers), and the op
  ends when the last write has left (no acknowledgement latency).
- **Latency** is pipelined: a DMA process issues its next transfer once the previous one has
  left the channels; the data arrives one latency later.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy

from infersim.simulator.engines.events.plan import CoreGroup, WorkPlan
from infersim.simulator.engines.events.timeline import EventStats, Span

INTERLEAVE_BYTES = 256
"""Bytes one HBM channel serves before the next channel takes over (address interleaving);
an assumption of this model, typical of GPU memory controllers."""



class Link:
    """``channels`` FIFO channels sharing ``bytes_per_cycle``; each transfer pays
    ``latency_cycles`` once. Transfers are reserved in the order they are issued."""

    def __init__(self, name: str, bytes_per_cycle: float, channels: int,
                 latency_cycles: float) -> None:
        if bytes_per_cycle <= 0:
            raise ValueError(f"bytes_per_cycle(={bytes_per_cycle}) must be > 0")
        if channels < 1:
            raise ValueError(f"channels(={channels}) must be >= 1")
        self.name = name
        self.channels = channels
        self.channel_rate = bytes_per_cycle / channels
        self.latency_cycles = latency_cycles
        self.free = np.zeros(channels)
        self.flat: float | None = 0.0  # the common free time while all channels agree
        self.busy_cycles = 0.0
        self.bytes = 0.0

    def reserve(self, now: float, nbytes: float) -> tuple[float, float, float]:
        """(start, sent, done) cycles of a transfer of ``nbytes`` issued at ``now``: its first
        stripe starts at ``start``, its last leaves the channels at ``sent``, and the data is
        there one latency later, at ``done``."""
        if nbytes <= 0:
            return now, now, now
        k = min(self.channels, max(1, math.ceil(nbytes / INTERLEAVE_BYTES)))
        per = nbytes / k / self.channel_rate
        self.busy_cycles += nbytes / (self.channel_rate * self.channels)
        self.bytes += nbytes
        if k == self.channels and self.flat is not None:  # every channel, all equally free
            start = max(self.flat, now)
            self.flat = start + per
            return start, start + per, start + per + self.latency_cycles
        if self.flat is not None:
            self.free[:] = self.flat
            self.flat = None
        chosen: Any = slice(None) if k == self.channels else np.argsort(
            self.free, kind="stable")[:k]
        starts = np.maximum(self.free[chosen], now)
        self.free[chosen] = starts + per
        sent = float(starts.max()) + per
        return float(starts.min()), sent, sent + float(self.latency_cycles)


@dataclass(frozen=True)
class RunResult:
    """What :func:`run` returns: makespan, busy cycles per resource, stats and spans."""

    makespan_cycles: float
    compute_busy_cycles: float
    link_busy_cycles: dict[str, float]
    stats: EventStats
    spans: tuple[Span, ...]


class _Lists:
    """A core group's per-block arrays as Python lists (fast indexing, plain floats)."""

    def __init__(self, g: CoreGroup) -> None:
        self.name, self.cores = g.name, g.cores
        self.tiles: list[int] = g.tiles.tolist()
        self.folds: list[float] = g.folds.astype(float).tolist()
        self.compute_cycles: list[float] = g.compute_cycles.astype(float).tolist()
        self.read_bytes: list[float] = g.read_bytes.astype(float).tolist()
        self.write_bytes: list[float] = g.write_bytes.astype(float).tolist()
        self.hold_bytes: list[float] = np.ceil(g.hold_bytes).astype(float).tolist()


class _Group:
    """The processes of one core group."""

    def __init__(self, env: simpy.Environment, g: CoreGroup, sram_bytes: float,
                 ahead_bytes: float) -> None:
        self.g = _Lists(g)
        most = max(self.g.hold_bytes)
        cap = max(min(float(sram_bytes), 2.0 * most), most)
        self.sram = simpy.Container(env, capacity=cap, init=cap)
        self.loaded: simpy.Store = simpy.Store(env)
        self.done: simpy.Store = simpy.Store(env)
        self.filled: simpy.Store = simpy.Store(env)
        ahead = float(math.ceil(ahead_bytes))  # whole bytes: sums stay exact
        self.ahead = simpy.Container(env, capacity=ahead, init=ahead)
        self.first_load = 0.0
        self.compute_stall = 0.0
        self.dma_stall = 0.0
        self.busy = 0.0
        self.starts: list[int] = np.concatenate(([0], np.cumsum(g.tiles)[:-1])).tolist()

    def label(self, i: int) -> str:
        first, n = self.starts[i], self.g.tiles[i]
        return f"tile {first}" if n == 1 else f"tiles {first}-{first + n - 1}"


@dataclass(frozen=True)
class Memory:
    """What feeds the cores: ``feed`` (HBM, or the shared SRAM port), and under a shared SRAM
    of ``l2_bytes`` the ``hbm`` that fills it with ``read_share`` of every load's bytes and
    takes ``write_share`` of every store's."""

    feed: Link
    hbm: Link | None = None
    read_share: float = 0.0
    write_share: float = 0.0
    l2_bytes: float = 0.0


class _Engine:
    """One simulation: the environment, the memory links, the spans, the core groups."""

    def __init__(self, plan: WorkPlan, memory: Memory, sram_bytes: float,
                 compute_efficiency: float) -> None:
        self.env = simpy.Environment()
        self.mem = memory
        self.efficiency = compute_efficiency
        self.spans: list[Span] = []
        self.posted = 0.0
        cores = sum(g.cores for g in plan.groups) or 1
        self.groups = [
            _Group(self.env, g, sram_bytes, max(
                memory.l2_bytes / 2 * g.cores / cores,
                math.ceil(float(g.read_bytes.max(initial=0.0)) * g.cores * memory.read_share),
                1.0))
            for g in plan.groups
        ]

    def move(self, link: Link, nbytes: float, what: str) -> tuple[float, float, float]:
        """Reserve a read of ``nbytes`` on ``link`` now: (start, sent, done) cycles."""
        start, sent, done = link.reserve(self.env.now, nbytes)
        if nbytes > 0:
            self.spans.append(Span(link.name, start, done, what))
        return start, sent, done

    def write(self, link: Link, nbytes: float, what: str) -> float:
        """A posted write: reserved in issue order, done once its data has left (no ack)."""
        start, sent, _ = link.reserve(self.env.now, nbytes)
        self.spans.append(Span(link.name, start, sent, what))
        self.posted = max(self.posted, sent)
        return sent

    def deliver(self, at: float, store: simpy.Store, item: Any) -> None:
        """``item`` arrives in ``store`` at cycle ``at``."""
        if at <= self.env.now:
            store.put(item)
            return

        def arrive(_: simpy.Event) -> None:
            store.put(item)

        self.env.timeout(at - self.env.now).callbacks.append(arrive)

    def fill(self, s: _Group) -> Generator[Any, Any, None]:
        """DRAM → L2 for each tile, ahead of the loads by at most the group's L2 room."""
        hbm = self.mem.hbm
        assert hbm is not None
        for i in range(len(s.g.tiles)):
            nbytes = s.g.read_bytes[i] * s.g.cores * self.mem.read_share
            room = float(math.ceil(max(nbytes, 1.0)))
            yield s.ahead.get(room)
            start, sent, done = self.move(hbm, nbytes, f"fill {s.g.name} {s.label(i)}")
            first = start + (sent - start) / s.g.folds[i] + hbm.latency_cycles
            self.deliver(start + hbm.latency_cycles, s.filled, (first, done, room))
            yield self.env.timeout(sent - self.env.now)

    def dma_in(self, s: _Group) -> Generator[Any, Any, None]:
        """Reserve SRAM, (wait for the L2 fill,) load; the tile's first part arrives first."""
        feed, env = self.mem.feed, self.env
        for i in range(len(s.g.tiles)):
            t0 = env.now
            yield s.sram.get(s.g.hold_bytes[i])
            s.dma_stall += env.now - t0
            fill_first, fill_done = 0.0, 0.0
            if self.mem.hbm is not None:
                fill_first, fill_done, room = yield s.filled.get()
                yield s.ahead.put(room)
            t1 = env.now
            start, sent, done = self.move(feed, s.g.read_bytes[i] * s.g.cores,
                                          f"read {s.g.name} {s.label(i)}")
            first = max(start + (sent - start) / s.g.folds[i] + feed.latency_cycles, fill_first)
            last = max(done, fill_done)
            self.spans.append(Span(f"dma-in:{s.g.name}", t1, last, s.label(i)))
            self.deliver(first, s.loaded, last)
            yield env.timeout(sent - env.now)

    def compute(self, s: _Group) -> Generator[Any, Any, None]:
        """Run each block once its first fold's data is in; its last fold runs after the
        block's last byte has arrived."""
        env = self.env
        for i in range(len(s.g.tiles)):
            t0 = env.now
            last = yield s.loaded.get()
            cycles = s.g.compute_cycles[i] / self.efficiency
            end = max(env.now + cycles, last + cycles / s.g.folds[i])
            # the array's wait for data: end - cycles - t0, written so that rounding at large
            # cycle counts cannot make it negative (env.now >= t0)
            wait = max(env.now - t0, last + cycles / s.g.folds[i] - cycles - t0)
            if i == 0:
                s.first_load = wait
            else:
                s.compute_stall += wait
            t1 = env.now
            yield env.timeout(end - env.now)
            s.busy += cycles
            self.spans.append(Span(f"compute:{s.g.name}", t1, env.now, s.label(i)))
            yield s.done.put(i)

    def dma_out(self, s: _Group) -> Generator[Any, Any, None]:
        """Post each block's outputs (and their DRAM write-back under an L2); free its SRAM."""
        mem = self.mem
        for i in range(len(s.g.tiles)):
            yield s.done.get()
            nbytes = s.g.write_bytes[i] * s.g.cores
            if nbytes > 0:
                sent = self.write(mem.feed, nbytes, f"write {s.g.name} {s.label(i)}")
                self.spans.append(Span(f"dma-out:{s.g.name}", self.env.now, sent, s.label(i)))
                if mem.hbm is not None and mem.write_share > 0:
                    self.write(mem.hbm, nbytes * mem.write_share,
                               f"writeback {s.g.name} {s.label(i)}")
            yield s.sram.put(s.g.hold_bytes[i])

    def run(self) -> int:
        """Start every process in core-group order and step to the end; the events processed.

        Raises:
            RuntimeError: a process still waits when no event is left (a deadlock: a bug).
        """
        procs = []
        for s in self.groups:
            if self.mem.hbm is not None:
                procs.append(self.env.process(self.fill(s)))
            procs.append(self.env.process(self.dma_in(s)))
            procs.append(self.env.process(self.compute(s)))
            procs.append(self.env.process(self.dma_out(s)))
        events = 0
        while self.env.peek() != math.inf:
            self.env.step()
            events += 1
        if any(p.is_alive for p in procs):
            raise RuntimeError(f"event engine deadlock at cycle {self.env.now}")
        return events


def run(plan: WorkPlan, memory: Memory, sram_bytes: float,
        compute_efficiency: float) -> RunResult:
    """Simulate ``plan`` with the cores fed by ``memory``, each core's SRAM holding
    ``sram_bytes``, compute cycles divided by ``compute_efficiency``. Returns the makespan and
    everything recorded, in cycles."""
    sim = _Engine(plan, memory, sram_bytes, compute_efficiency)
    events = sim.run()
    groups = sim.groups
    makespan = max(sim.env.now, sim.posted)
    used = sum(s.g.cores for s in groups) or 1

    def mean(attr: str) -> float:
        return float(sum(getattr(s, attr) * s.g.cores for s in groups) / used)

    stats = EventStats(
        makespan_cycles=float(makespan), events=events, tiles=plan.tiles,
        blocks=sum(len(s.g.tiles) for s in groups), core_groups=len(groups),
        cores_used=plan.cores_used, waves=plan.waves, first_load_cycles=mean("first_load"),
        compute_busy_cycles=mean("busy"), compute_stall_cycles=mean("compute_stall"),
        dma_stall_cycles=mean("dma_stall"),
    )
    links = {memory.feed.name: memory.feed.busy_cycles}
    if memory.hbm is not None:
        links[memory.hbm.name] = memory.hbm.busy_cycles
    return RunResult(float(makespan), float(max((s.busy for s in groups), default=0.0)), links,
                     stats, tuple(sim.spans))
