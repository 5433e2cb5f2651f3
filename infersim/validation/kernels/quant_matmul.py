"""Weight-only quantized matmul (W8A16 / W4A16): C = X · dequant(W), dequantized in registers.

Weights are symmetric integers with one scale per ``group_size`` rows of K and per column:
``W[k, n] = q[k, n] * scales[k // group_size, n]``. int8 weights are stored [K, N]; int4
weights are packed two per byte along K, [K // 2, N] uint8, the even row in the low nibble,
each nibble holding ``q + 8`` (q in -8..7).
"""

# ruff: noqa: ANN001, N803  (Triton kernels: untyped pointer args, UPPER constexpr names)

from __future__ import annotations

import torch
import triton
import triton.language as tl

from infersim.validation.kernels._common import check_device, upcast
from infersim.validation.kernels.matmul import Tile, default_tile


def quantize(w: torch.Tensor, bits: int, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-group quantization of a [K, N] weight to ``bits`` (8 or 4).

    Returns ``(qweight, scales)``: int8 [K, N] or packed uint8 [K // 2, N], and fp32 scales
    [K // group_size, N].

    Raises:
        ValueError: ``bits`` not 4 or 8, or K not a multiple of ``group_size`` (and of 2 for 4).
    """
    if bits not in (4, 8):
        raise ValueError(f"bits(={bits}) must be 4 or 8")
    k, n = w.shape
    if group_size < 1 or k % group_size or (bits == 4 and k % 2):
        raise ValueError(f"K(={k}) must be a multiple of group_size(={group_size}) and even")
    qmax = 127 if bits == 8 else 7
    groups = w.float().view(k // group_size, group_size, n)
    scales = groups.abs().amax(dim=1).clamp(min=1e-8) / qmax
    q = torch.round(groups / scales[:, None, :]).clamp(-qmax - 1, qmax).view(k, n)
    if bits == 8:
        return q.to(torch.int8), scales
    nib = (q + 8).to(torch.uint8)
    return (nib[0::2] | (nib[1::2] << 4)).contiguous(), scales


def dequantize(qweight: torch.Tensor, scales: torch.Tensor, bits: int) -> torch.Tensor:
    """The fp32 [K, N] weight a quantized one stands for (the inverse of :func:`quantize`)."""
    if bits == 8:
        q = qweight.float()
    else:
        low = (qweight & 0xF).float() - 8
        high = (qweight >> 4).float() - 8
        q = torch.stack((low, high), dim=1).view(-1, qweight.shape[1])
    group_size = q.shape[0] // scales.shape[0]
    return q * scales.float().repeat_interleave(group_size, dim=0)


@triton.jit
def _dequant_matmul_kernel(
    x_ptr, w_ptr, s_ptr, c_ptr, M, N, K,
    stride_xm, stride_xk, stride_wk, stride_wn, stride_sg, stride_sn, stride_cm, stride_cn,
    GROUP_SIZE: tl.constexpr, BITS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, UPCAST: tl.constexpr,
):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_ok = offs_k < K
        x = tl.load(
            x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :] * stride_xk,
            mask=(offs_m[:, None] < M) & k_ok[None, :],
            other=0.0,
        )
        w_mask = k_ok[:, None] & (offs_n[None, :] < N)
        if BITS == 8:
            w_ptrs = w_ptr + offs_k[:, None] * stride_wk + offs_n[None, :] * stride_wn
            w = tl.load(w_ptrs, mask=w_mask, other=0).to(tl.float32)
        else:
            w_ptrs = w_ptr + (offs_k[:, None] // 2) * stride_wk + offs_n[None, :] * stride_wn
            packed = tl.load(w_ptrs, mask=w_mask, other=0)
            shift = ((offs_k[:, None] % 2) * 4).to(tl.uint8)
            w = ((packed >> shift) & 0xF).to(tl.float32) - 8.0
        s_ptrs = s_ptr + (offs_k[:, None] // GROUP_SIZE) * stride_sg + offs_n[None, :] * stride_sn
        w = w * tl.load(s_ptrs, mask=w_mask, other=0.0).to(tl.float32)
        if UPCAST:
            x = x.to(tl.float32)
        acc = tl.dot(x, w.to(x.dtype), acc)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(
        c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N)
    )


def dequant_matmul(
    x: torch.Tensor,
    qweight: torch.Tensor,
    scales: torch.Tensor,
    bits: int,
    tile: Tile | None = None,
) -> torch.Tensor:
    """C[M, N] = x[M, K] · dequant(qweight, scales), in x's dtype (W8A16 or W4A16).

    Raises:
        ValueError: ``bits`` not 4 or 8, shapes that do not match, or tensors Triton cannot
            launch on.
    """
    if bits not in (4, 8):
        raise ValueError(f"bits(={bits}) must be 4 or 8")
    m, k = x.shape
    rows = k // 2 if bits == 4 else k
    if qweight.shape[0] != rows:
        raise ValueError(f"qweight has {qweight.shape[0]} rows; K={k} at {bits} bits needs {rows}")
    n = qweight.shape[1]
    groups = scales.shape[0]
    if groups < 1 or k % groups or scales.shape[1] != n:
        raise ValueError(f"scales {tuple(scales.shape)} do not tile K={k}, N={n}")
    check_device(x, qweight, scales)
    tile = tile or default_tile(m, x.dtype)
    out = torch.empty(m, n, dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(m, tile.block_m), triton.cdiv(n, tile.block_n))
    _dequant_matmul_kernel[grid](
        x, qweight, scales, out, m, n, k,
        x.stride(0), x.stride(1), qweight.stride(0), qweight.stride(1),
        scales.stride(0), scales.stride(1), out.stride(0), out.stride(1),
        GROUP_SIZE=k // groups, BITS=bits,
        BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, BLOCK_K=tile.block_k, UPCAST=upcast(x),
        num_warps=tile.num_warps, num_stages=tile.num_stages,
    )  # fmt: skip
    return out


def dequant_matmul_ref(
    x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, bits: int
) -> torch.Tensor:
    """The torch reference of :func:`dequant_matmul` (fp32 math, x's dtype out)."""
    return torch.matmul(x.float(), dequantize(qweight, scales, bits)).to(x.dtype)
