"""What every kernel wrapper shares: the interpreter switch and the bf16 rule.

Under ``TRITON_INTERPRET=1`` bf16 loads are silently wrong, so kernels upcast bf16 operands to
fp32 right after loading (``UPCAST``) and cast back only when storing. On a GPU bf16 stays
native so ``tl.dot`` uses the tensor cores.
"""

from __future__ import annotations

import os

import torch


def interpreting() -> bool:
    """Whether Triton kernels run in the CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def upcast(*tensors: torch.Tensor) -> bool:
    """Whether a kernel over ``tensors`` must compute in fp32: bf16 under the interpreter."""
    return interpreting() and any(t.dtype == torch.bfloat16 for t in tensors)


def check_device(*tensors: torch.Tensor) -> None:
    """Raise ``ValueError`` unless the tensors share one device Triton can launch on.

    A CPU tensor is accepted only under the interpreter; a CUDA tensor only without it.
    """
    devices = {t.device.type for t in tensors}
    if len(devices) != 1:
        raise ValueError(f"tensors on several devices: {sorted(devices)}")
    device = devices.pop()
    if interpreting() and device != "cpu":
        raise ValueError(f"TRITON_INTERPRET=1 needs CPU tensors, got {device}")
    if not interpreting() and device != "cuda":
        raise ValueError(f"Triton needs CUDA tensors (or TRITON_INTERPRET=1), got {device}")


def next_pow2(n: int) -> int:
    """The smallest power of two >= ``n`` (``n`` >= 1)."""
    return 1 << (n - 1).bit_length()
