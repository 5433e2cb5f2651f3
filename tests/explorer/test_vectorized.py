"""The vectorized roofline equals roofline.cost to the last bit, and the vectorized sweep path
gives the same rows as calling simulate() per point."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersim import Scenario, list_chips, load_chip, load_model
from infersim.explorer.evaluate import BOUNDS, Context, Evaluator, roofline_batch
from infersim.explorer.spec import parse_spec
from infersim.simulator import simulate
from infersim.simulator.engines import roofline
from infersim.workloads import graph
from infersim.workloads.ops import Collective, Gemm, HostTransfer

GRAPHS = [
    ("llama-3-8b", Scenario(phase="decode", batch=4, context_len=1000)),
    ("llama-3-8b", Scenario(phase="prefill", prompt_len=300)),
    ("mixtral-8x7b", Scenario(phase="decode", batch=8, context_len=4096)),
    ("deepseek-v2-lite", Scenario(phase="prefill", prompt_len=64)),
]


def _assert_same(ops, chips):
    batch = roofline_batch(ops, chips)
    for i, chip in enumerate(chips):
        if batch.error[i] is not None:
            with pytest.raises(Exception):  # noqa: B017, PT011 - roofline.cost fails too
                [roofline.cost(op, chip) for op in ops]
            continue
        for j, op in enumerate(ops):
            ref = roofline.cost(op, chip)
            assert batch.time_s[i, j] == ref.time_s, (chip.name, op.name)
            assert batch.compute_s[i, j] == ref.compute_s
            assert batch.memory_s[i, j] == ref.memory_s
            assert batch.energy_pj[i, j] == ref.energy_pj
            assert batch.cycles[i, j] == ref.cycles
            assert BOUNDS[batch.bound[i, j]] == ref.bound


@pytest.mark.parametrize(("model", "scenario"), GRAPHS)
def test_equal_to_roofline_cost_on_every_preset(model, scenario):
    ops = graph.build(load_model(model), scenario)
    _assert_same(ops, [load_chip(n) for n in list_chips()])


def test_collectives_host_transfers_and_missing_links():
    ops = [
        Collective(name="ar", collective="all-reduce", payload_bytes=8e6, participants=4),
        HostTransfer(name="h", transfer_bytes=3e8),
        Gemm(name="g", m=7, k=4096, n=512, a_dtype="int8", b_dtype="int8"),
    ]
    chips = [load_chip("h100-sxm"), load_chip("eyeriss-v1"), load_chip("tpu-v4")]
    _assert_same(ops, chips)
    assert roofline_batch(ops, chips).error[1] is not None


@settings(max_examples=40)
@given(
    rows=st.integers(1, 512), cols=st.integers(1, 512), cores=st.integers(1, 256),
    freq=st.floats(1e8, 3e9), bw=st.floats(1e9, 1e13), lanes=st.integers(1, 4096),
    eff=st.floats(0.05, 1.0), dram_eff=st.floats(0.05, 1.0), overhead=st.floats(0, 1e-5),
    dram_pj=st.floats(0, 300),
)
def test_equal_to_roofline_cost_on_random_chips(rows, cols, cores, freq, bw, lanes, eff,
                                                 dram_eff, overhead, dram_pj):
    chip = load_chip("tpu-v4").with_(**{
        "array.rows": rows, "array.cols": cols, "cores": cores, "freq_hz": freq,
        "dram.bandwidth_bytes_per_s": bw, "vector.lanes": lanes,
        "calibration.compute_efficiency": eff, "calibration.dram_bandwidth_efficiency": dram_eff,
        "calibration.kernel_overhead_s": overhead, "energy.dram_pj_per_byte": dram_pj,
    })
    ops = graph.build(load_model("tiny-test"), Scenario(phase="decode", context_len=33))
    _assert_same(ops, [chip, load_chip("h100-sxm")])


def _rows(spec, vectorized: bool, monkeypatch) -> pd.DataFrame:
    ctx = Context(spec)
    evaluator = Evaluator(ctx)
    if not vectorized:
        monkeypatch.setattr(Evaluator, "_vectorized", lambda self, pts, out: False)
    table = evaluator.evaluate(list(ctx.space.points()))
    monkeypatch.undo()
    return table.to_pandas().sort_values("key").reset_index(drop=True)


def test_vectorized_rows_equal_simulate_rows(monkeypatch):
    spec = parse_spec({
        "chips": ["h100-sxm", "tpu-v1", {"chip": "tpu-v4", "axes": {
            "array.rows,array.cols": [32, 128, 256], "dram.bandwidth_bytes_per_s": [5e11, 2e12],
            "calibration.kernel_overhead_s": [0.0, 2e-6]}}],
        "workloads": [{"model": "llama-3-8b", "phase": ["decode", "prefill"],
                       "batch": [1, 8], "prompt_len": 256, "context_len": 512}],
        "constraints": ["area_mm2 <= 200", "fits == true"],
        "engines": ["roofline"],  # the vectorized path is the roofline's
    })
    fast = _rows(spec, True, monkeypatch)
    slow = _rows(spec, False, monkeypatch)
    assert len(fast) == len(slow) == (2 + 12) * 4
    ops_fast, ops_slow = fast.pop("ops"), slow.pop("ops")
    pd.testing.assert_frame_equal(fast, slow, check_exact=True)
    for a, b in zip(ops_fast, ops_slow, strict=True):
        assert list(a) == list(b)
    assert fast.loc[fast["chip"] == "tpu-v1", "error"].str.contains("cannot compute bf16").all()


def test_rows_agree_with_simulate_and_the_metric_definitions():
    spec = parse_spec({"chips": ["h100-sxm"], "workloads": [
        {"model": "llama-3-8b", "phase": "decode", "context_len": 1024}],
        "constraints": ["power_w <= 1"], "engines": ["roofline"]})
    ctx = Context(spec)
    row = Evaluator(ctx).evaluate(list(ctx.space.points())).to_pylist()[0]
    ref = simulate(load_chip("h100-sxm"), load_model("llama-3-8b"),
                   Scenario(phase="decode", context_len=1024), engine="roofline")
    assert row["latency_s"] == ref.latency_s and row["energy_j"] == ref.energy_j
    assert row["tokens_per_s"] == ref.tokens_per_s and row["bound"] == ref.bound
    static = row["static_power_w"]
    assert row["power_w"] == pytest.approx(ref.energy_j / ref.latency_s + static)
    assert row["tokens_per_s_per_mm2"] == pytest.approx(ref.tokens_per_s / row["area_mm2"])
    assert row["tokens_per_s_per_w"] == pytest.approx(ref.tokens_per_s / row["power_w"])
    assert row["energy_per_token_j"] == pytest.approx(
        (ref.energy_j + static * ref.latency_s) / ref.tokens)
    assert row["feasible"] is False and row["error"] is None
    assert len(row["ops"]) == len(ref.ops)
    assert sum(op["time_s"] * op["count"] for op in row["ops"]) == pytest.approx(ref.latency_s)
    assert math.isclose(row["peak_flops"], load_chip("h100-sxm").peak_flops("bf16"))


def test_techniques_go_through_simulate():
    spec = parse_spec({"chips": ["h100-sxm"], "workloads": [{"model": "llama-2-70b"}],
                       "techniques": ["baseline", "int4-awq", "tp=2"], "engines": ["roofline"]})
    ctx = Context(spec)
    rows = {r["technique"]: r for r in Evaluator(ctx).evaluate(
        list(ctx.space.points())).to_pylist()}
    for stack, row in rows.items():
        ref = simulate(load_chip("h100-sxm"), load_model("llama-2-70b"), Scenario(phase="decode"),
                       engine="roofline", techniques=stack)
        assert row["latency_s"] == ref.latency_s and row["chips"] == ref.chips
    assert rows["int4-awq"]["tokens_per_s"] > rows["baseline"]["tokens_per_s"]
    assert rows["tp=2"]["tokens_per_s_per_mm2"] == pytest.approx(
        rows["tp=2"]["tokens_per_s"] / (2 * rows["tp=2"]["area_mm2"]))


def test_vectorized_path_simulates_one_design_per_batch(monkeypatch):
    from infersim.explorer import evaluate

    calls = []
    real = evaluate._simulate
    monkeypatch.setattr(evaluate, "_simulate", lambda *a: calls.append(a) or real(*a))
    spec = parse_spec({"chips": [{"chip": "tpu-v4", "axes": {"cores": list(range(1, 41))}}],
                       "workloads": [{"model": "tiny-test", "phase": ["decode", "prefill"]}],
                       "engines": ["roofline"]})
    ctx = Context(spec)
    table = Evaluator(ctx).evaluate(list(ctx.space.points()))
    assert table.num_rows == 80 and table.column("error").null_count == 80
    assert len(calls) == 2  # the guard: one design per workload batch


def test_analytic_engine_and_dataflows_go_through_simulate():
    spec = parse_spec({"chips": ["tpu-v4"], "workloads": [{"model": "tiny-test",
                                                          "phase": "prefill", "prompt_len": 64}],
                       "engines": ["roofline", "analytic"], "dataflows": ["ws", "rs"]})
    ctx = Context(spec)
    rows = Evaluator(ctx).evaluate(list(ctx.space.points())).to_pylist()
    assert {(r["engine"], r["dataflow"]) for r in rows} == {
        ("roofline", None), ("analytic", "ws"), ("analytic", "rs")}
    for row in rows:
        # a dataflow of the sweep is a design: tpu-v4's array built for it (it lists ws only)
        chip = load_chip("tpu-v4")
        if row["dataflow"] and not chip.array.implements(row["dataflow"]):
            chip = chip.with_(**{"array.supported_dataflows": [row["dataflow"]]})
        ref = simulate(chip, load_model("tiny-test"),
                       Scenario(phase="prefill", prompt_len=64), engine=row["engine"],
                       dataflow=row["dataflow"] or "best")
        assert row["latency_s"] == ref.latency_s and row["energy_j"] == ref.energy_j
        if row["engine"] == "analytic":
            mapped = [op for op in row["ops"] if op["kind"] == "gemm"]
            assert {op["dataflow"] for op in mapped} == {row["dataflow"]}
