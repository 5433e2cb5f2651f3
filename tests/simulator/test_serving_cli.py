"""``infersim serve``: JSON keys, the trace example, the rate sweep, exit code 2 on bad input."""

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from infersim.cli.serve import register, stack_text

EXAMPLE_TRACE = Path(__file__).parents[2] / "examples" / "serving_trace.csv"
BASE = ("serve", "--chip", "h100-sxm", "--model", "llama-3-8b")

app = typer.Typer(pretty_exceptions_enable=False)
register(app)


@app.callback()
def _root() -> None:
    """Keep ``serve`` a subcommand, as in the real app."""


runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, [*BASE, *args])


def test_json_has_the_issue_keys():
    result = run("--arrivals", "poisson:10", "--requests", "60", "--prompt-len",
                 "uniform:64:256", "--output-len", "lognormal:64:0.5", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for key in ("requests_completed", "requests_rejected", "duration_s",
                "throughput_requests_per_s", "throughput_tokens_per_s", "goodput_requests_per_s",
                "kv_utilization_mean", "batch_size_mean"):
        assert isinstance(data[key], int | float), key
    for key in ("ttft_s", "tpot_s", "e2e_s", "queue_s"):
        assert set(data[key]) == {"mean", "p50", "p90", "p99"}
    assert data["requests_completed"] == 60
    assert len(data["timeline"]["start_s"]) <= 200


def test_trace_with_prefix_cache_and_spec_sugar(tmp_path):
    out = tmp_path / "requests.csv"
    result = run("--arrivals", f"trace:{EXAMPLE_TRACE}", "--prefix-cache", "--spec",
                 "ngram:k=3:alpha=0.6", "--scheduler", "chunked-prefill", "--save-requests",
                 str(out), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["requests_completed"] == 24
    assert data["prefix_cache_hit_tokens"] > 0
    assert data["techniques"] == "spec:ngram:k=3:alpha=0.6"
    assert out.read_text().count("\n") == 25


def test_table_output():
    result = run("--arrivals", "burst", "--requests", "20", "--scheduler", "static")
    assert result.exit_code == 0, result.output
    assert "goodput" in result.stdout and "TTFT" in result.stdout


def test_sweep_rate_finds_a_rate():
    result = run("--arrivals", "poisson:4", "--requests", "80", "--prompt-len", "256",
                 "--output-len", "64", "--slo-ttft-s", "0.2", "--slo-tpot-s", "0.02",
                 "--sweep-rate", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    rate = data["max_rate_per_s"]
    assert rate > 4
    passing = [r["rate_per_s"] for r in data["runs"] if r["passes"]]
    failing = [r["rate_per_s"] for r in data["runs"] if not r["passes"]]
    assert rate == max(passing) and failing and min(failing) > rate


@pytest.mark.parametrize("args", [
    ("--arrivals", "poisson:-1"),
    ("--arrivals", "weibull:3"),
    ("--prompt-len", "uniform:9:1"),
    ("--output-len", "trace"),
    ("--kv", "contiguous", "--prefix-cache"),
    ("--batch-timeout-s", "1"),
    ("--arrivals", "trace:/no/such/file.csv"),
    ("--techniques", "warp-drive"),
    ("--spec", "draft=no-such-model:k=4:alpha=0.5"),
    ("--max-batch", "0"),
    ("--scheduler", "fifo"),
    ("--techniques", "no-kv-cache"),
    ("--sweep-rate", "--arrivals", "burst"),
])
def test_bad_input_exits_2_without_traceback(args):
    result = run("--requests", "5", *args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


def test_model_too_big_for_the_chip_exits_2():
    result = runner.invoke(app, ["serve", "--chip", "h100-sxm", "--model", "llama-2-70b",
                                 "--requests", "5"])
    assert result.exit_code == 2
    assert "does not leave room" in result.output


def test_spec_sugar():
    assert stack_text(None, "ngram:k=2:alpha=0.5") == "spec:ngram:k=2:alpha=0.5"
    assert stack_text("int4-awq", "spec:heads:k=2:alpha=0.5") == "int4-awq+spec:heads:k=2:alpha=0.5"
    assert stack_text(None, None) == ""
