"""Tiled matmul C = A · B (Triton tutorial 03 layout), batched, with a B-sharing group for GQA.

The block shape (BLOCK_M, BLOCK_N, BLOCK_K) is the tile a dataflow mapping would choose;
``num_warps`` and ``num_stages`` are the launch's parallelism and software-pipelining depth.
Accumulation is fp32; the output takes C's dtype.
"""

# ruff: noqa: ANN001, N803  (Triton kernels: untyped pointer args, UPPER constexpr names)

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from infersim.validation.kernels._common import check_device, upcast


@dataclass(frozen=True, slots=True)
class Tile:
    """Block shape and launch parameters of one matmul program."""

    block_m: int = 64
    block_n: int = 64
    block_k: int = 32
    num_warps: int = 4
    num_stages: int = 3
    group_m: int = 8

    def __post_init__(self) -> None:
        for name in ("block_m", "block_n", "block_k"):
            value = getattr(self, name)
            if value < 16 or value & (value - 1):
                raise ValueError(f"{name}(={value}) must be a power of two >= 16")
        if self.num_warps not in (1, 2, 4, 8, 16):
            raise ValueError(f"num_warps(={self.num_warps}) must be 1, 2, 4, 8 or 16")
        if not 1 <= self.num_stages <= 8:
            raise ValueError(f"num_stages(={self.num_stages}) must be in 1..8")
        if self.group_m < 1:
            raise ValueError(f"group_m(={self.group_m}) must be >= 1")


def default_tile(m: int, dtype: torch.dtype) -> Tile:
    """A reasonable tile when the caller gives none: thin for decode (m <= 16), square else."""
    if m <= 16:
        return Tile(block_m=16, block_n=64, block_k=128, num_warps=4, num_stages=4)
    if dtype == torch.float32:
        return Tile(block_m=64, block_n=64, block_k=32, num_warps=4, num_stages=3)
    return Tile(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=3)


@triton.jit
def _matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_az, stride_am, stride_ak,
    stride_bz, stride_bk, stride_bn,
    stride_cz, stride_cm, stride_cn,
    B_GROUP: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, UPCAST: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    z = tl.program_id(1).to(tl.int64)
    # Grouped launch order: GROUP_M row-blocks share B's column blocks while they are in L2.
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + z * stride_az + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = (
        b_ptr
        + (z // B_GROUP) * stride_bz
        + offs_k[:, None] * stride_bk
        + offs_n[None, :] * stride_bn
    )
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = offs_k + k0 < K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & (offs_n[None, :] < N), other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + z * stride_cz + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    tile: Tile | None = None,
    b_group: int = 1,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """C = A · B for 2-D ``a`` [M, K] and ``b`` [K, N], or batched ``a`` [Z, M, K] and ``b``
    [Z // b_group, K, N] (batch ``z`` of A multiplies batch ``z // b_group`` of B).

    Any strides work (pass ``w.t()`` for a [N, K] weight). Returns C in A's dtype.

    Raises:
        ValueError: mismatched shapes, a bad ``b_group``, or tensors Triton cannot launch on.
    """
    squeeze = a.dim() == 2
    a3 = a.unsqueeze(0) if squeeze else a
    b3 = b.unsqueeze(0) if b.dim() == 2 else b
    if a3.dim() != 3 or b3.dim() != 3:
        raise ValueError(f"matmul needs 2-D or 3-D operands, got {a.dim()}-D and {b.dim()}-D")
    z, m, k = a3.shape
    zb, kb, n = b3.shape
    if kb != k:
        raise ValueError(f"inner dims differ: A has K={k}, B has K={kb}")
    if b_group < 1 or zb * b_group != z:
        raise ValueError(f"b_group(={b_group}) must give {z} A batches for {zb} B batches")
    check_device(a3, b3)
    tile = tile or default_tile(m, a.dtype)
    c3 = (
        out.view(z, m, n)
        if out is not None
        else torch.empty(z, m, n, dtype=a.dtype, device=a.device)
    )
    grid = (triton.cdiv(m, tile.block_m) * triton.cdiv(n, tile.block_n), z)
    _matmul_kernel[grid](
        a3, b3, c3, m, n, k,
        a3.stride(0), a3.stride(1), a3.stride(2),
        b3.stride(0), b3.stride(1), b3.stride(2),
        c3.stride(0), c3.stride(1), c3.stride(2),
        B_GROUP=b_group,
        BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, BLOCK_K=tile.block_k,
        GROUP_M=tile.group_m, UPCAST=upcast(a3, b3),
        num_warps=tile.num_warps, num_stages=tile.num_stages,
    )  # fmt: skip
    return c3[0] if squeeze else c3


def matmul_ref(a: torch.Tensor, b: torch.Tensor, b_group: int = 1) -> torch.Tensor:
    """The torch reference of :func:`matmul`, computed in fp32 and returned in A's dtype."""
    b32 = b.float()
    if b.dim() == 3 and b_group > 1:
        b32 = b32.repeat_interleave(b_group, dim=0)
    return torch.matmul(a.float(), b32).to(a.dtype)
