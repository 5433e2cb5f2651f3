"""``infersim validate`` and ``infersim calibrate`` (registered on a bare app, as infersim.cli
does): JSON keys, files written, exit code 2 with one message for bad input."""

from __future__ import annotations

import csv
import json

import pytest
import typer
from typer.testing import CliRunner

from infersim.arch_models import load_chip
from infersim.cli.validate import preset_for_device, register
from infersim.validation.calibrate import DRAM_KNOB, OVERHEAD_KNOB, with_knobs
from infersim.validation.harness import predict
from infersim.validation.records import CSV_COLUMNS, kernel_columns
from infersim.validation.suite import load_suite

app = typer.Typer(pretty_exceptions_enable=False)
register(app)
runner = CliRunner()

REPORT_KEYS = {
    "calibration_mape_before", "calibration_mape_after", "holdout_mape_before",
    "holdout_mape_after", "holdout_max_error", "n_calibration", "n_holdout", "knobs",
}  # fmt: skip


def run(*args: str):
    return runner.invoke(app, list(args))


def flat(text: str) -> str:
    """Output with rich's line wrapping undone."""
    return " ".join(text.split())


def write_synthetic_csv(path, truth: dict[str, float]) -> None:
    kernels = load_suite("gpu").kernels
    chip = with_knobs(load_chip("h100-sxm"), truth)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for kernel, pred in zip(kernels, predict(kernels, chip), strict=True):
            cols = kernel_columns(kernel.model_dump())
            writer.writerow({**cols, "measured_s": pred.time_s, "device": "H100 (synthetic)"})


def test_calibrate_csv_json_and_yaml(tmp_path):
    truth = {DRAM_KNOB: 0.8, "compute_efficiency_by_dtype.bf16": 0.7,
             "compute_efficiency_by_dtype.fp16": 0.66, OVERHEAD_KNOB: 5e-6}  # fmt: skip
    write_synthetic_csv(tmp_path / "m.csv", truth)
    out = tmp_path / "h100-cal.yaml"
    result = run("calibrate", str(tmp_path / "m.csv"), "--chip", "h100-sxm", "--out", str(out),
                 "--holdout-frac", "0.3", "--seed", "2", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert set(report) >= REPORT_KEYS
    assert report["holdout_mape_after"] < 1e-3 < report["holdout_mape_before"]
    for knob, value in truth.items():
        assert report["knobs"][knob] == pytest.approx(value, rel=0.02)
    chip = load_chip(out)
    assert chip.name == "h100-sxm-calibrated"
    assert chip.calibration.dram_bandwidth_efficiency == pytest.approx(0.8, rel=0.02)
    table = run("calibrate", str(tmp_path / "m.csv"), "--chip", "h100-sxm")
    assert table.exit_code == 0
    assert "held-out" in table.stdout


def test_validate_interpret_tiny_suite(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    out = tmp_path / "interp.json"
    result = run(
        "validate", "--backend", "interpret", "--suite", "tiny", "--out", str(out), "--json"
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["backend"] == "interpret"
    assert data["summary"]["checks_failed"] == 0
    assert data["summary"]["checks_passed"] == len(load_suite("tiny").kernels)
    assert json.loads(out.read_text())["rows"][0]["passed"]
    # Results without timings cannot calibrate: a clear message, exit 2.
    again = run("calibrate", str(out), "--chip", "h100-sxm")
    assert again.exit_code == 2
    assert "no timed rows" in flat(again.stderr)


def test_validate_cpu_user_suite_csv(tmp_path):
    pytest.importorskip("torch")
    suite = tmp_path / "s.yaml"
    suite.write_text(
        "name: s\nkernels:\n"
        "  - {kind: gemm, m: 64, k: 256, n: 256, dtype: fp32}\n"
        "  - {kind: elementwise, rows: 64, cols: 256, fused: true, dtype: fp32}\n"
    )
    out = tmp_path / "r.csv"
    result = run("validate", "--backend", "cpu", "--suite", str(suite), "--threads", "1",
                 "--timer", "cpu", "--rounds", "3", "--out", str(out))  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "host-cpu" in result.stdout
    lines = out.read_text().splitlines()
    assert lines[0].split(",") == list(CSV_COLUMNS)
    assert len(lines) == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["validate", "--suite", "nope"], "unknown suite 'nope'"),
        (["validate", "--engine", "nope"], "unknown engine 'nope'"),
        (["validate", "--timer", "cpu", "--threads", "2"], "threads=1"),
        (
            ["validate", "--backend", "interpret", "--suite", "quick"],
            "too large for the interpreter",
        ),
        (["validate", "--backend", "interpret", "--chip", "host-cpu"], "cpu backend only"),
        (["validate", "--chip", "nope-chip", "--suite", "tiny"], "unknown chip 'nope-chip'"),
        (["calibrate", "missing.json", "--chip", "h100-sxm"], "cannot read"),
        (["calibrate", "m.csv"], "names no chip"),
        (["calibrate", "m.csv", "--chip", "h100-sxm", "--holdout-frac", "1.5"], "holdout-frac"),
        (["calibrate", "bad.csv", "--chip", "h100-sxm"], "line 2"),
    ],
)
def test_bad_input_exits_2(tmp_path, monkeypatch, args, message):
    if args[:3] != ["validate", "--suite", "nope"] and args[0] == "validate":
        pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.csv").write_text("kernel,m,k,n,dtype,measured_s\ngemm,8,8,8,bf16,1e-6\n")
    (tmp_path / "bad.csv").write_text("kernel,m,k,n,dtype,measured_s\ngemm,8,8,8,bf16,zero\n")
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert message in flat(result.stderr)
    assert "Traceback" not in result.output


def test_cuda_without_gpu_exits_2():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    result = run("validate", "--backend", "cuda")
    assert result.exit_code == 2
    assert "CUDA" in flat(result.stderr) or "TRITON_INTERPRET" in flat(result.stderr)


@pytest.mark.parametrize(
    ("name", "preset"),
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"),
    ],
)
def test_preset_for_device(name, preset):
    assert preset_for_device(name) == preset


def test_unknown_gpu_asks_for_chip():
    with pytest.raises(Exception, match="pass --chip"):
        preset_for_device("NVIDIA GeForce RTX 4090")
