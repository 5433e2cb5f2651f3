"""Measurement files: the documented CSV columns, results JSON/CSV round trips, clear errors."""

from __future__ import annotations

import json

import pytest

from infersim.errors import ConfigError
from infersim.validation.records import (
    CSV_COLUMNS,
    RESULTS_SCHEMA,
    read_csv,
    read_measurements,
    read_results,
    write_results,
)
from infersim.validation.suite import AttentionKernel, GemmKernel, QuantGemmKernel

HEADER = (
    "kernel,m,k,n,group_size,batch,heads,kv_heads,q_len,kv_len,head_dim,causal,dtype,"
    "measured_s,measured_tflops,device,source"
)
CSV = (
    HEADER
    + """
gemm,4096,4096,4096,,,,,,,,,bf16,,700,H100,paper table 3
gemv,1,8192,8192,,,,,,,,,fp16,5.2e-05,,H100,
w4a16,1,8192,28672,64,,,,,,,,bf16,0.0001,,H100,
attention,,,,,2,32,8,4096,4096,128,true,bf16,0.0031,,H100,
"""
)


def test_csv_with_documented_columns(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text(CSV)
    data = read_measurements(path)
    assert data.chip is None
    assert data.device == "H100"
    gemm, gemv, w4, attn = data.rows
    assert isinstance(gemm.kernel, GemmKernel)
    assert gemm.measured_s == pytest.approx(2 * 4096**3 / 700e12)
    assert gemm.source == "paper table 3"
    assert gemv.kernel.kind == "gemv"
    assert isinstance(w4.kernel, QuantGemmKernel)
    assert w4.kernel.group_size == 64
    assert isinstance(attn.kernel, AttentionKernel)
    assert attn.kernel.causal
    assert attn.kernel.fused


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("conv,1,2,3,,,,,,,,,bf16,1e-3,,,", "line 2: kernel = 'conv'"),
        ("gemm,1,2,3,,,,,,,,,bf16,,,,", "line 2: needs measured_s or measured_tflops"),
        ("gemm,1,2,3,,,,,,,,,bf16,-1,,,", "line 2: measured_s = '-1': must be > 0"),
        ("gemm,x,2,3,,,,,,,,,bf16,1e-3,,,", "line 2: m = 'x': expected an integer"),
        ("gemm,1,2,3,,,,,,,,,fp64,1e-3,,,", "dtype"),
        ("attention,,,,,1,3,2,8,8,64,maybe,bf16,1e-3,,,", "causal = 'maybe'"),
        ("attention,,,,,1,3,2,8,8,64,true,bf16,1e-3,,,", "multiple of kv_heads"),
    ],
)
def test_csv_errors_name_line_and_field(tmp_path, row, message):
    path = tmp_path / "bad.csv"
    path.write_text(CSV.splitlines()[0] + "\n" + row + "\n")
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_csv(path)


def test_csv_needs_a_kernel_column_and_rows(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("m,k,n\n1,2,3\n")
    with pytest.raises(ConfigError, match="'kernel' column"):
        read_csv(path)
    path.write_text("kernel,m\n")
    with pytest.raises(ConfigError, match="no measurement rows"):
        read_csv(path)
    with pytest.raises(ConfigError, match="cannot read"):
        read_csv(tmp_path / "missing.csv")
    with pytest.raises(ConfigError, match=r"\.json or a measurements \.csv"):
        read_measurements(tmp_path / "m.txt")


def _results(rows: list[dict]) -> dict:
    return {
        "schema": RESULTS_SCHEMA,
        "backend": "cpu",
        "device": {"kind": "cpu", "name": "Test CPU"},
        "chip": None,
        "rows": rows,
    }


def test_results_json_and_csv_round_trip(tmp_path):
    kernel = GemmKernel(m=1, k=64, n=32, dtype="fp32")
    row = {
        "label": kernel.label,
        "kernel": kernel.model_dump(),
        "measured_s": 2e-5,
        "predicted_s": 1e-5,
        "error": -0.5,
        "bound": "memory",
    }
    data = _results([row, {**row, "measured_s": None}])
    write_results(data, tmp_path / "r.json")
    back = read_results(tmp_path / "r.json")
    assert [r.kernel for r in back.rows] == [kernel]  # untimed rows are skipped
    assert back.device == "Test CPU"
    write_results(_results([row]), tmp_path / "r.csv")
    header = (tmp_path / "r.csv").read_text().splitlines()[0].split(",")
    assert header == list(CSV_COLUMNS)
    again = read_csv(tmp_path / "r.csv")
    assert again.rows[0].kernel == kernel
    assert again.rows[0].measured_s == 2e-5


def test_results_file_errors(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"rows": []}))
    with pytest.raises(ConfigError, match="not an infersim validation results file"):
        read_results(path)
    path.write_text(json.dumps(_results([])))
    with pytest.raises(ConfigError, match="no timed rows"):
        read_results(path)
    with pytest.raises(ConfigError, match=r"\.json or \.csv"):
        write_results(_results([]), tmp_path / "r.txt")
