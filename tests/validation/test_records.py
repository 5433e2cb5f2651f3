"""Measurement records: the documented kernel and model columns, CSV and JSON alike; a bad row
names its row (and line) and its field; results JSON/CSV and model rows round-trip."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from infersim.cli.validate import register
from infersim.errors import ConfigError
from infersim.validation.records import (
    CSV_COLUMNS,
    MEASUREMENTS_SCHEMA,
    RESULTS_SCHEMA,
    read_csv,
    read_measurements,
    read_results,
    write_model_rows,
    write_results,
)
from infersim.validation.schema import (
    AttentionRecord,
    CollectiveRecord,
    GemmRecord,
    ModelRecord,
    NormRecord,
    Stat,
)
from infersim.validation.suite import GemmKernel, QuantGemmKernel, quantized_weight_bits

KERNELS_CSV = """\
kernel,m,k,n,batch,group_size,dtype,b_dtype,out_dtype,heads,kv_heads,q_len,kv_len,head_dim,causal,rows,cols,norm,collective,payload_bytes,participants,measured_s,measured_tflops,device,source
gemm,4096,4096,4096,,,bf16,,,,,,,,,,,,,,,,700,H100,paper table 3
gemv,1,8192,8192,,,fp16,,,,,,,,,,,,,,,5.2e-05,,H100,
w4a16,1,8192,28672,,64,bf16,,,,,,,,,,,,,,,0.0001,,H100,
gemm,2048,7168,4096,8,,fp8,fp8,bf16,,,,,,,,,,,,,,1200,H100,grouped fp8
attention,,,,2,,bf16,,,32,8,4096,4096,128,true,,,,,,,0.0031,,H100,
attention,,,,16,,bf16,,,32,8,1,8192,128,false,,,,,,,0.0004,,H100,decode
norm,,,,,,bf16,,,,,,,,,8192,4096,rms,,,,2e-05,,H100,
collective,,,,,,,,,,,,,,,,,,all-reduce,16777216,8,9e-05,,H100,
"""


def test_kernel_rows_of_every_kind(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text(KERNELS_CSV)
    data = read_measurements(path)
    assert data.chip is None and data.model_rows == []
    assert data.device == "H100"
    gemm, gemv, w4, fp8, prefill, decode, norm, coll = data.rows
    assert isinstance(gemm.kernel, GemmRecord)
    assert gemm.measured_s == pytest.approx(2 * 4096**3 / 700e12)
    assert gemm.source == "paper table 3"
    assert gemm.kernel.label == GemmKernel(m=4096, k=4096, n=4096).label  # the suite's name
    assert gemv.kernel.kind == "gemv" and gemv.kernel.dtype == "fp16"
    (w4op,) = w4.kernel.ops()
    assert (w4op.b_dtype, w4op.weight_bits) == ("int4", quantized_weight_bits(4, 64))
    (op,) = fp8.kernel.ops()
    assert (op.batch, op.a_dtype, op.b_dtype, op.out_dtype) == (8, "fp8_e4m3", "fp8_e4m3", "bf16")
    assert fp8.measured_s == pytest.approx(2 * 8 * 2048 * 7168 * 4096 / 1200e12)
    assert fp8.kernel.label == "gemm 2048x7168x4096 batch8 fp8_e4m3xfp8_e4m3->bf16"
    assert isinstance(prefill.kernel, AttentionRecord) and prefill.kernel.causal
    assert (decode.kernel.q_len, decode.kernel.causal) == (1, False)
    assert isinstance(norm.kernel, NormRecord) and norm.kernel.ops()[0].norm == "rms"
    assert isinstance(coll.kernel, CollectiveRecord)
    assert coll.kernel.ops()[0].participants == 8


def test_suite_kernels_and_records_predict_alike():
    """A CSV row of a suite kernel costs the same operators as the suite's kernel."""
    suite = QuantGemmKernel(kind="w4a16", m=1, k=8192, n=4096, group_size=32)
    record = GemmRecord(kind="w4a16", m=1, k=8192, n=4096, group_size=32)
    assert record.ops() == suite.ops() and record.label == suite.label


MODEL_CSV = """\
record,chip,model,phase,scenario,batch,prompt_len,context_len,output_len,request_rate_per_s,num_requests,weights_dtype,kv_dtype,techniques,output_tokens_per_s,output_tokens_per_s_std,ttft_s_median,ttft_s_p99,tpot_s_mean,tpot_s_p90,prompt_tokens_per_s,source
model,h100-sxm,llama-3-8b,decode,batch,8,,2048,128,,,fp8,fp8,,1500,12,,,,,,x
model,h100-sxm,llama-3-8b,end-to-end,serving,,512,,256,inf,1000,,,,,,0.21,0.35,0.012,0.014,,x
model,a100-sxm-80gb,llama-3-8b,prefill,batch,1,4096,,,,,bf16,,,,,,,,,9000,x
"""


def test_model_rows_with_statistics(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text(MODEL_CSV)
    data = read_measurements(path)
    assert data.rows == []
    decode, serving, prefill = data.model_rows
    assert decode.output_tokens_per_s == Stat(mean=1500, std=12)
    assert (decode.batch, decode.context_len, decode.weights_dtype) == (8, 2048, "fp8_e4m3")
    assert serving.request_rate_per_s == float("inf") and serving.num_requests == 1000
    assert serving.ttft_s == Stat(median=0.21, percentiles={"p99": 0.35})
    assert serving.tpot_s is not None and serving.tpot_s.central == 0.012
    assert serving.tpot_s.percentiles == {"p90": 0.014}
    assert prefill.prompt_tokens_per_s == Stat(mean=9000)
    assert set(prefill.metrics()) == {"prompt_tokens_per_s"}


def test_model_rows_json_nested_stats_and_defaults(tmp_path):
    rows = [
        {"model": "llama-3-8b", "phase": "decode", "batch": 4, "output_len": 64,
         "tpot_s": {"median": 0.011, "p99": 0.02, "std": 0.001}},
        {"record": "kernel", "kernel": "gemm", "m": 64, "k": 64, "n": 64, "measured_s": 1e-6},
    ]  # fmt: skip
    path = tmp_path / "runs.json"
    path.write_text(json.dumps({"schema": MEASUREMENTS_SCHEMA, "rows": rows}))
    data = read_measurements(path, defaults={"chip": "h100-sxm"})
    (row,) = data.model_rows
    assert row.chip == "h100-sxm"  # filled by the defaults
    assert row.tpot_s == Stat(median=0.011, std=0.001, percentiles={"p99": 0.02})
    assert len(data.rows) == 1
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(rows[:1]))
    assert read_measurements(bare).model_rows[0].chip == ""


def test_model_rows_round_trip(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text(MODEL_CSV)
    rows = read_measurements(path).model_rows
    for out in (tmp_path / "out.csv", tmp_path / "out.json"):
        write_model_rows(rows, out)
        assert read_measurements(out).model_rows == rows


BAD_ROWS = [
    ("kernel,m,k,n,measured_s\nconv,1,2,3,1e-3\n", "row 1 (line 2): kernel = 'conv'"),
    ("kernel,m,k,n,measured_s\ngemm,1,2,3,\n", "row 1 (line 2): give one of measured_s"),
    ("kernel,m,k,n,measured_s\ngemm,1,2,3,1e-3\ngemm,1,2,3,-1\n",
     "row 2 (line 3): measured_s = '-1'"),
    ("kernel,m,k,n,measured_s\ngemm,x,2,3,1e-3\n", "row 1 (line 2): m = 'x'"),
    ("kernel,m,k,n,dtype,measured_s\ngemm,1,2,3,fp64,1e-3\n", "row 1 (line 2): dtype = 'fp64'"),
    ("kernel,heads,kv_heads,q_len,kv_len,causal,measured_s\nattention,3,2,8,8,maybe,1e-3\n",
     "row 1 (line 2): causal = 'maybe'"),
    ("kernel,heads,kv_heads,q_len,kv_len,measured_s\nattention,3,2,8,8,1e-3\n",
     "row 1 (line 2): heads(=3) must be a multiple of kv_heads(=2)"),
    ("kernel,m,k,n,heads,measured_s\ngemm,1,2,3,8,1e-3\n",
     "row 1 (line 2): heads = '8': not a field of a gemm kernel"),
    ("kernel,m,k,n,group_size,measured_s\nw4a16,1,100,3,64,1e-3\n",
     "row 1 (line 2): k(=100) must be a multiple of group_size(=64)"),
    ("model,phase,prompt_len,tpot_s\nllama-3-8b,prefill,512,0.01\n",
     "row 1 (line 2): tpot_s: not measured by a prefill row"),
    ("model,phase,output_len\nllama-3-8b,decode,128\n",
     "row 1 (line 2): needs at least one metric"),
    ("model,phase,output_len,ttft_s_p99,tpot_s\nm,end-to-end,1,0.2,0.01\n",
     "row 1 (line 2): ttft_s = {'percentiles': {'p99': '0.2'}}: needs a mean, a median or a p50"),
    ("model,phase,output_len,tpot_s\nm,decode,128,-0.01\n",
     "row 1 (line 2): tpot_s_mean = '-0.01'"),
    ("model,phase,prompt_len,batch,latency_s\nm,prefill,512,0,1.0\n",
     "row 1 (line 2): batch = '0'"),
    ("model,phase,output_len,scenario,tpot_s\nm,decode,8,serving,0.01\n",
     "row 1 (line 2): a serving row needs request_rate_per_s"),
    ("model,phase,prompt_len,latency_s,kv_heads\nm,prefill,8,1.0,8\n",
     "row 1 (line 2): kv_heads = '8': not a field of this row"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), BAD_ROWS)
def test_bad_rows_name_the_row_and_field(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        read_measurements(path)
    assert f"bad.csv {message}" in str(err.value)


def test_bad_json_rows_name_the_row_and_field(tmp_path):
    path = tmp_path / "bad.json"
    rows = [
        {"kernel": "gemm", "m": 1, "k": 1, "n": 1, "measured_s": 1e-3},
        {"model": "m", "phase": "decode", "output_len": 8, "tpot_s": {"median": "x"}},
    ]
    path.write_text(json.dumps({"schema": MEASUREMENTS_SCHEMA, "rows": rows}))
    with pytest.raises(ConfigError, match=r"bad\.json row 2: tpot_s_median = 'x'"):
        read_measurements(path)
    path.write_text(json.dumps([{"kernel": "gemm", "m": 1, "k": 1, "n": 1, "measured_sec": 1}]))
    with pytest.raises(ConfigError, match=r"row 1: unknown field\(s\) 'measured_sec'"):
        read_measurements(path)


def test_bad_rows_exit_2_from_the_cli(tmp_path):
    app = typer.Typer(pretty_exceptions_enable=False)
    register(app)
    path = tmp_path / "bad.csv"
    path.write_text(BAD_ROWS[3][0])
    result = CliRunner().invoke(app, ["calibrate", str(path), "--chip", "h100-sxm"])
    assert result.exit_code == 2
    assert "bad.csv row 1 (line 2): m = 'x'" in " ".join(result.output.split())


def test_csv_header_errors(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("m,k,n\n1,2,3\n")
    with pytest.raises(ConfigError, match="'kernel' or 'model' column"):
        read_csv(path)
    path.write_text("kernel,m,kv_head\n")
    with pytest.raises(ConfigError, match=r"x\.csv line 1: unknown column\(s\) 'kv_head'"):
        read_csv(path)
    path.write_text("kernel,m\n")
    with pytest.raises(ConfigError, match="no measurement rows"):
        read_csv(path)
    path.write_text("kernel,m,k,n,measured_s\ngemm,1,2,3,1e-3,9\n")
    with pytest.raises(ConfigError, match="row 1 .*more cells than header columns"):
        read_csv(path)
    with pytest.raises(ConfigError, match="cannot read"):
        read_csv(tmp_path / "missing.csv")
    (tmp_path / "m.txt").write_text("hello\n")
    with pytest.raises(ConfigError, match="cannot tell which tool wrote it"):
        read_measurements(tmp_path / "m.txt")
    with pytest.raises(ConfigError, match="format 'xls' unknown"):
        read_measurements(path, format="xls")
    with pytest.raises(ConfigError, match="unknown model-row field"):
        read_measurements(path, defaults={"gpu": "h100"})


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
        "spread": 0.1,
        "reps": 7,
        "predicted_s": 1e-5,
        "error": -0.5,
        "bound": "memory",
    }
    data = _results([row, {**row, "measured_s": None}])
    write_results(data, tmp_path / "r.json")
    back = read_results(tmp_path / "r.json")
    assert [r.kernel for r in back.rows] == [kernel]  # untimed rows are skipped
    assert back.device == "Test CPU"
    assert read_measurements(tmp_path / "r.json").rows == back.rows
    write_results(_results([row]), tmp_path / "r.csv")
    header = (tmp_path / "r.csv").read_text().splitlines()[0].split(",")
    assert header == list(CSV_COLUMNS)
    again = read_csv(tmp_path / "r.csv")
    assert again.rows[0].kernel.ops() == kernel.ops()
    assert (again.rows[0].measured_s, again.rows[0].spread, again.rows[0].reps) == (2e-5, 0.1, 7)


def test_results_file_errors(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"rows": []}))
    with pytest.raises(ConfigError, match="cannot tell which tool wrote it"):
        read_measurements(path)
    with pytest.raises(ConfigError, match="not an infersim validation results file"):
        read_results(path)
    path.write_text(json.dumps(_results([])))
    with pytest.raises(ConfigError, match="no timed rows"):
        read_results(path)
    with pytest.raises(ConfigError, match=r"\.json or \.csv"):
        write_results(_results([]), tmp_path / "r.txt")


def test_model_record_contract():
    row = ModelRecord(model="llama-3-8b", phase="decode", output_len=8, tpot_s=Stat(mean=0.01))
    assert row.metrics() == {"tpot_s": Stat(mean=0.01)}
    assert "llama-3-8b" in row.label
    assert Stat(mean=1.0, percentiles={"p50": 0.9}).central == 0.9


def test_the_documented_examples_read(tmp_path):
    """Every CSV and JSON example of docs/measurements.md reads as it says."""
    import re
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "measurements.md").read_text()
    blocks = re.findall(r"```(csv|json)\n(.*?)```", doc, flags=re.DOTALL)
    assert [kind for kind, _ in blocks] == ["csv", "csv", "json"]
    counts = []
    for i, (kind, text) in enumerate(blocks):
        path = tmp_path / f"example{i}.{kind}"
        path.write_text(text)
        data = read_measurements(path)
        counts.append((len(data.rows), len(data.model_rows)))
    assert counts == [(3, 0), (0, 2), (1, 1)]
