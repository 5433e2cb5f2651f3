"""The mapper: fitting tilings, objectives, best-of-templates, memoization, speed."""

from __future__ import annotations

import numpy as np
import pytest
from dataflow_helpers import array_chip

from infersim.arch_models.presets import load_chip
from infersim.dataflow import TEMPLATES, analyze, energy, map_op, mapping_cost
from infersim.dataflow import mapper as mapper_module
from infersim.dataflow.mapper import dataflows_of
from infersim.errors import InfersimError, UnsupportedDtypeError
from infersim.workloads.ops import Conv2d, Gemm

INT16 = {"a_dtype": "int16", "b_dtype": "int16", "out_dtype": "int16"}


def test_mapping_fits_the_sram_and_matches_the_analyzer() -> None:
    op = Gemm(m=512, k=512, n=512, **INT16)
    chip = array_chip(16, 16, **{"sram.capacity_bytes": 64 * 1024})
    m = map_op(op, chip, "ws")
    assert m.dataflow == "ws"
    assert m.fits
    assert m.sram_bytes <= 64 * 1024
    assert m.tiles > 1
    again = analyze(op, chip, TEMPLATES["ws"], m.tiling)
    assert again.total_cycles == pytest.approx(m.total_cycles)
    assert again.dram_bytes == pytest.approx(m.dram_bytes)


def test_a_whole_op_that_fits_matches_scalesim() -> None:
    op = Gemm(m=64, k=128, n=256, **INT16)
    chip = array_chip(32, 32, **{"dram.bandwidth_bytes_per_s": 1e15})
    m = map_op(op, chip, "ws")
    assert m.compute_cycles == 5055


@pytest.mark.parametrize("objective", ["latency", "energy", "edp"])
def test_best_is_never_worse_than_any_template(objective: str) -> None:
    op = Conv2d(
        in_h=15,
        in_w=15,
        kernel_h=3,
        kernel_w=3,
        in_channels=64,
        out_channels=96,
        dtype="int16",
        weight_dtype="int16",
        out_dtype="int16",
    )
    chip = load_chip("eyeriss-v1").with_(**{"array.supported_dataflows": None})  # a generic array
    best = map_op(op, chip, "best", objective)  # type: ignore[arg-type]
    cost = mapping_cost(best, chip, objective)  # type: ignore[arg-type]
    for name in TEMPLATES:
        single = map_op(op, chip, name, objective)  # type: ignore[arg-type]
        assert cost <= mapping_cost(single, chip, objective) * (1 + 1e-12)  # type: ignore[arg-type]


def test_objectives_pick_their_own_optimum() -> None:
    op = Gemm(m=256, k=512, n=512, **INT16)
    chip = array_chip(16, 16, **{"sram.capacity_bytes": 32 * 1024})
    fast = map_op(op, chip, "ws", "latency")
    frugal = map_op(op, chip, "ws", "energy")
    assert fast.time_s <= frugal.time_s
    assert energy(frugal, chip).total_pj <= energy(fast, chip).total_pj


def test_top_k_is_sorted_by_cost() -> None:
    op = Gemm(m=256, k=256, n=256, **INT16)
    chip = array_chip(16, 16, **{"sram.capacity_bytes": 32 * 1024})
    ranked = map_op(op, chip, "best", "energy", top_k=5)
    assert isinstance(ranked, list)
    assert len(ranked) == 5
    costs = [mapping_cost(m, chip, "energy") for m in ranked]
    assert costs == sorted(costs)
    assert ranked[0].tiling == map_op(op, chip, "best", "energy").tiling


def test_memoized_in_a_bounded_cache() -> None:
    op = Gemm(m=128, k=128, n=128, **INT16)
    chip = array_chip(16, 16)
    first = map_op(op, chip, "os")
    renamed = op.model_copy(update={"name": "other", "count": 7})
    assert map_op(renamed, chip, "os") is first  # keyed by signature, not name or count
    assert map_op(op, chip.with_(**{"sram.capacity_bytes": 4096}), "os") is not first
    cache = mapper_module._LRU(maxsize=2)
    for i in range(5):
        cache.put((i,), ())
    assert len(cache) == 2
    with pytest.raises(ValueError, match="maxsize"):
        mapper_module._LRU(maxsize=0)


def test_errors() -> None:
    chip = array_chip(8, 8)
    op = Gemm(m=8, k=8, n=8, **INT16)
    with pytest.raises(UnsupportedDtypeError):
        map_op(Gemm(m=8, k=8, n=8, a_dtype="fp8", b_dtype="fp8"), chip)
    with pytest.raises(InfersimError, match="unknown dataflow"):
        map_op(op, chip, "xs")
    with pytest.raises(InfersimError, match="unknown objective"):
        map_op(op, chip, "ws", "power")  # type: ignore[arg-type]
    with pytest.raises(InfersimError, match="top_k"):
        map_op(op, chip, "ws", "latency", top_k=0)
    tiny = chip.with_(**{"sram.capacity_bytes": 8})
    with pytest.raises(InfersimError, match="fits"):
        map_op(op, tiny, "ws")
    no_rf = chip.with_(**{"register_file.bytes_per_pe": 0})
    conv = Conv2d(
        in_h=8,
        in_w=8,
        kernel_h=3,
        kernel_w=3,
        in_channels=2,
        out_channels=2,
        dtype="int16",
        weight_dtype="int16",
        out_dtype="int16",
    )
    with pytest.raises(InfersimError, match="register file"):
        map_op(conv, no_rf, "rs")
    assert map_op(conv, no_rf, "best").dataflow != "rs"  # RS cannot map it; others can


def test_a_1024_cube_gemm_maps_on_128x128() -> None:
    """Its speed is a benchmark figure (benchmarks/bench_dataflow.py); here, what it finds."""
    op = Gemm(m=1024, k=1024, n=1024, a_dtype="int8", b_dtype="int8", out_dtype="int8")
    chip = load_chip("tpu-v4")
    assert (chip.array.rows, chip.array.cols) == (128, 128)
    best = map_op(op, chip, "best")
    assert best.fits
    assert best.compute_cycles >= op.m * op.n * op.k / chip.macs_per_cycle("int8")


@pytest.mark.parametrize("chip_name", ["h100-sxm", "tpu-v4", "eyeriss-v1", "edge-npu"])
@pytest.mark.parametrize("top_k", [1, 3])
def test_best_latency_is_the_merge_of_every_template(chip_name: str, top_k: int) -> None:
    """One bounded pass over every template gives what searching each template alone and
    merging by (time, template rank) gives (the exhaustive search's order)."""
    from infersim.simulator.engines.analytic import level_views

    chip = load_chip(chip_name)
    if chip.shared_sram is not None:
        chip = level_views(chip)[0]
    dtype = next(d for d in ("bf16", "int8", "int16") if d in chip.array.macs_per_pe_per_cycle)
    ops = [
        Gemm(m=m, k=k, n=n, a_dtype=dtype, b_dtype=dtype, out_dtype=dtype)
        for m, k, n in ((1, 4096, 4096), (64, 4096, 14336), (2048, 14336, 4096), (4097, 128, 64))
    ] + [
        Conv2d(in_h=28, in_w=28, kernel_h=3, kernel_w=3, in_channels=64, out_channels=128,
               dtype=dtype, weight_dtype=dtype, out_dtype=dtype, stride=s)
        for s in (1, 2)
    ]  # fmt: skip
    for op in ops:
        merged = []
        for rank, name in enumerate(dataflows_of(chip)):
            try:
                found = map_op(op, chip, name, "latency", top_k)
            except InfersimError:
                continue
            for m in [found] if top_k == 1 else found:  # type: ignore[list-item]
                merged.append((m.time_s, rank, m))
        merged.sort(key=lambda item: (item[0], item[1]))
        best = map_op(op, chip, "best", "latency", top_k)
        got = [best] if top_k == 1 else best
        assert [(m.dataflow, m.tiling, m.time_s) for m in got] == [  # type: ignore[union-attr]
            (m.dataflow, m.tiling, m.time_s) for _, _, m in merged[:top_k]
        ]


@pytest.mark.parametrize("chip_name", ["h100-sxm", "tpu-v4", "eyeriss-v1"])
def test_map_traffic_moves_the_fewest_dram_bytes_of_the_grid(chip_name: str) -> None:
    """The bounded traffic search finds the exhaustive minimum of the candidate grid, never
    below the compulsory bytes, and never above what any latency mapping moves."""
    import numpy as np

    from infersim.dataflow.loopnest import problem_of
    from infersim.dataflow.loopnest.dram import dram_traffic
    from infersim.dataflow.mapper import ORDERS, _grid, _traffic_aligns
    from infersim.dataflow.templates import DIMS

    chip = load_chip(chip_name)
    dtype = next(d for d in ("bf16", "int8", "int16") if d in chip.array.macs_per_pe_per_cycle)
    for m, k, n in ((1, 4096, 4096), (512, 4096, 14336), (2048, 1000, 4097)):
        op = Gemm(m=m, k=k, n=n, a_dtype=dtype, b_dtype=dtype, out_dtype=dtype)
        got = mapper_module.map_traffic(op, chip)
        prob = problem_of(op)
        tile, _ = _grid(prob, None, chip, _traffic_aligns(chip), [{}])
        counts = {d: np.ceil(prob.dims[d] / tile[d] - 1e-9) for d in DIMS}
        reads, writes, _ = dram_traffic(prob, counts, ORDERS, chip.cores, mapper_module.NP)
        every = sum(np.broadcast_to(reads[x] + writes[x], (len(ORDERS), len(tile["G"])))
                    for x in ("input", "weight", "output"))  # fmt: skip
        assert got.dram_bytes == pytest.approx(float(np.min(every)), rel=1e-12)
        ob = prob.operand_bytes
        compulsory = m * k * ob["input"] + k * n * ob["weight"] + m * n * ob["output"]
        assert got.dram_bytes >= compulsory * (1 - 1e-12)
        assert got.dram_bytes <= map_op(op, chip, "best", "latency").dram_bytes * (1 + 1e-12)


@pytest.mark.parametrize(("chip_name", "m", "k", "n"), [
    ("h100-sxm", 512, 4096, 6144), ("a100-sxm-80gb", 128, 14336, 4096),
    ("h100-sxm", 1, 8192, 1024), ("b200", 16900, 128, 128), ("tpu-v4", 64, 8192, 512),
])
def test_the_search_bound_never_exceeds_an_order_s_time(chip_name: str, m: int, k: int,
                                                        n: int) -> None:
    """The bounded search's per-candidate bound is below every loop order's exact time, where
    a reduction loop dealt in chunks leaves fewer cores busy than there are tiles."""
    from infersim.dataflow.loopnest import problem_of
    from infersim.dataflow.loopnest.figures import (
        lower_bound_cycles,
        prepare,
        total_cycles_at,
    )
    from infersim.simulator.engines.analytic import level_views

    chip = load_chip(chip_name)
    view = level_views(chip)[0] if chip.shared_sram is not None else chip
    op = Gemm(m=m, k=k, n=n, a_dtype="bf16", b_dtype="bf16", out_dtype="bf16")
    prob = problem_of(op)
    for name in dataflows_of(view):
        tpl = TEMPLATES[name]
        tile, rf = mapper_module._candidates(prob, tpl, view)
        if not tile:
            continue
        prep = prepare(prob, tpl, view, tile, rf)
        bound = lower_bound_cycles(prob, tpl, view, prep)
        exact = total_cycles_at(prob, tpl, view, prep, mapper_module.ORDERS,
                                np.arange(len(prep.cycles)))  # fmt: skip
        assert (bound <= exact.min(axis=0)).all()
