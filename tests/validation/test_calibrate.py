"""Calibration: knobs recovered from synthetic measurements, held-out rows never seen, the split,
and the calibrated chip's YAML. No torch needed: predictions are infersim's own."""

from __future__ import annotations

import dataclasses

import pytest

from infersim.arch_models import load_chip
from infersim.errors import InfersimError
from infersim.simulator.defaults import BASELINE_ENGINE, DEFAULT_ENGINE
from infersim.validation.calibrate import (
    DRAM_KNOB,
    OVERHEAD_KNOB,
    VECTOR_KNOB,
    calibrate,
    calibrated_chip,
    fit,
    knobs_for,
    split,
    with_knobs,
    write_chip_yaml,
)
from infersim.validation.harness import predict
from infersim.validation.records import Measured
from infersim.validation.suite import load_suite

BF16 = "compute_efficiency_by_dtype.bf16"
FP16 = "compute_efficiency_by_dtype.fp16"


def synthetic(chip_name: str, truth: dict[str, float], engine: str = DEFAULT_ENGINE
              ) -> tuple[list[Measured], dict[str, float]]:
    """The gpu suite 'measured' on a chip calibrated with ``truth`` (as ``engine`` predicts)."""
    kernels = load_suite("gpu").kernels
    true_chip = with_knobs(load_chip(chip_name), truth)
    times = [p.time_s for p in predict(kernels, true_chip, engine)]
    return [Measured(k, t) for k, t in zip(kernels, times, strict=True)], truth


@pytest.mark.parametrize("chip_name", ["h100-sxm", "a100-sxm-80gb"])
def test_synthetic_knobs_recovered_within_2_percent(chip_name):
    rows, truth = synthetic(
        chip_name, {DRAM_KNOB: 0.83, BF16: 0.71, FP16: 0.64, OVERHEAD_KNOB: 4e-6}
    )
    result = fit([r.kernel for r in rows], [r.measured_s for r in rows], load_chip(chip_name))
    for knob, value in truth.items():
        assert result.knobs[knob] == pytest.approx(value, rel=0.02), knob
        assert knob in result.fitted
    # The weight-only quantized kernels dequantize on the vector lanes, in series with their
    # MMAs: the vector knob is identified through them and recovered at its true value.
    assert VECTOR_KNOB in result.fitted
    assert result.knobs[VECTOR_KNOB] == pytest.approx(1.0, rel=0.02)
    print(f"\n{chip_name} recovered:", {k: f"{v:.4g}" for k, v in result.knobs.items()})


def test_synthetic_vector_knob_recovered_when_it_binds():
    rows, truth = synthetic(
        "h100-sxm", {DRAM_KNOB: 0.9, BF16: 0.75, FP16: 0.7, VECTOR_KNOB: 0.05, OVERHEAD_KNOB: 2e-6}
    )
    result = fit([r.kernel for r in rows], [r.measured_s for r in rows], load_chip("h100-sxm"))
    for knob, value in truth.items():
        assert result.knobs[knob] == pytest.approx(value, rel=0.02), knob
    assert result.cost < 1e-6


def test_calibration_never_sees_held_out_rows():
    # about the split, not the engine: the roofline keeps it fast
    rows, _ = synthetic("h100-sxm", {DRAM_KNOB: 0.8, BF16: 0.7, FP16: 0.7, OVERHEAD_KNOB: 3e-6},
                        BASELINE_ENGINE)
    chip = load_chip("h100-sxm")
    clean = calibrate(rows, chip, BASELINE_ENGINE, holdout_frac=0.3, seed=7)
    _, held = split([r.kernel for r in rows], 0.3, 7)
    victim = held[0]
    poisoned = list(rows)
    poisoned[victim] = dataclasses.replace(rows[victim], measured_s=rows[victim].measured_s * 1e3)
    dirty = calibrate(poisoned, chip, BASELINE_ENGINE, holdout_frac=0.3, seed=7)
    assert dirty.fit.knobs == clean.fit.knobs  # the fit is bit-for-bit the same
    assert dirty.holdout_max_error > 0.9 > clean.holdout_max_error  # the report did see it
    # ...while the same row in the calibration split would have moved the fit.
    everything = fit([r.kernel for r in poisoned], [r.measured_s for r in poisoned], chip,
                     BASELINE_ENGINE)
    assert everything.knobs != clean.fit.knobs


def test_calibration_report_before_after():
    rows, _ = synthetic("h200", {DRAM_KNOB: 0.8, BF16: 0.68, FP16: 0.7, OVERHEAD_KNOB: 5e-6})
    report = calibrate(rows, load_chip("h200"), holdout_frac=0.3, seed=1)
    assert report.n_calibration + report.n_holdout == len(rows)
    assert report.holdout_mape_before > 0.1
    # On the analytic engine a held-out row can need a knob value that the calibration rows
    # only bound (their tilings are SRAM-bound past it): 0.2% here, where the roofline is exact.
    assert report.holdout_mape_after < 1e-2
    assert report.calibration_mape_after < 1e-3
    data = report.to_dict()
    for key in (
        "calibration_mape_before", "calibration_mape_after", "holdout_mape_before",
        "holdout_mape_after", "holdout_max_error", "n_calibration", "n_holdout", "knobs",
    ):  # fmt: skip
        assert key in data
    assert {r["split"] for r in data["rows"]} == {"calibration", "holdout"}


def test_split_is_seeded_stratified_and_disjoint():
    kernels = load_suite("default").kernels
    cal, hold = split(kernels, 0.3, seed=3)
    assert (cal, hold) == split(kernels, 0.3, seed=3)
    assert (cal, hold) != split(kernels, 0.3, seed=4)
    assert sorted(cal + hold) == list(range(len(kernels)))
    strata: dict[tuple[str, str], list[int]] = {}
    for i, k in enumerate(kernels):
        strata.setdefault((k.kind, k.dtype), []).append(i)
    for members in strata.values():
        assert set(members) & set(cal), "every stratum keeps a calibration row"
    assert split(kernels, 0.0, seed=0) == (list(range(len(kernels))), [])
    for bad in (-0.1, 1.0):
        with pytest.raises(InfersimError, match="holdout_frac"):
            split(kernels, bad, 0)


def test_knobs_follow_the_kernels_dtypes():
    knobs = knobs_for(load_suite("quick").kernels)
    assert knobs == [
        DRAM_KNOB,
        BF16,
        "compute_efficiency_by_dtype.fp32",
        VECTOR_KNOB,
        OVERHEAD_KNOB,
    ]


def test_fit_rejects_bad_input():
    kernels = load_suite("tiny").kernels[:2]
    chip = load_chip("h100-sxm")
    with pytest.raises(InfersimError, match="one measurement per kernel"):
        fit(kernels, [1e-3], chip)
    with pytest.raises(InfersimError, match="> 0"):
        fit(kernels, [1e-3, 0.0], chip)
    with pytest.raises(InfersimError, match="knob"):
        fit(kernels, [1e-3, 1e-3], chip, knobs=["link_efficiency"])


def test_calibrated_chip_yaml_loads_back(tmp_path):
    rows, _ = synthetic("h100-sxm", {DRAM_KNOB: 0.85, BF16: 0.72, FP16: 0.7, OVERHEAD_KNOB: 3e-6})
    chip = load_chip("h100-sxm")
    report = calibrate(rows, chip, holdout_frac=0.25, seed=0)
    out = calibrated_chip(chip, report, device="NVIDIA H100 80GB HBM3")
    path = tmp_path / "cal" / "h100-calibrated.yaml"
    write_chip_yaml(out, path)
    loaded = load_chip(path)
    assert loaded == out
    assert loaded.name == "h100-sxm-calibrated"
    assert loaded.calibration.dram_bandwidth_efficiency == pytest.approx(0.85, rel=0.02)
    assert "H100 80GB" in loaded.description


def test_a_knob_on_a_plateau_is_stepped_off_it():
    """A time flat in a knob (a tiling bound by the SRAM feed below e = 0.6) stalls the gradient
    polish; the scan steps the knob off the plateau and the polish then finds the truth."""
    import math

    import numpy as np
    from scipy.optimize import least_squares

    from infersim.validation.calibrate import _off_plateaus

    def seconds(x: np.ndarray) -> float:
        return min(1.0 / math.exp(x[0]), 1.0 / 0.6) + x[1]

    truth = np.array([math.log(0.66), 0.0])

    def residuals(x: np.ndarray) -> np.ndarray:
        return np.array([math.log(seconds(x) / seconds(truth))])

    solve = {"bounds": (np.array([math.log(1e-3), 0.0]), np.array([0.0, 1e-4])),
             "x_scale": np.array([1.0, 1e-3]), "loss": "soft_l1", "f_scale": 0.05,
             "xtol": 1e-12, "ftol": 1e-12, "gtol": 1e-12}
    start = np.array([math.log(0.5606), 0.0])
    stalled = least_squares(residuals, start, diff_step=1e-4, **solve)
    assert math.exp(stalled.x[0]) == pytest.approx(0.5606)  # zero gradient: it never moves
    moved = _off_plateaus(residuals, stalled.x, 1, solve)
    assert seconds(moved) == pytest.approx(seconds(truth), rel=1e-6)
