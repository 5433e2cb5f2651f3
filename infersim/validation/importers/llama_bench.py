"""llama.cpp's ``llama-bench``: its ``-o json``, ``-o jsonl`` and ``-o csv`` outputs as model rows.

The format is defined by ``tools/llama-bench/llama-bench.cpp`` in ggml-org/llama.cpp (read at
commit 050fc7f32de16858ac667d775b43a51ed8976e6f): ``struct test`` holds one test's fields
(``test::get_fields()``: build_commit, build_number, cpu_info, gpu_info, backends,
model_filename, model_type, model_size, model_n_params, n_batch, n_ubatch, n_threads, ...,
type_k, type_v, n_gpu_layers, ..., flash_attn, ..., n_prompt, n_gen, n_depth, test_time,
avg_ns, stddev_ns, avg_ts, stddev_ts); ``csv_printer`` writes a header and one row per test
with every value double-quoted; ``json_printer`` writes a list of objects with the same fields
plus ``samples_ns`` and ``samples_ts`` (``jsonl_printer``: one object per line). Older builds
call ``backends`` ``backend``; ``tools/llama-bench/README.md`` (commit
08d0baaca6745ecaec3a75cccf63b533646ead22) shows both outputs.

A test with ``n_prompt`` > 0 and ``n_gen`` = 0 (``pp512``) is a prefill row; ``n_gen`` > 0 and
``n_prompt`` = 0 (``tg128``) a decode row; both (``-pg``) an end-to-end row. ``n_depth`` is the
context already in the KV cache. ``avg_ts`` counts ``n_prompt + n_gen`` tokens over each run
(``test::get_ts``), so it is the prompt, output or total tokens/s of the row; ``avg_ns`` is the
run's latency. The statistics are llama-bench's (mean, sample standard deviation); the median,
minimum and maximum come from the samples when the JSON carries them. One sequence runs
(batch 1); the weights' dtype is read from ``model_type``'s file type (``Q4_K - Medium`` →
q4_k_m), the KV cache's from ``type_k``.
"""

from __future__ import annotations

import csv
import io
import re
import statistics
from typing import Any

from infersim import dtypes
from infersim.errors import ConfigError, InfersimError

FIELDS = ("model_type", "n_prompt", "n_gen", "avg_ns", "avg_ts")
"""Fields every llama-bench test has (how a file is recognized)."""

_SUFFIX = {"small": "_s", "medium": "_m", "large": "_l"}
_GGML = {"f32": "fp32", "f16": "fp16", "bf16": "bf16"}


def is_test(data: dict[str, Any]) -> bool:
    """Whether an object is one llama-bench test."""
    return all(f in data for f in FIELDS)


def is_csv_header(header: list[str]) -> bool:
    """Whether a CSV header is llama-bench's."""
    return all(f in header for f in FIELDS)


def ggml_dtype(name: str) -> str | None:
    """The infersim dtype of a ggml type or file-type name (``Q4_K - Medium``, ``mostly Q4_0``,
    ``F16``, ``q8_0``), or None when infersim has no such dtype."""
    text = re.sub(r"^(mostly|all)\s+", "", name.strip(), flags=re.IGNORECASE)
    match = re.match(r"([A-Za-z0-9_]+)(?:\s*-\s*([A-Za-z]+))?", text)
    if not match:
        return None
    base = match[1].lower()
    base = _GGML.get(base, base) + _SUFFIX.get((match[2] or "").lower(), "")
    try:
        return dtypes.canonical(base)
    except InfersimError:
        return None


def _int(test: dict[str, Any], key: str, where: str, default: int | None = None) -> int:
    value = test.get(key, default)
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {key} = {value!r}: expected an integer") from None


def _float(test: dict[str, Any], key: str, where: str) -> float | None:
    value = test.get(key)
    if value is None or str(value).strip() == "":
        return None
    try:
        return float(str(value).strip())
    except ValueError:
        raise ConfigError(f"{where}: {key} = {value!r}: expected a number") from None


def _stat(mean: float | None, std: float | None, samples: list[float]) -> dict[str, Any]:
    out: dict[str, Any] = {"mean": mean, "std": std}
    if samples:
        out |= {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}
    return {k: v for k, v in out.items() if v is not None}


def _samples(test: dict[str, Any], key: str, where: str, scale: float) -> list[float]:
    values = test.get(key) or []
    if not isinstance(values, list) or not all(isinstance(v, int | float) for v in values):
        raise ConfigError(f"{where}: {key}: expected a list of numbers")
    return [float(v) * scale for v in values]


def row(test: dict[str, Any], where: str, name: str) -> dict[str, Any]:
    """The flat model row of one llama-bench test (see the module doc).

    Raises:
        ConfigError: a field that is not a number where one is needed, or a test with
            neither prompt nor generated tokens.
    """
    n_prompt = _int(test, "n_prompt", where)
    n_gen = _int(test, "n_gen", where)
    n_depth = _int(test, "n_depth", where, 0)
    if n_prompt <= 0 and n_gen <= 0:
        raise ConfigError(f"{where}: n_prompt = {n_prompt}, n_gen = {n_gen}: nothing was timed")
    phase = "end-to-end" if n_prompt > 0 and n_gen > 0 else "prefill" if n_prompt > 0 else "decode"
    metric = {"prefill": "prompt_tokens_per_s", "decode": "output_tokens_per_s"}.get(
        phase, "total_tokens_per_s"
    )
    samples_ns = _samples(test, "samples_ns", where, 1e-9)
    ns = {k: _float(test, k, where) for k in ("avg_ns", "stddev_ns")}
    backend = str(test.get("backends", test.get("backend", ""))).strip()
    gpu, cpu = str(test.get("gpu_info", "")).strip(), str(test.get("cpu_info", "")).strip()
    model_type = str(test.get("model_type", "")).strip()
    ftype = model_type.split(" ", 2)[2] if model_type.count(" ") >= 2 else ""
    kv = {ggml_dtype(str(test.get(k, ""))) for k in ("type_k", "type_v")} - {None}
    settings = [
        f"{k}={test[k]}"
        for k in ("n_batch", "n_ubatch", "n_threads", "n_gpu_layers", "flash_attn", "type_v")
        if k in test
    ]
    build = f"{test.get('build_commit', '?')} (build {test.get('build_number', '?')})"
    return {
        "record": "model",
        "device": gpu if gpu and backend.upper() not in ("CPU", "BLAS", "") else cpu,
        "model": model_type or str(test.get("model_filename", "")),
        "phase": phase,
        "batch": 1,
        "prompt_len": n_prompt,
        "context_len": n_depth,
        "output_len": n_gen,
        "weights_dtype": ggml_dtype(ftype) if ftype else None,
        "kv_dtype": ggml_dtype(str(test.get("type_k", ""))) if len(kv) == 1 else None,
        "software": f"llama.cpp {build} {backend}".strip(),
        "settings": "; ".join(settings),
        "source": f"{name}, llama-bench {test.get('test_time', '')}".strip(),
        "reps": len(samples_ns) or None,
        metric: _stat(
            _float(test, "avg_ts", where),
            _float(test, "stddev_ts", where),
            _samples(test, "samples_ts", where, 1.0),
        ),
        "latency_s": _stat(
            ns["avg_ns"] * 1e-9 if ns["avg_ns"] is not None else None,
            ns["stddev_ns"] * 1e-9 if ns["stddev_ns"] is not None else None,
            samples_ns,
        ),
    }


def rows(data: Any, name: str) -> list[tuple[str, dict[str, Any]]]:
    """Model rows of a llama-bench output: a parsed JSON list (``-o json``/``jsonl``) or the
    CSV text (``-o csv``).

    Raises:
        ConfigError: not llama-bench output, or a bad test (named by its number).
    """
    if isinstance(data, str):
        reader = csv.DictReader(io.StringIO(data))
        if not is_csv_header(list(reader.fieldnames or [])):
            raise ConfigError(f"{name}: not a llama-bench CSV (needs {', '.join(FIELDS)})")
        tests: list[Any] = list(reader)
    else:
        tests = data if isinstance(data, list) else [data]
    out = []
    for i, test in enumerate(tests, start=1):
        where = f"{name} test {i}"
        if not isinstance(test, dict) or not is_test(test):
            raise ConfigError(f"{where}: not a llama-bench test (needs {', '.join(FIELDS)})")
        out.append((where, row(test, where, name)))
    return out
