"""The metrics a sweep records per point: names, units, which way is better, and the spellings a
spec may use for them (``tokens/s``, ``energy/token``...).

One table: objectives, constraints, the ``pareto`` command and the report all read it.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from infersim.errors import ConfigError
from infersim.units import MISSING, fmt_quantity, significant

Sense = Literal["min", "max"]


@dataclass(frozen=True, slots=True)
class Metric:
    """One result column: its unit, the better direction, a label for axes and captions and a
    short header for table columns."""

    name: str
    unit: str
    sense: Sense
    label: str
    header: str = ""

    def format(self, value: float | None) -> str:
        """``value`` written for a reader in this metric's unit
        (:func:`infersim.units.fmt_quantity`: ``41.1 ms``, ``64,223 tok/s``, ``814 mm²``)."""
        return fmt_quantity(value, self.unit)


_TABLE: tuple[Metric, ...] = (
    Metric("latency_s", "s", "min", "latency of the step", "latency"),
    Metric("ttft_s", "s", "min", "time to first token (prefill)", "TTFT"),
    Metric("tpot_s", "s", "min", "time per output token (decode)", "TPOT"),
    Metric("tokens_per_s", "tokens/s", "max", "tokens per second", "tokens/s"),
    Metric("energy_j", "J", "min", "dynamic energy of the step", "energy"),
    Metric("energy_per_token_j", "J/token", "min", "energy per token (dynamic + static)",
           "energy/token"),
    Metric("tokens_per_s_per_mm2", "tokens/s/mm²", "max", "tokens per second per mm²",
           "tokens/s per mm²"),
    Metric("tokens_per_s_per_w", "tokens/s/W", "max", "tokens per second per watt",
           "tokens/s per W"),
    Metric("tokens_per_s_per_dollar", "tokens/s/$", "max", "tokens per second per dollar",
           "tokens/s per $"),
    Metric("area_mm2", "mm²", "min", "die area", "area"),
    Metric("power_w", "W", "min", "estimated average power on this workload", "power"),
    Metric("peak_power_w", "W", "min", "peak power (TDP)", "TDP"),
    Metric("cost_usd", "$", "min", "unit cost", "cost"),
    Metric("memory_bytes", "B", "min", "resident memory (weights + KV + activations)", "memory"),
    Metric("chips_needed", "chips", "min", "chips whose DRAM holds the footprint",
           "chips needed"),
    Metric("flops", "FLOP", "min", "FLOPs of the step", "FLOPs"),
    Metric("dram_bytes", "B", "min", "DRAM traffic of the step", "DRAM traffic"),
    Metric("fits", "", "max", "footprint fits in one chip's DRAM", "fits"),
)

METRICS: dict[str, Metric] = {m.name: m for m in _TABLE}
"""Metric name → :class:`Metric`."""

ALIASES: dict[str, str] = {
    "latency": "latency_s",
    "ttft": "ttft_s",
    "tpot": "tpot_s",
    "tokens/s": "tokens_per_s",
    "throughput": "tokens_per_s",
    "energy": "energy_j",
    "energy/token": "energy_per_token_j",
    "energy_per_token": "energy_per_token_j",
    "tokens/s/mm2": "tokens_per_s_per_mm2",
    "tokens/s/mm²": "tokens_per_s_per_mm2",
    "tokens/s/w": "tokens_per_s_per_w",
    "tokens/s/$": "tokens_per_s_per_dollar",
    "area": "area_mm2",
    "power": "power_w",
    "cost": "cost_usd",
    "memory": "memory_bytes",
}
"""Spellings a spec may use for a metric."""


def header(metric: str) -> str:
    """The column header of ``metric`` (its name when it is not a known metric)."""
    m = METRICS.get(metric)
    return m.header or m.label if m else metric


def format_metric(metric: str, value: Any) -> str:
    """``value`` of the result column ``metric`` written for a reader (units, significant
    figures); a column that is not a known metric is written as three significant figures,
    or as text."""
    m = METRICS.get(metric)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if m is not None:
        return m.format(None if value is None else float(value))
    if isinstance(value, int | float):
        return significant(float(value))
    return MISSING if value is None else str(value)


def metric_name(text: str) -> str:
    """The canonical metric name for ``text`` (an alias or a name).

    Raises:
        ConfigError: unknown metric; the message lists the known ones.
    """
    key = text.strip()
    key = ALIASES.get(key.lower(), key)
    if key not in METRICS:
        raise ConfigError(f"unknown metric {text!r}; known: {', '.join(METRICS)}")
    return key


@dataclass(frozen=True, slots=True)
class Objective:
    """A metric and whether smaller (``min``) or larger (``max``) is better."""

    metric: str
    sense: Sense

    def __str__(self) -> str:
        return f"{self.metric}:{self.sense}"


def parse_objective(text: str) -> Objective:
    """``"tokens_per_s:max"``, ``"area:min"`` or a bare metric (its natural direction).

    Raises:
        ConfigError: unknown metric or a direction other than min/max.
    """
    name, _, sense = text.partition(":")
    metric = metric_name(name)
    sense = sense.strip().lower() or METRICS[metric].sense
    if sense not in ("min", "max"):
        raise ConfigError(f"objective {text!r}: direction must be min or max, got {sense!r}")
    return Objective(metric, sense)  # type: ignore[arg-type]


_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
}
_CONSTRAINT = re.compile(r"^\s*([A-Za-z_][\w/²$]*)\s*(<=|>=|==|!=|<|>)\s*(\S+)\s*$")


@dataclass(frozen=True, slots=True)
class Constraint:
    """``metric OP value``, e.g. ``area_mm2 <= 800`` or ``fits == true``."""

    metric: str
    op: str
    value: float | bool

    def __str__(self) -> str:
        value = str(self.value).lower() if isinstance(self.value, bool) else f"{self.value:g}"
        return f"{self.metric} {self.op} {value}"

    def holds(self, actual: float | bool | None) -> bool:
        """Whether ``actual`` satisfies the constraint (a missing value never does)."""
        if actual is None or (isinstance(actual, float) and math.isnan(actual)):
            return False
        return bool(_COMPARE[self.op](actual, self.value))

    def violation(self, actual: float | bool | None) -> float:
        """How far ``actual`` is outside the bound, relative to the bound (0 when it holds)."""
        if self.holds(actual):
            return 0.0
        if isinstance(self.value, bool) or actual is None or math.isnan(float(actual)):
            return 1.0
        scale = max(abs(float(self.value)), 1e-30)
        return abs(float(actual) - float(self.value)) / scale  # type: ignore[arg-type]


def parse_constraint(text: str) -> Constraint:
    """Parse ``"area_mm2 <= 800"`` / ``"power <= 700"`` / ``"fits == true"``.

    Raises:
        ConfigError: not ``METRIC OP VALUE``, unknown metric, or a value that is not a number
            (or true/false for ``fits``).
    """
    match = _CONSTRAINT.match(text)
    if not match:
        raise ConfigError(
            f"constraint {text!r}: expected 'METRIC OP VALUE' with OP one of "
            f"{', '.join(_COMPARE)} (e.g. 'area_mm2 <= 800')"
        )
    name, op, raw = match.groups()
    metric = metric_name(name)
    value: float | bool
    if raw.lower() in ("true", "false"):
        value = raw.lower() == "true"
    else:
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(f"constraint {text!r}: {raw!r} is not a number") from None
        if not math.isfinite(value):
            raise ConfigError(f"constraint {text!r}: {raw!r} is not a finite number "
                              "(every point would break it)")  # fmt: skip
    if (metric == "fits") != isinstance(value, bool):
        raise ConfigError(f"constraint {text!r}: fits takes true/false, other metrics numbers")
    return Constraint(metric, op, value)
