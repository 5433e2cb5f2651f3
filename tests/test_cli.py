"""The command line: stable names, JSON keys, and exit code 2 with one message on bad input."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infersim.arch_models import list_chips
from infersim.cli import app
from infersim.workloads import list_models

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args))


def flat(text: str) -> str:
    """Output with rich's box drawing removed and whitespace collapsed."""
    return " ".join(text.translate({ord(c): " " for c in "│╭╮╰╯─"}).split())


def test_chips_json():
    result = run("chips", "--json")
    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    assert [r["name"] for r in rows] == list_chips()
    h100 = next(r for r in rows if r["name"] == "h100-sxm")
    assert h100["peak_flops"]["bf16"] == pytest.approx(989.4e12, rel=0.01)
    assert h100["dram_bandwidth_bytes_per_s"] == 3.35e12


def test_models_json():
    result = run("models", "--json")
    assert result.exit_code == 0
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert set(rows) == set(list_models())
    assert rows["llama-2-70b"]["attention"] == "gqa"
    assert rows["deepseek-v2-lite"]["attention"] == "mla"
    assert rows["mixtral-8x7b"]["active_params"] == pytest.approx(12.9e9, rel=0.01)


def test_tables_render():
    for args in (["chips"], ["models"], ["demo"],
                 ["simulate", "--chip", "h100-sxm", "--model", "tiny-test"]):
        result = run(*args)
        assert result.exit_code == 0, result.output
        assert result.stdout.strip()


def test_simulate_acceptance_command():
    result = run("simulate", "--chip", "h100-sxm", "--model", "llama-2-70b", "--phase", "decode",
                 "--batch", "1", "--context", "128", "--weights-dtype", "fp16",
                 "--techniques", "cuda-graphs", "--json")  # graph launches, as servers decode
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {"chip", "model", "phase", "batch", "latency_s", "tokens_per_s", "tpot_s", "memory",
            "ops"} <= set(doc)
    assert doc["memory"]["weights_bytes"] == pytest.approx(138e9, rel=0.01)
    assert doc["memory"]["fits"] is False
    assert doc["tpot_s"] == pytest.approx(doc["memory"]["weights_bytes"] / 3.35e12, rel=0.03)
    op = doc["ops"][1]
    assert {"name", "kind", "count", "flops", "dram_bytes", "time_s", "bound"} <= set(op)


def test_simulate_prefill_reports_ttft():
    result = run("simulate", "--chip", "b200", "--model", "mistral-7b", "--phase", "prefill",
                 "--prompt-len", "1024", "--act-dtype", "fp8", "--weights-dtype", "fp8",
                 "--json")
    doc = json.loads(result.stdout)
    assert doc["ttft_s"] == doc["latency_s"] > 0 and doc["tpot_s"] is None


def test_simulate_user_workload(tmp_path: Path):
    path = tmp_path / "ops.yaml"
    path.write_text("- {kind: gemm, name: fc, m: 16, k: 512, n: 512, a_dtype: int8, "
                    "b_dtype: int8}\n")
    result = run("simulate", "--chip", "edge-npu", "--workload", str(path), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["model"] == "ops"


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


BAD = {
    "unknown chip": (["--chip", "h900", "--model", "tiny-test"], "unknown chip 'h900'"),
    "unknown model": (["--chip", "h100-sxm", "--model", "gpt-9"], "unknown model 'gpt-9'"),
    "unknown dtype": (["--chip", "h100-sxm", "--model", "tiny-test", "--kv-dtype", "fp7"],
                      "unknown dtype 'fp7'"),
    "negative batch": (["--chip", "h100-sxm", "--model", "tiny-test", "--batch", "-1"],
                       "batch = -1: Input should be greater than or equal to 1 (allowed: >= 1"),
    "zero prompt": (["--chip", "h100-sxm", "--model", "tiny-test", "--prompt-len", "0"],
                    "prompt_len = 0"),
    "bad phase": (["--chip", "h100-sxm", "--model", "tiny-test", "--phase", "train"],
                  "'train' is not one of"),
    "dtype chip cannot run": (["--chip", "a100-sxm-80gb", "--model", "tiny-test",
                               "--act-dtype", "fp8"], "cannot compute fp8"),
    "model and workload": (["--chip", "h100-sxm", "--model", "tiny-test", "--workload", "x.yaml"],
                           "exactly one of --model or --workload"),
    "unknown engine": (["--chip", "h100-sxm", "--model", "tiny-test", "--engine", "magic"],
                       "unknown engine 'magic'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_exits_2_with_a_message(case):
    args, message = BAD[case]
    result = run("simulate", *args)
    assert result.exit_code == 2, result.output
    assert message in flat(result.output)
    assert "Traceback" not in result.output


@pytest.mark.parametrize(("flag", "name", "text", "message"), [
    ("--chip", "chip.yaml", "name: x\ncores: [1\n", "malformed YAML"),
    ("--chip", "chip.yaml", "name: x\ncores: 0\n", "cores = 0"),
    ("--model", "config.json", "{\"hidden_size\": ", "malformed JSON"),
    ("--model", "config.json", "{\"hidden_size\": 0}", "hidden_size = 0"),
    ("--workload", "ops.yaml", "- {kind: gemm, m: -1, k: 1, n: 1}", "m = -1"),
])
def test_bad_files_exit_2(tmp_path: Path, flag, name, text, message):
    path = _write(tmp_path, name, text)
    args = ["simulate", "--chip", "h100-sxm", flag, path]
    if flag == "--chip":
        args = ["simulate", "--chip", path, "--model", "tiny-test"]
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert message in flat(result.output)
    assert "Traceback" not in result.output


def test_compare_json_rows():
    result = run("compare", "--chip", "h100-sxm", "--model", "llama-2-70b", "--context", "128",
                 "--techniques", "fp16+cuda-graphs,fp16+int8-weight+cuda-graphs,"
                 "fp16+int4-awq+kv-fp8+cuda-graphs,fp16+tp=2+cuda-graphs", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert rows[0]["technique"] == "fp16+cuda-graphs"
    for row in rows:
        assert {"technique", "weights_bytes", "kv_bytes", "fits", "tpot_s", "tokens_per_s",
                "energy_per_token_j", "speedup", "bound"} <= set(row)
    assert rows[0]["speedup"] == 1.0
    assert rows[1]["speedup"] == pytest.approx(2.0, rel=0.03)
    assert rows[3]["fits"] is True and rows[0]["fits"] is False


def test_compare_default_table_and_unsupported_rows():
    result = run("compare", "--chip", "a100-sxm-80gb", "--model", "llama-3-8b")
    assert result.exit_code == 0, result.output
    assert "unsupported" in result.stdout  # fp8 on a100 is a row, not a crash
    emulated = run("compare", "--chip", "a100-sxm-80gb", "--model", "llama-3-8b",
                   "--techniques", "fp16,fp8", "--allow-emulation", "--json")
    rows = json.loads(emulated.stdout)
    assert "error" not in rows[1] and any("emulated" in n for n in rows[1]["notes"])


def test_compare_bad_technique_exits_2():
    result = run("compare", "--chip", "h100-sxm", "--model", "tiny-test", "--techniques", "int5")
    assert result.exit_code == 2
    assert "unknown technique 'int5'" in flat(result.output)


def test_simulate_with_techniques():
    result = run("simulate", "--chip", "h100-sxm", "--model", "llama-2-70b", "--context", "128",
                 "--techniques", "fp16+tp=2", "--json")
    doc = json.loads(result.stdout)
    assert doc["techniques"] == "fp16+tp=2" and doc["chips"] == 2
    assert doc["memory"]["fits"] is True
