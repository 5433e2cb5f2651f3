"""The work of the event engine: a :class:`Mapping` unrolled into each core's sequence of SRAM
tiles, with the compute cycles and the bytes every tile moves.

Dealing. The DRAM loops of the mapping (outer to inner) are dealt to the cores as the analyzer
deals them (:mod:`infersim.dataflow.loopnest.dram`): the outer loops, until there are at least
as many iterations ("work items") as cores; a loop the output depends on whole, a reduction loop
in chunks (split-K: the loop becomes a dealt loop over its chunks and, inside every item, a
serial loop over the chunk's slices, fewer in a shorter last chunk), no more chunks than the
level above the cores holds the partial sums of (:func:`~infersim.dataflow.loopnest.dram.
held_chunks`), and no loop inner to a loop cut into chunks is dealt. Item ``j`` runs on core
``j mod cores`` in wave ``j div cores``; an item runs the inner DRAM loops on its core, one SRAM
tile after another. A last partial wave leaves cores idle.

Traffic per tile. Along one core's sequence, an input or weight tile is fetched when the tile
it needs differs from the one before it on that core (the analyzer's refetch rule); an output
tile is written when the core leaves it, and read back (a partial-sum spill) when the core
enters it. Each operand's bytes are then scaled so that their sum over all cores equals the
mapping's DRAM traffic exactly (the factor is 1 up to halos and partial-sum bookkeeping), so
both engines move the same bytes.

Aggregation (documented approximation, for speed). Cores whose tile sequences are identical
form one *core group* and are simulated once, their transfers carrying all their bytes (the
memory shares its bandwidth fairly among them). When that gives more than
:data:`MAX_GROUPS` groups, cores are grouped by their tiles' remainder classes (a
representative core's refetch pattern stands for the group), then by their number of tiles;
the rescaling keeps every operand's total bytes exact. When a group has more than
``max_blocks`` tiles, every group keeps its first and last tile and merges the tiles between
them into consecutive blocks of one size, the same in every group (the sums of their cycles,
folds and bytes; a block reserves one tile's SRAM and streams like a tile): the pipeline fill
and drain stay exact, in steady state a block of identical tiles costs what its tiles cost,
and the links, which serve the groups' transfers in turn, give every core the same bytes per
turn (blocks of 3 tiles in one group and of 2 in another put llama-3-8b's lm_head at 2048
tokens 4.9% behind on h200: the group of smaller blocks, starved, finished alone). On the
GEMMs checked (tests) 128 blocks stay within 2.5% of
the tile-by-tile simulation, which shows more burstiness; the default is 1024 blocks of
equal size (llama-3-70b's prefill GEMMs on h100-sxm, 1,700 tiles per core: within 1.8% of the
analytic engine; blocks of 1 and 2 tiles mixed put mlp.up 13% apart).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from infersim.arch_models.chip import Chip
from infersim.dataflow.loopnest import (
    DEPENDS,
    DIMS,
    PY,
    Mapping,
    Problem,
    tile_compute,
    tile_operand_bytes,
)
from infersim.dataflow.loopnest.dram import REDUCTION, held_chunks
from infersim.dataflow.loopnest.figures import partials_capacity_bytes
from infersim.dataflow.templates import OPERANDS
from infersim.errors import InfersimError

Floats = npt.NDArray[np.float64]

MAX_TILES = 1 << 22
"""Most SRAM tiles one mapping may have: the plan unrolls every tile, about
:data:`SECONDS_PER_TILE` and :data:`BYTES_PER_TILE` each (this bound: some 1.5 s and 0.8 GB);
the analytic engine costs any mapping in closed form."""

SECONDS_PER_TILE = 0.35e-6
"""Time to plan and simulate one SRAM tile (measured on GEMMs of 4M and 16M tiles)."""

BYTES_PER_TILE = 190
"""Peak memory per SRAM tile of the plan (measured with the time)."""

MAX_GROUPS = 8
"""Most core groups one mapping is simulated with (see :func:`_group_cores`)."""

_KEYS = ("cycles", "folds", "input", "weight", "out_read", "out_write", "hold")
"""Per-tile quantities: cycles, folds, nominal bytes fetched per operand, the SRAM footprint."""


@dataclass(frozen=True)
class Kept:
    """What a chip schedule keeps off DRAM for one operator (see
    :mod:`infersim.simulator.schedule`): its input read from the on-chip buffer, its output
    left there, and bytes of its first weight tiles already loaded during the previous
    operator (taken from the first tile of every core group, evenly)."""

    input_on_chip: bool = False
    output_on_chip: bool = False
    prefetched_bytes: float = 0.0


@dataclass(frozen=True)
class CoreGroup:
    """``cores`` identical cores (``first_core`` is the lowest id) running the same blocks.

    Per block and per core: ``tiles`` SRAM tiles of ``folds`` array folds in all,
    ``compute_cycles`` at the array's peak, ``read_bytes`` fetched from and ``write_bytes``
    written to the level that feeds the cores, and ``hold_bytes`` of SRAM reserved while the
    block is in flight.
    """

    first_core: int
    cores: int
    tiles: npt.NDArray[np.int64]
    folds: Floats
    compute_cycles: Floats
    read_bytes: Floats
    write_bytes: Floats
    hold_bytes: Floats

    @property
    def name(self) -> str:
        """``core 4`` or ``core 0+131`` (the first core and how many more run the same)."""
        more = f"+{self.cores - 1}" if self.cores > 1 else ""
        return f"core {self.first_core}{more}"


@dataclass(frozen=True)
class WorkPlan:
    """Every core group of one mapping, with the dealing figures."""

    groups: tuple[CoreGroup, ...]
    tiles: int
    items: int
    cores_used: int
    waves: int


@dataclass(frozen=True)
class _Loop:
    dim: str
    count: int
    tile: int
    rem: int


def _bits(idx: npt.NDArray[np.int64], loop: _Loop) -> npt.NDArray[np.bool_]:
    """Whether each index is the loop's remainder (smaller) tile."""
    return (idx == loop.count - 1) & (loop.rem != loop.tile)


def _inner_changes(idx: list[npt.NDArray[np.int64]], n: int) -> npt.NDArray[np.int64]:
    """For tiles 1..n-1 of an item: the outermost inner loop whose index changed (row-major)."""
    if n <= 1:
        return np.zeros(0, dtype=np.int64)
    changed = np.stack([np.diff(i) != 0 for i in idx])
    return np.argmax(changed, axis=0)


class _Inner:
    """The inner DRAM loops one work item runs serially: its tiles' loop indices (row-major)
    and, per operand, whether each tile after the first enters a new tile of it."""

    def __init__(self, loops: list[_Loop]) -> None:
        self.loops = loops
        self.n = math.prod(lp.count for lp in loops)
        shape = [lp.count for lp in loops]
        self.idx = list(np.unravel_index(np.arange(self.n), shape)) if shape else []
        q = _inner_changes(self.idx, self.n)
        self.enter: dict[str, npt.NDArray[np.bool_]] = {}
        for name in OPERANDS:
            deps = [p for p, lp in enumerate(loops) if lp.dim in DEPENDS[name]]
            self.enter[name] = q <= max(deps) if deps else np.zeros(len(q), dtype=bool)


def _dealt(
    loops: list[_Loop], cores: int, held: int
) -> tuple[list[_Loop], list[_Loop], list[_Loop], int]:
    """(dealt loops, the inner loops of every item, those of the last chunk's items, items):
    ``loops`` dealt to ``cores`` cores as the analyzer deals them (see the module docstring),
    the level above the cores holding ``held`` >= 1 copies of the partial sums. A chunked
    reduction loop is the last dealt loop, over its chunks (a remainder when the last chunk
    differs), and the first inner loop, over a chunk's slices."""
    items = 1
    merged = 1  # the chunks of the reduction loops dealt so far (each dealt whole)
    for p, loop in enumerate(loops):
        if items >= cores:
            inner = loops[p:]
            return loops[:p], inner, inner, items
        if loop.dim in REDUCTION:
            share = max(min(cores // items, held // merged), 1)
            slices = -(-loop.count // min(loop.count, share))
            chunks = -(-loop.count // slices)
            if chunks < loop.count:
                span = slices * loop.tile  # elements of one chunk
                rest = loops[p + 1:]
                over = _Loop(loop.dim, chunks, span, loop.tile * (loop.count - 1) + loop.rem
                             - (chunks - 1) * span)  # fmt: skip
                full = _Loop(loop.dim, slices, loop.tile, loop.tile)
                last = _Loop(loop.dim, loop.count - (chunks - 1) * slices, loop.tile, loop.rem)
                return [*loops[:p], over], [full, *rest], [last, *rest], items * chunks
            merged *= loop.count
        items *= loop.count
    none: list[_Loop] = []
    return loops, none, none, items


class _Unroll:
    """Per-item tile profiles of one mapping (cached by item code)."""

    def __init__(self, prob: Problem, mapping: Mapping, chip: Chip) -> None:
        self.prob, self.mapping, self.chip = prob, mapping, chip
        dims, tile = prob.dims, mapping.sram_tile
        loops = [_Loop(d, n, tile[d], dims[d] - (n - 1) * tile[d]) for d, n in mapping.dram_loops]
        counts = {d: float(-(-prob.dims[d] // tile[d])) for d in DIMS}
        held = held_chunks(prob, counts, partials_capacity_bytes(chip), PY)
        self.outer, inner, last, self.items = _dealt(loops, chip.cores, int(held))
        # the items of a shorter last chunk (the last dealt loop's remainder) run ``last``
        self.inner = _Inner(inner)
        self.last = self.inner if last is inner else _Inner(last)
        self.deep = {name: any(lp.dim in DEPENDS[name] for lp in inner) for name in OPERANDS}
        self._class: dict[tuple[int, ...], tuple[float, ...]] = {}
        self._profile: dict[int, dict[str, Floats]] = {}

    def class_costs(self, ext_rem: tuple[bool, ...], inner: _Inner) -> tuple[float, ...]:
        """(cycles, folds, input, weight, output bytes) of a tile whose loops (the dealt ones,
        then ``inner``'s) are remainders per flag."""
        key = tuple(int(b) for b in ext_rem)
        found = self._class.get(key)
        if found is None:
            ext = {d: self.mapping.sram_tile[d] for d in DIMS}
            for lp, rem in zip((*self.outer, *inner.loops), ext_rem, strict=True):
                ext[lp.dim] = lp.rem if rem else lp.tile
            rf = self.mapping.tiling.rf
            found = (
                *tile_compute(self.prob, self.mapping.template, self.chip, ext, rf),
                *(tile_operand_bytes(self.prob, name, ext) for name in OPERANDS),
            )
            self._class[key] = found
        return found

    def item_codes(self) -> npt.NDArray[np.int64]:
        """One code per item: its remainder class and its boundary flags (see :meth:`profile`)."""
        cores, n = self.chip.cores, self.items
        j = np.arange(n)
        shape = [lp.count for lp in self.outer]
        idx = list(np.unravel_index(j, shape)) if shape else []
        cls = np.zeros(n, dtype=np.int64)
        for p, lp in enumerate(self.outer):
            cls |= _bits(idx[p], lp).astype(np.int64) << p
        first = j < cores

        def changed(name: str, a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]) -> Any:
            out = np.zeros(len(a), dtype=bool)
            for p, lp in enumerate(self.outer):
                if lp.dim in DEPENDS[name]:
                    out |= idx[p][a] != idx[p][b]
            return out

        prev = np.maximum(j - cores, 0)
        flags = []
        for name in OPERANDS:
            enter = first | self.deep[name] | changed(name, j, prev)
            flags.append(enter)
        nxt = j + cores
        has_next = nxt < n
        nxt_c = np.minimum(nxt, n - 1)
        leave = ~has_next | self.deep["output"] | changed("output", nxt_c, j)
        flags.append(leave)
        code = cls << 4
        for bit, f in enumerate(flags):
            code |= f.astype(np.int64) << bit
        return code

    def profile(self, code: int) -> dict[str, Floats]:
        """Nominal per-tile arrays of one item (cycles, bytes fetched per operand, SRAM hold)."""
        found = self._profile.get(code)
        if found is not None:
            return found
        cls, flags = code >> 4, code & 15
        outer_rem = tuple(bool(cls >> p & 1) for p in range(len(self.outer)))
        inner = self.last if outer_rem and outer_rem[-1] else self.inner
        inner_rem = [_bits(i, lp) for i, lp in zip(inner.idx, inner.loops, strict=True)]
        inner_cls = np.zeros(inner.n, dtype=np.int64)
        for p, b in enumerate(inner_rem):
            inner_cls |= b.astype(np.int64) << p
        costs = np.zeros((inner.n, 5))
        for c in np.unique(inner_cls):
            rem = tuple(bool(int(c) >> p & 1) for p in range(len(inner.loops)))
            costs[inner_cls == c] = self.class_costs(outer_rem + rem, inner)
        out: dict[str, Floats] = {"cycles": costs[:, 0], "folds": costs[:, 1]}
        enters = {}
        for bit, name in enumerate(OPERANDS):
            enters[name] = np.concatenate(([bool(flags >> bit & 1)], inner.enter[name]))
        out["input"] = costs[:, 2] * enters["input"]
        out["weight"] = costs[:, 3] * enters["weight"]
        out["out_read"] = costs[:, 4] * enters["output"]
        leave = np.concatenate((inner.enter["output"], [bool(flags >> 3 & 1)]))
        out["out_write"] = costs[:, 4] * leave
        # the SRAM a tile reserves: what the analyzer's fit counts (an output held in the
        # registers takes none)
        held_output = 0.0 if self.mapping.template.output_in_registers else costs[:, 4]
        out["hold"] = costs[:, 2] + costs[:, 3] + held_output
        self._profile[code] = out
        return out


def _block_size(tiles: int, max_blocks: int) -> int:
    """Tiles per block that keep a sequence of ``tiles`` tiles within ``max_blocks`` blocks
    (its first and last tile alone)."""
    return 1 if tiles <= max_blocks else -(-(tiles - 2) // (max_blocks - 2))


def _blocks(
    seq: dict[str, Floats], size: int
) -> tuple[npt.NDArray[np.int64], dict[str, Floats]]:
    """Merge the tiles between the first and the last into blocks of ``size`` tiles (the last
    maybe smaller)."""
    n = len(seq["cycles"])
    if size <= 1 or n <= 2:
        return np.ones(n, dtype=np.int64), seq
    # blocks of equal size (the last one maybe smaller): blocks of 1 and 2 tiles mixed would
    # alternate in how much they load per SRAM reservation, a burstiness of their own
    starts = np.concatenate(([0], np.arange(1, n - 1, size), [n - 1]))
    tiles = np.diff(np.concatenate((starts, [n])))
    out = {k: np.add.reduceat(v, starts) for k, v in seq.items() if k != "hold"}
    out["hold"] = np.maximum.reduceat(seq["hold"], starts)
    return tiles, out


def _group_cores(columns: npt.NDArray[np.int64]) -> tuple[Any, Any, Any]:
    """(first core, cores, representative item codes) of each group of cores: cores with the
    same item codes; with more than :data:`MAX_GROUPS` of those, cores with the same remainder
    classes (the first core's refetch flags stand for the group's); then cores with as many
    items. Bytes are rescaled to the mapping's traffic afterwards, so totals stay exact."""
    keys = (columns, np.where(columns >= 0, columns >> 4, -1), (columns >= 0).sum(axis=1)[:, None])
    for key in keys:
        _, first, counts = np.unique(_rows(key), return_index=True, return_counts=True)
        if len(counts) <= MAX_GROUPS:
            break
    return first, counts, columns[first]


def _rows(key: npt.NDArray[np.int64]) -> npt.NDArray[np.void]:
    """Each row of ``key`` as one opaque value (equal rows, equal values): ``np.unique`` of
    these groups the rows as ``np.unique(axis=0)`` does, without a structured dtype of one
    field per column, which costs seconds when a row holds millions of waves."""
    flat = np.ascontiguousarray(key)
    return flat.view(np.dtype((np.void, flat.dtype.itemsize * flat.shape[1]))).ravel()


def work_plan(
    prob: Problem, mapping: Mapping, chip: Chip, max_blocks: int, kept: Kept | None = None,
    busy_factor: float = 1.0,
) -> WorkPlan:
    """The core groups of ``mapping`` (mapped on ``chip``: its cores and array), each with at
    most ``max_blocks`` blocks; bytes per core are scaled to the mapping's DRAM traffic, less
    what a chip schedule ``kept`` on chip or prefetched (see :class:`Kept`). Every tile's
    compute cycles are scaled by ``busy_factor`` (the dequantization of the weights it feeds
    the array, or the vector lanes running its MACs:
    :func:`infersim.simulator.engines.analytic.busy_factor`).

    Raises:
        InfersimError: more than :data:`MAX_TILES` tiles.
        ValueError: ``max_blocks`` below 3.
    """
    if max_blocks < 3:
        raise ValueError(f"max_blocks(={max_blocks}) must be >= 3")
    tiles = math.prod(count for _, count in mapping.dram_loops)
    if tiles > MAX_TILES:
        dims = "x".join(str(prob.dims[d]) for d in DIMS if prob.dims[d] > 1)
        raise InfersimError(
            f"event engine: a {dims} {mapping.dataflow} mapping on {chip.name} has {tiles:,} "
            f"SRAM tiles ({chip.sram.capacity_bytes:,} bytes of SRAM per core), about "
            f"{tiles * SECONDS_PER_TILE:,.0f} s and {tiles * BYTES_PER_TILE / 1e9:,.1f} GB to "
            f"simulate tile by tile; it simulates at most {MAX_TILES:,} tiles per operator: "
            "use the analytic engine (the same mapping in closed form), or more SRAM"
        )
    un = _Unroll(prob, mapping, chip)
    cores = chip.cores
    codes = un.item_codes()
    waves = -(-un.items // cores)
    grid = np.full(waves * cores, -1, dtype=np.int64)
    grid[: un.items] = codes
    columns = grid.reshape(waves, cores).T
    first, counts, reps = _group_cores(columns)
    seqs: list[tuple[int, int, dict[str, Floats]]] = []
    for g in np.argsort(first, kind="stable"):
        row = reps[g]
        row = row[row >= 0]
        if len(row) == 0:
            continue
        parts = [un.profile(int(c)) for c in row]
        seq = {k: np.concatenate([p[k] for p in parts]) for k in _KEYS}
        seqs.append((int(first[g]), int(counts[g]), seq))
    dram = mapping.traffic["dram"]
    kept = kept or Kept()
    wanted = {
        "input": 0.0 if kept.input_on_chip else dram["input"].reads_bytes,
        "weight": dram["weight"].reads_bytes,
        "out_read": dram["output"].reads_bytes,
        "out_write": 0.0 if kept.output_on_chip else dram["output"].writes_bytes,
    }
    scale = {}
    tiles_total = sum(m * len(s["cycles"]) for _, m, s in seqs)
    for key, total in wanted.items():
        nominal = sum(m * float(s[key].sum()) for _, m, s in seqs)
        scale[key] = total / nominal if nominal > 0 else 0.0
        if nominal <= 0 < total:  # nothing flagged: spread evenly over the tiles
            for _, _, s in seqs:
                s[key] = np.full(len(s["cycles"]), total / tiles_total)
            scale[key] = 1.0
    # the first weight tiles of every core, of which ``kept.prefetched_bytes`` are loaded
    first_weights = sum(m * float(s["weight"][0]) * scale["weight"] for _, m, s in seqs)
    left = 1.0 - min(kept.prefetched_bytes / first_weights, 1.0) if first_weights > 0 else 1.0
    # one block size for every group: the links serve the groups' transfers in turn, one
    # block each, so groups with blocks of more tiles would draw more bytes per core than the
    # others, and a group starved that way would finish its share alone at the end
    size = _block_size(max((len(s["cycles"]) for _, _, s in seqs), default=0), max_blocks)
    groups = []
    for first_core, m, seq in seqs:
        weight = seq["weight"] * scale["weight"]
        cycles = seq["cycles"] * busy_factor if busy_factor != 1.0 else seq["cycles"]
        weight[0] *= left
        read = (seq["input"] * scale["input"] + weight + seq["out_read"] * scale["out_read"])
        merged = {"cycles": cycles, "folds": seq["folds"], "read": read,
                  "write": seq["out_write"] * scale["out_write"], "hold": seq["hold"]}
        per_block, blk = _blocks(merged, size)
        groups.append(CoreGroup(first_core, m, per_block, blk["folds"], blk["cycles"], blk["read"],
                                blk["write"], blk["hold"]))
    return WorkPlan(tuple(groups), tiles_total, un.items, min(un.items, cores), waves)
