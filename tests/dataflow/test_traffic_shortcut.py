"""The traffic search's shortcut: a plain GEMM whose grid holds a tiling that fetches every
operand once gets that tiling's DRAM figures without the grid, and exactly those."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersim.arch_models.presets import load_chip
from infersim.dataflow import clear_cache, map_traffic, traffic_many
from infersim.dataflow import mapper as mapper_module
from infersim.dataflow.loopnest import problem_of
from infersim.dataflow.loopnest.mapping import Access
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
