"""Number formats: storage bits (scales included) and the compute class a MAC unit is rated for.

Storage and compute are different questions: ``fp8_e5m2`` is stored in 8 bits and computed on
the units rated for ``fp8``; a chip lists MAC rates per compute class. Block-scaled formats
count their scales in ``bits`` (MXFP4: 4-bit values + one 8-bit scale per 32 = 4.25 bits).
Storage-only formats (GGUF legacy, k- and i-quants, grouped int4, 3-bit) have no compute class:
weights in them are dequantized and multiplied at the activation dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from infersim.errors import InfersimError

MacClass = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int16", "int8", "int4", "fp4"]
"""The compute classes a systolic array lists MAC rates for."""

MAC_CLASSES: tuple[str, ...] = get_args(MacClass)


@dataclass(frozen=True, slots=True)
class DTypeInfo:
    """Storage width (bits per element, scales included) and compute class of one format."""

    bits: float
    mac_class: str | None
    is_float: bool
    source: str = ""

    @property
    def bytes(self) -> float:
        """Bytes per element (fractional for sub-byte and block-scaled formats)."""
        return self.bits / 8

    @property
    def storage_only(self) -> bool:
        """Whether the format is only stored (dequantized before any multiply)."""
        return self.mac_class is None


_LLAMA_CPP = "llama.cpp tools/quantize/README.md, bits per weight measured on Llama 2 7B"
_MIX = (
    "llama-quantize mix on Llama-3-8B shapes (infersim.workloads.gguf: tensor bytes x 8 / "
    "8.03e9 weights; llama.cpp tools/quantize/README.md measures the same on Llama-3.1-8B)"
)
_MIX_UNLISTED = (
    "llama-quantize mix on Llama-3-8B shapes (infersim.workloads.gguf: tensor bytes x 8 / "
    "8.03e9 weights)"
)

_GGUF: dict[str, DTypeInfo] = {
    # llama-quantize presets: the average over all tensors of one model, so a few tenths of a
    # bit depend on the model (the LM head and embedding are a larger share of small models).
    "q8_0": DTypeInfo(8.5, None, False, "ggml block_q8_0: 32 int8 + fp16 scale"),
    "q6_k": DTypeInfo(6.56, None, False, _LLAMA_CPP),
    "q5_k_m": DTypeInfo(5.68, None, False, _LLAMA_CPP),
    "q5_k_s": DTypeInfo(5.52, None, False, _LLAMA_CPP),
    "q4_k_m": DTypeInfo(4.84, None, False, _LLAMA_CPP),
    "q4_k_s": DTypeInfo(4.58, None, False, _LLAMA_CPP),
    "q4_0": DTypeInfo(4.5, None, False, "ggml block_q4_0: 32 4-bit + fp16 scale"),
    "q3_k_l": DTypeInfo(4.27, None, False, _LLAMA_CPP),
    "q3_k_m": DTypeInfo(3.91, None, False, _LLAMA_CPP),
    "q3_k_s": DTypeInfo(3.50, None, False, _LLAMA_CPP),
    "q2_k": DTypeInfo(3.35, None, False, _LLAMA_CPP),
    "q4_1": DTypeInfo(5.10, None, False, _MIX_UNLISTED),
    "q5_0": DTypeInfo(5.57, None, False, _MIX_UNLISTED),
    "q5_1": DTypeInfo(6.04, None, False, _MIX_UNLISTED),
    "q2_k_s": DTypeInfo(2.97, None, False, _MIX),
    "iq1_s": DTypeInfo(2.00, None, False, _MIX),
    "iq1_m": DTypeInfo(2.15, None, False, _MIX),
    "iq2_xxs": DTypeInfo(2.38, None, False, _MIX),
    "iq2_xs": DTypeInfo(2.59, None, False, _MIX),
    "iq2_s": DTypeInfo(2.74, None, False, _MIX),
    "iq2_m": DTypeInfo(2.93, None, False, _MIX),
    "iq3_xxs": DTypeInfo(3.25, None, False, _MIX),
    "iq3_xs": DTypeInfo(3.50, None, False, _MIX),
    "iq3_s": DTypeInfo(3.66, None, False, _MIX),
    "iq3_m": DTypeInfo(3.76, None, False, _MIX),
    "iq4_nl": DTypeInfo(4.68, None, False, _MIX),
    "iq4_xs": DTypeInfo(4.46, None, False, _MIX),
    "tq1_0": DTypeInfo(2.19, None, False, _MIX_UNLISTED),
    "tq2_0": DTypeInfo(2.52, None, False, _MIX_UNLISTED),
}

_INFO: dict[str, DTypeInfo] = {
    "fp32": DTypeInfo(32, "fp32", True),
    "tf32": DTypeInfo(32, "tf32", True),  # stored as fp32, multiplied at 19 bits
    "bf16": DTypeInfo(16, "bf16", True),
    "fp16": DTypeInfo(16, "fp16", True),
    "fp8_e4m3": DTypeInfo(8, "fp8", True),
    "fp8_e5m2": DTypeInfo(8, "fp8", True),
    "int16": DTypeInfo(16, "int16", False),
    "int8": DTypeInfo(8, "int8", False),
    "int4": DTypeInfo(4, "int4", False),
    "fp4": DTypeInfo(4, "fp4", True),  # bare e2m1, no scales
    "mxfp4": DTypeInfo(4 + 8 / 32, "fp4", True, "OCP Microscaling spec v1.0: E8M0 scale per 32"),
    "nvfp4": DTypeInfo(4 + 8 / 16, "fp4", True, "NVIDIA Blackwell NVFP4: E4M3 scale per 16"),
    "int4-g128": DTypeInfo(
        4 + (16 + 4) / 128, None, False, "GPTQ/AWQ: fp16 scale + 4-bit zero point per 128"
    ),
    "int3": DTypeInfo(3, None, False, "3-bit KV-cache quantization (scales not counted)"),
    **_GGUF,
}

DTYPES: tuple[str, ...] = tuple(_INFO)
"""Every format infersim knows, canonical names."""

GGUF_FORMATS: tuple[str, ...] = tuple(_GGUF)
"""Names of the GGUF weight formats (``llama-quantize`` presets, lower case); each is
storage-only, its ``bits`` the preset's average (per-tensor mixes:
:mod:`infersim.workloads.gguf`)."""

ALIASES: dict[str, str] = {
    "fp8": "fp8_e4m3",
    "e4m3": "fp8_e4m3",
    "e5m2": "fp8_e5m2",
    "float32": "fp32",
    "float": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
}


def canonical(name: str) -> str:
    """The canonical dtype name for ``name`` (aliases such as ``fp8`` or ``bfloat16`` accepted).

    Raises:
        InfersimError: ``name`` is not a known dtype; the message lists the known ones.
    """
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in _INFO:
        allowed = ", ".join([*DTYPES, *ALIASES])
        raise InfersimError(f"unknown dtype {name!r}; allowed: {allowed}")
    return key


def info(name: str) -> DTypeInfo:
    """Storage width and compute class of ``name`` (see :func:`canonical`)."""
    return _INFO[canonical(name)]


def nbytes(name: str) -> float:
    """Bytes per element of dtype ``name``."""
    return info(name).bytes


def mac_class(name: str) -> str:
    """The compute class of ``name`` (a compute class name passes through).

    Raises:
        InfersimError: ``name`` is a storage-only format.
    """
    if name in MAC_CLASSES:
        return name
    cls = info(name).mac_class
    if cls is None:
        raise InfersimError(
            f"{name} is a storage-only format: it is dequantized and multiplied at the "
            "activation dtype, never computed in"
        )
    return cls
