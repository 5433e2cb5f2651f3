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

Sense = Literal["min", "max"]


@dataclass(frozen=True, slots=True)
class Metric:
    """One result column: its unit, the better direction and a label for axes and tables."""

    name: str
    unit: str
    sense: Sense
    label: str


_TABLE: tuple[Metric, ...] = (
    Metric("latency_s", "s", "min", "latency of the step"),
    Metric("ttft_s", "s", "min", "time to first token (prefill)"),
    Metric("tpot_s", "s", "min", "time per output token (decode)"),
    Metric("tokens_per_s", "tokens/s", "max", "tokens per second"),
    Metric("energy_j", "J", "min", "dynamic energy of the step"),
    Metric("energy_per_token_j", "J/token", "min", "energy per token (dynamic + static)"),
    Metric("tokens_per_s_per_mm2", "tokens/s/mm²", "max", "tokens per second per mm²"),
    Metric("tokens_per_s_per_w", "tokens/s/W", "max", "tokens per second per watt"),
    Metric("tokens_per_s_per_dollar", "tokens/s/$", "max", "tokens per second per dollar"),
    Metric("area_mm2", "mm²", "min", "estimated die area"),
    Metric("power_w", "W", "min", "estimated average power on this workload"),
    Metric("peak_power_w", "W", "min", "estimated peak (TDP-like) power"),
    Metric("cost_usd", "$", "min", "estimated unit cost"),
    Metric("memory_bytes", "B", "min", "resident memory (weights + KV + activations)"),
    Metric("chips_needed", "chips", "min", "chips whose DRAM holds the footprint"),
    Metric("flops", "FLOP", "min", "FLOPs of the step"),
    Metric("dram_bytes", "B", "min", "DRAM traffic of the step"),
    Metric("fits", "", "max", "footprint fits in one chip's DRAM"),
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
