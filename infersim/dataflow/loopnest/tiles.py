"""The SRAM tiles of a tiling: how many tiles each dim is cut into, the classes of tiles (full or
remainder extent per cut dim), and the fold-level totals summed over every tile.

Written once against a math namespace ``xp`` (see :mod:`infersim.dataflow.loopnest.numerics`):
arrays of candidate tilings or floats of one.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, NamedTuple

import numpy as np

from infersim.dataflow.loopnest.folds import tile_folds
from infersim.dataflow.loopnest.numerics import (
    PY,
    Classes,
    Figures,
    MathNamespace,
    prod,
    prod_skipping_ones,
)
from infersim.dataflow.loopnest.problem import Nest, Problem
from infersim.dataflow.templates import DIMS


class TileClasses(NamedTuple):
    """The SRAM tiles of a tiling, by class (see :func:`tile_classes`)."""

    whole: Figures
    """The dims whole in every tile: their extent (one float; the tiles' own values when every
    dim is whole, so that the figures stay per candidate)."""
    classes: Classes
    """One class per combination of a full or remainder tile along each other (cut) dim: the
    cut dims' extents, and how many tiles of it each candidate has (None: no dim is cut, one
    tile on every candidate)."""
    counts: Figures
    """The tiles along each dim of :data:`DIMS`."""


def _cut(extent: Any, tile: Any, xp: MathNamespace) -> tuple[Any, Any, Any, Any]:
    """(tiles, full tiles, remainder extent, whether there is a remainder tile) of a dim of
    ``extent`` cut into tiles of ``tile``."""
    n = xp.ceil_div(extent, tile)
    rem = extent - (n - 1) * tile
    has_rem = rem < tile - 0.5
    return n, n - has_rem, rem, has_rem


def tile_classes(prob: Problem, tile: dict[str, Any], xp: MathNamespace) -> TileClasses:
    """The :class:`TileClasses` of SRAM tiles of extents ``tile`` (every dim of :data:`DIMS`)."""
    if xp is PY:
        return _one_tiling_classes(prob, tile)
    extents = [v if isinstance(v := prob.dims[d], np.ndarray) else float(v) for d in DIMS]
    tiles = [tile[d] for d in DIMS]
    is_whole = xp.equal_each(tiles, extents)
    split = xp.batch(
        _cut, [(e, t) for e, t, w in zip(extents, tiles, is_whole, strict=True) if not w], xp
    )
    some_rem = xp.any_each([s[3] for s in split])
    # a dim whole in every tile enters the fold analysis as one float (the same value on every
    # candidate: numpy broadcasts it, element for element the same operations), unless every
    # dim is whole
    whole: Figures = {}
    cut: dict[str, list[tuple[Any, Any]]] = {}  # per cut dim: (extent, count) of its tiles
    counts: Figures = {}
    ones: Any = None
    j = 0
    for d, e, t, w in zip(DIMS, extents, tiles, is_whole, strict=True):
        if w:
            whole[d] = e if split else t
            if ones is None:  # ceil(1 - 1e-9) on every candidate (one shared value)
                ones = xp.full_like(t, 1.0)
            counts[d] = ones
            continue
        n, full, rem, has_rem = split[j]
        counts[d] = n
        cut[d] = [(t, full), (rem, has_rem * 1.0)] if some_rem[j] else [(t, full)]
        j += 1
    if not cut:
        return TileClasses(whole, [({}, None)], counts)
    classes: Classes = [  # (prod's weights, without the array product by its start, 1.0)
        ({d: e for d, (e, _) in zip(cut, combo, strict=True)},
         prod_skipping_ones([c for _, c in combo]))
        for combo in itertools.product(*cut.values())
    ]  # fmt: skip
    return TileClasses(whole, classes, counts)


def _one_tiling_classes(prob: Problem, tile: dict[str, Any]) -> TileClasses:
    """:func:`tile_classes` of one tiling in floats (:data:`PY`): the same figures, the same
    operations, without the per-dim lists the array form batches."""
    whole: Figures = {}
    cut: dict[str, list[tuple[Any, Any]]] = {}
    counts: Figures = {}
    dims = prob.dims
    some_rem = False
    for d in DIMS:
        e, t = float(dims[d]), tile[d]
        if t == e:
            whole[d] = e
            counts[d] = 1.0
            continue
        n = float(math.ceil(e / t - 1e-9))
        rem = e - (n - 1) * t
        counts[d] = n
        if rem < t - 0.5:
            cut[d] = [(t, n - 1.0), (rem, 1.0)]
            some_rem = True
        else:
            cut[d] = [(t, n)]
    if not cut:  # every dim whole: the tile's own values
        return TileClasses({d: tile[d] for d in DIMS}, [({}, None)], counts)
    if not some_rem:  # one class, of full tiles: 1.0 times each cut dim's count
        full = {d: ext for d, ((ext, _),) in cut.items()}
        return TileClasses(whole, [(full, prod(map(counts.__getitem__, full)))], counts)
    classes: Classes = [
        ({d: e for d, (e, _) in zip(cut, combo, strict=True)}, prod([c for _, c in combo]))
        for combo in itertools.product(*cut.values())
    ]
    return TileClasses(whole, classes, counts)


def all_tiles(
    nest: Nest, tiles: TileClasses, rf: Figures, xp: MathNamespace, cycles_only: bool = False
) -> Figures:
    """The :func:`~infersim.dataflow.loopnest.folds.tile_folds` totals summed over every SRAM
    tile: each class of tile is analyzed once and weighted by how many tiles of it there are
    (with ``cycles_only``, the cycles and folds alone)."""

    def folds(ext: Figures, whole: Figures, rf: Figures) -> Figures:
        return tile_folds(nest, {**whole, **ext}, rf, xp, cycles_only)

    return xp.sum_classes(folds, tiles.classes, tiles.whole, rf)
