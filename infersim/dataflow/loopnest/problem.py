"""The inputs of the analyzer: an op as the unified loop nest (:class:`Problem`), what every
counting rule reads (:class:`Nest`), a tiling (:class:`Tiling`), and the element and byte
counts of an operand's tensor region.

Every count here is elementwise arithmetic that works alike on plain floats (one tiling) and on
float64 arrays (one element per candidate tiling); ``xp`` is the math namespace of
:mod:`infersim.dataflow.loopnest.numerics` that matches them.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from infersim import dtypes
from infersim.arch_models.chip import Chip
from infersim.dataflow.loopnest.numerics import MathNamespace
from infersim.dataflow.templates import DIMS, Template
from infersim.errors import InfersimError
from infersim.workloads.ops import Conv2d, Gemm, OpBase

TILEABLE: tuple[str, ...] = ("G", "N", "K", "C", "P", "Q")
"""Dims an SRAM tile may cut (filter rows and columns are always whole)."""

AXES: dict[str, tuple[tuple[str, ...], ...]] = {
    "input": (("G",), ("N",), ("C",), ("P", "R"), ("Q", "S")),
    "weight": (("G",), ("K",), ("C",), ("R",), ("S",)),
    "output": (("G",), ("N",), ("K",), ("P",), ("Q",)),
}
"""Each operand's tensor axes; a two-dim axis is a sliding window (rows = P·stride + R)."""

Order = tuple[str, ...]
"""A DRAM loop order: tileable dims, outer to inner."""

Orders = tuple[Order, ...]
"""Several DRAM loop orders (all orders of the same dims)."""

DEPENDS: dict[str, frozenset[str]] = {
    name: frozenset(d for axis in axes for d in axis) for name, axes in AXES.items()
}
"""The dims each operand's index depends on."""

_AXIS_DIMS: dict[str, tuple[str, ...]] = {
    name: tuple(axis[0] for axis in axes) for name, axes in AXES.items()
}
"""The first dim of each axis of :data:`AXES`."""


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


_PROBLEMS: dict[tuple[Any, ...], Problem] = {}
""":func:`problem_of` by the op's signature (every engine asks it several times per op)."""
_PROBLEMS_MAX = 4096


def clear_problems() -> None:
    """Forget every memoized :func:`problem_of`."""
    _PROBLEMS.clear()


def problem_of(op: OpBase) -> Problem:
    """The unified loop nest of a :class:`Gemm` or :class:`Conv2d` (memoized by the op's
    signature: treat it as read-only).

    A GEMM's reduction dim C is the k positions the array performs (half of k for 2:4 sparse
    B, fewer for unstructured sparsity a sparse kernel skips); A and B keep their bytes (B as
    stored: compressed values and indices, or a weight-only format). Weights in a storage-only
    format stay in it up to the array (dequantization is vector work, costed elsewhere).

    Raises:
        InfersimError: any other operator kind (it does not run on the systolic array), or a
            storage-only compute dtype.
    """
    key = op.signature()
    found = _PROBLEMS.get(key)
    if found is None:
        if len(_PROBLEMS) >= _PROBLEMS_MAX:
            _PROBLEMS.clear()
        found = _PROBLEMS[key] = _problem_of(op)
    return found


def _problem_of(op: OpBase) -> Problem:
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
            "weight": op.b_bits / 8 * per_k,
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


STACK_SHARED: tuple[str, ...] = ("R", "S")
"""Dims that ops stacked into one :func:`stacked` problem share (with the stride and the MAC
class): their filter windows, which enter some rules as plain numbers."""


def stack_key(prob: Problem) -> tuple[Any, ...]:
    """What problems stacked by :func:`stacked` must share."""
    return (prob.mac_class, prob.stride, *(prob.dims[d] for d in STACK_SHARED))


def stacked(probs: Sequence[Problem], sizes: Sequence[int]) -> Problem:
    """One :class:`Problem` of the candidates of several: ``sizes[i]`` candidates of
    ``probs[i]``, one after another, every field in which the problems differ an array over
    those candidates (float64), one in which they agree a float, and the fields of
    :func:`stack_key` plain. Every rule of the analyzer evaluates it element for element as it
    evaluates each problem alone with arrays of its candidates.

    Raises:
        ValueError: problems that differ in a field of :func:`stack_key`.
    """
    keys = {stack_key(p) for p in probs}
    if len(keys) != 1:
        raise ValueError(f"stacked problems must share {stack_key.__doc__}: got {keys}")

    counts = np.array(sizes, dtype=np.intp)  # (converted once, not by each repeat)

    def column(values: list[float]) -> Any:  # one value on every candidate: one float
        if values.count(values[0]) == len(values):  # (no generator's frame)
            return float(values[0])
        return np.array(values, dtype=np.float64).repeat(counts)

    first = probs[0]
    dims: dict[str, Any] = {
        d: first.dims[d] if d in STACK_SHARED else column([p.dims[d] for p in probs])
        for d in first.dims
    }
    return Problem(
        dims=dims,
        stride=first.stride,
        in_h=column([p.in_h for p in probs]),
        in_w=column([p.in_w for p in probs]),
        padded_h=column([p.padded_h for p in probs]),
        padded_w=column([p.padded_w for p in probs]),
        operand_bytes={n: column([p.operand_bytes[n] for p in probs]) for n in first.operand_bytes},
        mac_class=first.mac_class,
        macs=column([p.macs for p in probs]),
        output_write_scale=column([p.output_write_scale for p in probs]),
    )


class Nest(NamedTuple):
    """What every counting rule reads: the op as the nest, the dataflow, the chip, and the
    array's MACs per PE per cycle for the op's MAC class (see :func:`nest_of`)."""

    prob: Problem
    tpl: Template
    chip: Chip
    rate: float


def nest_of(prob: Problem, tpl: Template, chip: Chip) -> Nest:
    """The :class:`Nest` of ``prob`` mapped by ``tpl`` on ``chip`` (the chip rates the op's MAC
    class: see :meth:`Chip.macs_per_cycle`)."""
    rate = float(chip.array.macs_per_pe_per_cycle[prob.mac_class])  # type: ignore[index]
    return Nest(prob, tpl, chip, rate)


@dataclass(frozen=True)
class Tiling:
    """Tile factors of a mapping: SRAM tile extents, the DRAM loop order and the PE RF factors.

    ``tile`` maps a dim of :data:`TILEABLE` to its SRAM tile extent (absent: the whole dim);
    ``order`` is the DRAM loop order, outer to inner (dims left out go innermost, in
    :data:`TILEABLE` order); ``rf`` maps a template ``rf_split`` dim to its in-PE factor
    (absent: 1). ``Tiling()`` is the whole op as one tile (SCALE-Sim's view).
    """

    tile: dict[str, int] = field(default_factory=dict)
    order: Order = TILEABLE
    rf: dict[str, int] = field(default_factory=dict)

    def extents(self, prob: Problem) -> dict[str, int]:
        """The SRAM tile extent along every dim of :data:`DIMS` (capped at the dim)."""
        return {d: min(self.tile.get(d, prob.dims[d]), prob.dims[d]) for d in DIMS}


def footprint(operand: str, ext: dict[str, Any], stride: int, window: bool) -> Any:
    """Elements of ``operand`` touched when each dim spans ``ext[d]`` indices (absent: 1).

    A window axis spans ``(P − 1)·stride + R`` rows when ``window`` (the ifmap region) and
    ``P·R`` otherwise (the im2col matrix). Works on numbers and on numpy arrays alike.
    """
    get = ext.get
    if operand != "input":  # no window axis: 1.0 times each dim's extent, left to right
        return math.prod(map(get, _AXIS_DIMS[operand], _ONES), start=1.0)
    g, n, c, p, r, q, s = map(get, _INPUT_DIMS, _ONES)
    if window:
        return 1.0 * g * n * c * ((p - 1) * stride + r) * ((q - 1) * stride + s)
    return 1.0 * g * n * c * (p * r) * (q * s)


_INPUT_DIMS = ("G", "N", "C", "P", "R", "Q", "S")
"""The dims of the input's axes (:data:`AXES`), in order."""
_ONES = (1,) * len(_INPUT_DIMS)
"""An extent of 1 for each dim :func:`footprint` reads (its default)."""


def tile_bytes(prob: Problem, name: str, tile: dict[str, Any], xp: MathNamespace) -> Any:
    """Bytes of ``name`` in one full SRAM tile (the ifmap region, capped at the padded input):
    the product of its :func:`tile_factors`, left to right."""
    return functools.reduce(operator.mul, tile_factors(prob, name, tile, xp))


def tile_factors(prob: Problem, name: str, tile: dict[str, Any], xp: MathNamespace) -> list[Any]:
    """What :func:`tile_bytes` multiplies, left to right: the tile's extent along each axis of
    ``name`` (the input's rows and columns: the window of its output rows and columns, capped at
    the padded input; no other operand has a window axis), then the bytes per element."""
    if name != "input":
        return [*map(tile.__getitem__, _AXIS_DIMS[name]), prob.operand_bytes[name]]
    rows = xp.minimum(window(tile["P"], prob.stride, tile["R"]), prob.padded_h)
    cols = xp.minimum(window(tile["Q"], prob.stride, tile["S"]), prob.padded_w)
    return [tile["G"], tile["N"], tile["C"], rows, cols, prob.operand_bytes[name]]


def window(extent: Any, stride: int, taps: Any) -> Any:
    """The input positions ``extent`` output positions read through a window of ``taps`` at
    ``stride``: (extent − 1)·stride + taps, which for one tap at stride 1 is ``extent`` itself
    (exactly, extents being whole numbers; an array is returned as it is)."""
    if stride == 1 and isinstance(taps, float | int) and taps == 1:
        return extent
    return (extent - 1) * stride + taps


def total_footprint(prob: Problem, name: str, counts: dict[str, Any]) -> Any:
    """Elements of ``name`` summed over all distinct SRAM tiles (the whole tensor plus the input
    halos), with ``counts[d]`` tiles along each dim: 1.0 times each axis's extent, left to
    right, less the products by an extent of 1 and by the start 1.0 of a float64 array (x · 1
    is x exactly)."""
    total: Any = None
    dims = prob.dims
    for axis in AXES[name]:
        if axis == ("P", "R"):
            factor = _rows_with_halos(prob.in_h, counts["P"], dims["R"] - prob.stride)
        elif axis == ("Q", "S"):
            factor = _rows_with_halos(prob.in_w, counts["Q"], dims["S"] - prob.stride)
        else:
            factor = dims[axis[0]]
        if isinstance(factor, float | int) and factor == 1:
            continue
        if total is not None:
            total = total * factor
        else:  # the first factor times 1.0 (a number: a float, as the product makes it)
            float64 = isinstance(factor, np.ndarray) and factor.dtype == np.float64
            total = factor if float64 else 1.0 * factor
    return 1.0 if total is None else total


def _rows_with_halos(rows: Any, tiles: Any, overlap: int) -> Any:
    """The input rows (or columns) that ``tiles`` tiles along the output rows read, each
    tile's halo of ``overlap`` rows again (none below 0): without a halo, the rows themselves
    (x + (n − 1) · 0 is x exactly, the tile counts being finite)."""
    if overlap <= 0:
        return rows
    return rows + (tiles - 1) * overlap
