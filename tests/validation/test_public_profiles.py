"""The calibration profiles shipped for the GPU presets: fitted on the cited public rows
(scripts/public_profiles.py), loadable, applied by simulate, with their held-out error."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infersim.arch_models import load_chip
from infersim.cli import app
from infersim.validation.profiles import apply_profile, load_profile
from infersim.validation.records import read_measurements

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "infersim" / "validation" / "data" / "public_gpu"
CHIPS = ("a100-sxm-80gb", "h100-sxm", "h200")


def _script() -> object:
    spec = importlib.util.spec_from_file_location("public_profiles",
                                                  ROOT / "scripts" / "public_profiles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("chip", CHIPS)
def test_the_measurement_files_are_the_public_rows(chip: str) -> None:
    """The committed records are what the script makes of today's public rows (no drift)."""
    rows = _script().rows_for(chip)  # type: ignore[attr-defined]
    with (DATA / "measurements" / f"{chip}.csv").open(newline="") as f:
        written = list(csv.DictReader(f))
    assert len(written) == len(rows)
    for have, want in zip(written, rows, strict=True):
        assert {k: v for k, v in have.items() if v} == {k: str(v) for k, v in want.items()}
    assert read_measurements(DATA / "measurements" / f"{chip}.csv")  # valid records


@pytest.mark.parametrize("chip", CHIPS)
def test_a_shipped_profile_applies_and_records_its_held_out_error(chip: str) -> None:
    profile = load_profile(DATA / "profiles" / f"{chip}.yaml")
    assert set(profile.chips) == {chip}
    held = profile.fit["holdout"]
    assert held["method"] == "4-fold" and 0 <= held["mape_after"] < 1
    calibrated = apply_profile(load_chip(chip), profile)
    assert calibrated.calibration != load_chip(chip).calibration
    result = CliRunner().invoke(app, ["simulate", "--chip", chip, "--model", "llama-3-8b",
                                      "--phase", "decode", "--calibration",
                                      str(DATA / "profiles" / f"{chip}.yaml"), "--json"])
    assert result.exit_code == 0, result.output
    slower = json.loads(result.stdout)["latency_s"]
    plain = CliRunner().invoke(app, ["simulate", "--chip", chip, "--model", "llama-3-8b",
                                     "--phase", "decode", "--json"])
    assert slower > json.loads(plain.stdout)["latency_s"]  # DRAM efficiency below 1
