"""Borrowed constants, each with its source. One place; engines never inline a fudge factor.

Energy per MAC (pJ) scales Horowitz's 45 nm figures (ISSCC 2014, "Computing's energy problem")
to a multiply plus an add at each width. Per-byte access energies follow the Eyeriss normalized
costs (Chen et al., ISCA 2016, Fig. 2: relative to one 16-bit MAC, RF 1×, inter-PE 2×, global
buffer 6×, DRAM 200×), applied per 16-bit word and expressed per byte.
"""

from __future__ import annotations

MAC_ENERGY_PJ: dict[str, float] = {
    # Horowitz 2014, 45 nm: fp32 mult 3.7 + add 0.9; fp16 mult 1.1 + add 0.4;
    # int8 mult 0.2 + add 0.03; int32 add 0.1. Narrower formats scale by width (estimate).
    "fp32": 4.6,
    "tf32": 2.6,
    "bf16": 1.3,
    "fp16": 1.5,
    "fp8": 0.55,
    "int16": 0.9,
    "int8": 0.3,
    "int4": 0.12,
    "fp4": 0.25,
}
"""pJ per multiply-accumulate by compute class (45 nm estimates; see module docstring)."""

EYERISS_RELATIVE_COST: dict[str, float] = {
    "register_file": 1.0,
    "array": 2.0,
    "sram": 6.0,
    "shared_sram": 6.0,
    "dram": 200.0,
}
"""Access energy relative to one 16-bit MAC (Chen et al., ISCA 2016, Fig. 2)."""

EYERISS_MAC_PJ = MAC_ENERGY_PJ["int16"]
"""The 16-bit MAC the Eyeriss ratios are normalized to."""


def eyeriss_pj_per_byte(level: str) -> float:
    """Default pJ per byte at ``level``: Eyeriss ratio × 16-bit MAC energy / 2 bytes per word."""
    return EYERISS_RELATIVE_COST[level] * EYERISS_MAC_PJ / 2
