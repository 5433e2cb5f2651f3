"""The result of the analyzer: :class:`Mapping` (the loop nest per level, traffic, cycles, time)
with :class:`Access`; :func:`analyze`, which maps one op with one tiling, and the builders of a
:class:`Mapping` from the figures of :mod:`infersim.dataflow.loopnest.figures`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from infersim.arch_models.chip import Chip
from infersim.dataflow.loopnest.figures import (
    Access,
    Timed,
    figure_at,
    figures_of,
    picked_figures,
)
from infersim.dataflow.loopnest.numerics import PY, Figures
from infersim.dataflow.loopnest.problem import TILEABLE, Problem, Tiling, nest_of, problem_of
from infersim.dataflow.loopnest.waves import BOUNDS, Backing, Waves
from infersim.dataflow.templates import DIMS, Template
from infersim.errors import InfersimError
from infersim.workloads.ops import OpBase

_T = TypeVar("_T")


@dataclass(frozen=True)
class Mapping:
    """An op mapped on a chip by one dataflow: loop nest per level, traffic, cycles, time.

    Traffic is ``traffic[level][operand]`` in bytes for one repetition of the op (levels
    :data:`~infersim.dataflow.loopnest.figures.LEVELS`, operands ``input``, ``weight``,
    ``output``). Cycles are core clock cycles; ``time_s`` = ``total_cycles`` / freq.
    Utilizations are fractions in [0, 1].
    """

    dataflow: str
    template: Template
    tiling: Tiling
    dims: dict[str, int]
    mac_class: str
    macs: float
    dram_loops: tuple[tuple[str, int], ...]
    sram_tile: dict[str, int]
    fold_loops: dict[str, int]
    spatial_rows: tuple[str, ...]
    spatial_cols: tuple[str, ...]
    rows_extent: int
    cols_extent: int
    pe_loops: tuple[tuple[str, int], ...]
    tiles: int
    cores_used: int
    waves: int
    folds: int
    compute_cycles: int
    mapping_efficiency: float
    compute_utilization: float
    overall_utilization: float
    traffic: dict[str, dict[str, Access]]
    sram_bytes: float
    sram_capacity_bytes: float
    rf_bytes: float
    rf_capacity_bytes: float
    dram_bytes: float
    dram_cycles: float
    first_load_cycles: float
    last_store_cycles: float
    total_cycles: float
    time_s: float
    bound: str
    iterations: float = 1.0
    """Work items the DRAM loops dealt to the cores (one per core per wave at most)."""
    kernels: int = 1
    """Kernels the mapping launches: 2 where it deals a reduction loop in more than one chunk
    (split-K: a second kernel sums the partials), else 1. ``total_cycles`` includes the
    launch of every kernel beyond the first (the chip's ``kernel_overhead_s`` each); the
    engines add the first's, and take the others out of the time they overlap with other
    levels (:func:`~infersim.dataflow.loopnest.figures.loop_nest_cycles`)."""
    levels: Waves | None = None
    """A mapping on the cores view of a two-level chip made with a
    :class:`~infersim.dataflow.loopnest.waves.Backing`: what its two-level time was made of
    (``total_cycles`` and ``bound`` are that time's; ``compute``, ``sram`` or ``memory``);
    None otherwise (``total_cycles`` is the chip's own, ``bound`` ``compute`` or
    ``memory``)."""

    @property
    def fits(self) -> bool:
        """Whether the double-buffered SRAM tile and the PE working set fit their capacities."""
        return (
            self.sram_bytes <= self.sram_capacity_bytes and self.rf_bytes <= self.rf_capacity_bytes
        )

    def loop_nest(self) -> dict[str, list[tuple[str, int]]]:
        """(dim, extent) loops per level, outer to inner: DRAM tile loops, the fold loop of one
        SRAM tile (fold dims, then row and column folds of the full tile), the array's spatial
        dims (rows group, then columns group), and the in-PE stream loop."""
        rows, cols = self.spatial_rows, self.spatial_cols
        return {
            "dram": list(self.dram_loops),
            "sram": [*self.fold_loops.items()],
            "array": [
                (f"rows:{'·'.join(rows)}", self.rows_extent),
                (f"cols:{'·'.join(cols)}", self.cols_extent),
            ],
            "register_file": list(self.pe_loops),
        }

    def level_bytes(self, level: str) -> float:
        """All bytes read and written at ``level``."""
        return sum(a.total_bytes for a in self.traffic[level].values())

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready fields."""
        return {
            "dataflow": self.dataflow,
            "dims": dict(self.dims),
            "macs": self.macs,
            "dram_loops": [list(x) for x in self.dram_loops],
            "sram_tile": dict(self.sram_tile),
            "fold_loops": dict(self.fold_loops),
            "spatial_rows": list(self.spatial_rows),
            "spatial_cols": list(self.spatial_cols),
            "rows_extent": self.rows_extent,
            "cols_extent": self.cols_extent,
            "pe_loops": [list(x) for x in self.pe_loops],
            "loop_nest": {k: [list(x) for x in v] for k, v in self.loop_nest().items()},
            "tiles": self.tiles,
            "cores_used": self.cores_used,
            "waves": self.waves,
            "folds": self.folds,
            "compute_cycles": self.compute_cycles,
            "mapping_efficiency": self.mapping_efficiency,
            "compute_utilization": self.compute_utilization,
            "overall_utilization": self.overall_utilization,
            "traffic_bytes": {
                level: {
                    name: {"reads": a.reads_bytes, "writes": a.writes_bytes}
                    for name, a in ops.items()
                }
                for level, ops in self.traffic.items()
            },
            "sram_bytes": self.sram_bytes,
            "rf_bytes": self.rf_bytes,
            "dram_bytes": self.dram_bytes,
            "dram_cycles": self.dram_cycles,
            "first_load_cycles": self.first_load_cycles,
            "last_store_cycles": self.last_store_cycles,
            "total_cycles": self.total_cycles,
            "time_s": self.time_s,
            "bound": self.bound,
            "kernels": self.kernels,
        }


def _check_tiling(tpl: Template, tiling: Tiling) -> None:
    for d, v in tiling.tile.items():
        if d not in TILEABLE:
            raise InfersimError(f"tile dim {d!r} cannot be tiled; tileable: {TILEABLE}")
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InfersimError(f"tile[{d!r}] = {v!r}: must be an integer >= 1")
    for d, v in tiling.rf.items():
        if d not in tpl.rf_split:
            raise InfersimError(
                f"rf dim {d!r} not split by dataflow {tpl.name!r}; rf_split: {tpl.rf_split}"
            )
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InfersimError(f"rf[{d!r}] = {v!r}: must be an integer >= 1")
    if any(d not in TILEABLE for d in tiling.order) or len(set(tiling.order)) != len(tiling.order):
        raise InfersimError(f"loop order {tiling.order}: must be distinct dims of {TILEABLE}")


def analyze(
    op: OpBase, chip: Chip, template: Template, tiling: Tiling | None = None,
    backing: Backing | None = None,
) -> Mapping:
    """Map one repetition of ``op`` on ``chip`` with ``template`` and ``tiling`` (default: the
    whole op as one SRAM tile, as SCALE-Sim streams it) and count traffic, cycles and time
    (with a ``backing``, the time of the two-level chip whose cores view ``chip`` is: see
    :func:`~infersim.dataflow.map_op`).

    The result is reported even when the tile does not fit (see :attr:`Mapping.fits`).

    Raises:
        UnsupportedDtypeError: the array cannot compute the op's dtype.
        InfersimError: an op kind without a loop nest, or a malformed tiling.
    """
    tiling = tiling or Tiling()
    prob = problem_of(op)
    chip.macs_per_cycle(prob.mac_class)  # raises UnsupportedDtypeError
    _check_tiling(template, tiling)
    return build_mapping(prob, template, chip, tiling, backing)


def build_mapping(
    prob: Problem, tpl: Template, chip: Chip, tiling: Tiling, backing: Backing | None = None,
    timed: Timed | None = None,
) -> Mapping:
    """The :class:`Mapping` of one valid ``tiling``, evaluated in plain floats (with a
    ``backing``, timed as the cores view ``chip`` of a two-level chip: see
    :func:`~infersim.dataflow.loopnest.figures.figures_of`). ``timed``: its DRAM and time
    figures in floats where a search priced them already (taken, not recomputed:
    :func:`~infersim.dataflow.loopnest.figures.picked_figures`)."""
    tile = tiling.extents(prob)
    return picked_mapping(
        prob, tpl, chip, tile, (*tiling.order, *(d for d in TILEABLE if d not in tiling.order)),
        {d: min(tiling.rf.get(d, 1), tile[d]) for d in tpl.rf_split}, backing, timed,
    )  # fmt: skip


def picked_mapping(
    prob: Problem, tpl: Template, chip: Chip, tile: dict[str, int], order: tuple[str, ...],
    rf: dict[str, int], backing: Backing | None = None, timed: Timed | None = None,
) -> Mapping:
    """:func:`build_mapping` of a complete tiling, as a search's pick has it: an extent for
    every dim of :data:`DIMS` (at most the dim's), every tileable dim in ``order``, an RF
    factor for every ``rf_split`` dim of ``tpl`` (at most its extent)."""
    floats = {d: float(n) for d, n in tile.items()}
    factors = {d: float(n) for d, n in rf.items()}
    nest = nest_of(prob, tpl, chip)
    if timed is None:
        fig = figures_of(nest, floats, (order,), factors, PY, backing)
    else:
        fig = picked_figures(nest, floats, factors, timed)
    return _mapping(prob, tpl, chip, tile, order, rf, fig)


def mapping_of(
    prob: Problem, tpl: Template, chip: Chip, tiling: Tiling, fig: Figures, o: int, i: int
) -> Mapping:
    """The :class:`Mapping` of a complete ``tiling`` (an extent for every dim of
    :data:`DIMS`, every tileable dim in its order, RF factors capped at the tile) from the
    figures ``fig``: of candidate ``i`` with the ``o``-th order of
    :func:`~infersim.dataflow.loopnest.figures.evaluate_orders`, or the plain-float figures of
    one tiling (``o`` and ``i`` then unused; the mapping holds their traffic pairs and their
    levels as they are)."""
    if isinstance(fig["total_cycles"], np.ndarray):  # one candidate's floats of the arrays
        fig = _one_candidate(fig, o, i)
    return _mapping(prob, tpl, chip, tiling.tile, tiling.order, tiling.rf, fig)


def _mapping(
    prob: Problem, tpl: Template, chip: Chip, tile: dict[str, int], order: tuple[str, ...],
    rf_full: dict[str, int], fig: Figures,
) -> Mapping:
    """:func:`mapping_of` of the complete tiling ``tile``, ``order``, ``rf_full`` from the
    figures ``fig`` of that tiling in floats (a pick's tiling, its dicts not copied into a
    :class:`Tiling` first)."""
    spatial, fold_dims = _loops_of(tpl)
    dims = prob.dims
    part = {d: -(-tile[d] // rf_full[d]) if d in rf_full else tile[d] for d in spatial}
    fold_loops = {d: -(-tile[d] // rf_full[d]) if d in rf_full else tile[d] for d in fold_dims}
    total_cycles = float(fig["total_cycles"])
    levels = fig["levels"]
    return made(Mapping, {
        "dataflow": tpl.name,
        "template": tpl,
        "tiling": made(Tiling, {"tile": {d: tile[d] for d in TILEABLE}, "order": order,
                                 "rf": rf_full}),
        "dims": dict(dims),
        "mac_class": prob.mac_class,
        "macs": prob.macs,
        "dram_loops": tuple([(d, n) for d in order if (n := -(-dims[d] // tile[d])) > 1]),
        "sram_tile": dict(tile),
        "fold_loops": fold_loops,
        "spatial_rows": tpl.rows,
        "spatial_cols": tpl.cols,
        "rows_extent": math.prod(map(part.__getitem__, tpl.rows)),
        "cols_extent": math.prod(map(part.__getitem__, tpl.cols)),
        "pe_loops": tuple([(d, rf_full.get(d, tile[d])) for d in tpl.stream]),
        "tiles": round(fig["tiles"]),
        "cores_used": round(fig["cores_used"]),
        "waves": round(fig["waves"]),
        "folds": round(fig["folds"]),
        "compute_cycles": round(fig["compute_cycles"]),
        "mapping_efficiency": float(fig["mapping_efficiency"]),
        "compute_utilization": float(fig["compute_utilization"]),
        "overall_utilization": float(fig["overall_utilization"]),
        "traffic": fig["traffic"],
        "sram_bytes": float(fig["sram_bytes"]),
        "sram_capacity_bytes": float(chip.sram.capacity_bytes),
        "rf_bytes": float(fig["rf_bytes"]),
        "rf_capacity_bytes": float(chip.register_file.bytes_per_pe),
        "dram_bytes": float(fig["dram_bytes"]),
        "dram_cycles": float(fig["dram_cycles"]),
        "first_load_cycles": float(fig["first_load_cycles"]),
        "last_store_cycles": float(fig["last_store_cycles"]),
        "total_cycles": total_cycles,
        "time_s": total_cycles / chip.freq_hz,
        "bound": BOUNDS[round(fig["bound"])],
        "iterations": float(fig["iterations"]),
        "kernels": round(fig["kernels"]),
        "levels": levels,
    })


def _one_candidate(fig: Figures, o: int, i: int) -> Figures:
    """The figures of candidate ``i`` in order ``o`` of :func:`~infersim.dataflow.loopnest.
    figures.evaluate_orders`, in floats, laid out as :func:`~infersim.dataflow.loopnest.
    figures.figures_of` lays out those of one tiling."""
    out: Figures = {key: figure_at(v, o, i) for key, v in fig.items()
                    if key not in ("traffic", "levels")}
    out["traffic"] = {
        level: {name: Access(figure_at(r, o, i), figure_at(w, o, i)) for name, (r, w)
                in ops.items()}
        for level, ops in fig["traffic"].items()
    }  # fmt: skip
    levels = fig["levels"]
    out["levels"] = None if levels is None else Waves._make(figure_at(v, o, i) for v in levels)
    return out


@functools.cache
def _loops_of(tpl: Template) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A template's spatial dims (rows, then columns) and the dims of its fold loops of one SRAM
    tile, in :data:`DIMS` order: those neither spatial nor streamed whole (a stream dim split
    in the register file loops over its factors). Its RF factors name every ``rf_split`` dim."""
    spatial = (*tpl.rows, *tpl.cols)
    folds = tuple(d for d in DIMS if d not in spatial
                  and (d in tpl.rf_split or d not in tpl.stream))  # fmt: skip
    return spatial, folds


def made(cls: type[_T], values: dict[str, Any]) -> _T:
    """``cls(**values)`` for a frozen dataclass without ``__post_init__`` or slots, given every
    field: its fields set in one update of the instance's ``__dict__``, where a frozen
    dataclass's ``__init__`` calls ``object.__setattr__`` once per field (37 for a
    :class:`Mapping`, 5 µs of each search's pick; a test holds :func:`mapping_of` to every
    field)."""
    obj = object.__new__(cls)
    obj.__dict__.update(values)
    return obj
