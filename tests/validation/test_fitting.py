"""The fit on kernel and model rows (infersim.validation.fitting): knobs known by construction
are fitted back from engine-generated measurements with 3% noise, on one chip family."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from infersim.arch_models import load_chip
from infersim.cli import app
from infersim.errors import InfersimError
from infersim.validation.calibrate import with_knobs
from infersim.validation.fitting import Problem, build_problem, predict_targets
from infersim.validation.heldout import calibrate_problem
from infersim.validation.records import Measured
from infersim.validation.schema import (
    AttentionRecord,
    CollectiveRecord,
    ElementwiseRecord,
    GemmRecord,
    ModelRecord,
    NormRecord,
)

TRUTH = {
    "dram_bandwidth_efficiency": 0.8,
    "compute_efficiency_by_dtype.bf16": 0.6,
    "shared_sram_bandwidth_efficiency": 0.7,
    "vector_efficiency": 0.1,
    "attention_efficiency": 0.55,
    "link_efficiency": 0.75,
    "kernel_overhead_s": 4e-6,
}
"""Known knobs, one of every kind the fit supports: DRAM, compute (per class), L2, vector,
fused attention, chip link, launch overhead."""
FAMILY = ("h100-sxm", "h200", "a100-sxm-80gb")
SHAPES = ((1, 512, 128), (8, 1024, 128), (32, 256, 64), (4, 2048, 32))


def model_rows(chips: tuple[str, ...]) -> list[ModelRecord]:
    return [
        ModelRecord(
            chip=c,
            model="llama-3-8b",
            phase="end-to-end",
            batch=b,
            prompt_len=p,
            output_len=o,
            ttft_s={"median": 1.0},
            tpot_s={"median": 1.0},
        )
        for c in chips
        for b, p, o in SHAPES
    ] + [  # a tiny model's steps are mostly launches: they pin the overhead
        ModelRecord(
            chip=c,
            model="tiny-test",
            phase="end-to-end",
            batch=1,
            prompt_len=64,
            output_len=32,
            ttft_s={"median": 1.0},
            tpot_s={"median": 1.0},
        )
        for c in chips
    ]


def kernel_rows(chips: tuple[str, ...]) -> list[Measured]:
    kernels = [
        GemmRecord(m=8192, k=8192, n=8192),
        GemmRecord(m=4096, k=4096, n=4096),
        AttentionRecord(batch=4, heads=32, kv_heads=8, q_len=2048, kv_len=2048),
        CollectiveRecord(collective="all-reduce", payload_bytes=64e6, participants=8),
        CollectiveRecord(collective="all-gather", payload_bytes=16e6, participants=8),
        ElementwiseRecord(rows=8192, cols=14336, activation="gelu"),
        NormRecord(rows=8192, cols=4096),
    ]
    return [Measured(k, 1.0, device=c) for c in chips for k in kernels]


def measured(problem: Problem, seed: int = 0, noise: float = 0.03) -> Problem:
    """``problem`` with every target replaced by the engine's prediction on chips with
    :data:`TRUTH`, times seeded multiplicative noise."""
    truth = {n: with_knobs(c, TRUTH) for n, c in problem.chips.items()}
    pred = predict_targets(problem, truth, "analytic")
    rng = np.random.default_rng(seed)
    problem.targets = [
        dataclasses.replace(t, measured_s=float(p * np.exp(rng.normal(0, noise))))
        for t, p in zip(problem.targets, pred, strict=True)
    ]
    return problem


def test_shared_family_fit_recovers_knobs_and_holds_out() -> None:
    chips = {n: load_chip(n) for n in FAMILY}
    problem = measured(build_problem(kernel_rows(FAMILY), model_rows(FAMILY), chips))
    result, report = calibrate_problem(problem, shared=True, holdout_by="chip", polish_evals=15)
    knobs = {k["knob"]: k for k in report["knobs"]["shared"]}
    assert set(TRUTH) <= set(knobs)
    for name, true in TRUTH.items():
        assert knobs[name]["identifiable"], name
        assert knobs[name]["rse"] < 0.25, name
        assert knobs[name]["value"] == pytest.approx(true, rel=0.05), name
    assert report["fit"]["mape_before"] > 0.2
    assert report["fit"]["mape_after"] <= 0.04
    assert report["holdout"]["method"] == "by chip"
    groups = report["holdout"]["by_group"]
    assert set(groups) == set(FAMILY)
    # an H100 or H200 held out is predicted from the other two chips' knobs; the A100 (another
    # generation, fitted from the two Hoppers) is reported, not bounded at 4%
    for name in ("h100-sxm", "h200"):
        assert groups[name]["mape_after"] <= 0.04 < groups[name]["mape_before"], name
    assert report["holdout"]["mape_after"] < report["holdout"]["mape_before"]
    assert report["good"], report["warnings"]
    # each chip keeps its own hardware fields
    assert result.chips["h200"].dram.bandwidth_bytes_per_s != (
        result.chips["h100-sxm"].dram.bandwidth_bytes_per_s
    )


def write_csv(path: Path, problem: Problem, rows: list[ModelRecord]) -> None:
    """The model rows with their measured TTFT and TPOT (from ``problem``'s targets)."""
    by = {(t.row, t.metric): t.measured_s for t in problem.targets}
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "record",
                "chip",
                "model",
                "phase",
                "batch",
                "prompt_len",
                "output_len",
                "ttft_s_median",
                "tpot_s_median",
            ]
        )
        for i, r in enumerate(rows, start=1):
            w.writerow(
                [
                    "model",
                    r.chip,
                    r.model,
                    r.phase,
                    r.batch,
                    r.prompt_len,
                    r.output_len,
                    by[(i, "ttft_s")],
                    by[(i, "tpot_s")],
                ]
            )


FIT_KNOBS = ",".join(TRUTH)


def test_cli_calibrate_model_rows_then_simulate(tmp_path: Path) -> None:
    pair = ("h100-sxm", "h200")
    rows = model_rows(pair)
    problem = measured(build_problem([], rows, {n: load_chip(n) for n in pair}))
    runs = tmp_path / "runs.csv"
    write_csv(runs, problem, rows)
    prof = tmp_path / "profile.yaml"
    result = CliRunner().invoke(
        app,
        [
            "calibrate",
            str(runs),
            "--chip",
            "h100-sxm,h200",
            "--shared",
            "--holdout-by",
            "chip",
            "--knobs",
            FIT_KNOBS,
            "--polish-evals",
            "5",
            "--profile",
            str(prof),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["chips"] == list(pair) and report["mode"] == "shared"
    assert report["holdout"]["mape_after"] < report["holdout"]["mape_before"]
    assert report["fit"]["mape_after"] <= 0.05
    assert prof.exists()
    base = ["simulate", "--chip", "h200", "--model", "llama-3-8b", "--phase", "decode", "--json"]
    plain = json.loads(CliRunner().invoke(app, base).output)
    calibrated = CliRunner().invoke(app, [*base, "--calibration", str(prof)])
    assert calibrated.exit_code == 0, calibrated.output
    assert json.loads(calibrated.output)["latency_s"] > plain["latency_s"] * 1.1
    wrong = CliRunner().invoke(
        app, [*base[:2], "a100-sxm-80gb", *base[3:], "--calibration", str(prof)]
    )
    assert wrong.exit_code == 2
    assert "h100-sxm, h200" in wrong.output and "a100-sxm-80gb" in wrong.output


def test_knob_at_bound_is_a_warning_and_not_good() -> None:
    chips = {"h100-sxm": load_chip("h100-sxm")}
    problem = measured(build_problem([], model_rows(("h100-sxm",)), chips), noise=0.0)
    # measured 40% faster than the ideal machine: the DRAM knob runs into its upper bound
    pred = predict_targets(problem, chips, "analytic")
    problem.targets = [
        dataclasses.replace(t, measured_s=float(p) * 0.6)
        for t, p in zip(problem.targets, pred, strict=True)
    ]
    _, report = calibrate_problem(problem, ["dram_bandwidth_efficiency"], polish_evals=0)
    (knob,) = report["knobs"]["shared"]
    assert knob["at_bound"] == "upper"
    assert any("upper bound" in w for w in report["warnings"])
    assert not report["good"]


def test_poisoned_holdout_rows_never_reach_the_fit() -> None:
    chips = {n: load_chip(n) for n in ("h100-sxm", "h200")}
    problem = measured(build_problem([], model_rows(("h100-sxm", "h200")), chips))
    knobs = ["dram_bandwidth_efficiency", "compute_efficiency_by_dtype.bf16"]
    _, clean = calibrate_problem(problem, knobs, holdout_by="chip", polish_evals=0)
    poisoned = dataclasses.replace(
        problem,
        targets=[
            dataclasses.replace(
                t, measured_s=t.measured_s * (1000.0 if t.chip == "h200" and t.row == 6 else 1.0)
            )
            for t in problem.targets
        ],
    )
    _, dirty = calibrate_problem(poisoned, knobs, holdout_by="chip", polish_evals=0)
    clean_h200 = [r["holdout_predicted_s"] for r in clean["rows"] if r["chip"] == "h200"]
    dirty_h200 = [r["holdout_predicted_s"] for r in dirty["rows"] if r["chip"] == "h200"]
    assert clean_h200 == pytest.approx(dirty_h200, rel=1e-9)
    # the poison is real: the fit on all rows (which sees it) moves
    assert dirty["knobs"] != clean["knobs"]


def test_kfold_held_out_error() -> None:
    pair = ("h100-sxm", "h200")
    chips = {n: load_chip(n) for n in pair}
    problem = measured(build_problem(kernel_rows(pair), model_rows(pair), chips))
    _, report = calibrate_problem(problem, folds=4, polish_evals=5)
    assert report["holdout"]["method"] == "4-fold"
    assert all(r["holdout_predicted_s"] is not None for r in report["rows"])
    assert sum(g["n"] for g in report["holdout"]["by_group"].values()) == len(report["rows"])
    assert report["holdout"]["mape_after"] <= 0.04 < report["holdout"]["mape_before"]


def test_per_chip_fit_has_a_knob_set_per_chip() -> None:
    pair = ("h100-sxm", "h200")
    chips = {n: load_chip(n) for n in pair}
    problem = measured(build_problem([], model_rows(pair), chips), noise=0.0)
    knobs = ["dram_bandwidth_efficiency", "compute_efficiency_by_dtype.bf16"]
    result, report = calibrate_problem(problem, knobs, shared=False, polish_evals=0)
    assert report["mode"] == "per-chip" and set(report["knobs"]) == set(pair)
    assert set(result.chips) == set(pair)
    with pytest.raises(InfersimError, match="needs --shared"):
        calibrate_problem(problem, knobs, shared=False, holdout_by="chip", polish_evals=0)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (
            "record,chip,model,phase,batch,prompt_len,output_len,ttft_s_median\n"
            "model,h100-sxm,llama-3-8b,end-to-end,1,512,128,0.02\n"
            "model,h100-sxm,llama-3-8b,end-to-end,0,512,128,0.02\n",
            "batch",
        ),
        (
            "record,chip,model,phase,batch,prompt_len,output_len,ttft_s_median\n"
            "model,h100-sxm,llama-3-8b,end-to-end,1,512,128,-1\n",
            "ttft_s",
        ),
    ],
)
def test_bad_rows_exit_2_with_row_and_field(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "runs.csv"
    path.write_text(text)
    result = CliRunner().invoke(app, ["calibrate", str(path), "--chip", "h100-sxm", "--shared"])
    assert result.exit_code == 2
    assert "row" in result.output and where in result.output


def test_unknown_chip_of_a_row_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    path.write_text(
        "record,chip,model,phase,batch,prompt_len,output_len,ttft_s_median\n"
        "model,h200,llama-3-8b,prefill,1,512,0,0.02\n"
    )
    result = CliRunner().invoke(
        app, ["calibrate", str(path), "--chip", "h100-sxm", "--knobs", "bogus_knob"]
    )
    assert result.exit_code == 2
    assert "bogus_knob" in result.output


def test_model_row_metrics_map_onto_steps() -> None:
    from infersim import simulate
    from infersim.workloads import Scenario, load_model

    chip, model = load_chip("h100-sxm"), load_model("llama-3-8b")
    rows = [
        ModelRecord(model="llama-3-8b", phase="prefill", prompt_len=512, batch=2,
                    prompt_tokens_per_s={"mean": 1.0}, ttft_s={"median": 1.0}),
        ModelRecord(model="llama-3-8b", phase="decode", output_len=128,
                    output_tokens_per_s={"mean": 1.0}),
        ModelRecord(model="llama-3-8b", phase="end-to-end", scenario="offline", num_requests=8,
                    max_batch=4, prompt_len=256, output_len=65, requests_per_s={"mean": 1.0}),
    ]  # fmt: skip
    problem = build_problem([], rows, {"h100-sxm": chip}, "h100-sxm")
    pred = dict(zip([t.metric for t in problem.targets],
                    predict_targets(problem, problem.chips, "analytic"), strict=True))  # fmt: skip
    seconds = {t.metric: t.measured_s for t in problem.targets}

    def step(phase: str, batch: int, **kw: int) -> float:
        scenario = Scenario(phase=phase, batch=batch, **kw)  # type: ignore[arg-type]
        return simulate(chip, model, scenario, ways_out=False).latency_s

    prefill = step("prefill", 2, prompt_len=512)
    assert pred["ttft_s"] == pytest.approx(prefill)
    assert pred["prompt_tokens_per_s"] == pytest.approx(prefill)  # as the time of 1024 tokens
    assert seconds["prompt_tokens_per_s"] == 1024  # 2 · 512 tokens at 1 token/s
    assert pred["output_tokens_per_s"] == pytest.approx(128 * step("decode", 1, context_len=63))
    # offline: two waves of 4, each a prefill and 64 decode steps at the mean context
    wave = step("prefill", 4, prompt_len=256) + 64 * step("decode", 4, context_len=256 + 31)
    assert pred["requests_per_s"] == pytest.approx(2 * wave)
    assert seconds["requests_per_s"] == 8


def test_a_tensor_parallel_row_is_costed_with_its_parallelism() -> None:
    from infersim import simulate
    from infersim.workloads import Scenario, load_model

    chip = load_chip("h100-sxm")
    row = ModelRecord(model="llama-3-8b", phase="decode", output_len=2, tensor_parallel=4,
                      tpot_s={"mean": 1.0})  # fmt: skip
    problem = build_problem([], [row], {"h100-sxm": chip}, "h100-sxm")
    pred = predict_targets(problem, problem.chips, "analytic")[0]
    scenario = Scenario(phase="decode", batch=1, context_len=0)
    expected = simulate(chip, load_model("llama-3-8b"), scenario, techniques="tp=4",
                        ways_out=False).latency_s  # fmt: skip
    assert pred == pytest.approx(expected)
    assert pred < simulate(chip, load_model("llama-3-8b"), scenario, ways_out=False).latency_s


def test_a_mispredicted_held_out_group_is_not_good() -> None:
    chips = {n: load_chip(n) for n in FAMILY}
    problem = measured(build_problem([], model_rows(FAMILY), chips))
    # fitted on the tiny model alone, the overhead soaks up what llama-3-8b's DRAM time needs
    _, report = calibrate_problem(
        problem, ["dram_bandwidth_efficiency", "kernel_overhead_s"], holdout_by="model",
        polish_evals=0,
    )  # fmt: skip
    assert report["holdout"]["by_group"]["llama-3-8b"]["mape_after"] > 0.25
    assert any(w.startswith("held-out llama-3-8b") for w in report["warnings"])
    assert not report["good"]


def test_cli_out_writes_one_calibrated_chip(tmp_path: Path) -> None:
    one = ("h100-sxm",)
    rows = model_rows(one)
    problem = measured(build_problem([], rows, {"h100-sxm": load_chip("h100-sxm")}))
    runs = tmp_path / "runs.csv"
    write_csv(runs, problem, rows)
    out = tmp_path / "chip.yaml"
    args = ["calibrate", str(runs), "--knobs", "dram_bandwidth_efficiency", "--polish-evals", "0"]
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    chip = load_chip(str(out))
    assert chip.name == "h100-sxm-calibrated"
    assert chip.calibration.dram_bandwidth_efficiency < 0.95
    pair = ("h100-sxm", "h200")
    rows = model_rows(pair)
    write_csv(runs, measured(build_problem([], rows, {n: load_chip(n) for n in pair})), rows)
    two = CliRunner().invoke(app, [*args, "--per-chip", "--out", str(out)])
    assert two.exit_code == 2 and "--profile" in two.output


def test_serving_rows_are_predicted_by_the_serving_simulator_and_fitted() -> None:
    """A serving row's TTFT, TPOT and requests/s come from the serving simulator (queueing
    included), not from its steps: rows simulated on a chip of known DRAM efficiency are
    fitted back to it, within 10% (a discrete-event simulation's metrics move in jumps with
    the knob, not even monotone where a step's batch changes: TTFT at 8 requests/s is 12.68 ms
    at 0.648 and 12.81 ms at 0.66; the polish stops in such a local minimum, near, not at,
    the truth: 0.648 for 0.7 here)."""
    from infersim.validation.fitting import fit_knobs

    chip = load_chip("h100-sxm")
    truth = with_knobs(chip, {"dram_bandwidth_efficiency": 0.7})
    rows = [
        ModelRecord(model="llama-3-8b", phase="end-to-end", scenario="serving",
                    request_rate_per_s=rate, num_requests=120, prompt_len=256, output_len=32,
                    ttft_s={"mean": 1.0}, tpot_s={"mean": 1.0}, requests_per_s={"mean": 1.0})
        for rate in (2.0, 8.0)
    ]  # fmt: skip
    problem = build_problem([], rows, {"h100-sxm": chip}, "h100-sxm")
    assert all(t.serving is not None for t in problem.targets)
    simulated = predict_targets(problem, {"h100-sxm": truth}, "analytic")
    steps = [sum(w for _, w in t.terms) for t in problem.targets]
    assert steps  # the surrogate's start: the rows' steps without queueing
    measured = dataclasses.replace(problem, targets=[
        dataclasses.replace(t, measured_s=float(s)) for t, s in zip(problem.targets, simulated,
                                                                     strict=True)])  # fmt: skip
    result = fit_knobs(measured, knobs=["dram_bandwidth_efficiency"])
    assert result.knob_values("h100-sxm")["dram_bandwidth_efficiency"] == pytest.approx(
        0.7, rel=0.10)
    # at 8 requests/s the queue makes TTFT grow beyond the prefill alone
    ttft = [s for t, s in zip(problem.targets, simulated, strict=True) if t.metric == "ttft_s"]
    assert ttft[1] > ttft[0]
