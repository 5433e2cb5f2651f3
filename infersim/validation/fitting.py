"""Fit calibration knobs to any mix of kernel and model rows, on one chip or several at once.

A row becomes a *target*: seconds that a weighted sum of *units* should take. A unit is what
the engine costs: a kernel's operators, or one step (prefill, or a decode step at the row's
mean context) of a model through :func:`infersim.simulate`. A model row's metrics map onto
steps (:func:`model_targets`): TTFT is the prefill; TPOT and ITL one decode step; the latency
of an end-to-end run is the prefill plus ``output_len - 1`` decode steps; a rate (tokens/s,
requests/s) is its tokens (requests) over that time, so it is fitted as that time. Offline rows
run in waves of ``max_batch`` sequences. A serving row's TTFT, TPOT, ITL, latency and
requests/s or output tokens/s are predicted by the serving simulator (continuous batching at the
row's request rate, at most ``max_concurrency`` in flight, :data:`SERVING_REQUESTS` requests):
its steps without queueing (at batch ``max_concurrency`` or ``batch``) only start the fit, and
the engine polish and every reported prediction use the simulation.

:func:`fit_knobs` minimizes the robust (soft-L1, :data:`F_SCALE`) norm of log(predicted /
measured) plus a weak prior (:data:`PRIOR_WEIGHT` per knob) toward the chip preset's values.
As in :func:`infersim.validation.calibrate.fit`, it probes the engine once per knob and chip
(each operator's time with one knob tiny is that knob's term), fits the surrogate
latency + max(term / knob) + launches · overhead from several starts, and then polishes with the
engine itself for at most :data:`POLISH_EVALS` evaluations where the surrogate and the engine
disagree. ``shared`` fits one knob set for every chip (each keeps its own hardware fields).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from infersim import dtypes
from infersim.arch_models.chip import Chip
from infersim.errors import InfersimError
from infersim.simulator.defaults import DEFAULT_ENGINE
from infersim.simulator.inference import cost_ops, simulate
from infersim.validation.calibrate import (
    COMPUTE_KNOB,
    DRAM_KNOB,
    MAX_OVERHEAD_S,
    MIN_EFFICIENCY,
    OVERHEAD_KNOB,
    VECTOR_KNOB,
    knob_value,
    with_knobs,
)
from infersim.validation.records import Measured
from infersim.validation.schema import ModelRecord
from infersim.workloads.ops import OpBase
from infersim.workloads.scenario import Precision, Scenario

L2_KNOB = "shared_sram_bandwidth_efficiency"
ATTENTION_KNOB = "attention_efficiency"
LINK_KNOB = "link_efficiency"
GENERIC_COMPUTE_KNOB = "compute_efficiency"
EFFICIENCY_KNOBS = (
    DRAM_KNOB,
    GENERIC_COMPUTE_KNOB,
    L2_KNOB,
    VECTOR_KNOB,
    ATTENTION_KNOB,
    LINK_KNOB,
)
"""Efficiency knobs (plus ``compute_efficiency_by_dtype.<class>`` and the overhead)."""

PRIOR_WEIGHT = 0.02
"""Weight of each knob's prior residual: ``PRIOR_WEIGHT · log(knob / preset value)`` (for the
overhead, its change over 10 µs). A knob twice the preset's value costs what a 1.4% row error
does: enough to pin a knob no row sees, too little to bias one the rows determine."""
F_SCALE = 0.05
"""Soft-L1 scale of the log residuals: rows off by more than ~5% count less than squared."""
POLISH_EVALS = 30
"""Most engine evaluations of the polish (the surrogate fit takes the rest)."""
_PROBE = 1e-4
_MIN_SHARE = 0.01
"""A knob is fitted by default when its term is ≥ 1% of some row's ideal time (it binds
when its efficiency is low enough)."""
AT_BOUND_REL = 0.01
"""A knob within 1% of a bound is reported as at the bound."""
UNCERTAIN_RSE = 0.5
"""A knob whose relative standard error exceeds 50% is reported as not identifiable."""
CLASS_MAPE_LIMIT = 0.25
"""A fit is not called good while some class of rows has a MAPE above 25%."""
_OVERHEAD_PRIOR_S = 1e-5


@dataclass(frozen=True)
class Unit:
    """What the engine costs once: a kernel's ``ops``, or a model ``step`` (model, scenario,
    techniques) through :func:`infersim.simulate`, on chip ``chip``."""

    chip: str
    ops: tuple[OpBase, ...] = ()
    step: tuple[Any, Scenario, str] | None = None


@dataclass(frozen=True)
class Target:
    """One residual: ``measured_s`` seconds that ``sum(w · unit time)`` over ``terms`` should
    take; ``label``, ``metric`` and the grouping keys (chip, model, dtype, cls) for reports."""

    label: str
    metric: str
    measured_s: float
    terms: tuple[tuple[int, float], ...]
    chip: str
    model: str
    dtype: str
    cls: str
    row: int
    serving: ServingRun | None = None
    """A serving row's metric: predicted by the serving simulator (the ``terms``, its steps
    without queueing, only start the fit)."""


SERVING_REQUESTS = 400
"""Most requests a serving row's simulation runs (the first of the measured run's)."""


@dataclass(frozen=True)
class ServingRun:
    """What the serving simulator runs for a serving row, and which figure of its summary
    the row's metric is: ``key`` (``ttft_s``, ``tpot_s``, ``e2e_s``, or a throughput),
    ``stat`` (``p50`` or ``mean``), and for a rate the ``count`` the measured seconds are of."""

    model: Any
    precision: Precision
    techniques: str
    rate_per_s: float
    requests: int
    prompt_len: int
    output_len: int
    max_concurrency: int | None
    key: str
    stat: str
    count: float | None = None

    def seconds(self, chip: Chip, engine: str) -> float:
        """The predicted seconds this target compares with its measurement."""
        summary = _serve(self, chip, engine)
        value = summary[self.key]
        value = float(value[self.stat] if isinstance(value, dict) else value)
        return value if self.count is None else self.count / value


_SERVED: dict[tuple[Any, ...], dict[str, Any]] = {}


def _serve(run: ServingRun, chip: Chip, engine: str) -> dict[str, Any]:
    """The serving simulator's summary of ``run`` on ``chip`` (memoized per chip and run)."""
    from infersim.simulator.serving import (
        ContinuousBatching,
        ServingConfig,
        Workload,
        simulate_serving,
    )
    from infersim.simulator.serving.workload import parse_arrivals, parse_length

    key = (chip.key, engine, run.model.name, run.precision, run.techniques, run.rate_per_s,
           run.requests, run.prompt_len, run.output_len, run.max_concurrency)  # fmt: skip
    found = _SERVED.get(key)
    if found is None:
        arrivals = ("burst" if math.isinf(run.rate_per_s)
                    else f"poisson:{run.rate_per_s:.12g}")  # fmt: skip
        workload = Workload(arrivals=parse_arrivals(arrivals), requests=run.requests,
                            prompt_len=parse_length(str(run.prompt_len)),
                            output_len=parse_length(str(run.output_len)))  # fmt: skip
        scheduler = (ContinuousBatching(max_batch_size=run.max_concurrency)
                     if run.max_concurrency else ContinuousBatching())  # fmt: skip
        result = simulate_serving(chip, run.model, ServingConfig(workload=workload,
                                                             scheduler=scheduler),
                                  run.techniques or None, engine)  # fmt: skip
        found = dict(result.summary)
        if len(_SERVED) > 256:
            _SERVED.clear()
        _SERVED[key] = found
    return found


@dataclass
class Problem:
    """Targets over units, and the chips by name."""

    chips: dict[str, Chip]
    units: list[Unit] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    _keys: dict[Any, int] = field(default_factory=dict)
    n_kernel_rows: int = 0

    def unit(self, unit: Unit, key: Any) -> int:
        """The index of ``unit`` (one per ``key``: equal steps are costed once)."""
        if key not in self._keys:
            self._keys[key] = len(self.units)
            self.units.append(unit)
        return self._keys[key]

    def subset(self, idx: Sequence[int]) -> Problem:
        """The same units with only the targets ``idx``."""
        targets = [self.targets[i] for i in idx]
        return Problem(self.chips, self.units, targets, self._keys, self.n_kernel_rows)


def _model_precision(rec: ModelRecord) -> Precision:
    given = {"weights": rec.weights_dtype, "act": rec.act_dtype, "kv": rec.kv_dtype}
    return Precision(**{k: v for k, v in given.items() if v is not None})


_SERVED_METRICS: dict[str, tuple[str, bool]] = {
    "ttft_s": ("ttft_s", False),
    "tpot_s": ("tpot_s", False),
    "itl_s": ("tpot_s", False),
    "latency_s": ("e2e_s", False),
    "requests_per_s": ("throughput_requests_per_s", True),
    "output_tokens_per_s": ("throughput_tokens_per_s", True),
}
"""A serving row's metric → (the serving summary's figure, whether it is a rate)."""


def _with_parallelism(rec: ModelRecord) -> str:
    """The row's technique stack with its tensor and pipeline parallelism (``tp=N``,
    ``pp=S``) added where the stack does not already say them."""
    parts = [t for t in rec.techniques.split("+") if t]
    for key, n in (("tp", rec.tensor_parallel), ("pp", rec.pipeline_parallel)):
        if n > 1 and not any(t.startswith(f"{key}=") for t in parts):
            parts.append(f"{key}={n}")
    return "+".join(parts)


def model_targets(problem: Problem, rec: ModelRecord, chip: str, row: int) -> None:
    """Add ``rec``'s metrics as targets (see the module doc).

    Raises:
        ConfigError: an unknown model.
    """
    from infersim.workloads import load_model

    try:
        model = load_model(rec.model)
    except InfersimError as exc:
        raise type(exc)(
            f"model row {row - problem.n_kernel_rows}: {exc} (name a model "
            "preset or config.json in the model column)"
        ) from None
    precision = _model_precision(rec)
    batch = rec.batch
    waves = 1
    if rec.scenario == "offline" and rec.num_requests:
        batch = min(rec.num_requests, rec.max_batch or rec.num_requests)
        waves = math.ceil(rec.num_requests / batch)
    elif rec.scenario == "serving":
        batch = rec.max_concurrency or rec.batch
    requests = batch * waves
    tech = _with_parallelism(rec)

    def step(phase: str, context: int) -> int:
        sc = Scenario(
            phase=phase,
            batch=batch,
            prompt_len=max(rec.prompt_len, 1),  # type: ignore[arg-type]
            context_len=context,
            precision=precision,
        )
        key = (chip, rec.model, tech, sc)
        return problem.unit(Unit(chip, step=(model, sc, tech)), key)

    cached = rec.context_len + (rec.prompt_len if rec.phase != "decode" else 0)
    n_dec = rec.output_len - 1 if rec.phase == "end-to-end" else rec.output_len
    decode_ctx = cached + (rec.prompt_len if rec.phase == "decode" and not rec.context_len else 0)
    pre = step("prefill", 0) if rec.phase != "decode" else None
    dec = step("decode", decode_ctx + max(n_dec - 1, 0) // 2) if rec.phase != "prefill" else None
    run: list[tuple[int, float]] = []
    if pre is not None:
        run.append((pre, float(waves)))
    if dec is not None and n_dec > 0:
        run.append((dec, float(waves * n_dec)))
    prompt_tokens = requests * rec.prompt_len
    out_tokens = requests * rec.output_len
    total = (prompt_tokens if pre is not None else 0) + (out_tokens if dec is not None else 0)
    whole = tuple(run)
    # metric -> (the steps it times, the count it is a rate of; None: it is seconds)
    how: dict[str, tuple[tuple[tuple[int, float], ...], float | None]] = {
        "ttft_s": (((pre or 0, 1.0),), None),
        "tpot_s": (((dec or 0, 1.0),), None),
        "itl_s": (((dec or 0, 1.0),), None),
        "latency_s": (whole, None),
        # an end-to-end run's prompt tokens/s: the prefill alone
        "prompt_tokens_per_s": (
            whole if rec.phase == "prefill" else ((pre or 0, float(waves)),),
            prompt_tokens,
        ),
        "output_tokens_per_s": (whole, out_tokens),
        "total_tokens_per_s": (whole, total),
        "requests_per_s": (whole, requests),
    }
    dtype = rec.weights_dtype or rec.act_dtype or "default"
    cls = f"model {rec.phase} {dtype}"
    for metric, stat in rec.metrics().items():
        terms, count = how[metric]
        seconds = stat.central if count is None else count / stat.central
        serving = None
        if rec.scenario == "serving" and metric in _SERVED_METRICS and rec.request_rate_per_s:
            key, is_rate = _SERVED_METRICS[metric]
            median = stat.median is not None or "p50" in stat.percentiles
            n = min(rec.num_requests or SERVING_REQUESTS, SERVING_REQUESTS)
            serving = ServingRun(
                model, precision, tech, float(rec.request_rate_per_s), n,
                max(rec.prompt_len, 1), max(rec.output_len, 1), rec.max_concurrency, key,
                "p50" if median and not is_rate else "mean",
                float(count) if is_rate and count is not None else None,  # as the measurement
            )  # fmt: skip
        problem.targets.append(Target(
            rec.label, metric, float(seconds), terms, chip, rec.model, dtype, cls, row, serving
        ))


def kernel_target(problem: Problem, m: Measured, chip: str, row: int) -> None:
    """Add a kernel row as a target of one unit (its operators)."""
    kernel = m.kernel
    idx = problem.unit(Unit(chip, ops=tuple(kernel.ops())), (chip, kernel.label, id(kernel)))
    problem.targets.append(
        Target(
            kernel.label,
            "measured_s",
            m.measured_s,
            ((idx, 1.0),),
            chip,
            "",
            kernel.dtype,
            f"{kernel.kind} {kernel.dtype}",
            row,
        )
    )


def build_problem(
    kernel_rows: Sequence[Measured],
    model_rows: Sequence[ModelRecord],
    chips: dict[str, Chip],
    default_chip: str | None = None,
) -> Problem:
    """The targets of all rows. A model row's own ``chip`` wins; a row without one (and every
    kernel row, unless its ``device`` names one of ``chips``) goes to ``default_chip``.

    Raises:
        InfersimError: a row names a chip not in ``chips``, or needs one and none is given.
    """
    problem = Problem(dict(chips), n_kernel_rows=len(kernel_rows))
    names = ", ".join(chips)

    def where(name: str, row: int, what: str) -> str:
        if name:
            if name not in chips:
                raise InfersimError(
                    f"{what} row {row}: chip {name!r} is not among the chips "
                    f"asked for ({names}); add it to --chip"
                )
            return name
        if default_chip is None:
            raise InfersimError(
                f"{what} row {row}: names no chip and several chips are asked "
                f"for ({names}); give the row a chip column"
            )
        return default_chip

    for i, m in enumerate(kernel_rows, start=1):
        kernel_target(problem, m, where(m.device if m.device in chips else "", i, "kernel"), i)
    for i, rec in enumerate(model_rows, start=1):
        model_targets(problem, rec, where(rec.chip, i, "model"), len(kernel_rows) + i)
    if not problem.targets:
        raise InfersimError("no measurements to calibrate with")
    return problem


def unit_op_times(unit: Unit, chip: Chip, engine: str) -> np.ndarray:
    """Seconds of each operator of ``unit`` on ``chip`` (counts included)."""
    if unit.step is None:
        return np.array([c.total_time_s for c in cost_ops(list(unit.ops), chip, engine)])
    model, scenario, tech = unit.step
    cost = simulate(chip, model, scenario, engine, tech or None, ways_out=False)
    return np.array([c.total_time_s for c in cost.ops])


def predict_targets(problem: Problem, chips: dict[str, Chip], engine: str) -> np.ndarray:
    """Each target's predicted seconds on ``chips`` (by name) through the engine."""
    used = sorted({u for t in problem.targets if t.serving is None for u, _ in t.terms})
    times = {
        u: float(unit_op_times(problem.units[u], chips[problem.units[u].chip], engine).sum())
        for u in used
    }
    return np.array([
        t.serving.seconds(chips[t.chip], engine) if t.serving is not None
        else sum(w * times[u] for u, w in t.terms)
        for t in problem.targets
    ])


def check_knobs(knobs: Sequence[str]) -> list[str]:
    """``knobs`` validated.

    Raises:
        InfersimError: an unknown knob or a per-dtype class that is not a MAC class.
    """
    out = []
    for knob in knobs:
        if knob.startswith("compute_efficiency_by_dtype."):
            cls = knob.split(".", 1)[1]
            if cls not in dtypes.MAC_CLASSES:
                raise InfersimError(
                    f"knob {knob!r}: {cls!r} is not a MAC class; allowed: "
                    f"{', '.join(dtypes.MAC_CLASSES)}"
                )
        elif knob not in (*EFFICIENCY_KNOBS, OVERHEAD_KNOB):
            allowed = ", ".join((*EFFICIENCY_KNOBS, COMPUTE_KNOB.format("<class>"), OVERHEAD_KNOB))
            raise InfersimError(f"knob {knob!r} unknown; allowed: {allowed}")
        out.append(knob)
    return out


@dataclass
class _Probe:
    """Per unit: each operator's ideal time, term per knob and launches (on its own chip)."""

    ideal: list[np.ndarray]
    terms: list[np.ndarray]
    launches: list[np.ndarray]

    @property
    def fixed(self) -> list[np.ndarray]:
        """Per unit, each operator's time no knob scales (its latency): ideal − largest term."""
        return [
            np.maximum(i - (t.max(axis=1) if t.shape[1] else 0.0), 0.0)
            for i, t in zip(self.ideal, self.terms, strict=True)
        ]


def _probe(problem: Problem, effs: Sequence[str], engine: str) -> _Probe:
    ideal_chips = {
        n: with_knobs(c, {**dict.fromkeys(effs, 1.0), OVERHEAD_KNOB: 0.0})
        for n, c in problem.chips.items()
    }
    ideal, terms, launches = [], [], []
    for unit in problem.units:
        base = ideal_chips[unit.chip]
        t0 = unit_op_times(unit, base, engine)
        ideal.append(t0)
        cols = [unit_op_times(unit, with_knobs(base, {k: _PROBE}), engine) * _PROBE for k in effs]
        terms.append(np.stack(cols, axis=1) if cols else np.zeros((len(t0), 0)))
        ov = unit_op_times(unit, with_knobs(base, {OVERHEAD_KNOB: 1e-3}), engine)
        launches.append((ov - t0) / 1e-3)
    return _Probe(ideal, terms, launches)


def identifiable(problem: Problem, knobs: Sequence[str], engine: str) -> list[str]:
    """The knobs of ``knobs`` whose term is ≥ 1% of some target's ideal time (the overhead:
    whose launches take ≥ 1% at 1 µs each)."""
    effs = [k for k in knobs if k != OVERHEAD_KNOB]
    probe = _probe(problem, effs, engine)
    keep = set()
    for t in problem.targets:
        total = sum(w * probe.ideal[u].sum() for u, w in t.terms)
        if total <= 0:
            continue
        share = np.zeros(len(effs))
        launch_s = 0.0
        for u, w in t.terms:
            terms = probe.terms[u]
            share += w * terms.sum(axis=0)
            launch_s += w * float(probe.launches[u].sum()) * 1e-6
        keep |= {effs[j] for j in range(len(effs)) if share[j] >= _MIN_SHARE * total}
        if OVERHEAD_KNOB in knobs and launch_s >= _MIN_SHARE * total:
            keep.add(OVERHEAD_KNOB)
    return [k for k in knobs if k in keep]


@dataclass(frozen=True)
class KnobFit:
    """One fitted knob on one chip group: value, relative standard error, and warnings."""

    knob: str
    value: float
    preset: float
    rse: float | None
    at_bound: str | None
    identifiable: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "knob": self.knob,
            "value": self.value,
            "preset": self.preset,
            "rse": self.rse,
            "at_bound": self.at_bound,
            "identifiable": self.identifiable,
        }


@dataclass(frozen=True)
class FitResult:
    """Fitted chips by name, the knobs of each chip group, warnings, and the robust cost."""

    chips: dict[str, Chip]
    groups: dict[str, list[KnobFit]]
    warnings: list[str]
    cost: float
    polished: bool

    def knob_values(self, chip: str) -> dict[str, float]:
        """The fitted knobs of ``chip``."""
        group = chip if chip in self.groups else "shared"
        return {k.knob: k.value for k in self.groups[group]}


ALL_KNOBS: tuple[str, ...] = (
    DRAM_KNOB,
    *(COMPUTE_KNOB.format(c) for c in dtypes.MAC_CLASSES),
    L2_KNOB,
    VECTOR_KNOB,
    ATTENTION_KNOB,
    LINK_KNOB,
    OVERHEAD_KNOB,
)
"""Every knob a fit can adjust; the default is those of them :func:`identifiable` keeps."""


@dataclass
class _Objective:
    """The fit's residuals. Parameters: per group (one when shared, else one per chip) the log
    of each efficiency knob, then the overhead in seconds."""

    problem: Problem
    knobs: list[str]
    shared: bool
    engine: str
    prior_weight: float

    def __post_init__(self) -> None:
        targets = self.problem.targets
        self.effs = [k for k in self.knobs if k != OVERHEAD_KNOB]
        self.has_ov = OVERHEAD_KNOB in self.knobs
        self.chip_names = sorted({t.chip for t in targets})
        self.groups = ["shared"] if self.shared else self.chip_names
        self.gidx = {c: 0 if self.shared else self.groups.index(c) for c in self.chip_names}
        self.probe = _probe(self.problem, self.effs, self.engine)
        self.fixed = self.probe.fixed
        self.used_units = sorted({u for t in targets for u, _ in t.terms})
        self.meas = np.array([t.measured_s for t in targets])
        self.log_meas = np.log(self.meas)
        # Priors toward the presets (a shared group: its first chip's).
        self.ref = [
            self.problem.chips[self.chip_names[0] if self.shared else g] for g in self.groups
        ]
        ov = [OVERHEAD_KNOB] if self.has_ov else []
        self.knobs = [*self.effs, *ov]  # the parameters' order
        self.prior = np.array(
            [
                math.log(max(knob_value(c, k), MIN_EFFICIENCY))
                if k != OVERHEAD_KNOB
                else knob_value(c, k)
                for c in self.ref
                for k in [*self.effs, *ov]
            ]
        )
        is_ov = np.array([k == OVERHEAD_KNOB for k in [*self.effs, *ov]] * len(self.groups))
        self.is_ov = is_ov
        self.pscale = np.where(is_ov, _OVERHEAD_PRIOR_S, 1.0)
        launches = np.array(
            [sum(w * self.probe.launches[u].sum() for u, w in t.terms) for t in targets]
        )
        with np.errstate(divide="ignore"):
            per_launch = np.where(launches > 0, self.meas / np.maximum(launches, 1e-300), np.inf)
        # a fixed cost per launch cannot exceed the fastest measured launch
        self.max_ov = min(MAX_OVERHEAD_S, float(per_launch.min()))
        self.lo = np.where(is_ov, 0.0, math.log(MIN_EFFICIENCY))
        self.hi = np.where(is_ov, self.max_ov, 0.0)
        self.solve = {
            "bounds": (self.lo, self.hi),
            "x_scale": np.where(is_ov, 1e-6, 1.0),
            "loss": "soft_l1",
            "f_scale": F_SCALE,
        }

    def envelope(self) -> np.ndarray:
        """Parameters with each efficiency at max over its group's rows of (the row's term
        of that knob / its measured time), the overhead at 1 µs."""
        p, ne = len(self.knobs), len(self.effs)
        x = np.where(self.is_ov, min(1e-6, self.max_ov), math.log(MIN_EFFICIENCY))
        for i, t in enumerate(self.problem.targets):
            if not ne:
                break
            g = self.gidx[t.chip]
            term = np.sum([w * self.probe.terms[u].sum(axis=0) for u, w in t.terms], axis=0)
            ratio = np.log(np.clip(term / self.meas[i], MIN_EFFICIENCY, 1.0))
            x[g * p : g * p + ne] = np.maximum(x[g * p : g * p + ne], ratio)
        return x

    @property
    def n(self) -> int:
        return len(self.meas)

    def values(self, x: np.ndarray, g: int) -> dict[str, float]:
        """Knob values of group ``g``."""
        p = len(self.knobs)
        b = x[g * p : (g + 1) * p]
        out = {
            k: float(np.clip(math.exp(v), MIN_EFFICIENCY, 1.0))
            for k, v in zip(self.effs, b, strict=False)
        }
        if self.has_ov:
            out[OVERHEAD_KNOB] = float(max(b[-1], 0.0))
        return out

    def chips(self, x: np.ndarray) -> dict[str, Chip]:
        """The chips with their group's knobs."""
        return {
            c: with_knobs(self.problem.chips[c], self.values(x, self.gidx[c]))
            for c in self.chip_names
        }

    def _with_prior(self, res: np.ndarray, x: np.ndarray) -> np.ndarray:
        return np.concatenate([res, self.prior_weight * (x - self.prior) / self.pscale])

    def surrogate(self, x: np.ndarray) -> np.ndarray:
        """Residuals of the probed surrogate (and the priors)."""
        p, ne = len(self.knobs), len(self.effs)
        times = {}
        for u in self.used_units:
            g = self.gidx[self.problem.units[u].chip]
            b = x[g * p : (g + 1) * p]
            per_op = self.fixed[u]
            terms = self.probe.terms[u]
            if ne:
                per_op = per_op + (terms * np.exp(-b[:ne])).max(axis=1)
            if self.has_ov:
                per_op = per_op + self.probe.launches[u] * b[-1]
            times[u] = float(per_op.sum())
        pred = np.array([sum(w * times[u] for u, w in t.terms) for t in self.problem.targets])
        return self._with_prior(np.log(pred) - self.log_meas, x)

    def engine_res(self, x: np.ndarray) -> np.ndarray:
        """Residuals through the engine (and the priors)."""
        pred = predict_targets(self.problem, self.chips(x), self.engine)
        return self._with_prior(np.log(pred) - self.log_meas, x)


def fit_knobs(
    problem: Problem,
    knobs: Sequence[str] | None = None,
    shared: bool = True,
    engine: str = DEFAULT_ENGINE,
    seed: int = 0,
    polish_evals: int = POLISH_EVALS,
    prior_weight: float = PRIOR_WEIGHT,
) -> FitResult:
    """Fit ``knobs`` (default: the :func:`identifiable` ones of :data:`ALL_KNOBS`) to every
    target of ``problem``; pass the calibration rows only. ``shared``: one knob set for every
    chip (group ``shared``); otherwise one per chip (groups by chip name).

    Raises:
        InfersimError: no targets, a non-positive target, an unknown knob, or no knob to fit.
    """
    if not problem.targets:
        raise InfersimError("no measurements to calibrate with")
    if not all(t.measured_s > 0 for t in problem.targets):
        raise InfersimError("measured times must be > 0")
    knobs = check_knobs(knobs) if knobs else identifiable(problem, ALL_KNOBS, engine)
    if not knobs:
        raise InfersimError("no knob to fit: no row depends on any calibration knob")
    obj = _Objective(problem, list(knobs), shared, engine, prior_weight)
    lo, hi = obj.lo, obj.hi
    # Starts: the presets, all efficiencies at 0.7, every knob at the tightest efficiency the
    # rows allow (a row's time is at least its term over the knob), and seeded random points.
    rng = np.random.default_rng(seed)
    starts = [obj.prior, np.where(obj.is_ov, 2e-6, math.log(0.7)), obj.envelope()]
    for _ in range(4):
        starts.append(
            np.where(
                obj.is_ov,
                rng.uniform(0.0, obj.max_ov, len(lo)),
                rng.uniform(math.log(0.05), 0.0, len(lo)),
            )
        )
    best = min(
        (
            least_squares(
                obj.surrogate, np.clip(s, lo, hi), xtol=1e-10, ftol=1e-10, gtol=1e-10, **obj.solve
            )
            for s in starts
        ),
        key=lambda r: r.cost,
    )
    x, jac, res = best.x, best.jac, best.fun
    polished = False
    eng = obj.engine_res(x)
    if polish_evals > 0 and np.max(np.abs(eng - best.fun)) > 1e-3:
        pol = least_squares(obj.engine_res, x, diff_step=1e-3, max_nfev=polish_evals, **obj.solve)
        if pol.cost < 0.5 * float(np.sum(_rho(eng))):
            x, jac, res, polished = pol.x, pol.jac, pol.fun, True
    groups, warnings = _knob_fits(obj, x, jac, res)
    cost = float(0.5 * np.sum(_rho(res[: obj.n])))
    return FitResult(obj.chips(x), groups, warnings, cost, polished)


def _knob_fits(
    obj: _Objective, x: np.ndarray, jac: np.ndarray, res: np.ndarray
) -> tuple[dict[str, list[KnobFit]], list[str]]:
    """Each group's knobs with their relative standard errors (from the Jacobian at the
    optimum: cov = s² (JᵀJ)⁺ with s² the rows' residual variance) and bound flags, and the
    warnings."""
    n, p = obj.n, len(obj.knobs)
    s2 = float(np.sum(res[:n] ** 2)) / max(n - len(x), 1)
    cov = np.linalg.pinv(jac.T @ jac) * max(s2, 1e-12)
    col_norm = np.linalg.norm(jac[:n], axis=0)
    warnings: list[str] = []
    out: dict[str, list[KnobFit]] = {}
    for g, name in enumerate(obj.groups):
        values = obj.values(x, g)
        fits = []
        where = "" if obj.shared else f" on {name}"
        for j, knob in enumerate(obj.knobs):
            i = g * p + j
            value = values[knob]
            sd = math.sqrt(max(float(cov[i, i]), 0.0))  # of log(knob): relative already
            rse = sd if knob != OVERHEAD_KNOB else (sd / value if value > 0 else None)
            bound = _bound(knob, value, obj.max_ov)
            if bound and not _pushed(obj.surrogate, x, i, bound, obj.lo, obj.hi, n):
                bound = None  # flat: left at the preset by its prior, not pushed to the bound
            ident = bool(col_norm[i] > 1e-6) and (rse is None or rse <= UNCERTAIN_RSE)
            fits.append(KnobFit(knob, value, knob_value(obj.ref[g], knob), rse, bound, ident))
            if bound:
                warnings.append(
                    f"{knob}{where} = {value:.4g} is at its {bound} bound: the rows "
                    "push it past its range (a model error it absorbs?)"
                )
            if not ident:
                shown = "inf" if rse is None else f"{rse:.2g}"
                warnings.append(
                    f"{knob}{where} is not identifiable from these rows "
                    f"(relative standard error {shown})"
                )
        out[name] = fits
    return out, warnings


def _bound(knob: str, value: float, max_ov: float) -> str | None:
    if knob == OVERHEAD_KNOB:
        return "upper" if value >= max_ov * (1 - AT_BOUND_REL) else None
    if value >= 1 - AT_BOUND_REL:
        return "upper"
    return "lower" if value <= MIN_EFFICIENCY * (1 + AT_BOUND_REL) else None


def _pushed(
    residuals: Any,
    x: np.ndarray,
    i: int,
    bound: str,
    lo: np.ndarray,
    hi: np.ndarray,
    n: int,
) -> bool:
    """Whether the rows' cost rises when parameter ``i`` steps 2% (of its range) in from its
    ``bound``: the rows push it there, rather than leaving it anywhere on a plateau."""
    step = 0.02 * (hi[i] - lo[i]) if lo[i] > -np.inf else 0.02
    trial = x.copy()
    trial[i] = x[i] - step if bound == "upper" else x[i] + step
    here = float(np.sum(_rho(residuals(x)[:n])))
    there = float(np.sum(_rho(residuals(trial)[:n])))
    return there > here * (1 + 1e-4) + 1e-12


def _rho(res: np.ndarray) -> np.ndarray:
    z = (res / F_SCALE) ** 2
    return np.asarray(F_SCALE**2 * 2.0 * (np.sqrt(1.0 + z) - 1.0))
