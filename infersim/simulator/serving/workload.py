"""Serving workloads: arrival processes, request-length distributions and trace files.

A workload is typed data (each variant selected by its ``kind``); :func:`generate` turns it into
arrays of requests with random streams the caller owns, so the same seed gives the same
requests whatever the scheduler or KV manager. The CLI text forms (``poisson:RATE``,
``uniform:LO:HI``, ...) are parsed by :func:`parse_arrivals` and :func:`parse_length`.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from infersim.errors import ConfigError, format_validation_error
from infersim.io import read_text

MAX_TOKENS = 1 << 24
"""Largest prompt or output length accepted (tokens)."""

LOGNORMAL_TAIL_SIGMAS = 3.0
"""A lognormal length is clipped at ``median · exp(3σ)`` (its 99.87th percentile), which is also
the reservation a contiguous KV manager makes when no ``max_output_tokens`` is given."""

MIN_RATE_PER_S = 1e-6
"""Slowest arrival rate accepted (one request in about 12 days): at a denormal rate the gaps
between arrivals overflow to infinity."""

TRACE_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")
"""Required trace CSV columns; ``prefix_id`` and ``prefix_tokens`` are optional."""


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


# --- arrivals ---------------------------------------------------------------------------------


class Poisson(_Spec):
    """Poisson arrivals: exponential gaps with mean ``1 / rate_per_s``."""

    kind: Literal["poisson"] = "poisson"
    rate_per_s: float = Field(
        ge=MIN_RATE_PER_S, le=1e7, description="Mean arrival rate in requests/s"
    )


class Fixed(_Spec):
    """Evenly spaced arrivals, one every ``1 / rate_per_s`` seconds."""

    kind: Literal["fixed"] = "fixed"
    rate_per_s: float = Field(ge=MIN_RATE_PER_S, le=1e7, description="Arrival rate in requests/s")


class Burst(_Spec):
    """Every request arrives at t = 0 (an offline batch: throughput and concurrency)."""

    kind: Literal["burst"] = "burst"


class Trace(_Spec):
    """Arrivals (and optionally lengths and prefixes) read from a CSV file."""

    kind: Literal["trace"] = "trace"
    path: Path = Field(
        description="CSV with arrival_s, prompt_tokens, output_tokens[, prefix_id, prefix_tokens]"
    )


Arrivals = Annotated[Poisson | Fixed | Burst | Trace, Field(discriminator="kind")]


# --- lengths ----------------------------------------------------------------------------------


class FixedLength(_Spec):
    """Every request has ``tokens`` tokens."""

    kind: Literal["fixed"] = "fixed"
    tokens: int = Field(ge=1, le=MAX_TOKENS, description="Length in tokens")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` lengths in tokens."""
        return np.full(n, self.tokens, dtype=np.int64)

    @property
    def upper_bound(self) -> int:
        """The longest length this distribution produces (tokens)."""
        return self.tokens


class UniformLength(_Spec):
    """Integer lengths uniform on [lo, hi] tokens."""

    kind: Literal["uniform"] = "uniform"
    lo: int = Field(ge=1, le=MAX_TOKENS, description="Shortest length in tokens")
    hi: int = Field(ge=1, le=MAX_TOKENS, description="Longest length in tokens")

    @model_validator(mode="after")
    def _ordered(self) -> UniformLength:
        if self.lo > self.hi:
            raise ValueError(f"uniform length: lo (={self.lo}) must be <= hi (={self.hi})")
        return self

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` lengths in tokens."""
        return rng.integers(self.lo, self.hi + 1, size=n, dtype=np.int64)

    @property
    def upper_bound(self) -> int:
        """The longest length this distribution produces (tokens)."""
        return self.hi


class LognormalLength(_Spec):
    """Lognormal lengths with the given median (tokens) and log-space sigma, rounded, clipped to
    [1, median · exp(3σ)]."""

    kind: Literal["lognormal"] = "lognormal"
    median: float = Field(ge=1, le=MAX_TOKENS, description="Median length in tokens")
    sigma: float = Field(ge=0, le=4, description="Standard deviation of log(length)")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` lengths in tokens."""
        raw = rng.lognormal(math.log(self.median), self.sigma, size=n)
        return np.clip(np.rint(raw), 1, self.upper_bound).astype(np.int64)

    @property
    def upper_bound(self) -> int:
        """The longest length this distribution produces (tokens)."""
        tail = self.median * math.exp(LOGNORMAL_TAIL_SIGMAS * self.sigma)
        return min(MAX_TOKENS, math.ceil(tail))


class TraceLength(_Spec):
    """Lengths taken from the trace file (needs ``trace`` arrivals)."""

    kind: Literal["trace"] = "trace"


LengthDist = Annotated[
    FixedLength | UniformLength | LognormalLength | TraceLength, Field(discriminator="kind")
]


class Workload(_Spec):
    """Who arrives when, with how long a prompt and how many output tokens."""

    arrivals: Arrivals = Field(description="Arrival process")
    requests: int | None = Field(
        default=None,
        ge=1,
        le=10_000_000,
        description="Requests to simulate (a trace: its first N; default: all of it)",
    )
    prompt_len: LengthDist = Field(
        default=FixedLength(tokens=512), description="Prompt length distribution (tokens)"
    )
    output_len: LengthDist = Field(
        default=FixedLength(tokens=128), description="Output length distribution (tokens)"
    )
    max_output_tokens: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TOKENS,
        description="Per-request output cap (max_tokens) that a contiguous KV manager reserves; "
        "default: the longest output the distribution can produce",
    )
    shared_prefix_tokens: int = Field(
        default=0,
        ge=0,
        le=MAX_TOKENS,
        description="A system prompt of this many tokens shared by every synthetic request "
        "(prepended to the sampled prompt)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        is_trace = isinstance(self.arrivals, Trace)
        for name, dist in (("prompt_len", self.prompt_len), ("output_len", self.output_len)):
            if isinstance(dist, TraceLength) and not is_trace:
                raise ValueError(f"{name}: 'trace' lengths need trace arrivals (trace:PATH)")
        if not is_trace and self.requests is None:
            raise ValueError("requests: synthetic arrivals need a request count")
        if is_trace and self.shared_prefix_tokens:
            raise ValueError("shared_prefix_tokens: a trace gives prefixes in its own columns")
        return self


@dataclass(frozen=True)
class RequestArrays:
    """The generated requests, sorted by arrival (one entry per request)."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    max_output_tokens: int
    prefix_id: np.ndarray
    prefix_tokens: np.ndarray

    def __len__(self) -> int:
        return len(self.arrival_s)


# --- parsing ----------------------------------------------------------------------------------


def _numbers(text: str, what: str, count: int) -> list[str]:
    head, *rest = text.split(":")
    if len(rest) != count:
        raise ConfigError(f"{what} {text!r}: expected {head}" + ":X" * count)
    return rest


def _validated(cls: type[BaseModel], data: dict[str, object], text: str) -> BaseModel:
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        if all(not e["loc"] for e in errors):  # a whole-model check: its message says it all
            reasons = "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in errors)
            raise ConfigError(f"{text!r}: {reasons}") from None
        raise ConfigError(format_validation_error(exc, cls, source=repr(text))) from None


def parse_arrivals(text: str) -> Poisson | Fixed | Burst | Trace:
    """``poisson:RATE``, ``fixed:RATE`` (requests/s), ``burst`` or ``trace:PATH``.

    Raises:
        ConfigError: unknown form or a bad number, naming the text and the allowed forms.
    """
    head = text.split(":", 1)[0].strip()
    if head == "burst" and text.strip() == "burst":
        return Burst()
    if head == "trace":
        path = text.split(":", 1)[1] if ":" in text else ""
        if not path:
            raise ConfigError(f"arrivals {text!r}: expected trace:PATH")
        return Trace(path=Path(path))
    if head in {"poisson", "fixed"}:
        (rate,) = _numbers(text, "arrivals", 1)
        cls = Poisson if head == "poisson" else Fixed
        return _validated(cls, {"rate_per_s": rate}, text)  # type: ignore[return-value]
    raise ConfigError(
        f"unknown arrivals {text!r}; allowed: poisson:RATE, fixed:RATE, burst, trace:PATH"
    )


def parse_length(text: str) -> FixedLength | UniformLength | LognormalLength | TraceLength:
    """``512`` (fixed), ``uniform:LO:HI``, ``lognormal:MEDIAN:SIGMA`` or ``trace`` (tokens).

    Raises:
        ConfigError: unknown form or a bad number, naming the text and the allowed forms.
    """
    text = text.strip()
    head = text.split(":", 1)[0]
    if text == "trace":
        return TraceLength()
    if head == "uniform":
        lo, hi = _numbers(text, "length", 2)
        return _validated(UniformLength, {"lo": lo, "hi": hi}, text)  # type: ignore[return-value]
    if head == "lognormal":
        median, sigma = _numbers(text, "length", 2)
        return _validated(
            LognormalLength,
            {"median": median, "sigma": sigma},  # type: ignore[return-value]
            text,
        )
    if text.isdigit():
        return _validated(FixedLength, {"tokens": text}, text)  # type: ignore[return-value]
    raise ConfigError(
        f"unknown length {text!r}; allowed: N (fixed), uniform:LO:HI, lognormal:MEDIAN:SIGMA, trace"
    )


# --- traces -----------------------------------------------------------------------------------


def _int_field(row: dict[str, str], key: str, where: str, low: int) -> int:
    raw = (row.get(key) or "").strip()
    try:
        value = int(float(raw))
    except ValueError:
        raise ConfigError(f"{where}: {key} = {raw!r} is not a number") from None
    if value < low or value > MAX_TOKENS or value != float(raw):
        raise ConfigError(f"{where}: {key} = {raw!r} must be an integer in {low}..{MAX_TOKENS}")
    return value


TRACE_MAX_BYTES = 1024**3
"""Largest request trace read (about 20 million requests)."""


def read_trace(path: Path, limit: int | None = None) -> dict[str, np.ndarray]:
    """The columns of a request trace CSV (with a header row), sorted by ``arrival_s``.

    ``prefix_id`` may be any label; requests with the same label share their first
    ``prefix_tokens`` prompt tokens.

    Raises:
        ConfigError: missing file or column, a bad value (with its line), or no rows.
    """
    text = read_text(path, "trace", max_bytes=TRACE_MAX_BYTES)
    try:
        return _trace_rows(path, csv.DictReader(io.StringIO(text, newline="")), limit)
    except csv.Error as exc:
        raise ConfigError(f"trace {path}: malformed CSV ({exc})") from None


def _trace_rows(
    path: Path, reader: csv.DictReader[str], limit: int | None
) -> dict[str, np.ndarray]:
    """The trace's columns from its parsed CSV rows (see :func:`read_trace`)."""
    fields = [f.strip() for f in reader.fieldnames or []]
    missing = [c for c in TRACE_COLUMNS if c not in fields]
    if missing:
        raise ConfigError(
            f"trace {path}: missing column(s) {', '.join(missing)}; "
            f"expected {', '.join(TRACE_COLUMNS)}[, prefix_id, prefix_tokens]"
        )
    labels: dict[str, int] = {}
    rows: list[tuple[float, int, int, int, int]] = []
    for line, raw in enumerate(reader, start=2):
        row = {(k or "").strip(): v for k, v in raw.items()}
        where = f"trace {path} line {line}"
        try:
            arrival = float(row["arrival_s"])
        except (TypeError, ValueError):
            raise ConfigError(
                f"{where}: arrival_s = {row['arrival_s']!r} is not a number"
            ) from None
        if not math.isfinite(arrival) or arrival < 0:
            raise ConfigError(f"{where}: arrival_s = {arrival} must be finite and >= 0")
        prompt = _int_field(row, "prompt_tokens", where, 1)
        output = _int_field(row, "output_tokens", where, 1)
        label = (row.get("prefix_id") or "").strip()
        prefix = _int_field(row, "prefix_tokens", where, 0) if label else 0
        if prefix > prompt:
            raise ConfigError(f"{where}: prefix_tokens = {prefix} exceeds prompt_tokens = {prompt}")
        pid = labels.setdefault(label, len(labels)) if label and prefix else -1
        rows.append((arrival, prompt, output, pid, prefix))
        if limit is not None and len(rows) >= limit:
            break
    if not rows:
        raise ConfigError(f"trace {path}: no requests")
    data = np.array(rows, dtype=np.float64)
    order = np.argsort(data[:, 0], kind="stable")
    data = data[order]
    return {
        "arrival_s": data[:, 0],
        "prompt_tokens": data[:, 1].astype(np.int64),
        "output_tokens": data[:, 2].astype(np.int64),
        "prefix_id": data[:, 3].astype(np.int64),
        "prefix_tokens": data[:, 4].astype(np.int64),
    }


# --- generation -------------------------------------------------------------------------------


def _arrival_times(
    arrivals: Poisson | Fixed | Burst, n: int, rng: np.random.Generator
) -> np.ndarray:
    if isinstance(arrivals, Poisson):
        return np.cumsum(rng.exponential(1.0 / arrivals.rate_per_s, size=n))
    if isinstance(arrivals, Fixed):
        return np.arange(n, dtype=np.float64) / arrivals.rate_per_s
    return np.zeros(n)


def generate(
    workload: Workload,
    arrival_rng: np.random.Generator,
    prompt_rng: np.random.Generator,
    output_rng: np.random.Generator,
) -> RequestArrays:
    """The requests of ``workload``: arrivals, prompt and output lengths (tokens), prefixes.

    Each quantity draws from its own generator, so changing one distribution leaves the others'
    samples unchanged. Outputs are capped at the workload's ``max_output_tokens``.

    Raises:
        ConfigError: an unreadable or malformed trace.
    """
    trace = None
    if isinstance(workload.arrivals, Trace):
        trace = read_trace(workload.arrivals.path, workload.requests)
        arrival = trace["arrival_s"]
    else:
        arrival = _arrival_times(workload.arrivals, workload.requests or 0, arrival_rng)
    n = len(arrival)

    def lengths(dist: LengthDist, column: str, rng: np.random.Generator) -> np.ndarray:
        if isinstance(dist, TraceLength):
            assert trace is not None
            return trace[column]
        return dist.sample(rng, n)

    prompt = lengths(workload.prompt_len, "prompt_tokens", prompt_rng)
    output = lengths(workload.output_len, "output_tokens", output_rng)
    if workload.max_output_tokens is not None:
        cap = workload.max_output_tokens
    elif isinstance(workload.output_len, TraceLength):
        cap = int(output.max())
    else:
        cap = workload.output_len.upper_bound
    output = np.minimum(output, cap)
    if trace is not None:
        prefix_id, prefix_tokens = trace["prefix_id"], trace["prefix_tokens"]
        prefix_tokens = np.minimum(prefix_tokens, prompt)
    else:
        shared = workload.shared_prefix_tokens
        prompt = prompt + shared
        prefix_id = np.full(n, 0 if shared else -1, dtype=np.int64)
        prefix_tokens = np.full(n, shared, dtype=np.int64)
    return RequestArrays(
        arrival_s=arrival,
        prompt_tokens=prompt,
        output_tokens=output,
        max_output_tokens=int(cap),
        prefix_id=prefix_id,
        prefix_tokens=prefix_tokens,
    )
