"""Whole-model phase costs: the issue's acceptance figures and the technique rules they imply."""

import pytest

from infersim import simulate
from infersim.arch_models import load_chip
from infersim.errors import UnsupportedDtypeError
from infersim.simulator import inference
from infersim.simulator.inference import cost_ops, simulate_ops
from infersim.workloads import Gemm, Precision, Scenario, load_model

FP16 = Precision(weights="fp16", act="fp16", kv="fp16")


def test_llama2_70b_decode_on_h100_is_weight_streaming():
    """The seeds' arithmetic: 138 GB of fp16 weights at 3.35 TB/s ≈ 42 ms, ≈ 24 tokens/s (the
    kernels' work, without the launch overhead)."""
    chip, model = load_chip("h100-sxm").with_(launch=None), load_model("llama-2-70b")
    cost = simulate(chip, model, Scenario(phase="decode", batch=1, context_len=128, precision=FP16))
    assert cost.memory.weights_bytes == pytest.approx(138e9, rel=0.01)
    assert not cost.memory.fits and cost.memory.chips_needed == 2
    expected = cost.memory.weights_bytes / 3.35e12
    assert cost.tpot_s == pytest.approx(expected, rel=0.03)
    assert cost.tokens_per_s == pytest.approx(24.3, rel=0.03)
    assert cost.ttft_s is None


@pytest.mark.parametrize(("engine", "prefill_bounds"), [
    ("roofline", {"compute"}),
    ("analytic", {"compute", "sram"}),  # the L2 feeding 132 SMs can limit a GPU's GEMMs
])
def test_prefill_is_compute_bound_and_decode_memory_bound(engine, prefill_bounds):
    chip, model = load_chip("h100-sxm"), load_model("llama-3-8b")
    pre = simulate(chip, model, Scenario(phase="prefill", prompt_len=4096), engine=engine)
    dec = simulate(chip, model, Scenario(phase="decode", context_len=4096), engine=engine)
    assert pre.bound in prefill_bounds
    assert dec.bound == "memory"
    assert pre.ttft_s == pre.latency_s and pre.tokens == 4096


def test_prefill_time_is_at_least_flops_over_peak():
    chip, model = load_chip("a100-sxm-80gb"), load_model("llama-2-7b")
    cost = simulate(chip, model, Scenario(phase="prefill", batch=2, prompt_len=1024))
    assert cost.latency_s >= cost.flops / chip.peak_flops("bf16") * 0.999


def test_weight_only_int4_decode_speeds_up_by_about_the_byte_ratio():
    chip, model = load_chip("h100-sxm").with_(launch=None), load_model("llama-2-70b")
    bf16 = simulate(chip, model, Scenario(phase="decode", context_len=256))
    int4 = simulate(chip, model, Scenario(phase="decode", context_len=256,
                                          precision=Precision(weights="int4")))
    assert 3.5 < bf16.latency_s / int4.latency_s <= 4.0


def test_more_bandwidth_never_slows_a_model():
    model = load_model("mixtral-8x7b")
    for name in ("h100-sxm", "a100-sxm-80gb"):
        chip = load_chip(name)
        wider = chip.with_(**{"dram.bandwidth_bytes_per_s": chip.dram.bandwidth_bytes_per_s * 1.5})
        for scenario in (Scenario(phase="decode", batch=16), Scenario(phase="prefill")):
            assert simulate(wider, model, scenario).latency_s <= simulate(
                chip, model, scenario).latency_s


def test_fp8_activations_on_a100_is_a_clear_error():
    with pytest.raises(UnsupportedDtypeError, match="cannot compute fp8"):
        simulate(load_chip("a100-sxm-80gb"), load_model("llama-3-8b"),
                 Scenario(phase="decode", precision=Precision(act="fp8", weights="fp8")))


def test_identical_ops_are_costed_once(monkeypatch):
    calls = []
    real = inference.ENGINES["roofline"]

    def counting(op, chip, dataflow):
        calls.append(op.signature())
        return real(op, chip, dataflow)

    monkeypatch.setitem(inference.ENGINES, "roofline", counting)
    ops = [Gemm(name=f"g{i}", m=8, k=64, n=64) for i in range(50)]
    costs = cost_ops(ops, load_chip("h100-sxm"), "roofline")
    assert len(calls) == 1 and [c.name for c in costs] == [f"g{i}" for i in range(50)]


def test_user_workload_costs_like_a_sum_of_ops():
    chip = load_chip("edge-npu")
    ops = [Gemm(name="fc", m=1, k=1024, n=1024, a_dtype="int8", b_dtype="int8", count=3)]
    result = simulate_ops(chip, ops, name="mlp")
    assert result.latency_s == pytest.approx(3 * result.ops[0].time_s)
    assert result.memory.weights_bytes == 3 * 1024 * 1024


def test_phase_cost_json_has_the_documented_keys():
    cost = simulate(load_chip("h100-sxm"), load_model("tiny-test"), Scenario(phase="prefill"))
    doc = cost.to_dict()
    assert {"chip", "model", "phase", "batch", "latency_s", "tokens_per_s", "ttft_s",
            "memory", "ops"} <= set(doc)
    assert {"weights_bytes", "kv_bytes", "activation_bytes", "capacity_bytes", "fits"} <= set(
        doc["memory"])
    assert {"name", "kind", "count", "flops", "dram_bytes", "time_s", "bound"} <= set(doc["ops"][0])
