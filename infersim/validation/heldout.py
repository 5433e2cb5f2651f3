"""Held-out error of a fit (:mod:`infersim.validation.fitting`): k-fold cross-validation over
whole rows, or group splits by chip, model or dtype. Every split fits on the other rows only and
predicts its held-out rows; the report gives the fit's own error on all rows, per class of rows
(kernel kind and dtype, or model phase and dtype), and the held-out error before and after.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from infersim.errors import InfersimError
from infersim.simulator.defaults import DEFAULT_ENGINE
from infersim.validation.calibrate import with_knobs
from infersim.validation.fitting import (
    CLASS_MAPE_LIMIT,
    POLISH_EVALS,
    FitResult,
    Problem,
    fit_knobs,
    predict_targets,
)

HOLDOUT_KEYS = ("chip", "model", "dtype")


def _errors(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    return (pred - meas) / meas


def _mape(err: np.ndarray) -> float | None:
    return float(np.mean(np.abs(err))) if err.size else None


def folds_of(problem: Problem, folds: int, holdout_by: str | None, seed: int) -> list[list[int]]:
    """Held-out target indices per split: the targets of each value of ``holdout_by`` (chip,
    model or dtype), or ``folds`` seeded folds of whole rows (every metric of a row together).

    Raises:
        InfersimError: an unknown key, fewer than 2 folds or groups, more folds than rows.
    """
    targets = problem.targets
    if holdout_by is not None:
        if holdout_by not in HOLDOUT_KEYS:
            raise InfersimError(f"--holdout-by {holdout_by!r}: allowed: {', '.join(HOLDOUT_KEYS)}")
        values = sorted({getattr(t, holdout_by) for t in targets})
        if len(values) < 2:
            raise InfersimError(
                f"--holdout-by {holdout_by}: the rows have one {holdout_by} "
                f"({values[0]!r}); a group split needs two or more"
            )
        return [[i for i, t in enumerate(targets) if getattr(t, holdout_by) == v] for v in values]
    rows = sorted({t.row for t in targets})
    if not 2 <= folds <= len(rows):
        raise InfersimError(f"--folds {folds}: must be >= 2 and <= the {len(rows)} rows")
    order = [rows[i] for i in np.random.default_rng(seed).permutation(len(rows))]
    fold_of = {r: k % folds for k, r in enumerate(order)}
    return [[i for i, t in enumerate(targets) if fold_of[t.row] == k] for k in range(folds)]


def _by(err_before: np.ndarray, err_after: np.ndarray, keys: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in sorted(set(keys)):
        idx = [i for i, k in enumerate(keys) if k == key]
        out[key] = {
            "n": len(idx),
            "mape_before": _mape(err_before[idx]),
            "mape_after": _mape(err_after[idx]),
        }
    return out


def calibrate_problem(
    problem: Problem,
    knobs: Sequence[str] | None = None,
    shared: bool = True,
    engine: str = DEFAULT_ENGINE,
    folds: int = 0,
    holdout_by: str | None = None,
    seed: int = 0,
    polish_evals: int = POLISH_EVALS,
) -> tuple[FitResult, dict[str, Any]]:
    """Fit on every row, and estimate the held-out error by ``holdout_by`` groups or ``folds``
    (neither: no held-out estimate): each split's held-out rows never reach its fit. Returns
    the fit on all rows and the report (fractions; see ``docs/measurements.md``). The report
    is ``good`` only when no knob is at a bound the rows push it to, every class of rows has
    a fitted MAPE ≤ :data:`CLASS_MAPE_LIMIT`, and so has every held-out group.

    Raises:
        InfersimError: as :func:`fit_knobs` and :func:`folds_of`; a chip split of a per-chip fit.
    """
    meas = np.array([t.measured_s for t in problem.targets])
    before = predict_targets(problem, problem.chips, engine)
    result = fit_knobs(problem, knobs, shared, engine, seed, polish_evals)
    after = predict_targets(problem, result.chips, engine)
    eb, ea = _errors(before, meas), _errors(after, meas)
    fitted_knobs = [k.knob for k in next(iter(result.groups.values()))]
    by_class = _by(eb, ea, [t.cls for t in problem.targets])
    unexplained = [c for c, v in by_class.items() if (v["mape_after"] or 0) > CLASS_MAPE_LIMIT]
    warnings = list(result.warnings)
    warnings += [
        f"rows of class {c!r} are unexplained: fitted MAPE "
        f"{by_class[c]['mape_after']:.1%} > {CLASS_MAPE_LIMIT:.0%}"
        for c in unexplained
    ]
    report: dict[str, Any] = {
        "mode": "shared" if shared else "per-chip",
        "engine": engine,
        "chips": sorted({t.chip for t in problem.targets}),
        "n_rows": len({t.row for t in problem.targets}),
        "n_targets": len(problem.targets),
        "knobs": {g: [k.to_dict() for k in ks] for g, ks in result.groups.items()},
        "fit": {
            "mape_before": _mape(eb),
            "mape_after": _mape(ea),
            "max_error": float(np.max(np.abs(ea))),
            "by_class": by_class,
            "polished_with_engine": result.polished,
        },
        "holdout": None,
        "warnings": warnings,
        "good": not unexplained
        and not any(k.at_bound for ks in result.groups.values() for k in ks),
    }
    hb = np.full(len(meas), np.nan)
    ha = np.full(len(meas), np.nan)
    if folds or holdout_by:
        if holdout_by == "chip" and not shared:
            raise InfersimError(
                "--holdout-by chip needs --shared: a per-chip fit has no knobs "
                "for a chip it did not see"
            )
        splits = folds_of(problem, folds, holdout_by, seed)
        for held in splits:
            keep = sorted(set(range(len(meas))) - set(held))
            sub = problem.subset(keep)
            names = {t.chip for t in sub.targets}
            if not shared and any(problem.targets[i].chip not in names for i in held):
                raise InfersimError(
                    "a fold holds out every row of a chip; a per-chip fit needs "
                    "rows of each chip in every fold: use fewer --folds"
                )
            fold_fit = fit_knobs(sub, fitted_knobs, shared, engine, seed, polish_evals)
            chips = {**problem.chips, **fold_fit.chips}
            if shared:  # a chip the fold did not see takes the shared knobs
                values = next(iter(fold_fit.groups.values()))
                chips = {
                    n: fold_fit.chips[n]
                    if n in fold_fit.chips
                    else with_knobs(c, {k.knob: k.value for k in values})
                    for n, c in problem.chips.items()
                }
            held_problem = problem.subset(held)
            ha[held] = predict_targets(held_problem, chips, engine)
            hb[held] = before[held]
        herr_b, herr_a = _errors(hb, meas), _errors(ha, meas)
        group_keys = [
            getattr(t, holdout_by) if holdout_by else f"fold {k}"
            for t in problem.targets
            for k in [0]
        ]
        if not holdout_by:
            fold_of = {i: k for k, held in enumerate(splits) for i in held}
            group_keys = [f"fold {fold_of[i]}" for i in range(len(meas))]
        report["holdout"] = {
            "method": f"by {holdout_by}" if holdout_by else f"{folds}-fold",
            "mape_before": _mape(herr_b),
            "mape_after": _mape(herr_a),
            "max_error": float(np.max(np.abs(herr_a))),
            "by_group": _by(herr_b, herr_a, group_keys),
            "by_class": _by(herr_b, herr_a, [t.cls for t in problem.targets]),
        }
        missed = {
            g: v["mape_after"]
            for g, v in report["holdout"]["by_group"].items()
            if (v["mape_after"] or 0) > CLASS_MAPE_LIMIT
        }
        for g, mape in missed.items():
            report["warnings"].append(
                f"held-out {g} is mispredicted: MAPE {mape:.1%} > "
                f"{CLASS_MAPE_LIMIT:.0%} (the fit does not carry over)"
            )
        report["good"] = report["good"] and not missed
    report["rows"] = [
        {
            "row": t.row,
            "label": t.label,
            "metric": t.metric,
            "chip": t.chip,
            "class": t.cls,
            "measured_s": t.measured_s,
            "predicted_before_s": float(before[i]),
            "predicted_after_s": float(after[i]),
            "error_after": float(ea[i]),
            "holdout_predicted_s": None if math.isnan(ha[i]) else float(ha[i]),
        }
        for i, t in enumerate(problem.targets)
    ]
    return result, report
