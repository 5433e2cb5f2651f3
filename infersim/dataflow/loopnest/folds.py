"""The fold level of ONE SRAM tile: SCALE-Sim's folds, their cycles, and the elements each fold
feeds the array, delivers to the PEs and holds in the register file; the PE working set.

A fold lays the template's row group over the array rows and its column group over the array
columns; the extent of a group that does not divide the array side leaves a remainder fold.
Every rule is written once against a math namespace ``xp`` (see
:mod:`infersim.dataflow.loopnest.numerics`): arrays of candidate tilings or floats of one.
"""

from __future__ import annotations

from typing import Any

from infersim.arch_models.chip import Chip
from infersim.dataflow.loopnest.numerics import PY, Figures, MathNamespace, prod
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


def tile_folds(
    nest: Nest, ext: Figures, rf: Figures, xp: MathNamespace, cycles_only: bool = False
) -> Figures:
    """Fold-level totals of ONE SRAM tile of extents ``ext`` (every dim of :data:`DIMS`) with
    the register-file factors ``rf`` (every ``rf_split`` dim): ``cycles``, ``folds``, the
    positions ``used`` and SCALE-Sim's utilization terms, and per operand the elements fed to
    the array (``feed_*``), delivered to the PEs (``deliver_*``) and read from the register
    file (``rf_*``). With ``cycles_only``, the cycles alone (the same operations as the full
    call makes for them)."""
    prob, tpl, chip, rate = nest
    rows, cols = chip.array.rows, chip.array.cols
    ceil_div = xp.ceil_div
    f = {d: xp.minimum(rf[d], ext[d]) for d in tpl.rf_split}
    pe = {d: f.get(d, ext[d]) for d in tpl.stream}
    spatial = (*tpl.rows, *tpl.cols)
    part = {d: ceil_div(ext[d], f[d]) if d in f else ext[d] for d in spatial}
    temporal = prod(
        ceil_div(ext[d], f[d]) if d in f else ext[d]
        for d in DIMS
        if d not in spatial and (d in f or d not in pe)
    )
    rows_ext = prod(part[d] for d in tpl.rows)
    cols_ext = prod(part[d] for d in tpl.cols)
    t_macs = prod(pe.values())
    t_cycles = ceil_div(t_macs, rate)
    folds = temporal * ceil_div(rows_ext, rows) * ceil_div(cols_ext, cols)
    cycles = folds * (tpl.fold_cycles.overhead_cycles(rows, cols) + t_cycles)
    if cycles_only:
        return {"cycles": cycles}
    used = temporal * rows_ext * cols_ext
    out = {
        "cycles": cycles,
        "folds": folds,
        "used": used,
        "util_num": used * t_macs / rate,
        "util_den": folds * rows * cols * (tpl.util_cycles.overhead_cycles(rows, cols) + t_cycles),
    }
    for name, (_, deliver, held) in KEYS.items():
        pe_fp = footprint(name, pe, prob.stride, tpl.window_reuse)
        out[deliver] = used * pe_fp
        out[held] = xp.where(pe_fp < t_macs - 1e-9, used * t_macs, 0.0)

    # a dim both spatial and streamed spans its array share times its PE factor in one fold
    both = [d for d in tpl.stream if d in spatial]

    def fed(uses: Figures, part: Figures, pe: Figures) -> Figures:
        """Elements of each operand one fold of a class feeds the array."""
        x = {**_split(uses["rows"], tpl.rows, part, xp), **_split(uses["cols"], tpl.cols, part, xp)}
        fold_ext = {**pe, **x}  # a dim in neither spans 1 (footprint's default)
        for d in both:
            fold_ext[d] = x[d] * pe[d]
        return {
            key: footprint(name, fold_ext, prob.stride, tpl.window_reuse) for key, name in _FEED
        }

    # the fold classes: full or remainder row fold × full or remainder column fold, each
    # weighted by how many folds of it the tile has
    col_uses = _uses(cols_ext, cols, xp)
    classes = [
        ({"rows": ru, "cols": cu}, temporal * nr * nc)
        for ru, nr in _uses(rows_ext, rows, xp)
        for cu, nc in col_uses
    ]
    out.update(xp.sum_classes(fed, classes, part, pe))
    return out


def rf_need(
    prob: Problem, tpl: Template, tile: dict[str, Any], rf: dict[str, Any], xp: MathNamespace
) -> Any:
    """RF bytes a PE needs beyond one pipeline register per operand (the in-PE working sets),
    for SRAM tiles of extents ``tile`` (every stream dim) and RF factors ``rf``."""
    pe = {d: xp.minimum(rf[d], tile[d]) if d in tpl.rf_split else tile[d] for d in tpl.stream}
    need: Any = xp.zeros_like(tile["G"])
    for name in OPERANDS:
        first_reuse = next((i for i, d in enumerate(tpl.stream) if d not in DEPENDS[name]), None)
        if first_reuse is None:
            continue
        inner = {d: pe[d] for d in tpl.stream[first_reuse:]}
        held = footprint(name, inner, prob.stride, tpl.window_reuse)
        need = need + xp.maximum(held - 1.0, 0.0) * prob.operand_bytes[name]
    return need


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
