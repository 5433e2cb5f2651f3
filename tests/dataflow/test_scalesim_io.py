"""Reading SCALE-Sim configs (v2 and v3) and topologies; errors name file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest
from dataflow_helpers import SCALESIM_V2_CFG

from infersim.dataflow import REPORT_COLUMNS, read_config, read_topology, scalesim_report
from infersim.dataflow.scalesim_io import (
    COMPUTE_REPORT_COLUMNS,
    REPORT_FILES,
    read_layers,
    report_text,
    scalesim_out_size,
    write_reports,
)
from infersim.errors import ConfigError
from infersim.workloads.ops import Conv2d, Gemm

V2 = SCALESIM_V2_CFG

V3_USER = """[general]
run_name = run

[architecture_presets]
ArrayHeight = 8
ArrayWidth = 16
ifmapsramszkB = 4
filtersramszkB = 8
ofmapsramszkB = 2
IfmapOffset = 0
FilterOffset = 10000000
OfmapOffset = 20000000
Dataflow = ws
Bandwidth = 4,4
ReadRequestBuffer = 32
WriteRequestBuffer = 32

[layout]
IfmapCustomLayout = False
IfmapSRAMBankBandwidth = 10
IfmapSRAMBankNum = 1
IfmapSRAMBankPort = 2
FilterCustomLayout = False
FilterSRAMBankBandwidth = 6
FilterSRAMBankNum = 1
FilterSRAMBankPort = 2

[sparsity]
SparsitySupport = false
SparseRep = ellpack_block
OptimizedMapping = false
BlockSize = 8
RandomNumberGeneratorSeed = 40

[run_presets]
InterfaceBandwidth = USER
UseRamulatorTrace = False
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_reads_a_v2_config(tmp_path: Path) -> None:
    cfg = read_config(write(tmp_path, "v2.cfg", V2))
    assert (cfg.array_rows, cfg.array_cols, cfg.dataflow) == (32, 32, "os")
    assert cfg.interface_bandwidth == "CALC"
    assert cfg.sram_words == 192 * 1024
    chip = cfg.to_chip()
    assert (chip.cores, chip.array.rows, chip.array.cols) == (1, 32, 32)
    assert chip.array.macs_per_pe_per_cycle == {"int8": 1}
    assert chip.sram.capacity_bytes == 192 * 1024
    assert cfg.to_chip("int16").sram.capacity_bytes == 2 * 192 * 1024


def test_reads_a_v3_user_config(tmp_path: Path) -> None:
    cfg = read_config(write(tmp_path, "v3.cfg", V3_USER))
    assert cfg.bandwidth_words_per_cycle == 4  # the first of the comma list
    assert (cfg.ifmap_bank_bandwidth_words, cfg.filter_bank_bandwidth_words) == (10, 6)
    assert cfg.dram_words_per_cycle == 10 + 6 + 4
    chip = cfg.to_chip(freq_hz=1e9)
    assert chip.dram.bandwidth_bytes_per_s == pytest.approx(20e9)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("ArrayWidth = 16\n", ""), r"v3\.cfg:\d+: \[architecture_presets\] ArrayWidth: required"),
        (
            ("ArrayWidth = 16", "ArrayWidth = wide"),
            r"v3\.cfg:6: \[architecture_presets\] ArrayWidth",
        ),
        (("Dataflow = ws", "Dataflow = rs"), r"v3\.cfg:13: \[architecture_presets\] Dataflow"),
        (("Bandwidth = 4,4\n", ""), r"Bandwidth: required with USER"),
        (("InterfaceBandwidth = USER", "InterfaceBandwidth = FAST"), r":\d+: \[run_presets\]"),
        (("[general]", "general"), r"v3\.cfg:1: malformed INI"),
        (("ArrayHeight = 8", "ArrayHeight = 0"), r"v3\.cfg:5: .*ArrayHeight = '0'"),
    ],
)
def test_config_errors_name_file_line_and_field(
    tmp_path: Path, edit: tuple[str, str], message: str
) -> None:
    text = V3_USER.replace(*edit)
    with pytest.raises(ConfigError, match=message):
        read_config(write(tmp_path, "v3.cfg", text))


def test_missing_config_file() -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        read_config("/nonexistent/scale.cfg")


def test_reads_gemm_and_conv_topologies(tmp_path: Path) -> None:
    gemm = write(
        tmp_path, "g.csv", "Layer, M, N, K,\nfc1, 64, 256, 128,\n\nfc2, 1, 10, 4096, 1:1,\n"
    )
    ops = read_topology(gemm, dtype="int16")
    assert [op.name for op in ops] == ["fc1", "fc2"]
    assert isinstance(ops[0], Gemm)
    assert (ops[0].m, ops[0].n, ops[0].k, ops[0].a_dtype) == (64, 256, 128, "int16")
    conv = write(
        tmp_path,
        "c.csv",
        "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, "
        "Num Filter, Strides,\nConv1, 227, 227, 11, 11, 3, 96, 4,\nodd, 10, 13, 3, 4, 4, 8, 2,\n"
        "DP1, 8, 8, 3, 3, 3, 1, 1,\n",
    )
    c1, odd, *depthwise = read_topology(conv)
    assert isinstance(c1, Conv2d)
    assert (c1.out_h, c1.out_w, c1.in_channels, c1.out_channels) == (55, 55, 3, 96)
    # SCALE-Sim's ceil rule: 10 rows, 3-row filter, stride 2 -> 5 output rows (PyTorch: 4)
    assert (odd.out_h, odd.out_w) == (scalesim_out_size(10, 3, 2), scalesim_out_size(13, 4, 2))
    assert (odd.out_h, odd.out_w) == (5, 6)
    assert [d.name for d in depthwise] == ["DP1Channel_0", "DP1Channel_1", "DP1Channel_2"]
    assert all(d.in_channels == 1 for d in depthwise)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Layer, M, N, K,\nfc, 64, x, 128,\n", r"t\.csv:2: layer 'fc': N = 'x': not an integer"),
        ("Layer, M, N, K,\nfc, 64, 128,\n", r"t\.csv:2: layer 'fc': 2 values"),
        ("Layer, M, N, K,\nfc, 64, 0, 128,\n", r"t\.csv:2: .*N = 0: must be >= 1"),
        ("Layer, M, N, K,\nfc, 64, 2, 128, 2:4,\n", r"t\.csv:2: .*only dense"),
        ("Layer, A, B,\n", r"t\.csv:1: header has 3 columns"),
        ("", r"empty topology"),
        (
            "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, "
            "Num Filter, Strides,\nc, 3, 3, 5, 5, 1, 1, 1,\n",
            r"t\.csv:2: layer 'c': filter 5x5 larger",
        ),
    ],
)
def test_topology_errors_name_file_line_and_field(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        read_topology(write(tmp_path, "t.csv", text))


def test_report_has_scalesim_columns(tmp_path: Path) -> None:
    cfg = read_config(write(tmp_path, "v2.cfg", V2))
    ops = read_topology(write(tmp_path, "g.csv", "Layer, M, N, K,\na, 64, 256, 128,\n"))
    [row] = scalesim_report(cfg, ops)
    assert tuple(row) == REPORT_COLUMNS
    assert row["LayerID"] == 0
    assert row["Total Cycles"] == 3039  # OS, DESIGN.md
    assert row["Stall Cycles"] == 0


def test_user_report_adds_analytic_stalls(tmp_path: Path) -> None:
    slow = V3_USER.replace("Bandwidth = 4,4", "Bandwidth = 1").replace(
        "Bandwidth = 10", "Bandwidth = 1"
    )
    cfg = read_config(write(tmp_path, "v3.cfg", slow.replace("Bandwidth = 6", "Bandwidth = 1")))
    assert cfg.dram_words_per_cycle == 3
    ops = read_topology(write(tmp_path, "g.csv", "Layer, M, N, K,\na, 1, 512, 512,\n"))
    [row] = scalesim_report(cfg, ops)
    assert row["Stall Cycles"] > 0
    compute = 64 * 32 * (2 * 8 + 16 + 1 - 2) - 1  # WS folds × (2R + C + T − 2) − 1
    assert row["Total Cycles"] == compute + row["Stall Cycles"]
    assert row["Overall Util %"] == pytest.approx(100 * 512 * 512 / (row["Total Cycles"] * 128))


def test_reads_the_layout_and_run_flags_the_replay_checks(tmp_path: Path) -> None:
    cfg = read_config(write(tmp_path, "v3.cfg", V3_USER))
    assert (cfg.ifmap_bank_num, cfg.filter_bank_num) == (1, 1)
    assert not (cfg.ifmap_custom_layout or cfg.filter_custom_layout or cfg.use_ramulator_trace)
    text = (V3_USER.replace("IfmapSRAMBankNum = 1", "IfmapSRAMBankNum = 10")
            .replace("FilterCustomLayout = False", "FilterCustomLayout = True")
            .replace("UseRamulatorTrace = False", "UseRamulatorTrace = True"))
    cfg = read_config(write(tmp_path, "v3b.cfg", text))
    assert (cfg.ifmap_bank_num, cfg.filter_custom_layout, cfg.use_ramulator_trace) == (
        10, True, True)
    assert read_config(write(tmp_path, "again.cfg", cfg.to_ini())) == cfg.model_copy(
        update={"run_name": cfg.run_name})


def test_read_layers_keeps_the_stated_ifmap_extent(tmp_path: Path) -> None:
    """A stride that does not divide H − R: the op reads past the edge (27 rows for 24 stated),
    the layer keeps the topology's 24 × 24 for SCALE-Sim's addresses."""
    conv = write(
        tmp_path, "c.csv",
        "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, "
        "Num Filter, Strides,\nc, 24, 24, 7, 7, 3, 40, 4,\n",
    )
    [layer] = read_layers(conv)
    assert isinstance(layer.op, Conv2d)
    assert (layer.op.in_h, layer.op.out_h, layer.ifmap_extent) == (27, 6, (24, 24))
    gemm = write(tmp_path, "g.csv", "Layer, M, N, K,\nfc, 1, 10, 40,\n")
    assert read_layers(gemm)[0].ifmap_extent is None


def test_report_files_have_scalesim_headers_and_format(tmp_path: Path) -> None:
    """The header lines SCALE-Sim 3.0.0 writes (``simulator.generate_reports``), cells joined
    by ", ", every line ending in ","; values printed as ``str`` gives them."""
    row = {c: 0 for cols in REPORT_FILES.values() for c in cols}
    row.update({"Total Cycles": 2327, "Overall Util %": 13.18422324881822,
                "SRAM IFMAP Start Cycle": 9.0, "DRAM IFMAP Start Cycle": -306.0})
    paths = write_reports(tmp_path / "run", [row, row])
    assert [p.name for p in paths] == list(REPORT_FILES)
    compute = (tmp_path / "run" / "COMPUTE_REPORT.csv").read_text().splitlines()
    assert compute[0] == ("LayerID, Total Cycles (incl. prefetch), Total Cycles, Stall Cycles, "
                          "Overall Util %, Mapping Efficiency %, Compute Util %,")
    assert compute[2] == "1, 0, 2327, 0, 13.18422324881822, 0, 0,"
    bandwidth = (tmp_path / "run" / "BANDWIDTH_REPORT.csv").read_text().splitlines()[0]
    assert bandwidth == ("LayerID, Avg IFMAP SRAM BW, Avg FILTER SRAM BW, Avg OFMAP SRAM BW, "
                         "Avg IFMAP DRAM BW, Avg FILTER DRAM BW, Avg OFMAP DRAM BW,")
    detail = (tmp_path / "run" / "DETAILED_ACCESS_REPORT.csv").read_text().splitlines()
    assert detail[0] == (
        "LayerID, SRAM IFMAP Start Cycle, SRAM IFMAP Stop Cycle, SRAM IFMAP Reads, "
        "SRAM Filter Start Cycle, SRAM Filter Stop Cycle, SRAM Filter Reads, "
        "SRAM OFMAP Start Cycle, SRAM OFMAP Stop Cycle, SRAM OFMAP Writes, "
        "DRAM IFMAP Start Cycle, DRAM IFMAP Stop Cycle, DRAM IFMAP Reads, "
        "DRAM Filter Start Cycle, DRAM Filter Stop Cycle, DRAM Filter Reads, "
        "DRAM OFMAP Start Cycle, DRAM OFMAP Stop Cycle, DRAM OFMAP Writes,")
    assert detail[1].startswith("0, 9.0, 0, 0, ") and ", -306.0, " in detail[1]
    assert report_text(COMPUTE_REPORT_COLUMNS, []) == compute[0] + "\n"
