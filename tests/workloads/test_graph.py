"""Prefill and decode graphs: FLOPs, weights read, KV footprints, layer repeat counts."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infersim import dtypes
from infersim.workloads import Attention, Precision, Scenario, decode_step, load_model, prefill
from infersim.workloads.graph import expected_experts_hit, footprint, kv_cache_bytes
from infersim.workloads.models import ModelConfig

DENSE = ["llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "mistral-7b",
         "gpt-3-175b", "opt-1.3b", "tiny-test"]


def _lookup_only_params(m: ModelConfig) -> int:
    """Parameters read by a gather, never multiplied: untied embeddings, learned positions."""
    positions = m.embedding_params() - m.vocab_size * m.hidden_size
    return positions + (0 if m.tie_word_embeddings else m.vocab_size * m.hidden_size)


def _attention_flops(ops) -> float:
    return sum(op.flops * op.count for op in ops if isinstance(op, Attention))


@pytest.mark.parametrize("name", ["llama-2-70b", "llama-3-70b", "gpt-3-175b", "llama-2-13b"])
@pytest.mark.parametrize("batch", [1, 8])
def test_decode_flops_are_two_per_parameter(name, batch):
    """The issue's rule: FLOPs ≈ 2 × parameters × batch (+ attention), within 2%."""
    model = load_model(name)
    ops = decode_step(model, batch, 128)
    flops = sum(op.flops * op.count for op in ops)
    assert flops - _attention_flops(ops) == pytest.approx(2 * model.params() * batch, rel=0.02)


@pytest.mark.parametrize("name", DENSE)
def test_decode_matmul_flops_use_every_multiplied_parameter(name):
    """Tighter for every model: array FLOPs outside attention = 2 × multiplied params × batch."""
    model = load_model(name)
    ops = decode_step(model, 4, 64)
    array = sum(op.array_flops * op.count for op in ops if not isinstance(op, Attention))
    norms = (2 * model.num_hidden_layers + 1) * model.norm_params()
    multiplied = model.params() - _lookup_only_params(model) - norms
    assert array == pytest.approx(2 * multiplied * 4, rel=0.002)


@pytest.mark.parametrize("name", ["mixtral-8x7b", "deepseek-v2-lite"])
def test_moe_decode_at_batch_one_uses_active_parameters(name):
    model = load_model(name)
    ops = decode_step(model, 1, 64)
    array = sum(op.array_flops * op.count for op in ops if not isinstance(op, Attention))
    active = model.params(active=True) - _lookup_only_params(model)
    assert array == pytest.approx(2 * active, rel=0.01)


def test_expected_experts_hit():
    assert expected_experts_hit(8, 2, 1) == pytest.approx(2)
    assert expected_experts_hit(8, 2, 1000) == pytest.approx(8)
    assert expected_experts_hit(64, 6, 4) == pytest.approx(64 * (1 - (1 - 6 / 64) ** 4))


def test_moe_decode_reads_more_experts_at_larger_batch():
    model = load_model("mixtral-8x7b")
    weights = [sum(op.weight_bytes * op.count for op in decode_step(model, b, 64))
               for b in (1, 2, 4, 64)]
    assert weights == sorted(weights) and weights[0] < weights[-1]
    assert weights[-1] == pytest.approx(
        (model.params() - _lookup_only_params(model)) * 2, rel=0.01)


@pytest.mark.parametrize("name", DENSE)
def test_decode_reads_every_weight_once(name):
    model = load_model(name)
    p = Precision(weights="int8", act="bf16", kv="bf16")
    ops = decode_step(model, 1, 16, p)
    read = sum(op.weight_bytes * op.count for op in ops)
    norms = (2 * model.num_hidden_layers + 1) * model.norm_params()  # kept at the act dtype
    multiplied = model.params() - _lookup_only_params(model) - norms
    expected = multiplied * dtypes.nbytes("int8") + norms * dtypes.nbytes("bf16")
    assert read == pytest.approx(expected, rel=0.001)


def test_layers_appear_once_with_a_repeat_count():
    model = load_model("llama-2-70b")
    ops = prefill(model, 1, 128)
    qkv = [op for op in ops if op.name == "attn.qkv"]
    assert len(qkv) == 1 and qkv[0].count == 80
    shallow = model.model_copy(update={"num_hidden_layers": 2})
    assert len(prefill(shallow, 1, 128)) == len(ops)
    names = [op.name for op in ops]
    assert names[0] == "embed" and names[-1] == "lm_head"


def test_prefill_lm_head_runs_on_last_tokens_only():
    ops = prefill(load_model("llama-3-8b"), 3, 100)
    head = next(op for op in ops if op.name == "lm_head")
    assert head.m == 3


def test_known_kv_cache_sizes_per_token():
    bf16 = Precision()
    assert kv_cache_bytes(load_model("llama-2-7b"), 1, 1, bf16) == 512 * 1024  # 0.5 MiB
    assert kv_cache_bytes(load_model("llama-3-8b"), 1, 1, bf16) == 128 * 1024  # GQA 8 heads
    ds = load_model("deepseek-v2-lite")
    assert kv_cache_bytes(ds, 1, 1, bf16) == 27 * (512 + 64) * 2  # MLA latent


def test_gqa_and_kv_quantization_shrink_kv_by_their_ratios():
    m70 = load_model("llama-2-70b")
    mha = m70.model_copy(update={"num_key_value_heads": 64})
    p = Precision()
    assert kv_cache_bytes(mha, 2, 100, p) / kv_cache_bytes(m70, 2, 100, p) == pytest.approx(8)
    fp8 = Precision(kv="fp8")
    assert kv_cache_bytes(m70, 2, 100, p) / kv_cache_bytes(m70, 2, 100, fp8) == pytest.approx(2)


def test_sliding_window_caps_the_cache():
    mistral = load_model("mistral-7b")
    p = Precision()
    assert kv_cache_bytes(mistral, 1, 32000, p) == kv_cache_bytes(mistral, 1, 4096, p)
    assert kv_cache_bytes(mistral, 1, 1000, p) < kv_cache_bytes(mistral, 1, 4096, p)


def test_mla_decode_attends_over_the_latent():
    ops = decode_step(load_model("deepseek-v2-lite"), 2, 100)
    attn = next(op for op in ops if isinstance(op, Attention))
    assert (attn.kv_heads, attn.head_dim, attn.dv, attn.shared_kv) == (1, 576, 512, True)


@given(batch=st.integers(1, 64), context=st.integers(0, 4096))
def test_footprint_grows_with_batch_and_context(batch, context):
    model = load_model("tiny-test")
    small = footprint(model, Scenario(phase="decode", batch=batch, context_len=context))
    more = footprint(model, Scenario(phase="decode", batch=batch + 1, context_len=context + 1))
    assert more.kv_bytes > small.kv_bytes
    assert more.weights_bytes == small.weights_bytes
    assert more.activation_bytes >= small.activation_bytes


def test_weights_footprint_counts_every_expert():
    mixtral = load_model("mixtral-8x7b")
    fp = footprint(mixtral, Scenario(phase="decode", batch=1, context_len=10))
    assert fp.weights_bytes == pytest.approx(46.7e9 * 2, rel=0.01)


def test_mixed_step_matches_pure_prefill_and_decode():
    from infersim.workloads.graph import mixed_step

    model = load_model("llama-3-8b")

    def flops(ops):
        return sum(op.flops * op.count for op in ops)

    assert flops(mixed_step(model, [(2, 100, 0)], 0, 0)) == flops(prefill(model, 2, 100))
    assert flops(mixed_step(model, [], 8, 500)) == flops(decode_step(model, 8, 500))
    both = mixed_step(model, [(1, 256, 0)], 8, 500)
    attn = [op for op in both if isinstance(op, Attention)]
    assert [(a.batch, a.q_len, a.kv_len) for a in attn] == [(1, 256, 256), (8, 1, 501)]
    qkv = next(op for op in both if op.name == "attn.qkv")
    assert qkv.m == 256 + 8  # the linear layers run once over every token
