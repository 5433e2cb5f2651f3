"""The analytic (dataflow-mapped) engine against the roofline: never faster than physics allows,
close to it where the roofline's assumptions hold."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersim import Scenario, load_chip, load_model, simulate
from infersim.simulator.engines import analytic, roofline
from infersim.workloads import Attention, Gemm

PRESETS = ["h100-sxm", "a100-sxm-80gb", "tpu-v4", "tpu-v1", "edge-npu"]


def _dtype(chip):
    return next(d for d in ("bf16", "int8") if chip.supports(d))


@settings(max_examples=25)
@given(name=st.sampled_from(PRESETS), m=st.integers(1, 4096), k=st.integers(16, 8192),
       n=st.integers(16, 8192))
def test_analytic_is_never_faster_than_the_roofline(name, m, k, n):
    chip = load_chip(name)
    dt = _dtype(chip)
    op = Gemm(m=m, k=k, n=n, a_dtype=dt, b_dtype=dt, out_dtype=dt)
    mapped, bound = analytic.cost(op, chip), roofline.cost(op, chip)
    assert mapped.time_s >= bound.time_s * (1 - 1e-9)
    assert mapped.dram_bytes >= op.compulsory_bytes * (1 - 1e-9)
    assert mapped.dataflow in {"ws", "os", "is", "rs", "tc"}


@pytest.mark.parametrize("name", ["h100-sxm", "a100-sxm-80gb", "h200"])
def test_decode_gemv_streams_weights_at_bandwidth(name):
    chip = load_chip(name)
    gemv = Gemm(m=1, k=8192, n=28672)
    mapped = analytic.cost(gemv, chip)
    expected = gemv.compulsory_bytes / chip.dram.bandwidth_bytes_per_s + chip.dram.latency_s
    assert mapped.time_s == pytest.approx(expected, rel=0.03)
    assert mapped.bound == "memory"


def test_big_gemm_on_tpu_v4_is_compute_bound_near_peak():
    chip = load_chip("tpu-v4")
    op = Gemm(m=8192, k=8192, n=8192)
    mapped = analytic.cost(op, chip)
    assert mapped.bound == "compute"
    assert roofline.cost(op, chip).time_s / mapped.time_s > 0.85  # fill and drain per fold


def test_non_gemm_ops_fall_back_to_the_roofline():
    """Attention off a GPU's tensor cores, and unfused attention, take the roofline's cost
    (fused attention on the tensor cores: tests/simulator/test_attention_engine.py)."""
    attn = Attention(q_len=512, kv_len=512, heads=8, kv_heads=8, head_dim=64)
    chip = load_chip("tpu-v4")
    assert analytic.cost(attn, chip) == roofline.cost(attn, chip)
    unfused = attn.model_copy(update={"fused": False})
    h100 = load_chip("h100-sxm")
    assert analytic.cost(unfused, h100) == roofline.cost(unfused, h100)


def test_whole_model_engines_agree_on_memory_bound_decode():
    chip, model = load_chip("h100-sxm"), load_model("llama-2-70b")
    s = Scenario(phase="decode", batch=1, context_len=512)
    a = simulate(chip, model, s, engine="analytic").latency_s
    r = simulate(chip, model, s, engine="roofline").latency_s
    assert a == pytest.approx(r, rel=0.03)


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
def test_a_fixed_dataflow_is_never_better_than_best(dataflow):
    chip = load_chip("tpu-v4").with_(**{"array.supported_dataflows": None})  # a generic array
    model = load_model("llama-2-7b")
    s = Scenario(phase="prefill", prompt_len=512)
    best = simulate(chip, model, s, dataflow="best").latency_s
    assert simulate(chip, model, s, dataflow=dataflow).latency_s >= best * (1 - 1e-9)
