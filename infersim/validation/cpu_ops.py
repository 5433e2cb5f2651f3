"""The kernels as torch calls on the host CPU, built over one preallocated arena.

Every kernel's inputs are views of one read-only region filled once with a byte pattern that is
a small finite number in every dtype (0x3C: 0.0115 as fp32 and bf16, 1.06 as fp16, 60 as int8);
its outputs are views of a second region. Nothing is allocated (and page-faulted) while timing,
kernels never overwrite each other's inputs, and the arena is reused by every kernel in turn.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F  # noqa: N812  (torch's own convention)

from infersim.validation.suite import (
    AttentionKernel,
    ElementwiseKernel,
    GemmKernel,
    KernelBase,
    QuantGemmKernel,
)

TORCH_DTYPES: dict[str, torch.dtype] = {
    "fp32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
}
FILL_BYTE = 0x3C
_ALIGN_BYTES = 4096
CHUNK_BYTES = 512 * 1024
"""Per-tensor chunk of the fused elementwise loop: small enough to stay in a core's L2."""


class Arena:
    """Two byte regions (inputs, outputs) that kernels carve tensors from.

    Build every kernel once on a ``meta`` arena to size it, then on a real one; a kernel's
    views start at offset 0, so kernels share the memory and only the largest sets the size.
    """

    def __init__(self, input_bytes: int = 0, output_bytes: int = 0, device: str = "cpu") -> None:
        self.device = device
        self._regions = {
            "in": torch.empty(input_bytes, dtype=torch.uint8, device=device),
            "out": torch.empty(output_bytes, dtype=torch.uint8, device=device),
        }
        self._offset = {"in": 0, "out": 0}
        self.high_water = {"in": 0, "out": 0}
        if device != "meta":
            self._regions["in"].fill_(FILL_BYTE)
            self._regions["out"].zero_()

    def reset(self) -> None:
        """Start carving from offset 0 again (for the next kernel)."""
        self._offset = {"in": 0, "out": 0}

    def take(self, region: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """A contiguous tensor of ``shape`` in ``region`` ("in" or "out").

        Raises:
            ValueError: the region is too small (a real arena sized from a different suite).
        """
        itemsize = torch.empty(0, dtype=dtype).element_size()
        nbytes = math.prod(shape) * itemsize
        start = self._offset[region]
        end = start + nbytes
        self._offset[region] = -(-end // _ALIGN_BYTES) * _ALIGN_BYTES
        self.high_water[region] = max(self.high_water[region], self._offset[region])
        if self.device == "meta":
            return torch.empty(shape, dtype=dtype, device="meta")
        buf = self._regions[region]
        if end > buf.numel():
            raise ValueError(f"arena region {region!r} holds {buf.numel()} bytes, need {end}")
        return buf[start:end].view(dtype).view(shape)


def size_arena(kernels: list[KernelBase]) -> Arena:
    """A real arena large enough for every kernel in ``kernels``."""
    meta = Arena(device="meta")
    for kernel in kernels:
        meta.reset()
        build(kernel, meta)
    return Arena(meta.high_water["in"], meta.high_water["out"])


def build(kernel: KernelBase, arena: Arena) -> Callable[[], object]:
    """A zero-argument callable that runs ``kernel`` once with torch on the CPU.

    Raises:
        ValueError: a kernel kind without a CPU implementation.
    """
    arena.reset()
    if isinstance(kernel, GemmKernel):
        return _gemm(kernel, arena)
    if isinstance(kernel, QuantGemmKernel):
        return _quant_gemm(kernel, arena)
    if isinstance(kernel, AttentionKernel):
        return _attention(kernel, arena)
    if isinstance(kernel, ElementwiseKernel):
        return _elementwise(kernel, arena)
    raise ValueError(f"no CPU implementation for kernel {kernel!r}")


def _gemm(kernel: GemmKernel, arena: Arena) -> Callable[[], object]:
    dt = TORCH_DTYPES[kernel.dtype]
    a = arena.take("in", (kernel.m, kernel.k), dt)
    w = arena.take("in", (kernel.n, kernel.k), dt)  # nn.Linear layout
    c = arena.take("out", (kernel.m, kernel.n), dt)
    wt = w.t()
    return lambda: torch.matmul(a, wt, out=c)


def _quant_gemm(kernel: QuantGemmKernel, arena: Arena) -> Callable[[], object]:
    """torch's fused CPU weight-only kernels: int8 takes one scale per output column, int4 one
    scale and zero per group (the CPU int4 op's packed [N, K/2] layout)."""
    dt = TORCH_DTYPES[kernel.dtype]
    x = arena.take("in", (kernel.m, kernel.k), dt)
    if kernel.bits == 8:
        w8 = arena.take("in", (kernel.n, kernel.k), torch.int8)
        scales = arena.take("in", (kernel.n,), dt)
        return lambda: torch.ops.aten._weight_int8pack_mm(x, w8, scales)
    w4 = arena.take("in", (kernel.n, kernel.k // 2), torch.uint8)
    scales_zeros = arena.take("in", (kernel.k // kernel.group_size, kernel.n, 2), dt)
    group = kernel.group_size
    return lambda: torch.ops.aten._weight_int4pack_mm_for_cpu(x, w4, group, scales_zeros)


def _attention(kernel: AttentionKernel, arena: Arena) -> Callable[[], object]:
    dt = TORCH_DTYPES[kernel.dtype]
    b, h, hk, lq, lk, d = (
        kernel.batch, kernel.heads, kernel.kv_heads, kernel.q_len, kernel.kv_len, kernel.head_dim,
    )  # fmt: skip
    q = arena.take("in", (b, h, lq, d), dt)
    k = arena.take("in", (b, hk, lk, d), dt)
    v = arena.take("in", (b, hk, lk, d), dt)
    causal = kernel.causal and lq > 1
    g = h // hk
    # Without a causal mask the g query heads sharing a KV head are stacked as rows of one
    # head (as GQA decode kernels do), so each KV head is read once.
    qs = q.view(b, hk, g * lq, d)
    if kernel.fused:
        if not causal:
            return lambda: F.scaled_dot_product_attention(qs, k, v)
        gqa = h != hk
        if lq == lk:
            return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        # SDPA's is_causal is top-left aligned; infersim's causal mask is bottom-right.
        mask = torch.ones(lq, lk, dtype=torch.bool).tril(diagonal=lk - lq)
        return lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)
    # Unfused: one batched matmul per KV head computes the scores of its stacked query heads;
    # S and P go through memory. q is taken as pre-scaled.
    kt = k.transpose(-1, -2)
    s = arena.take("out", (b, hk, g * lq, lk), dt)
    p = arena.take("out", (b, hk, g * lq, lk), dt)
    o = arena.take("out", (b, hk, g * lq, d), dt)
    if not causal:

        def unfused() -> None:
            torch.matmul(qs, kt, out=s)
            torch.ops.aten._softmax.out(s, -1, False, out=p)
            torch.matmul(p, v, out=o)

        return unfused
    rows = torch.arange(g * lq).remainder(lq)[:, None]
    bias = torch.zeros(g * lq, lk, dtype=dt)
    bias.masked_fill_(torch.arange(lk)[None, :] > rows + (lk - lq), float("-inf"))
    s3, q3 = s.view(-1, g * lq, lk), qs.reshape(-1, g * lq, d)
    kt3 = k.view(-1, lk, d).transpose(1, 2)

    def unfused_causal() -> None:
        torch.baddbmm(bias, q3, kt3, out=s3)
        torch.ops.aten._softmax.out(s, -1, False, out=p)
        torch.matmul(p, v, out=o)

    return unfused_causal


_ACT_OUT = {
    "none": lambda x, out: out.copy_(x),
    "relu": lambda x, out: torch.clamp(x, min=0, out=out),
    "silu": lambda x, out: torch.ops.aten.silu.out(x, out=out),
    "gelu": lambda x, out: torch.ops.aten.gelu.out(x, approximate="tanh", out=out),
}
_ACT_INPLACE = {
    "none": lambda x: x,
    "relu": lambda x: x.clamp_(min=0),
    "silu": lambda x: F.silu(x, inplace=True),
    "gelu": lambda x: x.copy_(F.gelu(x, approximate="tanh")),
}


def _elementwise(kernel: ElementwiseKernel, arena: Arena) -> Callable[[], object]:
    """Unfused: three torch ops, each a full pass. Fused: eager torch cannot fuse, so the three
    ops run chunk by chunk on L2-sized slices: DRAM sees x and the residual read once and the
    output written once, as a fused kernel's traffic."""
    dt = TORCH_DTYPES[kernel.dtype]
    x = arena.take("in", (kernel.rows, kernel.cols), dt)
    bias = arena.take("in", (kernel.cols,), dt)
    res = arena.take("in", (kernel.rows, kernel.cols), dt)
    out = arena.take("out", (kernel.rows, kernel.cols), dt)
    if not kernel.fused:
        t1 = arena.take("out", (kernel.rows, kernel.cols), dt)
        t2 = arena.take("out", (kernel.rows, kernel.cols), dt)
        act = _ACT_OUT[kernel.activation]

        def unfused() -> None:
            torch.add(x, bias, out=t1)
            act(t1, t2)
            torch.add(t2, res, out=out)

        return unfused
    row_bytes = kernel.cols * x.element_size()
    step = max(1, CHUNK_BYTES // row_bytes)
    chunks = [
        (x[i : i + step], res[i : i + step], out[i : i + step]) for i in range(0, kernel.rows, step)
    ]
    act_ = _ACT_INPLACE[kernel.activation]

    def fused() -> None:
        for xc, rc, oc in chunks:
            torch.add(xc, bias, out=oc)
            act_(oc)
            oc.add_(rc)

    return fused
