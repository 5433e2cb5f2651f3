"""Figures as a reader expects them: units (ms, µs, tok/s, mm², W, $), significant figures, no
scientific notation in any table, human headers; the words of a non-LLM workload; compare's
note on a baseline that does not fit; --help text that keeps its brackets; the sweep's bar and
summary giving one rate."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from infersim.cli import app
from infersim.units import (
    fmt_area,
    fmt_bytes,
    fmt_energy,
    fmt_power,
    fmt_quantity,
    fmt_rate,
    fmt_time,
    fmt_usd,
    si,
    significant,
)

runner = CliRunner()
SCIENTIFIC = re.compile(r"\d(?:\.\d+)?[eE][+-]?\d")
"""``6.422e+04``, ``1e-05``: what no table may print."""


def run(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "160"})


def flat(text: str) -> str:
    return " ".join(text.translate({ord(c): " " for c in "│╭╮╰╯─┃━┏┓┗┛┡┩╇╈┳┻"}).split())


# --- the formatting module ------------------------------------------------------------------


@pytest.mark.parametrize("exponent", range(-15, 25))
@pytest.mark.parametrize("mantissa", [1.0, 1.2345, 9.9996, -6.422])
def test_no_writer_ever_uses_scientific_notation(exponent: int, mantissa: float):
    value = mantissa * 10.0**exponent
    for text in (significant(value), fmt_time(value), fmt_bytes(value), si(value, "FLOP/s"),
                 fmt_rate(value), fmt_area(value), fmt_power(value), fmt_usd(value),
                 fmt_energy(value), fmt_quantity(value, "J/token")):
        assert not SCIENTIFIC.search(text), text


def test_significant_figures_and_units():
    assert significant(64223.4) == "64,223"  # every integer digit kept
    assert significant(0.0012134) == "0.00121"
    assert significant(41.0) == "41.0" and significant(9.9996) == "10.0"
    assert significant(0.8, trim=True) == "0.8" and significant(float("nan")) == "–"
    assert fmt_time(0.0411) == "41.1 ms" and fmt_time(2.5e-6) == "2.50 µs"
    assert fmt_time(1200) == "1,200 s"
    assert fmt_rate(64223.4) == "64,223 tok/s"
    assert fmt_area(814) == "814 mm²" and fmt_power(0.278) == "278 mW"
    assert fmt_usd(1201.4) == "$1,201" and fmt_usd(28000) == "$28,000"
    assert fmt_energy(2.53e-3) == "2.53 mJ" and si(3.35e12, "B/s") == "3.35 TB/s"


# --- tables ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cnn(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cnn") / "cnn.yaml"
    path.write_text(
        "name: tiny-cnn\nops:\n"
        "  - {kind: conv2d, name: conv1, in_channels: 3, in_h: 32, in_w: 32, out_channels: 16,\n"
        "     kernel_h: 3, kernel_w: 3, padding: 1}\n"
        "  - {kind: gemm, name: fc, m: 1, k: 16384, n: 10, a_dtype: int8, b_dtype: int8}\n")
    return path


COMMANDS = [
    ["chips"], ["models"], ["demo"],
    ["simulate", "--chip", "h100-sxm", "--model", "tiny-test"],
    ["simulate", "--chip", "h100-sxm", "--model", "tiny-test", "--phase", "prefill"],
    ["simulate", "--chip", "eyeriss-v1", "--model", "tiny-test", "--act-dtype", "int16",
     "--weights-dtype", "int16", "--kv-dtype", "int16"],
    ["simulate", "--chip", "h100-sxm", "--model", "llama-2-70b", "--context", "128"],
    ["compare", "--chip", "h100-sxm", "--model", "tiny-test"],
    ["map", "--chip", "tpu-v1", "--gemm", "4096,4096,4096", "--dtype", "int8"],
    ["map", "--chip", "eyeriss-v1", "--conv", "31,31,5,5,96,256,1", "--dtype", "int16",
     "--dataflow", "rs", "--objective", "energy"],
    ["serve", "--chip", "h100-sxm", "--model", "tiny-test", "--requests", "20",
     "--engine", "roofline"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:3]))
def test_no_table_prints_scientific_notation(args: list[str]):
    result = run(*args)
    assert result.exit_code == 0, result.output
    assert not SCIENTIFIC.search(result.output), result.output


def test_an_operator_list_reports_latency_and_inferences_per_second(cnn: Path):
    result = run("simulate", "--chip", "edge-npu", "--workload", str(cnn))
    assert result.exit_code == 0, result.output
    text = flat(result.output)
    assert "latency" in text and "inferences/s" in text and "one pass" in text
    for word in ("TTFT", "TPOT", "tokens/s", "KV"):
        assert word not in text, word
    doc = json.loads(run("simulate", "--chip", "edge-npu", "--workload", str(cnn),
                         "--json").stdout)
    assert doc["ttft_s"] is None and doc["tokens_per_s"] is None
    assert doc["inferences_per_s"] == pytest.approx(1 / doc["latency_s"])
    assert set(doc["display"]) >= {"latency", "inferences/s"} and "TTFT" not in doc["display"]


def test_a_model_step_keeps_its_words_and_the_json_its_companion():
    doc = json.loads(run("simulate", "--chip", "h100-sxm", "--model", "tiny-test",
                         "--json").stdout)
    assert doc["display"]["TPOT"].endswith("s") and "tokens/s" in doc["display"]
    assert doc["display"]["TPOT"] == fmt_time(doc["tpot_s"])


def test_compare_says_when_its_baseline_does_not_fit():
    result = run("compare", "--chip", "h100-sxm", "--model", "llama-2-70b", "--context", "128",
                 "--techniques", "fp16,fp16+int4-awq")
    assert result.exit_code == 0, result.output
    assert "the baseline fp16 does not fit in one chip's memory" in flat(result.output)
    rows = json.loads(run("compare", "--chip", "h100-sxm", "--model", "llama-2-70b",
                          "--context", "128", "--techniques", "fp16,fp16+int4-awq",
                          "--json").stdout)
    assert [r["baseline_fits"] for r in rows] == [False, False]
    assert rows[1]["display"]["speedup"].endswith("x")
    fits = run("compare", "--chip", "h100-sxm", "--model", "tiny-test", "--techniques",
               "baseline,int8-weight")
    assert "does not fit" not in flat(fits.output)


# --- help text ------------------------------------------------------------------------------


def test_sweep_help_shows_the_extra_to_install():
    result = run("sweep", "--help")
    assert "pip install 'infersim[dist]'" in flat(result.output)


def _commands() -> dict[str, Any]:
    group = typer.main.get_command(app)
    return dict(group.commands)  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(_commands()))
def test_help_keeps_every_bracket_of_its_options(name: str):
    """rich reads ``[word]`` as markup and drops it: every ``[...]`` an option's help text
    means to show (escaped) must reach the screen."""
    command = _commands()[name]
    shown = flat(run(name, "--help").output)
    for param in command.params:
        text = (getattr(param, "help", None) or "").replace("\\[", "[")
        for part in re.findall(r"\[[^\]]*\]", text):
            assert flat(part) in shown, (name, param.name, part)


# --- the sweep's rate -----------------------------------------------------------------------


def test_the_bar_and_the_summary_give_one_rate():
    """The bar shows points per minute since it started (resumed points not counted), as the
    summary line does over the evaluation's seconds: one definition, one unit."""
    from types import SimpleNamespace

    from infersim.cli.explore import _rate_column, _summary_line
    from infersim.explorer.sweep import SweepSummary

    column = _rate_column(lambda: 100)  # 100 points were already stored
    task = SimpleNamespace(completed=1336, finished=False, finished_time=None, elapsed=60.0)
    bar = column.render(task).plain  # type: ignore[arg-type]
    summary = SweepSummary(Path("r"), points=1336, evaluated=1236, skipped=100, errors=0,
                           elapsed_s=75.0, evaluate_s=60.0)
    assert bar == "1,236 points/min" == fmt_rate(summary.points_per_min, "points/min")
    line = _summary_line(summary)
    assert "1,236 points/min over 60.0 s of evaluation, extra tables 15.0 s" in line
    gone = _summary_line(summary, "a temporary folder (pass --results DIR to keep them)")
    assert gone.endswith("→ a temporary folder (pass --results DIR to keep them)")


def test_a_sweep_times_its_points_apart_from_its_extra_tables(tmp_path: Path):
    from infersim.explorer.executors import LocalExecutor
    from infersim.explorer.spec import parse_spec
    from infersim.explorer.sweep import run_sweep

    stages: list[str] = []
    doc = {"chips": ["tpu-v4"], "workloads": [{"model": "tiny-test"}], "engines": ["roofline"]}
    summary = run_sweep(parse_spec(doc), tmp_path / "r", executor=LocalExecutor(1),
                        stage=stages.append)
    assert 0 < summary.evaluate_s <= summary.elapsed_s
    assert summary.extras_s == pytest.approx(summary.elapsed_s - summary.evaluate_s)
    assert "dataflow" in stages and "chips" in stages


def test_a_report_from_a_spec_does_not_name_the_folder_it_deletes(tmp_path: Path):
    """`infersim report` (as `make demo` runs it) sweeps into a temporary folder, gone when it
    returns: the summary says so instead of printing its path."""
    import yaml

    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"chips": ["tpu-v4"], "workloads": [{"model": "tiny-test"}],
                                    "engines": ["roofline"]}))
    result = run("report", str(spec), "--out", str(tmp_path / "r.html"), "--quiet")
    assert result.exit_code == 0, result.output
    text = flat(result.output)
    assert "→ a temporary folder (pass --results DIR to keep them)" in text
    assert "infersim-sweep-" not in text
