"""Fused attention on a GPU's tensor cores (issue 15): CTAs, waves, causal skipping, split-KV
decode, and agreement with the roofline's bounds and between the engines."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersim import simulate
from infersim.arch_models import load_chip
from infersim.simulator.engines import analytic, attention, events, roofline
from infersim.workloads import Scenario, load_model
from infersim.workloads.ops import Attention

H100 = load_chip("h100-sxm")


def attn(q: int, kv: int, heads: int = 32, kv_heads: int = 8, **kw: object) -> Attention:
    return Attention(name="a", q_len=q, kv_len=kv, heads=heads, kv_heads=kv_heads,
                     head_dim=128, **kw)  # type: ignore[arg-type]


def test_fused_attention_on_a_gpu_runs_on_the_tensor_cores() -> None:
    fused = analytic.cost(attn(4096, 4096), H100)
    assert fused.dataflow == "tc"
    assert analytic.cost(attn(4096, 4096, fused=False), H100) == roofline.cost(
        attn(4096, 4096, fused=False), H100)
    edge = load_chip("edge-npu")
    assert analytic.cost(attn(512, 512), edge) == roofline.cost(attn(512, 512), edge)


def test_a_causal_prefill_loads_half_the_keys_in_half_the_time() -> None:
    causal, full = attn(8192, 8192), attn(8192, 8192, causal=False)
    loads = [roofline.flash_attention_traffic(op, H100).kv_load_bytes for op in (causal, full)]
    assert 0.45 <= loads[0] / loads[1] <= 0.55
    times = [analytic.cost(op, H100).time_s for op in (causal, full)]
    assert 0.45 <= times[0] / times[1] <= 0.55


def test_133_ctas_on_132_sms_take_two_waves() -> None:
    """Equal CTAs (non-causal, one query block per head) are dealt in waves: one CTA more
    than there are SMs doubles the tensor cores' time."""
    rows = roofline.flash_block_rows(attn(1, 1), H100)

    def work(heads: int) -> float:
        op = attn(rows, 16384, heads=heads, kv_heads=heads, causal=False)
        assert attention.grid(op, H100).ctas == heads
        return analytic.cost(op, H100).compute_s

    assert work(133) == pytest.approx(2 * work(132), rel=1e-9)


def test_decode_splits_the_keys_to_fill_the_sms() -> None:
    """Batch-1 decode has 8 CTAs (one per KV head, its 4 query heads packed), each an MMA
    padded to 64 rows over all 4096 keys: split-KV spreads the keys over the SMs and the step
    becomes memory-bound, within 10% of its bytes over the HBM bandwidth."""
    op = attn(1, 4096)
    one = attention.grid(op, H100)
    assert (one.ctas, one.rows, one.mma_rows) == (8, 4, 64)
    chosen = analytic.cost(op, H100)
    unsplit = attention._cost(op, H100, one)
    assert unsplit.bound == "compute" and chosen.time_s < unsplit.time_s
    assert chosen.bound == "memory"
    split = min((attention.grid(op, H100, s) for s in attention.split_options(op, H100)),
                key=lambda gr: attention._cost(op, H100, gr).time_s)
    assert split.splits > 1 and attention.kernels(split) == 2  # the combine kernel too
    assert chosen.time_s == attention._cost(op, H100, split).time_s
    bound = op.compulsory_bytes / H100.dram.bandwidth_bytes_per_s
    kernel = chosen.time_s - 2 * H100.kernel_overhead_s - H100.dram.latency_s
    assert bound <= kernel * (1 + 1e-9) <= 1.10 * bound


def test_fp8_attention_is_no_slower_than_bf16_and_the_softmax_can_bind() -> None:
    bf16, fp8 = attn(8192, 8192), attn(8192, 8192, dtype="fp8", kv_dtype="fp8")
    assert analytic.cost(fp8, H100).time_s <= analytic.cost(bf16, H100).time_s
    gr = attention.grid(fp8, H100)
    mma, softmax = attention.cta_cycles(fp8, H100, gr.keys_mean, gr)
    assert softmax >= 0.9 * mma  # the exponentials keep pace with FP8 MMAs only just


@settings(max_examples=30, deadline=None)
@given(q=st.sampled_from([1, 7, 128, 1000, 4096]), kv=st.sampled_from([64, 1000, 4096, 32768]),
       batch=st.sampled_from([1, 3, 32]), group=st.sampled_from([1, 4, 8]),
       causal=st.booleans(), name=st.sampled_from(["h100-sxm", "a100-sxm-80gb", "b200"]))
def test_never_faster_than_the_roofline_and_engines_agree(
    q: int, kv: int, batch: int, group: int, causal: bool, name: str
) -> None:
    chip = load_chip(name)
    op = attn(min(q, kv), kv, heads=8 * group, kv_heads=8, batch=batch, causal=causal)
    engine = analytic.cost(op, chip)
    assert engine.time_s >= roofline.cost(op, chip).time_s * (1 - 1e-9)
    assert engine.dram_bytes == roofline.cost(op, chip).dram_bytes
    assert events.cost(op, chip).time_s == engine.time_s


@pytest.mark.parametrize(("name", "batch"), [
    ("h100-sxm", 1), ("h100-sxm", 64), ("a100-sxm-80gb", 1),
    ("a100-sxm-80gb", 64),
])
def test_engines_agree_on_whole_decode_steps(name: str, batch: int) -> None:
    chip = load_chip(name)
    model = load_model("llama-3-8b")
    scenario = Scenario(phase="decode", batch=batch, context_len=1024)
    a, e = (simulate(chip, model, scenario, techniques="bf16", engine=x)
            for x in ("analytic", "events"))
    assert e.latency_s == pytest.approx(a.latency_s, rel=0.03)
