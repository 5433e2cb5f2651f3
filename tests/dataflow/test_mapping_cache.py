"""Mappings are searched once per geometry: a chip that differs only in DRAM bandwidth, clock,
DRAM latency or calibration re-times the cached search, and the result equals a cold search."""

from __future__ import annotations

import pytest

from infersim.arch_models.presets import load_chip
from infersim.dataflow import clear_cache, map_op
from infersim.dataflow import mapper as mapper_module
from infersim.workloads.ops import Gemm

OPS = [
    Gemm(name="qkv", m=2048, k=4096, n=6144),
    Gemm(name="down", m=1, k=14336, n=4096),
    Gemm(name="odd", m=300, k=777, n=1000, a_dtype="int8", b_dtype="int8", out_dtype="int8"),
]
CHANGES = [
    {"dram.bandwidth_bytes_per_s": 0.5e12},
    {"dram.bandwidth_bytes_per_s": 20e12},
    {"freq_hz": 0.7e9},
    {"dram.latency_s": 2e-6, "calibration.dram_bandwidth_efficiency": 0.6},
]


@pytest.mark.parametrize("chip_name", ["tpu-v4", "edge-npu", "h100-sxm"])
@pytest.mark.parametrize("objective", ["latency", "energy"])
def test_timing_only_changes_reuse_the_search(chip_name: str, objective: str):
    base = load_chip(chip_name)
    ops = [op for op in OPS if base.supports(op.a_dtype)]
    for change in CHANGES:
        variant = base.with_(**change)
        cold = {}
        clear_cache()
        for op in ops:
            cold[op.name] = map_op(op, variant, "best", objective)  # type: ignore[arg-type]
        clear_cache()
        for op in ops:
            map_op(op, base, "best", objective)  # type: ignore[arg-type]
        searched = mapper_module.STATS["searches"]
        for op in ops:
            warm = map_op(op, variant, "best", objective)  # type: ignore[arg-type]
            assert warm.to_dict() == cold[op.name].to_dict(), (op.name, change)
        assert mapper_module.STATS["searches"] == searched  # nothing searched again
        assert mapper_module.STATS["reused"] >= len(ops)


def test_a_geometry_change_searches_again():
    base = load_chip("tpu-v4")
    clear_cache()
    map_op(OPS[0], base)
    searched = mapper_module.STATS["searches"]
    map_op(OPS[0], base.with_(**{"sram.capacity_bytes": base.sram.capacity_bytes // 4}))
    assert mapper_module.STATS["searches"] > searched
