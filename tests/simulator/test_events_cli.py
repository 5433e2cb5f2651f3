"""The event engine on the command line: ``simulate --engine events --trace``, ``map --engine
events`` and the event columns of ``scalesim``."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from infersim.cli import app

runner = CliRunner()

USER_CFG = """[general]
run_name = t

[architecture_presets]
ArrayHeight = 32
ArrayWidth = 32
IfmapSramSzkB = 16
FilterSramSzkB = 16
OfmapSramSzkB = 16
Dataflow = ws
Bandwidth = 4

[layout]
IfmapSRAMBankBandwidth = 4
FilterSRAMBankBandwidth = 4

[run_presets]
InterfaceBandwidth = USER
"""


def test_simulate_writes_a_chrome_trace(tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    result = runner.invoke(app, ["simulate", "--chip", "h100-sxm", "--model", "tiny-test",
                                 "--engine", "events", "--trace", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["engine"] == "events"
    doc = json.loads(out.read_text())
    complete = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert complete and all({"ts", "dur", "pid", "tid", "name"} <= e.keys() for e in complete)
    assert any(e["name"].startswith("attn.qkv") for e in complete)
    assert any(e["cat"] == "roofline" for e in complete)


def test_trace_needs_the_event_engine(tmp_path: Path) -> None:
    result = runner.invoke(app, ["simulate", "--chip", "h100-sxm", "--model", "tiny-test",
                                 "--trace", str(tmp_path / "t.json")])
    assert result.exit_code == 2
    assert "--trace needs --engine events" in result.output


def test_map_with_the_event_engine() -> None:
    result = runner.invoke(app, ["map", "--chip", "tpu-v1", "--gemm", "256,4096,4096",
                                 "--dtype", "int8", "--engine", "events", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    ev = doc["events"]
    assert ev["total_cycles"] >= doc["compute_cycles"]
    assert abs(ev["total_cycles"] / doc["total_cycles"] - 1) < 0.1
    table = runner.invoke(app, ["map", "--chip", "tpu-v1", "--gemm", "256,4096,4096",
                                "--dtype", "int8", "--engine", "events"])
    assert table.exit_code == 0 and "events: total cycles" in table.stdout
    bad = runner.invoke(app, ["map", "--chip", "tpu-v1", "--gemm", "64,64,64", "--dtype",
                              "int8", "--engine", "magic"])
    assert bad.exit_code == 2


def test_scalesim_gains_event_columns_for_user_bandwidth(tmp_path: Path) -> None:
    """SCALE-Sim 3.0.0 gives 36972 total / 31917 stall cycles for this layer and config."""
    cfg, topo = tmp_path / "c.cfg", tmp_path / "t.csv"
    cfg.write_text(USER_CFG)
    topo.write_text("Layer, M, N, K,\nl0, 64, 256, 128,\n")
    result = runner.invoke(app, ["scalesim", "--config", str(cfg), "--topology", str(topo),
                                 "--gemm", "--json"])
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert (row["Event Total Cycles"], row["Event Stall Cycles"]) == (36972, 31917)
    assert row["Total Cycles"] - row["Stall Cycles"] == 36972 - 31917
    table = runner.invoke(app, ["scalesim", "--config", str(cfg), "--topology", str(topo),
                                "--gemm"])
    assert table.exit_code == 0 and "Event Stall Cycles" in table.stdout
