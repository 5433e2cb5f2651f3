"""SCALE-Sim's memory system replayed by the event engine: total and stall cycles, and every
cell of SCALE-Sim 3.0.0's three report files, against its golden rows (the 555-row
finite-bandwidth grid and the 110 USER rows of the first golden set) and against the live
package (a sample of the grid here; the rest of the sample carries the ``slow`` mark)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from scalesim_cases import golden_rows, row_config, row_layer, row_topology, run_scalesim

from infersim.dataflow.scalesim_io import REPORT_FILES, ScaleSimConfig, report_text
from infersim.errors import InfersimError
from infersim.simulator.engines.events.scalesim import simulate_layer
from infersim.simulator.engines.events.scalesim_report import report_figures
from infersim.workloads.ops import Conv2d, Gemm

I8 = {"a_dtype": "int8", "b_dtype": "int8", "out_dtype": "int8"}
C8 = {"dtype": "int8", "weight_dtype": "int8", "out_dtype": "int8"}
GRID = golden_rows("scalesim_grid.csv")
FIRST = [r for r in golden_rows("scalesim_compute.csv") if r["bandwidth_mode"] == "USER"]
CALC = [r for r in golden_rows("scalesim_compute.csv") if r["bandwidth_mode"] == "CALC"]
CELLS = [c for columns in REPORT_FILES.values() for c in columns]
HAS_SCALESIM = importlib.util.find_spec("scalesim") is not None


def test_grid_covers_the_brief() -> None:
    """Bandwidth 1–64 words/cycle, unequal SRAMs of 1 kB–1 MB, square, tall and wide arrays of
    4×4–256×256, the three dataflows, 37 GEMM and conv layers (M = 1, K < rows, N < cols,
    strided large filters past the edge), operands that fit their active half and ones that
    do not."""
    assert len(GRID) == 555
    assert {int(r["bandwidth_words_per_cycle"]) for r in GRID} == {1, 2, 4, 8, 10, 16, 64}
    sizes = {float(r[k]) for r in GRID for k in ("ifmap_sram_kb", "filter_sram_kb",
                                                 "ofmap_sram_kb")}
    assert min(sizes) == 1 and max(sizes) == 1024
    assert sum(len({r["ifmap_sram_kb"], r["filter_sram_kb"], r["ofmap_sram_kb"]}) > 1
               for r in GRID) > 500
    shapes = {(int(r["array_rows"]), int(r["array_cols"])) for r in GRID}
    assert {(4, 4), (256, 256), (4, 64), (64, 4), (32, 256), (256, 32)} <= shapes
    assert {r["dataflow"] for r in GRID} == {"ws", "os", "is"}
    assert len({r["layer"] for r in GRID}) >= 30
    assert {r["kind"] for r in GRID} == {"gemm", "conv"}
    assert any(r["M"] == "1" for r in GRID)
    assert any(int(r["K"]) < int(r["array_rows"]) for r in GRID)
    assert any(int(r["N"]) < int(r["array_cols"]) for r in GRID)
    edge = [r for r in GRID if r["kind"] == "conv" and (
        int(r["ifmap_h"]) - int(r["filter_h"])) % int(r["stride"])]
    assert len(edge) > 50 and max(int(r["filter_h"]) for r in edge) >= 11
    words = {"ifmap": lambda r: int(r["M"]) * int(r["K"]), "filter": lambda r: int(r["K"]) * int(
        r["N"])}
    for name, size in words.items():
        fits = [size(r) <= float(r[f"{name}_sram_kb"]) * 512 for r in GRID]
        assert 50 < sum(fits) < len(GRID) - 50, name


def _figures(row: dict[str, str], folder: Path) -> dict[str, object]:
    layer = row_layer(row, folder)
    return report_figures(simulate_layer(row_config(row), layer.op, layer.ifmap_extent))


def _mismatches(rows: list[dict[str, str]], figures: list[dict[str, object]],
                cells: list[str]) -> list[str]:
    bad = []
    for row, ours in zip(rows, figures, strict=True):
        diff = [f"{c}: {str(ours[c])!r} != {row[c]!r}" for c in cells
                if str(ours[c]) != row[c]]
        if diff:
            bad.append(f"{row['case_id']}: {'; '.join(diff[:3])}")
    return bad


def test_every_grid_row_equals_scalesim(tmp_path: Path) -> None:
    """All 555 grid rows: total and stall cycles, and every other cell of the three reports,
    printed exactly as SCALE-Sim printed them."""
    assert _mismatches(GRID, [_figures(r, tmp_path) for r in GRID], CELLS) == []


def test_first_golden_rows_equal_scalesim(tmp_path: Path) -> None:
    """The 110 USER rows of the first golden set (GEMMs on 8×8 and 32×32 arrays, bandwidth
    1/4/16, SRAMs of 4/16/64 kB) and every 6th CALC row: the cells they recorded."""
    recorded = ["Total Cycles", "Stall Cycles", "Overall Util %", "Mapping Efficiency %",
                "Compute Util %", "SRAM IFMAP Reads", "SRAM Filter Reads", "SRAM OFMAP Writes"]
    assert len(FIRST) == 110
    counts = recorded[:2] + recorded[5:]  # ints that the first set stored as floats
    rows = [{**r, **{c: str(int(float(r[c]))) for c in counts}} for r in FIRST + CALC[::6]]
    figures = [_figures(r, tmp_path) for r in rows]
    assert _mismatches(rows, figures, counts) == []
    for row, ours in zip(rows, figures, strict=True):  # and the percentages parsed by pandas
        for c in recorded[2:5]:
            assert ours[c] == pytest.approx(float(row[c]), rel=1e-12), (row["case_id"], c)


def test_past_the_edge_windows_are_idle_words() -> None:
    """A stride that does not divide H − R: SCALE-Sim keeps the stated ifmap width and leaves
    the words past the edge idle. Replayed on the extent the op reads instead, the IS row below
    (SCALE-Sim: 203 total, 0 stall cycles) would stall for 295 cycles."""
    row = next(r for r in GRID if r["case_id"].startswith("grid359_"))
    cfg = row_config(row)
    op = Conv2d(name="c", in_h=11, in_w=11, kernel_h=3, kernel_w=3, in_channels=4,
                out_channels=8, stride=2, **C8)
    stated = simulate_layer(cfg, op, (10, 10))
    assert (stated.total_cycles, stated.stall_cycles) == (203, 0)
    assert simulate_layer(cfg, op).stall_cycles == 295
    with pytest.raises(InfersimError, match="does not give its 5x5 output"):
        simulate_layer(cfg, op, (8, 10))


def test_replay_timeline_holds_the_refills_and_stalls() -> None:
    row = next(r for r in FIRST if r["case_id"] == "gemm_M17_N33_K70_a8x8_os_user_bw1_sram4")
    op = Gemm(name="l", m=17, n=33, k=70, **I8)
    ours = simulate_layer(row_config(row), op)
    spans = ours.timeline.spans
    refills = [s for s in spans if s.resource in ("dram:ifmap", "dram:filter")
               and s.label.startswith("refill")]
    stalls = [s for s in spans if s.resource == "array:stall"]
    drains = [s for s in spans if s.resource == "dram:ofmap"]
    assert len(refills) == ours.ifmap_refills + ours.filter_refills > 0
    assert len(drains) == ours.ofmap_drains > 0
    assert max(s.end_cycles for s in drains) == ours.ofmap.dram_cycles[1] + 1
    assert sum(s.end_cycles - s.start_cycles for s in stalls) == ours.stall_cycles
    assert max(s.end_cycles for s in spans if s.resource.startswith("array")) == (
        ours.total_cycles)
    assert ours.timeline == simulate_layer(row_config(row), op).timeline  # deterministic


def _cfg(**changes: object) -> ScaleSimConfig:
    base = {"run_name": "x", "array_rows": 8, "array_cols": 8, "ifmap_sram_kb": 4,
            "filter_sram_kb": 4, "ofmap_sram_kb": 4, "dataflow": "ws",
            "interface_bandwidth": "USER", "bandwidth_words_per_cycle": 2}
    return ScaleSimConfig.model_validate({**base, **changes})


@pytest.mark.parametrize(("changes", "message"), [
    ({"bandwidth_words_per_cycle": 2.5}, "whole number"),
    ({"ifmap_bank_num": 3}, "not divisible by its 3 banks"),
    ({"ifmap_custom_layout": True}, "custom layouts"),
    ({"sparsity_support": True}, "sparsity"),
    ({"use_ramulator_trace": True}, "Ramulator"),
])
def test_bad_inputs_are_refused(changes: dict[str, object], message: str) -> None:
    with pytest.raises(InfersimError, match=message):
        simulate_layer(_cfg(**changes), Gemm(name="g", m=8, k=8, n=8, **I8))


def test_batched_layers_are_refused() -> None:
    with pytest.raises(InfersimError, match="batch 1"):
        simulate_layer(_cfg(), Gemm(name="g", m=8, k=8, n=8, batch=2, **I8))


def _live_sample() -> list[object]:
    """Grid rows SCALE-Sim ran in under 0.3 s, every 8th: three in ``make test``, the rest
    ``slow``; and one multi-layer CALC run."""
    fast = [r for r in GRID if float(r["wall_s_run"]) < 0.3][::8]
    return [pytest.param(r, id=r["case_id"], marks=() if i < 3 else pytest.mark.slow)
            for i, r in enumerate(fast)]


@pytest.mark.skipif(not HAS_SCALESIM, reason="the scalesim package is not installed")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("row", _live_sample())
def test_report_files_equal_live_scalesim(row: dict[str, str], tmp_path: Path) -> None:
    """A grid row run live: SCALE-Sim's three report files, byte for byte."""
    cfg = row_config(row)
    theirs = run_scalesim(cfg, row_topology(row), tmp_path)
    layer = row_layer(row, tmp_path)
    figures = [report_figures(simulate_layer(cfg, layer.op, layer.ifmap_extent))]
    for name, columns in REPORT_FILES.items():
        assert report_text(columns, figures) == theirs[name], name


@pytest.mark.skipif(not HAS_SCALESIM, reason="the scalesim package is not installed")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("dataflow", ["ws", pytest.param("os", marks=pytest.mark.slow),
                                      pytest.param("is", marks=pytest.mark.slow)])
def test_calc_reports_equal_live_scalesim(dataflow: str, tmp_path: Path) -> None:
    """CALC bandwidth, two layers: reads never stall, the read buffers only count what they
    fetch (SCALE-Sim's estimate-bandwidth buffers), the ofmap drains at ArrayWidth."""
    cfg = _cfg(interface_bandwidth="CALC", bandwidth_words_per_cycle=None, dataflow=dataflow,
               array_cols=16, filter_sram_kb=2, ofmap_sram_kb=1)
    topology = "Layer, M, N, K,\ng, 17, 33, 70,\nh, 5, 9, 300,\n"
    theirs = run_scalesim(cfg, topology, tmp_path)
    ops = [Gemm(name="g", m=17, n=33, k=70, **I8), Gemm(name="h", m=5, n=9, k=300, **I8)]
    figures = [report_figures(simulate_layer(cfg, op)) for op in ops]
    assert figures[0]["Stall Cycles"] == 0
    for name, columns in REPORT_FILES.items():
        assert report_text(columns, figures) == theirs[name], name
