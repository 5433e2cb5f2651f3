"""The sweep, report and pareto commands: outputs, JSON, and exit code 2 on bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from infersim.cli.explore import register

runner = CliRunner()


def make_app() -> typer.Typer:
    """The commands on their own app (infersim.cli registers them the same way)."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.callback()(lambda: None)
    register(app)
    return app


APP = make_app()


def run(*args: str):
    return runner.invoke(APP, list(args))


def flat(text: str) -> str:
    """Output with rich's line wrapping undone."""
    return " ".join(text.split())


@pytest.fixture
def spec_file(tiny_doc, tmp_path: Path) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(tiny_doc))
    return path


def test_sweep_then_pareto_then_report(spec_file: Path, tmp_path: Path):
    out = tmp_path / "res"
    result = run("sweep", str(spec_file), "--out", str(out), "--quiet", "--json",
                 "--csv", str(tmp_path / "rows.csv"))
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["points"] == summary["evaluated"] == 14 and summary["errors"] == 0
    assert (tmp_path / "rows.csv").read_text().count("\n") == 15

    again = run("sweep", str(spec_file), "--out", str(out), "--quiet")
    assert again.exit_code == 2 and "already holds results" in flat(again.output)
    resumed = run("sweep", str(spec_file), "--out", str(out), "--resume", "--quiet")
    assert resumed.exit_code == 0 and "0 evaluated, 14 already stored" in flat(resumed.stdout)

    front = run("pareto", str(out), "--json")
    assert front.exit_code == 0, front.output
    rows = json.loads(front.stdout)
    assert rows and {"key", "workload", "chip", "tokens_per_s", "area_mm2"} <= set(rows[0])
    table = run("pareto", str(out), "--objectives", "latency:min,cost:min", "--by", "",
                "--all", "--csv", str(tmp_path / "ranked.csv"))
    assert table.exit_code == 0 and "Pareto front" in table.stdout
    # human headers and figures with units, never 1.2e-05 or raw column names
    assert not re.search(r"\d[eE][+-]?\d", table.stdout), table.stdout
    assert "latency_s" not in table.stdout and "cost_usd" not in table.stdout
    assert "latency (lower is better)" in flat(table.stdout) and " µs" in table.stdout
    assert "pareto_rank" in (tmp_path / "ranked.csv").read_text().splitlines()[0]

    page = tmp_path / "r.html"
    report = run("report", str(out), "--out", str(page))
    assert report.exit_code == 0, report.output
    assert Path(report.stdout.strip()) == page.resolve() and page.stat().st_size > 1e6


def test_report_from_a_spec_reuses_its_results_folder(spec_file: Path, tmp_path: Path):
    args = ["report", str(spec_file), "--out", str(tmp_path / "a.html"), "--results",
            str(tmp_path / "res"), "--quiet"]
    first = run(*args)
    assert first.exit_code == 0, first.output
    second = run(*args)
    assert second.exit_code == 0 and "0 evaluated, 14 already stored" in flat(second.output)


@pytest.mark.parametrize(("args", "message"), [
    (["sweep", "missing.yaml", "--out", "x"], "does not exist"),
    (["sweep", "{spec}", "--out", "{tmp}/o", "--workers", "0"], "--workers"),
    (["sweep", "{spec}", "--out", "{tmp}/o", "--executor", "dask"], "dask"),
    (["sweep", "{spec}", "--out", "{tmp}/o", "--address", "auto"], "--address is for the ray"),
    (["report", "{tmp}/nowhere.yaml"], "no such spec file or results folder"),
    (["report", "{tmp}"], "not a results folder"),
    (["pareto", "{tmp}"], "not a results folder"),
    (["sweep", "{bad}", "--out", "{tmp}/o"], "chips.0.chip: unknown chip 'h900'"),
])
def test_bad_input_exits_2(args, message, spec_file: Path, tmp_path: Path, tiny_doc):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**tiny_doc, "chips": ["h900"], "objectives": ["x:up"]}))
    filled = [a.format(spec=spec_file, tmp=tmp_path, bad=bad) for a in args]
    result = run(*filled)
    assert result.exit_code == 2, result.output
    assert message in flat(result.output)
    assert "Traceback" not in result.output


def test_spec_errors_list_every_field(tmp_path: Path, tiny_doc):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**tiny_doc, "chips": ["h900"], "objectives": ["x:up"]}))
    result = run("sweep", str(bad), "--out", str(tmp_path / "o"))
    assert result.exit_code == 2
    assert "unknown chip 'h900'" in flat(result.output)
    assert "unknown metric 'x'" in flat(result.output)


def test_pareto_rejects_bad_objectives(spec_file: Path, tmp_path: Path):
    run("sweep", str(spec_file), "--out", str(tmp_path / "res"), "--quiet")
    for objectives, message in (("speed:max", "no column 'speed'"),
                                ("axis.cores", "give a direction"),
                                ("a:max,b:max,c:max,d:max", "1 to 3 objectives")):
        result = run("pareto", str(tmp_path / "res"), "--objectives", objectives)
        assert result.exit_code == 2 and message in flat(result.output), result.output
