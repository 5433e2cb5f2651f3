"""The mapper: the tiling of an op that minimizes latency, energy or their product.

For one template the search finds the exhaustive optimum over a small candidate grid, priced
exactly by the analyzer (vectorized over all candidates at once, see
:func:`loopnest.evaluate_orders`):

- SRAM tile extents per dim: the whole dim, its repeated halvings, and multiples of the array
  side the dim is laid on (filter rows and columns, and output columns, are never cut);
- DRAM loop orders: groups first, then the six orders of the three reuse classes (the filter loop,
  which the input does not depend on; the channel loop, which the output does not depend on; the
  image/row loops, which the weight does not depend on);
- for templates with ``rf_split`` dims (RS), the register-file factors whose working set fits the
  PE register file (the Pareto-largest ones).

A candidate qualifies when its double-buffered SRAM tile fits one core's SRAM and its PE working
set fits the register file. ``dataflow="best"`` searches every template the chip's array
implements (``array.supported_dataflows``; all of them on a generic array) that can map the op and
keeps the cheapest. Results are memoized in a bounded LRU cache keyed by (op signature, chip key,
dataflow, objective, top_k).

The latency search, the one every engine runs, is bounded: each candidate gets a lower bound on
its time in any loop order (exact first load and last store, compute over the cores it can use,
compulsory DRAM bytes), the few best-bounded candidates are priced first, and only candidates
whose bound does not exceed their best time are priced at all: the exhaustive search's answer
(ties included) for a few per cent of its work. :func:`map_traffic` is the search of the tiling
that moves the fewest DRAM bytes (the shared-SRAM level of the analytic engine).

On the cores view of a chip with a shared SRAM, a search given the op's DRAM level (a
:class:`~infersim.dataflow.loopnest.waves.Backing`) times every candidate as the engines time
the chip: the cores' waves against the shared SRAM with the op's DRAM traffic behind it. The
bound and the exact times are then the two-level ones; what the search prepares is the same.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import itertools
import json
import math
import struct
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Generic, Literal, NamedTuple, TypeVar, overload

import numpy as np
import numpy.typing as npt

from infersim.arch_models.chip import Chip
from infersim.dataflow.energy import energy, mac_energy_pj, traffic_pj
from infersim.dataflow.loopnest import (
    DIMS,
    NP,
    PY,
    TILEABLE,
    Access,
    Arr,
    Mapping,
    MathNamespace,
    Problem,
    Tiling,
    build_mapping,
    evaluate_orders,
    made,
    picked_mapping,
    problem_of,
    rf_need,
)
from infersim.dataflow.loopnest.dram import dram_traffic
from infersim.dataflow.loopnest.figures import (
    LOWER_BOUND_MARGIN,
    PickedRows,
    Prepared,
    Timed,
    compulsory_bytes,
    dequantizes,
    figure_at,
    lower_bound_cycles,
    multicast_of,
    one_of,
    partials_capacity_bytes,
    picked_row,
    picked_rows,
    prepare,
    timed_at,
)
from infersim.dataflow.loopnest.folds import clear_tile_folds
from infersim.dataflow.loopnest.numerics import NumpyMath, filled, prod_skipping_ones
from infersim.dataflow.loopnest.problem import (
    clear_problems,
    stack_key,
    stacked,
    tile_factors,
    total_footprint,
)
from infersim.dataflow.loopnest.waves import Backing, stacked_backing
from infersim.dataflow.templates import (
    ACCUMULATOR_BYTES,
    ACCUMULATOR_SHARE,
    OPERANDS,
    TEMPLATES,
    Template,
)
from infersim.errors import InfersimError
from infersim.workloads.ops import OpBase

Objective = Literal["latency", "energy", "edp"]
OBJECTIVES: tuple[str, ...] = ("latency", "energy", "edp")
DATAFLOWS: tuple[str, ...] = (*TEMPLATES, "best")

_REUSE_CLASSES: tuple[tuple[str, ...], ...] = (("K",), ("C",), ("N", "P", "Q"))
ORDERS: tuple[tuple[str, ...], ...] = tuple(
    ("G", *itertools.chain.from_iterable(p)) for p in itertools.permutations(_REUSE_CLASSES)
)
"""The DRAM loop orders the mapper tries (outer to inner)."""

_RF_FACTORS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
_RF_OPTIONS_MAX = 16
_CUT = ("G", "N", "K", "C", "P")  # dims the mapper cuts (Q, R, S stay whole)


V = TypeVar("V")


class _LRU(Generic[V]):
    """A bounded least-recently-used cache."""

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize(={maxsize}) must be >= 1")
        self.maxsize = maxsize
        self._data: OrderedDict[tuple[Any, ...], V] = OrderedDict()

    def get(self, key: tuple[Any, ...]) -> V | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: tuple[Any, ...], value: V) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.maxsize:
            self._data.popitem(last=False)

    def clear(self) -> None:
        self._data.clear()

    def __contains__(self, key: tuple[Any, ...]) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)


_CACHE: _LRU[tuple[Mapping, ...]] = _LRU(maxsize=4096)
"""Finished mappings by (op, whole chip, template, objective, top_k): the warm path."""

_SEARCHES: OrderedDict[tuple[Any, ...], tuple[Any, int]] = OrderedDict()
_SEARCHES_MAX_BYTES = 256 * 1024 * 1024
_SEARCHES_BYTES = [0]
"""What a search found that does not depend on the DRAM bandwidth, the clock, the DRAM latency
or the calibration, by (op, :func:`geometry_key`, template, objective, top_k): for latency the
fitting candidates with their :func:`~infersim.dataflow.loopnest.figures.prepare` figures (a chip
that differs only in those fields re-times them instead of searching again), for energy the
chosen tilings (energy depends on traffic, not on time), for :func:`map_traffic` its tiling.
Each entry is kept with the bytes of its arrays; the least recently used go beyond
:data:`_SEARCHES_MAX_BYTES` in all."""

STATS = {"searches": 0, "reused": 0}
"""Searches made and searches reused from :data:`_SEARCHES` since :func:`clear_cache`."""


def clear_cache() -> None:
    """Forget every memoized mapping, search and problem (and reset :data:`STATS`)."""
    _CACHE.clear()
    clear_problems()
    clear_tile_folds()
    _TRAFFIC.clear()
    _GRIDS.clear()
    _SEARCHES.clear()
    _SEARCHES_BYTES[0] = 0
    STATS.update(searches=0, reused=0)


_GEOMETRY: dict[str, str] = {}
_GEOMETRY_MAX = 4096


def geometry_key(chip: Chip) -> str:
    """A hash of the fields a tiling search depends on: the array (geometry, MAC rates, 2:4),
    the register file, the per-core SRAM and the number of cores. DRAM bandwidth, latency and
    capacity, the clock, energies and calibration change only the timing of a tiling."""
    found = _GEOMETRY.get(chip.key)
    if found is None:
        fields = chip.model_dump(mode="json", include={"array", "register_file", "sram", "cores"})
        found = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]
        if len(_GEOMETRY) >= _GEOMETRY_MAX:
            _GEOMETRY.clear()
        _GEOMETRY[chip.key] = found
    return found


def _nbytes(value: Any) -> int:
    """Bytes of the numpy arrays in ``value`` (nested in tuples, lists and dicts)."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes) if value.base is None else 0  # a view owns nothing
    if isinstance(value, tuple | list):
        return sum(_nbytes(v) for v in value)
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    return 0


class _Deferred:
    """An entry of :data:`_SEARCHES` made only when it is read (:func:`_search_defer`), with
    what a batched pass re-times it from while it is not (``batched``: see
    :func:`search_many`; None: nothing)."""

    def __init__(self, make: Callable[[], Any], batched: _Batched | None = None) -> None:
        self.make = make
        self.batched = batched


def _search_cache(key: tuple[Any, ...], make: Any) -> Any:
    entry = _SEARCHES.get(key)
    if entry is not None:
        STATS["reused"] += 1
        _SEARCHES.move_to_end(key)
        if not isinstance(entry[0], _Deferred):
            return entry[0]
        make = entry[0].make  # made now, kept in its place (most recent)
        del _SEARCHES[key]
    else:
        STATS["searches"] += 1
    found = make()
    _keep(key, found)
    return found


def _search_defer(
    key: tuple[Any, ...], make: Callable[[], Any], batched: _Batched | None = None
) -> None:
    """Count a search made for ``key`` whose entry ``make()`` gives when first read (a batched
    pass keeps what each op's own search would have found, not knowing whether it will be
    read: a chip that differs in the DRAM bandwidth reads it), and, while it is not read, is
    re-timed from ``batched``."""
    if key not in _SEARCHES:
        STATS["searches"] += 1
        _SEARCHES[key] = (_Deferred(make, batched), 0)


def _keep(key: tuple[Any, ...], found: Any) -> None:
    """Keep ``found`` in :data:`_SEARCHES` with the bytes of its arrays, dropping the least
    recently used entries beyond :data:`_SEARCHES_MAX_BYTES`."""
    size = _nbytes(found)
    _SEARCHES[key] = (found, size)
    _SEARCHES_BYTES[0] += size
    while _SEARCHES_BYTES[0] > _SEARCHES_MAX_BYTES and len(_SEARCHES) > 1:
        _, (_, dropped) = _SEARCHES.popitem(last=False)
        _SEARCHES_BYTES[0] -= dropped


GENERIC_DATAFLOWS: tuple[str, ...] = ("ws", "os", "is", "rs")
"""What ``dataflow="best"`` searches on a generic array (``array.supported_dataflows`` None):
the four that products build. No-local-reuse is the Eyeriss paper's comparison baseline: mapped
when asked for by name, searched only on an array that lists it."""


def dataflows_of(chip: Chip) -> list[str]:
    """The templates ``chip``'s array implements, in :data:`TEMPLATES` order (on a generic
    array, :data:`GENERIC_DATAFLOWS`): what ``dataflow="best"`` searches."""
    if chip.array.supported_dataflows is None:
        return [name for name in TEMPLATES if name in GENERIC_DATAFLOWS]
    return [name for name in TEMPLATES if chip.array.implements(name)]


def mapping_cost(mapping: Mapping, chip: Chip, objective: Objective) -> float:
    """The objective of ``mapping``: latency in seconds, energy in pJ, or EDP in pJ·s."""
    if objective == "latency":
        return mapping.time_s
    pj = energy(mapping, chip).total_pj
    return pj if objective == "energy" else pj * mapping.time_s


@functools.lru_cache(maxsize=4096)
def _ladder(extent: int, aligns: tuple[int, ...]) -> tuple[int, ...]:
    """Tile extents tried for a dim: whole, halvings, and array-side multiples (descending;
    memoized: a pure function of two small figures that every op with the extent asks)."""
    values = {extent}
    v = extent
    while v > 1:
        v = -(-v // 2)
        values.add(v)
    for a in aligns:
        m = a
        while m < extent:
            values.add(m)
            m *= 2
    return tuple(sorted(values, reverse=True))


def _uncovered(fits: Any, step: int, axes: int | None = None) -> tuple[npt.NDArray[np.intp], ...]:
    """The indices (one array per axis, in C order, as ``np.nonzero`` gives them) of the
    entries of the boolean grid ``fits`` (closed downward: a fitting entry's smaller
    neighbours fit too) that no other fitting entry covers in every axis: those whose one step
    up (index + ``step``) along each of the first ``axes`` axes (default: all) does not fit."""
    kept = fits.copy()  # C order, one byte per entry
    free = ~kept
    flat_kept, flat_free = kept.reshape(-1), free.reshape(-1)
    for j in range(fits.ndim if axes is None else axes):
        # One step along axis j is one of ``inner`` entries of the flat grid; from the first
        # entry of axis j (step -1) or its last (+1) it goes to another line of the grid,
        # so those entries keep what they had.
        inner, n = kept.strides[j], fits.shape[j]
        edge = None
        if j > 0 and kept.size:
            edge = kept.reshape(-1, n, inner)[:, 0 if step < 0 else -1]
            before = edge.copy()
        if step < 0:
            flat_kept[inner:] &= flat_free[:-inner]
        else:
            flat_kept[:-inner] &= flat_free[inner:]
        if edge is not None:
            edge[...] = before
    return kept.nonzero()


def _rf_options(prob: Problem, tpl: Template, chip: Chip) -> list[dict[str, int]]:
    """Register-file factor choices whose PE working set fits (Pareto-largest, at most 16)."""
    if not tpl.rf_split:
        return [{}]
    axes = [[v for v in _RF_FACTORS if v <= prob.dims[d]] for d in tpl.rf_split]
    grid = np.array(list(itertools.product(*axes)), dtype=np.float64)
    tile = {d: np.full(len(grid), float(prob.dims[d])) for d in DIMS}
    rf = {d: grid[:, i] for i, d in enumerate(tpl.rf_split)}
    ok = rf_need(prob, tpl, tile, rf, NP) <= chip.register_file.bytes_per_pe + 1e-9
    if not np.count_nonzero(ok):
        return []
    # The RF need grows with every factor, so the fitting factors are closed downward: one is
    # dominated by another that fits exactly when one step up some axis still fits.
    shape = [len(a) for a in axes]
    best = grid[np.ravel_multi_index(_uncovered(ok.reshape(shape), step=1), shape)]
    best = best[np.argsort(-np.prod(best, axis=1), kind="stable")][:_RF_OPTIONS_MAX]
    return [{d: int(v) for d, v in zip(tpl.rf_split, row, strict=True)} for row in best]


def _candidates(prob: Problem, tpl: Template, chip: Chip) -> tuple[dict[str, Arr], dict[str, Arr]]:
    """The fitting candidates: tile extents for every dim and RF factors, as parallel arrays."""
    rf_opts = _rf_options(prob, tpl, chip)
    if not rf_opts:
        return {}, {}
    return _grid(prob, tpl, chip, _aligns_of(tpl, chip.array.rows, chip.array.cols), rf_opts)


@functools.lru_cache(maxsize=256)
def _aligns_of(tpl: Template, rows: int, cols: int) -> dict[str, tuple[int, ...]]:
    """Per cut dim, the array side its ladder aligns to under ``tpl`` on a ``rows`` x
    ``cols`` array: a dim the template lays alone along the rows or the columns (memoized,
    read-only)."""
    return {d: (rows,) if tpl.rows == (d,) else (cols,) if tpl.cols == (d,) else ()
            for d in _CUT}  # fmt: skip


def _axis(
    prob: Problem, tpl: Template | None, dim: str, aligns: tuple[int, ...]
) -> tuple[int, ...]:
    """The SRAM-tile extents tried for ``dim``: the template's own (capped at the dim,
    descending) or the ladder."""
    return _axes(prob, tpl, {dim: aligns}, (dim,))[0]


def _axes(
    prob: Problem, tpl: Template | None, aligns: dict[str, tuple[int, ...]],
    dims: tuple[str, ...] = _CUT,
) -> list[tuple[int, ...]]:
    """:func:`_axis` of each of ``dims`` (the template's lists looked up once)."""
    listed = {} if tpl is None else _listed(tpl)
    extents = prob.dims
    return [_capped(listed[d], extents[d]) if d in listed else _ladder(extents[d], aligns[d])
            for d in dims]  # fmt: skip


@functools.cache
def _listed(tpl: Template) -> dict[str, tuple[int, ...]]:
    """The SRAM-tile extents ``tpl`` lists per dim (a dim listed twice: its last)."""
    return dict(tpl.extents)


@functools.lru_cache(maxsize=4096)
def _capped(listed: tuple[int, ...], extent: int) -> tuple[int, ...]:
    """The extents ``listed`` capped at ``extent``, each once, descending (memoized)."""
    return tuple(sorted({min(v, extent) for v in listed}, reverse=True))


def sram_need(prob: Problem, tpl: Template | None, tile: dict[str, Any]) -> Any:
    """Bytes of one core's SRAM a tiling needs: :func:`buffer_bytes`, double-buffered."""
    return 2.0 * buffer_bytes(prob, tpl, tile, NP)


def buffer_bytes(
    prob: Problem, tpl: Template | None, tile: dict[str, Any], xp: MathNamespace
) -> Any:
    """Bytes of the tiles one SRAM buffer holds: every operand's tile, or with an
    ``output_in_registers`` template the input and weight tiles alone (:func:`tile_bytes`'s
    operations, bit for bit, less the products by a dim kept as the float 1.0)."""
    names = ("input", "weight") if tpl is not None and tpl.output_in_registers else OPERANDS
    total: Any = None
    for name in names:
        part = prod_skipping_ones(tile_factors(prob, name, tile, xp))
        total = part if total is None else total + part
    return total


def register_fit(prob: Problem, tpl: Template | None, tile: dict[str, Any], chip: Chip) -> Any:
    """Whether a tiling meets the template's own rules: at least ``min_tile_rows`` rows, and
    an ``output_in_registers`` template's accumulators fitting the register file (the Python
    ``True`` where the template has neither rule)."""
    if tpl is None:
        return True
    ok: Any = True
    if tpl.min_tile_rows > 1:  # the row group's tile: at least min_tile_rows, or all of it
        rows = prod_skipping_ones(tile[d] for d in tpl.rows)
        whole = math.prod(prob.dims[d] for d in tpl.rows)
        ok = rows >= min(tpl.min_tile_rows, whole)
    if not tpl.output_in_registers:
        return ok
    out = prod_skipping_ones(tile[d] for d in ("G", "N", "K", "P", "Q"))
    budget = ACCUMULATOR_SHARE * chip.register_file.bytes_per_pe * chip.array.pes
    return ok & (out <= budget / ACCUMULATOR_BYTES)  # out · 4 B <= budget, exactly


class _GridMath(NumpyMath):
    """:data:`NP` for a candidate grid whose dims of one value stay floats: the minimum of two
    numbers is a float too (no numpy scalar, the same value)."""

    @staticmethod
    def minimum(a: Any, b: Any, /) -> Any:  # type: ignore[override]  # np.minimum's two operands
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            return np.minimum(a, b)
        return float(b if b < a else a)


_GRID_MATH: MathNamespace = _GridMath()


_GRIDS: _LRU[tuple[dict[str, Arr], dict[str, Arr]]] = _LRU(maxsize=4096)
"""Fitting candidate grids by everything :func:`_grid` reads (see :func:`_grid_key`)."""


def _grid_key(
    prob: Problem, tpl: Template | None, chip: Chip, axes: list[tuple[int, ...]],
    rf_opts: list[dict[str, int]], maximal: bool,
) -> tuple[Any, ...]:
    """What the fitting candidates of :func:`_grid` depend on: the ladders, the RF choices, the
    capacities, and of the op only the operand widths, the dims never cut, the input's padded
    rows where some tile's window would reach past them, and the rows ``min_tile_rows`` asks
    for. Ops that differ elsewhere (a GEMM's token count past the largest tile rows, say)
    share one grid."""
    p_axis = axes[_CUT.index("P")]
    dims, stride = prob.dims, prob.stride
    rows_cap = prob.padded_h if prob.padded_h < (max(p_axis) - 1) * stride + dims["R"] else None
    min_rows = None
    if tpl is not None and tpl.min_tile_rows > 1:
        min_rows = min(tpl.min_tile_rows, math.prod(dims[d] for d in tpl.rows))
    return (
        tpl, tuple(axes), tuple(tuple(o.items()) for o in rf_opts), maximal,
        stride, dims["Q"], dims["R"], dims["S"], rows_cap, min(prob.padded_w,
        (dims["Q"] - 1) * stride + dims["S"]), tuple(prob.operand_bytes.items()), min_rows,
        chip.sram.capacity_bytes, chip.register_file.bytes_per_pe, chip.array.pes,
    )  # fmt: skip


def _grid(
    prob: Problem,
    tpl: Template | None,
    chip: Chip,
    aligns: dict[str, tuple[int, ...]],
    rf_opts: list[dict[str, int]],
    maximal: bool = False,
) -> tuple[dict[str, Arr], dict[str, Arr]]:
    """:func:`_fitting`, memoized by :func:`_grid_key` (the arrays are read-only)."""
    axes = _axes(prob, tpl, aligns)
    key = _grid_key(prob, tpl, chip, axes, rf_opts, maximal)
    found = _GRIDS.get(key)
    if found is None:
        found = _fitting(prob, tpl, chip, axes, rf_opts, maximal)
        for part in found:
            for v in part.values():
                v.flags.writeable = False
        _GRIDS.put(key, found)
    return found


def _fitting(
    prob: Problem,
    tpl: Template | None,
    chip: Chip,
    ladders: list[tuple[int, ...]],
    rf_opts: list[dict[str, int]],
    maximal: bool = False,
) -> tuple[dict[str, Arr], dict[str, Arr]]:
    """The candidates of the ``ladders`` (per cut dim, descending) and the RF choices
    ``rf_opts`` whose SRAM tile (and, with a template that splits the RF, PE working set) fits;
    with ``maximal``, only those no other fitting candidate covers in every dim (the SRAM need
    grows with every extent, so the fitting set is closed downward and a candidate is covered
    exactly when one step up some ladder still fits). Candidates in ``itertools.product``
    order of the ladders and ``rf_opts``."""
    split = tpl.rf_split if tpl is not None else ()
    # The grid's axes are the cut dims' ladders and the RF choices. The fit tests run on its
    # axes of several values (at least one axis): there a dim is a column (one array holds
    # them all), each figure broadcasting over the axes it depends on; elsewhere a float.
    sizes = [*map(len, ladders), len(rf_opts)]
    live = [j for j, n in enumerate(sizes) if n != 1] or [len(_CUT)]
    shape = tuple([sizes[j] for j in live])
    lists = [*ladders, *([o[d] for o in rf_opts] for d in split)]  # the cut dims, the factors
    keys = [*_CUT, *("rf" + d for d in split)]
    values: list[int] = []
    for j in live:
        for listed in lists[j:] if j == len(_CUT) else (ladders[j],):
            values += listed
    every = np.array(values, dtype=np.float64)
    columns: dict[str, tuple[int, Arr]] = {}  # per dim with a column: its live axis, its values
    figures: dict[str, Any] = {}
    start = 0
    for i, (key, listed) in enumerate(zip(keys, lists, strict=True)):
        j = min(i, len(_CUT))
        if j not in live:
            figures[key] = float(listed[0])
            continue
        at = live.index(j)
        columns[key] = (at, every[start:start + len(listed)])
        figures[key] = columns[key][1].reshape((1,) * at + (-1,) + (1,) * (len(live) - at - 1))
        start += len(listed)
    tile = {d: figures[d] for d in _CUT}
    tile["Q"], tile["R"], tile["S"] = (float(prob.dims[d]) for d in DIMS[len(_CUT):])
    ok = buffer_bytes(prob, tpl, tile, _GRID_MATH) <= chip.sram.capacity_bytes / 2  # 2 buffers
    rules = register_fit(prob, tpl, tile, chip)
    if rules is not True:
        ok = ok & rules
    if tpl is not None and split:
        rf = {d: figures["rf" + d] for d in split}
        need = rf_need(prob, tpl, tile, rf, _GRID_MATH)
        ok = ok & (need <= chip.register_file.bytes_per_pe + 1e-9)
    if getattr(ok, "shape", ()) != shape:  # a live axis no figure depends on
        ok = np.broadcast_to(ok, shape)
    if maximal:  # the ladders descend: one step up is one index down
        index = _uncovered(ok, step=-1, axes=len(live) - (live[-1] == len(_CUT)))
    else:
        index = ok.nonzero()
    repeated: dict[float, Arr] = {}  # one column of each value of the dims of one value
    picked: dict[str, Arr] = {}
    for key in (*DIMS, *keys[len(_CUT):]):
        if key in columns:
            at, column = columns[key]
            picked[key] = column[index[at]]
            continue
        value = figures[key] if key in figures else tile[key]
        if value not in repeated:
            repeated[value] = filled(len(index[0]), value)
        picked[key] = repeated[value]
    return {d: picked[d] for d in DIMS}, {d: picked["rf" + d] for d in split}


def _picks(
    flat: Arr, top_k: int, tile: dict[str, Arr], rf: dict[str, Arr], tpl: Template
) -> list[tuple[int, int, Tiling]]:
    """The ``top_k`` cheapest of the order-major costs ``flat`` as (order index, candidate
    index, its complete tiling): the first cheapest, as a stable sort ranks it, unless a NaN
    makes argmin differ."""
    first = int(np.argmin(flat))
    if top_k == 1 and not np.isnan(flat[first]):
        picks = np.array([first])
    else:
        picks = np.argsort(flat, kind="stable")[:top_k]
    n = len(tile["G"])
    out = []
    for pick in picks:
        o, i = divmod(int(pick), n)
        chosen = {d: int(tile[d][i]) for d in DIMS}
        factors = {d: min(int(rf[d][i]), chosen[d]) for d in tpl.rf_split}
        out.append((o, i, Tiling(tile=chosen, order=ORDERS[o], rf=factors)))
    return out


def _search(
    prob: Problem, tpl: Template, chip: Chip, objective: Objective, top_k: int,
    key: tuple[Any, ...], backing: Backing | None = None,
) -> list[tuple[float, Mapping]]:
    """The ``top_k`` cheapest mappings of ``prob`` with ``tpl`` (empty when nothing fits),
    timed with ``backing`` (see :func:`map_op`); ``key`` (the op's signature and the template)
    names the search in :data:`_SEARCHES`."""
    if objective == "energy":  # the picks do not depend on time: cached by geometry + energy
        energy_key = chip.energy.model_dump_json()
        tilings = _search_cache(
            (*key, geometry_key(chip), energy_key, objective, top_k),
            lambda: [t for _, _, t in _ranked(prob, tpl, chip, objective, top_k)],
        )
    else:
        tilings = [t for _, _, t in _ranked(prob, tpl, chip, objective, top_k, backing)]
    out = []
    for tiling in tilings:
        mapping = build_mapping(prob, tpl, chip, tiling, backing)
        out.append((mapping_cost(mapping, chip, objective), mapping))
    return out


def _ranked(
    prob: Problem, tpl: Template, chip: Chip, objective: Objective, top_k: int,
    backing: Backing | None = None,
) -> list[tuple[int, int, Tiling]]:
    """The ``top_k`` cheapest tilings for energy or EDP (or latency, exhaustively: the
    reference of the bounded search), every candidate and order evaluated at once (each figure
    broadcasts to shape (orders, candidates))."""
    tile, rf = _candidates(prob, tpl, chip)
    if not tile or len(tile["G"]) == 0:
        return []
    fig = evaluate_orders(prob, tpl, chip, tile, ORDERS, rf, backing)
    seconds = fig["total_cycles"] / chip.freq_hz
    pj = traffic_pj(fig["traffic"], chip) + mac_energy_pj(prob.macs, prob.mac_class, chip,
                                                          fig["mapping_efficiency"])
    cost = seconds if objective == "latency" else pj if objective == "energy" else pj * seconds
    flat = np.broadcast_to(cost, fig["total_cycles"].shape).reshape(-1)  # order-major
    return _picks(flat, top_k, tile, rf, tpl)


SEEDS = 32
"""Candidates with the lowest bounds a bounded latency search evaluates first (per pick asked)."""


def _search_latency(
    prob: Problem, names: list[str], chip: Chip, top_k: int, sig: tuple[Any, ...],
    backing: Backing | None = None,
) -> list[tuple[float, int, Mapping]]:
    """The ``top_k`` fastest mappings of ``prob`` over the templates ``names`` as (seconds,
    template rank, mapping), in the exhaustive search's order: by time, then template rank, then
    the template's own order (its candidates, order-major).

    One bounded pass over the candidates of every template at once: each candidate gets a
    lower bound on its total cycles in any loop order
    (:func:`~infersim.dataflow.loopnest.figures.lower_bound_cycles`); the :data:`SEEDS`
    candidates with the lowest bounds are priced exactly; their ``top_k``-th best time prunes
    every candidate whose bound exceeds it; the rest are priced exactly (element for element as
    :func:`evaluate_orders` prices them). Only the picks are analyzed in full, in plain floats
    (their fold sums; their DRAM and time figures are the priced ones: :func:`_fastest`).
    What the bounds and the exact times are made of but the DRAM bandwidth, the clock and the
    calibration do not change is kept per template across chips that differ only in those
    (:data:`_SEARCHES`). ``backing``: see :func:`map_op`."""
    fed = dequantizes(backing)
    found = _search_cache(_latency_key(sig, names, chip, fed),
                          lambda: _prepare_all(prob, names, chip, fed))  # fmt: skip
    if found is None:
        return []
    parts, joint, starts = found
    kept, cycles, timed, cols = _bounded(prob, parts[0][1], chip, joint, top_k, backing)
    return _fastest(prob, chip, top_k, parts, starts, kept, cycles / chip.freq_hz, backing,
                    lambda p, oi, j: one_of(timed, oi, int(cols[j])))  # fmt: skip


def _fastest(
    prob: Problem, chip: Chip, top_k: int, parts: list[_Part], starts: list[int], kept: Any,
    seconds: Arr, backing: Backing | None, priced: Callable[[int, int, int], Timed],
    first: int | None = None,
) -> list[tuple[float, int, Mapping]]:
    """The ``top_k`` fastest of the candidates ``kept`` (ascending indices into the
    templates' ``parts`` one after another, part p's from ``starts[p]``) whose total cycles
    per order over the clock are ``seconds``, shape (orders, kept), as
    :func:`_search_latency` gives them; ``priced(p, o, j)``: the DRAM and time figures of the
    j-th kept candidate (of part p) in the o-th order; ``first``: :func:`_first_fastest` of
    ``seconds`` (one template, ``top_k`` 1) where the caller has it."""
    if len(parts) == 1:  # one template: its own order-major index is the flat one (kept ascend)
        if top_k == 1:  # the first of the fastest, order-major, as a stable sort ranks it
            order: Any = [_first_fastest(seconds) if first is None else first]
        else:
            order = seconds.reshape(-1).argsort(kind="stable")[:top_k]
    else:  # by time, then template rank, then the template's own order-major index
        kept = np.asarray(kept)
        bounds = np.array(starts)
        which = np.searchsorted(bounds, kept, side="right") - 1
        local = kept - bounds[which]
        o = np.arange(len(ORDERS))[:, None]
        flat_in_part = o * np.diff(bounds)[which] + local
        ranks = np.array([part[0] for part in parts])
        order = np.lexsort((flat_in_part.reshape(-1),
                            np.broadcast_to(ranks[which], seconds.shape).reshape(-1),
                            seconds.reshape(-1)))[:top_k]  # fmt: skip
    out = []
    for pick in order:
        oi, j = divmod(int(pick), len(kept))
        k = int(kept[j])
        p = bisect.bisect_right(starts, k) - 1  # the part candidate k comes from
        rank, tpl, tile, rf = parts[p]
        i = k - starts[p]
        # a candidate: within the op's dims (.item: the float itself, no numpy scalar)
        chosen = {d: int(tile[d].item(i)) for d in DIMS}
        factors = {d: min(int(rf[d].item(i)), chosen[d]) for d in tpl.rf_split}
        mapping = picked_mapping(prob, tpl, chip, chosen, ORDERS[oi], factors, backing,
                                 priced(p, oi, j))  # fmt: skip
        out.append((mapping.time_s, rank, mapping))
    return out


def _latency_key(
    sig: tuple[Any, ...], names: list[str], chip: Chip, weight_fed: bool
) -> tuple[Any, ...]:
    """The :data:`_SEARCHES` key of a latency search (``weight_fed``: its figures hold the
    weight elements each candidate feeds the array, which the kept stationary operands of a
    template make depend on the chip's energies too)."""
    if weight_fed:
        return (sig, tuple(names), geometry_key(chip), "latency", chip.energy.model_dump_json())
    return (sig, tuple(names), geometry_key(chip), "latency")


def _checked(op: OpBase, chip: Chip, dataflow: str) -> tuple[Problem, list[str]]:
    """The problem of ``op`` and the templates :func:`map_op` searches for ``dataflow``.

    Raises:
        UnsupportedDtypeError: the array cannot compute the op's dtype.
        InfersimError: an unknown dataflow, one the chip's array does not implement, or an op
            kind without a loop nest.
    """
    return _computable(op, chip), _searched(chip, dataflow)


def _computable(op: OpBase, chip: Chip) -> Problem:
    """The problem of ``op``, whose dtype ``chip``'s array computes.

    Raises:
        UnsupportedDtypeError: the array cannot compute the op's dtype.
        InfersimError: an op kind without a loop nest.
    """
    prob = problem_of(op)
    chip.macs_per_cycle(prob.mac_class)  # raises UnsupportedDtypeError
    return prob


def _searched(chip: Chip, dataflow: str) -> list[str]:
    """The templates :func:`map_op` searches on ``chip`` for ``dataflow``.

    Raises:
        InfersimError: an unknown dataflow, or one the chip's array does not implement.
    """
    if dataflow not in DATAFLOWS:
        raise InfersimError(f"unknown dataflow {dataflow!r}; allowed: {', '.join(DATAFLOWS)}")
    if not chip.array.implements(dataflow) and dataflow != "best":
        raise InfersimError(
            f"chip {chip.name!r} implements the {'/'.join(dataflows_of(chip))} dataflow(s), not "
            f"{dataflow!r}: ask for one of those or 'best', or give a chip YAML whose "
            f"array.supported_dataflows lists {dataflow!r}"
        )
    return dataflows_of(chip) if dataflow == "best" else [dataflow]


_Part = tuple[int, Template, dict[str, Arr], dict[str, Arr]]
"""A template's rank, the template, its fitting candidates' tile extents and RF factors."""


_Job = tuple[Problem, list[str], "Backing | None"]
"""An op's problem, the templates searched, and its DRAM level (None: none behind it)."""


class _Group(NamedTuple):
    """A group of :func:`search_many`: its ops' candidates of one template stacked."""

    prob: Problem
    """The ops' problems stacked (:func:`stacked`)."""
    tpl: Template
    prep: Prepared
    sigs: tuple[tuple[Any, ...], ...]
    """The ops, in the order their candidates lie in."""
    sizes: list[int]
    """Their candidates."""
    plain: bool
    """Whether they are timed without a DRAM level behind (no backings)."""


_Priced = tuple[PickedRows, Arr, dict[int, int]]
"""Of the candidates of a group: the figures of each op's one candidate that its search may
pick (:func:`_first_fastest` of its candidates there; each op of the group reads its pick
from them), every candidate's total cycles over the clock, shape (orders, candidates), and
per op (by its first candidate's column) that pick's index among its own candidates,
order-major."""


_Batched = tuple[list["_Part"], list[tuple[_Group, int, int]], list[int]]
"""What re-times a batched search (:func:`search_many`): the op's parts, per part its group
and its candidates there (from, to), and where each part's candidates start in the op's."""


def _priced_group(group: _Group, chip: Chip, backings: list[Backing | None]) -> _Priced:
    """The figures of every candidate of ``group`` on ``chip``, its ops timed with
    ``backings`` (one per op; None on a chip without a DRAM level behind its cores)."""
    backing = None if group.plain else stacked_backing(
        [b for b in backings if b is not None], group.sizes)  # fmt: skip
    timed = timed_at(group.prob, group.tpl, chip, group.prep, ORDERS, slice(None), backing)
    seconds = timed.time["total_cycles"] / chip.freq_hz
    picks = []
    firsts = {}
    lo = 0
    for size in group.sizes:  # each op's candidates of this template: a part of its search
        firsts[lo] = first = _first_fastest(seconds[:, lo:lo + size])
        o, j = divmod(first, size)
        picks.append((o, lo + j))
        lo += size
    return picked_rows(timed, picks), seconds, firsts


def _first_fastest(seconds: Arr) -> int:
    """The index, order-major, of the fastest of ``seconds`` (orders, candidates) that
    :func:`_fastest` picks of one part (``top_k`` 1): the first of the fastest, as a stable
    sort ranks them (a NaN last). Of several parts, it picks one part's this, or none: it
    ranks by time, then part, then this index."""
    first = int(seconds.argmin())
    # argmin stops at the first NaN, which a stable sort puts last (the value read by its two
    # indices: an array's flat iterator is code of its own, for this one read)
    if math.isnan(seconds[divmod(first, seconds.shape[1])]):
        first = int(seconds.reshape(-1).argsort(kind="stable")[0])
    return first


def _priced_groups(
    jobs: dict[tuple[Any, ...], _Job], tiles: dict[tuple[Any, ...], list[_Part]],
    groups: dict[tuple[Any, ...], list[tuple[Any, ...]]], chip: Chip,
) -> dict[tuple[tuple[Any, ...], str], tuple[_Group, int, int, _Priced | None]]:
    """Per (op signature, template name) of :func:`search_many`: its group (the ops'
    candidates of one template stacked, :func:`stacked`, and prepared), the op's candidates
    there (from, to), and the group's pricing (:func:`_priced_group`) where every op of the
    group has at most 2 x :data:`SEEDS` candidates (else None: searched bounded)."""
    preps: dict[tuple[tuple[Any, ...], str],
                tuple[_Group, int, int, _Priced | None]] = {}  # fmt: skip
    for (name, _, (plain, fed)), sigs in groups.items():
        tpl = TEMPLATES[name]
        mine = [next(p for p in tiles[sig] if p[1] is tpl) for sig in sigs]
        sizes = [len(t["G"]) for _, _, t, _ in mine]
        prob = stacked([jobs[sig][0] for sig in sigs], sizes)
        group = _Group(prob, tpl, _prepared(prob, tpl, chip, mine, fed), tuple(sigs), sizes,
                       plain)  # fmt: skip
        small = [sum(len(p[2]["G"]) for p in tiles[sig]) <= 2 * SEEDS for sig in sigs]
        priced = None
        if all(small):
            priced = _priced_group(group, chip, [jobs[sig][2] for sig in sigs])
        lo = 0
        for sig, size in zip(sigs, sizes, strict=True):
            preps[(sig, name)] = (group, lo, lo + size, priced)
            lo += size
    return preps


def _prepared(prob: Problem, tpl: Template, chip: Chip, parts: list[_Part], fed: bool) -> Prepared:
    """:func:`prepare` of the candidates of ``parts`` one after another (a group of
    :func:`_priced_groups`, its problem ``prob``): their tiles stacked for this call alone,
    not alive while the group is priced."""
    tile = {d: np.concatenate([t[d] for _, _, t, _ in parts]) for d in DIMS}
    rf = {d: np.concatenate([r[d] for _, _, _, r in parts]) for d in tpl.rf_split}
    return prepare(prob, tpl, chip, tile, rf, fed)


def _batched_entry(
    parts: list[_Part], placed: list[tuple[_Group, int, int]], starts: list[int]
) -> tuple[list[_Part], Prepared, list[int]]:
    """The :data:`_SEARCHES` entry of an op of :func:`search_many` (what
    :func:`_prepare_all` gives): its candidates' prepared figures cut from its groups'
    (``placed``: per part, its group and the op's candidates there)."""
    return parts, _concat([_sliced(g.prep, lo, hi) for g, lo, hi in placed]), starts


def _fastest_priced(
    prob: Problem, chip: Chip, parts: list[_Part], starts: list[int],
    priced: list[tuple[_Priced, int, int]], backing: Backing | None,
) -> list[tuple[float, int, Mapping]]:
    """The fastest mapping of an op of :func:`search_many` whose every candidate was priced
    in its groups (``priced``: per part, its group's pricing and the op's candidates there)."""
    per_part = [seconds[:, lo:hi] for (_, seconds, _), lo, hi in priced]
    at = per_part[0] if len(per_part) == 1 else np.concatenate(per_part, axis=1)
    timed = [(t, lo, hi) for (t, _, _), lo, hi in priced]
    first = None
    if len(priced) == 1:  # one template: the pick its group kept (that ranking, not made again)
        (_, _, firsts), lo, _ = priced[0]
        first = firsts[lo]
    return _fastest(prob, chip, 1, parts, starts, range(starts[-1]), at, backing,
                    functools.partial(_priced_in, timed, starts), first)  # fmt: skip


def _priced_in(
    priced: list[tuple[PickedRows, int, int]], starts: list[int], p: int, o: int, j: int
) -> Timed:
    """The figures of the ``j``-th candidate of an op of :func:`search_many` (of its part
    ``p``, whose candidates lie from ``priced[p][1]`` in its group's pricing) in order ``o``:
    the candidate its group kept the figures of for that part (:func:`_priced_group`)."""
    rows, lo, _ = priced[p]
    return picked_row(rows, o, lo + j - starts[p])


def _retime(
    again: dict[tuple[Any, ...], tuple[_Job, tuple[Any, ...], _Batched]], chip: Chip,
    dataflow: str,
) -> None:
    """The latency mappings on ``chip`` of the ops ``again`` (op signature: its job, its
    :data:`_SEARCHES` key, and the groups a batched pass on a chip of the same geometry priced
    it in, its entry still unread): each group all of whose ops are asked is priced again on
    ``chip``, once, and each op whose every group was keeps its fastest, as
    :func:`search_many` picks it (and as :func:`map_op`'s own search would). The others are
    left to :func:`map_op`, which re-times their searches one by one."""
    groups = {id(g): g for _, _, (_, placed, _) in again.values() for g, _, _ in placed}
    priced: dict[int, _Priced] = {}  # by identity: each group priced once
    for gid, group in groups.items():
        if all(sig in again for sig in group.sigs) and all(
            (again[sig][0][2] is None) == group.plain for sig in group.sigs
        ):
            priced[gid] = _priced_group(group, chip, [again[sig][0][2] for sig in group.sigs])
    for sig, ((prob, _, backing), key, (parts, placed, starts)) in again.items():
        if any(id(group) not in priced for group, _, _ in placed):
            continue
        picks = _fastest_priced(prob, chip, parts, starts,
                                [(priced[id(g)], lo, hi) for g, lo, hi in placed], backing)
        STATS["reused"] += 1
        _SEARCHES.move_to_end(key)
        _CACHE.put(_latency_cache_key(sig, chip, dataflow, 1, backing),
                   tuple(m for _, _, m in picks))  # fmt: skip


def search_many(
    ops: Sequence[OpBase], chip: Chip, dataflow: str = "best",
    backings: Sequence[Backing | None] | None = None,
) -> int:
    """Search the latency mappings of ``ops`` on ``chip`` that :func:`map_op` would search
    (``objective="latency"``, ``top_k=1``, each op with its own of ``backings``: none when
    not given), in one vectorized pass: every template's fitting
    candidates of all those ops are stacked into one problem
    (:func:`~infersim.dataflow.loopnest.problem.stacked`, one per group of ops sharing a MAC
    class and filter window), prepared at once, and the ops with at most 2 x :data:`SEEDS`
    candidates (those the bounded search prices in full) priced at once; each op then keeps its
    own first cheapest, exactly as :func:`map_op` picks it, and both caches hold what a search
    of its own would have put there. Ops a batch searched already on a chip of the same
    geometry (a chip that differs in its timing alone) are re-timed group by group, not
    searched (:func:`_retime`). Ops already cached, ops without a loop nest and ops
    :func:`map_op` refuses are left to it. Returns the number of ops searched.

    Raises:
        ValueError: ``backings`` not one per op.
    """
    if backings is not None and len(backings) != len(ops):
        raise ValueError(f"backings: {len(backings)} for {len(ops)} ops: give one per op")
    try:  # the templates every op searches, once
        names = _searched(chip, dataflow)
    except InfersimError:
        return 0  # map_op raises it where the ops are costed
    jobs: dict[tuple[Any, ...], _Job] = {}
    again: dict[tuple[Any, ...], tuple[_Job, tuple[Any, ...], _Batched]] = {}  # re-timed
    for i, op in enumerate(ops):
        sig = op.signature()
        backing = None if backings is None else backings[i]
        if (_latency_cache_key(sig, chip, dataflow, 1, backing) in _CACHE or sig in jobs
                or sig in again):
            continue
        try:
            prob = _computable(op, chip)
        except InfersimError:
            continue  # map_op raises it where the op is costed
        key = _latency_key(sig, names, chip, dequantizes(backing))
        entry = _SEARCHES.get(key)
        if entry is None:
            jobs[sig] = (prob, names, backing)
        elif isinstance(entry[0], _Deferred) and entry[0].batched is not None:
            again[sig] = ((prob, names, backing), key, entry[0].batched)  # batched already
    if again:
        _retime(again, chip, dataflow)
    if not jobs:
        return 0
    # per template, the candidates of every op (grids are memoized), stacked by group: ops
    # alike in what their timing reads (a backing or none, weights converted or not)
    tiles: dict[tuple[Any, ...], list[_Part]] = {}
    groups: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    for sig, (prob, names, backing) in jobs.items():
        tiles[sig] = []
        kind = (backing is None, dequantizes(backing))
        for rank, name in enumerate(names):
            tile, rf = _candidates(prob, TEMPLATES[name], chip)
            if tile and len(tile["G"]):
                tiles[sig].append((rank, TEMPLATES[name], tile, rf))
                groups.setdefault((name, stack_key(prob), kind), []).append(sig)
    preps = _priced_groups(jobs, tiles, groups, chip)
    for sig, (prob, names, backing) in jobs.items():
        parts = tiles[sig]
        if not parts:
            continue
        got = [preps[(sig, tpl.name)] for _, tpl, _, _ in parts]
        starts = [0, *itertools.accumulate(hi - lo for _, lo, hi, _ in got)]
        key = _latency_key(sig, names, chip, dequantizes(backing))
        priced = [(t, lo, hi) for _, lo, hi, t in got if t is not None]
        # what the entry keeps: the groups, not their pricing (its arrays are freed with
        # this pass, for the allocations after it to reuse)
        placed = [(g, lo, hi) for g, lo, hi, _ in got]
        if len(priced) == len(got):
            # every candidate priced: the fastest read where the group's pricing holds them,
            # and a chip that differs in its timing alone is re-timed the same way
            batched: _Batched = (parts, placed, starts)
            _search_defer(key, functools.partial(_batched_entry, parts, placed, starts), batched)
            picks = _fastest_priced(prob, chip, parts, starts, priced, backing)
        else:
            _search_defer(key, functools.partial(_batched_entry, parts, placed, starts))
            picks = _search_latency(prob, names, chip, 1, sig, backing)
        _CACHE.put(_latency_cache_key(sig, chip, dataflow, 1, backing),
                   tuple(m for _, _, m in picks))  # fmt: skip
    return len(jobs)


def _latency_cache_key(
    sig: tuple[Any, ...], chip: Chip, dataflow: str, top_k: int, backing: Backing | None
) -> tuple[Any, ...]:
    """The :data:`_CACHE` key of a bounded latency search."""
    return (sig, chip.key, dataflow, "latency", top_k, backing)


def _sliced(prep: Prepared, lo: int, hi: int) -> Prepared:
    """The candidates ``lo`` to ``hi`` of ``prep``."""

    def cut(v: Any) -> Any:
        return v[lo:hi] if isinstance(v, np.ndarray) and v.ndim else v

    return Prepared(
        cycles=cut(prep.cycles),
        counts={d: cut(v) for d, v in prep.counts.items()},
        sram={n: cut(v) for n, v in prep.sram.items()},
        compulsory=cut(prep.compulsory),
        tiles=cut(prep.tiles),
        folds=cut(prep.folds),
        footprints={n: cut(v) for n, v in prep.footprints.items()},
        weight_fed=None if prep.weight_fed is None else cut(prep.weight_fed),
    )


def _prepare_all(
    prob: Problem, names: list[str], chip: Chip, weight_fed: bool = False
) -> tuple[list[_Part], Prepared, list[int]] | None:
    """The fitting candidates of every template of ``names`` and their :class:`Prepared`
    figures one template after another (with ``weight_fed``, the weight elements each feeds
    the array too), with where each template's candidates start (and the total). None when
    nothing fits."""
    parts: list[_Part] = []
    preps = []
    for rank, name in enumerate(names):
        tpl = TEMPLATES[name]
        tile, rf = _candidates(prob, tpl, chip)
        if tile and len(tile["G"]):
            parts.append((rank, tpl, tile, rf))
            preps.append(prepare(prob, tpl, chip, tile, rf, weight_fed))
    if not parts:
        return None
    starts = [0, *itertools.accumulate(len(p.cycles) for p in preps)]
    return parts, _concat(preps), starts


def _concat(preps: list[Prepared]) -> Prepared:
    """The :class:`Prepared` figures of several templates' candidates, one after another."""
    if len(preps) == 1:
        return preps[0]

    def cat(values: list[Any]) -> Arr:
        return np.concatenate([np.broadcast_to(v, p.cycles.shape) for v, p in zip(values, preps,
                                                                                    strict=True)])

    return Prepared(
        cycles=cat([p.cycles for p in preps]),
        counts={d: cat([p.counts[d] for p in preps]) for d in preps[0].counts},
        sram={n: cat([p.sram[n] for p in preps]) for n in preps[0].sram},
        compulsory=cat([p.compulsory for p in preps]),
        tiles=cat([p.tiles for p in preps]),
        folds=cat([p.folds for p in preps]),
        footprints={n: cat([p.footprints[n] for p in preps]) for n in preps[0].footprints},
        weight_fed=None if preps[0].weight_fed is None else cat([p.weight_fed for p in preps]),
    )


def _bounded(
    prob: Problem, tpl: Template, chip: Chip, prep: Prepared, top_k: int,
    backing: Backing | None = None,
) -> tuple[npt.NDArray[np.intp], Arr, Timed, npt.NDArray[np.intp]]:
    """The candidates (indices, ascending) whose lower bound does not exceed the ``top_k``-th
    best exact time of the :data:`SEEDS` best-bounded ones (every candidate that can be among
    the ``top_k`` best, ties included; all of them when a bound or a seed's time is not
    finite), with their total cycles per order, shape (orders, kept), the figures they were
    priced in (:func:`timed_at`) and their columns there; timed with ``backing`` (see
    :func:`map_op`)."""
    n = len(prep.cycles)
    seeds = SEEDS * top_k
    bound = lower_bound_cycles(prob, tpl, chip, prep, backing) if n > 2 * seeds else None
    if bound is None or not np.isfinite(bound).all():
        every = np.arange(n)
        timed = timed_at(prob, tpl, chip, prep, ORDERS, slice(None), backing)  # views, no copies
        return every, timed.time["total_cycles"], timed, every
    first = np.sort(np.argpartition(bound, seeds - 1)[:seeds])
    timed = timed_at(prob, tpl, chip, prep, ORDERS, first, backing)
    times = timed.time["total_cycles"]
    limit = np.partition(times.reshape(-1), top_k - 1)[top_k - 1]
    kept = np.flatnonzero(bound <= limit) if np.isfinite(limit) else np.arange(n)
    at = np.searchsorted(first, kept)
    if np.all(at < len(first)) and np.array_equal(first[np.minimum(at, len(first) - 1)], kept):
        return kept, times[:, at], timed, at  # every kept candidate was a seed: priced already
    timed = timed_at(prob, tpl, chip, prep, ORDERS, kept, backing)
    return kept, timed.time["total_cycles"], timed, np.arange(len(kept))


def _traffic_aligns(chip: Chip) -> dict[str, tuple[int, ...]]:
    """Per cut dim, the array sides some template lays it on (the union of their ladders)."""
    return _sides_aligns(chip.array.rows, chip.array.cols)


@functools.lru_cache(maxsize=64)
def _sides_aligns(rows: int, cols: int) -> dict[str, tuple[int, ...]]:
    """:func:`_traffic_aligns` of an array of ``rows`` x ``cols`` PEs (read-only)."""
    out: dict[str, tuple[int, ...]] = {}
    for d in _CUT:
        sides = {rows for t in TEMPLATES.values() if d in t.rows}
        sides |= {cols for t in TEMPLATES.values() if d in t.cols}
        out[d] = tuple(sorted(sides))
    return out


def _tile_counts(prob: Problem, tile: dict[str, Arr]) -> dict[str, Arr]:
    """SRAM tiles along each dim of candidates of extents ``tile``."""
    return {d: NP.ceil_div(v if isinstance(v := prob.dims[d], np.ndarray) else float(v),
                           tile[d]) for d in DIMS}  # fmt: skip


def _moved_bytes(prob: Problem, counts: dict[str, Arr], cores: int, n: int,
                 capacity_bytes: float | None = None) -> Arr:
    """DRAM bytes moved by ``n`` candidates with tile ``counts`` in each of :data:`ORDERS`,
    shape (orders, n), on ``cores`` cores below a level of ``capacity_bytes`` (see
    :func:`~infersim.dataflow.loopnest.dram.dram_figures`)."""
    return _moved_by_operand(prob, counts, cores, n, capacity_bytes)[0]


def _moved_by_operand(
    prob: Problem, counts: dict[str, Arr], cores: int, n: int,
    capacity_bytes: float | None = None,
) -> tuple[Arr, dict[str, Arr], dict[str, Arr]]:
    """(:func:`_moved_bytes`, the reads and the writes per operand), each of shape
    (orders, n)."""
    reads, writes, _ = dram_traffic(prob, counts, ORDERS, cores, NP,
                                    capacity_bytes=capacity_bytes)  # fmt: skip
    shape = (len(ORDERS), n)
    total = np.zeros(shape)
    for name in OPERANDS:
        total = total + np.broadcast_to(reads[name] + writes[name], shape)
    return (total, {k: np.broadcast_to(v, shape) for k, v in reads.items()},
            {k: np.broadcast_to(v, shape) for k, v in writes.items()})  # fmt: skip


def _refetch_free(prob: Problem, chip: Chip) -> dict[str, Access] | None:
    """The DRAM reads and writes per operand of :func:`traffic_of` on a one-core ``chip``
    where the candidate grid holds a tiling that fetches every operand once, found without
    the grid (None where it holds none, or the op is not a plain GEMM: the grid search
    decides).

    A plain GEMM (one group, no filter window) fetches every operand once exactly when at
    most one of its three loops iterates: of two that iterate, the inner one changes the tile
    of an operand that does not depend on the outer one, which is then fetched again (partial
    sums, for the output). With two dims whole, the candidate that cuts the third into tiles
    of 1 (every ladder ends at 1) needs the least SRAM of its kind: if one of the three fits,
    the grid holds such a tiling, and the tiling the grid search picks moves no more bytes (it
    moves the fewest; no tiling moves fewer than each operand once), so it too fetches every
    operand once. Without a halo every such tiling moves the same bytes per operand, in any
    order: each operand's footprint once, the output's written at its epilogue scale, what
    :func:`~infersim.dataflow.loopnest.dram.dram_figures` computes where no loop iterates on
    one core (x × 1.0 and 0.0 + x are x exactly)."""
    dims = prob.dims  # (an op's own problem: whole numbers, not a stacked one's arrays)
    if chip.cores != 1 or (dims["G"], dims["N"], dims["Q"], dims["R"], dims["S"]) != (1,) * 5:
        return None
    # Each cut keeps one operand whole (K: the input, C: the output, P: the weight): where
    # every such operand alone overflows a buffer (with a margin no rounding reaches), no cut
    # fits, and the grid decides without the three tests below.
    ob, half = prob.operand_bytes, chip.sram.capacity_bytes / 2 * (1.0 + 1e-9)
    if min(dims["C"] * min(dims["P"], prob.padded_h) * ob["input"],
           dims["K"] * dims["P"] * ob["output"], dims["K"] * dims["C"] * ob["weight"]) > half:
        return None
    whole = {d: float(dims[d]) for d in DIMS}
    for cut in ("K", "C", "P"):  # the one dim cut, the other two whole
        tile = {**whole, cut: 1.0}
        if 2.0 * buffer_bytes(prob, None, tile, PY) <= chip.sram.capacity_bytes:
            # ceil_div of each dim by its tile: x / x is 1.0 exactly, its ceil_div 1.0
            counts = {**dict.fromkeys(DIMS, 1.0), cut: PY.ceil_div(whole[cut], 1.0)}
            once = {name: float(total_footprint(prob, name, counts) * prob.operand_bytes[name])
                    for name in OPERANDS}  # fmt: skip
            return {
                "input": Access(once["input"], 0.0),
                "weight": Access(once["weight"], 0.0),
                "output": Access(0.0, once["output"] * prob.output_write_scale),
            }
    return None


_EXACT_STEP = 64.0
"""Operand widths and capacities in steps of 1/64 byte (bits, MX scales) keep every SRAM need
and DRAM byte count of a plain GEMM below :data:`_EXACT_BYTES` an exact double (a whole number
of 1/64 bytes below 2^47 has at most 53 significant bits), whatever the order of the sums."""
_EXACT_BYTES = float(2**46)

_Lined = tuple[Tiling, dict[str, Access]]
"""A tiling and its DRAM reads and writes per operand."""


def _exact(x: float) -> bool:
    """Whether ``x`` bytes is a whole number of 1/:data:`_EXACT_STEP` bytes below
    :data:`_EXACT_BYTES`."""
    return abs(x) < _EXACT_BYTES and float(x * _EXACT_STEP).is_integer()


def _plain_gemm(prob: Problem) -> tuple[float, float, float, float] | None:
    """The bytes of the input, the weight and the output of ``prob`` (each tensor once, as
    :func:`~infersim.dataflow.loopnest.problem.total_footprint` counts them) and of its final
    output write, where it is a plain GEMM: one group, no filter window, stride 1 (three
    loops K, C, P; every tile's input rows its P extent) whose widths (above 0), tile needs
    and DRAM bytes in any tiling are :func:`_exact`; else None."""
    d, ob = prob.dims, prob.operand_bytes
    if not (prob.stride == 1 and d["G"] == d["N"] == d["Q"] == d["R"] == d["S"] == 1
            and prob.padded_h >= d["P"]):  # fmt: skip
        return None
    k, c, p = d["K"], d["C"], d["P"]
    wi, ww, wo = ob["input"], ob["weight"], ob["output"]
    ti, tw, to = c * prob.in_h * prob.in_w * wi, k * c * ww, k * p * wo
    final = to * prob.output_write_scale
    need = c * p * wi + k * c * ww + k * p * wo  # the whole op as one tile
    most = k * ti + p * tw + 2 * c * to + final  # every operand refetched by its loop's count
    if not (min(wi, ww, wo) > 0 and all(map(_exact, (wi, ww, wo, final, need, most)))):
        return None
    return ti, tw, to, final


def _line_fewest(prob: Problem, chip: Chip) -> _Lined | None:
    """:func:`_lines_fewest` of one op."""
    return _lines_fewest([prob], chip)[0]


def _lines_fewest(probs: Sequence[Problem], chip: Chip) -> list[_Lined | None]:
    """Per problem of ``probs``: the tiling :func:`_grid_fewest` picks for it on a one-core
    ``chip`` and its DRAM reads and writes per operand (as :func:`traffic_of` computes them),
    found from the (K, C) lines of its candidate grid instead of the whole grid, in one
    vectorized pass per token extent; None where that does not apply (not a
    :func:`_plain_gemm`, a capacity off the exact steps of :data:`_EXACT_STEP`, or nothing
    fits): the grid decides.

    Every figure below is a whole number of 1/64 bytes under 2^46 (:func:`_plain_gemm`), so
    each product and sum is exact, in any order: the same floats as the grid's. The
    double-buffered need of a tile (tk, tc, tp) is a + b·tc with a = tk·tp·o and
    b = tk·w + tp·i (the operand widths), and the largest fitting tc with each tk and tp is
    tested against (capacity / 2 − a) / b (a correctly rounded quotient of such figures
    never crosses a whole number: b·tc is at most the whole op's need, below 2^46). On one
    core a tiling that covers another in every dim moves no more DRAM bytes in any order
    (every tile count, hence every refetch, only falls), and each line's largest fitting
    tile the grid drops as covered is covered by another line's earlier in C order (one step
    up K or C): the first fewest of the lines' tiles, order-major as the grid ranks them, is
    the grid's. For the same reason each op's lines
    whose neighbour one step up K or C fits as many tile rows are left out before their bytes
    are counted (:func:`_kept_lines`, all ops at once; of llama-3-70b's prefill GEMMs on an
    H100's L2, 67 of 1,260 lines remain). The DRAM bytes per order are
    :func:`~infersim.dataflow.loopnest.dram.dram_figures`' on one core written out for the
    three loops: an operand is fetched again by the count of the loop it does not depend on
    (the input: K; the weight: P; the output: C) wherever a loop inner to that one iterates
    (it depends on both others), the output's partial sums written and read back; summed
    over the operands, each order's bytes are the bytes of every tensor once plus the extra
    fetches of its outer loop's operand where either loop inner to it iterates and of its
    middle loop's where the innermost does (:data:`_LINE_LOOPS`); the first bytes are the
    same for all of an op's lines, so its fewest are found without them."""
    out: list[_Lined | None] = [None] * len(probs)
    half = chip.sram.capacity_bytes / 2
    if chip.cores != 1 or not _exact(half):
        return out
    aligns = _traffic_aligns(chip)
    by_rows: dict[int, list[tuple[int, tuple[float, float, float, float]]]] = {}
    for at, prob in enumerate(probs):  # by token extent: one ladder of tile rows each
        once = _plain_gemm(prob)
        if once is not None:
            by_rows.setdefault(prob.dims["P"], []).append((at, once))
    for p, members in by_rows.items():
        lines, op, sizes = _kept_lines([probs[at] for at, _ in members], aligns, half, p)
        # per kept line and loop: its operand fetched again (the output's partial sums
        # written and read back), 0.0 where the loop does not iterate and above 0 where it does
        extra = np.array([(ti, to + to, tw) for _, (ti, tw, to, _) in members]).T.take(
            op, axis=1) * lines[1]  # fmt: skip
        # per order, less the bytes of every tensor once (an op's lines share them): its
        # outer loop's extra where either loop inner to it iterates and its middle loop's
        # where the innermost does (every figure exact: the sums are the same in any order)
        loops = extra.take(_LINE_LOOPS, axis=0)  # outer, middle and innermost
        moved = np.sign(loops[1] + loops[2]) * loops[0] + np.sign(loops[2]) * loops[1]
        lo = 0
        for (at, once), size in zip(members, sizes, strict=True):
            if size == 0:  # nothing fits
                continue
            o, j = divmod(int(moved[:, lo:lo + size].argmin()), size)
            (tk, tc, tp), more_each = lines[:, :, lo + j].tolist()
            lo += size
            out[at] = _line_picked(probs[at], once, o, tk, tc, tp, more_each)
    return out


def _line_picked(
    prob: Problem, once: tuple[float, float, float, float], o: int, tk: float, tc: float,
    tp: float, more: list[float],
) -> _Lined:
    """The tiling of :func:`_lines_fewest` of extents (``tk``, ``tc``, ``tp``) in the
    ``o``-th order of :data:`ORDERS`, and its DRAM reads and writes per operand, computed as
    :func:`~infersim.dataflow.loopnest.dram.dram_figures` computes them (``once``: the bytes
    of each tensor and the final output write, :func:`_plain_gemm`; ``more``: each loop's
    count less one, in :data:`_LINE_DIMS` order)."""
    outer, middle, inner = _LINE_ORDERS[o]
    refetch = [1.0, 1.0, 1.0]
    if more[middle] > 0.5 or more[inner] > 0.5:  # a loop inner to the outer one iterates
        refetch[outer] = more[outer] + 1.0
    if more[inner] > 0.5:  # the innermost loop iterates
        refetch[middle] = more[middle] + 1.0
    ti, tw, to, final = once
    spill = to * (refetch[1] - 1.0)
    tile = dict(_LINE_TILE, K=int(tk), C=int(tc), P=int(tp))
    tiling = made(Tiling, {"tile": tile, "order": ORDERS[o], "rf": {}})
    return tiling, {
        "input": Access(ti * refetch[0], 0.0),
        "weight": Access(tw * refetch[2], 0.0),
        "output": Access(spill, spill + final),
    }


_LINE_DIMS = ("K", "C", "P")
"""The loops of a plain GEMM (:func:`_plain_gemm`)."""
_LINE_ORDERS: tuple[tuple[int, int, int], ...] = tuple(
    (loops[0], loops[1], loops[2])
    for loops in ([_LINE_DIMS.index(d) for d in order if d in _LINE_DIMS] for order in ORDERS)
)
"""Per order of :data:`ORDERS`: its outer, middle and innermost loop of :data:`_LINE_DIMS`,
as indices."""
_LINE_LOOPS = np.array(_LINE_ORDERS, dtype=np.intp).T
""":data:`_LINE_ORDERS` as an array: per order (columns), its three loops (rows)."""
_LINE_TILE = dict.fromkeys(DIMS, 1)
"""The SRAM tile of a plain GEMM's line before its K, C and P extents: 1 along every dim."""


_PAD = 2.0**60
"""A tile extent past every capacity: :func:`_padded_ladders` pads the ladders with it. A tile
of it along K or P needs at least 2^60 × 1/64 = 2^54 bytes of output tile (every width of a
:func:`_plain_gemm` is a positive whole number of 1/64 bytes), more than half of any capacity
the lines take (below 2^46), so its bound is negative and it fits no C rung; as a C rung it
exceeds every bound (below 64 × 2^46: half the capacity over tp·i, at least 1/64); its
products stay finite (2^120 × a width at most)."""


def _packed(values: Sequence[float]) -> Arr:
    """``values`` as a read-only float array, packed as doubles by :mod:`struct` (under half
    the instructions of ``np.array`` on a list of Python numbers)."""
    return np.frombuffer(struct.pack(f"{len(values)}d", *values))


def _padded_ladders(extents: list[int], ladders: list[tuple[int, ...]]) -> Arr:
    """``ladders`` (each of the extent at its place in ``extents``, in any order) as floats,
    and the tiles each rung cuts its extent into less one (``ceil_div(extent, tile) - 1.0``,
    the same operations in floats as in arrays), every ladder in one array: shape (2,
    ladders, rungs), each padded at its end with :data:`_PAD`, at least once (whose count no
    line reads: none of it fits)."""
    rungs = max(map(len, ladders)) + 1
    flat: list[float] = []
    for ladder in ladders:
        flat += ladder
        flat += (_PAD,) * (rungs - len(ladder))
    out = np.empty((2, len(ladders), rungs))
    out[0] = _packed(flat).reshape(len(ladders), rungs)
    np.subtract(NP.ceil_div(_packed(extents)[:, None], out[0]), 1.0, out=out[1])
    return out


def _kept_lines(
    probs: list[Problem], aligns: dict[str, tuple[int, ...]], half: float, tokens: int
) -> tuple[Arr, npt.NDArray[np.intp], list[int]]:
    """The (K, C) lines of plain GEMMs' candidate grids that :func:`_lines_fewest` counts,
    op after op, each op's in C order of its two ladders, as a (2, 3, lines) array: their
    K and C extents and largest fitting tile rows of the ladder of ``tokens`` (the ops' P
    extent), then the tile counts less one along each, with ``half`` of the capacity per
    buffer; with each line's op and how many lines each op keeps.

    A line whose neighbour one step up K or C (the same tile, larger: the ladders descend)
    fits as many tile rows is covered by it, and that neighbour comes earlier in C order: the
    first fewest is never such a line, nor one where nothing fits. The lines kept are found
    per K rung and rung of tile rows instead (a grid of K × P, the P ladder shorter than most
    C ladders): the number of the op's C rungs that fit with them, ``fit`` (the largest
    fitting tc tested against (capacity / 2 − tk·tp·o) / (tk·w + tp·i), a quotient of exact
    figures as in :func:`_lines_fewest`). At each K rung, the line of its ``fit``-th
    smallest C rung fits those rows and its neighbour one step up C does not; it fits no
    more rows exactly where ``fit`` exceeds the next rung of rows' (none past the last), and
    its neighbour one step up K fits as many exactly where ``fit`` there is as large (none
    before the first): each kept line is one entry of the grid, and along a K rung more tile
    rows fit fewer C rungs, so the entries in C order are the lines in C order. The ops' K
    ladders and the ladder of rows are padded at their ends with :data:`_PAD` (nothing fits
    them: ``fit`` 0), so in the flat grid each entry's neighbour one step up K (at the top of
    an op's ladder, the previous op's pad) and one rung of rows more (after the last rung,
    the pad) are the entries one row before and one after it, and each step but the search
    of each op's C ladder is one call for all the ops."""
    n = len(probs)
    rows = _ladder(tokens, aligns["P"])[::-1]  # ascending
    by_k = [_ladder(p.dims["K"], aligns["K"]) for p in probs]
    ladders = _padded_ladders(
        [*(p.dims["K"] for p in probs), *(p.dims["C"] for p in probs), tokens],
        [*by_k, *(_ladder(p.dims["C"], aligns["C"])[::-1] for p in probs), rows])  # fmt: skip
    rungs, step = ladders.shape[2], len(rows) + 1  # per op, the grid's rows and their length
    # per op, as (op, K, P)
    widths = _packed([p.operand_bytes[name] for name in OPERANDS for p in probs]).reshape(
        len(OPERANDS), n, 1, 1)  # fmt: skip
    w_in, w_weight, w_out = widths[0], widths[1], widths[2]  # (unpacking an array raises)
    tk, tp = ladders[0, :n, :, None], ladders[0, 2 * n, :step]
    bound = tk * w_out * tp
    np.divide(np.subtract(half, bound, out=bound), tk * w_weight + tp * w_in, out=bound)
    # the flat grid of fits (at most a ladder's length: 2 bytes each) between zeros, a row of
    # them before it and one after
    size = bound.size
    around = np.zeros(step + size + 1, dtype=np.int16)
    fit = around[step:step + size]
    grid = fit.reshape(n, rungs, step)
    for at, ladder in enumerate(by_k):  # the ascending C rungs at most each bound (no pads)
        grid[at, :len(ladder)] = ladders[0, n + at].searchsorted(bound[at, :len(ladder)],
                                                                 side="right")  # fmt: skip
    kept = ((fit > around[:size]) & (fit > around[step + 1:])).nonzero()[0]
    line, row = np.divmod(kept, step)  # each kept entry's op and K rung (op × rungs + rung)
    op = line // rungs
    lines = ladders.reshape(2, -1).take(np.concatenate([
        line, op * rungs + fit.take(kept) + (n * rungs - 1), row + 2 * n * rungs
    ]), axis=1).reshape(2, 3, -1)  # fmt: skip
    return lines, op, np.bincount(op, minlength=n).tolist()


def traffic_many(ops: Sequence[OpBase], chip: Chip) -> int:
    """Search the tilings :func:`traffic_of` and :func:`map_traffic` pick for ``ops`` on a
    one-core ``chip`` (the shared-SRAM level) in one vectorized pass: the plain GEMMs from
    their candidate grids' lines (:func:`_lines_fewest`), the others' fitting maximal
    candidates stacked into one problem per group
    (:func:`~infersim.dataflow.loopnest.problem.stacked`), their DRAM bytes in every order
    computed at once; each op keeps its first fewest as its own search would keep it. Ops
    already searched, without a loop nest, and every op on a chip of several cores (whose
    search is bounded per op) are left to the per-op search. Returns the number of ops
    searched."""
    if chip.cores != 1:
        return 0
    geometry = (chip.sram.capacity_bytes, chip.array.rows, chip.array.cols)
    jobs: dict[tuple[Any, ...], tuple[Problem, dict[str, Arr]]] = {}
    groups: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    todo: dict[tuple[Any, ...], Problem] = {}
    for op in ops:
        sig = op.signature()
        key = (sig, "traffic", geometry)
        known = (sig, chip.key, "traffic-dram")
        if key in _SEARCHES or sig in todo or known in _TRAFFIC:
            continue
        try:
            prob = problem_of(op)
        except InfersimError:
            continue
        once = _refetch_free(prob, chip)
        if once is not None:  # what the grid search would find, without the grid
            _TRAFFIC.put(known, once)
            continue
        todo[sig] = prob
    sigs = list(todo)
    for sig, lined in zip(sigs, _lines_fewest([todo[sig] for sig in sigs], chip), strict=True):
        if lined is not None:  # the grid's pick, from its lines
            _search_cache((sig, "traffic", geometry), lambda tiling=lined[0]: tiling)
            _TRAFFIC.put((sig, chip.key, "traffic-dram"), lined[1])
            continue
        prob = todo[sig]
        tile, _ = _grid(prob, None, chip, _traffic_aligns(chip), [{}], maximal=True)
        if not tile or len(tile["G"]) == 0:
            continue  # the per-op search finds nothing either, and says so
        jobs[sig] = (prob, tile)
        groups.setdefault(stack_key(prob), []).append(sig)
    for members in groups.values():
        sizes = [len(jobs[sig][1]["G"]) for sig in members]
        prob = stacked([jobs[sig][0] for sig in members], sizes)
        tile = {d: np.concatenate([jobs[sig][1][d] for sig in members]) for d in DIMS}
        moved, reads, writes = _moved_by_operand(prob, _tile_counts(prob, tile), 1,
                                                 len(tile["G"]))  # fmt: skip
        for sig, lo, hi in zip(members, np.cumsum([0, *sizes[:-1]]), np.cumsum(sizes),
                               strict=True):  # fmt: skip
            o, j = divmod(int(np.argmin(moved[:, lo:hi].reshape(-1))), int(hi - lo))
            mine = jobs[sig][1]
            tiling = Tiling(tile={d: int(mine[d][j]) for d in DIMS}, order=ORDERS[o])
            _search_cache((sig, "traffic", geometry), lambda tiling=tiling: tiling)
            # what traffic_of computes of this tiling alone (the same operations)
            _TRAFFIC.put((sig, chip.key, "traffic-dram"), {
                name: Access(figure_at(reads[name], o, lo + j), figure_at(writes[name], o, lo + j))
                for name in OPERANDS
            })  # fmt: skip
    return len(todo)


def _fewest_bytes(prob: Problem, chip: Chip) -> Tiling | None:
    """:func:`_grid_fewest`, from the grid's lines where :func:`_line_fewest` applies."""
    lined = _line_fewest(prob, chip)
    return _grid_fewest(prob, chip) if lined is None else lined[0]


def _grid_fewest(prob: Problem, chip: Chip) -> Tiling | None:
    """The tiling of the candidate grid (every template's ladders) and DRAM loop order that
    moves the fewest DRAM bytes with its double-buffered SRAM tile fitting; among equals the
    first in order and ladder sequence (on one core), or, where the best-bounded seeds already
    move only the compulsory bytes (no tiling moves fewer), the first of those seeds. None
    when nothing fits.

    On one core a larger tile never moves more bytes (every tile count, hence every refetch
    and halo, only falls), and of two tied candidates the larger comes first in the descending
    ladders: only the candidates no other fitting one covers are priced."""
    one_core = chip.cores == 1
    tile, _ = _grid(prob, None, chip, _traffic_aligns(chip), [{}], maximal=one_core)
    if not tile or len(tile["G"]) == 0:
        return None
    counts = _tile_counts(prob, tile)

    def moved(idx: Any) -> Arr:  # DRAM bytes of the candidates idx, shape (orders, len(idx))
        return _moved_bytes(prob, {d: v[idx] for d, v in counts.items()}, chip.cores, len(idx),
                            partials_capacity_bytes(chip))

    # bounded as the latency search is: no order moves fewer than the compulsory bytes
    n = len(tile["G"])
    floor = np.broadcast_to(compulsory_bytes(prob, counts), (n,)) * (1.0 - LOWER_BOUND_MARGIN)
    kept = np.arange(n)
    if n > 2 * SEEDS and not one_core:
        seeds = np.sort(np.argpartition(floor, SEEDS - 1)[:SEEDS])
        seed_bytes = moved(seeds)
        best = float(seed_bytes.min())
        if best <= float(floor.min()) / (1.0 - LOWER_BOUND_MARGIN) * (1.0 + 1e-12):
            # a seed moves the compulsory bytes, which no candidate goes below: it is optimal
            o, j = divmod(int(np.argmin(seed_bytes.reshape(-1))), len(seeds))
            i = int(seeds[j])
            return Tiling(tile={d: int(tile[d][i]) for d in DIMS}, order=ORDERS[o])
        kept = np.flatnonzero(floor <= best)
    o, j = divmod(int(np.argmin(moved(kept).reshape(-1))), len(kept))
    i = int(kept[j])
    return Tiling(tile={d: int(tile[d][i]) for d in DIMS}, order=ORDERS[o])


def _traffic_tiling(op: OpBase, prob: Problem, chip: Chip) -> Tiling:
    """The tiling :func:`map_traffic` picks (searched once per op and geometry)."""
    geometry = (chip.sram.capacity_bytes, chip.array.rows, chip.array.cols)
    tiling: Tiling | None = _search_cache((op.signature(), "traffic", geometry),
                                          lambda: _fewest_bytes(prob, chip))  # fmt: skip
    if tiling is None:
        raise InfersimError(
            f"no tiling of {op.kind} {op.name!r} fits {chip.sram.capacity_bytes} B of SRAM "
            f"(chip {chip.name!r})"
        )
    return tiling


def traffic_of(op: OpBase, chip: Chip) -> dict[str, Access]:
    """DRAM reads and writes per operand (bytes) of the tiling :func:`map_traffic` picks: the
    same figures as its mapping's ``traffic["dram"]`` (the same operations), without building
    the rest of the mapping, which the engines' shared-SRAM level does not read.

    Raises:
        InfersimError: as :func:`map_traffic`.
    """
    key = (op.signature(), chip.key, "traffic-dram")
    found = _TRAFFIC.get(key)
    if found is None:
        prob = problem_of(op)
        found = _refetch_free(prob, chip)
        if found is None:  # the searched tiling's
            tiling = _traffic_tiling(op, prob, chip)
            tile = tiling.extents(prob)
            order = (*tiling.order, *(d for d in TILEABLE if d not in tiling.order))
            counts = {d: PY.ceil_div(float(prob.dims[d]), float(tile[d])) for d in DIMS}
            reads, writes, _ = dram_traffic(prob, counts, (order,), chip.cores, PY,
                                            multicast_of(chip), partials_capacity_bytes(chip))
            found = {name: Access(float(reads[name]), float(writes[name])) for name in OPERANDS}
        _TRAFFIC.put(key, found)
    return found


_TRAFFIC: _LRU[dict[str, Access]] = _LRU(maxsize=4096)
""":func:`traffic_of` by (op signature, whole chip): its warm path."""


def map_traffic(op: OpBase, chip: Chip) -> Mapping:
    """The mapping of one repetition of ``op`` on ``chip`` that moves the fewest DRAM bytes
    (on a chip of several cores, with the copies each core fetches): the level of a memory
    hierarchy whose tiling serves reuse, not a dataflow (the analytic engine's shared-SRAM
    level, see
    :func:`infersim.simulator.engines.analytic.level_views`). Its traffic and DRAM figures are
    the tiling's; its fold figures are those of the weight-stationary template and mean nothing
    at this level. The search depends on the SRAM capacity, the array sides (the ladders) and
    the op; it is cached by those.

    Raises:
        UnsupportedDtypeError: the array cannot compute the op's dtype.
        InfersimError: an op kind without a loop nest, or no tile fits the SRAM.
    """
    prob = problem_of(op)
    chip.macs_per_cycle(prob.mac_class)  # raises UnsupportedDtypeError (the mapping's folds)
    key = (op.signature(), chip.key, "traffic")
    found = _CACHE.get(key)
    if found is None:
        tiling = _traffic_tiling(op, prob, chip)
        found = (build_mapping(prob, TEMPLATES["ws"], chip, tiling),)
        _CACHE.put(key, found)
    return found[0]


@overload
def map_op(  # type: ignore[overload-overlap]
    op: OpBase,
    chip: Chip,
    dataflow: str = ...,
    objective: Objective = ...,
    top_k: Literal[1] = ...,
    *,
    exhaustive: bool = ...,
    backing: Backing | None = ...,
) -> Mapping: ...
@overload
def map_op(
    op: OpBase, chip: Chip, dataflow: str, objective: Objective, top_k: int, *,
    exhaustive: bool = ..., backing: Backing | None = ...,
) -> list[Mapping]: ...
def map_op(
    op: OpBase,
    chip: Chip,
    dataflow: str = "best",
    objective: Objective = "latency",
    top_k: int = 1,
    *,
    exhaustive: bool = False,
    backing: Backing | None = None,
) -> Mapping | list[Mapping]:
    """The cheapest mapping of one repetition of ``op`` on ``chip`` for ``objective``
    (``latency``: seconds, ``energy``: pJ, ``edp``: pJ·s), with ``dataflow`` one of ``ws``,
    ``os``, ``is``, ``rs`` or ``best`` (every template the chip implements that can map the op:
    :func:`dataflows_of`). With ``exhaustive``, the latency search prices every candidate
    instead of bounding them (the same answer, slower: the reference the bounded search is
    tested against and the golden corpus records). With ``top_k`` > 1,
    the ``top_k`` cheapest mappings, cheapest first.

    With a ``backing`` (:func:`~infersim.dataflow.loopnest.waves.backing_of`), ``chip`` is the
    cores view of a two-level chip (:func:`~infersim.simulator.engines.analytic.level_views`)
    and every candidate is timed as that chip runs it: its cores' waves against the shared
    SRAM and the op's DRAM traffic behind it
    (:func:`~infersim.dataflow.loopnest.waves.two_level_cycles`); the mappings' ``time_s`` is
    that time. Without one, the time of ``chip`` alone.

    Raises:
        UnsupportedDtypeError: the array cannot compute the op's dtype.
        InfersimError: an unknown dataflow or objective, a dataflow the chip's array does not
            implement, ``top_k`` < 1, an op kind without a loop nest, or no tiling fits the
            SRAM and register file.
    """
    if dataflow not in DATAFLOWS:
        raise InfersimError(f"unknown dataflow {dataflow!r}; allowed: {', '.join(DATAFLOWS)}")
    if objective not in OBJECTIVES:
        raise InfersimError(f"unknown objective {objective!r}; allowed: {', '.join(OBJECTIVES)}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise InfersimError(f"top_k = {top_k!r}: must be an integer >= 1")
    sig = op.signature()
    if objective == "latency" and not exhaustive:  # searched already (so checked): its answer
        done = _CACHE.get(_latency_cache_key(sig, chip, dataflow, top_k, backing))
        if done:
            return done[0] if top_k == 1 else list(done)
    prob, names = _checked(op, chip, dataflow)
    ranked: list[tuple[float, int, Mapping]] = []
    if objective == "latency" and not exhaustive:  # every template in one bounded pass
        key: tuple[Any, ...] = _latency_cache_key(sig, chip, dataflow, top_k, backing)
        found = _CACHE.get(key)
        if found is None:
            found = tuple(m for _, _, m in _search_latency(prob, names, chip, top_k, sig,
                                                           backing=backing))  # fmt: skip
            _CACHE.put(key, found)
        ranked = [(m.time_s, 0, m) for m in found]
    for rank, name in enumerate(names if objective != "latency" or exhaustive else []):
        key = (sig, chip.key, name, objective, top_k, "exhaustive" if exhaustive else "",
               backing)  # fmt: skip
        found = _CACHE.get(key)
        if found is None:
            found = tuple(m for _, m in _search(prob, TEMPLATES[name], chip, objective, top_k,
                                                (sig, name), backing))
            _CACHE.put(key, found)
        ranked.extend((mapping_cost(m, chip, objective), rank, m) for m in found)
    if not ranked:
        raise InfersimError(
            f"no {dataflow} tiling of {op.kind} {op.name!r} fits chip {chip.name!r}: SRAM "
            f"{chip.sram.capacity_bytes} B per core, register file "
            f"{chip.register_file.bytes_per_pe} B per PE"
        )
    ranked.sort(key=lambda item: (item[0], item[1]))
    best = [m for _, _, m in ranked[:top_k]]
    return best[0] if top_k == 1 else best


__all__ = [
    "DATAFLOWS", "OBJECTIVES", "ORDERS", "STATS", "TILEABLE", "clear_cache", "dataflows_of",
    "geometry_key",
    "map_op", "map_traffic", "mapping_cost", "search_many", "traffic_many",
    "traffic_of",
]
