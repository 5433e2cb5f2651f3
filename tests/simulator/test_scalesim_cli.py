"""``infersim scalesim``: SCALE-Sim's columns carry the replay (diffed against a live
COMPUTE_REPORT.csv of the same run), the analytic estimate has columns of its own, and
``--out`` writes SCALE-Sim's three report files as SCALE-Sim writes them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from scalesim_cases import run_scalesim
from typer.testing import CliRunner

from infersim.cli import app
from infersim.cli.dataflow import ANALYTIC_COLUMNS, PREDICTION_COLUMN
from infersim.dataflow.scalesim_io import REPORT_FILES, ScaleSimConfig

runner = CliRunner()
HAS_SCALESIM = importlib.util.find_spec("scalesim") is not None
REPLAYED = ("Total Cycles", "Stall Cycles", "Overall Util %", "Mapping Efficiency %",
            "Compute Util %")
# The setting: 64 kB operand SRAMs, USER bandwidth 4 words/cycle; a non-square array.
CFG = ScaleSimConfig(run_name="issue17", array_rows=16, array_cols=32, ifmap_sram_kb=64,
                     filter_sram_kb=64, ofmap_sram_kb=64, dataflow="is",
                     interface_bandwidth="USER", bandwidth_words_per_cycle=4)
# A strided large filter whose last window reaches past the edge, and a plain 3x3 conv.
TOPOLOGY = ("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, "
            "Num Filter, Strides,\nConv1, 36, 36, 11, 11, 3, 24, 4,\n"
            "Conv2, 15, 15, 3, 3, 8, 16, 1,\n")


def _invoke(tmp_path: Path, cfg: ScaleSimConfig, *extra: str) -> list[dict[str, object]]:
    (tmp_path / "c.cfg").write_text(cfg.to_ini())
    (tmp_path / "t.csv").write_text(TOPOLOGY)
    result = runner.invoke(app, ["scalesim", "--config", str(tmp_path / "c.cfg"),
                                 "--topology", str(tmp_path / "t.csv"), "--json", *extra])
    assert result.exit_code == 0, result.output
    rows: list[dict[str, object]] = json.loads(result.stdout)
    return rows


@pytest.mark.skipif(not HAS_SCALESIM, reason="the scalesim package is not installed")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_json_rows_and_report_files_equal_live_scalesim(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    rows = _invoke(tmp_path, CFG, "--out", str(tmp_path / "ours"))
    live = tmp_path / "live"
    live.mkdir()
    theirs = run_scalesim(CFG, TOPOLOGY, live)
    report = pd.read_csv(live / "out" / "issue17" / "COMPUTE_REPORT.csv", skipinitialspace=True,
                         float_precision="round_trip")
    report.columns = [str(c).strip() for c in report.columns]
    for row, (_, ref) in zip(rows, report.iterrows(), strict=True):
        assert row[PREDICTION_COLUMN] == "replay"
        assert {c: row[c] for c in REPLAYED} == {c: ref[c] for c in REPLAYED}
        assert set(ANALYTIC_COLUMNS) <= set(row)
    for name in REPORT_FILES:
        assert (tmp_path / "ours" / "issue17" / name).read_text() == theirs[name], name


def test_analytic_fills_in_where_the_replay_refuses(tmp_path: Path) -> None:
    """A custom ifmap layout is not replayed: SCALE-Sim's columns then carry the analytic
    estimate, marked so, and ``--out`` refuses (its files need every layer replayed)."""
    cfg = CFG.model_copy(update={"ifmap_custom_layout": True})
    rows = _invoke(tmp_path, cfg)
    for row in rows:
        assert row[PREDICTION_COLUMN] == "analytic"
        assert row["Total Cycles"] == row[ANALYTIC_COLUMNS[0]]
        assert row["Event Total Cycles"] is None
    refused = runner.invoke(app, ["scalesim", "--config", str(tmp_path / "c.cfg"),
                                  "--topology", str(tmp_path / "t.csv"), "--out",
                                  str(tmp_path / "o")])
    assert refused.exit_code == 2
    assert "custom layouts" in refused.output


def test_table_names_both_engines(tmp_path: Path) -> None:
    (tmp_path / "c.cfg").write_text(CFG.to_ini())
    (tmp_path / "t.csv").write_text(TOPOLOGY)
    result = runner.invoke(app, ["scalesim", "--config", str(tmp_path / "c.cfg"),
                                 "--topology", str(tmp_path / "t.csv")])
    assert result.exit_code == 0, result.output
    words = " ".join(result.stdout.translate({ord(c): " " for c in "│┃┏┓┗┛━┡┩└┘─╇┳┴╋"}).split())
    assert "Conv1 3,955 0 27.53" in words  # the replay: SCALE-Sim's 3955 cycles, no stall
    assert "infersim analytic" in words and "replayed by the event engine" in words
