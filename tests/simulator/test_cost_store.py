"""The persistent cost store: a second process answers from disk what the first computed, a
store written by other code is emptied, and a broken store only disables itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infersim import Scenario, load_chip, load_model
from infersim.simulator.engines import analytic, store
from infersim.simulator.inference import simulate
from infersim.workloads.ops import Gemm

SCRIPT = """
import json, sys
from infersim import Scenario, load_chip, load_model
from infersim.dataflow import mapper
from infersim.simulator.inference import simulate
r = simulate(load_chip(sys.argv[1]), load_model("llama-3-8b"),
             Scenario(phase="prefill", batch=1, prompt_len=512), engine="analytic")
print(json.dumps({"latency": r.latency_s, "searches": mapper.STATS["searches"]}))
"""


def _run(env: dict[str, str], chip: str = "a100-sxm-80gb") -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", SCRIPT, chip], env=env, capture_output=True,
                         text=True, check=True)  # fmt: skip
    return json.loads(out.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("chip", ["a100-sxm-80gb", "tpu-v4"])  # tpu-v4 runs a schedule
def test_a_second_process_answers_from_the_store(tmp_path: Path, chip: str) -> None:
    env = {**os.environ, "INFERSIM_CACHE": "on", "INFERSIM_CACHE_DIR": str(tmp_path)}
    first, second = _run(env, chip), _run(env, chip)
    assert first["searches"] > 0
    assert second["searches"] == 0  # nothing searched: every mapped op came from disk
    assert second["latency"] == first["latency"]
    off = _run({**env, "INFERSIM_CACHE": "off"}, chip)
    assert off["searches"] == first["searches"]
    assert off["latency"] == first["latency"]


def test_a_store_of_other_code_is_emptied(tmp_path: Path) -> None:
    path = tmp_path / "costs.sqlite"
    old = store.CostStore(path, "old-code")
    cost = analytic.cost(_gemm(), load_chip("a100-sxm-80gb"))
    old.put("k", cost)
    old.close()
    assert store.CostStore(path, "old-code").get("k") == cost
    assert store.CostStore(path, "new-code").get("k") is None


def test_a_broken_store_disables_itself(tmp_path: Path) -> None:
    path = tmp_path / "costs.sqlite"
    path.write_bytes(b"not a database" * 100)
    broken = store.CostStore(path, "v")
    assert broken.get("k") is None
    broken.put("k", analytic.cost(_gemm(), load_chip("a100-sxm-80gb")))
    broken.flush()
    assert broken.broken


def test_the_store_is_used_by_the_analytic_engine(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERSIM_CACHE", "on")
    monkeypatch.setenv("INFERSIM_CACHE_DIR", str(tmp_path))
    chip, model = load_chip("a100-sxm-80gb"), load_model("tiny-test")
    scenario = Scenario(phase="prefill", batch=1, prompt_len=64)
    analytic.clear_cache()
    first = simulate(chip, model, scenario, engine="analytic")
    store.flush()
    analytic.clear_cache()
    disk = store.store()
    assert disk is not None
    calls: list[str] = []
    real = analytic._cost
    monkeypatch.setattr(analytic, "_cost", lambda *a: calls.append("x") or real(*a))
    again = simulate(chip, model, scenario, engine="analytic")
    assert calls == []
    assert again.latency_s == first.latency_s
    analytic.clear_cache()


def _gemm() -> Gemm:

    return Gemm(m=64, k=256, n=256, a_dtype="bf16", b_dtype="bf16", out_dtype="bf16")
