"""ggml tensor types: every block struct, its bits per weight and its dequantization cost.

Block sizes are data here (``ggml/src/ggml-common.h``; the same as the ``gguf`` package's
``GGML_QUANT_SIZES``, which a test checks), so that costing a GGUF mix never imports ``gguf``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

BLOCK_LAYOUTS: dict[str, tuple[tuple[str, int], ...]] = {
    # (field, bytes) of each block struct in ggml/src/ggml-common.h; plain types are one element.
    "F32": (("value", 4),),
    "F16": (("value", 2),),
    "BF16": (("value", 2),),
    "F64": (("value", 8),),
    "I8": (("value", 1),),
    "I16": (("value", 2),),
    "I32": (("value", 4),),
    "I64": (("value", 8),),
    "Q4_0": (("d fp16", 2), ("qs 32x4b", 16)),
    "Q4_1": (("d fp16", 2), ("m fp16", 2), ("qs 32x4b", 16)),
    "Q5_0": (("d fp16", 2), ("qh 32x1b", 4), ("qs 32x4b", 16)),
    "Q5_1": (("d fp16", 2), ("m fp16", 2), ("qh 32x1b", 4), ("qs 32x4b", 16)),
    "Q8_0": (("d fp16", 2), ("qs 32xi8", 32)),
    # Q8_1 (a matmul-side activation format, never in files): ggml-common.h has two fp16 = 36
    # bytes, gguf 0.19's GGML_QUANT_SIZES says 40 (two fp32, an older struct); BLOCK_TYPES keeps
    # gguf's number so that it agrees with GGUFReader.
    "Q8_1": (("d fp16", 2), ("s fp16", 2), ("qs 32xi8", 32)),
    "Q2_K": (("scales 16x(4b+4b)", 16), ("qs 256x2b", 64), ("d fp16", 2), ("dmin fp16", 2)),
    "Q3_K": (("hmask 256x1b", 32), ("qs 256x2b", 64), ("scales 16x6b", 12), ("d fp16", 2)),
    "Q4_K": (("d fp16", 2), ("dmin fp16", 2), ("scales 8x(6b+6b)", 12), ("qs 256x4b", 128)),
    "Q5_K": (("d fp16", 2), ("dmin fp16", 2), ("scales 8x(6b+6b)", 12), ("qh 256x1b", 32),
             ("qs 256x4b", 128)),
    "Q6_K": (("ql 256x4b", 128), ("qh 256x2b", 64), ("scales 16xi8", 16), ("d fp16", 2)),
    "Q8_K": (("d fp32", 4), ("qs 256xi8", 256), ("bsums 16xi16", 32)),
    "IQ2_XXS": (("d fp16", 2), ("qs 32xu16", 64)),
    "IQ2_XS": (("d fp16", 2), ("qs 32xu16", 64), ("scales 8", 8)),
    "IQ2_S": (("d fp16", 2), ("qs", 64), ("qh", 8), ("scales", 8)),
    "IQ3_XXS": (("d fp16", 2), ("qs", 96)),
    "IQ3_S": (("d fp16", 2), ("qs", 64), ("qh", 8), ("signs", 32), ("scales", 4)),
    "IQ1_S": (("d fp16", 2), ("qs", 32), ("qh 8xu16", 16)),
    "IQ1_M": (("qs", 32), ("qh", 16), ("scales", 8)),
    "IQ4_NL": (("d fp16", 2), ("qs 32x4b", 16)),
    "IQ4_XS": (("d fp16", 2), ("scales_h u16", 2), ("scales_l", 4), ("qs 256x4b", 128)),
    "TQ1_0": (("qs 5 trits/byte", 48), ("qh 4 trits/byte", 4), ("d fp16", 2)),
    "TQ2_0": (("qs 256x2b", 64), ("d fp16", 2)),
    "MXFP4": (("e e8m0", 1), ("qs 32xe2m1", 16)),
    "NVFP4": (("d 4xue4m3", 4), ("qs 64xe2m1", 32)),
    "Q1_0": (("d fp16", 2), ("qs 128x1b", 16)),
}
"""Block structs of ``ggml-common.h``: field sizes in bytes (their sum is the block's size)."""

DEQUANT_OPS_PER_WEIGHT: dict[str, float] = {
    # Estimates, counted from the reference dequantize_row_* loops (ggml-quants.c, mirrored in
    # gguf.quants): one op per weight for each bit-field extraction (shift + mask), high-bit
    # merge, offset or min, scale multiply, table lookup and sign flip; per-block work (scale
    # decode, grid-index decode) is divided by the weights it serves. Not measured.
    "F32": 0.0, "F64": 1.0, "F16": 1.0, "BF16": 1.0,  # one widening convert
    "I8": 1.0, "I16": 1.0, "I32": 1.0, "I64": 1.0,
    "Q8_0": 1.0, "Q8_1": 1.0, "Q8_K": 1.0,  # int8 * scale
    "Q4_0": 3.0,  # extract nibble, -8, * d
    "Q4_1": 3.0,  # extract nibble, * d, + m
    "Q5_0": 5.0,  # nibble, high bit, merge, -16, * d
    "Q5_1": 5.0,  # nibble, high bit, merge, * d, + m
    "Q2_K": 3.25,  # 2-bit field, * sub-scale, - sub-min; 4 ops per 16-weight sub-block
    "Q3_K": 4.3,  # 2-bit field, high bit, merge/offset, * sub-scale; 6-bit scale decode / 16
    "Q4_K": 3.25,  # nibble, * sub-scale, - sub-min; 6-bit scale + min decode / 32
    "Q5_K": 5.25,  # nibble, high bit, merge, * sub-scale, - sub-min; scale decode / 32
    "Q6_K": 5.1,  # nibble, 2 high bits, merge, -32, * sub-scale; int8 scale / 16
    "IQ2_XXS": 3.5,  # grid lookup (8 weights), sign lookup, sign flip, * scale; index decode / 8
    "IQ2_XS": 3.5,
    "IQ2_S": 3.5,
    "IQ3_XXS": 3.75,  # grid lookup (4 weights), sign flip, * scale; index decode / 4
    "IQ3_S": 3.75,
    "IQ1_S": 4.0,  # grid lookup (8 weights), + delta, * scale; index + delta decode / 8
    "IQ1_M": 4.5,  # as IQ1_S plus the split fp16 scale reassembly
    "IQ4_NL": 3.0,  # nibble, 16-entry non-linear table, * d
    "IQ4_XS": 3.2,  # as IQ4_NL plus 6-bit sub-scale decode / 32
    "TQ1_0": 5.0,  # base-3 digit: * 3^k, * 3 >> 8, -1, * d
    "TQ2_0": 3.0,  # 2-bit field, -1, * d
    "MXFP4": 3.0,  # nibble, e2m1 table, * 2^e (E8M0 decode / 32)
    "NVFP4": 3.3,  # nibble, e2m1 table, * scale; UE4M3 scale decode / 16
    "Q1_0": 3.0,  # bit, to +-1, * d
}
"""Estimated vector ops to turn one stored weight into an activation-dtype value."""

Family = Literal["float", "int", "legacy", "k-quant", "i-quant", "ternary", "fp4"]


@dataclass(frozen=True, slots=True)
class BlockType:
    """One ggml tensor type: ``block_size`` weights stored in ``block_bytes`` bytes."""

    name: str
    block_size: int
    block_bytes: int
    family: Family
    dequant_ops_per_weight: float

    @property
    def bits_per_weight(self) -> float:
        """Stored bits per weight, scales included."""
        return 8 * self.block_bytes / self.block_size

    def row_bytes(self, n_weights: int) -> int:
        """Bytes of ``n_weights`` weights (a whole number of blocks)."""
        return n_weights // self.block_size * self.block_bytes


def _family(name: str) -> Family:
    if name in {"F32", "F16", "BF16", "F64"}:
        return "float"
    if name.startswith("I") and not name.startswith("IQ"):
        return "int"
    if name.startswith("IQ"):
        return "i-quant"
    if name.startswith("TQ"):
        return "ternary"
    if name.endswith("FP4"):
        return "fp4"
    return "k-quant" if name.endswith("_K") else "legacy"


GGML_TYPE_SIZES: dict[str, tuple[int, int]] = {
    # (weights per block, bytes per block), in ggml type-id order; gguf 0.19's GGML_QUANT_SIZES
    "F32": (1, 4), "F16": (1, 2), "Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22),
    "Q5_1": (32, 24), "Q8_0": (32, 34), "Q8_1": (32, 40), "Q2_K": (256, 84),
    "Q3_K": (256, 110), "Q4_K": (256, 144), "Q5_K": (256, 176), "Q6_K": (256, 210),
    "Q8_K": (256, 292), "IQ2_XXS": (256, 66), "IQ2_XS": (256, 74), "IQ3_XXS": (256, 98),
    "IQ1_S": (256, 50), "IQ4_NL": (32, 18), "IQ3_S": (256, 110), "IQ2_S": (256, 82),
    "IQ4_XS": (256, 136), "I8": (1, 1), "I16": (1, 2), "I32": (1, 4), "I64": (1, 8),
    "F64": (1, 8), "IQ1_M": (256, 56), "BF16": (1, 2), "TQ1_0": (256, 54),
    "TQ2_0": (256, 66), "MXFP4": (32, 17), "NVFP4": (64, 36), "Q1_0": (128, 18),
}  # fmt: skip
"""Weights and bytes per block of every ggml type (the sum of its :data:`BLOCK_LAYOUTS` fields,
except Q8_1: see there)."""

BLOCK_TYPES: dict[str, BlockType] = {
    name: BlockType(name, size, nbytes, _family(name), DEQUANT_OPS_PER_WEIGHT[name])
    for name, (size, nbytes) in GGML_TYPE_SIZES.items()
}
"""Every ggml type of :data:`GGML_TYPE_SIZES` by name (``Q4_K``, ``IQ2_XS``...)."""
