"""The kernels as Triton launches with their torch references (GPU and interpreter backends).

:func:`build` returns a zero-argument launch and the pair (output, reference) to compare, with
random inputs on ``device``. Importing this module imports the Triton kernels, so the
interpreter switch must be set first (the interpret backend does that).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from infersim.validation import kernels as K  # noqa: N812  (the tutorials write K.)
from infersim.validation.cpu_ops import TORCH_DTYPES
from infersim.validation.suite import (
    AttentionKernel,
    ElementwiseKernel,
    GemmKernel,
    KernelBase,
    QuantGemmKernel,
)

TOLERANCE: dict[str, float] = {"fp32": 2e-2, "fp16": 1e-2, "bf16": 3e-2}
"""Max |out − ref| / max |ref| allowed per dtype. fp32 allows 2e-2 because ``tl.dot`` on a GPU
multiplies fp32 in TF32 (10-bit mantissa); the interpreter is exact to ~1e-6."""


@dataclass(frozen=True)
class Case:
    """A ready launch: ``run()`` launches the kernel once; ``check()`` returns the normalized
    max error of one launch against the torch reference."""

    run: Callable[[], torch.Tensor]
    reference: Callable[[], torch.Tensor]

    def check(self) -> float:
        """max |out − ref| / max |ref| over one launch (fp32 math)."""
        out = self.run().float()
        ref = self.reference().float()
        scale = ref.abs().max().clamp(min=1e-6)
        return float((out - ref).abs().max() / scale)


def _tile(kernel: GemmKernel, dtype: torch.dtype) -> K.Tile:
    base = K.default_tile(kernel.m, dtype)
    return K.Tile(
        block_m=kernel.block_m or base.block_m,
        block_n=kernel.block_n or base.block_n,
        block_k=kernel.block_k or base.block_k,
        num_warps=kernel.num_warps or base.num_warps,
        num_stages=kernel.num_stages or base.num_stages,
    )


def build(kernel: KernelBase, device: str, seed: int = 0) -> Case:
    """A :class:`Case` for ``kernel`` with random inputs on ``device`` ("cuda" or "cpu" under
    the interpreter).

    Raises:
        ValueError: a kernel kind without a Triton implementation.
    """
    gen = torch.Generator(device=device).manual_seed(seed)
    dt = TORCH_DTYPES[kernel.dtype]

    def rand(*shape: int, scale: float = 1.0, dtype: torch.dtype = dt) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen, device=device) * scale).to(dtype)

    if isinstance(kernel, GemmKernel):
        a, w = rand(kernel.m, kernel.k), rand(kernel.n, kernel.k, scale=kernel.k**-0.5)
        tile = _tile(kernel, dt)
        return Case(lambda: K.matmul(a, w.t(), tile), lambda: K.matmul_ref(a, w.t()))
    if isinstance(kernel, QuantGemmKernel):
        x = rand(kernel.m, kernel.k)
        w = rand(kernel.k, kernel.n, scale=kernel.k**-0.5, dtype=torch.float32)
        qw, scales = K.quantize(w, kernel.bits, kernel.group_size)
        scales = scales.to(dt)
        bits = kernel.bits
        return Case(
            lambda: K.dequant_matmul(x, qw, scales, bits),
            lambda: K.dequant_matmul_ref(x, qw, scales, bits),
        )
    if isinstance(kernel, AttentionKernel):
        b, h, hk = kernel.batch, kernel.heads, kernel.kv_heads
        q = rand(b, h, kernel.q_len, kernel.head_dim)
        k = rand(b, hk, kernel.kv_len, kernel.head_dim)
        v = rand(b, hk, kernel.kv_len, kernel.head_dim)
        causal = kernel.causal
        attend = K.flash_attention if kernel.fused else K.unfused_attention
        return Case(lambda: attend(q, k, v, causal), lambda: K.attention_ref(q, k, v, causal))
    if isinstance(kernel, ElementwiseKernel):
        x, res = rand(kernel.rows, kernel.cols), rand(kernel.rows, kernel.cols)
        bias = rand(kernel.cols)
        act = kernel.activation
        epilogue = K.fused_epilogue if kernel.fused else K.unfused_epilogue
        return Case(lambda: epilogue(x, bias, res, act), lambda: K.epilogue_ref(x, bias, res, act))
    raise ValueError(f"no Triton implementation for kernel {kernel!r}")
