"""One loop-nest analyzer for every dataflow: ``analyze(op, chip, template, tiling) -> Mapping``.

The op is the unified nest of :mod:`infersim.dataflow.templates` (a GEMM is a 1×1 convolution).
A mapping has four levels, outer to inner:

``dram``           loops over SRAM tiles (``Tiling.tile`` extents, ``Tiling.order``); the tiles
                   of the outer loops are dealt to the cores;
``sram``           inside one SRAM tile, the fold loop: the template's fold dims, then the folds
                   of the flattened row group over the array rows and of the column group over
                   the array columns (SCALE-Sim's folds);
``array``          the spatial dims of one fold on ``rows × cols`` PEs;
``register_file``  the in-PE stream loop (``Tiling.rf`` factors for the template's rf_split dims).

Counting rules (elements; bytes = elements × the operand's dtype width; psums at the output dtype):

- DRAM: an operand's tile is fetched again whenever a DRAM loop above its innermost relevant
  loop, that it does not depend on, iterates; a tile that only the loops dealt to the cores
  leave unchanged is fetched once per core.
  Input rows overlap between P tiles by R − stride (halo). An output revisited by an outer
  reduction loop spills partial sums: written every visit, read back on all but the first.
- SRAM: fills from DRAM are writes; each fold reads the operand elements it feeds the array,
  one read per array edge port per element (the im2col view, SCALE-Sim's counts) unless the
  template reuses the sliding window (RS: an ifmap row feeds a whole diagonal); outputs leaving
  the array are writes, each accumulation into an existing partial sum a read.
- array: every PE receives its share of each fed operand once per fold (one transfer per element
  per PE, forwarding or multicast alike); every PE emits its partial sums once per fold.
- register_file: an operand a PE reuses within a fold (fewer elements delivered than MACs) is
  held in the RF: written on delivery, read by every MAC; an RF-held output is read and written
  by every MAC. Operands used once per delivery are consumed from the pipeline registers.

Compute cycles follow SCALE-Sim: per fold ``fold_cycles(R, C) + ceil(T / r)`` with T the MACs
one PE runs in the fold and r the array's MACs per PE per cycle for the op's dtype (r > 1 packs
r streamed MACs into one cycle; SCALE-Sim itself counts words, r = 1), summed over all folds of
all tiles, minus 1 as SCALE-Sim reports. With several cores, the iterations of the outer DRAM
loops (as many as needed to give every core work) are dealt in ceil-waves: compute cycles =
mean cycles per dealt iteration × ceil(iterations / cores). Compute cycles are never below
MACs / (PEs × cores × r).

SRAM need: twice (double buffering) the input region, weights and outputs of one SRAM tile, per
core; the shared SRAM (L2) is not a level of this nest.

Time (the analytic rule): the first tile's load, then per tile the larger of its compute and
its DRAM transfer (computed in aggregate: max(compute, remaining DRAM)), then the last tile's
store, plus one DRAM access latency. DRAM bytes per cycle = dram.bandwidth_bytes_per_s ×
calibration.dram_bandwidth_efficiency / freq_hz; compute cycles are divided by the calibrated
compute efficiency. The per-kernel launch overhead is not included (the simulator adds it).
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from infersim import dtypes
from infersim.arch_models.chip import Chip
from infersim.dataflow.templates import DIMS, OPERANDS, Template
from infersim.errors import InfersimError
from infersim.workloads.ops import Conv2d, Gemm, OpBase, stored_bits

LEVELS: tuple[str, ...] = ("dram", "sram", "array", "register_file")
"""Storage levels, outer to inner."""

TILEABLE: tuple[str, ...] = ("G", "N", "K", "C", "P", "Q")
"""Dims an SRAM tile may cut (filter rows and columns are always whole)."""

AXES: dict[str, tuple[tuple[str, ...], ...]] = {
    "input": (("G",), ("N",), ("C",), ("P", "R"), ("Q", "S")),
    "weight": (("G",), ("K",), ("C",), ("R",), ("S",)),
    "output": (("G",), ("N",), ("K",), ("P",), ("Q",)),
}
"""Each operand's tensor axes; a two-dim axis is a sliding window (rows = P·stride + R)."""

DEPENDS: dict[str, frozenset[str]] = {
    name: frozenset(d for axis in axes for d in axis) for name, axes in AXES.items()
}
"""The dims each operand's index depends on."""


@dataclass(frozen=True, slots=True)
class Problem:
    """An op as the unified nest: dim extents, input size, operand widths and the MAC class.

    ``operand_bytes`` are bytes per element of the nest (a sparse GEMM's reduction dim counts
    the MACs the array performs, so its operands carry the stored bytes of the whole k);
    ``output_write_scale`` multiplies the final output write (a fused epilogue's output ratio
    plus its extra same-size inputs).
    """

    dims: dict[str, int]
    stride: int
    in_h: int
    in_w: int
    padded_h: int
    padded_w: int
    operand_bytes: dict[str, float]
    mac_class: str
    macs: float
    output_write_scale: float = 1.0


def problem_of(op: OpBase) -> Problem:
    """The unified loop nest of a :class:`Gemm` or :class:`Conv2d`.

    A GEMM's reduction dim C is the k positions the array performs (half of k for 2:4 sparse
    B, fewer for unstructured sparsity a sparse kernel skips); A and B keep their bytes (B as
    stored: compressed values and indices, or a weight-only format). Weights in a storage-only
    format stay in it up to the array (dequantization is vector work, costed elsewhere).

    Raises:
        InfersimError: any other operator kind (it does not run on the systolic array), or a
            storage-only compute dtype.
    """
    scale_out = 1.0
    if isinstance(op, Gemm):
        reduction = max(1, round(op.k * op.executed_macs / op.macs))
        per_k = op.k / reduction
        dims = {
            "G": op.batch,
            "N": 1,
            "K": op.n,
            "C": reduction,
            "P": op.m,
            "Q": 1,
            "R": 1,
            "S": 1,
        }
        operand_bytes = {
            "input": dtypes.nbytes(op.a_dtype) * per_k,
            "weight": stored_bits(op.b_dtype, op.sparsity, op.density) / 8 * per_k,
            "output": dtypes.nbytes(op.out_dtype),
        }
        if op.epilogue is not None:
            scale_out = op.epilogue.out_ratio + op.epilogue.extra_inputs
        stride, in_h, in_w, pad = 1, op.m, 1, 0
    elif isinstance(op, Conv2d):
        dims = {
            "G": 1,
            "N": op.batch,
            "K": op.out_channels,
            "C": op.in_channels,
            "P": op.out_h,
            "Q": op.out_w,
            "R": op.kernel_h,
            "S": op.kernel_w,
        }
        if dims["P"] < 1 or dims["Q"] < 1:
            raise InfersimError(f"conv {op.name!r}: filter larger than the padded input")
        operand_bytes = {
            "input": dtypes.nbytes(op.dtype),
            "weight": dtypes.nbytes(op.weight_dtype),
            "output": dtypes.nbytes(op.out_dtype),
        }
        stride, in_h, in_w, pad = op.stride, op.in_h, op.in_w, op.padding
    else:
        raise InfersimError(f"op kind {op.kind!r} has no systolic loop nest (gemm and conv2d do)")
    return Problem(
        dims=dims,
        stride=stride,
        in_h=in_h,
        in_w=in_w,
        padded_h=in_h + 2 * pad,
        padded_w=in_w + 2 * pad,
        operand_bytes=operand_bytes,
        mac_class=dtypes.mac_class(op.compute_dtype),
        macs=float(math.prod(dims.values())),
        output_write_scale=scale_out,
    )


@dataclass(frozen=True)
class Tiling:
    """Tile factors of a mapping: SRAM tile extents, the DRAM loop order and the PE RF factors.

    ``tile`` maps a dim of :data:`TILEABLE` to its SRAM tile extent (absent: the whole dim);
    ``order`` is the DRAM loop order, outer to inner (dims left out go innermost, in
    :data:`TILEABLE` order); ``rf`` maps a template ``rf_split`` dim to its in-PE factor
    (absent: 1). ``Tiling()`` is the whole op as one tile (SCALE-Sim's view).
    """

    tile: dict[str, int] = field(default_factory=dict)
    order: tuple[str, ...] = TILEABLE
    rf: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Access:
    """Bytes read from and written to one level for one operand."""

    reads_bytes: float = 0.0
    writes_bytes: float = 0.0

    @property
    def total_bytes(self) -> float:
        """Reads plus writes."""
        return self.reads_bytes + self.writes_bytes


@dataclass(frozen=True)
class Mapping:
    """An op mapped on a chip by one dataflow: loop nest per level, traffic, cycles, time.

    Traffic is ``traffic[level][operand]`` in bytes for one repetition of the op (levels
    :data:`LEVELS`, operands ``input``, ``weight``, ``output``). Cycles are core clock cycles;
    ``time_s`` = ``total_cycles`` / freq. Utilizations are fractions in [0, 1].
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
        }


# --- footprints ----------------------------------------------------------------------------

Arr = npt.NDArray[np.float64]
"""Every figure is computed on float64 arrays: one element per candidate mapping."""


_AXIS_PAIRS: dict[str, tuple[tuple[str, str | None], ...]] = {
    name: tuple((axis[0], axis[1] if len(axis) == 2 else None) for axis in axes)
    for name, axes in AXES.items()
}
""":data:`AXES` as (dim, window dim or None) pairs."""


def footprint(operand: str, ext: dict[str, Any], stride: int, window: bool) -> Any:
    """Elements of ``operand`` touched when each dim spans ``ext[d]`` indices (absent: 1).

    A window axis spans ``(P − 1)·stride + R`` rows when ``window`` (the ifmap region) and
    ``P·R`` otherwise (the im2col matrix). Works on numbers and on numpy arrays alike.
    """
    total: Any = 1.0
    get = ext.get
    for outer, inner in _AXIS_PAIRS[operand]:
        if inner is None:
            total = total * get(outer, 1)
        else:
            o, i = get(outer, 1), get(inner, 1)
            total = total * ((o - 1) * stride + i if window else o * i)
    return total


def _ceil_div(a: Arr, b: Arr | float) -> Arr:
    return np.ceil(a / b - 1e-9)


def _prod(values: Any) -> Any:
    return functools.reduce(operator.mul, values, 1.0)


class _NumpyMath:
    """The elementwise operations of the fold and tile formulas on float64 arrays."""

    minimum = staticmethod(np.minimum)
    maximum = staticmethod(np.maximum)
    where = staticmethod(np.where)
    floor = staticmethod(np.floor)
    ceil_div = staticmethod(_ceil_div)

    @staticmethod
    def zeros_like(x: Arr) -> Arr:
        return np.zeros_like(x)

    @staticmethod
    def full_like(x: Arr, value: float) -> Arr:
        return np.full_like(x, value)


class _FloatMath:
    """The same operations on plain Python floats (one tiling: no per-call numpy overhead).

    Every operation is the IEEE-754 double operation numpy performs element by element, so a
    figure computed here equals bit for bit the element the array path computes.
    """

    @staticmethod
    def minimum(a: float, b: float) -> float:
        return b if b < a else a

    @staticmethod
    def maximum(a: float, b: float) -> float:
        return b if b > a else a

    @staticmethod
    def where(cond: bool, a: float, b: float) -> float:
        return a if cond else b

    @staticmethod
    def floor(x: float) -> float:
        return float(math.floor(x))

    @staticmethod
    def ceil_div(a: float, b: float) -> float:
        return float(math.ceil(a / b - 1e-9))

    @staticmethod
    def zeros_like(x: float) -> float:
        return 0.0

    @staticmethod
    def full_like(x: float, value: float) -> float:
        return float(value)


_NP = _NumpyMath()
_PY = _FloatMath()


def _split(
    used: Arr, group: tuple[str, ...], part: dict[str, Arr], xp: Any = _NP
) -> dict[str, Arr]:
    """Per-dim extents of ``used`` consecutive positions of a flattened group (last dim fastest)."""
    out: dict[str, Arr] = {}
    rest = used
    for d in reversed(group):
        out[d] = xp.minimum(part[d], rest)
        rest = rest / out[d]
    return out


def _uses(extent: Arr, array_dim: int, xp: Any = _NP) -> list[tuple[Arr, Arr]]:
    """(positions used, number of folds): the full folds and the remainder fold (maybe none)."""
    full = xp.floor(extent / array_dim + 1e-9)
    rem = extent - full * array_dim
    return [
        (xp.full_like(extent, float(array_dim)), full),
        (xp.maximum(rem, 1.0), float(rem > 0.5) if xp is _PY else rem > 0.5),
    ]


# --- the fold level ------------------------------------------------------------------------

_FOLD_KEYS = ("cycles", "folds", "used", "util_num", "util_den")


def _tile_folds(
    prob: Problem,
    tpl: Template,
    ext: dict[str, Arr],
    rf: dict[str, Arr],
    chip: Chip,
    rate: float,
    xp: Any = _NP,
    cycles_only: bool = False,
) -> dict[str, Arr]:
    """Fold-level totals of ONE SRAM tile of extents ``ext`` (cycles, folds, elements); ``xp``
    is :data:`_NP` for arrays of candidates or :data:`_PY` for plain floats. With
    ``cycles_only``, the cycles alone (the same operations as the full call makes for them)."""
    rows, cols = chip.array.rows, chip.array.cols
    _ceil_div = xp.ceil_div
    f = {d: xp.minimum(rf[d], ext[d]) for d in tpl.rf_split}
    pe = {d: f.get(d, ext[d]) for d in tpl.stream}
    spatial = (*tpl.rows, *tpl.cols)
    part = {d: _ceil_div(ext[d], f[d]) if d in f else ext[d] for d in spatial}
    temporal = _prod(
        _ceil_div(ext[d], f[d]) if d in f else ext[d]
        for d in DIMS
        if d not in spatial and (d in f or d not in pe)
    )
    rows_ext = _prod(part[d] for d in tpl.rows)
    cols_ext = _prod(part[d] for d in tpl.cols)
    t_macs = _prod(pe.values())
    t_cycles = _ceil_div(t_macs, rate)
    folds = temporal * _ceil_div(rows_ext, rows) * _ceil_div(cols_ext, cols)
    if cycles_only:
        return {"cycles": folds * (tpl.fold_cycles.overhead_cycles(rows, cols) + t_cycles)}
    used = temporal * rows_ext * cols_ext
    out = {
        "cycles": folds * (tpl.fold_cycles.overhead_cycles(rows, cols) + t_cycles),
        "folds": folds,
        "used": used,
        "util_num": used * t_macs / rate,
        "util_den": folds * rows * cols * (tpl.util_cycles.overhead_cycles(rows, cols) + t_cycles),
    }
    for name in OPERANDS:
        pe_fp = footprint(name, pe, prob.stride, tpl.window_reuse)
        out[f"deliver_{name}"] = used * pe_fp
        out[f"rf_{name}"] = xp.where(pe_fp < t_macs - 1e-9, used * t_macs, 0.0)
        out[f"feed_{name}"] = xp.zeros_like(used)
    row_uses, col_uses = _uses(rows_ext, rows, xp), _uses(cols_ext, cols, xp)
    combos = [(ru, nr, cu, nc) for ru, nr in row_uses for cu, nc in col_uses]
    if xp is _NP:
        size = next(len(v) for v in ext.values() if isinstance(v, np.ndarray) and v.ndim)
        _feed_stacked(prob, tpl, out, combos, part, pe, temporal, size)
        return out
    for ru, nr, cu, nc in combos:
        if not (nr and nc):  # no such fold: it adds 0.0 × a finite footprint (no change)
            continue
        x = {**_split(ru, tpl.rows, part, xp), **_split(cu, tpl.cols, part, xp)}
        fold_ext = {d: x.get(d, 1.0) * pe.get(d, 1.0) for d in DIMS}
        weight = temporal * nr * nc
        for name in OPERANDS:
            fp = footprint(name, fold_ext, prob.stride, tpl.window_reuse)
            out[f"feed_{name}"] = out[f"feed_{name}"] + weight * fp
    return out


def _feed_stacked(
    prob: Problem,
    tpl: Template,
    out: dict[str, Arr],
    combos: list[tuple[Arr, Arr, Arr, Arr]],
    part: dict[str, Arr],
    pe: dict[str, Arr],
    temporal: Any,
    n: int,
) -> None:
    """Add to ``out``'s ``feed_*`` the elements fed by each fold class (full or remainder
    row fold × full or remainder column fold), all classes computed in one stacked pass (the
    same element operations as class by class, summed per candidate in class order); ``n`` is
    the number of candidates (a figure may be one number, the same on all of them)."""
    k = len(combos)

    def rep(a: Any) -> Any:
        return np.concatenate([a] * k) if isinstance(a, np.ndarray) and a.ndim else a

    def column(a: Any) -> Any:
        return a if isinstance(a, np.ndarray) and a.ndim else np.full(n, a)

    part_k = {d: rep(v) for d, v in part.items()}
    pe_k = {d: rep(v) for d, v in pe.items()}
    ru, nr, cu, nc = (np.concatenate([column(c[j]) for c in combos]) for j in range(4))
    x = {**_split(ru, tpl.rows, part_k), **_split(cu, tpl.cols, part_k)}
    fold_ext = {d: x.get(d, 1.0) * pe_k.get(d, 1.0) for d in DIMS}
    weight = rep(temporal) * nr * nc
    for name in OPERANDS:
        fp = footprint(name, fold_ext, prob.stride, tpl.window_reuse)
        weighted = (weight * fp).reshape(k, n)
        acc = out[f"feed_{name}"]
        for j in range(k):
            acc = acc + weighted[j]
        out[f"feed_{name}"] = acc


def _tile_classes(
    prob: Problem, tile: dict[str, Arr], counts: dict[str, Arr] | None = None
) -> list[list[tuple[Arr, Arr | None]]]:
    """Per dim of :data:`DIMS`, its tile classes: (extent, count per candidate) of the full
    tiles and, when some candidate has one, of the remainder tile. ``counts``, when given,
    receives the tiles per dim (as :func:`evaluate_orders` computes them; read-only, the
    whole dims share one array of ones)."""
    # a count of None is 1 on every candidate (the dim is whole in every tile): it is left out
    # of the products (a factor 1.0 changes no product). Every dim is handled in one stacked
    # pass (rows of one array: the same element operations as dim by dim).
    extents = np.array([float(prob.dims[d]) for d in DIMS])[:, None]
    stacked = np.stack([tile[d] for d in DIMS])
    whole = (stacked == extents).all(axis=1).tolist()
    cut = [j for j, w in enumerate(whole) if not w]
    rows: dict[int, tuple[Arr, Arr, Arr, Arr | None]] = {}
    if cut:
        t = stacked[cut]
        n = _ceil_div(np.broadcast_to(extents[cut], t.shape), t)
        rem = extents[cut] - (n - 1) * t
        has_rem: npt.NDArray[np.bool_] = rem < t - 0.5
        full_count: Arr = n - has_rem
        any_rem: Any = has_rem.any(axis=1).tolist()
        for r, j in enumerate(cut):
            rows[j] = (n[r], full_count[r], rem[r], has_rem[r] if any_rem[r] else None)
    classes: list[list[tuple[Arr, Arr | None]]] = []
    ones: Arr | None = None
    for j, d in enumerate(DIMS):
        if whole[j]:
            classes.append([(tile[d], None)])
            if counts is not None:  # ceil(1 - 1e-9) on every candidate (one shared array)
                if ones is None:
                    ones = np.ones_like(tile[d])
                counts[d] = ones
            continue
        n_d, full_d, rem_d, has_d = rows[j]
        if counts is not None:
            counts[d] = n_d
        if has_d is None:
            classes.append([(tile[d], full_d)])
        else:
            classes.append([(tile[d], full_d), (rem_d, has_d.astype(np.float64))])
    return classes


_DENSE_MAX = 16384
"""Elements (classes × candidates) up to which :func:`_all_tiles` analyzes every class on
every candidate (fewer numpy calls); above it, each class on the candidates that have it."""


def _all_tiles(
    prob: Problem,
    tpl: Template,
    tile: dict[str, Arr],
    rf: dict[str, Arr],
    chip: Chip,
    rate: float,
    cycles_only: bool = False,
    counts: dict[str, Arr] | None = None,
) -> dict[str, Arr]:
    """Fold-level totals over every SRAM tile: each class of tile (full or remainder extent per
    cut dim) is analyzed once, on the candidates that have it, and weighted by its count (with
    ``cycles_only``, the cycles alone)."""
    classes = _tile_classes(prob, tile, counts)
    # a dim whole in every tile enters the fold analysis as one float (the same value on every
    # candidate: numpy broadcasts it, element for element the same operations), unless every
    # dim is whole
    whole = {d for d, cl in zip(DIMS, classes, strict=True) if cl[0][1] is None}
    if len(whole) == len(DIMS):
        whole = set()
    # Every class is analyzed on EVERY candidate in ONE stacked call (dense): a candidate
    # without a class has a count of 0.0 there, and its finite totals for it (every extent
    # is >= 1) weigh 0.0, which adds nothing (x + 0.0 == x). The weighted totals are summed
    # per candidate in class order (the same additions, in the same order, as summing over
    # the classes each candidate has).
    combos = list(itertools.product(*classes))
    n = len(tile["G"])
    if len(combos) > 1 and len(combos) * n > _DENSE_MAX:
        return _all_tiles_masked(prob, tpl, tile, rf, chip, rate, cycles_only, classes, whole)
    weights: list[Arr] = []
    for combo in combos:
        count = _prod(c for _, c in combo if c is not None)
        weights.append(np.ones_like(tile["G"]) if isinstance(count, float) else count)
    k = len(combos)
    ext: dict[str, Any] = {}
    for j, d in enumerate(DIMS):
        if d in whole:
            ext[d] = float(prob.dims[d])
        elif k == 1:
            ext[d] = combos[0][j][0]
        else:
            ext[d] = np.concatenate([combo[j][0] for combo in combos])
    rf_k = {d: v if k == 1 else np.concatenate([v] * k) for d, v in rf.items()}
    sums = _tile_folds(prob, tpl, ext, rf_k, chip, rate, _NP, cycles_only)
    if k == 1:
        return {key: weights[0] * value for key, value in sums.items()}
    keys = list(sums)
    stacked = np.empty((len(keys), k * n))
    for j, key in enumerate(keys):
        stacked[j] = sums[key]  # a figure the same on every candidate is broadcast
    weighted = (np.concatenate(weights) * stacked).reshape(len(keys), k, n)
    acc = np.zeros((len(keys), n))
    for j in range(k):
        acc = acc + weighted[:, j]
    return {key: acc[j] for j, key in enumerate(keys)}


def _all_tiles_masked(
    prob: Problem,
    tpl: Template,
    tile: dict[str, Arr],
    rf: dict[str, Arr],
    chip: Chip,
    rate: float,
    cycles_only: bool,
    classes: list[list[tuple[Arr, Arr | None]]],
    whole: set[str],
) -> dict[str, Arr]:
    """:func:`_all_tiles` analyzing each class only on the candidates that have it."""
    # Every class present on some candidate is analyzed in ONE stacked call; the weighted
    # totals are then summed per candidate in class order (the same additions, in the same
    # order, as summing class by class).
    parts: list[tuple[Any, int, int]] = []  # (candidate indices or None for all, start, stop)
    exts: dict[str, list[Arr]] = {d: [] for d in DIMS}
    rfs: dict[str, list[Arr]] = {d: [] for d in rf}
    weights: list[Arr] = []
    start = 0
    for combo in itertools.product(*classes):
        count = _prod(c for _, c in combo if c is not None)
        if isinstance(count, float):  # every dim whole: one tile per candidate
            count = np.ones_like(tile["G"])
            idx = None
        else:
            mask = count > 0.5
            if not mask.any():
                continue
            idx = None if mask.all() else np.flatnonzero(mask)
        for d, (e, _) in zip(DIMS, combo, strict=True):
            if d in whole:
                exts[d] = [float(prob.dims[d])]  # type: ignore[list-item]
            else:
                exts[d].append(e if idx is None else e[idx])
        for d, v in rf.items():
            rfs[d].append(v if idx is None else v[idx])
        weights.append(count if idx is None else count[idx])
        stop = start + len(weights[-1])
        parts.append((idx, start, stop))
        start = stop
    if not parts:
        return {}
    if len(parts) == 1:
        ext = {d: v[0] for d, v in exts.items()}
        sums = _tile_folds(
            prob, tpl, ext, {d: v[0] for d, v in rfs.items()}, chip, rate, _NP, cycles_only
        )
        count = weights[0]
        if parts[0][0] is None:
            return {key: count * value for key, value in sums.items()}
        total: dict[str, Arr] = {}
        for key, value in sums.items():
            acc = np.zeros_like(tile["G"])
            acc[parts[0][0]] = count * value
            total[key] = acc
        return total
    ext = {d: v[0] if d in whole else np.concatenate(v) for d, v in exts.items()}
    sums = _tile_folds(
        prob, tpl, ext, {d: np.concatenate(v) for d, v in rfs.items()}, chip, rate, _NP, cycles_only
    )
    keys = list(sums)
    stacked = np.empty((len(keys), start))
    for j, key in enumerate(keys):
        stacked[j] = sums[key]  # a figure the same on every candidate is broadcast
    weighted = np.concatenate(weights) * stacked
    acc = np.zeros((len(keys), len(tile["G"])))
    for idx, lo, hi in parts:
        if idx is None:
            acc = acc + weighted[:, lo:hi]
        else:
            acc[:, idx] = acc[:, idx] + weighted[:, lo:hi]
    return {key: acc[j] for j, key in enumerate(keys)}


def _rf_need(
    prob: Problem, tpl: Template, tile: dict[str, Arr], rf: dict[str, Arr], xp: Any = _NP
) -> Arr:
    """RF bytes a PE needs beyond one pipeline register per operand (the in-PE working sets)."""
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


def _tile_bytes(prob: Problem, name: str, tile: dict[str, Arr], xp: Any = _NP) -> Arr:
    """Bytes of ``name`` in one full SRAM tile (the ifmap region, capped at the padded input)."""
    if name != "input":
        return footprint(name, tile, prob.stride, window=True) * prob.operand_bytes[name]
    rows = xp.minimum((tile["P"] - 1) * prob.stride + tile["R"], prob.padded_h)
    cols = xp.minimum((tile["Q"] - 1) * prob.stride + tile["S"], prob.padded_w)
    return tile["G"] * tile["N"] * tile["C"] * rows * cols * prob.operand_bytes[name]


# --- per-tile accessors (the event engine walks the tiles one by one) ---------------------------


def tile_compute(
    prob: Problem, template: Template, chip: Chip, ext: dict[str, int], rf: dict[str, int]
) -> tuple[float, float]:
    """(compute cycles, folds) of ONE SRAM tile of extents ``ext`` (every dim of :data:`DIMS`;
    a remainder tile has its smaller extents) with the register-file factors ``rf``: its folds ×
    (fold overhead + streamed cycles), as summed by the analyzer (no SCALE-Sim −1)."""
    rate = float(chip.array.macs_per_pe_per_cycle[prob.mac_class])  # type: ignore[index]
    arr = {d: float(ext[d]) for d in DIMS}
    factors = {d: float(min(rf.get(d, 1), ext[d])) for d in template.rf_split}
    sums = _tile_folds(prob, template, arr, factors, chip, rate, _PY)  # type: ignore[arg-type]
    return float(sums["cycles"]), float(sums["folds"])


def tile_operand_bytes(prob: Problem, name: str, ext: dict[str, int]) -> float:
    """Bytes of operand ``name`` in ONE SRAM tile of extents ``ext`` (every dim of
    :data:`DIMS`): the input region (with its halo, capped at the padded input), the weights, or
    the outputs (at the output dtype, before any epilogue scale)."""
    arr = {d: float(ext[d]) for d in DIMS}
    return float(_tile_bytes(prob, name, arr, _PY))  # type: ignore[arg-type]


def _all_tiles_one(
    prob: Problem,
    tpl: Template,
    tile: dict[str, float],
    rf: dict[str, float],
    chip: Chip,
    rate: float,
) -> dict[str, float]:
    """:func:`_all_tiles` of ONE candidate in plain floats (the same operations, in the same
    order, as the array path performs for that candidate's element)."""
    classes: list[list[tuple[float, float]]] = []
    for d in DIMS:
        extent = float(prob.dims[d])
        t = tile[d]
        n = float(math.ceil(extent / t - 1e-9))
        rem = extent - (n - 1) * t
        has_rem = rem < t - 0.5
        full_count = n - has_rem
        classes.append([(t, full_count), (rem, 1.0)] if has_rem else [(t, full_count)])
    total: dict[str, float] | None = None
    for combo in itertools.product(*classes):
        count = _prod(c for _, c in combo)
        if not count > 0.5:
            continue
        ext = {d: e for d, (e, _) in zip(DIMS, combo, strict=True)}
        sums = _tile_folds(prob, tpl, ext, rf, chip, rate, _PY)  # type: ignore[arg-type]
        if total is None:
            total = {key: count * value for key, value in sums.items()}
        else:
            for key, value in sums.items():
                total[key] = total[key] + count * value
    return total or {}


# --- the DRAM level ------------------------------------------------------------------------


class _OrderStructure(NamedTuple):
    """What :func:`_dram` needs of the loop orders alone (see :func:`_order_structure`)."""

    used: list[str]
    where: npt.NDArray[np.intp]
    row_dim: npt.NDArray[np.intp]
    row_loop: npt.NDArray[np.intp]
    row_order: npt.NDArray[np.intp]
    below: npt.NDArray[np.float64]
    starts: npt.NDArray[np.intp]
    groups: tuple[int, ...]


@functools.lru_cache(maxsize=64)
def _order_structure(orders: tuple[tuple[str, ...], ...]) -> _OrderStructure:
    """What :func:`_dram` needs of the loop orders alone: the dims they use, each loop's dim
    index (loops, orders) and one row per (operand, order, loop whose dim the operand does not
    depend on), loops outer to inner: its dim, loop and order, and the dims below it that the
    operand depends on (rows, dims); ``starts`` the first row of each (operand, order) group,
    ``groups`` the rows per order of each operand."""
    used = [d for d in DIMS if any(d in order for order in orders)]
    where = np.array([[used.index(d) for d in order] for order in orders], dtype=np.intp).T
    row_dim: list[int] = []
    row_loop: list[int] = []
    row_order: list[int] = []
    below: list[list[float]] = []
    starts: list[int] = []
    groups: list[int] = []
    for name in OPERANDS:
        dep = DEPENDS[name]
        groups.append(sum(d not in dep for d in orders[0]))
        for o, order in enumerate(orders):
            if groups[-1]:  # an operand without rows has no groups (its factors are all 1.0)
                starts.append(len(row_dim))
            for j, d in enumerate(order):
                if d in dep:
                    continue
                row_dim.append(used.index(d))
                row_loop.append(j)
                row_order.append(o)
                mask = [0.0] * len(used)
                for inner in order[j + 1 :]:
                    if inner in dep:
                        mask[used.index(inner)] = 1.0
                below.append(mask)
    arrays = (
        np.ascontiguousarray(where),
        np.array(row_dim, dtype=np.intp),
        np.array(row_loop, dtype=np.intp),
        np.array(row_order, dtype=np.intp),
        np.array(below, dtype=np.float64).reshape(len(row_dim), len(used)),
        np.array(starts, dtype=np.intp),
    )
    for arr in arrays:
        arr.flags.writeable = False
    return _OrderStructure(used, *arrays, tuple(groups))


@functools.lru_cache(maxsize=64)
def _dims_of(orders: tuple[tuple[str, ...], ...]) -> list[str]:
    """The dims of :data:`DIMS` that some of ``orders`` loops over."""
    return [d for d in DIMS if any(d in order for order in orders)]


@functools.lru_cache(maxsize=256)
def _reduced_structure(
    orders: tuple[tuple[str, ...], ...], iterates: tuple[bool, ...]
) -> tuple[_OrderStructure, list[int] | None]:
    """:func:`_order_structure` of ``orders`` without the loops that never iterate
    (``iterates``: per dim of :func:`_dims_of`, whether its count exceeds 1 on some
    candidate), and the rows of those dims' counts it uses (None: all)."""
    in_orders = _dims_of(orders)
    varying = {d for d, v in zip(in_orders, iterates, strict=True) if v}
    reduced = tuple(tuple(d for d in order if d in varying) for order in orders)
    if varying and len({len(order) for order in reduced}) == 1:
        orders = reduced
    st = _order_structure(orders)
    if len(st.used) == len(in_orders):
        return st, None
    return st, [in_orders.index(d) for d in st.used]


def _dram(
    prob: Problem, counts: dict[str, Arr], orders: tuple[tuple[str, ...], ...], cores: int
) -> tuple[dict[str, Arr], dict[str, Arr], Arr]:
    """DRAM reads and writes per operand (bytes) and the iterations dealt to the cores, for
    each of ``orders`` (all of one length): arrays of shape (orders, candidates).

    The outer loops are dealt to the cores until every core has work. An operand is fetched
    again whenever a loop it does not depend on iterates above a loop it depends on; an operand
    that only dealt loops leave unchanged is fetched once per core that needs it (partial sums
    of a dealt reduction loop meet in DRAM).
    """
    # a loop whose count is 1 on every candidate changes no product and no "iterates" test:
    # it is left out (x * 1.0 == x exactly, so every figure is unchanged)
    in_orders = _dims_of(orders)
    every = np.stack([counts[d] for d in in_orders])  # (dims, candidates)
    st, rows = _reduced_structure(orders, tuple((every.max(axis=1) > 1.5).tolist()))
    stacked = every if rows is None else every[rows]
    n_loops, n_orders = st.where.shape
    single = cores <= 1  # no loop is ever dealt (every product of counts is >= 1)
    if single:
        iterations = np.ones((n_orders, stacked.shape[1]))
        dealt = None
    else:
        pos = stacked[st.where]  # (loops, orders, candidates)
        # loops are dealt from the outside while the iterations dealt so far leave a core
        # idle: the running product only grows (every count >= 1), so loop j is dealt exactly
        # when the product of the loops above it is below the core count (whole numbers:
        # exact products, and a product too large to be exact is still far above any core
        # count)
        above_product = np.empty_like(pos)
        above_product[0] = 1.0
        for j in range(1, n_loops):
            np.multiply(above_product[j - 1], pos[j - 1], out=above_product[j])
        dealt = above_product < cores
        # products over the loops, outer to inner (the loop axis leads: one multiply a step)
        iterations = np.where(dealt, pos, 1.0).prod(axis=0)
    cores_used = np.minimum(iterations, cores)
    ones = np.ones_like(iterations)
    refetch_all: list[Arr] = [ones] * len(OPERANDS)
    copies_all: list[Arr] = [ones] * len(OPERANDS)
    if len(st.row_dim):
        # per row (operand, order, loop the operand does not depend on): whether a loop below
        # it that the operand depends on iterates; only these loops' factors differ from 1.0,
        # and they are multiplied in loop order, outer to inner (the same products as over
        # every loop with factors 1.0 between them)
        above = (st.below @ (stacked > 1.5).astype(np.float64)) > 0.5
        factor = stacked[st.row_dim]
        refetch = np.where(above, factor, 1.0)
        copies = (
            refetch  # unused on one core
            if dealt is None
            else np.where(~above & dealt[st.row_loop, st.row_order], factor, 1.0)
        )
        k = 0
        for x, g in enumerate(st.groups):
            if g == 1:
                refetch_all[x] = refetch[k : k + n_orders]
                copies_all[x] = copies[k : k + n_orders]
            elif g:  # the group's rows, outer to inner, multiplied in turn
                refetch_all[x] = refetch[k : k + n_orders * g].reshape(n_orders, g, -1).prod(1)
                if dealt is not None:
                    copies_all[x] = copies[k : k + n_orders * g].reshape(n_orders, g, -1).prod(1)
            k += n_orders * g
    reads: dict[str, Arr] = {}
    writes: dict[str, Arr] = {}
    for x, name in enumerate(OPERANDS):
        # on one core every copy count is capped at 1.0 (no loop is dealt): x * 1.0 == x
        refetch_x = (
            refetch_all[x] if single else refetch_all[x] * np.minimum(copies_all[x], cores_used)
        )
        total = _total_footprint(prob, name, counts) * prob.operand_bytes[name]
        if name == "output":
            spill = total * (refetch_x - 1.0)
            reads[name], writes[name] = spill, spill + total * prob.output_write_scale
        else:
            reads[name], writes[name] = total * refetch_x, np.zeros_like(refetch_x)
    return reads, writes, iterations


def _dram_one(
    prob: Problem, counts: dict[str, float], order: tuple[str, ...], cores: int
) -> tuple[dict[str, float], dict[str, float], float]:
    """:func:`_dram` of ONE candidate and ONE order in plain floats (every refetch and copy
    factor is a whole number, so its product is exact in any order)."""
    pos = [counts[d] for d in order]
    iterations = 1.0
    dealt = []
    for p in pos:
        active = iterations < cores
        dealt.append(active)
        if active:
            iterations = iterations * p
    cores_used = iterations if iterations < cores else float(cores)
    reads: dict[str, float] = {}
    writes: dict[str, float] = {}
    for name in OPERANDS:
        dep = DEPENDS[name]
        refetch = copies = 1.0
        above = False  # a loop below this one that the operand depends on iterates
        for j in range(len(order) - 1, -1, -1):
            d = order[j]
            if d not in dep:
                if above:
                    refetch = refetch * pos[j]
                elif dealt[j]:
                    copies = copies * pos[j]
            elif pos[j] > 1.5:
                above = True
        refetch = refetch * (copies if copies < cores_used else cores_used)
        total = _total_footprint(prob, name, counts) * prob.operand_bytes[name]
        if name == "output":
            spill = total * (refetch - 1.0)
            reads[name], writes[name] = spill, spill + total * prob.output_write_scale
        else:
            reads[name], writes[name] = total * refetch, 0.0
    return reads, writes, iterations


def _total_footprint(prob: Problem, name: str, counts: dict[str, Any]) -> Any:
    """Elements of ``name`` summed over all distinct tiles (whole tensor plus input halos);
    ``counts`` are arrays over candidates or plain floats for one tiling."""
    total: Any = 1.0
    dims = prob.dims
    for axis in AXES[name]:
        if axis == ("P", "R"):
            total = total * (prob.in_h + (counts["P"] - 1) * max(dims["R"] - prob.stride, 0))
        elif axis == ("Q", "S"):
            total = total * (prob.in_w + (counts["Q"] - 1) * max(dims["S"] - prob.stride, 0))
        else:
            total = total * dims[axis[0]]
    return total


# --- both levels, vectorized over candidates -------------------------------------------------


def evaluate(
    prob: Problem,
    tpl: Template,
    chip: Chip,
    tile: dict[str, Arr],
    order: tuple[str, ...],
    rf: dict[str, Arr],
    folds: dict[str, Arr] | None = None,
) -> dict[str, Any]:
    """Every figure of :class:`Mapping` for a batch of candidate tilings (arrays, one element
    per candidate; ``tile`` holds all of :data:`DIMS`, ``rf`` all of the template's rf_split).
    ``folds`` reuses the fold-level totals of an earlier call with the same tiles (they do not
    depend on the loop order). Traffic is ``traffic[level][operand] = (reads, writes)`` bytes.
    """
    fig = evaluate_orders(prob, tpl, chip, tile, (order,), rf, folds)
    return _pick(fig, 0, slice(None))


def _pick(x: Any, o: int, i: Any) -> Any:
    """Element ``i`` of every figure of :func:`evaluate_orders` for its ``o``-th order."""
    if isinstance(x, dict):
        return {k: _pick(v, o, i) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(_pick(v, o, i) for v in x)
    if isinstance(x, np.ndarray):
        return x[o, i] if x.ndim == 2 else x[i]
    return x


def evaluate_orders(
    prob: Problem,
    tpl: Template,
    chip: Chip,
    tile: dict[str, Arr],
    orders: tuple[tuple[str, ...], ...],
    rf: dict[str, Arr],
    folds: dict[str, Arr] | None = None,
) -> dict[str, Any]:
    """:func:`evaluate` for several DRAM loop orders (all of one length) at once: the figures
    that depend on the order are arrays of shape (orders, candidates), the others of shape
    (candidates,) (each element computed exactly as :func:`evaluate` computes it)."""
    rate = float(chip.array.macs_per_pe_per_cycle[prob.mac_class])  # type: ignore[index]
    sums = folds if folds is not None else _all_tiles(prob, tpl, tile, rf, chip, rate)
    counts = {d: _ceil_div(np.full_like(tile[d], float(prob.dims[d])), tile[d]) for d in DIMS}
    dram = _dram(prob, counts, orders, chip.cores)
    return _figures(prob, tpl, chip, tile, rf, rate, sums, counts, dram, _NP)


def total_cycles_orders(
    prob: Problem,
    tpl: Template,
    chip: Chip,
    tile: dict[str, Arr],
    orders: tuple[tuple[str, ...], ...],
    rf: dict[str, Arr],
) -> Arr:
    """The ``total_cycles`` figure of :func:`evaluate_orders` alone, shape (orders, candidates):
    the same operations, in the same order, as the full call makes for it."""
    rate = float(chip.array.macs_per_pe_per_cycle[prob.mac_class])  # type: ignore[index]
    counts: dict[str, Arr] = {}
    sums = _all_tiles(prob, tpl, tile, rf, chip, rate, cycles_only=True, counts=counts)
    dram_rd, dram_wr, iterations = _dram(prob, counts, orders, chip.cores)
    rows, cols, cores = chip.array.rows, chip.array.cols, chip.cores
    bound_cycles = math.ceil(prob.macs / (rows * cols * cores * rate) - 1e-9)
    tile_bytes = {name: _tile_bytes(prob, name, tile) for name in OPERANDS}
    dram_bytes = sum(dram_rd[name] + dram_wr[name] for name in OPERANDS)
    per_cycle = (
        chip.dram.bandwidth_bytes_per_s * chip.calibration.dram_bandwidth_efficiency / chip.freq_hz
    )
    if cores <= 1:
        # one core: iterations, waves and cores used are all 1.0, and x / 1.0 * 1.0 and
        # 1.0 * x are x exactly (the figures below, per candidate, broadcast over the orders)
        compute_cycles = np.maximum(_ceil_div(sums["cycles"], 1.0) - 1, float(bound_cycles))
        first = (tile_bytes["input"] + tile_bytes["weight"]) / per_cycle
        last = tile_bytes["output"] / per_cycle
    else:
        waves = _ceil_div(iterations, cores)
        compute_cycles = np.maximum(
            _ceil_div(sums["cycles"] / iterations * waves, 1.0) - 1, float(bound_cycles)
        )
        cores_used = np.minimum(iterations, float(cores))
        first = cores_used * (tile_bytes["input"] + tile_bytes["weight"]) / per_cycle
        last = cores_used * tile_bytes["output"] / per_cycle
    dram_cycles = dram_bytes / per_cycle
    busy = compute_cycles / chip.calibration.compute(prob.mac_class)
    rest = np.maximum(dram_cycles - first - last, 0.0)
    return first + np.maximum(busy, rest) + last + chip.dram.latency_s * chip.freq_hz  # type: ignore[no-any-return]


def _evaluate_one(
    prob: Problem,
    tpl: Template,
    chip: Chip,
    tile: dict[str, float],
    order: tuple[str, ...],
    rf: dict[str, float],
) -> dict[str, Any]:
    """:func:`evaluate` of ONE tiling in plain Python floats: every figure a float (or bool),
    equal bit for bit to the element the array path computes (the same IEEE operations in the
    same order, without numpy's per-call overhead)."""
    rate = float(chip.array.macs_per_pe_per_cycle[prob.mac_class])  # type: ignore[index]
    sums = _all_tiles_one(prob, tpl, tile, rf, chip, rate)
    counts = {d: float(math.ceil(float(prob.dims[d]) / tile[d] - 1e-9)) for d in DIMS}
    dram = _dram_one(prob, counts, order, chip.cores)
    return _figures(prob, tpl, chip, tile, rf, rate, sums, counts, dram, _PY)  # type: ignore[arg-type]


def _figures(
    prob: Problem,
    tpl: Template,
    chip: Chip,
    tile: dict[str, Arr],
    rf: dict[str, Arr],
    rate: float,
    sums: dict[str, Arr],
    counts: dict[str, Arr],
    dram: tuple[dict[str, Arr], dict[str, Arr], Arr],
    xp: Any,
) -> dict[str, Any]:
    """The figures of :func:`evaluate_orders` from the fold totals ``sums``, the DRAM loop
    counts and the DRAM traffic (arrays with ``xp`` = :data:`_NP`, floats with :data:`_PY`)."""
    rows, cols, cores = chip.array.rows, chip.array.cols, chip.cores
    _ceil_div = xp.ceil_div
    dram_rd, dram_wr, iterations = dram
    ob = prob.operand_bytes
    out_elems = footprint("output", prob.dims, prob.stride, window=False)
    traffic: dict[str, dict[str, tuple[Arr, Arr]]] = {level: {} for level in LEVELS}
    zero = xp.zeros_like(tile["G"])
    for name in OPERANDS:
        b = ob[name]
        traffic["dram"][name] = (dram_rd[name], dram_wr[name])
        feed, deliver, rf_slots = sums[f"feed_{name}"], sums[f"deliver_{name}"], sums[f"rf_{name}"]
        if name == "output":
            traffic["sram"][name] = (
                (feed - out_elems) * b + dram_wr[name],
                feed * b + dram_rd[name],
            )
            traffic["array"][name] = (zero, deliver * b)
            traffic["register_file"][name] = (rf_slots * b, rf_slots * b)
        else:
            traffic["sram"][name] = (feed * b, dram_rd[name])
            traffic["array"][name] = (deliver * b, zero)
            traffic["register_file"][name] = (
                rf_slots * b,
                xp.where(rf_slots > 0, deliver * b, 0.0),
            )

    waves = _ceil_div(iterations, cores)
    bound_cycles = math.ceil(prob.macs / (rows * cols * cores * rate) - 1e-9)
    compute_cycles = xp.maximum(
        _ceil_div(sums["cycles"] / iterations * waves, 1.0) - 1, float(bound_cycles)
    )
    tile_bytes = {name: _tile_bytes(prob, name, tile, xp) for name in OPERANDS}
    dram_bytes = sum(r + w for r, w in traffic["dram"].values())
    per_cycle = (
        chip.dram.bandwidth_bytes_per_s * chip.calibration.dram_bandwidth_efficiency / chip.freq_hz
    )
    cores_used = xp.minimum(iterations, float(cores))
    first = cores_used * (tile_bytes["input"] + tile_bytes["weight"]) / per_cycle
    last = cores_used * tile_bytes["output"] / per_cycle
    dram_cycles = dram_bytes / per_cycle
    busy = compute_cycles / chip.calibration.compute(prob.mac_class)
    rest = xp.maximum(dram_cycles - first - last, 0.0)
    total_cycles = first + xp.maximum(busy, rest) + last + chip.dram.latency_s * chip.freq_hz
    return {
        "traffic": traffic,
        "iterations": iterations,
        "waves": waves,
        "cores_used": cores_used,
        "tiles": _prod(counts.values()),
        "folds": sums["folds"],
        "compute_cycles": compute_cycles,
        "mapping_efficiency": sums["used"] / (sums["folds"] * rows * cols),
        "compute_utilization": sums["util_num"] / sums["util_den"],
        "overall_utilization": prob.macs / (total_cycles * rows * cols * cores * rate),
        "sram_bytes": 2.0 * sum(tile_bytes.values()),
        "rf_bytes": _rf_need(prob, tpl, tile, rf, xp),
        "dram_bytes": dram_bytes,
        "dram_cycles": dram_cycles,
        "first_load_cycles": first,
        "last_store_cycles": last,
        "total_cycles": total_cycles,
        "compute_bound": busy >= rest,
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


def analyze(op: OpBase, chip: Chip, template: Template, tiling: Tiling | None = None) -> Mapping:
    """Map one repetition of ``op`` on ``chip`` with ``template`` and ``tiling`` (default: the
    whole op as one SRAM tile, as SCALE-Sim streams it) and count traffic, cycles and time.

    The result is reported even when the tile does not fit (see :attr:`Mapping.fits`).

    Raises:
        UnsupportedDtypeError: the array cannot compute the op's dtype.
        InfersimError: an op kind without a loop nest, or a malformed tiling.
    """
    tiling = tiling or Tiling()
    prob = problem_of(op)
    chip.macs_per_cycle(prob.mac_class)  # raises UnsupportedDtypeError
    _check_tiling(template, tiling)
    dims = prob.dims
    tile = {d: min(tiling.tile.get(d, dims[d]), dims[d]) for d in DIMS}
    order = (*tiling.order, *(d for d in TILEABLE if d not in tiling.order))
    return build_mapping(prob, template, chip, tile, order, tiling.rf)


def build_mapping(
    prob: Problem,
    template: Template,
    chip: Chip,
    tile: dict[str, int],
    order: tuple[str, ...],
    rf: dict[str, int],
) -> Mapping:
    """The :class:`Mapping` of one tiling (``tile`` has every dim, ``order`` every tileable dim)."""
    rf_full = {d: min(rf.get(d, 1), tile[d]) for d in template.rf_split}
    fig = _evaluate_one(
        prob,
        template,
        chip,
        {d: float(v) for d, v in tile.items()},
        order,
        {d: float(v) for d, v in rf_full.items()},
    )
    return mapping_of(prob, template, chip, tile, order, rf_full, fig, 0, 0)


def mapping_of(
    prob: Problem,
    template: Template,
    chip: Chip,
    tile: dict[str, int],
    order: tuple[str, ...],
    rf_full: dict[str, int],
    fig: dict[str, Any],
    o: int,
    i: int,
) -> Mapping:
    """The :class:`Mapping` of candidate ``i`` with the ``o``-th order of the figures ``fig`` of
    :func:`evaluate_orders` (``tile`` and ``rf_full``, its factors capped at the tile, as ints),
    or of the plain-float figures of :func:`_evaluate_one` (``o`` and ``i`` then unused)."""

    def one_of(x: Any) -> float:
        if not isinstance(x, np.ndarray):
            return float(x)
        return float(x[o, i] if x.ndim == 2 else x[i])

    # the plain-float figures of _evaluate_one hold no arrays: float() alone picks each
    one: Any = one_of if isinstance(fig["total_cycles"], np.ndarray) else float

    traffic = {
        level: {name: Access(one(r), one(w)) for name, (r, w) in ops.items()}
        for level, ops in fig["traffic"].items()
    }
    counts = {d: -(-prob.dims[d] // tile[d]) for d in DIMS}
    part = {
        d: -(-tile[d] // rf_full[d]) if d in rf_full else tile[d]
        for d in (*template.rows, *template.cols)
    }
    spatial = (*template.rows, *template.cols)
    fold_loops = {
        d: (-(-tile[d] // rf_full[d]) if d in rf_full else tile[d])
        for d in DIMS
        if d not in spatial and (d in rf_full or d not in template.stream)
    }
    total_cycles = one(fig["total_cycles"])
    return Mapping(
        dataflow=template.name,
        template=template,
        tiling=Tiling(tile={d: tile[d] for d in TILEABLE}, order=order, rf=rf_full),
        dims=dict(prob.dims),
        mac_class=prob.mac_class,
        macs=prob.macs,
        dram_loops=tuple((d, counts[d]) for d in order if counts[d] > 1),
        sram_tile=dict(tile),
        fold_loops=fold_loops,
        spatial_rows=template.rows,
        spatial_cols=template.cols,
        rows_extent=math.prod(part[d] for d in template.rows),
        cols_extent=math.prod(part[d] for d in template.cols),
        pe_loops=tuple((d, rf_full.get(d, tile[d])) for d in template.stream),
        tiles=round(one(fig["tiles"])),
        cores_used=round(one(fig["cores_used"])),
        waves=round(one(fig["waves"])),
        folds=round(one(fig["folds"])),
        compute_cycles=round(one(fig["compute_cycles"])),
        mapping_efficiency=one(fig["mapping_efficiency"]),
        compute_utilization=one(fig["compute_utilization"]),
        overall_utilization=one(fig["overall_utilization"]),
        traffic=traffic,
        sram_bytes=one(fig["sram_bytes"]),
        sram_capacity_bytes=float(chip.sram.capacity_bytes),
        rf_bytes=one(fig["rf_bytes"]),
        rf_capacity_bytes=float(chip.register_file.bytes_per_pe),
        dram_bytes=one(fig["dram_bytes"]),
        dram_cycles=one(fig["dram_cycles"]),
        first_load_cycles=one(fig["first_load_cycles"]),
        last_store_cycles=one(fig["last_store_cycles"]),
        total_cycles=total_cycles,
        time_s=total_cycles / chip.freq_hz,
        bound="compute" if one(fig["compute_bound"]) else "memory",
    )
