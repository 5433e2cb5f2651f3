"""vLLM's benchmark scripts: the result JSON of serving, latency and throughput runs as model
rows.

Formats, as vllm-project/vllm writes them:

- **serve** (``vllm bench serve --save-result``, formerly ``benchmarks/benchmark_serving.py``):
  ``vllm/benchmarks/serve.py`` at commit 009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1, the
  ``result`` dict of ``benchmark()`` merged into ``result_json`` in ``main``: ``model_id``,
  ``backend``, ``label``, ``num_prompts``, ``request_rate`` (a number or ``"inf"``),
  ``burstiness``, ``max_concurrency``, ``duration``, ``completed``, ``failed``,
  ``total_input_tokens``, ``total_output_tokens``, ``request_throughput``, ``output_throughput``,
  ``total_token_throughput``, and per metric (ttft, tpot, itl, e2el) ``mean_<m>_ms``,
  ``median_<m>_ms``, ``std_<m>_ms`` and ``p<N>_<m>_ms`` for each ``--metric-percentiles``;
  ``--metadata KEY=VALUE`` pairs become top-level keys, and ``--append-result`` appends one
  object per line.
- **latency** (``vllm bench latency --output-json``): ``vllm/benchmarks/latency.py``
  (commit 00cae0753b8d50118a960888a6aff57f9b098ac6): ``avg_latency``, ``std_latency``,
  ``latencies`` (seconds per batch) and ``percentiles`` ({"10", "25", "50", "75", "90", "99"}).
- **throughput** (``vllm bench throughput --output-json``): ``vllm/benchmarks/throughput.py``
  (commit 020283147c84ad8cc97eadffcdb033ea56322563): ``elapsed_time``, ``num_requests``,
  ``total_num_tokens``, ``requests_per_second``, ``tokens_per_second`` (prompt + output).

A serving run is an end-to-end ``serving`` row: ``num_requests`` = completed requests,
``prompt_len`` and ``output_len`` the means over them (total tokens / completed), rate and
concurrency as configured. A latency run is an end-to-end ``batch`` row; a throughput run an
``offline`` one. The latency and throughput JSONs name no model, batch or lengths (they are
command-line arguments): those come from the caller's defaults (``--set``), or from
``--metadata`` keys named as the schema's fields. Milliseconds are converted to seconds.
"""

from __future__ import annotations

import re
from typing import Any

from infersim.errors import ConfigError

SERVE_KEYS = ("completed", "request_throughput", "total_input_tokens", "total_output_tokens")
LATENCY_KEYS = ("avg_latency", "latencies")
THROUGHPUT_KEYS = ("elapsed_time", "requests_per_second", "tokens_per_second")
_METRICS = {"ttft": "ttft_s", "tpot": "tpot_s", "itl": "itl_s", "e2el": "latency_s"}
_STAT = re.compile(r"^(mean|median|std|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el)_ms$")
_SCHEMA_KEYS = (
    "chip", "device", "model", "batch", "prompt_len", "context_len", "output_len",
    "tensor_parallel", "pipeline_parallel", "techniques", "weights_dtype", "act_dtype",
    "kv_dtype", "max_batch",
)  # fmt: skip
"""Schema fields a run's ``--metadata`` may set."""


def kind_of(data: dict[str, Any]) -> str | None:
    """``serve``, ``latency``, ``throughput`` or None: which script wrote a result object."""
    if all(k in data for k in SERVE_KEYS):
        return "serve"
    if all(k in data for k in LATENCY_KEYS):
        return "latency"
    if all(k in data for k in THROUGHPUT_KEYS):
        return "throughput"
    return None


def is_result(data: dict[str, Any]) -> bool:
    """Whether an object is a vLLM benchmark result."""
    return kind_of(data) is not None


def _number(data: dict[str, Any], key: str, where: str) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}: {key} = {value!r}: expected a number")
    return float(value)


def _mean(data: dict[str, Any], key: str, where: str) -> dict[str, float] | None:
    return {"mean": _number(data, key, where)} if data.get(key) is not None else None


def _metadata(data: dict[str, Any]) -> dict[str, Any]:
    return {k: data[k] for k in _SCHEMA_KEYS if k in data}


def serve_row(data: dict[str, Any], where: str, name: str) -> dict[str, Any]:
    """The flat model row of a serving result (see the module doc)."""
    completed = _number(data, "completed", where)
    if completed < 1:
        raise ConfigError(f"{where}: completed = {completed:g}: no request finished")
    metrics: dict[str, dict[str, Any]] = {}
    for key, value in data.items():
        match = _STAT.match(key)
        if match is None or value is None:
            continue
        stat, metric = match[1], _METRICS[match[2]]
        seconds = _number(data, key, where) * 1e-3
        if stat.startswith("p"):
            metrics.setdefault(metric, {}).setdefault("percentiles", {})[stat] = seconds
        else:
            metrics.setdefault(metric, {})[stat] = seconds
    rate = data.get("request_rate", "inf")
    settings = [f"{k}={data[k]}" for k in ("burstiness", "num_prompts", "failed") if k in data]
    return {
        "record": "model",
        "model": data.get("model_id"),
        "phase": "end-to-end",
        "scenario": "serving",
        "num_requests": int(completed),
        "request_rate_per_s": rate,
        "max_concurrency": data.get("max_concurrency"),
        "prompt_len": round(_number(data, "total_input_tokens", where) / completed),
        "output_len": round(_number(data, "total_output_tokens", where) / completed),
        "software": f"vLLM bench serve, backend {data.get('backend', '?')}",
        "settings": "; ".join(settings),
        "source": f"{name} ({data.get('label') or 'vllm'} {data.get('date', '')})".strip(),
        "requests_per_s": {"mean": _number(data, "request_throughput", where)},
        "output_tokens_per_s": _mean(data, "output_throughput", where),
        "total_tokens_per_s": _mean(data, "total_token_throughput", where),
        **metrics,
        **_metadata(data),
    }


def latency_row(data: dict[str, Any], where: str, name: str) -> dict[str, Any]:
    """The flat model row of a latency result: one batch's end-to-end seconds."""
    latencies = data.get("latencies") or []
    if not isinstance(latencies, list) or not all(isinstance(v, int | float) for v in latencies):
        raise ConfigError(f"{where}: latencies: expected a list of numbers")
    percentiles = data.get("percentiles") or {}
    if not isinstance(percentiles, dict):
        raise ConfigError(f"{where}: percentiles: expected an object")
    stat: dict[str, Any] = {
        "mean": _number(data, "avg_latency", where),
        "std": data.get("std_latency"),
        "percentiles": {f"p{float(p):g}": v for p, v in percentiles.items()},
    }
    if latencies:
        stat |= {"min": min(latencies), "max": max(latencies)}
    return {
        "record": "model",
        "_needs": ("model", "batch", "prompt_len", "output_len"),
        "phase": "end-to-end",
        "scenario": "batch",
        "software": "vLLM bench latency",
        "source": name,
        "reps": len(latencies) or None,
        "latency_s": {k: v for k, v in stat.items() if v is not None},
        **_metadata(data),
    }


def throughput_row(data: dict[str, Any], where: str, name: str) -> dict[str, Any]:
    """The flat model row of an offline throughput result."""
    return {
        "record": "model",
        "_needs": ("model", "prompt_len", "output_len"),
        "phase": "end-to-end",
        "scenario": "offline",
        "num_requests": int(_number(data, "num_requests", where)),
        "software": "vLLM bench throughput",
        "settings": f"elapsed_time={data.get('elapsed_time')}; "
        f"total_num_tokens={data.get('total_num_tokens')}",
        "source": name,
        "requests_per_s": {"mean": _number(data, "requests_per_second", where)},
        "total_tokens_per_s": {"mean": _number(data, "tokens_per_second", where)},
        **_metadata(data),
    }


_ROWS = {"serve": serve_row, "latency": latency_row, "throughput": throughput_row}


def rows(data: Any, name: str) -> list[tuple[str, dict[str, Any]]]:
    """Model rows of a vLLM result: one object, or a list of them (``--append-result``).

    Raises:
        ConfigError: not a vLLM result, or a bad field (named with the result's number).
    """
    results = data if isinstance(data, list) else [data]
    out = []
    for i, result in enumerate(results, start=1):
        where = f"{name} result {i}"
        kind = kind_of(result) if isinstance(result, dict) else None
        if kind is None:
            raise ConfigError(
                f"{where}: not a vLLM serve, latency or throughput result (needs "
                f"{', '.join(SERVE_KEYS)}; {', '.join(LATENCY_KEYS)}; or "
                f"{', '.join(THROUGHPUT_KEYS)})"
            )
        out.append((where, _ROWS[kind](result, where, name)))
    return out
