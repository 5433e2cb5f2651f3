"""The counting shortcuts of a cold search give what the rules they replace give, bit for bit:
the namespace's "on every candidate" and "on some candidate" tests (counted, not reduced), its
per-value maxima (read at ``argmax``: the same value, the first NaN where there is one), the
two-level share (``_share``) and an operand's
footprint (one product per operand, not a loop over its axes), on values with NaNs, infinities,
zeros and negative zeros among them."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from infersim.dataflow.loopnest import NP
from infersim.dataflow.loopnest.problem import AXES, footprint
from infersim.dataflow.loopnest.waves import _share

FLOATS = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, 2.0, math.inf, -math.inf, math.nan]),
    st.floats(-1e6, 1e6, allow_nan=False),
)
SIZE = st.integers(1, 12)


def _arrays(draw: st.DrawFn, size: int, count: int) -> list[np.ndarray]:
    return [np.array(draw(st.lists(FLOATS, min_size=size, max_size=size))) for _ in range(count)]


def _same(a: Any, b: Any) -> bool:
    """Equal bit for bit (a NaN equals a NaN, 0.0 differs from -0.0)."""
    return np.asarray(a, dtype=np.float64).tobytes() == np.asarray(b, dtype=np.float64).tobytes()


@settings(max_examples=300, deadline=None)
@given(st.data(), SIZE, st.integers(1, 6))
def test_every_and_some_candidate_tests_are_the_reductions(
    data: st.DataObject, size: int, count: int
) -> None:
    values = data.draw(st.composite(lambda draw: _arrays(draw, size, count))())
    targets = data.draw(st.composite(lambda draw: _arrays(draw, size, count))())
    # some targets one number (a dim whole on every candidate), as tile_classes passes them
    mixed = [t if data.draw(st.booleans()) else float(t[0]) for t in targets]
    mixed[0] = targets[0]  # at least one array: the path that counts
    assert NP.equal_each(values, mixed) == [bool(np.equal(v, t).all())
                                            for v, t in zip(values, mixed, strict=True)]
    flags = [v > 0.5 for v in values]
    assert NP.any_each(flags) == [bool(f.any()) for f in flags]
    assert NP.any_each([]) == []
    for m, v in zip(NP.max_each(values), values, strict=True):  # (a zero's sign aside)
        assert m == v.max() or (math.isnan(m) and math.isnan(v.max()))


@settings(max_examples=300, deadline=None)
@given(st.data(), SIZE)
def test_share_is_the_guarded_quotient(data: st.DataObject, size: int) -> None:
    part, whole = data.draw(st.composite(lambda draw: _arrays(draw, size, 2))())
    some = whole > 0
    with np.errstate(all="ignore"):
        got = _share(part, whole, NP)
        guarded = np.where(some, part / np.where(some, whole, 1.0), 0.0)
        expected = part / whole if some.all() else guarded
    assert _same(got, expected)


@settings(max_examples=300, deadline=None)
@given(st.data(), st.sampled_from(sorted(AXES)), st.integers(1, 3), st.booleans(),
       st.booleans())
def test_footprint_is_the_product_over_the_axes(
    data: st.DataObject, operand: str, stride: int, window: bool, arrays: bool
) -> None:
    extents = st.integers(1, 4096).map(float)
    dims = sorted({d for axis in AXES[operand] for d in axis})
    ext: dict[str, Any] = {d: data.draw(extents, label=d) for d in dims
                           if data.draw(st.booleans(), label=f"has {d}")}  # absent: 1
    if arrays and ext:  # one dim an array over candidates, as the grids pass it
        d = sorted(ext)[0]
        ext[d] = np.array([ext[d], ext[d] + 1.0, 1.0])
    total: Any = 1.0  # the rule as written per axis, left to right
    for axis in AXES[operand]:
        o = ext.get(axis[0], 1)
        if len(axis) == 1:
            total = total * o
        else:
            i = ext.get(axis[1], 1)
            total = total * ((o - 1) * stride + i if window else o * i)
    got = footprint(operand, ext, stride, window)
    assert _same(got, total) and type(got) is type(total)
