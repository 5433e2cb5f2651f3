"""Energy of a mapping: bytes at each level × the chip's pJ per byte there + MACs × pJ per MAC.

The per-byte costs come from the chip's :class:`~infersim.arch_models.chip.Energy` (defaults: the
Eyeriss normalized costs, RF 1×, inter-PE 2×, buffer 6×, DRAM 200× a 16-bit MAC). The shared
SRAM level is not part of the loop nest, so its cost is unused here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infersim.arch_models.chip import Chip
from infersim.dataflow.loopnest import LEVELS, Mapping
from infersim.dataflow.templates import OPERANDS


def level_pj_per_byte(chip: Chip) -> dict[str, float]:
    """pJ per byte read or written at each loop-nest level of ``chip``."""
    e = chip.energy
    return {
        "dram": e.dram_pj_per_byte,
        "sram": e.sram_pj_per_byte,
        "array": e.array_pj_per_byte,
        "register_file": e.register_file_pj_per_byte,
    }


@dataclass(frozen=True, slots=True)
class EnergyBreakdown:
    """Dynamic energy of one repetition of an op in picojoules.

    ``by_level`` has one entry per storage level plus ``"mac"``; it sums to ``total_pj``.
    ``by_operand`` splits the data movement (all levels) by operand; it sums to
    ``total_pj - mac_pj``.
    """

    total_pj: float
    mac_pj: float
    by_level: dict[str, float]
    by_operand: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready fields."""
        return {
            "total_pj": self.total_pj,
            "mac_pj": self.mac_pj,
            "by_level": dict(self.by_level),
            "by_operand": dict(self.by_operand),
        }


def traffic_pj(traffic: dict[str, dict[str, Any]], chip: Chip) -> Any:
    """Data-movement pJ of ``traffic[level][operand] = (reads_bytes, writes_bytes)``; works on
    numbers and on numpy arrays alike (the mapper prices many candidates at once)."""
    cost = level_pj_per_byte(chip)
    total: Any = 0.0
    for level in LEVELS:
        for reads, writes in traffic[level].values():
            total = total + (reads + writes) * cost[level]
    return total


def mac_energy_pj(macs: float, mac_class: str, chip: Chip, efficiency: Any = 1.0) -> Any:
    """pJ of ``macs`` multiply-accumulates of ``mac_class`` on ``chip``, at a mapping
    efficiency ``efficiency`` (used PE slots over the folds' slots; a number or an array):
    the PEs a fold leaves idle spend ``energy.idle_pe_share`` of a MAC's energy per slot (0:
    clock-gated, nothing)."""
    pj = macs * chip.energy.mac(mac_class)
    share = chip.energy.idle_pe_share
    return pj + pj * share * (1.0 / efficiency - 1.0) if share else pj


def energy(mapping: Mapping, chip: Chip) -> EnergyBreakdown:
    """Energy of ``mapping`` on ``chip``, broken down per level and per operand (picojoules)."""
    cost = level_pj_per_byte(chip)
    by_level: dict[str, float] = {}
    by_operand: dict[str, float] = dict.fromkeys(OPERANDS, 0)
    for level in LEVELS:  # the sums of sum(), left to right from 0, without its generators
        pj = cost[level]
        moved: float = 0
        for name, (reads, writes) in mapping.traffic[level].items():
            both = reads + writes
            moved += both
            by_operand[name] += both * pj
        by_level[level] = moved * pj
    total_pj, mac_pj = total_and_mac_pj(mapping, chip)
    by_level["mac"] = mac_pj
    return EnergyBreakdown(
        total_pj=total_pj, mac_pj=mac_pj, by_level=by_level, by_operand=by_operand
    )


def total_and_mac_pj(mapping: Mapping, chip: Chip) -> tuple[float, float]:
    """(``total_pj``, ``mac_pj``) of :func:`energy` without its breakdown (what an engine's op
    cost reads of it): the sum of the levels' pJ, each its bytes moved times its pJ per byte,
    then the MACs' (the sum of :func:`energy`'s ``by_level``, in its order)."""
    cost = level_pj_per_byte(chip)
    total: float = 0
    for level in LEVELS:
        moved: float = 0
        for reads, writes in mapping.traffic[level].values():
            moved += reads + writes
        total += moved * cost[level]
    mac_pj = float(mac_energy_pj(mapping.macs, mapping.mac_class, chip,
                                 mapping.mapping_efficiency))  # fmt: skip
    return total + mac_pj, mac_pj
