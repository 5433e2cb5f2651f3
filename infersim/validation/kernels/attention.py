"""Attention two ways: fused (FlashAttention-style online softmax, scores stay on chip) and
unfused (QKᵀ → softmax → ·V, the score and probability matrices written to memory).

Tensors are [batch, heads, len, head_dim]; K and V have ``kv_heads`` heads, and query head h
reads KV head ``h // (heads // kv_heads)`` (GQA). Causal masking is bottom-right aligned, as in
infersim's :class:`~infersim.workloads.ops.Attention`: the q_len queries are the newest tokens,
so query i sees keys j <= i + kv_len - q_len.
"""

# ruff: noqa: ANN001, N803  (Triton kernels: untyped pointer args, UPPER constexpr names)

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from infersim.validation.kernels._common import check_device, next_pow2, upcast
from infersim.validation.kernels.matmul import Tile, matmul


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> int:
    """The GQA group size; raises ``ValueError`` for shapes attention cannot take."""
    if q.dim() != 4 or k.shape != v.shape or k.dim() != 4:
        raise ValueError(f"need q, k, v as [B, H, L, D]; got {tuple(q.shape)}, {tuple(k.shape)}")
    b, h, lq, d = q.shape
    bk, hk, lk, dk = k.shape
    if bk != b or dk != d or hk < 1 or h % hk:
        raise ValueError(
            f"q {tuple(q.shape)} and k {tuple(k.shape)} do not pair (GQA needs H % Hkv == 0)"
        )
    if causal and lq > lk:
        raise ValueError(f"causal attention needs q_len(={lq}) <= kv_len(={lk})")
    if d < 16 or d & (d - 1):
        raise ValueError(f"head_dim(={d}) must be a power of two >= 16")
    check_device(q, k, v)
    return h // hk


@triton.jit
def _flash_attention_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, qk_scale, LQ, LK, H, GROUP,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_ob, stride_oh, stride_om, stride_od,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, UPCAST: tl.constexpr,
):  # fmt: skip
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    hk = h // GROUP
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q_ptrs = (
        q_ptr
        + b * stride_qb
        + h * stride_qh
        + offs_m[:, None] * stride_qm
        + offs_d[None, :] * stride_qd
    )
    q = tl.load(q_ptrs, mask=offs_m[:, None] < LQ, other=0.0)
    if UPCAST:
        q = q.to(tl.float32)
    k_base = k_ptr + b * stride_kb + hk * stride_kh
    v_base = v_ptr + b * stride_vb + hk * stride_vh
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    shift = LK - LQ
    hi = LK
    if CAUSAL:
        hi = tl.minimum(LK, (start_m + 1) * BLOCK_M + shift)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        kt = tl.load(
            k_base + cols[None, :] * stride_kn + offs_d[:, None] * stride_kd,
            mask=cols[None, :] < LK,
            other=0.0,
        )
        v = tl.load(
            v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vd,
            mask=cols[:, None] < LK,
            other=0.0,
        )
        if UPCAST:
            kt = kt.to(tl.float32)
            v = v.to(tl.float32)
        qk = tl.dot(q, kt) * qk_scale  # log2 units: the scale folds in log2(e)
        keep = cols[None, :] < LK
        if CAUSAL:
            keep = keep & (cols[None, :] <= offs_m[:, None] + shift)
        qk = tl.where(keep, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(qk - m_safe[:, None])
        alpha = tl.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    acc = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    o_ptrs = (
        o_ptr
        + b * stride_ob
        + h * stride_oh
        + offs_m[:, None] * stride_om
        + offs_d[None, :] * stride_od
    )
    tl.store(o_ptrs, acc.to(o_ptr.dtype.element_ty), mask=offs_m[:, None] < LQ)


def flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    block_m: int = 64,
    block_n: int = 64,
    num_warps: int = 4,
    num_stages: int = 2,
) -> torch.Tensor:
    """Fused attention softmax(q·kᵀ/√d)·v, one program per (query block, batch·head).

    Raises:
        ValueError: shapes attention cannot take, or tensors Triton cannot launch on.
    """
    group = _check_qkv(q, k, v, causal)
    b, h, lq, d = q.shape
    lk = k.shape[2]
    out = torch.empty_like(q)
    qk_scale = 1.4426950408889634 / math.sqrt(d)
    grid = (triton.cdiv(lq, block_m), b * h)
    _flash_attention_kernel[grid](
        q, k, v, out, qk_scale, lq, lk, h, group,
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal, UPCAST=upcast(q),
        num_warps=num_warps, num_stages=num_stages,
    )  # fmt: skip
    return out


@triton.jit
def _softmax_kernel(
    s_ptr, p_ptr, LQ, LK, scale, stride_sr, stride_pr,
    BLOCK: tl.constexpr, CAUSAL: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    keep = cols < LK
    if CAUSAL:
        keep = keep & (cols <= (row % LQ) + LK - LQ)
    s = tl.load(s_ptr + row * stride_sr + cols, mask=keep, other=float("-inf")).to(tl.float32)
    s = s * scale
    s = s - tl.max(s, 0)
    e = tl.exp(s)
    p = e / tl.sum(e, 0)
    tl.store(p_ptr + row * stride_pr + cols, p.to(p_ptr.dtype.element_ty), mask=cols < LK)


def softmax_rows(
    s: torch.Tensor, q_len: int, scale: float, causal: bool, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Row softmax of ``scale · s`` over the last dim (rows are queries, ``row % q_len`` the
    query index for the causal mask), one program per row.
    """
    lk = s.shape[-1]
    rows = s.numel() // lk
    s2 = s.reshape(rows, lk)
    p = out if out is not None else torch.empty_like(s)
    p2 = p.view(rows, lk)
    block = next_pow2(lk)
    num_warps = 4 if block <= 2048 else 8 if block <= 8192 else 16
    _softmax_kernel[(rows,)](
        s2, p2, q_len, lk, scale, s2.stride(0), p2.stride(0),
        BLOCK=block, CAUSAL=causal, num_warps=num_warps,
    )  # fmt: skip
    return p


def unfused_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, tile: Tile | None = None
) -> torch.Tensor:
    """Attention as three kernels through memory: S = q·kᵀ, P = softmax(S/√d), O = P·v.

    Causal attention computes the whole S and masks it in the softmax, as eager
    implementations do. Raises ``ValueError`` as :func:`flash_attention` does.
    """
    group = _check_qkv(q, k, v, causal)
    b, h, lq, d = q.shape
    hk, lk = k.shape[1], k.shape[2]
    q3 = q.reshape(b * h, lq, d)
    kt = k.reshape(b * hk, lk, d).transpose(1, 2)
    s = matmul(q3, kt, tile=tile, b_group=group)
    p = softmax_rows(s, lq, 1.0 / math.sqrt(d), causal)
    o = matmul(p, v.reshape(b * hk, lk, d), tile=tile, b_group=group)
    return o.view(b, h, lq, d)


def attention_ref(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """The torch reference: fp32 softmax attention with bottom-right causal masking."""
    group = q.shape[1] // k.shape[1]
    kf = k.float().repeat_interleave(group, dim=1)
    vf = v.float().repeat_interleave(group, dim=1)
    s = torch.matmul(q.float(), kf.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        lq, lk = q.shape[2], k.shape[2]
        allowed = torch.ones(lq, lk, dtype=torch.bool, device=q.device).tril(diagonal=lk - lq)
        s = s.masked_fill(~allowed, float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), vf).to(q.dtype)
