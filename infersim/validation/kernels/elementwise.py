"""A matmul epilogue, out = act(x + bias) + residual, fused into one pass or run as three.

``x`` and ``residual`` are [rows, cols]; ``bias`` is [cols]. The fused kernel reads x, bias and
the residual once and writes out once; the unfused path launches the same kernel three times
(bias, activation, residual), each pass reading and writing a full tensor. Math is fp32.
"""

# ruff: noqa: ANN001, N803  (Triton kernels: untyped pointer args, UPPER constexpr names)

from __future__ import annotations

from typing import Literal

import torch
import triton
import triton.language as tl

from infersim.validation.kernels._common import check_device

Activation = Literal["none", "relu", "silu", "gelu"]
_ACT_CODE = {"none": 0, "relu": 1, "silu": 2, "gelu": 3}


@triton.jit
def _epilogue_kernel(
    x_ptr, bias_ptr, res_ptr, out_ptr, n_elements, n_cols,
    HAS_BIAS: tl.constexpr, ACT: tl.constexpr, HAS_RES: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        x += tl.load(bias_ptr + offs % n_cols, mask=mask, other=0.0).to(tl.float32)
    if ACT == 1:
        x = tl.maximum(x, 0.0)
    elif ACT == 2:
        x = x * tl.sigmoid(x)
    elif ACT == 3:  # tanh approximation, tanh(u) = 2·sigmoid(2u) − 1
        u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        x = x * tl.sigmoid(2.0 * u)
    if HAS_RES:
        x += tl.load(res_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, x.to(out_ptr.dtype.element_ty), mask=mask)


def _launch(
    x: torch.Tensor,
    bias: torch.Tensor | None,
    act: Activation,
    residual: torch.Tensor | None,
    block: int,
) -> torch.Tensor:
    if act not in _ACT_CODE:
        raise ValueError(f"activation {act!r} unknown; allowed: {', '.join(_ACT_CODE)}")
    if x.dim() != 2 or not x.is_contiguous():
        raise ValueError(f"x must be a contiguous [rows, cols] tensor, got {tuple(x.shape)}")
    if bias is not None and bias.shape != (x.shape[1],):
        raise ValueError(f"bias {tuple(bias.shape)} must be [{x.shape[1]}]")
    if residual is not None and (residual.shape != x.shape or not residual.is_contiguous()):
        raise ValueError(f"residual {tuple(residual.shape)} must be contiguous {tuple(x.shape)}")
    present = [t for t in (x, bias, residual) if t is not None]
    check_device(*present)
    out = torch.empty_like(x)
    n = x.numel()
    _epilogue_kernel[(triton.cdiv(n, block),)](
        x, bias if bias is not None else x, residual if residual is not None else x, out,
        n, x.shape[1],
        HAS_BIAS=bias is not None, ACT=_ACT_CODE[act], HAS_RES=residual is not None, BLOCK=block,
    )  # fmt: skip
    return out


def fused_epilogue(
    x: torch.Tensor,
    bias: torch.Tensor,
    residual: torch.Tensor,
    act: Activation = "silu",
    block: int = 1024,
) -> torch.Tensor:
    """act(x + bias) + residual in one pass over memory.

    Raises:
        ValueError: shapes that do not match, an unknown activation, or tensors Triton cannot
            launch on.
    """
    return _launch(x, bias, act, residual, block)


def unfused_epilogue(
    x: torch.Tensor,
    bias: torch.Tensor,
    residual: torch.Tensor,
    act: Activation = "silu",
    block: int = 1024,
) -> torch.Tensor:
    """The same result as :func:`fused_epilogue` in three passes through memory."""
    t = _launch(x, bias, "none", None, block)
    t = _launch(t, None, act, None, block)
    return _launch(t, None, "none", residual, block)


def epilogue_ref(
    x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor, act: Activation = "silu"
) -> torch.Tensor:
    """The torch reference (fp32 math, x's dtype out)."""
    y = x.float() + bias.float()
    if act == "relu":
        y = torch.relu(y)
    elif act == "silu":
        y = torch.nn.functional.silu(y)
    elif act == "gelu":
        y = torch.nn.functional.gelu(y, approximate="tanh")
    return (y + residual.float()).to(x.dtype)
