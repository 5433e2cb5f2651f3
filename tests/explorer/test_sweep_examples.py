"""Every example spec validates and runs; the optimize search respects its budgets and resumes
without duplicates."""

from __future__ import annotations

from pathlib import Path

import pytest

from infersim.explorer.executors import LocalExecutor
from infersim.explorer.metrics import parse_constraint
from infersim.explorer.spec import load_spec, parse_spec
from infersim.explorer.store import load_results
from infersim.explorer.sweep import run_sweep

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("sweep-*.yaml"))


def test_there_are_examples():
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs(path: Path, tmp_path: Path):
    spec = load_spec(path)
    summary = run_sweep(spec, tmp_path, executor=LocalExecutor(1))
    df = load_results(tmp_path)
    assert summary.evaluated == len(df) > 0 and df["key"].is_unique
    assert df["error"].isna().mean() > 0.5
    assert df["feasible"].any()


def test_optimize_finds_designs_within_budget(tmp_path: Path):
    doc = {
        "chips": [{"chip": "tpu-v4", "axes": {
            "cores": {"low": 1, "high": 16, "integer": True},
            "dram.bandwidth_bytes_per_s": {"low": 0.3e12, "high": 6e12, "log": True},
        }}],
        "workloads": [{"model": "tiny-test", "phase": ["decode", "prefill"]}],
        "constraints": ["area_mm2 <= 500"],  # TPU v4 variants scale its published 600 mm²
        "search": {"kind": "optimize", "maxiter": 6, "popsize": 5, "seed": 3},
        "engines": ["roofline"],  # the search is what is tested
    }
    spec = parse_spec(doc)
    first = run_sweep(spec, tmp_path, executor=LocalExecutor(1))
    df = load_results(tmp_path)
    assert df["key"].is_unique and first.evaluated == len(df)
    assert (df["axis.cores"] == df["axis.cores"].round()).all()
    budget = parse_constraint("area_mm2 <= 500")
    feasible = df[df["feasible"]]
    assert not feasible.empty and (feasible["area_mm2"] <= 500).all()
    best = feasible.groupby("design_key")["tokens_per_s"].apply(
        lambda s: s.prod() ** (1 / len(s))).max()
    everything = df.groupby("design_key")["tokens_per_s"].apply(
        lambda s: s.prod() ** (1 / len(s)))
    assert best >= everything[df.groupby("design_key")["area_mm2"].first().map(
        budget.holds)].quantile(0.9)
    again = run_sweep(spec, tmp_path, executor=LocalExecutor(1), resume=True)
    assert again.evaluated == 0 and len(load_results(tmp_path)) == len(df)
