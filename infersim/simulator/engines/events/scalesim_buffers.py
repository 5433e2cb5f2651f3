"""SCALE-Sim 3.0.0's SRAM buffers (``scalesim/memory/read_buffer.py``, ``write_buffer.py``,
``read_port.py``, ``write_port.py``), rebuilt for the replay in :mod:`.scalesim`.

- **Read buffer (ifmap, filter; USER bandwidth).** ``words`` of SRAM, an active half of
  ``ceil(words / 2)`` and a prefetch half of the rest. The operand's prefetch order (its *tape*)
  is cut into *sets* of ``ceil(words / 100)`` valid entries (a last, possibly empty, set ends
  it); the active window holds ``min(ceil(active / set), sets)`` consecutive sets, the prefetch
  half ``min(ceil(half / set), sets − active sets)``. A demanded word outside the window is a
  miss: the window slides forward (circularly) by the prefetch sets and one refill of
  ``ceil(half / bw)`` DRAM lines of ``bw`` words is issued, until the word is inside. A whole
  operand that fits its active window never misses. The first fill, ``min(ceil(active / bw),
  ceil(tape / bw))`` lines, ends at cycle −1; the k-th refill starts the cycle after the one
  before it ends and takes ``lines + 1`` cycles (the port's latency of 1), whenever the miss
  happens: refill k ends at ``−1 + k·(lines + 1)``. Every line counts ``bw`` DRAM words.
- **Stall rule.** A row at cycle ``c`` asks from ``x = c + 1`` (the hit latency); for each
  refill it needs, ``p = end − x`` and ``x += p + max(p, 0)``: a positive wait counts twice and
  an early refill pulls the row earlier. The operand's stall is ``x − c − 1`` (may be < 0).
- **Write buffer (ofmap).** Words fill lines of ``bw``; a drain starts when the free space falls
  below the active half and takes ``ceil(half / bw)`` lines (fewer if fewer are written), one
  per cycle (the port has no latency); a drain flushes the partial line it finds, and frees, and
  counts as DRAM words, every line it takes as full except the last. While a drain is in flight
  a write that leaves no free space waits for its end. At the end every line left is drained,
  drain after drain, from the last row's service cycle (not part of Total Cycles).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from infersim.errors import InfersimError

Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Refills:
    """A read buffer's refills: how many each demand row triggers, and their DRAM lines."""

    per_row: Ints
    lines: int  # DRAM lines of one refill
    first_lines: int  # DRAM lines of the first fill
    bw: int  # DRAM words per line (the interface's words per cycle)

    @property
    def count(self) -> int:
        """Refills in the whole layer."""
        return int(self.per_row.sum())

    @property
    def dram_words(self) -> int:
        """DRAM words requested, SCALE-Sim's count (whole lines)."""
        return (self.first_lines + self.count * self.lines) * self.bw

    @property
    def dram_cycles(self) -> tuple[int, int]:
        """(first, last) cycle a DRAM line of this operand arrives."""
        return -self.first_lines, -1 + self.count * (self.lines + 1)


def read_refills(tape: Ints, demand: Ints, words: int, bw: int) -> Refills:
    """The refills a read SRAM of ``words`` at ``bw`` words/cycle triggers, per demand row.

    The window of sets slides only on misses, so the refills depend on the address order alone
    (not on time): a vectorized scan finds each miss.

    Raises:
        InfersimError: a demanded address absent from the prefetch order.
    """
    active = math.ceil(words * 0.5)
    half = words - active
    eps = math.ceil(words / 100)
    valid = tape[tape != -1]
    sets = np.arange(len(valid)) // eps
    nsets = len(valid) // eps + 1
    a_sets = min(math.ceil(active / eps), nsets)
    p_sets = min(math.ceil(half / eps), nsets - a_sets)
    per_row = np.zeros(demand.shape[0], dtype=np.int64)
    first_lines = min(math.ceil(active / bw), math.ceil(len(tape) / bw))
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
        miss = ~_in_window(block, start, a_sets, nsets).any(axis=1)
        if not miss.any():
            j += chunk
            chunk = min(chunk * 2, 1 << 16)
            continue
        j += int(np.argmax(miss))
        need = ids[stream[j]]
        while not _in_window(need, start, a_sets, nsets).any():
            if p_sets == 0:
                raise InfersimError("SCALE-Sim replay: a miss with no prefetch half")
            start = (start + p_sets) % nsets
            hits.append(row_of[j])
        j += 1
        chunk = 256
    np.add.at(per_row, np.asarray(hits, dtype=np.int64), 1)
    return Refills(per_row, math.ceil(half / bw), first_lines, bw)


def _in_window(sets: Ints, start: int, width: int, nsets: int) -> npt.NDArray[np.bool_]:
    """Whether each set id lies in the circular window of ``width`` sets from ``start``."""
    end = start + width
    if end <= nsets:
        return (sets >= start) & (sets < end)
    return (sets >= start) | (sets < end - nsets)


def refill_service(count: int, last: int, lines: int, c: int) -> tuple[int, int]:
    """(service cycle, last refill's end) of a row at ``c`` that needs ``count`` refills, the
    one before them having ended at ``last``."""
    x = c + 1
    for _ in range(count):
        last += lines + 1
        p = last - x
        x += p + max(p, 0)  # SCALE-Sim counts a positive wait twice
    return x, last


class WriteBuffer:
    """The ofmap SRAM: lines of ``bw`` words, drains of half the SRAM, one line per cycle.
    ``drains`` lists each drain's (first, last) cycle; ``dram_words`` is SCALE-Sim's count."""

    def __init__(self, words: int, bw: int) -> None:
        self.active = math.ceil(words * 0.5)
        self.bw = bw
        self.lines_per_drain = math.ceil((words - self.active) / bw)
        self.free = words
        self.drain_end = 0
        self.lines: list[int] = []
        self.cur = 0
        self.dstart = 0
        self.dram_words = 0
        self.drains: list[tuple[int, int]] = []

    def store(self, n: int) -> None:
        """Store ``n`` words with no drain to start or wait for (the caller checked)."""
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
        words = len(taken) * self.bw - (self.bw - taken[-1])
        self.free += words
        self.dram_words += words
        self.dstart = end
        self.drains.append((start, start + len(taken) - 1))
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
                self.store(n)
                writes -= n
            else:
                n = min(writes, self.free - self.active)
                if n <= 0:
                    self.store(1)
                    writes -= 1
                    self.drain_end = self._drain(cur)
                else:
                    self.store(n)
                    writes -= n
        return cur

    def flush(self, cycle: int) -> None:
        """Drain every line left, drain after drain, the first starting at ``cycle``."""
        if self.cur:
            self.lines.append(self.cur)
            self.cur = 0
        while self.dstart < len(self.lines):
            cycle = self._drain(cycle) + 1


@dataclass(frozen=True)
class EstimateFetches:
    """A CALC-mode read buffer's DRAM side (``read_buffer_estimate_bw.py``): words fetched and
    the (first, last) cycle a fetched line arrives."""

    dram_words: int
    dram_cycles: tuple[int, int]


class _EstimateBuffer:
    """The state of SCALE-Sim's ``ReadBufferEstimateBw`` that decides its DRAM trace."""

    WINDOW = 50  # sets per prefetch (half of its 100)

    def __init__(self, words: int, bw: int) -> None:
        self.items, self.bw = words // 100, bw
        self.last: dict[int, int] = {}  # address -> the set it was last added to
        self.sizes: list[int] = []
        self.cur = self.elems = self.rs = 0
        self.re = self.WINDOW - 1
        self.ps = -1
        self.done = False
        self.first_request = 0
        self.pf = (-2, -1)  # the last prefetch's first and last request cycle
        self.first_arrival: int | None = None
        self.fetched = 0

    def add(self, addr: int, cycle: int) -> None:
        j = self.last.get(addr, -1)
        if self.rs <= j < min(self.cur, self.re + 1) or j == self.cur:
            return
        self.last[addr] = self.cur
        self.elems += 1
        if self.elems == self.items:
            self.sizes.append(self.items)
            self.cur += 1
            self.elems = 0
            if self.cur == self.re + 1:
                self._window_full(cycle)

    def _prefetch(self, start: int, end: int, lo: int, hi: int) -> None:
        if end < start:
            raise InfersimError("SCALE-Sim CALC buffer: two prefetches in one cycle")
        self.pf = (start, end)
        self.fetched += sum(self.sizes[lo:hi])
        if self.first_arrival is None:
            self.first_arrival = start + 1

    def _window_full(self, cycle: int) -> None:
        w = self.WINDOW
        if not self.done:
            end = self.first_request - 2
            self._prefetch(end - math.ceil(w * self.items / self.bw) + 1, end, 0, w)
            self.ps, self.done = self.re + 1, True
        else:
            self._prefetch(*self.pf, self.ps, self.ps + w)
            self.ps += w
        self.rs += w
        self.re += w
        self.pf = (self.pf[1] + 1, cycle)

    def finish(self) -> EstimateFetches:
        if self.elems:
            self.sizes.append(self.elems)
        else:
            self.cur -= 1
        if not self.done:
            n = math.ceil((self.cur + 1) * self.items / self.bw)
            self._prefetch(-2 - n + 1, -2, 0, self.cur + 1)
        else:
            self._prefetch(*self.pf, self.ps, self.cur + 1)
        assert self.first_arrival is not None
        return EstimateFetches(self.fetched, (self.first_arrival, self.pf[1] + 1))


def estimate_fetches(demand: Ints, row_cycles: list[int], words: int,
                     bw: int = 10) -> EstimateFetches:
    """SCALE-Sim's CALC-mode read buffer of ``words``: demanded words gather, in demand order,
    into sets of ``floor(words / 100)`` new words (a word still in the sets of the current
    window, or in the set being filled, is not new); every 50 sets a prefetch is issued, the
    first at ``bw`` words per cycle ending the cycle before the first demand, each later one
    spread over the cycles since the one before; at the end the sets left are fetched likewise.

    Raises:
        InfersimError: two windows filled in one cycle (SCALE-Sim divides by zero there).
    """
    buf = _EstimateBuffer(words, bw)
    used = np.flatnonzero((demand != -1).any(axis=1))
    if len(used):
        buf.first_request = row_cycles[int(used[0])]
    for i in used.tolist():
        cycle = row_cycles[i]
        for addr in demand[i][demand[i] != -1].tolist():
            buf.add(addr, cycle)
    return buf.finish()
