"""The cores' search of a two-level chip with its DRAM level behind it (a
:class:`~infersim.dataflow.Backing`): every candidate timed with the two-level rule the engines
use, the bounded search equal to the exhaustive one, its bound below every order's time, the
array figures equal to the plain-float ones, and the search reused by a chip that differs
only in timing."""

from __future__ import annotations

import numpy as np
import pytest

from infersim.arch_models.chip import Chip
from infersim.arch_models.presets import load_chip
from infersim.dataflow import TEMPLATES, Backing, analyze, clear_cache, map_op
from infersim.dataflow import mapper as mapper_module
from infersim.dataflow.loopnest import PY, build_mapping, evaluate_orders, problem_of
from infersim.dataflow.loopnest.figures import (
    launch_cycles,
    lower_bound_cycles,
    prepare,
    total_cycles_at,
)
from infersim.dataflow.loopnest.waves import two_level_cycles
from infersim.dataflow.mapper import ORDERS, dataflows_of
from infersim.simulator.engines import analytic
from infersim.workloads.ops import Gemm

CHIPS = ("h100-sxm", "a100-sxm-80gb", "b200", "tpu-v4")


def _gemm(m: int, k: int, n: int, a: str = "bf16", b: str | None = None) -> Gemm:
    out = "fp16" if a == "fp16" else "bf16"
    return Gemm(name="g", m=m, k=k, n=n, a_dtype=a, b_dtype=b or a, out_dtype=out)


OPS = [_gemm(1, 512, 512), _gemm(16, 128, 128), _gemm(64, 4096, 28672), _gemm(128, 4096, 4096),
       _gemm(2048, 14336, 4096), _gemm(16900, 128, 128), _gemm(1024, 14336, 9216)]  # fmt: skip
DEQUANT = [_gemm(1, 8192, 8192, "fp16", "q4_0"), _gemm(4096, 4096, 4096, "fp16", "q4_0")]


def _cases(chip_name: str) -> list[Gemm]:
    chip = load_chip(chip_name)
    return OPS + (DEQUANT if chip.supports("fp16") and chip.shared_sram else [])


def _view_and_backing(op: Gemm, chip: Chip) -> tuple[Chip, Backing]:
    return analytic.level_views(chip)[0], analytic.op_backing(op, chip)


@pytest.mark.parametrize("chip_name", CHIPS)
def test_the_bounded_search_equals_the_exhaustive_one(chip_name: str) -> None:
    chip = load_chip(chip_name)
    for op in _cases(chip_name):
        view, backing = _view_and_backing(op, chip)
        bounded = map_op(op, view, backing=backing)
        exhaustive = map_op(op, view, exhaustive=True, backing=backing)
        assert (bounded.dataflow, bounded.tiling, bounded.time_s) == (
            exhaustive.dataflow, exhaustive.tiling, exhaustive.time_s), op
        assert bounded.levels is not None


@pytest.mark.parametrize("chip_name", CHIPS)
def test_the_bound_with_a_backing_never_exceeds_an_order_s_time(chip_name: str) -> None:
    chip = load_chip(chip_name)
    for op in _cases(chip_name):
        view, backing = _view_and_backing(op, chip)
        prob = problem_of(op)
        fed = backing.dequant_cycles_per_weight > 0
        for name in dataflows_of(view):
            tpl = TEMPLATES[name]
            tile, rf = mapper_module._candidates(prob, tpl, view)
            if not tile:
                continue
            prep = prepare(prob, tpl, view, tile, rf, fed)
            every = np.arange(len(prep.cycles))
            bound = lower_bound_cycles(prob, tpl, view, prep, backing)
            exact = total_cycles_at(prob, tpl, view, prep, ORDERS, every, backing)
            assert (bound <= exact.min(axis=0)).all(), (op, name)
            # the figures of every candidate are those the mapping of its tiling has
            figures = evaluate_orders(prob, tpl, view, tile, ORDERS, rf, backing)
            assert np.array_equal(figures["total_cycles"], exact)


@pytest.mark.parametrize("chip_name", CHIPS)
def test_a_mapping_with_a_backing_is_timed_by_the_two_level_rule(chip_name: str) -> None:
    """Its total cycles are the two-level rule's of its levels (plus the launches beyond the
    first), the plain-float figures equal the array figures, and the analytic engine times
    the op with it."""
    chip = load_chip(chip_name)
    for op in _cases(chip_name):
        view, backing = _view_and_backing(op, chip)
        mapping = map_op(op, view, backing=backing)
        assert mapping.levels is not None
        cycles, _ = two_level_cycles(mapping.levels, backing.dram_bytes,
                                     backing.dram_writes_bytes, backing.dram_latency_cycles,
                                     PY)  # fmt: skip
        assert mapping.total_cycles == cycles + launch_cycles(view, float(mapping.kernels))
        again = analyze(op, view, mapping.template, mapping.tiling, backing)
        assert again.to_dict() == mapping.to_dict() and again.levels == mapping.levels
        assert mapping.bound in ("compute", "sram", "memory")
        cost = analytic.cost(op, chip)
        assert cost.time_s == max(analytic.two_level_s(view, mapping),
                                  analytic.overlapped_vector_s(op, chip)) \
            + mapping.kernels * chip.kernel_overhead_s  # fmt: skip


def test_the_same_tiling_without_a_backing_is_the_cores_view_s() -> None:
    """A backing changes the time and nothing the cores view's figures hold."""
    chip = load_chip("h100-sxm")
    op = _gemm(128, 4096, 4096)
    view, backing = _view_and_backing(op, chip)
    prob = problem_of(op)
    tiling = map_op(op, view, backing=backing).tiling
    alone = build_mapping(prob, TEMPLATES["tc"], view, tiling)
    backed = build_mapping(prob, TEMPLATES["tc"], view, tiling, backing)
    assert alone.levels is None and backed.levels is not None
    assert alone.traffic == backed.traffic and alone.compute_cycles == backed.compute_cycles
    assert backed.total_cycles > alone.total_cycles  # DRAM behind the L2 only adds time


@pytest.mark.parametrize("change", [
    {"dram.bandwidth_bytes_per_s": 1.5e12}, {"calibration.shared_sram_bandwidth_efficiency": 0.4},
    {"freq_hz": 1.2e9}, {"calibration.compute_efficiency": 0.7},
])  # fmt: skip
def test_a_timing_variant_reuses_the_cores_search(change: dict[str, float]) -> None:
    base = load_chip("h100-sxm")
    variant = base.with_(**change)
    ops = [OPS[3], OPS[4], DEQUANT[1]]
    clear_cache()
    cold = [analytic.mapping_of(op, variant) for op in ops]
    clear_cache()
    for op in ops:
        analytic.mapping_of(op, base)
    searched = mapper_module.STATS["searches"]
    warm = [analytic.mapping_of(op, variant) for op in ops]
    assert mapper_module.STATS["searches"] == searched  # nothing searched again
    assert [m.to_dict() for m in warm] == [m.to_dict() for m in cold]
    assert [m.levels for m in warm] == [m.levels for m in cold]


def test_the_cache_tells_backings_apart() -> None:
    chip = load_chip("h100-sxm")
    op = OPS[3]
    view, backing = _view_and_backing(op, chip)
    plain = map_op(op, view)
    backed = map_op(op, view, backing=backing)
    assert plain.levels is None and backed.levels is not None
    assert map_op(op, view) is plain and map_op(op, view, backing=backing) is backed
    more = Backing(**{**backing.__dict__, "dram_bytes": 4 * backing.dram_bytes})
    assert map_op(op, view, backing=more).time_s > backed.time_s


def test_a_backing_refuses_bad_values() -> None:
    with pytest.raises(ValueError, match=r"dram_bytes\(=-1"):
        Backing(-1.0, 0.0, 0.0, 1.0, 0.0, 0.0)
    with pytest.raises(ValueError, match=r"dram_bytes_per_cycle\(=0"):
        Backing(1.0, 0.0, 0.0, 0.0, 0.0, 0.0)
