"""Hardware descriptions: chips, their components, presets."""

from infersim.arch_models.chip import (
    DRAM,
    SRAM,
    Calibration,
    Chip,
    ChipLink,
    Energy,
    HostLink,
    PublishedSpec,
    RegisterFile,
    SystolicArray,
    VectorUnit,
)
from infersim.arch_models.presets import list_chips, load_chip

__all__ = [
    "DRAM",
    "SRAM",
    "Calibration",
    "Chip",
    "ChipLink",
    "Energy",
    "HostLink",
    "PublishedSpec",
    "RegisterFile",
    "SystolicArray",
    "VectorUnit",
    "list_chips",
    "load_chip",
]
