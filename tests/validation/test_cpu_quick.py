"""Acceptance on the host CPU: the quick suite measures every kernel of a dtype the host
computes natively and skips (with its reason) every kernel of a dtype it only emulates, and
calibration on its results reduces the held-out MAPE to at most 15%. The suite's wall time is a
benchmark figure (``benchmarks/bench_validate.py``), not an assertion.

The run uses one torch thread and the process's CPU time: on a shared machine a neighbour's
load then lengthens no sample (wall time would count the time a neighbour holds the core).
The held-out MAPE is averaged over five seeded 30% splits, since one split of a 17-kernel
suite holds out only ~5 kernels; every split's numbers are printed.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from infersim.validation.backends import CpuBackend, rounds_within
from infersim.validation.calibrate import calibrate
from infersim.validation.harness import run_suite
from infersim.validation.hostcpu import (
    EMULATED_BELOW,
    PEAK_RUN_MAX_S,
    build_host_chip,
    dtype_speeds,
    peak_sizes,
    speeds_of,
)
from infersim.validation.records import read_results, write_results
from infersim.validation.suite import load_suite

HOLDOUT_MAPE_BOUND = 0.15
SEEDS = range(5)


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    backend = CpuBackend(threads=1, timer="cpu", rounds=11)
    results = run_suite(backend, load_suite("quick"), None, host_chip=True)
    path = tmp_path_factory.mktemp("quick") / "results.json"
    write_results(results, path)
    return results, path


def test_quick_suite_times_native_dtypes_and_skips_emulated_ones(quick):
    results, _ = quick
    s = results["summary"]
    print(
        f"\nquick suite: {results['wall_s']:.1f} s, {s['n']} kernels, MAPE {s['mape']:.1%}, "
        f"max error {s['max_error']:.1%} (host-cpu, uncalibrated), {s['skipped']} skipped"
    )
    print(results["chip"]["source"])
    for row in results["rows"]:
        print(f"  {row['label']:58s} {row['bound']:8s} measured {row['measured_s'] * 1e3:8.2f} ms "
              f"spread {row['spread']:4.0%} predicted {row['predicted_s'] * 1e3:8.2f} ms "
              f"error {row['error']:+.0%}")  # fmt: skip
    for row in results["skipped"]:
        print(f"  skipped {row['label']}: {row['reason']}")
    speeds = dtype_speeds(1)
    kernels = load_suite("quick").kernels
    native = [k.label for k in kernels if speeds[k.dtype].native]
    assert [row["label"] for row in results["rows"]] == native
    assert [row["label"] for row in results["skipped"]] == [
        k.label for k in kernels if not speeds[k.dtype].native
    ]
    assert all("emulated" in row["reason"] for row in results["skipped"])
    assert s["skipped"] == len(results["skipped"])
    assert results["device"]["dtypes"]["fp32"]["native"]
    assert all(row["measured_s"] > 0 and row["reps"] >= 3 for row in results["rows"])


def test_calibration_reduces_held_out_mape(quick):
    _, path = quick
    data = read_results(path)
    reports = [calibrate(data.rows, data.chip, holdout_frac=0.3, seed=s) for s in SEEDS]
    print("\nseed  n_cal n_hold  cal MAPE before->after  held-out MAPE before->after  max")
    for seed, r in zip(SEEDS, reports, strict=True):
        print(
            f"{seed:4d} {r.n_calibration:6d} {r.n_holdout:6d}   "
            f"{r.calibration_mape_before:6.1%} -> {r.calibration_mape_after:6.1%}        "
            f"{r.holdout_mape_before:6.1%} -> {r.holdout_mape_after:6.1%}       "
            f"{r.holdout_max_error:6.1%}"
        )
    before = float(np.mean([r.holdout_mape_before for r in reports]))
    after = float(np.mean([r.holdout_mape_after for r in reports]))
    print(f"mean held-out MAPE {before:.1%} -> {after:.1%} (bound {HOLDOUT_MAPE_BOUND:.0%})")
    print("knobs (seed 0):", {k: f"{v:.3g}" for k, v in reports[0].fit.knobs.items()})
    assert after < before
    assert after <= HOLDOUT_MAPE_BOUND


def test_host_chip_is_a_real_chip():
    chip = build_host_chip(1, "cpu")
    assert build_host_chip(1, "cpu") is chip  # measured once per process
    assert chip.name == "host-cpu"
    assert chip.cores == 1
    assert chip.peak_flops("fp32") == pytest.approx(chip.spec.dense_flops["fp32"])
    assert chip.peak_bandwidth_bytes_per_s == chip.spec.dram_bandwidth_bytes_per_s
    assert 1e8 < chip.peak_bandwidth_bytes_per_s < 1e13
    assert chip.supports("bf16") == dtype_speeds(1)["bf16"].native


def test_emulated_is_a_small_fraction_of_fp32():
    speeds = speeds_of({"fp32": 100e9, "bf16": 2.4e9, "fp16": 160e9})
    assert speeds["fp32"].native and speeds["fp16"].native
    assert not speeds["bf16"].native
    assert "emulated" in speeds["bf16"].reason and "2.4 GFLOP/s" in speeds["bf16"].reason
    assert speeds_of({"fp32": 1e9, "bf16": EMULATED_BELOW * 1e9})["bf16"].native


def test_peak_sizes_follow_the_probe_rate():
    assert peak_sizes((1024, 2048), 1e12) == (1024, 2048)  # 17 ms at 1 TFLOP/s
    assert peak_sizes((1024, 2048), 20e9) == (1024,)  # 2048^3 would take 0.86 s
    assert peak_sizes((1024, 2048), 1e9) == (1024,)  # the smallest always stays
    for size in peak_sizes((512, 1024, 1536), 50e9):
        assert 2 * size**3 / 50e9 <= PEAK_RUN_MAX_S


@pytest.mark.parametrize(
    ("rounds", "round_s", "budget_s", "expected"),
    [(7, 1.0, 60.0, 7), (11, 10.0, 60.0, 6), (7, 100.0, 60.0, 3), (7, 0.0, 60.0, 7)],
)
def test_rounds_fit_the_budget(rounds, round_s, budget_s, expected):
    assert rounds_within(rounds, round_s, budget_s) == expected


def test_a_fully_emulated_suite_is_a_clear_error(monkeypatch):
    from infersim.errors import InfersimError
    from infersim.validation import hostcpu
    from infersim.validation.suite import Suite

    fake = speeds_of({"fp32": 100e9, "bf16": 1e9, "fp16": 1e9})
    monkeypatch.setattr(hostcpu, "dtype_speeds", lambda threads: fake)
    suite = Suite(name="bf16-only", kernels=[k for k in load_suite("quick").kernels
                                             if k.dtype == "bf16"])
    backend = CpuBackend(threads=1)
    assert set(backend.skips(suite.kernels)) == {k.label for k in suite.kernels}
    with pytest.raises(InfersimError, match="every kernel of suite 'bf16-only' was skipped"):
        run_suite(backend, suite, None, host_chip=True)
