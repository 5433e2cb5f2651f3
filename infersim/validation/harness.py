"""Predict, measure, compare: the validation run.

For a chip, an engine and a list of kernels, :func:`predict` costs each kernel's infersim
operators with :func:`~infersim.simulator.inference.cost_ops`; :func:`run_suite` measures the
kernels with a backend and reports, per kernel, predicted vs measured time, the signed relative
error (predicted − measured) / measured and the bound; over all kernels, MAPE and max error.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from infersim.arch_models.chip import Chip
from infersim.errors import InfersimError
from infersim.simulator.defaults import DEFAULT_ENGINE
from infersim.simulator.inference import cost_ops
from infersim.validation.backends import Backend, CpuBackend, Progress
from infersim.validation.records import RESULTS_SCHEMA
from infersim.validation.suite import KernelBase, Suite


@dataclass(frozen=True, slots=True)
class Prediction:
    """A kernel's predicted time (seconds, all launches), the bound of its longest launch, and
    its FLOPs and DRAM bytes as the engine counts them."""

    time_s: float
    bound: str
    flops: float
    dram_bytes: float


def predict(
    kernels: Sequence[KernelBase], chip: Chip, engine: str = DEFAULT_ENGINE
) -> list[Prediction]:
    """One :class:`Prediction` per kernel (one ``cost_ops`` call for all of them).

    Raises:
        UnsupportedDtypeError: the chip cannot compute a kernel's dtype.
        InfersimError: unknown engine.
    """
    ops_per_kernel = [k.ops() for k in kernels]
    costs = cost_ops([op for ops in ops_per_kernel for op in ops], chip, engine)
    out = []
    start = 0
    for ops in ops_per_kernel:
        mine = costs[start : start + len(ops)]
        start += len(ops)
        longest = max(mine, key=lambda c: c.total_time_s)
        out.append(
            Prediction(
                time_s=sum(c.total_time_s for c in mine),
                bound=longest.bound,
                flops=sum(c.flops * c.count for c in mine),
                dram_bytes=sum(c.dram_bytes * c.count for c in mine),
            )
        )
    return out


def errors(
    predicted_s: Sequence[float] | np.ndarray, measured_s: Sequence[float] | np.ndarray
) -> np.ndarray:
    """Signed relative errors (predicted − measured) / measured."""
    p = np.asarray(predicted_s, dtype=float)
    m = np.asarray(measured_s, dtype=float)
    return (p - m) / m


def summarize(errs: Sequence[float] | np.ndarray) -> dict[str, float | int | None]:
    """``{"n", "mape", "max_error"}`` of signed relative errors (fractions; None when empty)."""
    arr = np.abs(np.asarray(errs, dtype=float))
    if arr.size == 0:
        return {"n": 0, "mape": None, "max_error": None}
    return {"n": int(arr.size), "mape": float(arr.mean()), "max_error": float(arr.max())}


def run_suite(
    backend: Backend,
    suite: Suite,
    chip: Chip | None,
    engine: str = DEFAULT_ENGINE,
    progress: Progress | None = None,
    host_chip: bool = False,
) -> dict[str, Any]:
    """Measure (and/or check) ``suite`` on ``backend`` and compare with ``chip``'s predictions.

    With ``host_chip`` (cpu backend only) the ``host-cpu`` chip is measured in the same rounds
    as the kernels and predicts them; ``chip`` is then ignored. On the cpu backend a suite with
    a ``budget_s`` is first sized to the backend's budget on this host
    (:meth:`~infersim.validation.backends.CpuBackend.plan`): shapes may shrink, rounds drop.

    Returns the results document (JSON-ready): ``schema``, ``backend``, ``device``, ``suite``,
    ``engine``, ``chip`` (full description, so ``infersim calibrate`` can refit it), ``wall_s``,
    ``summary`` (n, mape, max_error, checks passed/failed, skipped), ``rows``, ``skipped``
    (label, dtype and reason of each kernel the backend does not run: on the cpu backend, the
    kernels of a dtype the host only emulates) and ``sizing`` (None, or the budget, estimated
    seconds, rounds, the kernels resized and dropped to fit it, and the probe's figures).
    ``chip`` may be None for a backend that does not time (interpret); rows then carry checks
    only.

    Raises:
        InfersimError: what the backend or the engine raise for bad input, or ``host_chip``
            with a backend that is not cpu.
    """
    start = time.perf_counter()
    reasons = backend.skips(suite.kernels) if isinstance(backend, CpuBackend) else {}
    skipped = [
        {"label": k.label, "dtype": k.dtype, "reason": reasons[k.label]}
        for k in suite.kernels
        if k.label in reasons
    ]
    kernels: list[KernelBase] = [k for k in suite.kernels if k.label not in reasons]
    if not kernels:
        raise InfersimError(
            f"every kernel of suite {suite.name!r} was skipped: "
            + "; ".join(sorted({row["reason"] for row in skipped}))
        )
    if host_chip and not isinstance(backend, CpuBackend):
        raise InfersimError(f"the host-cpu chip predicts the cpu backend only, not {backend.name}")
    sizing: dict[str, Any] | None = None
    rounds = None
    if isinstance(backend, CpuBackend) and suite.budget_s is not None:
        plan = backend.plan(kernels, with_probes=host_chip)
        kernels, rounds = plan.kernels, plan.rounds
        speed = backend.speed()
        sizing = {
            "budget_s": backend.budget_s, "estimated_s": plan.estimated_s,
            "rounds": plan.rounds, "resized": plan.resized, "dropped": plan.dropped,
            "probe": {"flops_per_s": speed.flops_per_s, "read_bytes_per_s": speed.dram_bytes_per_s},
        }  # fmt: skip
    if isinstance(backend, CpuBackend) and host_chip:
        outcomes, chip = backend.run_with_host_chip(kernels, progress, rounds)
    else:
        if chip is not None:
            predict(kernels, chip, engine)  # fail on an unsupported dtype before timing
        if isinstance(backend, CpuBackend):
            outcomes = backend.run(kernels, progress, rounds)
        else:
            outcomes = backend.run(kernels, progress)
    predictions = predict(kernels, chip, engine) if chip is not None else None
    rows: list[dict[str, Any]] = []
    for i, (kernel, outcome) in enumerate(zip(kernels, outcomes, strict=True)):
        row: dict[str, Any] = {"label": kernel.label, "kind": kernel.kind, "dtype": kernel.dtype}
        row["kernel"] = kernel.model_dump()
        meas = outcome.measurement
        if meas is not None:
            row.update(
                measured_s=meas.measured_s, median_s=meas.median_s, min_s=meas.min_s,
                spread=meas.spread, reps=meas.reps, statistic=meas.statistic,
            )  # fmt: skip
        if predictions is not None:
            pred = predictions[i]
            row.update(
                predicted_s=pred.time_s,
                bound=pred.bound,
                flops=pred.flops,
                dram_bytes=pred.dram_bytes,
            )
            if meas is not None:
                row["error"] = (pred.time_s - meas.measured_s) / meas.measured_s
        if outcome.check is not None:
            row.update(
                check_error=outcome.check.max_error,
                check_tolerance=outcome.check.tolerance,
                passed=outcome.check.passed,
            )
        rows.append(row)
    summary: dict[str, Any] = summarize([r["error"] for r in rows if "error" in r])
    checked = [r for r in rows if "passed" in r]
    if checked:
        summary["checks_passed"] = sum(r["passed"] for r in checked)
        summary["checks_failed"] = len(checked) - summary["checks_passed"]
    summary["skipped"] = len(skipped)
    return {
        "schema": RESULTS_SCHEMA,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "backend": backend.name,
        "device": backend.device().to_dict(),
        "suite": suite.name,
        "engine": engine,
        "chip": chip.model_dump(mode="json") if chip is not None else None,
        "wall_s": time.perf_counter() - start,
        "summary": summary,
        "rows": rows,
        "skipped": skipped,
        "sizing": sizing,
    }
