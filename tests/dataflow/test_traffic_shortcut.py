"""The traffic search's shortcuts: a plain GEMM whose grid holds a tiling that fetches every
operand once gets that tiling's DRAM figures without the grid, and exactly those; any other
plain GEMM gets the grid's pick from the grid's (K, C) lines, exactly."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersim.arch_models.chip import Chip
from infersim.arch_models.presets import load_chip
from infersim.dataflow import clear_cache, map_traffic, traffic_many
from infersim.dataflow import mapper as mapper_module
from infersim.dataflow.loopnest import DIMS, PY, TILEABLE, Problem, Tiling, problem_of
from infersim.dataflow.loopnest.dram import dram_traffic
from infersim.dataflow.loopnest.mapping import Access
from infersim.dataflow.templates import OPERANDS
from infersim.simulator.engines.analytic import level_views
from infersim.workloads.ops import Epilogue, Gemm

SHARED = level_views(load_chip("h100-sxm"))[1]  # one core, a 50 MiB SRAM


def _searched(op: Gemm, chip: object) -> dict[str, Access]:
    """The DRAM figures of the tiling the grid search picks (the mapping of map_traffic)."""
    return dict(map_traffic(op, chip).traffic["dram"])  # type: ignore[arg-type]


def _once(op: Gemm, figures: dict[str, Access]) -> bool:
    """Whether ``figures`` fetch every operand of ``op`` once (no partial sums read back)."""
    prob = problem_of(op)
    ob = prob.operand_bytes
    return (figures["input"].reads_bytes == op.m * prob.dims["C"] * ob["input"]
            and figures["weight"].reads_bytes == prob.dims["C"] * op.n * ob["weight"]
            and figures["output"].reads_bytes == 0.0)  # fmt: skip


gemms = st.builds(
    Gemm,
    m=st.sampled_from([1, 3, 16, 100, 512, 2048, 4096, 8192, 16384]),
    k=st.sampled_from([64, 1000, 4096, 8192, 14336, 28672]),
    n=st.sampled_from([64, 4097, 6144, 28672, 128256]),
    a_dtype=st.sampled_from(["bf16", "fp8"]),
    b_dtype=st.sampled_from(["bf16", "fp8", "int4"]),
    epilogue=st.sampled_from([None, Epilogue(out_ratio=0.5)]),
)
capacities = st.sampled_from([1 << 20, 6 << 20, 40 << 20, 50 << 20, 256 << 20])


@settings(max_examples=150, deadline=None)
@given(op=gemms, capacity=capacities)
def test_the_shortcut_is_the_grid_search_wherever_it_answers(op: Gemm, capacity: int) -> None:
    """Where the shortcut answers, the grid search picks a tiling that fetches every operand
    once, with the same figures bit for bit; where the grid's pick does so, the shortcut
    answers (it misses no such GEMM)."""
    chip = SHARED.with_(**{"sram.capacity_bytes": capacity})
    clear_cache()
    quick = mapper_module._refetch_free(problem_of(op), chip)
    try:
        searched = _searched(op, chip)
    except Exception:  # nothing fits: the shortcut cannot answer either
        assert quick is None
        return
    if quick is not None:
        assert quick == searched
    assert (quick is not None) == _once(op, searched)


@pytest.mark.parametrize("shape", [(1, 4096, 6144), (2048, 4096, 6144), (2048, 14336, 4096),
                                   (8192, 8192, 28672)])  # fmt: skip
def test_traffic_of_and_traffic_many_agree_with_the_search(shape: tuple[int, int, int]) -> None:
    """The engines' two entries (one op, a batch) give the searched tiling's figures, with
    the shortcut where it applies and the grid where it does not."""
    m, k, n = shape
    op = Gemm(m=m, k=k, n=n)
    clear_cache()
    searched = _searched(op, SHARED)
    clear_cache()
    assert mapper_module.traffic_of(op, SHARED) == searched
    clear_cache()
    traffic_many([op, Gemm(m=m, k=k, n=n + 1)], SHARED)
    assert mapper_module.traffic_of(op, SHARED) == searched


def test_a_gemm_too_large_for_the_sram_is_left_to_the_grid() -> None:
    """Neither operand of a 16k x 16k x 16k GEMM fits a 50 MiB SRAM whole with the other's
    slices: the shortcut does not answer, and the grid's pick refetches."""
    op = Gemm(m=16384, k=16384, n=16384)
    assert mapper_module._refetch_free(problem_of(op), SHARED) is None
    assert not _once(op, _searched(op, SHARED))


def _grid_pick(prob: Problem, chip: Chip) -> tuple[Tiling, dict[str, Access]] | None:
    """The grid search's tiling (the whole candidate grid, no shortcut) and its DRAM figures
    as traffic_of computes them."""
    tiling = mapper_module._grid_fewest(prob, chip)
    if tiling is None:
        return None
    tile = tiling.extents(prob)
    order = (*tiling.order, *(d for d in TILEABLE if d not in tiling.order))
    counts = {d: PY.ceil_div(float(prob.dims[d]), float(tile[d])) for d in DIMS}
    reads, writes, _ = dram_traffic(prob, counts, (order,), 1, PY)
    return tiling, {name: Access(float(reads[name]), float(writes[name])) for name in OPERANDS}


@st.composite
def plain_gemms(draw: st.DrawFn) -> tuple[Gemm, Chip]:
    """A plain GEMM and a one-core chip; half the time the SRAM holds exactly one tile of the
    candidate grid double-buffered (a fit decided at the boundary)."""
    sizes = st.one_of(st.integers(1, 70000), st.sampled_from([1, 64, 2048, 4096, 8192, 28672]))
    op = Gemm(m=draw(sizes), k=draw(sizes), n=draw(sizes),
              a_dtype=draw(st.sampled_from(["bf16", "fp8", "fp32"])),
              b_dtype=draw(st.sampled_from(["bf16", "fp8", "int4"])),
              epilogue=draw(st.sampled_from([None, Epilogue(out_ratio=0.5),
                                             Epilogue(out_ratio=1 / 3)])))  # fmt: skip
    chip = SHARED.with_(**{"array.rows": draw(st.sampled_from([16, 64, 128])),
                           "array.cols": draw(st.sampled_from([16, 128, 256]))})  # fmt: skip
    capacity = draw(st.integers(1 << 12, 1 << 30))
    if draw(st.booleans()):  # exactly one candidate's need, double-buffered
        prob, aligns = problem_of(op), mapper_module._traffic_aligns(chip)
        tile = dict.fromkeys(DIMS, 1.0)
        for d in ("K", "C", "P"):
            tile[d] = float(draw(st.sampled_from(mapper_module._ladder(prob.dims[d], aligns[d]))))
        capacity = 2 * mapper_module.buffer_bytes(prob, None, tile, PY)
    return op, chip.with_(**{"sram.capacity_bytes": capacity})


@settings(max_examples=300, deadline=None)
@given(case=plain_gemms())
def test_the_lines_pick_what_the_grid_picks(case: tuple[Gemm, Chip]) -> None:
    """The search over the grid's (K, C) lines gives the grid search's tiling and DRAM
    figures bit for bit, and answers every plain GEMM where something fits and every figure
    is a whole number of 1/64 bytes below 2^46 (its final output write, with a ratio of 1/3,
    need not be; the most bytes any tiling moves may exceed the bound)."""
    op, chip = case
    prob = problem_of(op)
    lined = mapper_module._line_fewest(prob, chip)
    grid = _grid_pick(prob, chip)
    if lined is not None:
        assert lined == grid
    k, c, p = (prob.dims[d] for d in ("K", "C", "P"))
    ob = prob.operand_bytes
    final = k * p * ob["output"] * prob.output_write_scale
    most = k * c * p * (ob["input"] + ob["weight"] + 2 * ob["output"]) + final
    exact = most < 2**46 and all(float(x * 64).is_integer()
                                 for x in (final, chip.sram.capacity_bytes / 2))  # fmt: skip
    assert (lined is not None) == (grid is not None and exact)


@settings(max_examples=50, deadline=None)
@given(cases=st.lists(plain_gemms(), min_size=2, max_size=5))
def test_a_batch_of_lines_is_each_op_alone(cases: list[tuple[Gemm, Chip]]) -> None:
    """One pass over several ops (token extents shared or not) gives each its own answer."""
    chip = cases[0][1]
    probs = [problem_of(op) for op, _ in cases]
    alone = [mapper_module._line_fewest(prob, chip) for prob in probs]
    assert mapper_module._lines_fewest(probs, chip) == alone


@st.composite
def gemms_of_one_token_extent(draw: st.DrawFn) -> tuple[list[Problem], Chip]:
    """Plain GEMMs of one token extent and a one-core chip; half the time the SRAM holds
    exactly one tile of the first one's candidate grid double-buffered."""
    sizes = st.one_of(st.integers(1, 70000), st.sampled_from([1, 64, 2048, 4096, 8192, 28672]))
    m = draw(sizes)
    ops = [Gemm(m=m, k=draw(sizes), n=draw(sizes),
                a_dtype=draw(st.sampled_from(["bf16", "fp8", "fp32"])),
                b_dtype=draw(st.sampled_from(["bf16", "fp8", "int4"])))
           for _ in range(draw(st.integers(1, 4)))]  # fmt: skip
    chip = SHARED.with_(**{"array.rows": draw(st.sampled_from([16, 64, 128])),
                           "array.cols": draw(st.sampled_from([16, 128, 256]))})  # fmt: skip
    capacity = draw(st.integers(1 << 12, 1 << 30))
    probs = [problem_of(op) for op in ops]
    if draw(st.booleans()):
        aligns = mapper_module._traffic_aligns(chip)
        tile = dict.fromkeys(DIMS, 1.0)
        for d in ("K", "C", "P"):
            tile[d] = float(draw(st.sampled_from(mapper_module._ladder(probs[0].dims[d],
                                                                       aligns[d]))))
        capacity = 2 * mapper_module.buffer_bytes(probs[0], None, tile, PY)
    return probs, chip.with_(**{"sram.capacity_bytes": capacity})


@settings(max_examples=100, deadline=None)
@given(case=gemms_of_one_token_extent())
def test_the_kept_lines_are_the_grids_uncovered_lines(case: tuple[list[Problem], Chip]) -> None:
    """The lines the line search counts are, op after op and in C order, the (K, C) lines of
    each op's grid that fit some tile rows, as many as no neighbour one step up K or C fits,
    with their largest fitting tile rows and every tile count less one: the grid's fits
    counted in exact fractions, line by line."""
    probs, chip = case
    half = chip.sram.capacity_bytes / 2
    probs = [prob for prob in probs if mapper_module._plain_gemm(prob) is not None]
    if not probs or not mapper_module._exact(half):
        return
    aligns = mapper_module._traffic_aligns(chip)
    tokens = probs[0].dims["P"]
    rows = mapper_module._ladder(tokens, aligns["P"])[::-1]
    expected = []
    for at, prob in enumerate(probs):
        by_k = mapper_module._ladder(prob.dims["K"], aligns["K"])
        by_c = mapper_module._ladder(prob.dims["C"], aligns["C"])
        w = {name: Fraction(width) for name, width in prob.operand_bytes.items()}

        def fit(k: int, c: int, w: dict[str, Fraction] = w, by_k: tuple[int, ...] = by_k,
                by_c: tuple[int, ...] = by_c) -> int:
            if k < 0 or c < 0:
                return 0
            tk, tc = by_k[k], by_c[c]
            return sum(tk * tc * w["weight"] + tc * tp * w["input"] + tk * tp * w["output"]
                       <= Fraction(half) for tp in rows)  # fmt: skip

        for k in range(len(by_k)):
            for c in range(len(by_c)):
                f = fit(k, c)
                if f > fit(k - 1, c) and f > fit(k, c - 1):
                    extents = (by_k[k], by_c[c], rows[f - 1])
                    counts = [PY.ceil_div(float(prob.dims[d]), float(e)) - 1.0
                              for d, e in zip(("K", "C", "P"), extents, strict=True)]  # fmt: skip
                    expected.append((at, *map(float, extents), *counts))
    lines, op, sizes = mapper_module._kept_lines(probs, aligns, half, tokens)
    got = [(at, *lines[0, :, j].tolist(), *lines[1, :, j].tolist())
           for j, at in enumerate(op.tolist())]  # fmt: skip
    assert got == expected
    assert sizes == [sum(1 for line in expected if line[0] == at) for at in range(len(probs))]
