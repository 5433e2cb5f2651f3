"""Number formats: storage bits and the compute class a MAC unit is rated for.

Storage and compute are different questions: ``fp8_e5m2`` is stored in 8 bits and computed on
the units rated for ``fp8``; a chip lists MAC rates per compute class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from infersim.errors import InfersimError

DType = Literal[
    "fp32", "tf32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "int16", "int8", "int4", "fp4"
]
"""Every storage dtype infersim knows."""

MacClass = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int16", "int8", "int4", "fp4"]
"""The compute classes a systolic array lists MAC rates for."""

DTYPES: tuple[str, ...] = get_args(DType)
MAC_CLASSES: tuple[str, ...] = get_args(MacClass)


@dataclass(frozen=True, slots=True)
class DTypeInfo:
    """Storage width and compute class of one dtype."""

    bits: float
    mac_class: str
    is_float: bool

    @property
    def bytes(self) -> float:
        """Bytes per element (fractional for sub-byte formats)."""
        return self.bits / 8


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
    "fp4": DTypeInfo(4, "fp4", True),
}

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
