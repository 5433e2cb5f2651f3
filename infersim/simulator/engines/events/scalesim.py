"""SCALE-Sim's memory system as an event process: its total and stall cycles, and every figure
of its three reports, for one layer under any SCALE-Sim 3.0.0 config it can run without custom
layouts, sparsity or Ramulator traces.

SCALE-Sim stalls the array row by row; its model, rebuilt from ``scalesim/memory/*`` and
checked against its outputs on 665 golden layers, is replayed here faithfully, quirks included:

- **Demand and prefetch** (:mod:`.scalesim_demand`). The array consumes one *demand row* per
  cycle (folds × cycles per fold rows: SCALE-Sim's compute cycles + 1). Each operand SRAM is
  filled from DRAM in its *prefetch order* (a dataflow-specific tape of the operand's
  addresses). Addresses are words (one byte each), ``−1`` marks an idle port.
- **Buffers** (:mod:`.scalesim_buffers`). The ifmap and filter SRAMs are double-buffered read
  buffers whose refills run on a fixed schedule; the ofmap SRAM is a write buffer drained half
  at a time. A row at cycle ``c = row + stalls so far`` is served by each buffer; the row's
  stall is the largest of the three (a read buffer's may be negative: an early refill).
- **Bandwidths.** In USER mode the ifmap and filter DRAM rates are ``[layout]
  IfmapSRAMBankBandwidth`` / ``FilterSRAMBankBandwidth`` (default: ``Bandwidth``) and
  ``Bandwidth`` (its first value) sets the ofmap drain. In CALC mode reads never stall (the
  read buffers only count what they fetch) and the ofmap drains at ArrayWidth words per cycle.

Total cycles = the latest ofmap service cycle (compute cycles + stalls); the final drain of the
ofmap SRAM is not included, as in SCALE-Sim, but ends its DRAM trace ("Total Cycles (incl.
prefetch)"). The processes: one DMA process per read operand (first fill and refills), one
array process that walks the demand rows and stalls, the ofmap drains on the timeline.
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
from infersim.simulator.engines.events.scalesim_buffers import (
    Refills,
    WriteBuffer,
    estimate_fetches,
    read_refills,
    refill_service,
)
from infersim.simulator.engines.events.scalesim_demand import (
    Ints,
    demand_rows,
    fold_figures,
    matrices,
    operand_dims,
    operands,
)
from infersim.simulator.engines.events.timeline import EventStats, Span, Timeline
from infersim.workloads.ops import Conv2d, Gemm

MAX_DEMAND_WORDS = 50_000_000
"""Largest demand matrix (rows × ports) replayed; SCALE-Sim itself is meant for small layers."""

MAX_OPERAND_WORDS = 20_000_000
"""Largest layer replayed, in words of its three address matrices (M·K + K·N + M·N): building
them takes about :data:`OPERAND_BYTES_PER_WORD` each at peak (this bound: about 1 GB)."""

OPERAND_BYTES_PER_WORD = 48
"""Peak bytes per address-matrix word while :func:`operands` builds them (measured)."""


@dataclass(frozen=True)
class OperandTrace:
    """One operand's SRAM and DRAM activity, SCALE-Sim's figures: the (first, last) service
    cycle of a demand row using it, SRAM words demanded (its counter), the (first, last) cycle
    of its DRAM trace and the DRAM words it counts."""

    sram_cycles: tuple[int, int]
    sram_words: int
    dram_cycles: tuple[int, int]
    dram_words: int


@dataclass(frozen=True)
class LayerStall:
    """SCALE-Sim's figures for one layer, from the replay (cycles; refills and drains are
    counts of DRAM transfers of half an SRAM; efficiencies are fractions)."""

    compute_cycles: int
    total_cycles: int
    stall_cycles: int
    ifmap_refills: int
    filter_refills: int
    ofmap_drains: int
    macs: int
    pes: int
    mapping_efficiency: float
    compute_utilization: float
    ifmap: OperandTrace
    filter: OperandTrace
    ofmap: OperandTrace
    timeline: Timeline

    @property
    def overall_util_pct(self) -> float:
        """SCALE-Sim's "Overall Util %": MACs over total cycles × PEs, in percent."""
        return (self.macs * 100) / (self.total_cycles * self.pes)

    @property
    def total_cycles_incl_prefetch(self) -> int:
        """SCALE-Sim's "Total Cycles (incl. prefetch)": from the first DRAM read to the last
        ofmap DRAM write."""
        start = min(self.ifmap.dram_cycles[0], self.filter.dram_cycles[0])
        return int(self.ofmap.dram_cycles[1] - start)


def _words(value: float | None, name: str) -> int:
    if value is None or value != int(value) or value < 1:
        raise InfersimError(f"SCALE-Sim replay: {name} = {value!r} must be a whole number >= 1")
    return int(value)


def _check(cfg: ScaleSimConfig) -> None:
    """Refuse what the replay does not model (SCALE-Sim would run it differently)."""
    for flag, what in ((cfg.ifmap_custom_layout or cfg.filter_custom_layout, "custom layouts"),
                       (cfg.sparsity_support, "sparsity"),
                       (cfg.use_ramulator_trace, "Ramulator traces")):
        if flag:
            raise InfersimError(f"SCALE-Sim replay: {what} are not modeled")


def _buffers(cfg: ScaleSimConfig, tapes: tuple[Ints, Ints],
             demands: tuple[Ints, Ints]) -> tuple[dict[str, Refills], int]:
    """The read buffers' refills (USER only) and the ofmap drain rate in words per cycle."""
    if cfg.interface_bandwidth != "USER":
        return {}, cfg.array_cols
    ofmap_bw = _words(cfg.bandwidth_words_per_cycle, "Bandwidth")
    sizes = (cfg.ifmap_sram_kb, cfg.filter_sram_kb)
    rates = (cfg.ifmap_bank_bandwidth_words, cfg.filter_bank_bandwidth_words)
    banks = (cfg.ifmap_bank_num, cfg.filter_bank_num)
    keys = ("IfmapSRAMBankBandwidth", "FilterSRAMBankBandwidth")
    out = {}
    for name, tape, demand, kb, rate, bank, key in zip(
        ("ifmap", "filter"), tapes, demands, sizes, rates, banks, keys, strict=True
    ):
        bw = _words(rate or ofmap_bw, key)
        if bw % bank:
            raise InfersimError(f"SCALE-Sim replay: {key} = {bw} is not divisible by its "
                                f"{bank} banks (SCALE-Sim asserts)")
        out[name] = read_refills(tape, demand, math.floor(kb * 1024), bw)
    return out, ofmap_bw


class _Replay:
    """The processes: a DMA per read operand, the array walking the demand rows."""

    def __init__(self, reads: dict[str, Refills], wb: WriteBuffer, writes: Ints,
                 spans: list[Span]) -> None:
        start = -max((r.first_lines for r in reads.values()), default=0)
        self.env = simpy.Environment(initial_time=start)
        self.reads, self.wb, self.writes, self.spans = reads, wb, writes, spans
        self.total = self.stall = 0
        self.stalls = np.zeros(len(writes), dtype=np.int64)  # the stall each row adds
        self.served: dict[str, dict[int, int]] = {name: {} for name in reads}
        self.ofmap_served: dict[int, int] = {}

    def dma(self, name: str, r: Refills) -> Generator[Any, Any, None]:
        """The first fill before cycle 0, then the refills back to back (never waiting)."""
        env = self.env
        self.spans.append(Span(f"dram:{name}", -r.first_lines, -1, "first fill"))
        yield env.timeout(-1 - env.now)
        for k in range(r.count):
            yield env.timeout(r.lines + 1)
            self.spans.append(Span(f"dram:{name}", env.now - r.lines - 1, env.now,
                                   f"refill {k + 1}"))

    def array(self) -> Generator[Any, Any, None]:
        """One demand row per cycle; a row stalls by its largest operand stall. Only rows that
        need a refill or write words can stall: the others just take their cycle."""
        env, spans, wb = self.env, self.spans, self.wb
        yield env.timeout(-env.now)
        stall, last_out = 0, 0
        busy_from: float = 0
        last = dict.fromkeys(self.reads, -1)
        needs: dict[int, list[tuple[str, Refills]]] = {}
        for name, r in self.reads.items():
            for i in np.flatnonzero(r.per_row).tolist():
                needs.setdefault(i, []).append((name, r))
        writes = self.writes.tolist()
        rows = sorted(set(needs).union(np.flatnonzero(self.writes).tolist()))
        for i in rows:
            c = i + stall
            row_stall = 0
            for name, r in needs.get(i, ()):
                x, last[name] = refill_service(int(r.per_row[i]), last[name], r.lines, c)
                self.served[name][i] = x
                row_stall = max(row_stall, x - c - 1)
            n = writes[i]
            if not n:
                out = c
            elif c >= wb.drain_end and n <= wb.free - wb.active:
                wb.store(n)  # the common case: room to spare, no drain in flight
                out = c
            else:
                out = wb.service(n, c)
            self.ofmap_served[i] = out
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
                self.stalls[i] = row_stall
        last_out = max(last_out, len(writes) - 1 + stall)
        yield env.timeout(max(last_out - env.now, 0))
        spans.append(Span("array", busy_from, max(env.now, busy_from),
                          f"rows to {len(writes) - 1}"))
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

    def row_cycles(self) -> list[int]:
        """The cycle each demand row was issued at: its index plus the stalls before it."""
        before = np.cumsum(self.stalls) - self.stalls
        return (np.arange(len(self.stalls)) + before).tolist()

    def read_service(self, name: str, row: int, cycles: list[int]) -> int:
        """The cycle the read buffer ``name`` served demand row ``row``."""
        return self.served.get(name, {}).get(row, cycles[row] + 1)

    def ofmap_service(self, row: int, cycles: list[int]) -> int:
        """The cycle the ofmap buffer served demand row ``row``."""
        return self.ofmap_served.get(row, cycles[row])


def _span_rows(demand: Ints) -> tuple[int, int]:
    used = np.flatnonzero((demand != -1).any(axis=1))
    return int(used[0]), int(used[-1])


def simulate_layer(cfg: ScaleSimConfig, op: Gemm | Conv2d,
                   ifmap_extent: tuple[int, int] | None = None) -> LayerStall:
    """Replay SCALE-Sim's memory system for ``op`` under ``cfg`` (see the module docstring).
    ``ifmap_extent``: a convolution's ifmap (height, width) as its topology states it (see
    :func:`~.scalesim_demand.operands`); without it, the extent the op reads.

    Raises:
        InfersimError: a batched layer, a non-integral bandwidth, bank bandwidths SCALE-Sim
            refuses, custom layouts, sparsity or Ramulator traces, an extent that does not
            give the op's output, or a layer too large to replay (more than
            :data:`MAX_OPERAND_WORDS` address words or :data:`MAX_DEMAND_WORDS` demand words,
            refused before anything is allocated).
    """
    _check(cfg)
    rows, cols = cfg.array_rows, cfg.array_cols
    m, k, n = operand_dims(op, ifmap_extent)
    words = m * k + k * n + m * n
    if words > MAX_OPERAND_WORDS:  # checked before a single matrix is allocated
        raise InfersimError(
            f"layer {op.name!r}: its address matrices ({m:,}x{k:,}, {k:,}x{n:,}, {m:,}x{n:,}: "
            f"{words:,} words, about {words * OPERAND_BYTES_PER_WORD / 2**30:,.1f} GiB to "
            f"build) are too large to replay (at most {MAX_OPERAND_WORDS:,} words)"
        )
    n_rows = demand_rows(cfg.dataflow, rows, cols, m, k, n)
    if n_rows * (2 * rows + cols) > MAX_DEMAND_WORDS:
        raise InfersimError(f"layer {op.name!r}: {n_rows} demand rows are too many to replay")
    ifm, fil, ofm = operands(op, ifmap_extent)
    tape_if, tape_f, d_if, d_f, d_o = matrices(cfg.dataflow, rows, cols, ifm, fil, ofm)
    reads, ofmap_bw = _buffers(cfg, (tape_if, tape_f), (d_if, d_f))
    spans: list[Span] = []
    wb = WriteBuffer(math.floor(cfg.ofmap_sram_kb * 1024), ofmap_bw)
    replay = _Replay(reads, wb, (d_o != -1).sum(axis=1), spans)
    events = replay.run()
    cycles = replay.row_cycles()
    wb.flush(replay.ofmap_service(n_rows - 1, cycles))
    spans.extend(Span("dram:ofmap", a, b + 1, "drain") for a, b in wb.drains)
    stats = EventStats(makespan_cycles=replay.total, events=events, tiles=1, blocks=n_rows,
                       core_groups=1, cores_used=1, waves=1, compute_stall_cycles=replay.stall)
    spans.sort(key=lambda s: (s.start_cycles, s.resource))
    folds = fold_figures(cfg.dataflow, rows, cols, m, k, n)
    sizes = {"ifmap": cfg.ifmap_sram_kb, "filter": cfg.filter_sram_kb}
    traces = {}
    for name, demand, words in (("ifmap", d_if, folds.ifmap_reads),
                                ("filter", d_f, folds.filter_reads)):
        first, last = _span_rows(demand)
        sram = (replay.read_service(name, first, cycles), replay.read_service(name, last, cycles))
        if name in reads:
            dram = (reads[name].dram_cycles, reads[name].dram_words)
        else:
            est = estimate_fetches(demand, cycles, math.floor(sizes[name] * 1024))
            dram = (est.dram_cycles, est.dram_words)
        traces[name] = OperandTrace(sram, words, dram[0], dram[1])
    first, last = _span_rows(d_o)
    traces["ofmap"] = OperandTrace(
        (replay.ofmap_service(first, cycles), replay.ofmap_service(last, cycles)),
        folds.ofmap_writes,
        (min(a for a, _ in wb.drains), max(b for _, b in wb.drains)), wb.dram_words)
    return LayerStall(
        compute_cycles=d_o.shape[0] - 1,
        total_cycles=replay.total,
        stall_cycles=replay.stall,
        ifmap_refills=reads["ifmap"].count if reads else 0,
        filter_refills=reads["filter"].count if reads else 0,
        ofmap_drains=len(wb.drains),
        macs=m * k * n,
        pes=rows * cols,
        mapping_efficiency=folds.mapping_efficiency,
        compute_utilization=folds.compute_utilization,
        **traces,
        timeline=Timeline(1.0, tuple(spans), stats),
    )
