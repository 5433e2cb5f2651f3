"""The mapper's fitting candidates (``mapper._fitting``) against a straightforward reference:
every figure on the whole broadcast grid, the fit tests of the library's own rules
(:func:`~infersim.dataflow.mapper.sram_need`, :func:`~infersim.dataflow.mapper.register_fit`,
:func:`~infersim.dataflow.loopnest.rf_need`), and the covered candidates removed by one
comparison with every neighbour. The two must agree bit for bit: the same candidates in the same
order, the same float64 values."""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infersim.arch_models.chip import Chip
from infersim.arch_models.presets import load_chip
from infersim.dataflow.loopnest import DIMS, NP, Problem, problem_of, rf_need, tile_bytes
from infersim.dataflow.loopnest.numerics import prod
from infersim.dataflow.mapper import (
    _CUT,
    _RF_FACTORS,
    _aligns_of,
    _axis,
    _fitting,
    _rf_options,
    _traffic_aligns,
    _uncovered,
)
from infersim.dataflow.templates import (
    ACCUMULATOR_BYTES,
    ACCUMULATOR_SHARE,
    OPERANDS,
    TEMPLATES,
    Template,
)
from infersim.workloads.ops import Conv2d, Gemm

Grid = tuple[dict[str, Any], dict[str, Any]]


def reference_sram_need(prob: Problem, tpl: Template | None, tile: dict[str, Any]) -> Any:
    names = ("input", "weight") if tpl is not None and tpl.output_in_registers else OPERANDS
    return 2.0 * sum(tile_bytes(prob, name, tile, NP) for name in names)


def reference_register_fit(prob: Problem, tpl: Template | None, tile: dict[str, Any],
                           chip: Chip) -> Any:  # fmt: skip
    if tpl is None:
        return True
    ok: Any = True
    if tpl.min_tile_rows > 1:
        rows = prod(tile[d] for d in tpl.rows)
        whole = math.prod(prob.dims[d] for d in tpl.rows)
        ok = rows >= min(tpl.min_tile_rows, whole)
    if not tpl.output_in_registers:
        return ok
    out = tile["G"] * tile["N"] * tile["K"] * tile["P"] * tile["Q"]
    budget = ACCUMULATOR_SHARE * chip.register_file.bytes_per_pe * chip.array.pes
    return ok & (out * ACCUMULATOR_BYTES <= budget)


def reference_uncovered(fits: Any, step: int, axes: int) -> Any:
    """The entries of ``fits`` whose one step up (index + ``step``) along each of the first
    ``axes`` axes does not fit."""
    up = np.zeros(fits.shape, dtype=bool)
    for j in range(axes):
        lead = (slice(None),) * j
        here, above = ((slice(None, -1), slice(1, None)) if step > 0
                       else (slice(1, None), slice(None, -1)))  # fmt: skip
        up[(*lead, here)] |= fits[(*lead, above)]
    return fits & ~up


def reference_fitting(
    prob: Problem, tpl: Template | None, chip: Chip, ladders: list[list[int]],
    rf_opts: list[dict[str, int]], maximal: bool,
) -> Grid:
    """The fitting candidates as the mapper computed them before it evaluated each figure on
    the axes it depends on: every dim and RF factor a column of the whole grid."""
    axes = [np.array(ladder, dtype=np.float64) for ladder in ladders]
    split = tpl.rf_split if tpl is not None else ()
    options = np.array([[o[d] for d in split] for o in rf_opts], dtype=np.float64)
    shape = (*(len(a) for a in axes), len(rf_opts))

    def along(j: int, values: Any) -> Any:
        return values.reshape([len(values) if i == j else 1 for i in range(len(shape))])

    tile: dict[str, Any] = {d: along(i, a) for i, (d, a) in enumerate(zip(_CUT, axes,
                                                                            strict=True))}
    for d in DIMS:
        tile.setdefault(d, float(prob.dims[d]))
    rf = {d: along(len(_CUT), options[:, i]) for i, d in enumerate(split)}
    need = reference_sram_need(prob, tpl, tile)
    ok = np.broadcast_to((need <= chip.sram.capacity_bytes)
                         & reference_register_fit(prob, tpl, tile, chip),
                         shape)  # fmt: skip
    if tpl is not None and tpl.rf_split:
        ok = ok & (rf_need(prob, tpl, tile, rf, NP) <= chip.register_file.bytes_per_pe + 1e-9)
    if maximal:
        ok = reference_uncovered(ok, step=-1, axes=len(_CUT))
    at = np.unravel_index(np.flatnonzero(ok), shape)
    fit = {d: a[at[i]] for i, (d, a) in enumerate(zip(_CUT, axes, strict=True))}
    n = len(at[0])
    for d in DIMS:
        fit.setdefault(d, np.full(n, float(prob.dims[d])))
    return fit, {d: options[at[-1], i] for i, d in enumerate(split)}


def assert_same(got: Grid, want: Grid) -> None:
    """The same dims, dtypes, shapes and bits (the order of the candidates included)."""
    for part, reference in zip(got, want, strict=True):
        assert list(part) == list(reference)
        for d, values in reference.items():
            assert part[d].dtype == values.dtype == np.float64, d
            assert part[d].shape == values.shape, d
            assert part[d].tobytes() == values.tobytes(), d


COMPUTE = ("int8", "int16", "bf16", "fp16", "fp32", "fp8")


@st.composite
def problems(draw: st.DrawFn) -> Problem:
    """GEMMs (batched, sparse, with weight-only formats whose bytes per element are fractions)
    and convolutions (strides, padding, windows up to 7x7, input rows capped by the padded
    input)."""
    dtype = draw(st.sampled_from(COMPUTE))
    if draw(st.booleans()):
        sparsity = draw(st.sampled_from(["dense", "dense", "2:4", "unstructured"]))
        return problem_of(Gemm(
            m=draw(st.sampled_from([1, 2, 7, 16, 100, 512, 2048, 3000])),
            k=draw(st.integers(1, 20_000)),
            n=draw(st.integers(1, 130_000)),
            batch=draw(st.sampled_from([1, 1, 3, 32, 256])),
            a_dtype=dtype,
            b_dtype=draw(st.sampled_from([dtype, "int4", "int4-g128", "q4_k_m", "q6_k"])),
            out_dtype=draw(st.sampled_from(COMPUTE)),
            sparsity=sparsity,
            density=draw(st.sampled_from([0.3, 0.5, 1.0])) if sparsity == "unstructured" else 1.0,
            sparse_kernel_efficiency=draw(st.sampled_from([0.0, 0.5, 0.9])),
        ))  # fmt: skip
    kernel = draw(st.sampled_from([1, 2, 3, 5, 7]))
    padding = draw(st.integers(0, kernel // 2 + 1))
    return problem_of(Conv2d(
        batch=draw(st.integers(1, 8)),
        in_channels=draw(st.integers(1, 512)),
        out_channels=draw(st.integers(1, 512)),
        in_h=draw(st.integers(max(1, kernel - 2 * padding), 230)),
        in_w=draw(st.integers(max(1, kernel - 2 * padding), 230)),
        kernel_h=kernel,
        kernel_w=draw(st.integers(1, kernel)),
        stride=draw(st.integers(1, 4)),
        padding=padding,
        dtype=dtype,
        weight_dtype=draw(st.sampled_from(COMPUTE)),
        out_dtype=draw(st.sampled_from(COMPUTE)),
    ))  # fmt: skip


@st.composite
def chips(draw: st.DrawFn) -> Chip:
    return load_chip("eyeriss-v1").with_(**{
        "array.rows": draw(st.sampled_from([1, 4, 12, 14, 16, 32, 128, 256])),
        "array.cols": draw(st.sampled_from([1, 8, 14, 16, 64, 128, 256])),
        "array.supported_dataflows": None,
        "sram.capacity_bytes": draw(st.integers(64, 64 * 1024 * 1024)),
        "register_file.bytes_per_pe": draw(st.sampled_from([0, 8, 16, 64, 512, 4096])),
    })  # fmt: skip


@st.composite
def grids(draw: st.DrawFn) -> tuple[Problem, Template | None, Chip, list[list[int]],
                                    list[dict[str, int]], bool]:
    """What the mapper passes ``_fitting``: a template's ladders and RF choices, or the traffic
    search's (no template); sometimes RF choices that do not all fit, or one-valued axes."""
    prob, chip = draw(problems()), draw(chips())
    tpl = draw(st.sampled_from([None, *TEMPLATES.values()]))
    if tpl is None or draw(st.booleans()):
        aligns = _traffic_aligns(chip)
    else:
        aligns = _aligns_of(tpl, chip.array.rows, chip.array.cols)
    ladders = [_axis(prob, tpl, d, aligns[d]) for d in _CUT]
    if draw(st.booleans()):  # keep a prefix of some ladders (fewer live axes, one-valued ones)
        ladders = [ladder[:draw(st.integers(1, len(ladder)))] for ladder in ladders]
    split = tpl.rf_split if tpl is not None else ()
    rf_opts: list[dict[str, int]] = [{}] * draw(st.integers(1, 3))
    if split:
        rf_opts = _rf_options(prob, tpl, chip) if draw(st.booleans()) else []  # type: ignore[arg-type]
        if not rf_opts:
            factors = st.sampled_from(_RF_FACTORS)
            rf_opts = draw(st.lists(st.fixed_dictionaries(dict.fromkeys(split, factors)),
                                    min_size=1, max_size=5))  # fmt: skip
    return prob, tpl, chip, ladders, rf_opts, draw(st.booleans())


@settings(max_examples=int(os.environ.get("INFERSIM_PROPERTY_EXAMPLES", "300")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(case=grids())
def test_fitting_equals_the_reference_bit_for_bit(case: Any) -> None:
    prob, tpl, chip, ladders, rf_opts, maximal = case
    want = reference_fitting(prob, tpl, chip, ladders, rf_opts, maximal)
    assert_same(_fitting(prob, tpl, chip, ladders, rf_opts, maximal), want)


@pytest.mark.parametrize("template", [None, *TEMPLATES])
@pytest.mark.parametrize("maximal", [False, True])
def test_fitting_equals_the_reference_on_llm_and_conv_shapes(
    template: str | None, maximal: bool
) -> None:
    tpl = TEMPLATES[template] if template is not None else None
    chip = load_chip("eyeriss-v1").with_(**{"array.supported_dataflows": None,
                                            "sram.capacity_bytes": 2 * 1024 * 1024})  # fmt: skip
    ops = [
        Gemm(m=1, k=4096, n=6144), Gemm(m=2048, k=4096, n=14336),
        Gemm(m=8, k=14336, n=4096, b_dtype="int4-g128"),
        Conv2d(in_h=56, in_w=56, kernel_h=3, kernel_w=3, stride=2, padding=1, in_channels=128,
               out_channels=128, batch=4),
    ]  # fmt: skip
    for op in ops:
        prob = problem_of(op)
        aligns = (_traffic_aligns(chip) if tpl is None
                  else _aligns_of(tpl, chip.array.rows, chip.array.cols))
        ladders = [_axis(prob, tpl, d, aligns[d]) for d in _CUT]
        rf_opts = _rf_options(prob, tpl, chip) if tpl is not None else [{}]
        if not rf_opts:
            continue
        want = reference_fitting(prob, tpl, chip, ladders, rf_opts, maximal)
        assert len(want[0]["G"]) > 0
        assert_same(_fitting(prob, tpl, chip, ladders, rf_opts, maximal), want)


@st.composite
def downsets(draw: st.DrawFn) -> Any:
    """A boolean grid of 1-4 axes closed downward with one step up one index down (as over
    descending ladders): an entry fits where a random weighted sum of its distances from the
    far end stays under a random budget."""
    shape = tuple(draw(st.lists(st.integers(1, 7), min_size=1, max_size=4)))
    weights = draw(st.lists(st.integers(0, 5), min_size=len(shape), max_size=len(shape)))
    budget = draw(st.integers(-1, 40))
    size = sum(w * (n - 1 - np.arange(n)).reshape((1,) * j + (-1,) + (1,) * (len(shape) - j - 1))
               for j, (w, n) in enumerate(zip(weights, shape, strict=True)))  # fmt: skip
    return np.broadcast_to(np.asarray(size) <= budget, shape).copy()


@settings(max_examples=300, deadline=None)
@given(fits=downsets())
def test_the_uncovered_entries_equal_the_reference(fits: Any) -> None:
    """Over every axis and over the leading axes alone, the uncovered entries of a
    closed-downward grid are the reference's, in C order."""
    for axes in sorted({fits.ndim, max(fits.ndim - 1, 1)}):
        got = _uncovered(fits, step=-1, axes=axes)
        want = np.nonzero(reference_uncovered(fits, step=-1, axes=axes))
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            assert np.array_equal(a, b) and a.dtype == b.dtype
