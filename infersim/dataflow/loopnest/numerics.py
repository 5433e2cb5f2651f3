"""The two math namespaces every counting rule of the analyzer is written against.

A rule is written once, as a function of ``xp``: :data:`NP` evaluates it on float64 arrays, one
element per candidate tiling (numpy broadcasting: a figure the same on every candidate may stay
one float), :data:`PY` on plain Python floats for one tiling (no per-call numpy overhead). Every
operation is the IEEE-754 double operation numpy performs element by element, so a figure
computed with :data:`PY` equals bit for bit the element :data:`NP` computes.

Besides elementwise operations, a namespace knows how to evaluate a rule over several rows or
classes of each candidate (the cut dims of a tile; its full and remainder tiles or folds): numpy
stacks them into one call, floats loop.

A batched search's tests of "on every candidate" and "on some candidate" count elements
(``np.count_nonzero``, one C call) instead of reducing them (``ndarray.all`` and ``any`` run
numpy's reduction machinery behind a Python wrapper): a cold point of a model's step then never
runs that code, whose instructions would be fetched for a handful of calls (one op's own search,
whose extents are numbers, still reduces its stacked comparison in one call).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, cast

import numpy as np
import numpy.typing as npt

Arr = npt.NDArray[np.float64]
"""A figure of many candidate tilings: float64, one element per candidate."""

Candidates = dict[str, Arr]
"""Per dim: its value on each candidate tiling."""

Figures = dict[str, Any]
"""Named figures: floats, or arrays over candidates (broadcastable to one another)."""

Classes = list[tuple[dict[str, Any], Any]]
"""Per class: its inputs (those that differ between classes) and its weight, how many of it
each candidate has (None: one on every candidate)."""

DENSE_MAX = 16384
"""Elements (classes × candidates) up to which :meth:`NumpyMath.sum_classes` evaluates every
class on every candidate (fewer numpy calls); above it, each class on the candidates with it."""


def prod(values: Iterable[Any]) -> Any:
    """``1.0`` times every value, left to right."""
    return math.prod(values, start=1.0)


def prod_skipping_ones(values: Iterable[Any]) -> Any:
    """:func:`prod` of floats and float64 arrays, bit for bit, without the products by a value
    that is the float 1.0 (x · 1.0 is x exactly): a figure kept as 1.0 instead of a column of
    ones costs no array operation."""
    total: Any = None
    for value in values:
        if isinstance(value, float) and value == 1.0:
            continue
        total = value if total is None else total * value
    return 1.0 if total is None else total


class MathNamespace(Protocol):
    """What a counting rule may call on ``xp`` (see the module docstring)."""

    def minimum(self, a: Any, b: Any, /) -> Any: ...
    def maximum(self, a: Any, b: Any, /) -> Any: ...
    def where(self, cond: Any, a: Any, b: Any, /) -> Any: ...
    def floor(self, x: Any, /) -> Any: ...
    def ceil_div(self, a: Any, b: Any, /) -> Any: ...
    def zeros_like(self, x: Any, /) -> Any: ...
    def full_like(self, x: Any, value: float, /) -> Any: ...
    def ones(self, n_orders: int, like: Any, /) -> Any: ...
    def equal_each(self, values: Sequence[Any], targets: Sequence[Any], /) -> list[bool]: ...
    def any_each(self, values: Sequence[Any], /) -> list[bool]: ...
    def max_each(self, values: Sequence[Any], /) -> list[float]: ...
    def batch(
        self, fn: Callable[..., tuple[Any, ...]], rows: Sequence[tuple[Any, ...]], /, *args: Any
    ) -> list[tuple[Any, ...]]: ...
    def sum_classes(
        self, fn: Callable[..., Figures], classes: Classes, /, *shared: dict[str, Any]
    ) -> Figures: ...


def filled(shape: int | tuple[int, ...], value: float) -> Arr:
    """``np.full(shape, value)`` of a float ``value``: an empty float64 array filled in
    place (the same array, without ``np.full``'s Python wrapper, whose code a cold point
    runs for a handful of calls)."""
    out = np.empty(shape)
    out.fill(value)
    return out


def _full_like(x: Any, value: float) -> Any:
    """``np.full_like(x, value)``: an empty array like ``x`` filled in place (see
    :func:`filled`)."""
    out = np.empty_like(x)
    out.fill(value)
    return out


def _ceil_div(a: Any, b: Any) -> Any:
    return np.ceil(a / b - 1e-9)


def _size(values: Iterable[Any]) -> int:
    """The number of candidates: the length of the first array among ``values``."""
    return next(len(v) for v in values if isinstance(v, np.ndarray) and v.ndim)


def _column(value: Any, size: int) -> Any:
    """``value`` over ``size`` candidates (a number: repeated)."""
    return value if isinstance(value, np.ndarray) and value.ndim else np.full(size, value)


class NumpyMath:
    """The operations on float64 arrays, one element per candidate tiling."""

    minimum = staticmethod(np.minimum)
    maximum = staticmethod(np.maximum)
    where: Callable[..., Any] = staticmethod(np.where)
    floor = staticmethod(np.floor)
    ceil_div = staticmethod(_ceil_div)
    zeros_like = staticmethod(np.zeros_like)
    full_like = staticmethod(_full_like)

    @staticmethod
    def ones(n_orders: int, like: Arr) -> Arr:
        """1.0 per loop order and candidate: shape (orders, candidates)."""
        return filled((n_orders, len(like)), 1.0)

    @staticmethod
    def equal_each(values: Sequence[Any], targets: Sequence[Any]) -> list[bool]:
        """Per value, whether it equals its target (a number, or one per candidate) on every
        candidate."""
        if any(isinstance(t, np.ndarray) for t in targets):
            # no element differs: counted, not reduced (.all() is a ufunc reduction behind a
            # Python wrapper; count_nonzero is one C call: see the module docstring)
            return [not np.count_nonzero(np.not_equal(v, t))
                    for v, t in zip(values, targets, strict=True)]  # fmt: skip
        equal = np.array(values) == np.array(targets, dtype=np.float64)[:, None]
        return cast("list[bool]", equal.all(axis=1).tolist())

    @staticmethod
    def any_each(values: Sequence[Any]) -> list[bool]:
        """Per value, whether it holds on some candidate."""
        return [bool(np.count_nonzero(v)) for v in values]

    @staticmethod
    def max_each(values: Sequence[Any]) -> list[float]:
        """Per value, its largest element (the first NaN where it has one, as ``max`` gives
        NaN: read at ``argmax``, which stops there; of equal zeros, the first, whose sign
        ``max`` may not keep: the callers compare the maxima with 1.5)."""
        return [float(v.item(v.argmax())) for v in values]

    @staticmethod
    def batch(
        fn: Callable[..., tuple[Any, ...]], rows: Sequence[tuple[Any, ...]], *args: Any
    ) -> list[tuple[Any, ...]]:
        """``fn(*row, *args)`` of each row, all rows in one call on the stacked rows: a column
        of arrays becomes one array per row, a column of numbers one number per row."""
        if not rows:
            return []
        columns = []
        for column in zip(*rows, strict=True):
            arrays = sum(isinstance(v, np.ndarray) and v.ndim > 0 for v in column)
            if arrays == len(column):
                columns.append(np.array(column))
            elif arrays == 0:
                columns.append(np.array(column, dtype=np.float64)[:, None])
            else:  # numbers and arrays mixed: each number repeated
                size = _size(column)
                columns.append(np.array([_column(v, size) for v in column]))
        figures = fn(*columns, *args)
        # each row's figures by index: iterating an array ends on an IndexError whose message
        # numpy formats (printf's code, on every call)
        at = range(len(rows))
        return list(zip(*([figure[i] for i in at] for figure in figures), strict=True))

    @staticmethod
    def sum_classes(
        fn: Callable[..., Figures], classes: Classes, *shared: dict[str, Any]
    ) -> Figures:
        """Every figure of ``fn(inputs, *shared)`` times the class weight, summed over the
        classes in class order, all classes evaluated in ONE stacked call (``shared`` inputs
        are the same for every class).

        Up to :data:`DENSE_MAX` elements every class is evaluated on every candidate (a
        candidate without a class weighs its finite figures by 0.0, which adds nothing:
        x + 0.0 == x); above it, each class only on the candidates that have it. Either way
        each candidate's figure is the same sum, in the same order, as class by class.
        """
        every = [v for s in shared for v in s.values()]
        if len(classes) == 1:  # nothing to stack
            inputs, weight = classes[0]
            if weight is None:
                weight = filled(_size([*inputs.values(), *every]), 1.0)
            return {key: weight * value for key, value in fn(inputs, *shared).items()}
        size = _size([w for _, w in classes] + [*classes[0][0].values(), *every])
        masked = len(classes) * size > DENSE_MAX
        parts: list[tuple[Any, int, int]] = []  # (its candidates or None: all, start, stop)
        weights: list[Arr] = []
        varying: dict[str, list[Arr]] = {key: [] for key in classes[0][0]}
        start = 0
        for inputs, weight in classes:
            w = filled(size, 1.0) if weight is None else _column(weight, size)
            idx = None
            if masked and weight is not None:
                present = w > 0.5
                if not present.any():
                    continue
                if not present.all():
                    idx = np.flatnonzero(present)
                    w = w[idx]
            for key, value in inputs.items():
                column = _column(value, size)
                varying[key].append(column if idx is None else column[idx])
            weights.append(w)
            parts.append((idx, start, start + len(w)))
            start += len(w)
        if not parts:
            return {}

        def stacked(v: Any) -> Any:  # a shared array over the candidates of every part
            if not (isinstance(v, np.ndarray) and v.ndim):
                return v
            pieces = [v if idx is None else v[idx] for idx, _, _ in parts]
            return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)

        sums = fn(
            {key: v[0] if len(v) == 1 else np.concatenate(v) for key, v in varying.items()},
            *({key: stacked(v) for key, v in s.items()} for s in shared),
        )
        if len(parts) == 1 and parts[0][0] is None:
            return {key: weights[0] * value for key, value in sums.items()}
        keys = list(sums)
        table = np.empty((len(keys), start))
        for j, key in enumerate(keys):
            table[j] = sums[key]  # a figure the same on every candidate is broadcast
        weighted = (weights[0] if len(weights) == 1 else np.concatenate(weights)) * table
        acc = np.zeros((len(keys), size))
        for idx, lo, hi in parts:
            if idx is None:
                acc = acc + weighted[:, lo:hi]
            else:
                acc[:, idx] = acc[:, idx] + weighted[:, lo:hi]
        return {key: acc[j] for j, key in enumerate(keys)}


class FloatMath:
    """The same operations on plain Python floats (one tiling)."""

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

    @staticmethod
    def ones(n_orders: int, like: float) -> float:
        return 1.0

    @staticmethod
    def equal_each(values: Sequence[Any], targets: Sequence[Any]) -> list[bool]:
        return [v == t for v, t in zip(values, targets, strict=True)]

    @staticmethod
    def any_each(values: Sequence[Any]) -> list[bool]:
        return [bool(v) for v in values]

    @staticmethod
    def max_each(values: Sequence[Any]) -> list[float]:
        return list(values)

    @staticmethod
    def batch(
        fn: Callable[..., tuple[Any, ...]], rows: Sequence[tuple[Any, ...]], *args: Any
    ) -> list[tuple[Any, ...]]:
        return [fn(*row, *args) for row in rows]

    @staticmethod
    def sum_classes(
        fn: Callable[..., Figures], classes: Classes, *shared: dict[str, Any]
    ) -> Figures:
        """:meth:`NumpyMath.sum_classes` of one tiling: the classes it has, one by one."""
        if len(classes) == 1 and classes[0][1] is None:  # one of it: 1.0 × x == x
            return fn(classes[0][0], *shared)
        total: Figures | None = None
        for inputs, weight in classes:
            w = 1.0 if weight is None else float(weight)
            if not w > 0.5:
                continue
            sums = fn(inputs, *shared)
            if total is None:  # (a comprehension: w.__mul__ mapped over a zip costs twice as much)
                total = {key: w * value for key, value in sums.items()}
            else:
                for key, value in sums.items():
                    total[key] += w * value
        return total or {}


NP: MathNamespace = NumpyMath()
"""Float64 arrays over candidate tilings."""

PY: MathNamespace = FloatMath()
"""Plain floats of one tiling."""
