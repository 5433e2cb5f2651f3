"""Dataflow mapping of operators onto systolic arrays: WS, OS, IS and RS as templates of one
loop-nest analyzer, a tiling search, energy per level, and SCALE-Sim inputs and reports.

    from infersim.dataflow import map_op, energy
    mapping = map_op(op, chip, dataflow="best", objective="latency")
    mapping.compute_cycles, mapping.time_s, energy(mapping, chip).by_level
"""

from infersim.dataflow.energy import EnergyBreakdown, energy
from infersim.dataflow.loopnest import LEVELS, Access, Mapping, Tiling, analyze
from infersim.dataflow.loopnest.waves import Backing, backing_of
from infersim.dataflow.mapper import (
    DATAFLOWS,
    OBJECTIVES,
    clear_cache,
    map_op,
    map_traffic,
    mapping_cost,
    search_many,
    traffic_many,
    traffic_of,
)
from infersim.dataflow.scalesim_io import (
    REPORT_COLUMNS,
    ScaleSimConfig,
    read_config,
    read_topology,
    scalesim_report,
)
from infersim.dataflow.templates import DIMS, OPERANDS, TEMPLATES, FoldCycles, Template

__all__ = [
    "DATAFLOWS",
    "DIMS",
    "LEVELS",
    "OBJECTIVES",
    "OPERANDS",
    "REPORT_COLUMNS",
    "TEMPLATES",
    "Access",
    "Backing",
    "EnergyBreakdown",
    "FoldCycles",
    "Mapping",
    "ScaleSimConfig",
    "Template",
    "Tiling",
    "analyze",
    "backing_of",
    "clear_cache",
    "energy",
    "map_op",
    "map_traffic",
    "mapping_cost",
    "read_config",
    "read_topology",
    "scalesim_report",
    "search_many",
    "traffic_many",
    "traffic_of",
]
