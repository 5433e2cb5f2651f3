"""``infersim map`` and ``infersim scalesim``: documented JSON keys, SCALE-Sim's numbers, exit 2."""

import json
from pathlib import Path

import pytest
from dataflow_helpers import SCALESIM_V2_CFG
from typer.testing import CliRunner

from infersim.cli import app

runner = CliRunner()


def _cfg(dataflow: str) -> str:
    return SCALESIM_V2_CFG.replace("Dataflow : os", f"Dataflow : {dataflow}")


def test_map_json_has_the_documented_keys():
    result = runner.invoke(app, ["map", "--chip", "tpu-v1", "--gemm", "64,128,256",
                                 "--dtype", "int8", "--dataflow", "ws", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {"dataflow", "compute_cycles", "folds", "mapping_efficiency", "compute_utilization",
            "dram_bytes", "sram_bytes", "energy_pj", "time_s"} <= set(doc)
    assert {"dram", "sram", "array", "register_file", "mac"} <= set(doc["energy_pj"]["by_level"])
    assert doc["dataflow"] == "ws"


def test_map_conv_table_and_top_k():
    result = runner.invoke(app, ["map", "--chip", "eyeriss-v1", "--conv", "15,15,3,3,64,64,1",
                                 "--dtype", "int16", "--objective", "energy", "--top-k", "3"])
    assert result.exit_code == 0, result.output
    assert "#2:" in result.stdout


@pytest.mark.parametrize(("dataflow", "cycles"), [("ws", 5055), ("os", 3039), ("is", 2799)])
def test_scalesim_command_reproduces_scalesim_cycles(tmp_path: Path, dataflow, cycles):
    cfg = tmp_path / "c.cfg"
    cfg.write_text(_cfg(dataflow))
    topo = tmp_path / "t.csv"
    topo.write_text("Layer, M, N, K,\nl0, 64, 256, 128,\n")
    result = runner.invoke(app, ["scalesim", "--config", str(cfg), "--topology", str(topo),
                                 "--gemm", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[0]["Total Cycles"] == cycles


@pytest.mark.parametrize("args", [
    ["map", "--chip", "tpu-v1", "--gemm", "64,128", "--dtype", "int8"],
    ["map", "--chip", "tpu-v1", "--gemm", "64,128,256", "--dtype", "bf16"],
    ["map", "--chip", "tpu-v1", "--gemm", "64,128,256", "--dtype", "int8", "--dataflow", "xs"],
    ["map", "--chip", "tpu-v1", "--dtype", "int8"],
    ["map", "--chip", "eyeriss-v1", "--conv", "3,3,5,5,1,1,1", "--dtype", "int16"],
    ["scalesim", "--config", "/nonexistent.cfg", "--topology", "/nonexistent.csv"],
])
def test_bad_input_exits_2(args):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("chip", ["a100-sxm-80gb", "h100-sxm"])
def test_map_on_a_gpu_shows_the_mapping_simulate_costs(chip: str) -> None:
    """On a two-level chip `infersim map` searches the cores with the DRAM level behind them, as
    the engines do: the same tiling, and its time is the op's time less the kernel launch (a100
    64x4096x28672 picks 448 CTAs with DRAM seen, 224 without)."""
    from infersim.arch_models import load_chip
    from infersim.simulator.engines import analytic
    from infersim.workloads.ops import Gemm

    result = runner.invoke(app, ["map", "--chip", chip, "--gemm", "64,4096,28672", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    the_chip = load_chip(chip)
    mapping = analytic.mapping_of(Gemm(m=64, k=4096, n=28672), the_chip, "best")
    assert doc["sram_tile"] == mapping.sram_tile and doc["dataflow"] == mapping.dataflow
    op_s = doc["op"]["time_s"]
    assert doc["time_s"] == pytest.approx(op_s - mapping.kernels * the_chip.kernel_overhead_s,
                                          rel=1e-9)
