"""Unit constants and human-readable formatting.

Engines work in cycles and bytes; seconds and SI prefixes appear only at the boundary.
"""

from __future__ import annotations

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KiB = 1024
MiB = 1024**2
GiB = 1024**3

NS = 1e-9
US = 1e-6
MS = 1e-3

_SI = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]


def si(value: float, unit: str, digits: int = 3) -> str:
    """Format ``value`` with an SI prefix, e.g. ``si(3.35e12, "B/s") == "3.35 TB/s"``."""
    magnitude = abs(value)
    for scale, prefix in _SI:
        if magnitude >= scale:
            return f"{value / scale:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}"


def fmt_bytes(n_bytes: float) -> str:
    """Decimal bytes: ``fmt_bytes(138e9) == "138 GB"``."""
    return si(n_bytes, "B")


def fmt_time(seconds: float) -> str:
    """Seconds with the most readable unit (s, ms, µs, ns)."""
    magnitude = abs(seconds)
    if magnitude >= 1 or magnitude == 0:
        return f"{seconds:.3g} s"
    if magnitude >= MS:
        return f"{seconds / MS:.3g} ms"
    if magnitude >= US:
        return f"{seconds / US:.3g} µs"
    return f"{seconds / NS:.3g} ns"
