"""Properties over random operators and chips (hypothesis)."""

from __future__ import annotations

import math
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infersim.arch_models.chip import Chip
from infersim.arch_models.presets import load_chip
from infersim.dataflow import TEMPLATES, clear_cache, energy, map_op, mapping_cost
from infersim.dataflow.loopnest import problem_of
from infersim.dataflow.mapper import dataflows_of
from infersim.errors import InfersimError
from infersim.workloads.ops import Conv2d, Gemm

DTYPES = st.sampled_from(["int8", "int16", "bf16"])


@st.composite
def chips(draw: st.DrawFn) -> Chip:
    rows = draw(st.integers(2, 64))
    cols = draw(st.integers(2, 64))
    rate = draw(st.sampled_from([1, 2, 4]))
    return load_chip("eyeriss-v1").with_(
        **{
            "cores": draw(st.sampled_from([1, 1, 2, 3, 8])),
            "array.rows": rows,
            "array.cols": cols,
            "array.macs_per_pe_per_cycle": {"int8": 2 * rate, "int16": rate, "bf16": rate},
            "array.supported_dataflows": None,  # a generic array: every template
            "sram.capacity_bytes": draw(st.integers(4 * 1024, 4 * 1024 * 1024)),
            "register_file.bytes_per_pe": draw(st.sampled_from([0, 16, 64, 512])),
            "dram.bandwidth_bytes_per_s": draw(st.floats(1e8, 1e12)),
        }
    )


@st.composite
def ops(draw: st.DrawFn) -> Gemm | Conv2d:
    dtype = draw(DTYPES)
    if draw(st.booleans()):
        return Gemm(
            m=draw(st.integers(1, 700)),
            k=draw(st.integers(1, 700)),
            n=draw(st.integers(1, 700)),
            batch=draw(st.sampled_from([1, 1, 2, 5])),
            a_dtype=dtype,
            b_dtype=dtype,
            out_dtype=dtype,
        )
    kernel = draw(st.integers(1, 5))
    return Conv2d(
        batch=draw(st.integers(1, 4)),
        in_channels=draw(st.integers(1, 64)),
        out_channels=draw(st.integers(1, 64)),
        in_h=draw(st.integers(kernel, 40)),
        in_w=draw(st.integers(kernel, 40)),
        kernel_h=kernel,
        kernel_w=draw(st.integers(1, kernel)),
        stride=draw(st.integers(1, 3)),
        padding=draw(st.integers(0, 2)),
        dtype=dtype,
        weight_dtype=dtype,
        out_dtype=dtype,
    )


SETTINGS = settings(
    max_examples=int(os.environ.get("INFERSIM_PROPERTY_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@SETTINGS
@given(
    op=ops(),
    chip=chips(),
    dataflow=st.sampled_from([*TEMPLATES, "best"]),
    objective=st.sampled_from(["latency", "energy", "edp"]),
)
def test_mapping_bounds(op: Gemm | Conv2d, chip: Chip, dataflow: str, objective: str) -> None:
    clear_cache()
    try:
        m = map_op(op, chip, dataflow, objective)  # type: ignore[arg-type]
    except InfersimError:
        m = None
    if m is None:  # only RS and TC may find nothing that fits: their register files hold
        assert dataflow in ("rs", "tc")  # filter rows (RS), the CTA's accumulators (TC)
        return
    prob = problem_of(op)
    rate = chip.array.macs_per_pe_per_cycle[prob.mac_class]  # type: ignore[index]
    assert m.dram_bytes >= op.compulsory_bytes * (1 - 1e-9)
    assert m.compute_cycles >= math.ceil(
        prob.macs / (chip.array.rows * chip.array.cols * chip.cores * rate) - 1e-9
    )
    assert energy(m, chip).total_pj >= m.macs * chip.energy.mac(prob.mac_class) * (1 - 1e-9)
    assert m.sram_bytes <= chip.sram.capacity_bytes
    assert m.rf_bytes <= chip.register_file.bytes_per_pe
    assert 0 < m.mapping_efficiency <= 1 + 1e-9
    assert 0 < m.compute_utilization <= 1 + 1e-9
    assert m.total_cycles >= m.compute_cycles


@SETTINGS
@given(op=ops(), chip=chips(), objective=st.sampled_from(["latency", "energy", "edp"]))
def test_best_never_worse_than_a_single_template(
    op: Gemm | Conv2d, chip: Chip, objective: str
) -> None:
    clear_cache()
    best = mapping_cost(map_op(op, chip, "best", objective), chip, objective)  # type: ignore[arg-type]
    for name in dataflows_of(chip):
        try:
            single = map_op(op, chip, name, objective)  # type: ignore[arg-type]
        except InfersimError:
            continue
        assert best <= mapping_cost(single, chip, objective) * (1 + 1e-9)  # type: ignore[arg-type]


@SETTINGS
@given(
    op=ops(),
    chip=chips(),
    factor=st.floats(1.0, 100.0),
    dataflow=st.sampled_from([*TEMPLATES, "best"]),
)
def test_more_dram_bandwidth_is_never_slower(
    op: Gemm | Conv2d, chip: Chip, factor: float, dataflow: str
) -> None:
    clear_cache()
    faster = chip.with_(
        **{"dram.bandwidth_bytes_per_s": min(chip.dram.bandwidth_bytes_per_s * factor, 1e15)}
    )
    try:
        slow = map_op(op, chip, dataflow)
    except InfersimError:
        return
    assert map_op(op, faster, dataflow).time_s <= slow.time_s * (1 + 1e-9)
