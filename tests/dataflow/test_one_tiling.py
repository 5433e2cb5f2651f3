"""The plain-float shortcuts of one tiling (the path every picked mapping takes) compute what the
generic rules compute: :func:`~infersim.dataflow.loopnest.tiles.tile_classes` with
:data:`~infersim.dataflow.loopnest.PY` equals, bit for bit, the same rule run on another float
namespace (which takes the generic code) and on numpy arrays of that one tiling;
:func:`~infersim.dataflow.loopnest.rf_need` (its held dims per operand found once per template)
equals the rule written out per operand, in floats and in arrays."""

from __future__ import annotations

from typing import Any

import numpy as np
from dataflow_helpers import CONVS
from hypothesis import given, settings
from hypothesis import strategies as st

from infersim.dataflow.loopnest import DIMS, NP, PY, MathNamespace, Problem, problem_of, rf_need
from infersim.dataflow.loopnest.folds import kept_folds
from infersim.dataflow.loopnest.numerics import FloatMath
from infersim.dataflow.loopnest.problem import DEPENDS, footprint
from infersim.dataflow.loopnest.tiles import tile_classes
from infersim.dataflow.templates import OPERANDS, TEMPLATES, Template
from infersim.workloads.ops import Gemm, OpBase

GENERIC = FloatMath()  # the same operations as PY, but not PY: the generic code path

GEMMS = st.builds(
    lambda m, k, n: Gemm(name="g", m=m, k=k, n=n),
    m=st.sampled_from([1, 7, 64, 300, 2048]), k=st.sampled_from([64, 1000, 4096]),
    n=st.sampled_from([32, 300, 4096]),
)  # fmt: skip


def _tile(op: OpBase, data: st.DataObject) -> dict[str, float]:
    prob = problem_of(op)
    return {d: float(data.draw(st.integers(1, prob.dims[d]), label=d)) for d in DIMS}


def _as_floats(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _as_floats(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_as_floats(v) for v in x]
    if isinstance(x, np.ndarray):  # one tiling's array: its one value
        return float(x.reshape(-1)[0])
    return x if x is None else float(x)


@settings(max_examples=200, deadline=None)
@given(op=st.one_of(GEMMS, CONVS), data=st.data())
def test_one_tiling_s_tile_classes_equal_the_generic_rule(op: OpBase, data: st.DataObject) -> None:
    prob = problem_of(op)
    tile = _tile(op, data)
    fast, generic = tile_classes(prob, tile, PY), tile_classes(prob, tile, GENERIC)
    assert fast == generic
    assert all(type(a) is type(b) for a, b in zip(fast.whole.values(), generic.whole.values(),
                                                  strict=True))  # fmt: skip
    # the array rule on that one tiling: the same classes, counts and extents
    arrays = tile_classes(prob, {d: np.array([v]) for d, v in tile.items()}, NP)
    assert _as_floats(arrays.counts) == _as_floats(fast.counts)
    kept = [(ext, w) for ext, w in arrays.classes if w is None or float(np.asarray(w)[0]) > 0.5]
    assert _as_floats(kept) == _as_floats(fast.classes)


def _reference_rf_need(
    prob: Problem, tpl: Template, tile: dict[str, Any], rf: dict[str, Any], xp: MathNamespace
) -> Any:
    """The PE working set, every operand's first reuse found where it is needed."""
    pe = {d: xp.minimum(rf[d], tile[d]) if d in tpl.rf_split else tile[d] for d in tpl.stream}
    need: Any = xp.zeros_like(tile["G"])
    if not tpl.local_reuse:
        return need
    for name in OPERANDS:
        first_reuse = next((i for i, d in enumerate(tpl.stream) if d not in DEPENDS[name]), None)
        if name == tpl.stationary and kept_folds(tpl) is not None:
            first_reuse = 0
        if first_reuse is None:
            continue
        inner = {d: pe[d] for d in tpl.stream[first_reuse:]}
        held = footprint(name, inner, prob.stride, tpl.window_reuse)
        need = need + xp.maximum(held - 1.0, 0.0) * prob.operand_bytes[name]
    return need


@settings(max_examples=200, deadline=None)
@given(op=st.one_of(GEMMS, CONVS), name=st.sampled_from(sorted(TEMPLATES)), data=st.data())
def test_one_tiling_s_rf_need_equals_the_generic_rule(
    op: OpBase, name: str, data: st.DataObject
) -> None:
    prob, tpl = problem_of(op), TEMPLATES[name]
    tile = _tile(op, data)
    rf = {d: float(data.draw(st.sampled_from([1, 2, 4, 16]), label="rf" + d))
          for d in tpl.rf_split}  # fmt: skip
    fast = rf_need(prob, tpl, tile, rf, PY)
    assert fast == _reference_rf_need(prob, tpl, tile, rf, PY)
    arrays = ({d: np.array([v]) for d, v in tile.items()},
              {d: np.array([v]) for d, v in rf.items()})
    assert float(rf_need(prob, tpl, *arrays, NP)[0]) == fast
    assert float(_reference_rf_need(prob, tpl, *arrays, NP)[0]) == fast
