"""Triton kernels the harness runs, each with a thin wrapper and a torch reference.

Importing this package imports Triton and defines the kernels: set ``TRITON_INTERPRET=1``
*before* the first import to run them on the CPU interpreter (correctness only).
"""

from infersim.validation.kernels._common import interpreting
from infersim.validation.kernels.attention import (
    attention_ref,
    flash_attention,
    softmax_rows,
    unfused_attention,
)
from infersim.validation.kernels.elementwise import (
    Activation,
    epilogue_ref,
    fused_epilogue,
    unfused_epilogue,
)
from infersim.validation.kernels.matmul import Tile, default_tile, matmul, matmul_ref
from infersim.validation.kernels.quant_matmul import (
    dequant_matmul,
    dequant_matmul_ref,
    dequantize,
    quantize,
)

__all__ = [
    "Activation",
    "Tile",
    "attention_ref",
    "default_tile",
    "dequant_matmul",
    "dequant_matmul_ref",
    "dequantize",
    "epilogue_ref",
    "flash_attention",
    "fused_epilogue",
    "interpreting",
    "matmul",
    "matmul_ref",
    "quantize",
    "softmax_rows",
    "unfused_attention",
    "unfused_epilogue",
]
