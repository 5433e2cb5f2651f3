"""The design's technique rules, one test each, checked through the simulator.

The rules are properties of the transforms, so they are checked on the roofline engine, whose
arithmetic they are stated in; the case study is also checked on the analytic engine."""

import pytest

from infersim import simulate
from infersim.arch_models import load_chip
from infersim.errors import InfersimError, UnsupportedDtypeError
from infersim.workloads import Attention, Precision, Scenario, load_model
from infersim.workloads.graph import GraphOptions, decode_step, kv_cache_bytes, prefill

H100 = load_chip("h100-sxm").with_(launch=None)
"""The rules are about the kernels' work: the fixed launch overhead (tested on its own below)
would dilute every ratio by the same constant."""
L70 = load_model("llama-2-70b")


def decode(chip=H100, model=L70, techniques="fp16", batch=1, context=128, engine="roofline"):
    return simulate(chip, model, Scenario(phase="decode", batch=batch, context_len=context),
                    techniques=techniques, engine=engine)


def pre(chip=H100, model=L70, techniques="fp16", prompt=2048, engine="roofline"):
    return simulate(chip, model, Scenario(phase="prefill", prompt_len=prompt),
                    techniques=techniques, engine=engine)


@pytest.mark.parametrize("engine", ["roofline", "analytic"])
def test_seeds_case_study_llama2_70b_batch1(engine):
    def decode(techniques="fp16", **kw):
        return simulate(H100, L70, Scenario(phase="decode", context_len=128, **kw),
                        techniques=techniques, engine=engine)

    base = decode()
    assert base.tokens_per_s == pytest.approx(24.0, rel=0.05)
    assert base.bound == "memory"
    assert decode(techniques="fp16+int8-weight").tokens_per_s / base.tokens_per_s == (
        pytest.approx(2.0, rel=0.03))
    assert 3.5 <= decode(techniques="fp16+int4-awq").tokens_per_s / base.tokens_per_s <= 4.0
    sixteen = decode(batch=16)
    assert sixteen.bound == "memory"
    assert 14.0 <= sixteen.tokens_per_s / base.tokens_per_s <= 16.0


def test_batching_reads_weights_once_per_step():
    one, sixteen = decode(), decode(batch=16)
    assert sixteen.bound == "memory"
    assert 14.0 <= sixteen.tokens_per_s / one.tokens_per_s <= 16.0


def test_weight_only_int4_speeds_decode_by_bytes_but_not_prefill():
    d = decode(techniques="fp16").latency_s / decode(techniques="fp16+int4-awq").latency_s
    assert d == pytest.approx(16 / 4.156, rel=0.05)
    p = pre(techniques="fp16").latency_s / pre(techniques="fp16+int4-awq").latency_s
    assert p < 1.15


@pytest.mark.parametrize("stack", ["w8a8-int8", "fp8"])
def test_w8a8_speeds_prefill_by_the_mac_rate_ratio(stack):
    ratio = H100.peak_flops(stack.replace("w8a8-", "")) / H100.peak_flops("fp16")
    speedup = pre(techniques="fp16").latency_s / pre(techniques=stack).latency_s
    assert speedup == pytest.approx(ratio, rel=0.1)


def test_fp8_on_a100_errors_unless_emulated():
    a100 = load_chip("a100-sxm-80gb")
    with pytest.raises(UnsupportedDtypeError, match="cannot compute fp8"):
        decode(chip=a100, techniques="fp8")
    emulated = pre(chip=a100, techniques="fp8+emulate")
    assert any("emulated" in n for n in emulated.notes)
    assert emulated.latency_s >= pre(chip=a100, techniques="bf16").latency_s * 0.99


def test_2_4_gives_no_gain_without_hardware_support():
    tpu = load_chip("tpu-v4")
    model = load_model("llama-2-7b")
    dense = pre(chip=tpu, model=model, techniques="bf16")
    sparse = pre(chip=tpu, model=model, techniques="bf16+2:4")
    assert sparse.latency_s == dense.latency_s
    assert any("no 2:4 support" in n for n in sparse.notes)
    assert pre(techniques="fp16+2:4").latency_s < 0.6 * pre(techniques="fp16").latency_s


def test_unstructured_sparsity_gives_no_compute_gain_without_a_kernel():
    base = pre(techniques="fp16")
    assert pre(techniques="fp16+sparse:0.7").latency_s == pytest.approx(base.latency_s, rel=0.01)
    assert pre(techniques="fp16+sparse:0.7:eff=1").latency_s < 0.5 * base.latency_s
    assert decode(techniques="fp16+sparse:0.7").memory.weights_bytes < (
        0.5 * decode().memory.weights_bytes)  # the bytes do shrink


def test_moe_holds_all_experts_but_batch1_decode_reads_active_ones():
    mixtral = load_model("mixtral-8x7b")
    cost = decode(model=mixtral, techniques="bf16")
    assert cost.memory.weights_bytes == pytest.approx(46.7e9 * 2, rel=0.01)
    weight_reads = cost.dram_bytes - cost.memory.kv_bytes
    assert weight_reads == pytest.approx(12.9e9 * 2, rel=0.03)


def test_gqa_kv_bytes_scale_by_kv_heads_exactly():
    mha = L70.model_copy(update={"num_key_value_heads": 64})
    gqa_kv = decode(techniques="fp16", context=1024).memory.kv_bytes
    mha_kv = decode(model=mha, techniques="fp16", context=1024).memory.kv_bytes
    assert gqa_kv == mha_kv * 8 / 64


def test_mla_cuts_kv_by_more_than_90_percent():
    ds = load_model("deepseek-v2")
    mha = ds.model_copy(update={"kv_lora_rank": None, "head_dim": 128})
    p = Precision()
    assert kv_cache_bytes(ds, 1, 1000, p) < 0.1 * kv_cache_bytes(mha, 1, 1000, p)


@pytest.mark.parametrize("n", [1024, 2048, 4096])
def test_naive_attention_traffic_quadratic_fused_linear(n):
    def attention_bytes(length, flash):
        ops = prefill(L70, 1, length, options=GraphOptions(flash_attention=flash))
        return next(op for op in ops if isinstance(op, Attention)).compulsory_bytes

    assert attention_bytes(2 * n, True) / attention_bytes(n, True) == pytest.approx(2.0)
    extra = [attention_bytes(x, False) - attention_bytes(x, True) for x in (n, 2 * n)]
    assert extra[1] / extra[0] == pytest.approx(4.0)  # the score matrix round trips: N²
    assert attention_bytes(2 * n, False) / attention_bytes(n, False) > 3.8


def test_without_kv_cache_cost_per_token_grows_with_context():
    model = load_model("llama-3-8b")
    cached = [decode(model=model, techniques="bf16", context=c).latency_s
              for c in (512, 2048, 8000)]
    recompute = [decode(model=model, techniques="bf16+no-kv-cache", context=c).latency_s
                 for c in (512, 2048, 8000)]
    assert recompute == sorted(recompute)
    assert recompute[2] / recompute[0] > 8
    assert cached[2] / cached[0] < 1.5
    assert decode(model=model, techniques="bf16+no-kv-cache").memory.kv_bytes == 0


def test_kv_int8_halves_kv_bytes():
    fp16 = decode(techniques="fp16", context=4096, batch=8)
    int8 = decode(techniques="fp16+kv-int8", context=4096, batch=8)
    assert int8.memory.kv_bytes == fp16.memory.kv_bytes / 2


def test_fusion_removes_exactly_the_intermediate_round_trips():
    model = load_model("llama-3-8b")
    t, h, i = 256, model.hidden_size, model.intermediate_size
    heads, kvh, d = model.num_attention_heads, model.kv_heads, model.head_size
    unfused = prefill(model, 1, t)
    fused = prefill(model, 1, t, options=GraphOptions(fuse_epilogues=True))

    def total(ops):
        return sum(op.compulsory_bytes * op.count for op in ops)

    per_layer = 2 * (t * (heads + kvh) * d      # q, k after the projection, before RoPE
                     + t * 2 * kvh * d          # k, v on their way to the cache
                     + t * h                    # attention output before the residual add
                     + t * 2 * i                # gate and up before SiLU·mul
                     + t * h)                   # MLP output before the residual add
    assert total(unfused) - total(fused) == pytest.approx(per_layer * 2 * model.num_hidden_layers)
    assert sum(op.flops * op.count for op in fused) == pytest.approx(
        sum(op.flops * op.count for op in unfused), rel=1e-9)


def test_speculative_speedup_limits():
    model = load_model("llama-3-8b")
    base = decode(model=model, techniques="bf16")
    k = 4
    none = decode(model=model, techniques=f"bf16+spec:ngram:k={k}:alpha=0")
    full = decode(model=model, techniques=f"bf16+spec:ngram:k={k}:alpha=1")
    verify_ratio = none.latency_s / base.latency_s  # cost of one K+1 verify pass
    assert none.tokens_per_s / base.tokens_per_s == pytest.approx(1 / verify_ratio)
    assert full.tokens_per_s / base.tokens_per_s == pytest.approx((k + 1) / verify_ratio)
    assert full.tpot_s == pytest.approx(full.latency_s / (k + 1))


def test_speculative_draft_model_costs_k_draft_steps():
    target, draft = load_model("llama-2-70b"), load_model("llama-2-7b")
    spec = decode(model=target, techniques="fp16+int8-weight+spec:draft=llama-2-7b:k=4:alpha=0.8")
    d = decode(model=draft, techniques="fp16+int8-weight").latency_s
    draft_time = sum(c.total_time_s for c in spec.ops if c.name.startswith("draft."))
    assert draft_time == pytest.approx(4 * d, rel=1e-6)
    assert spec.tokens_per_seq == pytest.approx((1 - 0.8**5) / 0.2)


def test_tensor_parallel_makes_70b_fit_and_shows_the_all_reduce():
    one, two = decode(), decode(techniques="fp16+tp=2")
    assert not one.memory.fits and two.memory.fits and two.chips == 2
    link = two.time_by_bound().get("link", 0.0)
    assert 0 < link < 0.2 * two.latency_s
    assert 1.7 < two.tokens_per_s / one.tokens_per_s < 2.0
    with pytest.raises(InfersimError, match="no chip_link"):
        decode(chip=load_chip("edge-npu"), model=load_model("tiny-test"), techniques="tp=2")


def test_pipeline_bubble_fraction():
    stages, micro = 4, 4
    cost = decode(techniques=f"fp16+pp={stages}:mb={micro}", batch=16)
    bubble = sum(c.total_time_s for c in cost.ops if c.name == "pipeline.bubble")
    assert bubble / cost.latency_s == pytest.approx((stages - 1) / (micro + stages - 1), rel=0.02)
    assert cost.memory.fits and cost.chips == 4


def test_offload_falls_toward_host_link_bandwidth():
    rates = [decode(techniques=f"fp16+offload={f}").tokens_per_s for f in (0.0, 0.25, 0.5, 1.0)]
    assert rates == sorted(rates, reverse=True)
    host_bound = H100.host_link.bandwidth_bytes_per_s / decode().memory.weights_bytes
    assert rates[-1] == pytest.approx(host_bound, rel=0.05)
    assert decode(techniques="fp16+offload=0.5").memory.fits


def test_pruned_model_costs_follow_the_smaller_config():
    model = load_model("llama-3-8b")
    base = decode(model=model, techniques="bf16")
    pruned = decode(model=model, techniques="bf16+prune:ffn=0.5")
    assert pruned.memory.weights_bytes < base.memory.weights_bytes
    assert pruned.latency_s / base.latency_s == pytest.approx(
        pruned.memory.weights_bytes / base.memory.weights_bytes, rel=0.05)


def test_decode_graph_verifies_k_plus_one_tokens():
    ops = decode_step(load_model("tiny-test"), 2, 10, options=GraphOptions(decode_tokens=5))
    attn = next(op for op in ops if isinstance(op, Attention))
    assert (attn.q_len, attn.kv_len) == (5, 15)
    assert next(op for op in ops if op.name == "lm_head").m == 10


def test_cuda_graphs_lower_the_launch_overhead_of_every_kernel():
    h100 = load_chip("h100-sxm")
    stream = decode(chip=h100, techniques="fp16")
    graphs = decode(chip=h100, techniques="fp16+cuda-graphs")
    none = decode(chip=H100, techniques="fp16")
    kernels = sum(c.count for c in stream.ops if c.time_s > 0)
    assert h100.launch is not None
    assert stream.latency_s - none.latency_s == pytest.approx(kernels * h100.launch.stream_s,
                                                              rel=1e-6)
    assert stream.latency_s - graphs.latency_s == pytest.approx(
        kernels * (h100.launch.stream_s - h100.launch.graph_s), rel=1e-6)
