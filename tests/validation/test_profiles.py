"""Calibration profiles: written by a fit, read back, applied by the API and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infersim.arch_models import load_chip
from infersim.cli import app
from infersim.errors import ConfigError
from infersim.validation.profiles import Profile, apply_profile, load_profile, write_profile

KNOBS = {"dram_bandwidth_efficiency": 0.5, "compute_efficiency_by_dtype.bf16": 0.7}


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_profile_round_trip_and_apply(tmp_path: Path, suffix: str) -> None:
    prof = Profile(chips={"h100-sxm": KNOBS}, fit={"n_rows": 3})
    path = tmp_path / f"p{suffix}"
    write_profile(prof, path)
    assert load_profile(path) == prof
    chip = apply_profile(load_chip("h100-sxm"), path)
    assert chip.calibration.dram_bandwidth_efficiency == 0.5
    assert chip.calibration.compute("bf16") == 0.7
    assert chip.dram == load_chip("h100-sxm").dram  # hardware fields untouched


def test_profile_for_another_chip_is_an_error() -> None:
    prof = Profile(chips={"h100-sxm": KNOBS})
    with pytest.raises(ConfigError, match="not 'h200'"):
        apply_profile(load_chip("h200"), prof)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("chips: {h100-sxm: {bogus: 0.5}}\n", "bogus"),
        ("chips: {h100-sxm: {dram_bandwidth_efficiency: 2.0}}\n", None),
        ("just: text\n", "not a calibration profile"),
    ],
)
def test_bad_profiles_are_errors(tmp_path: Path, text: str, match: str | None) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        apply_profile(load_chip("h100-sxm"), path)


def test_simulate_and_compare_apply_a_profile(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    write_profile(Profile(chips={"h100-sxm": KNOBS}), path)
    base = ["--chip", "h100-sxm", "--model", "llama-3-8b", "--json"]
    plain = json.loads(CliRunner().invoke(app, ["simulate", *base]).output)
    cal = CliRunner().invoke(app, ["simulate", *base, "--calibration", str(path)])
    assert cal.exit_code == 0, cal.output
    # a decode step is DRAM-bound: half the bandwidth, about twice the time
    assert json.loads(cal.output)["latency_s"] > 1.8 * plain["latency_s"]
    compared = CliRunner().invoke(app, ["compare", *base, "--calibration", str(path)])
    assert compared.exit_code == 0, compared.output
    wrong = CliRunner().invoke(
        app, ["compare", "--chip", "h200", "--model", "llama-3-8b", "--calibration", str(path)]
    )
    assert wrong.exit_code == 2
    assert "h100-sxm" in wrong.output
