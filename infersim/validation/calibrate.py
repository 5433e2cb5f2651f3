"""Fit a chip's :class:`~infersim.arch_models.chip.Calibration` knobs to measured kernels.

The measurements are split (seeded, stratified by kernel kind and dtype so that every knob the
held-out rows need has calibration rows) into a calibration and a held-out part. Only the
calibration rows reach :func:`fit`; the report gives MAPE on both parts before and after.

:func:`fit` minimizes the robust (soft-L1) norm of log(predicted / measured) with
``scipy.optimize.least_squares``. The engine is a black box (``cost_ops``), so the fit first
probes it: with one efficiency knob at a tiny value an operator's time is that knob's term
alone, which gives every operator's ideal time per knob. A surrogate max(term / knob) +
overhead, fitted from several starts, gives the starting point; the engine itself refines it,
stepping each knob off any plateau where the gradient vanishes (:func:`_off_plateaus`: a
mapping engine's time is flat in a knob wherever a tiling is bound by the shared SRAM). A knob
no calibration row depends on is left at the chip's value and reported as not fitted.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from scipy.optimize import least_squares

from infersim import dtypes
from infersim.arch_models.chip import Chip
from infersim.errors import ConfigError, InfersimError
from infersim.simulator.defaults import DEFAULT_ENGINE
from infersim.simulator.inference import cost_ops
from infersim.validation.harness import errors, predict, summarize
from infersim.validation.records import Measured
from infersim.validation.suite import KernelBase
from infersim.workloads.ops import OpBase

DRAM_KNOB = "dram_bandwidth_efficiency"
VECTOR_KNOB = "vector_efficiency"
OVERHEAD_KNOB = "kernel_overhead_s"
COMPUTE_KNOB = "compute_efficiency_by_dtype.{}"

MIN_EFFICIENCY = 1e-3
MAX_OVERHEAD_S = 1e-4
"""Upper bound of the fitted per-launch overhead: launches cost microseconds (a CUDA launch
~5 µs, a torch CPU op's dispatch ~10 µs); a larger fit is the knob soaking up model error."""
_PROBE = 1e-4
_SENSITIVITY = 0.01
"""A knob is fitted when a 10% change of it moves some calibration row's prediction by >1%."""


@dataclass(frozen=True)
class Fit:
    """A fitted chip, every knob's value (path under ``calibration``), the knobs the rows
    determined, and the robust cost at the optimum."""

    chip: Chip
    knobs: dict[str, float]
    fitted: list[str]
    cost: float


@dataclass(frozen=True)
class CalibrationReport:
    """Errors before and after on both splits (fractions), the fit, and per-row detail."""

    calibration_mape_before: float
    calibration_mape_after: float
    holdout_mape_before: float | None
    holdout_mape_after: float | None
    holdout_max_error: float | None
    calibration_max_error: float
    n_calibration: int
    n_holdout: int
    fit: Fit
    rows: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON keys ``infersim calibrate --json`` prints."""
        return {
            "calibration_mape_before": self.calibration_mape_before,
            "calibration_mape_after": self.calibration_mape_after,
            "holdout_mape_before": self.holdout_mape_before,
            "holdout_mape_after": self.holdout_mape_after,
            "holdout_max_error": self.holdout_max_error,
            "calibration_max_error": self.calibration_max_error,
            "n_calibration": self.n_calibration,
            "n_holdout": self.n_holdout,
            "knobs": self.fit.knobs,
            "fitted_knobs": self.fit.fitted,
            "chip": self.fit.chip.name,
            "rows": self.rows,
        }


def knobs_for(kernels: Sequence[KernelBase]) -> list[str]:
    """The knobs a fit over ``kernels`` adjusts: DRAM, compute per dtype class the kernels
    multiply in, vector, per-launch overhead."""
    classes = sorted(
        {
            dtypes.mac_class(op.compute_dtype)
            for kernel in kernels
            for op in kernel.ops()
            if op.array_flops
        }
    )
    return [DRAM_KNOB, *(COMPUTE_KNOB.format(c) for c in classes), VECTOR_KNOB, OVERHEAD_KNOB]


def knob_value(chip: Chip, knob: str) -> float:
    """The chip's current value of ``knob`` (a per-dtype compute knob falls back to
    ``compute_efficiency``)."""
    cal = chip.calibration
    if knob.startswith("compute_efficiency_by_dtype."):
        return cal.compute(knob.split(".", 1)[1])
    return float(getattr(cal, knob))


def with_knobs(chip: Chip, values: dict[str, float]) -> Chip:
    """A validated copy of ``chip`` with calibration knobs set (paths as :func:`knobs_for`).

    Raises:
        ConfigError: a value outside the knob's range.
    """
    cal = chip.calibration.model_dump()
    for knob, value in values.items():
        if knob.startswith("compute_efficiency_by_dtype."):
            cal["compute_efficiency_by_dtype"][knob.split(".", 1)[1]] = float(value)
        else:
            cal[knob] = float(value)
    return chip.with_(calibration=cal)


def _op_times(chip: Chip, ops: Sequence[OpBase], engine: str) -> np.ndarray:
    return np.array([c.total_time_s for c in cost_ops(ops, chip, engine)])


def _kernel_sums(op_values: np.ndarray, owner: np.ndarray, n_kernels: int) -> np.ndarray:
    return np.bincount(owner, weights=op_values, minlength=n_kernels)


def _unpack(x: np.ndarray, effs: Sequence[str]) -> dict[str, float]:
    values = {
        k: float(np.clip(math.exp(u), MIN_EFFICIENCY, 1.0)) for k, u in zip(effs, x, strict=False)
    }
    values[OVERHEAD_KNOB] = float(np.clip(x[-1], 0.0, MAX_OVERHEAD_S))
    return values


def fit(
    kernels: Sequence[KernelBase],
    measured_s: Sequence[float],
    chip: Chip,
    engine: str = DEFAULT_ENGINE,
    knobs: Sequence[str] | None = None,
    seed: int = 0,
) -> Fit:
    """Fit ``knobs`` (default :func:`knobs_for`) of ``chip`` so the engine's predictions match
    ``measured_s`` (seconds per launch). Every row given is used: pass calibration rows only.

    Raises:
        InfersimError: no rows, lengths that differ, a non-positive measurement, or a knob
            that is not an efficiency or the overhead.
    """
    if not kernels or len(kernels) != len(measured_s):
        raise InfersimError(
            f"fit needs one measurement per kernel, got {len(kernels)} and {len(measured_s)}"
        )
    meas = np.asarray(measured_s, dtype=float)
    if not np.all(meas > 0):
        raise InfersimError("measured times must be > 0")
    knobs = list(knobs or knobs_for(kernels))
    effs = [k for k in knobs if k != OVERHEAD_KNOB]
    for knob in effs:
        if knob not in (DRAM_KNOB, VECTOR_KNOB) and not knob.startswith(
            "compute_efficiency_by_dtype."
        ):
            raise InfersimError(f"knob {knob!r} unknown; allowed: {DRAM_KNOB}, {VECTOR_KNOB}, "
                                f"{COMPUTE_KNOB.format('<dtype>')}, {OVERHEAD_KNOB}")  # fmt: skip
    ops = [op for k in kernels for op in k.ops()]
    owner = np.array([i for i, k in enumerate(kernels) for _ in k.ops()])
    n = len(kernels)

    # Probe the engine: each op's ideal time per efficiency knob, and its launches.
    ideal = with_knobs(chip, {**dict.fromkeys(effs, 1.0), OVERHEAD_KNOB: 0.0})
    terms = np.stack(
        [_op_times(with_knobs(ideal, {k: _PROBE}), ops, engine) * _PROBE for k in effs], axis=1
    )
    launches = (
        _op_times(with_knobs(ideal, {OVERHEAD_KNOB: 1e-3}), ops, engine)
        - _op_times(ideal, ops, engine)
    ) / 1e-3
    log_meas = np.log(meas)

    def surrogate(x: np.ndarray) -> np.ndarray:
        per_op = (terms * np.exp(-x[:-1])).max(axis=1) + launches * x[-1]
        return np.log(_kernel_sums(per_op, owner, n)) - log_meas

    def engine_residuals(x: np.ndarray) -> np.ndarray:
        fitted = with_knobs(chip, _unpack(x, effs))
        return np.log([p.time_s for p in predict(kernels, fitted, engine)]) - log_meas

    # A fixed cost per launch cannot exceed the fastest measured launch.
    per_launch = meas / np.maximum(_kernel_sums(launches, owner, n), 1.0)
    max_overhead = min(MAX_OVERHEAD_S, float(per_launch.min()))
    lo = np.array([math.log(MIN_EFFICIENCY)] * len(effs) + [0.0])
    hi = np.array([0.0] * len(effs) + [max_overhead])
    scale = np.array([1.0] * len(effs) + [max(float(np.median(meas)), 1e-9)])
    solve = {"bounds": (lo, hi), "x_scale": scale, "loss": "soft_l1", "f_scale": 0.05,
             "xtol": 1e-12, "ftol": 1e-12, "gtol": 1e-12}  # fmt: skip

    # Starts. ratio[i, j] = term j of kernel i / its measured time: the efficiency at which
    # knob j alone explains kernel i. The base start puts each knob at the median ratio of
    # the kernels it dominates when ideal; variants move one knob to the largest or median
    # ratio of any kernel (a bound the ideal machine hides); a few seeded random points.
    kernel_terms = np.stack([_kernel_sums(terms[:, j], owner, n) for j in range(len(effs))], axis=1)
    ratio = np.clip(kernel_terms / meas[:, None], MIN_EFFICIENCY, 1.0)
    dominant = kernel_terms.argmax(axis=1)
    base = np.array(
        [
            math.log(np.median(ratio[dominant == j, j])) if np.any(dominant == j) else 0.0
            for j in range(len(effs))
        ]
        + [0.0]
    )
    starts = [base]
    for j in range(len(effs)):
        for value in (ratio[:, j].max(), np.median(ratio[:, j])):
            start = base.copy()
            start[j] = math.log(value)
            starts.append(start)
    rng = np.random.default_rng(seed)
    starts += [np.array([*rng.uniform(math.log(0.01), 0.0, len(effs)), 0.0]) for _ in range(4)]
    best = min(
        (least_squares(surrogate, np.clip(s, lo, hi), **solve) for s in starts),
        key=lambda r: r.cost,
    )
    polished = least_squares(engine_residuals, best.x, diff_step=1e-4, **solve)
    x = polished.x if polished.cost <= best.cost * (1 + 1e-9) else best.x
    x = _off_plateaus(engine_residuals, x, len(effs), solve)
    prior = np.array([math.log(max(knob_value(chip, k), MIN_EFFICIENCY)) for k in effs])
    x = _back_to_chip(engine_residuals, x, prior, solve)

    values = _unpack(x, effs)
    fitted = _determined(kernels, chip, engine, values)
    final = {k: (v if k in fitted else knob_value(chip, k)) for k, v in values.items()}
    fitted_chip = with_knobs(chip, final)
    res = np.log([p.time_s for p in predict(kernels, fitted_chip, engine)]) - log_meas
    return Fit(fitted_chip, final, fitted, float(np.mean(np.abs(res))))


_SCAN_STEPS = (-0.2, -0.1, -0.05, 0.05, 0.1, 0.2)
"""Steps of one efficiency knob's log (±5–20%) tried by :func:`_off_plateaus`."""
_SCAN_ROUNDS = 4
"""Scan-and-polish rounds at most (each starts from the previous round's optimum)."""


def _robust_cost(residuals: np.ndarray, f_scale: float) -> float:
    """``least_squares``' soft-L1 cost of ``residuals`` (its ``cost`` at that point)."""
    z = (residuals / f_scale) ** 2
    return float(0.5 * f_scale**2 * np.sum(2.0 * (np.sqrt(1.0 + z) - 1.0)))


def _off_plateaus(
    residuals: Callable[[np.ndarray], np.ndarray], x: np.ndarray, n_eff: int,
    solve: dict[str, Any],
) -> np.ndarray:
    """``x`` moved off the plateaus a gradient step cannot leave, then polished again.

    A mapping engine's time is flat in a knob wherever the chosen tiling is bound by something
    no knob sets (the shared SRAM feeding the cores), so the polish can stop on a plateau with
    a zero gradient short of the optimum. Each round steps every efficiency knob's log by
    :data:`_SCAN_STEPS` and polishes from the best point that lowers the cost; it stops when
    none does (at once on a roofline, whose polish already fits exactly)."""
    lo, hi = solve["bounds"]
    best_cost = _robust_cost(residuals(x), solve["f_scale"])
    for _ in range(_SCAN_ROUNDS):
        if best_cost < 1e-14:  # residuals of ~1e-7: fitted to rounding
            break
        found: tuple[float, np.ndarray] | None = None
        for j in range(n_eff):
            for step in _SCAN_STEPS:
                trial = x.copy()
                trial[j] = np.clip(trial[j] + step, lo[j], hi[j])
                cost = _robust_cost(residuals(trial), solve["f_scale"])
                if cost < best_cost * (1 - 1e-6) and (found is None or cost < found[0]):
                    found = (cost, trial)
        if found is None:
            break
        polished = least_squares(residuals, found[1], diff_step=1e-4, **solve)
        x, best_cost = ((polished.x, float(polished.cost)) if polished.cost <= found[0]
                        else (found[1], found[0]))
    return x


def _back_to_chip(
    residuals: Callable[[np.ndarray], np.ndarray], x: np.ndarray, prior: np.ndarray,
    solve: dict[str, Any],
) -> np.ndarray:
    """``x`` with every efficiency knob the fit does not need back at the chip's value
    (``prior``, in log): a knob on a plateau of the cost (no row binds on it there) can stop
    anywhere the optimizer's path left it, and then reads as fitted when a 10% change makes
    some row bind; at equal cost the chip's own value is the answer."""
    cost = _robust_cost(residuals(x), solve["f_scale"])
    for j in range(len(prior)):
        if x[j] == prior[j]:
            continue
        trial = x.copy()
        trial[j] = prior[j]
        trial_cost = _robust_cost(residuals(trial), solve["f_scale"])
        if trial_cost <= cost * (1 + 1e-9) + 1e-18:
            x, cost = trial, trial_cost
    return x


def _determined(
    kernels: Sequence[KernelBase], chip: Chip, engine: str, values: dict[str, float]
) -> list[str]:
    """The knobs whose 10% change moves some row's prediction by more than 1%."""
    base = np.array([p.time_s for p in predict(kernels, with_knobs(chip, values), engine)])
    out = []
    for knob, value in values.items():
        if knob == OVERHEAD_KNOB:
            moved = {knob: value + 0.1 * float(base.min())}
        else:
            moved = {knob: value * 0.9}
        probe = np.array(
            [p.time_s for p in predict(kernels, with_knobs(chip, {**values, **moved}), engine)]
        )
        if np.max(np.abs(probe / base - 1)) > _SENSITIVITY:
            out.append(knob)
    return out


def split(
    kernels: Sequence[KernelBase], holdout_frac: float, seed: int
) -> tuple[list[int], list[int]]:
    """Indices of the calibration and held-out rows: within each (kind, dtype) stratum a seeded
    shuffle holds out ``round(holdout_frac · size)`` rows, keeping at least one for calibration.

    Raises:
        InfersimError: ``holdout_frac`` outside [0, 1).
    """
    if not 0 <= holdout_frac < 1:
        raise InfersimError(f"holdout_frac(={holdout_frac}) must be >= 0 and < 1")
    strata: dict[tuple[str, str], list[int]] = {}
    for i, kernel in enumerate(kernels):
        strata.setdefault((kernel.kind, kernel.dtype), []).append(i)
    rng = np.random.default_rng(seed)
    calibration, holdout = [], []
    for key in sorted(strata):
        members = [int(i) for i in rng.permutation(strata[key])]
        n_hold = min(len(members) - 1, math.floor(holdout_frac * len(members) + 0.5))
        holdout += members[:n_hold]
        calibration += members[n_hold:]
    return sorted(calibration), sorted(holdout)


def calibrate(
    rows: Sequence[Measured],
    chip: Chip,
    engine: str = DEFAULT_ENGINE,
    holdout_frac: float = 0.3,
    seed: int = 0,
) -> CalibrationReport:
    """Split, fit on the calibration rows only, and report errors before and after.

    Raises:
        InfersimError: bad ``holdout_frac``, no rows, or a chip that cannot run a kernel.
    """
    if not rows:
        raise InfersimError("no measurements to calibrate with")
    kernels = [r.kernel for r in rows]
    meas = np.array([r.measured_s for r in rows])
    cal_idx, hold_idx = split(kernels, holdout_frac, seed)
    result = fit([kernels[i] for i in cal_idx], meas[cal_idx].tolist(), chip, engine, seed=seed)
    before = np.array([p.time_s for p in predict(kernels, chip, engine)])
    after = np.array([p.time_s for p in predict(kernels, result.chip, engine)])
    err_before, err_after = errors(before, meas), errors(after, meas)
    held = set(hold_idx)

    def part(err: np.ndarray, idx: list[int]) -> dict[str, Any]:
        return summarize(err[idx])

    hold_after = part(err_after, hold_idx)
    detail = [
        {
            "label": r.kernel.label,
            "split": "holdout" if i in held else "calibration",
            "measured_s": r.measured_s,
            "predicted_before_s": float(before[i]),
            "predicted_after_s": float(after[i]),
            "error_before": float(err_before[i]),
            "error_after": float(err_after[i]),
        }
        for i, r in enumerate(rows)
    ]
    return CalibrationReport(
        calibration_mape_before=part(err_before, cal_idx)["mape"],
        calibration_mape_after=part(err_after, cal_idx)["mape"],
        holdout_mape_before=part(err_before, hold_idx)["mape"],
        holdout_mape_after=hold_after["mape"],
        holdout_max_error=hold_after["max_error"],
        calibration_max_error=part(err_after, cal_idx)["max_error"],
        n_calibration=len(cal_idx),
        n_holdout=len(hold_idx),
        fit=result,
        rows=detail,
    )


def calibrated_chip(chip: Chip, report: CalibrationReport, device: str = "") -> Chip:
    """The fitted chip renamed ``<name>-calibrated`` with the fit recorded in ``description``."""
    name = chip.name if chip.name.endswith("-calibrated") else f"{chip.name}-calibrated"[:64]
    hold = report.holdout_mape_after
    where = f" on {device}" if device else ""
    note = (
        f"{chip.name} calibrated{where} {dt.date.today().isoformat()} by infersim calibrate: "
        f"{report.n_calibration} calibration / {report.n_holdout} held-out kernels, "
        f"calibration MAPE {report.calibration_mape_before:.1%} -> "
        f"{report.calibration_mape_after:.1%}"
        + (
            f", held-out MAPE {report.holdout_mape_before:.1%} -> {hold:.1%}"
            if hold is not None
            else ""
        )
    )
    return report.fit.chip.with_(name=name, description=note)


def write_chip_yaml(chip: Chip, path: Path) -> None:
    """Write ``chip`` as YAML that :func:`infersim.arch_models.load_chip` reads back.

    Raises:
        ConfigError: the file cannot be written.
    """
    text = yaml.safe_dump(chip.model_dump(mode="json"), sort_keys=False, width=100)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write ({exc.strerror or exc})") from None
