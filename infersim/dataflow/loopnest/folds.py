"""The fold level of ONE SRAM tile: SCALE-Sim's folds, their cycles, and the elements each fold
feeds the array, delivers to the PEs and holds in the register file; the PE working set.

A fold lays the template's row group over the array rows and its column group over the array
columns; the extent of a group that does not divide the array side leaves a remainder fold.
Every rule is written once against a math namespace ``xp`` (see
:mod:`infersim.dataflow.loopnest.numerics`): arrays of candidate tilings or floats of one.
"""

from __future__ import annotations

import functools
from typing import Any

from infersim.arch_models.chip import Chip
from infersim.dataflow.loopnest.numerics import (
    PY,
    Figures,
    MathNamespace,
    prod,
    prod_skipping_ones,
)
from infersim.dataflow.loopnest.problem import (
    DEPENDS,
    Nest,
    Problem,
    footprint,
    nest_of,
    tile_bytes,
)
from infersim.dataflow.templates import DIMS, OPERANDS, Template

KEYS: dict[str, tuple[str, str, str]] = {
    name: (f"feed_{name}", f"deliver_{name}", f"rf_{name}") for name in OPERANDS
}
"""Per operand, the names of its :func:`tile_folds` figures: elements fed to the array,
delivered to the PEs, and read from the register file."""

_FEED = tuple((KEYS[name][0], name) for name in OPERANDS)


def _split(used: Any, group: tuple[str, ...], part: dict[str, Any], xp: MathNamespace) -> Figures:
    """Per-dim extents of ``used`` consecutive positions of a flattened group (last dim fastest)."""
    out: Figures = {}
    rest = used
    for d in reversed(group):
        out[d] = xp.minimum(part[d], rest)
        rest = rest / out[d]
    return out


def _uses(extent: Any, array_dim: int, xp: MathNamespace) -> list[tuple[Any, Any]]:
    """(positions used, number of folds): the full folds and the remainder fold (maybe none)."""
    full = xp.floor(extent / array_dim + 1e-9)
    rem = extent - full * array_dim
    return [(xp.full_like(extent, float(array_dim)), full), (xp.maximum(rem, 1.0), rem > 0.5)]


def _block_uses(extent: Any, array_dim: int, xp: MathNamespace) -> list[tuple[Any, Any]]:
    """(positions used, number) of the folds along a group merged into one block: the
    positions of its largest fold, once."""
    return [(xp.minimum(extent, float(array_dim)), xp.full_like(extent, 1.0))]


@functools.cache
def kept_folds(tpl: Template) -> tuple[tuple[str, ...], bool, bool] | None:
    """The fold loops of one SRAM tile that ``tpl``'s stationary operand can stay in the PE
    across: (the temporal dims, whether the row folds, whether the column folds) it does not
    depend on; run innermost, they need it delivered once for all of them (row-stationary: a
    filter row stays in the register file over the output-row folds and the image chunks).
    None: none (every fold of WS, OS and IS changes their stationary operand; NLR keeps
    nothing)."""
    if tpl.stationary is None:
        return None
    free = set(DIMS) - DEPENDS[tpl.stationary]
    spatial = {*tpl.rows, *tpl.cols}
    temporal = tuple(
        d for d in DIMS
        if d not in spatial and (d in tpl.rf_split or d not in tpl.stream) and d in free
    )
    rows, cols = set(tpl.rows) <= free, set(tpl.cols) <= free
    return (temporal, rows, cols) if temporal or rows or cols else None


_ONE_TILE: dict[tuple[Any, ...], tuple[Template, Figures]] = {}
""":func:`tile_folds` of one tiling in floats, by everything it reads (see :func:`tile_folds`):
ops that share a tile shape on one array (every full CTA tile of the GEMMs of a model) share
its fold analysis."""
_ONE_TILE_MAX = 16384


def clear_tile_folds() -> None:
    """Forget every memoized fold analysis of one tile."""
    _ONE_TILE.clear()


def tile_folds(
    nest: Nest, ext: Figures, rf: Figures, xp: MathNamespace, cycles_only: bool = False
) -> Figures:
    """:func:`_tile_folds`, memoized in floats (:data:`PY`) by what it reads of the nest: the
    template, the chip (its array and per-byte energies), the op's stride and MAC rate. Read
    the figures; do not change them."""
    if xp is not PY:
        return _tile_folds(nest, ext, rf, xp, cycles_only)
    prob, tpl, chip, rate = nest
    # the template by identity (hashing its fields costs more than the lookup saves); the
    # entry keeps it alive, so its id names no other template while the entry exists
    key = (id(tpl), chip.key, prob.stride, rate, *map(ext.__getitem__, DIMS),
           *map(rf.__getitem__, tpl.rf_split), cycles_only)  # fmt: skip
    found = _ONE_TILE.get(key)
    if found is None or found[0] is not tpl:
        if len(_ONE_TILE) >= _ONE_TILE_MAX:
            _ONE_TILE.clear()
        found = _ONE_TILE[key] = (tpl, _tile_folds(nest, ext, rf, xp, cycles_only))
    return found[1]


def _tile_folds(
    nest: Nest, ext: Figures, rf: Figures, xp: MathNamespace, cycles_only: bool = False
) -> Figures:
    """Fold-level totals of ONE SRAM tile of extents ``ext`` (every dim of :data:`DIMS`) with
    the register-file factors ``rf`` (every ``rf_split`` dim): ``cycles``, ``folds``, the
    positions ``used`` and SCALE-Sim's utilization terms, and per operand the elements fed to
    the array (``feed_*``), delivered to the PEs (``deliver_*``) and read from the register
    file (``rf_*``). With ``cycles_only``, the cycles and folds alone (the same operations as
    the full call makes for them).

    Every fold feeds each operand's fold footprint and delivers each PE its PE footprint,
    except the stationary operand where keeping it over the folds of :func:`kept_folds` moves
    fewer pJ (:func:`_kept_stationary`), and a template without local reuse (every MAC's
    operands come from the buffer: each fold step feeds its spatial footprint and delivers one
    element of each operand per MAC; nothing is read from a register file)."""
    prob, tpl, chip, rate = nest
    rows, cols = chip.array.rows, chip.array.cols
    ceil_div = xp.ceil_div
    f = {d: xp.minimum(rf[d], ext[d]) for d in tpl.rf_split}
    pe = {d: f.get(d, ext[d]) for d in tpl.stream}
    spatial = (*tpl.rows, *tpl.cols)
    part = {d: ceil_div(ext[d], f[d]) if d in f else ext[d] for d in spatial}
    loops = {
        d: ceil_div(ext[d], f[d]) if d in f else ext[d]
        for d in DIMS
        if d not in spatial and (d in f or d not in pe)
    }
    # products skipping the factors that are the float 1.0 (x · 1.0 is x exactly): the figures
    # of :func:`prod`, without array operations by 1.0 (here and for the folds below)
    temporal = prod_skipping_ones(loops.values())
    rows_ext = prod_skipping_ones(map(part.__getitem__, tpl.rows))
    cols_ext = prod_skipping_ones(map(part.__getitem__, tpl.cols))
    t_macs = prod_skipping_ones(pe.values())
    t_cycles = ceil_div(t_macs, rate)
    folds = prod_skipping_ones((temporal, ceil_div(rows_ext, rows), ceil_div(cols_ext, cols)))
    overhead = tpl.fold_cycles.overhead_cycles(rows, cols)
    if chip.array.double_buffered and tpl.load_cycles is not None:
        # the next fold's stationary operand loads behind this fold's stream and the folds
        # pipeline: only the tile's first load and last skew and drain are exposed. A PE of
        # r > 1 MACs per cycle stands for r arrays side by side (tpu-v4: four MXUs as one),
        # each loading its own rows: the load takes 1/r of the cycles.
        load = float(tpl.load_cycles.overhead_cycles(rows, cols)) / max(rate, 1.0)
        cycles = folds * xp.maximum(t_cycles, load) + overhead
    else:
        cycles = folds * (overhead + t_cycles)
    if cycles_only:
        return {"cycles": cycles, "folds": folds}
    used = temporal * rows_ext * cols_ext
    out = {
        "cycles": cycles,
        "folds": folds,
        "used": used,
        "util_num": used * t_macs / rate,
        "util_den": folds * rows * cols * (tpl.util_cycles.overhead_cycles(rows, cols) + t_cycles),
    }
    for name, (_, deliver, held) in KEYS.items():
        if not tpl.local_reuse:  # no register file: every MAC gets each operand delivered
            out[deliver] = used * t_macs
            out[held] = xp.zeros_like(used)
            continue
        pe_fp = footprint(name, pe, prob.stride, tpl.window_reuse)
        out[deliver] = used * pe_fp
        out[held] = xp.where(pe_fp < t_macs - 1e-9, used * t_macs, 0.0)
    # the fold classes: full or remainder row fold × full or remainder column fold, each
    # weighted by how many folds of it the tile has
    uses = (_uses(rows_ext, rows, xp), _uses(cols_ext, cols, xp))
    out.update(_fed(nest, part, pe, temporal, uses, xp))
    kept = kept_folds(tpl)
    if kept is not None and tpl.stationary is not None:
        keep = (tpl.stationary, kept)
        out.update(_kept_stationary(nest, keep, out, part, pe, loops, (rows_ext, cols_ext), xp))
    return out


def _fed(
    nest: Nest, part: Figures, pe: Figures, weight: Any,
    uses: tuple[list[tuple[Any, Any]], list[tuple[Any, Any]]], xp: MathNamespace,
    feeds: tuple[tuple[str, str], ...] = _FEED,
) -> Figures:
    """Per operand of ``feeds`` ((figure, operand) pairs), the elements fed to the array over
    one tile's folds: each class of (row uses, column uses) in ``uses``, weighted by ``weight``
    times its numbers, with ``part`` each spatial dim's array share and ``pe`` the PE extents
    of a fold."""
    prob, tpl, _, _ = nest
    # a dim both spatial and streamed spans its array share times its PE factor in one fold
    spatial = {*tpl.rows, *tpl.cols}
    both = [d for d in tpl.stream if d in spatial]

    def fed(uses: Figures, part: Figures, pe: Figures) -> Figures:
        """Elements of each operand one fold of a class feeds the array (without local reuse:
        one fold step's spatial footprint at every step)."""
        x = {**_split(uses["rows"], tpl.rows, part, xp), **_split(uses["cols"], tpl.cols, part, xp)}
        if not tpl.local_reuse:
            steps = prod(pe.values())
            return {key: footprint(name, x, prob.stride, False) * steps for key, name in feeds}
        fold_ext = {**pe, **x}  # a dim in neither spans 1 (footprint's default)
        for d in both:
            fold_ext[d] = x[d] * pe[d]
        return {
            key: footprint(name, fold_ext, prob.stride, tpl.window_reuse) for key, name in feeds
        }

    classes = [
        ({"rows": ru, "cols": cu}, weight * nr * nc) for ru, nr in uses[0] for cu, nc in uses[1]
    ]
    return xp.sum_classes(fed, classes, part, pe)


def _kept_stationary(
    nest: Nest, keep: tuple[str, tuple[tuple[str, ...], bool, bool]], plain: Figures,
    part: Figures, pe: Figures, loops: Figures, exts: tuple[Any, Any], xp: MathNamespace,
) -> Figures:
    """The figures of the stationary operand and its :func:`kept_folds` (``keep``) in one
    tile (``plain``: delivered again every fold) where it moves fewer pJ at the chip's per-byte
    energies to keep it in the register file over those folds (run innermost: a choice of fold
    order, which changes no cycle): fed and delivered once per block of those folds, to the PEs
    of the block's largest fold, then read from the register file at every MAC. ``loops`` are
    the temporal fold loops and ``exts`` the positions along the array rows and columns."""
    prob, tpl, chip, _ = nest
    name, kept = keep
    feed_key, deliver_key, rf_key = KEYS[name]
    rows, cols = chip.array.rows, chip.array.cols
    blocks = prod(v for d, v in loops.items() if d not in kept[0])
    at = blocks * (xp.minimum(exts[0], float(rows)) if kept[1] else exts[0])
    at = at * (xp.minimum(exts[1], float(cols)) if kept[2] else exts[1])
    used, t_macs = plain["used"], prod(pe.values())
    uses = (
        (_block_uses if kept[1] else _uses)(exts[0], rows, xp),
        (_block_uses if kept[2] else _uses)(exts[1], cols, xp),
    )
    feed = _fed(nest, part, pe, blocks, uses, xp, ((feed_key, name),))[feed_key]
    deliver = at * footprint(name, pe, prob.stride, tpl.window_reuse)
    held = xp.where(at < used - 1e-9, used * t_macs, plain[rf_key])
    e = chip.energy
    twice = 2.0 if name == "output" else 1.0  # psums: read and written (figures_of)

    def pj(feed: Any, deliver: Any, held: Any) -> Any:
        rf_writes = deliver if name != "output" else held
        return (
            twice * feed * e.sram_pj_per_byte
            + deliver * e.array_pj_per_byte
            + (held + xp.where(held > 0, rf_writes, 0.0)) * e.register_file_pj_per_byte
        )

    better = pj(feed, deliver, held) < pj(plain[feed_key], plain[deliver_key], plain[rf_key])
    return {
        feed_key: xp.where(better, feed, plain[feed_key]),
        deliver_key: xp.where(better, deliver, plain[deliver_key]),
        rf_key: xp.where(better, held, plain[rf_key]),
    }


def rf_need(
    prob: Problem, tpl: Template, tile: dict[str, Any], rf: dict[str, Any], xp: MathNamespace
) -> Any:
    """RF bytes a PE needs beyond one pipeline register per operand (the in-PE working sets),
    for SRAM tiles of extents ``tile`` (every stream dim) and RF factors ``rf``."""
    pe = {d: xp.minimum(rf[d], tile[d]) if d in tpl.rf_split else tile[d] for d in tpl.stream}
    need: Any = xp.zeros_like(tile["G"])
    if not tpl.local_reuse:  # nothing is held
        return need
    for name, inner in _held_streams(tpl):
        spans = pe if len(inner) == len(pe) else {d: pe[d] for d in inner}  # (all: pe itself)
        held = footprint(name, spans, prob.stride, tpl.window_reuse)
        need = need + xp.maximum(held - 1.0, 0.0) * prob.operand_bytes[name]
    return need


@functools.cache
def _held_streams(tpl: Template) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Per operand a PE of ``tpl`` holds, in :data:`OPERANDS` order: the stream dims from its
    first reuse on (a stream dim it does not depend on; all of them for a stationary operand
    kept across folds), whose PE extents its held working set spans."""
    out = []
    for name in OPERANDS:
        first_reuse = next((i for i, d in enumerate(tpl.stream) if d not in DEPENDS[name]), None)
        if name == tpl.stationary and kept_folds(tpl) is not None:
            first_reuse = 0  # kept across folds: all of its PE footprint is held
        if first_reuse is not None:
            out.append((name, tpl.stream[first_reuse:]))
    return tuple(out)


# --- per-tile accessors (the event engine walks the tiles one by one) ---------------------------


def tile_compute(
    prob: Problem, template: Template, chip: Chip, ext: dict[str, int], rf: dict[str, int]
) -> tuple[float, float]:
    """(compute cycles, folds) of ONE SRAM tile of extents ``ext`` (every dim of :data:`DIMS`;
    a remainder tile has its smaller extents) with the register-file factors ``rf``: its folds ×
    (fold overhead + streamed cycles), as summed by the analyzer (no SCALE-Sim −1)."""
    arr = {d: float(ext[d]) for d in DIMS}
    factors = {d: float(min(rf.get(d, 1), ext[d])) for d in template.rf_split}
    sums = tile_folds(nest_of(prob, template, chip), arr, factors, PY)
    return float(sums["cycles"]), float(sums["folds"])


def tile_operand_bytes(prob: Problem, name: str, ext: dict[str, int]) -> float:
    """Bytes of operand ``name`` in ONE SRAM tile of extents ``ext`` (every dim of
    :data:`DIMS`): the input region (with its halo, capped at the padded input), the weights, or
    the outputs (at the output dtype, before any epilogue scale)."""
    return float(tile_bytes(prob, name, {d: float(ext[d]) for d in DIMS}, PY))
