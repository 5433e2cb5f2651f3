"""Executors: a process pool and Ray give the same rows as evaluating in this process."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from infersim.errors import ConfigError
from infersim.explorer.executors import LocalExecutor, make_executor
from infersim.explorer.spec import parse_spec
from infersim.explorer.store import load_results
from infersim.explorer.sweep import run_sweep

SPEC = {
    "name": "executors",
    "chips": ["h100-sxm", {"chip": "tpu-v4", "axes": {"cores": [1, 2, 4, 8],
                                                     "freq_hz": [0.9e9, 1.05e9, 1.3e9]}}],
    "workloads": [{"model": "tiny-test", "phase": ["decode", "prefill"], "batch": [1, 4]}],
    "techniques": ["baseline", "int8-weight"],
    "constraints": ["area_mm2 <= 250"],
}


def _rows(folder: Path) -> pd.DataFrame:
    df = load_results(folder, with_ops=True)
    df["ops"] = df["ops"].map(lambda ops: json.dumps([dict(o) for o in ops]))
    return df.sort_values("key").reset_index(drop=True)


@pytest.fixture(scope="module")
def inline_rows(tmp_path_factory) -> pd.DataFrame:
    out = tmp_path_factory.mktemp("inline")
    run_sweep(parse_spec(SPEC), out, executor=LocalExecutor(1))
    return _rows(out)


def test_process_pool_matches_in_process(inline_rows, tmp_path: Path):
    summary = run_sweep(parse_spec(SPEC), tmp_path, executor=LocalExecutor(2), chunk_size=7)
    assert summary.evaluated == len(inline_rows) == 13 * 4 * 2
    pd.testing.assert_frame_equal(_rows(tmp_path), inline_rows, check_exact=True)


def test_sweep_reports_progress_to_a_callback(tmp_path: Path):
    seen: list[tuple[int, int | None]] = []
    summary = run_sweep(parse_spec(SPEC), tmp_path, executor=LocalExecutor(1), chunk_size=7,
                        progress=lambda done, total: seen.append((done, total)))
    total = summary.points
    assert seen[0] == (0, total)
    assert seen[-1] == (total, total)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)
    assert len(seen) == 1 + -(-total // 7)


def test_ray_matches_local(inline_rows, tmp_path: Path, monkeypatch):
    ray = pytest.importorskip("ray")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    executor = make_executor("ray", workers=2)
    try:
        run_sweep(parse_spec(SPEC), tmp_path, executor=executor, chunk_size=9)
    finally:
        executor.close()
    assert not ray.is_initialized()
    pd.testing.assert_frame_equal(_rows(tmp_path), inline_rows, check_exact=True)


def test_executor_arguments_are_checked():
    with pytest.raises(ConfigError, match="workers = 0"):
        LocalExecutor(0)
    with pytest.raises(ConfigError, match="unknown executor 'dask'"):
        make_executor("dask")
    with pytest.raises(ConfigError, match="--address is for the ray executor"):
        make_executor("local", address="auto")


def test_pool_workers_write_the_cost_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A forked worker never runs its exit handlers: it flushes the cost store after every
    unit of work, so what the pool computed is on disk when the sweep ends."""
    import sqlite3

    from infersim.simulator.engines import analytic, store

    monkeypatch.setattr(store, "BATCH", 1 << 30)  # nothing written but by a flush
    monkeypatch.setenv("INFERSIM_CACHE", "on")
    monkeypatch.setenv("INFERSIM_CACHE_DIR", str(tmp_path / "store"))
    analytic.clear_cache()  # the workers inherit this process's memory
    spec = parse_spec({**SPEC, "engines": ["analytic"], "techniques": ["baseline"]})
    run_sweep(spec, tmp_path / "r", executor=LocalExecutor(2), chunk_size=7)
    with sqlite3.connect(tmp_path / "store" / "costs.sqlite") as conn:
        assert conn.execute("SELECT COUNT(*) FROM costs").fetchone()[0] > 0
    analytic.clear_cache()


def test_a_sweep_runs_in_a_pool_by_its_work_not_its_point_count() -> None:
    """The default report (660 analytic points, eight 150-request analytic serving runs) is
    worth a pool; the same points on the roofline without serving runs stay in this process,
    and an engine's weight orders the work (a cold analytic point costs more than a roofline
    one, an event-engine point more still)."""
    from infersim.explorer.defaults import default_spec
    from infersim.explorer.evaluate import Context
    from infersim.explorer.sweep import ENGINE_WORK, SMALL_SWEEP_POINTS, _work

    spec = default_spec()
    assert _work(Context(spec), 660) >= SMALL_SWEEP_POINTS
    doc = spec.model_dump(mode="json", exclude_none=True)
    doc.pop("serving")
    by_engine = {}
    for engine in ("roofline", "analytic", "events"):
        doc["engines"] = [engine]
        by_engine[engine] = _work(Context(parse_spec(doc)), 660)
    assert by_engine["roofline"] == 660 < SMALL_SWEEP_POINTS
    assert by_engine["roofline"] < by_engine["analytic"] < by_engine["events"]
    assert ENGINE_WORK["roofline"] == 1.0
