"""TensorRT-LLM's ``trtllm-bench``: the ``--report_json`` of its ``throughput`` and ``latency``
benchmarks as model rows.

The format is ``ReportUtility.get_statistics_dict`` in ``tensorrt_llm/bench/dataclasses/
reporting.py`` of NVIDIA/TensorRT-LLM (read at commit
2787769cae353023784dce105d648bcd4d04f4d4; ``trtllm-bench latency`` writes the same report,
``tensorrt_llm/bench/benchmark/low_latency.py`` at 89fd9b74ab7ae753b4c6b3db25a400dca7ea54a0):

- ``engine``: ``model``, ``version``, ``backend`` (TRT or Pytorch), ``dtype``,
  ``kv_cache_dtype``, ``quantization``;
- ``world_info``: ``tp_size``, ``pp_size``, ``ep_size``, ``max_batch_size``, ``max_num_tokens``,
  ``scheduling_policy``, ``kv_cache_percentage``, ``issue_rate``;
- ``request_info``: ``num_requests``, ``avg_num_concurrent_requests``, ``avg_input_length``,
  ``avg_output_length``;
- ``performance``: ``total_latency_ms``, ``avg_request_latency_ms``,
  ``request_throughput_req_s``, ``system_output_throughput_tok_s``,
  ``system_total_throughput_tok_s``, ``output_throughput_per_user_tok_s``,
  ``request_latency_percentiles_ms`` (``PercentileStats`` of
  ``tensorrt_llm/bench/dataclasses/statistics.py``: p50, p90, p95, p99, minimum, maximum,
  average);
- ``streaming_metrics`` (streaming runs): ``avg_ttft_ms``, ``avg_tpot_ms``,
  ``ttft_percentiles``, ``tpot_percentiles`` (ms).

A report is one end-to-end ``offline`` row: every request is issued at once (at
``issue_rate``) and the runtime batches up to ``max_batch_size``; ``prompt_len`` and
``output_len`` are the average lengths. The weights' dtype is the quantization's (FP8 → fp8,
NVFP4 → nvfp4, W4A16_* → int4, W8A16 → int8), else the engine's dtype. The report does not
name the GPU: the chip comes from the caller's defaults.
"""

from __future__ import annotations

from typing import Any

from infersim import dtypes
from infersim.errors import ConfigError, InfersimError

SECTIONS = ("engine", "world_info", "request_info", "performance")
"""The report's sections every file has."""

QUANTIZATION = {
    "FP8": "fp8_e4m3", "FP8_BLOCK_SCALES": "fp8_e4m3", "FP8_PER_CHANNEL_PER_TOKEN": "fp8_e4m3",
    "NVFP4": "nvfp4", "W4A16": "int4", "W4A16_AWQ": "int4", "W4A16_GPTQ": "int4",
    "W4A8_AWQ": "int4", "W8A16": "int8", "W8A16_GPTQ": "int8", "W8A8_SQ_PER_CHANNEL": "int8",
    "INT8": "int8",
}  # fmt: skip
"""TensorRT-LLM ``QuantAlgo`` names → infersim dtype of the stored weights (or KV cache)."""


def is_report(data: dict[str, Any]) -> bool:
    """Whether an object is a trtllm-bench report."""
    return all(isinstance(data.get(s), dict) for s in SECTIONS)


def _dtype(name: Any) -> str | None:
    if name is None or str(name).strip().lower() in ("", "none", "auto"):
        return None
    text = str(name).strip()
    if text.upper() in QUANTIZATION:
        return QUANTIZATION[text.upper()]
    try:
        return dtypes.canonical(text)
    except InfersimError:
        return None


def _number(section: dict[str, Any], key: str, where: str) -> float:
    value = section.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}: {key} = {value!r}: expected a number")
    return float(value)


def _percentiles_s(stats: Any, where: str, what: str) -> dict[str, Any] | None:
    """A :class:`~infersim.validation.schema.Stat` (seconds) of a PercentileStats in ms."""
    if stats is None:
        return None
    if not isinstance(stats, dict):
        raise ConfigError(f"{where}: {what}: expected an object of percentiles")
    ms = {k: _number(stats, k, f"{where}: {what}") for k in stats}
    out: dict[str, Any] = {"percentiles": {}}
    for key, value in ms.items():
        name = {"average": "mean", "minimum": "min", "maximum": "max"}.get(key, key)
        if name.startswith("p"):
            out["percentiles"][name] = value * 1e-3
        else:
            out[name] = value * 1e-3
    if "p50" in out["percentiles"]:
        out["median"] = out["percentiles"]["p50"]
    return out


def row(report: dict[str, Any], where: str, name: str) -> dict[str, Any]:
    """The flat model row of one trtllm-bench report (see the module doc)."""
    engine, world = report["engine"], report["world_info"]
    info, perf = report["request_info"], report["performance"]
    streaming = report.get("streaming_metrics") or {}
    latency = _percentiles_s(perf.get("request_latency_percentiles_ms"), where, "latency") or {}
    latency["mean"] = _number(perf, "avg_request_latency_ms", where) * 1e-3
    ttft = _percentiles_s(streaming.get("ttft_percentiles"), where, "ttft_percentiles")
    tpot = _percentiles_s(streaming.get("tpot_percentiles"), where, "tpot_percentiles")
    if ttft is not None and "avg_ttft_ms" in streaming:
        ttft["mean"] = _number(streaming, "avg_ttft_ms", where) * 1e-3
    if tpot is not None and "avg_tpot_ms" in streaming:
        tpot["mean"] = _number(streaming, "avg_tpot_ms", where) * 1e-3
    keys = ("ep_size", "max_num_tokens", "scheduling_policy", "kv_cache_percentage", "issue_rate")
    settings = [f"{k}={world[k]}" for k in keys if world.get(k) is not None]
    act = _dtype(engine.get("dtype"))
    return {
        "record": "model",
        "model": engine.get("model"),
        "phase": "end-to-end",
        "scenario": "offline",
        "num_requests": int(_number(info, "num_requests", where)),
        "prompt_len": round(_number(info, "avg_input_length", where)),
        "output_len": round(_number(info, "avg_output_length", where)),
        "max_batch": world.get("max_batch_size"),
        "tensor_parallel": world.get("tp_size", 1),
        "pipeline_parallel": world.get("pp_size", 1),
        "act_dtype": act,
        "weights_dtype": _dtype(engine.get("quantization")) or act,
        "kv_dtype": _dtype(engine.get("kv_cache_dtype")) or act,
        "software": f"TensorRT-LLM {engine.get('version', '?')} ({engine.get('backend', '?')})",
        "settings": "; ".join(settings),
        "source": f"{name}, trtllm-bench report",
        "requests_per_s": {"mean": _number(perf, "request_throughput_req_s", where)},
        "output_tokens_per_s": {"mean": _number(perf, "system_output_throughput_tok_s", where)},
        "total_tokens_per_s": {"mean": _number(perf, "system_total_throughput_tok_s", where)},
        "latency_s": latency,
        "ttft_s": ttft,
        "tpot_s": tpot,
    }


def rows(data: Any, name: str) -> list[tuple[str, dict[str, Any]]]:
    """Model rows of trtllm-bench reports: one report object, or a list of them.

    Raises:
        ConfigError: not a report, or a bad field (named with the report's number).
    """
    reports = data if isinstance(data, list) else [data]
    out = []
    for i, report in enumerate(reports, start=1):
        where = f"{name} report {i}"
        if not isinstance(report, dict) or not is_report(report):
            raise ConfigError(f"{where}: not a trtllm-bench report (needs {', '.join(SECTIONS)})")
        out.append((where, row(report, where, name)))
    return out
