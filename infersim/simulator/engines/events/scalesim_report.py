"""The replay's figures (:class:`~.scalesim.LayerStall`) as the cells of SCALE-Sim 3.0.0's
three report files (``single_layer_sim.calc_report_data``): the same arithmetic in the same
order, so that the printed numbers are SCALE-Sim's own."""

from __future__ import annotations

from typing import Any

from infersim.simulator.engines.events.scalesim import LayerStall, OperandTrace


def _rate(words: int, cycles: tuple[int, int]) -> float:
    return words / float(cycles[1] - cycles[0] + 1)


def report_figures(res: LayerStall) -> dict[str, Any]:
    """Every column of SCALE-Sim's COMPUTE, BANDWIDTH and DETAILED_ACCESS reports for one
    layer (names as in :data:`infersim.dataflow.scalesim_io.REPORT_FILES`): ints where
    SCALE-Sim prints ints, floats where it keeps cycles as floats; percentages 0..100."""
    total = res.total_cycles
    ops: tuple[tuple[str, str, str, OperandTrace], ...] = (
        ("IFMAP", "IFMAP", "Reads", res.ifmap),
        ("FILTER", "Filter", "Reads", res.filter),
        ("OFMAP", "OFMAP", "Writes", res.ofmap),
    )
    out: dict[str, Any] = {
        "Total Cycles (incl. prefetch)": res.total_cycles_incl_prefetch,
        "Total Cycles": total,
        "Stall Cycles": res.stall_cycles,
        "Overall Util %": res.overall_util_pct,
        "Mapping Efficiency %": res.mapping_efficiency * 100,
        "Compute Util %": res.compute_utilization * 100,
    }
    for key, _, _, t in ops:
        out[f"Avg {key} SRAM BW"] = t.sram_words / total
    for key, _, _, t in ops:
        out[f"Avg {key} DRAM BW"] = _rate(t.dram_words, t.dram_cycles)
    for level in ("SRAM", "DRAM"):
        for _, name, count, t in ops:
            cycles, words = (t.sram_cycles, t.sram_words) if level == "SRAM" else (
                t.dram_cycles, t.dram_words)
            out[f"{level} {name} Start Cycle"] = float(cycles[0])
            out[f"{level} {name} Stop Cycle"] = float(cycles[1])
            out[f"{level} {name} {count}"] = words
    return out
