"""Area, power and unit-cost estimates of a chip design, good enough to rank designs.

**An estimate, not a floorplan.** Area sums per-component constants at one process node
(:data:`PROCESS_NODE_NM`): processing elements by the compute classes they support, SRAM and
register files by capacity, vector lanes, DRAM PHYs by interface, host and chip-to-chip links,
plus an uncore share (NoC, control, clocking). Power is the chip's own energy model (pJ per MAC
and per byte, from ``chip.energy``) times a rate, plus static power (the chip's
``energy.static_power_w`` when it sets one, else leakage per mm²). Unit cost is die cost
(wafer cost, dies per wafer, Poisson yield) plus DRAM and packaging. Every constant lives in
:data:`CONSTANTS` with its unit and source.

**Published figures first.** A chip whose description publishes its die area, TDP or price
(``spec:`` in its YAML, with sources) is recorded with those (:func:`chip_figures`); the
estimate fills only what is not published, and a variant of a described chip scales its
published figures by the estimate. Note that a real chip's price includes the vendor's margin,
while the estimated unit cost of a design is what it costs to make.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from infersim.arch_models.chip import Chip

PROCESS_NODE_NM = 7
"""The node the area, leakage and wafer constants describe (TSMC N7 class)."""


@dataclass(frozen=True, slots=True)
class Constant:
    """A borrowed or estimated figure with its unit and where it comes from."""

    value: float
    unit: str
    source: str


_HOROWITZ = (
    "Horowitz, 'Computing's energy problem', ISSCC 2014, 45 nm MAC areas (fp16 mult 1640 + add "
    "1360 µm²), scaled to 7 nm by 1/25 (logic density: TSMC N7 ≈ 91 MTr/mm² vs 45 nm ≈ 3.5), "
    "×2 for the PE's pipeline registers, operand muxes and local wiring (estimate)"
)

CONSTANTS: dict[str, Constant] = {
    "pe_mm2_per_bf16_mac": Constant(2.4e-4, "mm² per bf16 MAC/cycle", _HOROWITZ),
    "mac_area_relative.fp32": Constant(4.0, "× bf16", "Horowitz 2014: fp32 mult+add 11884 µm²"),
    "mac_area_relative.tf32": Constant(1.3, "× bf16", "10-bit mantissa like fp16, wider exponent"),
    "mac_area_relative.bf16": Constant(1.0, "× bf16", "reference"),
    "mac_area_relative.fp16": Constant(1.0, "× bf16", "Horowitz 2014: fp16 mult+add 3000 µm²"),
    "mac_area_relative.fp8": Constant(0.35, "× bf16", "mantissa multiplier ∝ bits² (estimate)"),
    "mac_area_relative.int16": Constant(0.41, "× bf16", "Horowitz 2014: 16-bit mult + 32-bit add"),
    "mac_area_relative.int8": Constant(0.14, "× bf16", "Horowitz 2014: 8-bit mult 282 + add 137"),
    "mac_area_relative.int4": Constant(0.05, "× bf16", "scaled from int8 by bits² (estimate)"),
    "mac_area_relative.fp4": Constant(0.12, "× bf16", "scaled from fp8 by bits² (estimate)"),
    "pe_shared_datapath": Constant(
        0.25, "fraction", "each extra compute class adds this share of its own MAC area: "
        "multi-precision PEs share multipliers and accumulators (estimate)"
    ),
    "sram_mm2_per_mib": Constant(
        0.45, "mm²/MiB", "TSMC N7 high-density 6T bitcell 0.027 µm² (IEDM 2016) at ~50% array "
        "efficiency (periphery, redundancy)"
    ),
    "register_file_mm2_per_mib": Constant(
        1.8, "mm²/MiB", "flip-flop/latch register files ≈ 4× SRAM area per bit (estimate)"
    ),
    "vector_lane_mm2": Constant(
        1.0e-3, "mm² per lane", "one fp32 FMA (Horowitz 2014 11884 µm² at 45 nm, /25) with "
        "registers ×2 (estimate)"
    ),
    "hbm_phy_mm2_per_stack": Constant(
        14.0, "mm² per stack", "HBM2E/HBM3 PHY + controller per 1024-bit stack interface, "
        "vendor IP briefs and die-shot estimates (≈ 10-15 mm²)"
    ),
    "hbm2_bytes_per_s_per_stack": Constant(307e9, "B/s", "JEDEC HBM2 2.4 Gb/s × 1024 bits"),
    "hbm2e_bytes_per_s_per_stack": Constant(461e9, "B/s", "HBM2E 3.6 Gb/s × 1024 bits"),
    "hbm3_bytes_per_s_per_stack": Constant(819e9, "B/s", "JEDEC HBM3 6.4 Gb/s × 1024 bits"),
    "hbm3e_bytes_per_s_per_stack": Constant(1229e9, "B/s", "HBM3E 9.6 Gb/s × 1024 bits"),
    "dram_phy_mm2_per_gbps": Constant(
        0.08, "mm² per GB/s", "LPDDR5/DDR5 x64 PHY ≈ 4 mm² for 51.2 GB/s (vendor IP briefs)"
    ),
    "host_link_mm2": Constant(8.0, "mm²", "PCIe Gen5 x16 controller + PHY (estimate)"),
    "chip_link_mm2_per_gbps": Constant(
        0.03, "mm² per GB/s", "112G SerDes ≈ 0.4 mm² per 14 GB/s lane (estimate)"
    ),
    "uncore_fraction": Constant(
        0.35, "fraction", "NoC, control, clocking, test and white space over compute + SRAM "
        "(estimate from published accelerator floorplans)"
    ),
    "leakage_w_per_mm2": Constant(
        0.03, "W/mm²", "static power at 7 nm, typical-corner logic + SRAM (estimate)"
    ),
    "wafer_cost_usd": Constant(
        9346.0, "$ per 300 mm wafer", "Khan & Mann, 'AI Chips: What They Are and Why They "
        "Matter', CSET 2020, TSMC 7 nm"
    ),
    "wafer_diameter_mm": Constant(300.0, "mm", "standard wafer"),
    "defect_density_per_cm2": Constant(0.09, "defects/cm²", "TSMC N7 (2020 public figure)"),
    "hbm_usd_per_gib": Constant(12.0, "$/GiB", "HBM3 contract-price estimates 2023-24"),
    "dram_usd_per_gib": Constant(4.0, "$/GiB", "LPDDR5/DDR5 contract-price estimates"),
    "packaging_usd_hbm": Constant(
        150.0, "$", "2.5D interposer (CoWoS) packaging and test (estimate)"
    ),
    "packaging_usd": Constant(20.0, "$", "flip-chip BGA packaging and test (estimate)"),
}
"""Every constant of the model: value, unit, source (one table)."""


def constant(name: str) -> float:
    """The value of :data:`CONSTANTS` entry ``name``."""
    return CONSTANTS[name].value


@dataclass(frozen=True)
class DesignCost:
    """Estimates for one chip: area in mm², power in W, unit cost in $."""

    area_mm2: float
    static_power_w: float
    peak_power_w: float
    cost_usd: float
    area_by_part_mm2: dict[str, float] = field(default_factory=dict)
    process_node_nm: int = PROCESS_NODE_NM


def pe_area_mm2(chip: Chip) -> float:
    """Area of one PE: its widest class in full, each other class at the shared-datapath share."""
    areas = sorted(
        (
            constant(f"mac_area_relative.{cls}") * rate
            for cls, rate in chip.array.macs_per_pe_per_cycle.items()
        ),
        reverse=True,
    )
    rel = areas[0] + constant("pe_shared_datapath") * sum(areas[1:])
    return rel * constant("pe_mm2_per_bf16_mac")


def _hbm_stack_bandwidth(kind: str) -> float:
    k = kind.lower()
    for gen in ("hbm3e", "hbm3", "hbm2e", "hbm2"):
        if k.startswith(gen):
            return constant(f"{gen}_bytes_per_s_per_stack")
    return constant("hbm3_bytes_per_s_per_stack")


def dram_phy_mm2(chip: Chip) -> float:
    """DRAM interface area: one PHY per HBM stack the bandwidth needs, or per GB/s otherwise."""
    bw = chip.dram.bandwidth_bytes_per_s
    if chip.dram.kind.lower().startswith("hbm"):
        stacks = math.ceil(bw / _hbm_stack_bandwidth(chip.dram.kind) - 1e-9)
        return stacks * constant("hbm_phy_mm2_per_stack")
    return bw / 1e9 * constant("dram_phy_mm2_per_gbps")


def area_parts_mm2(chip: Chip) -> dict[str, float]:
    """Area of each component in mm² (PEs, register files, SRAM, vector, DRAM PHY, links,
    uncore)."""
    mib = 1024**2
    sram_bytes = chip.sram.capacity_bytes * chip.cores
    if chip.shared_sram is not None:
        sram_bytes += chip.shared_sram.capacity_bytes
    parts = {
        "pe_array": pe_area_mm2(chip) * chip.array.pes * chip.cores,
        "register_files": chip.register_file.bytes_per_pe * chip.array.pes * chip.cores / mib
        * constant("register_file_mm2_per_mib"),
        "sram": sram_bytes / mib * constant("sram_mm2_per_mib"),
        "vector": chip.vector.lanes * chip.cores * constant("vector_lane_mm2"),
    }
    parts["uncore"] = constant("uncore_fraction") * sum(parts.values())
    parts["dram_phy"] = dram_phy_mm2(chip)
    parts["host_link"] = constant("host_link_mm2") if chip.host_link else 0.0
    parts["chip_link"] = (
        chip.chip_link.bandwidth_bytes_per_s / 1e9 * constant("chip_link_mm2_per_gbps")
        if chip.chip_link
        else 0.0
    )
    return parts


def static_power_w(chip: Chip, area_mm2: float) -> float:
    """The chip's own static power when it sets one, else leakage × area (W)."""
    if chip.energy.static_power_w > 0:
        return chip.energy.static_power_w
    return area_mm2 * constant("leakage_w_per_mm2")


def peak_power_w(chip: Chip, static_w: float) -> float:
    """TDP-like bound (W): every MAC busy at the most energetic class, vector units and SRAM at
    full rate, DRAM at peak bandwidth, plus static power."""
    freq = chip.freq_hz
    mac_w = max(
        rate * chip.array.pes * chip.cores * freq * chip.energy.mac(cls)
        for cls, rate in chip.array.macs_per_pe_per_cycle.items()
    )
    vector_w = chip.vector_flops * chip.energy.vector_pj_per_flop
    sram_w = chip.sram.bandwidth_bytes_per_cycle * chip.cores * freq * chip.energy.sram_pj_per_byte
    dram_w = chip.dram.bandwidth_bytes_per_s * chip.energy.dram_pj_per_byte
    return static_w + (mac_w + vector_w + sram_w + dram_w) * 1e-12


def die_cost_usd(area_mm2: float) -> float:
    """Cost of one good die of ``area_mm2``: wafer cost / (dies per wafer × Poisson yield)."""
    d = constant("wafer_diameter_mm")
    dies = math.pi * (d / 2) ** 2 / area_mm2 - math.pi * d / math.sqrt(2 * area_mm2)
    dies = max(dies, 1.0)
    yield_ = math.exp(-area_mm2 / 100 * constant("defect_density_per_cm2"))
    return constant("wafer_cost_usd") / (dies * yield_)


def unit_cost_usd(chip: Chip, area_mm2: float) -> float:
    """Die + DRAM + packaging cost of one chip in $."""
    hbm = chip.dram.kind.lower().startswith("hbm")
    gib = chip.dram.capacity_bytes / 1024**3
    memory = gib * constant("hbm_usd_per_gib" if hbm else "dram_usd_per_gib")
    package = constant("packaging_usd_hbm" if hbm else "packaging_usd")
    return die_cost_usd(area_mm2) + memory + package


def estimate(chip: Chip) -> DesignCost:
    """Area (mm²), static and peak power (W) and unit cost ($) of ``chip`` (an estimate)."""
    parts = area_parts_mm2(chip)
    area = sum(parts.values())
    static = static_power_w(chip, area)
    return DesignCost(
        area_mm2=area,
        static_power_w=static,
        peak_power_w=peak_power_w(chip, static),
        cost_usd=unit_cost_usd(chip, area),
        area_by_part_mm2=parts,
    )


PUBLISHED_FIELDS: dict[str, str] = {
    "area_mm2": "die_area_mm2",
    "peak_power_w": "tdp_w",
    "cost_usd": "price_usd",
}
"""Design figure → the :class:`~infersim.arch_models.chip.PublishedSpec` field that replaces
the estimate when a chip's description publishes it."""


@dataclass(frozen=True)
class ChipFigures:
    """The area (mm²), peak power (W), unit cost ($) and static power (W) a sweep records for
    one design, and which of the first three are estimates rather than published figures."""

    area_mm2: float
    peak_power_w: float
    cost_usd: float
    static_power_w: float
    estimated: tuple[str, ...]
    model: DesignCost


def chip_figures(chip: Chip, base: Chip | None = None) -> ChipFigures:
    """The figures of ``chip``: its description's published die area, TDP and price
    (``chip.spec``) where it has them, the cost model's :func:`estimate` elsewhere. A variant of
    a described chip (``base``: the chip it was derived from) scales each published figure of
    ``base`` by the ratio of the two estimates (an estimate, marked so). A published figure
    its description lists in ``estimated`` stays marked as an estimate. Static power is the
    cost model's (it belongs to the energy model, not to the published figures)."""
    model = estimate(chip)
    reference = base if base is not None else chip
    spec = reference.spec
    base_model = estimate(base) if base is not None else None
    values: dict[str, float] = {}
    estimated: list[str] = []
    for name, field_name in PUBLISHED_FIELDS.items():
        published = getattr(spec, field_name) if spec is not None else None
        modeled = float(getattr(model, name))
        if published is None:
            values[name] = modeled
            estimated.append(name)
        elif base_model is None:
            values[name] = float(published)
            if spec is not None and field_name in spec.estimated:
                estimated.append(name)
        else:
            values[name] = float(published) * modeled / float(getattr(base_model, name))
            estimated.append(name)
    return ChipFigures(
        area_mm2=values["area_mm2"],
        peak_power_w=values["peak_power_w"],
        cost_usd=values["cost_usd"],
        static_power_w=model.static_power_w,
        estimated=tuple(estimated),
        model=model,
    )
