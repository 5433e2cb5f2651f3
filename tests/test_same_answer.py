"""One default engine everywhere, and the same answer whichever subcommand asks: a scenario run
through ``simulate --json``, ``compare --json``, a one-point ``sweep`` and the prediction path of
``calibrate`` (:func:`infersim.validation.harness.predict`), each with its default engine, gives
the same predicted latency."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from pydantic import ConfigDict
from typer.testing import CliRunner

from infersim.arch_models import load_chip
from infersim.cli import app
from infersim.explorer.spec import ServingRuns, SweepSpec
from infersim.explorer.store import load_results
from infersim.simulator import inference
from infersim.simulator.defaults import BASELINE_ENGINE, DEFAULT_ENGINE, ENGINE_SUMMARIES
from infersim.simulator.engines import ENGINE_NAMES
from infersim.simulator.serving import cost as serving_cost
from infersim.simulator.serving import simulate_serving, sweep_rate
from infersim.validation import calibrate, harness
from infersim.validation.suite import KernelBase
from infersim.workloads import Scenario, load_model
from infersim.workloads.ops import OpBase

runner = CliRunner()

CHIP, MODEL, PROMPT, CONTEXT = "a100-sxm-80gb", "llama-3-8b", 512, 512
PHASES = ("prefill", "decode")


class StepKernel(KernelBase):
    """A measurement row whose kernel is one whole model step: the operators ``simulate``
    costs for it (so calibrate's prediction path can be asked the same question)."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    kind: str = "step"
    step: tuple[OpBase, ...]

    @property
    def label(self) -> str:
        return "model step"

    def ops(self) -> list[OpBase]:
        return list(self.step)


def _scenario(phase: str) -> Scenario:
    return Scenario(phase=phase, batch=1, prompt_len=PROMPT, context_len=CONTEXT)


def _cli(*args: str) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result


def _common(phase: str) -> list[str]:
    return ["--chip", CHIP, "--model", MODEL, "--phase", phase, "--batch", "1",
            "--prompt-len", str(PROMPT), "--context", str(CONTEXT)]


def _simulate(phase: str, _tmp: Path) -> float:
    doc = json.loads(_cli("simulate", *_common(phase), "--json").stdout)
    assert doc["engine"] == DEFAULT_ENGINE
    return float(doc["latency_s"])


def _compare(phase: str, _tmp: Path) -> float:
    rows = json.loads(_cli("compare", *_common(phase), "--techniques", "baseline",
                           "--json").stdout)
    (row,) = rows
    return float(row["ttft_s"] if phase == "prefill" else row["tpot_s"])


def _sweep(phase: str, tmp: Path) -> float:
    spec = tmp / "one-point.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "one point",
        "chips": [CHIP],
        "workloads": [{"model": MODEL, "phase": phase, "batch": 1, "prompt_len": PROMPT,
                       "context_len": CONTEXT}],
        "extras": False,
    }))
    out = tmp / "results"
    _cli("sweep", str(spec), "--out", str(out), "--quiet")
    rows = load_results(out)
    assert len(rows) == 1 and rows["error"].isna().all()
    assert rows["engine"].tolist() == [DEFAULT_ENGINE]
    return float(rows["latency_s"].iloc[0])


def _calibrate_path(phase: str, _tmp: Path) -> float:
    chip = load_chip(CHIP)
    kernel = StepKernel(step=tuple(inference.step_ops(chip, load_model(MODEL), _scenario(phase))))
    (prediction,) = harness.predict([kernel], chip)
    return prediction.time_s


def _api(phase: str, _tmp: Path) -> float:
    from infersim import simulate

    return simulate(load_chip(CHIP), load_model(MODEL), _scenario(phase)).latency_s


ASKERS: dict[str, Callable[[str, Path], float]] = {
    "simulate": _simulate, "compare": _compare, "sweep": _sweep, "calibrate": _calibrate_path,
    "python api": _api,
}


@pytest.mark.parametrize("phase", PHASES)
def test_every_subcommand_predicts_the_same_latency(phase: str, tmp_path: Path):
    answers = {name: ask(phase, tmp_path) for name, ask in ASKERS.items()}
    reference = answers["simulate"]
    assert reference > 0
    for name, latency in answers.items():
        assert latency == pytest.approx(reference, rel=1e-9, abs=0.0), (name, answers)


def test_the_default_is_not_the_baseline():
    """The default engine answers differently from the roofline on the same question (so the
    agreement above is the default's, not a roofline every path fell back to)."""
    chip, model = load_chip(CHIP), load_model(MODEL)
    default = inference.simulate(chip, model, _scenario("prefill"), ways_out=False)
    baseline = inference.simulate(chip, model, _scenario("prefill"), engine=BASELINE_ENGINE,
                                  ways_out=False)
    assert default.engine == DEFAULT_ENGINE != baseline.engine
    assert default.latency_s > baseline.latency_s  # the roofline is the lower bound


# --- one default everywhere ------------------------------------------------------------------


API_DEFAULTS: tuple[Callable[..., Any], ...] = (
    inference.simulate, inference.simulate_ops, inference.cost_ops, inference.iteration_time,
    simulate_serving, sweep_rate, serving_cost.StepCost, harness.predict, harness.run_suite,
    calibrate.fit, calibrate.calibrate,
)


@pytest.mark.parametrize("fn", API_DEFAULTS, ids=lambda f: f.__qualname__)
def test_every_api_defaults_to_the_default_engine(fn: Callable[..., Any]):
    assert inspect.signature(fn).parameters["engine"].default == DEFAULT_ENGINE


def test_specs_default_to_the_default_engine():
    spec = SweepSpec.model_validate({"chips": [CHIP], "workloads": [{"model": MODEL}]})
    assert spec.engines == [DEFAULT_ENGINE]
    assert ServingRuns.model_fields["engine"].default == DEFAULT_ENGINE


def test_the_default_report_sweeps_on_the_default_engine():
    from infersim.explorer.defaults import default_spec

    spec = default_spec()
    assert spec.engines == [DEFAULT_ENGINE]
    assert spec.serving is not None and spec.serving.engine == DEFAULT_ENGINE


COST_COMMANDS = ("simulate", "compare", "serve", "validate", "calibrate")


@pytest.mark.parametrize("name", COST_COMMANDS)
def test_every_command_defaults_to_the_default_engine_and_says_so(name: str):
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    (option,) = [p for p in command.params if p.name == "engine"]
    assert option.default == DEFAULT_ENGINE
    help_text = " ".join(str(getattr(option, "help", "")).split())
    assert f"{DEFAULT_ENGINE} (" in help_text and "the default" in help_text
    assert f"{BASELINE_ENGINE} (the baseline" in help_text


def test_every_engine_has_a_summary():
    assert set(ENGINE_SUMMARIES) == set(ENGINE_NAMES)
