"""Operators know their FLOPs and compulsory traffic; they are immutable, validated values."""

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infersim.errors import ConfigError
from infersim.workloads import Attention, Collective, Conv2d, Elementwise, Gemm, Norm, Softmax
from infersim.workloads.workload import load_workload


def test_gemm_flops_and_bytes():
    g = Gemm(m=4, k=8, n=16, a_dtype="bf16", b_dtype="int8", out_dtype="fp32")
    assert g.array_flops == 2 * 4 * 8 * 16
    assert g.vector_flops == 2 * 8 * 16  # weight-only int8: each weight dequantized once
    assert g.compulsory_bytes == 4 * 8 * 2 + 8 * 16 * 1 + 4 * 16 * 4
    assert g.weight_bytes == 8 * 16
    assert g.compute_dtype == "bf16"  # weight-only quantization computes at the activation dtype


def test_dtype_aliases_and_sub_byte_formats():
    g = Gemm(m=2, k=64, n=64, a_dtype="bfloat16", b_dtype="int4")
    assert g.a_dtype == "bf16" and g.b_bytes == 64 * 64 / 2
    assert Gemm(m=1, k=1, n=1, a_dtype="fp8").a_dtype == "fp8_e4m3"


def test_conv_lowering_to_im2col_gemm():
    c = Conv2d(in_channels=3, in_h=227, in_w=227, out_channels=96, kernel_h=11, kernel_w=11,
               stride=4)
    assert (c.out_h, c.out_w) == (55, 55)
    g = c.as_gemm()
    assert (g.m, g.k, g.n) == (55 * 55, 11 * 11 * 3, 96)
    assert c.flops == g.flops == 2 * 55 * 55 * 363 * 96


def test_attention_causal_pairs():
    a = Attention(q_len=4, kv_len=4, heads=1, kv_heads=1, head_dim=8)
    assert a.pairs == 1 + 2 + 3 + 4
    decode = Attention(q_len=1, kv_len=100, heads=8, kv_heads=2, head_dim=64)
    assert decode.pairs == 100
    assert decode.flops == 2 * 8 * 100 * 128 + 5 * 8 * 100


@given(q=st.integers(1, 50), extra=st.integers(0, 50), window=st.integers(1, 80),
       causal=st.booleans())
def test_attention_pairs_match_brute_force(q, extra, window, causal):
    kv = q + extra
    a = Attention(q_len=q, kv_len=kv, heads=1, kv_heads=1, head_dim=4, window=window,
                  causal=causal)
    brute = 0
    for i in range(q):
        pos = kv - q + i  # the query's own position
        for j in range(kv):
            visible = (j <= pos or not causal) and (pos - j < window if causal else True)
            brute += visible
    if not causal:
        brute = q * min(kv, window)
    assert a.pairs == brute


def test_gqa_reads_kv_bytes_by_kv_heads():
    mha = Attention(q_len=1, kv_len=4096, heads=32, kv_heads=32, head_dim=128)
    gqa = mha.model_copy(update={"kv_heads": 8})
    assert mha.kv_bytes / gqa.kv_bytes == pytest.approx(4.0)
    fp8 = gqa.model_copy(update={"kv_dtype": "fp8_e4m3"})
    assert gqa.kv_bytes / fp8.kv_bytes == pytest.approx(2.0)


@pytest.mark.parametrize("n", [512, 1024, 2048, 4096])
def test_unfused_attention_traffic_grows_with_n_squared(n):
    fused = Attention(q_len=n, kv_len=n, heads=8, kv_heads=8, head_dim=64)
    naive = fused.model_copy(update={"fused": False})
    assert naive.compulsory_bytes - fused.compulsory_bytes == 4 * 8 * n * n * 2
    assert fused.compulsory_bytes == 8 * n * 64 * 2 * 4  # Q, K, V, O once each


def test_elementwise_norm_softmax_collective():
    e = Elementwise(elements=100, inputs=2, flops_per_element=1, dtype="fp16")
    assert e.compulsory_bytes == 100 * 3 * 2 and e.flops == 100
    n = Norm(rows=10, cols=64, norm="layer", dtype="fp32")
    assert n.weight_bytes == 2 * 64 * 4 and n.flops == 7 * 640
    assert Softmax(rows=2, cols=8).compulsory_bytes == 2 * 2 * 8 * 4
    ar = Collective(collective="all-reduce", payload_bytes=1e6, participants=4)
    assert ar.link_bytes == pytest.approx(1.5e6) and ar.flops == 0


def test_ops_are_immutable_and_hashable():
    g = Gemm(m=1, k=2, n=3)
    with pytest.raises(Exception, match="frozen"):
        g.m = 5  # type: ignore[misc]
    assert g.signature() == Gemm(m=1, k=2, n=3, name="other", count=7).signature()
    assert len({g, Gemm(m=1, k=2, n=3)}) == 1


def test_workload_yaml(tmp_path: Path):
    path = tmp_path / "net.yaml"
    path.write_text("""
name: tiny-cnn
ops:
  - {kind: conv2d, name: conv1, in_channels: 3, in_h: 32, in_w: 32, out_channels: 16,
     kernel_h: 3, kernel_w: 3, padding: 1}
  - {kind: gemm, name: fc, m: 1, k: 16384, n: 10, count: 2}
""")
    wl = load_workload(path)
    assert wl.name == "tiny-cnn" and len(wl.ops) == 2 and wl.ops[1].count == 2


@pytest.mark.parametrize(("text", "match"), [
    ("- {kind: gemm, m: 0, k: 1, n: 1}", r"ops\.0\.gemm\.m = 0"),
    ("- {kind: matmul, m: 1}", r"ops\.0 = .*tag 'matmul'"),
    ("- {kind: gemm, m: 1, k: 1, n: 1, a_dtype: fp7}", r"unknown dtype 'fp7'"),
    ("ops: []", r"ops = \[\]"),
    ("- [unclosed", r"malformed YAML"),
    ("42", r"expected a list of operators"),
])
def test_bad_workload_yaml(tmp_path: Path, text, match):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_workload(path)
