"""Technique tokens parse into typed transforms that compose left to right."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infersim.errors import ConfigError
from infersim.workloads import Precision, load_model
from infersim.workloads.techniques import TOKENS, Speculative, parse

SIMPLE = [t for t in TOKENS if not any(c in t for c in "=:[") or t == "2:4"]


@pytest.mark.parametrize("token", SIMPLE)
def test_every_plain_token_parses(token):
    stack = parse(token)
    assert stack.name == token
    stack.plan(load_model("tiny-test"), Precision())


def test_stack_composes_left_to_right():
    plan = parse("fp16+int4-awq+kv-fp8+fuse+tp=2").plan(load_model("tiny-test"), Precision())
    assert (plan.precision.weights, plan.precision.act, plan.precision.kv) == (
        "int4-g128", "fp16", "fp8_e4m3")
    assert plan.graph.fuse_epilogues and plan.graph.tp == 2
    later = parse("int4-awq+fp16").plan(load_model("tiny-test"), Precision())
    assert later.precision.weights == "fp16"  # the later token wins


def test_parameterized_tokens():
    m = load_model("tiny-test")
    assert parse("pp=4:mb=8").plan(m, Precision()).microbatches == 8
    assert parse("offload=0.25").plan(m, Precision()).offload_fraction == 0.25
    sparse = parse("sparse:0.7:eff=0.5").plan(m, Precision()).graph
    assert sparse.density == pytest.approx(0.3) and sparse.sparse_kernel_efficiency == 0.5
    spec = parse("spec:draft=tiny-test:k=3:alpha=0.8").plan(m, Precision()).speculative
    assert spec is not None and spec.k == 3 and spec.draft is not None
    heads = parse("spec:heads:k=2:alpha=0.5:cost=0.1").plan(m, Precision()).speculative
    assert heads is not None and heads.cost_fraction == 0.1 and heads.draft is None
    ngram = parse("spec:ngram:k=2:alpha=0.5").plan(m, Precision()).speculative
    assert ngram is not None and ngram.cost_fraction == 0.0


def test_prune_makes_a_smaller_config():
    m = load_model("llama-3-8b")
    pruned = parse("prune:heads=0.5:ffn=0.5:layers=0.25").plan(m, Precision()).model
    assert pruned.num_attention_heads == 16 and pruned.kv_heads == 8
    assert pruned.head_size == m.head_size
    assert pruned.intermediate_size == 7168 and pruned.num_hidden_layers == 24
    assert pruned.params() < 0.6 * m.params()


@pytest.mark.parametrize(("text", "message"), [
    ("int5", "unknown technique 'int5'"),
    ("tp=0", r"technique 'tp=0': n = '0'"),
    ("offload=1.5", "fraction = '1.5'"),
    ("spec:k=2", "spec needs draft=MODEL"),
    ("spec:draft=gpt-9:k=2:alpha=0.5", "unknown model 'gpt-9'"),
    ("spec:ngram:k=2:alpha=1.5", "alpha = '1.5'"),
    ("prune:heads", "expected KEY=VALUE"),
    ("tp=2:bogus=1", "bogus"),
])
def test_bad_tokens_are_clear_errors(text, message):
    with pytest.raises(ConfigError, match=message):
        parse(text)


@given(k=st.integers(1, 8), alpha=st.floats(0.0, 0.95))
def test_expected_tokens_closed_form_bounds(k, alpha):
    e = Speculative(k=k, alpha=alpha).expected_tokens
    assert 1.0 <= e <= k + 1


@pytest.mark.parametrize(("k", "alpha"), [(1, 0.5), (4, 0.7), (6, 0.9), (3, 0.2)])
def test_monte_carlo_agrees_with_closed_form(k, alpha):
    spec = Speculative(k=k, alpha=alpha)
    assert spec.sample_tokens_per_pass(10_000, seed=7) == pytest.approx(
        spec.expected_tokens, rel=0.02)
