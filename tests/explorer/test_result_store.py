"""ResultStore: append-only shards, resume without duplicates (also after SIGKILL), CSV."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from infersim.errors import ConfigError
from infersim.explorer.executors import LocalExecutor
from infersim.explorer.spec import parse_spec
from infersim.explorer.store import ResultStore, export_csv, load_ops, load_results
from infersim.explorer.sweep import run_sweep


def _sweep(doc, out, **kw):
    return run_sweep(parse_spec(doc), out, executor=LocalExecutor(1), **kw)


def test_rows_ops_and_csv_round_trip(tiny_doc, tmp_path: Path):
    summary = _sweep(tiny_doc, tmp_path / "r")
    assert (summary.points, summary.evaluated, summary.skipped) == (14, 14, 0)
    df = load_results(tmp_path / "r")
    assert len(df) == 14 and df["key"].is_unique and list(df["seq"]) == list(range(14))
    assert df["feasible"].dtype == bool and "ops" not in df
    assert set(df["axis.array.rows,array.cols"].dropna()) == {64.0, 128.0}
    ops = load_ops(tmp_path / "r", df["key"].tolist()[:2])
    assert set(ops["key"]) == set(df["key"][:2]) and {"intensity", "achieved_flops"} <= set(ops)
    rows = export_csv(tmp_path / "r", tmp_path / "r.csv")
    csv = pd.read_csv(tmp_path / "r.csv")
    assert rows == len(csv) == 14 and set(csv["key"]) == set(df["key"])
    assert json.loads((tmp_path / "r" / "spec.json").read_text())["name"] == "tiny sweep"


def test_refuses_to_mix_sweeps(tiny_doc, tmp_path: Path):
    _sweep(tiny_doc, tmp_path / "r")
    with pytest.raises(ConfigError, match="already holds results"):
        _sweep(tiny_doc, tmp_path / "r")
    with pytest.raises(ConfigError, match="different spec"):
        _sweep({**tiny_doc, "name": "other"}, tmp_path / "r", resume=True)
    again = _sweep(tiny_doc, tmp_path / "r", resume=True)
    assert (again.evaluated, again.skipped) == (0, 14)
    assert len(load_results(tmp_path / "r")) == 14


def test_one_writer_at_a_time_and_stale_shards_are_cleaned(tmp_path: Path):
    with ResultStore(tmp_path) as store:
        (tmp_path / "shards" / ".tmp-part-x.parquet").write_text("half a shard")
        with pytest.raises(ConfigError, match="another sweep is writing"), ResultStore(tmp_path):
            pass
        assert store.shards() == []
    with ResultStore(tmp_path):
        assert not list((tmp_path / "shards").glob(".tmp-*"))
    with pytest.raises(ConfigError, match="not a results folder"):
        load_results(tmp_path / "nothing")


KILL_DOC = {
    "name": "kill me",
    "chips": [{"chip": "tpu-v4", "axes": {"cores": list(range(1, 41)),
                                          "freq_hz": [0.8e9, 1.0e9, 1.2e9, 1.4e9, 1.6e9]}}],
    "workloads": [{"model": "llama-3-8b", "phase": ["decode", "prefill"], "context_len": 256,
                   "prompt_len": 64}],
    "techniques": ["int8-weight", "kv-int8"],  # the per-point path: slow enough to kill
    "engines": ["roofline"],  # ...and fast enough to finish twice
}
RUNNER = """
import json, sys
from infersim.explorer.executors import LocalExecutor
from infersim.explorer.spec import parse_spec
from infersim.explorer.sweep import run_sweep
if __name__ == "__main__":
    run_sweep(parse_spec(json.loads(sys.argv[1])), sys.argv[2], executor=LocalExecutor(1),
              resume=True, chunk_size=10, flush_rows=40, flush_s=0.05)
"""


def _raw_rows(folder: Path) -> pd.DataFrame:
    return pd.concat([pq.read_table(s).to_pandas() for s in sorted(
        (folder / "shards").glob("part-*.parquet"))], ignore_index=True)


def _stored(folder: Path) -> pd.DataFrame:
    df = load_results(folder, with_ops=True)
    df["ops"] = df["ops"].map(lambda ops: json.dumps([dict(o) for o in ops], default=str))
    return df.sort_values("key").reset_index(drop=True)


def test_sigkill_then_resume_gives_the_uninterrupted_rows(tmp_path: Path):
    script = tmp_path / "runner.py"
    script.write_text(RUNNER)
    killed = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, str(script), json.dumps(KILL_DOC), str(killed)])
    while len(list((killed / "shards").glob("part-*.parquet"))) < 3:
        assert proc.poll() is None, "the sweep finished before it could be killed"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    partial = _raw_rows(killed)
    total = 200 * 2 * 2
    assert 0 < len(partial) < total and partial["key"].is_unique

    summary = _sweep(KILL_DOC, killed, resume=True)
    assert summary.skipped == len(partial) and summary.evaluated == total - len(partial)
    raw = _raw_rows(killed)
    assert len(raw) == total and raw["key"].is_unique  # nothing twice, nothing missing

    _sweep(KILL_DOC, tmp_path / "straight")
    pd.testing.assert_frame_equal(_stored(killed), _stored(tmp_path / "straight"),
                                  check_exact=True)


def test_flush_keeps_memory_bounded(tiny_doc, tmp_path: Path):
    _sweep(tiny_doc, tmp_path / "r", chunk_size=3, flush_rows=4, flush_s=1e9)
    sizes = [pq.read_metadata(s).num_rows for s in ResultStore(tmp_path / "r").shards()]
    assert sum(sizes) == 14 and max(sizes) <= 6  # a shard holds at most flush_rows + a chunk
    assert os.path.isdir(tmp_path / "r" / "shards")


@pytest.mark.parametrize("damage", ["truncate", "empty", "directory"])
def test_an_unreadable_shard_is_quarantined_and_resume_recomputes_it(
    tiny_doc, tmp_path: Path, damage: str
):
    _sweep(tiny_doc, tmp_path / "whole")
    _sweep(tiny_doc, tmp_path / "r", chunk_size=2, flush_rows=2, flush_s=0.0)
    shards = ResultStore(tmp_path / "r").shards()
    assert len(shards) > 2
    bad = shards[1]
    lost = len(pq.read_table(bad))
    if damage == "truncate":
        bad.write_bytes(bad.read_bytes()[:50])
    elif damage == "empty":
        bad.write_bytes(b"")
    else:
        bad.unlink()
        bad.mkdir()
    with pytest.warns(UserWarning, match=f"unreadable result shard .*{bad.name}.*left out"):
        partial = load_results(tmp_path / "r")  # readers go on without it
    assert len(partial) == 14 - lost
    with pytest.warns(UserWarning, match="moved to .*quarantine"):
        again = _sweep(tiny_doc, tmp_path / "r", resume=True)
    assert again.evaluated == lost and again.skipped == 14 - lost
    assert (tmp_path / "r" / "quarantine" / bad.name).exists()
    whole = load_results(tmp_path / "whole").drop(columns=["elapsed_s"], errors="ignore")
    mended = load_results(tmp_path / "r").drop(columns=["elapsed_s"], errors="ignore")
    assert sorted(mended["key"]) == sorted(whole["key"])


def test_a_spec_json_that_does_not_parse_is_a_clear_error(tiny_doc, tmp_path: Path):
    _sweep(tiny_doc, tmp_path / "r")
    (tmp_path / "r" / "spec.json").write_text("{not json")
    with pytest.raises(ConfigError, match="spec.json: malformed JSON"):
        _sweep(tiny_doc, tmp_path / "r", resume=True)
