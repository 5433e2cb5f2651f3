"""SCALE-Sim's memory system as an event process, to compare our total and stall cycles with
its USER-bandwidth runs on small layers.

SCALE-Sim (v3.0.0) stalls the array row by row; its model, reverse-engineered from the package
and checked against its outputs, is replayed here faithfully, quirks included:

- **Demand and prefetch.** The array consumes one *demand row* per cycle (folds × cycles per
  fold rows: SCALE-Sim's compute cycles + 1). Each operand SRAM is filled from DRAM in its
  *prefetch order* (a dataflow-specific tape of the operand's addresses). Addresses are words
  (one byte each), ``−1`` marks an idle port.
- **Read buffers (ifmap, filter).** Each SRAM is double-buffered: an active half and a prefetch
  half. Hits are decided in *sets* of ``ceil(words / 100)`` tape entries; the active window of
  sets only slides forward (circularly), by the prefetch half, on a miss: one refill of
  ``ceil(half / bw)`` DRAM lines. Refills run back-to-back on a fixed schedule (the k-th ends
  at cycle ``−1 + k·(lines + 1)``), whenever the miss happens: the DMA process below never
  waits. The first fill is placed before cycle 0 and never stalls.
- **Stall accounting.** A demand row that needs refill k waits until it ends; SCALE-Sim counts a
  positive wait twice and lets an early refill pull the row earlier (which the per-row maximum
  over the operands then hides). Only the largest stall of a row counts.
- **Write buffer (ofmap).** Outputs fill lines of ``Bandwidth`` words; when the SRAM is more
  than half full a drain of half the SRAM starts (one line per cycle); a write stalls only when
  the SRAM is completely full while a drain is in flight.
- **Bandwidths.** In USER mode the ifmap and filter DRAM rates are ``[layout]
  IfmapSRAMBankBandwidth`` / ``FilterSRAMBankBandwidth`` (default: ``Bandwidth``); ``Bandwidth``
  sets the ofmap drain. In CALC mode reads never stall and the ofmap drains at ArrayWidth.

Total cycles = the last demand row's service cycle (compute cycles + stalls); the final drain
is not included, as in SCALE-Sim. The processes: one DMA process per read operand (initial fill
and refills), one array process that walks the demand rows and stalls, the ofmap drains.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy

from infersim.dataflow.scalesim_io import ScaleSimConfig
from infersim.errors import InfersimError
from infersim.simulator.engines.events.scalesim_demand import Ints, demand_rows, matrices, operands
from infersim.simulator.engines.events.timeline import EventStats, Span, Timeline
from infersim.workloads.ops import Conv2d, Gemm

MAX_DEMAND_WORDS = 50_000_000
"""Largest demand matrix (rows × ports) replayed; SCALE-Sim itself is meant for small layers."""


@dataclass(frozen=True)
class LayerStall:
    """SCALE-Sim's figures for one layer, from the replay (cycles; refills and drains are
    counts of DRAM transfers of half an SRAM)."""

    compute_cycles: int
    total_cycles: int
    stall_cycles: int
    ifmap_refills: int
    filter_refills: int
    ofmap_drains: int
    timeline: Timeline


@dataclass(frozen=True)
class _Refills:
    per_row: Ints
    lines: int  # DRAM lines of one refill
    first_lines: int  # DRAM lines of the first fill


def _read_buffer(tape: Ints, demand: Ints, words: int, bw: int) -> _Refills:
    """The refills a read SRAM of ``words`` at ``bw`` words/cycle triggers, per demand row.

    The window of sets slides only on misses, so the refills depend on the address order alone
    (not on time): a vectorized scan finds each miss.
    """
    active = math.ceil(words * 0.5)
    half = words - active
    eps = math.ceil(words / 100)
    valid = tape[tape != -1]
    sets = np.arange(len(valid)) // eps
    nsets = len(valid) // eps + 1
    a_sets = min(math.ceil(active / eps), nsets)
    p_sets = min(math.ceil(half / eps), nsets - a_sets)
    refills = _Refills(np.zeros(demand.shape[0], dtype=np.int64), math.ceil(half / bw),
                       min(math.ceil(active / bw), math.ceil(len(tape) / bw)))
    order = np.lexsort((sets, valid))
    addr, sid = valid[order], sets[order]
    keep = np.ones(len(addr), dtype=bool)
    keep[1:] = (addr[1:] != addr[:-1]) | (sid[1:] != sid[:-1])
    addr, sid = addr[keep], sid[keep]
    uniq, first, counts = np.unique(addr, return_index=True, return_counts=True)
    ids = np.repeat(sid[first][:, None], int(counts.max(initial=1)), axis=1)
    for col in range(1, ids.shape[1]):
        more = counts > col
        ids[more, col] = sid[first[more] + col]
    flat = demand.ravel()
    pos = np.flatnonzero(flat != -1)
    stream = np.searchsorted(uniq, flat[pos])
    if len(uniq) == 0 or np.any(uniq[np.minimum(stream, len(uniq) - 1)] != flat[pos]):
        raise InfersimError("SCALE-Sim replay: a demanded address is not in the prefetch order")
    row_of = pos // demand.shape[1]
    start, j, chunk, hits = 0, 0, 256, []
    while j < len(stream):
        block = ids[stream[j : j + chunk]]
        miss = np.all((block - start) % nsets >= a_sets, axis=1)
        if not miss.any():
            j += chunk
            chunk = min(chunk * 2, 1 << 16)
            continue
        j += int(np.argmax(miss))
        need = ids[stream[j]]
        while np.all((need - start) % nsets >= a_sets):
            if p_sets == 0:
                raise InfersimError("SCALE-Sim replay: a miss with no prefetch half")
            start = (start + p_sets) % nsets
            hits.append(row_of[j])
        j += 1
        chunk = 256
    np.add.at(refills.per_row, np.asarray(hits, dtype=np.int64), 1)
    return refills


class _WriteBuffer:
    """The ofmap SRAM: lines of ``bw`` words, drains of half the SRAM, one line per cycle."""

    def __init__(self, words: int, bw: int, spans: list[Span]) -> None:
        self.active = math.ceil(words * 0.5)
        self.bw = bw
        self.lines_per_drain = math.ceil((words - self.active) / bw)
        self.free = words
        self.drain_end = 0
        self.lines: list[int] = []
        self.cur = 0
        self.dstart = 0
        self.drains = 0
        self.spans = spans

    def _store(self, n: int) -> None:
        self.cur += n
        self.free -= n
        full = self.cur // self.bw
        if full:
            self.lines.extend([self.bw] * full)
            self.cur -= full * self.bw

    def _drain(self, start: int) -> int:
        if self.cur:
            self.lines.append(self.cur)
            self.cur = 0
        end = min(self.dstart + self.lines_per_drain, len(self.lines))
        taken = self.lines[self.dstart : end]
        self.free += len(taken) * self.bw - (self.bw - taken[-1])
        self.dstart = end
        self.drains += 1
        self.spans.append(Span("dram:ofmap", start, start + len(taken), "drain"))
        return start + len(taken) - 1

    def service(self, writes: int, c: int) -> int:
        """Store ``writes`` words of the row served at ``c``; the cycle the row completes."""
        cur = c
        while writes > 0:
            if cur < self.drain_end:
                n = min(writes, self.free - 1)
                if n <= 0:
                    n = 1
                    cur = max(cur, self.drain_end)
                self._store(n)
                writes -= n
            else:
                n = min(writes, self.free - self.active)
                if n <= 0:
                    self._store(1)
                    writes -= 1
                    self.drain_end = self._drain(cur)
                else:
                    self._store(n)
                    writes -= n
        return cur


def _refill_stall(count: int, last: int, lines: int, c: int) -> tuple[int, int]:
    """(row stall, last refill's end) of a row at ``c`` that needs ``count`` refills."""
    x = c + 1
    for _ in range(count):
        last += lines + 1
        p = last - x
        x += p + max(p, 0)  # SCALE-Sim counts a positive wait twice
    return x - c - 1, last


def _words(value: float | None, name: str) -> int:
    if value is None or value != int(value) or value < 1:
        raise InfersimError(f"SCALE-Sim replay: {name} = {value!r} must be a whole number >= 1")
    return int(value)


def _buffers(cfg: ScaleSimConfig, tapes: tuple[Ints, Ints],
             demands: tuple[Ints, Ints]) -> tuple[dict[str, _Refills], int]:
    """The read buffers' refills (USER only) and the ofmap drain rate in words per cycle."""
    if cfg.interface_bandwidth != "USER":
        return {}, cfg.array_cols
    ofmap_bw = _words(cfg.bandwidth_words_per_cycle, "Bandwidth")
    sizes = (cfg.ifmap_sram_kb, cfg.filter_sram_kb)
    rates = (cfg.ifmap_bank_bandwidth_words, cfg.filter_bank_bandwidth_words)
    keys = ("IfmapSRAMBankBandwidth", "FilterSRAMBankBandwidth")
    out = {}
    for name, tape, demand, kb, rate, key in zip(
        ("ifmap", "filter"), tapes, demands, sizes, rates, keys, strict=True
    ):
        out[name] = _read_buffer(tape, demand, round(kb * 1024), _words(rate or ofmap_bw, key))
    return out, ofmap_bw


class _Replay:
    """The processes: a DMA per read operand, the array walking the demand rows."""

    def __init__(self, reads: dict[str, _Refills], wb: _WriteBuffer, writes: Ints,
                 spans: list[Span]) -> None:
        start = -max((r.first_lines for r in reads.values()), default=0)
        self.env = simpy.Environment(initial_time=start)
        self.reads, self.wb, self.writes, self.spans = reads, wb, writes, spans
        self.total = self.stall = 0

    def dma(self, name: str, r: _Refills) -> Generator[Any, Any, None]:
        """The first fill before cycle 0, then the refills back to back (never waiting)."""
        env = self.env
        self.spans.append(Span(f"dram:{name}", -r.first_lines, -1, "first fill"))
        yield env.timeout(-1 - env.now)
        for k in range(int(r.per_row.sum())):
            yield env.timeout(r.lines + 1)
            self.spans.append(Span(f"dram:{name}", env.now - r.lines - 1, env.now,
                                   f"refill {k + 1}"))

    def array(self) -> Generator[Any, Any, None]:
        """One demand row per cycle; a row stalls by its largest operand stall."""
        env, spans = self.env, self.spans
        yield env.timeout(-env.now)
        stall, last_out = 0, 0
        busy_from: float = 0
        last = dict.fromkeys(self.reads, -1)
        for i, writes in enumerate(self.writes.tolist()):
            c = i + stall
            row_stall = 0
            for name, r in self.reads.items():
                if r.per_row[i]:
                    s, last[name] = _refill_stall(int(r.per_row[i]), last[name], r.lines, c)
                    row_stall = max(row_stall, s)
            out = self.wb.service(writes, c) if writes else c
            last_out = max(last_out, out)
            row_stall = max(row_stall, out - c)
            if row_stall > 0:
                yield env.timeout(c - env.now)
                if c > busy_from:
                    spans.append(Span("array", busy_from, c, f"rows to {i - 1}"))
                yield env.timeout(row_stall)
                spans.append(Span("array:stall", c, env.now, f"row {i}"))
                busy_from = env.now
                stall += row_stall
        yield env.timeout(max(last_out - env.now, 0))
        spans.append(Span("array", busy_from, max(env.now, busy_from),
                          f"rows to {len(self.writes) - 1}"))
        self.total, self.stall = last_out, stall

    def run(self) -> int:
        """Run to the end; the events processed."""
        for name, r in self.reads.items():
            self.env.process(self.dma(name, r))
        self.env.process(self.array())
        events = 0
        while self.env.peek() != math.inf:
            self.env.step()
            events += 1
        return events


def simulate_layer(cfg: ScaleSimConfig, op: Gemm | Conv2d) -> LayerStall:
    """Replay SCALE-Sim's memory system for ``op`` under ``cfg`` (see the module docstring).
    A convolution is replayed on the input extent the op reads (SCALE-Sim's past-the-edge
    windows of a stride that does not divide H − R count as reads here).

    Raises:
        InfersimError: a batched layer, a non-integral bandwidth, or a layer too large to
            replay (more than :data:`MAX_DEMAND_WORDS` demand words).
    """
    rows, cols = cfg.array_rows, cfg.array_cols
    ifm, fil, ofm = operands(op)
    n_rows = demand_rows(cfg.dataflow, rows, cols, ifm.shape[0], ifm.shape[1], fil.shape[1])
    if n_rows * (2 * rows + cols) > MAX_DEMAND_WORDS:
        raise InfersimError(f"layer {op.name!r}: {n_rows} demand rows are too many to replay")
    tape_if, tape_f, d_if, d_f, d_o = matrices(cfg.dataflow, rows, cols, ifm, fil, ofm)
    reads, ofmap_bw = _buffers(cfg, (tape_if, tape_f), (d_if, d_f))
    spans: list[Span] = []
    wb = _WriteBuffer(round(cfg.ofmap_sram_kb * 1024), ofmap_bw, spans)
    replay = _Replay(reads, wb, (d_o != -1).sum(axis=1), spans)
    events = replay.run()
    stats = EventStats(makespan_cycles=replay.total, events=events, tiles=1, blocks=n_rows,
                       core_groups=1, cores_used=1, waves=1, compute_stall_cycles=replay.stall)
    spans.sort(key=lambda s: (s.start_cycles, s.resource))
    return LayerStall(
        compute_cycles=d_o.shape[0] - 1,
        total_cycles=replay.total,
        stall_cycles=replay.stall,
        ifmap_refills=int(reads["ifmap"].per_row.sum()) if reads else 0,
        filter_refills=int(reads["filter"].per_row.sum()) if reads else 0,
        ofmap_drains=wb.drains,
        timeline=Timeline(1.0, tuple(spans), stats),
    )
