"""Every Triton kernel against its torch reference at small shapes (interpreter in CI)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from infersim.validation import kernels as K  # noqa: E402, N812

DTYPES = [
    pytest.param(torch.float32, id="torch.float32"),
    pytest.param(torch.float16, id="torch.float16", marks=pytest.mark.slow),  # `make test-all`
    pytest.param(torch.bfloat16, id="torch.bfloat16"),
]
TOL = {torch.float32: 2e-2, torch.float16: 1e-2, torch.bfloat16: 3e-2}
"""Normalized max error per dtype (fp32 allows TF32 on a GPU; the interpreter is exact)."""


def close(out: torch.Tensor, ref: torch.Tensor) -> float:
    assert out.shape == ref.shape
    assert out.dtype == ref.dtype
    return float((out.float() - ref.float()).abs().max() / ref.float().abs().max())


def rand(*shape: int, dtype: torch.dtype, device: str, scale: float = 1.0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(sum(shape) * 7 + 1)
    return (torch.randn(*shape, generator=gen) * scale).to(device=device, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_odd_shape_with_tile(dtype, device):
    a = rand(40, 72, dtype=dtype, device=device)
    b = rand(72, 24, dtype=dtype, device=device)
    out = K.matmul(a, b, K.Tile(block_m=16, block_n=16, block_k=32, num_warps=2, num_stages=2))
    assert close(out, K.matmul_ref(a, b)) < TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_batched_gqa_and_transposed_weight(dtype, device):
    a = rand(4, 20, 32, dtype=dtype, device=device)
    b = rand(2, 24, 32, dtype=dtype, device=device).transpose(1, 2)  # [2, 32, 24], strided
    out = K.matmul(a, b, K.Tile(16, 16, 16), b_group=2)
    assert close(out, K.matmul_ref(a, b, b_group=2)) < TOL[dtype]


def test_matmul_rejects_bad_shapes(device):
    a = rand(8, 16, dtype=torch.float32, device=device)
    with pytest.raises(ValueError, match="inner dims"):
        K.matmul(a, rand(8, 16, dtype=torch.float32, device=device))
    with pytest.raises(ValueError, match="b_group"):
        K.matmul(
            a.unsqueeze(0).expand(3, 8, 16),
            rand(2, 16, 4, dtype=torch.float32, device=device),
            b_group=2,
        )
    with pytest.raises(ValueError, match="power of two"):
        K.Tile(block_m=24)


@pytest.mark.parametrize("bits", [8, 4])
def test_quantize_round_trip(bits):
    w = torch.randn(64, 24, generator=torch.Generator().manual_seed(3))
    q, scales = K.quantize(w, bits, group_size=16)
    assert scales.shape == (4, 24)
    assert q.shape == ((64, 24) if bits == 8 else (32, 24))
    step = scales.repeat_interleave(16, dim=0)
    assert torch.all((K.dequantize(q, scales, bits) - w).abs() <= step / 2 + 1e-6)


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("dtype", DTYPES)
def test_dequant_matmul(bits, dtype, device):
    x = rand(5, 96, dtype=dtype, device=device)
    q, scales = K.quantize(
        torch.randn(96, 40, generator=torch.Generator().manual_seed(5)), bits, 32
    )
    q, scales = q.to(device), scales.to(device=device, dtype=dtype)
    out = K.dequant_matmul(x, q, scales, bits, K.Tile(16, 16, 32))
    assert close(out, K.dequant_matmul_ref(x, q, scales, bits)) < TOL[dtype]


def test_dequant_matmul_rejects_mismatched_weight(device):
    x = rand(2, 64, dtype=torch.float16, device=device)
    q, scales = K.quantize(torch.randn(64, 8), 4, 32)
    with pytest.raises(ValueError, match="rows"):
        K.dequant_matmul(x, q.to(device), scales.to(device), bits=8)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_flash_attention_gqa(causal, dtype, device):
    q = rand(1, 4, 24, 16, dtype=dtype, device=device)
    k = rand(1, 2, 40, 16, dtype=dtype, device=device)
    v = rand(1, 2, 40, 16, dtype=dtype, device=device)
    out = K.flash_attention(q, k, v, causal, block_m=16, block_n=16)
    assert close(out, K.attention_ref(q, k, v, causal)) < TOL[dtype]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_unfused_attention_gqa(causal, dtype, device):
    q = rand(1, 2, 12, 16, dtype=dtype, device=device)
    k = rand(1, 1, 20, 16, dtype=dtype, device=device)
    v = rand(1, 1, 20, 16, dtype=dtype, device=device)
    out = K.unfused_attention(q, k, v, causal, K.Tile(16, 16, 16))
    assert close(out, K.attention_ref(q, k, v, causal)) < TOL[dtype]


def test_attention_decode_causal_sees_every_key(device):
    """One causal query over a cache attends to all keys (bottom-right alignment)."""
    q = rand(1, 2, 1, 16, dtype=torch.float32, device=device)
    k = rand(1, 2, 33, 16, dtype=torch.float32, device=device)
    v = rand(1, 2, 33, 16, dtype=torch.float32, device=device)
    causal = K.flash_attention(q, k, v, True, block_m=16, block_n=16)
    full = K.attention_ref(q, k, v, False)
    assert close(causal, full) < 1e-4


def test_attention_rejects_bad_shapes(device):
    q = rand(1, 3, 8, 16, dtype=torch.float32, device=device)
    k = rand(1, 2, 8, 16, dtype=torch.float32, device=device)
    with pytest.raises(ValueError, match="GQA"):
        K.flash_attention(q, k, k, causal=False)
    q2 = rand(1, 2, 16, 16, dtype=torch.float32, device=device)
    with pytest.raises(ValueError, match="causal"):
        K.flash_attention(q2, k, k, causal=True)


@pytest.mark.parametrize("act", ["relu", "silu", "gelu"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_epilogue_fused_and_unfused(act, dtype, device):
    x = rand(9, 48, dtype=dtype, device=device)
    bias = rand(48, dtype=dtype, device=device)
    res = rand(9, 48, dtype=dtype, device=device)
    ref = K.epilogue_ref(x, bias, res, act)
    assert close(K.fused_epilogue(x, bias, res, act, block=128), ref) < TOL[dtype]
    assert close(K.unfused_epilogue(x, bias, res, act, block=128), ref) < TOL[dtype]


def test_epilogue_rejects_bad_input(device):
    x = rand(4, 8, dtype=torch.float32, device=device)
    with pytest.raises(ValueError, match="activation"):
        K.fused_epilogue(x, x[0], x, act="tanh")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bias"):
        K.fused_epilogue(x, x[:, 0], x)
