"""Kernel descriptions and suites: packaged suites load, labels are unique, and each kernel maps
to the infersim operators it launches with the FLOPs and bytes the issue describes."""

from __future__ import annotations

import pytest

from infersim.errors import ConfigError
from infersim.validation.suite import (
    SCALE_BITS_PER_GROUP,
    SUITES,
    AttentionKernel,
    ElementwiseKernel,
    GemmKernel,
    QuantGemmKernel,
    load_suite,
    parse_kernel,
    quantized_weight_bits,
)


@pytest.mark.parametrize("name", SUITES)
def test_packaged_suites_load(name):
    suite = load_suite(name)
    assert suite.name == name
    labels = [k.label for k in suite.kernels]
    assert len(set(labels)) == len(labels)
    assert all(k.ops() for k in suite.kernels)


def test_suites_span_what_the_issue_asks():
    for name in ("default", "quick", "gpu"):
        kinds = {k.kind for k in load_suite(name).kernels}
        assert {"gemv", "gemm", "w8a16", "w4a16", "attention", "elementwise"} <= kinds, name
    tiny = load_suite("tiny").kernels
    assert {(k.kind, getattr(k, "fused", None)) for k in tiny} >= {
        ("attention", True), ("attention", False), ("elementwise", True), ("elementwise", False)
    }  # fmt: skip


def test_gemm_and_quantized_ops():
    (op,) = GemmKernel(m=2, k=64, n=32, dtype="fp16").ops()
    assert (op.m, op.k, op.n, op.a_dtype, op.b_dtype) == (2, 64, 32, "fp16", "fp16")
    (q,) = QuantGemmKernel(kind="w4a16", m=1, k=128, n=64, group_size=32, dtype="bf16").ops()
    assert q.b_dtype == "int4"
    assert q.weight_bytes == 128 * 64 * (4 + SCALE_BITS_PER_GROUP / 32) / 8  # scales count


@pytest.mark.parametrize("kind", ["w4a16", "w8a16"])
def test_quantized_weight_bytes_follow_the_group_size(kind):
    """The weight's bytes count one group of scales per group_size K rows, so g32, g128 and
    g4096 differ (they did not: the kernel ignored its group size)."""
    bits = 4 if kind == "w4a16" else 8
    sizes = {}
    for group in (32, 128, 4096):
        (op,) = QuantGemmKernel(kind=kind, m=1, k=8192, n=4096, group_size=group).ops()
        sizes[group] = op.weight_bytes
        assert op.weight_bytes == 8192 * 4096 * quantized_weight_bits(bits, group) / 8
    assert sizes[32] > sizes[128] > sizes[4096] > 8192 * 4096 * bits / 8


def test_attention_and_elementwise_ops():
    kernel = AttentionKernel(heads=8, kv_heads=2, q_len=16, kv_len=64, head_dim=64, fused=False)
    (op,) = kernel.ops()
    assert (op.kv_heads, op.causal, op.fused) == (2, True, False)
    fused = ElementwiseKernel(rows=4, cols=8, activation="silu").ops()
    unfused = ElementwiseKernel(rows=4, cols=8, activation="silu", fused=False).ops()
    assert len(fused) == 1 and len(unfused) == 3
    assert sum(o.compulsory_bytes for o in unfused) > fused[0].compulsory_bytes
    assert sum(o.vector_flops for o in unfused) == fused[0].vector_flops


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "conv"}, "kernel kind 'conv' unknown"),
        ({"kind": "gemm", "m": 0, "k": 1, "n": 1}, "m = 0"),
        ({"kind": "w8a16", "m": 1, "k": 100, "n": 8, "group_size": 64}, "multiple of group_size"),
        ({"kind": "attention", "heads": 6, "kv_heads": 4, "q_len": 1, "kv_len": 1}, "multiple"),
        ({"kind": "attention", "heads": 4, "kv_heads": 4, "q_len": 8, "kv_len": 4}, "q_len"),
        ({"kind": "elementwise", "rows": 1, "cols": 1, "dtype": "int8"}, "dtype"),
    ],
)
def test_bad_kernels_are_named(data, message):
    with pytest.raises(ConfigError, match=message):
        parse_kernel(data, "suite.yaml")


def test_user_suite_file(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\nkernels:\n  - {kind: gemm, m: 1, k: 8, n: 8, dtype: fp32}\n")
    assert load_suite(str(path)).kernels[0].m == 1
    twice = "  - {kind: gemv, m: 1, k: 8, n: 8}\n" * 2
    path.write_text("name: dup\nkernels:\n" + twice)
    with pytest.raises(ConfigError, match="twice"):
        load_suite(str(path))
    with pytest.raises(ConfigError, match="unknown suite 'nope'"):
        load_suite("nope")
