"""Importers: each tool's sample file (tests/validation/data/importers, MADE-UP numbers in the
tool's own format) parses to exactly the expected model rows.

Where each format is defined (the importer modules cite the same):

- llama-bench: ggml-org/llama.cpp ``tools/llama-bench/llama-bench.cpp`` at
  050fc7f32de16858ac667d775b43a51ed8976e6f (``test::get_fields``, ``csv_printer``,
  ``json_printer``); ``tools/llama-bench/README.md`` at 08d0baaca6745ecaec3a75cccf63b533646ead22.
- vLLM: vllm-project/vllm ``vllm/benchmarks/serve.py`` at
  009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1, ``vllm/benchmarks/latency.py`` at
  00cae0753b8d50118a960888a6aff57f9b098ac6, ``vllm/benchmarks/throughput.py`` at
  020283147c84ad8cc97eadffcdb033ea56322563.
- trtllm-bench: NVIDIA/TensorRT-LLM ``tensorrt_llm/bench/dataclasses/reporting.py`` at
  2787769cae353023784dce105d648bcd4d04f4d4 (``ReportUtility.get_statistics_dict``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from infersim.cli.validate import register
from infersim.errors import ConfigError
from infersim.validation.importers import FORMATS, detect, parse
from infersim.validation.importers.llama_bench import ggml_dtype
from infersim.validation.records import read_measurements

DATA = Path(__file__).parent / "data" / "importers"


def rows_of(name: str, **kwargs: Any) -> list[dict[str, Any]]:
    data = read_measurements(DATA / name, **kwargs)
    assert data.rows == []  # model rows only
    return [r.model_dump(exclude_defaults=True) for r in data.model_rows]


def approx(expected: list[dict[str, Any]]) -> Any:
    def deep(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: deep(v) for k, v in value.items()}
        return pytest.approx(value, rel=1e-12) if isinstance(value, float) else value

    return [deep(row) for row in expected]


LLAMA_COMMON = {
    "device": "NVIDIA H100 80GB HBM3",
    "model": "llama 8B Q4_K - Medium",
    "weights_dtype": "q4_k_m",
    "software": "llama.cpp 0000000 (build 1234) CUDA",
    "reps": 3,
}


def _settings(type_v: str) -> str:
    return (f"n_batch=2048; n_ubatch=512; n_threads=16; n_gpu_layers=99; flash_attn=True; "
            f"type_v={type_v}")  # fmt: skip


def test_llama_bench_json():
    source = "llama-bench-madeup.json, llama-bench 2026-01-01T00:00:"
    assert rows_of("llama-bench-madeup.json") == approx([
        {**LLAMA_COMMON, "phase": "prefill", "prompt_len": 512, "kv_dtype": "fp16",
         "settings": _settings("f16"), "source": source + "00Z",
         "prompt_tokens_per_s": {"mean": 5121.3659, "median": 5120.0, "std": 102.4,
                                 "min": 5019.61, "max": 5224.49},
         "latency_s": {"mean": 0.1, "median": 0.1, "std": 0.002, "min": 0.098, "max": 0.102}},
        {**LLAMA_COMMON, "phase": "decode", "context_len": 4096, "output_len": 128,
         "kv_dtype": "q8_0", "settings": _settings("q8_0"), "source": source + "05Z",
         "output_tokens_per_s": {"mean": 80.0, "median": 80.0, "std": 0.4, "min": 79.6,
                                 "max": 80.4},
         "latency_s": {"mean": 1.6, "median": 1.6, "std": 0.008, "min": 1.592, "max": 1.608}},
        {**LLAMA_COMMON, "phase": "end-to-end", "prompt_len": 512, "output_len": 128,
         "kv_dtype": "fp16", "settings": _settings("f16"), "source": source + "10Z",
         "total_tokens_per_s": {"mean": 376.470588, "median": 376.470588, "std": 0.0,
                                "min": 376.470588, "max": 376.470588},
         "latency_s": {"mean": 1.7, "median": 1.7, "std": 0.0, "min": 1.7, "max": 1.7}},
    ])  # fmt: skip


def test_llama_bench_csv_and_jsonl(tmp_path):
    common = {"device": "Example 8-Core Processor (MADE-UP NUMBERS)", "model": "llama 1B F16",
              "weights_dtype": "fp16", "kv_dtype": "fp16",
              "software": "llama.cpp 0000000 (build 1234) CPU",
              "settings": "n_batch=2048; n_ubatch=512; n_threads=8; n_gpu_layers=99; "
                          "flash_attn=0; type_v=f16"}  # fmt: skip
    assert rows_of("llama-bench-madeup.csv") == approx([
        {**common, "phase": "prefill", "prompt_len": 128,
         "source": "llama-bench-madeup.csv, llama-bench 2026-01-01T00:00:00Z",
         "prompt_tokens_per_s": {"mean": 250.0, "std": 5.0},
         "latency_s": {"mean": 0.512, "std": 0.01024}},
        {**common, "phase": "decode", "output_len": 32,
         "source": "llama-bench-madeup.csv, llama-bench 2026-01-01T00:00:03Z",
         "output_tokens_per_s": {"mean": 12.5, "std": 0.1},
         "latency_s": {"mean": 2.56, "std": 0.02048}},
    ])  # fmt: skip
    tests = json.loads((DATA / "llama-bench-madeup.json").read_text())
    jsonl = tmp_path / "bench.jsonl"
    jsonl.write_text("".join(json.dumps(t) + "\n" for t in tests))
    assert len(read_measurements(jsonl).model_rows) == 3


def test_vllm_serve():
    assert rows_of("vllm-serve-madeup.json", defaults={"chip": "h100-sxm"}) == approx([{
        "chip": "h100-sxm", "model": "meta-llama/Llama-3.1-8B-Instruct", "phase": "end-to-end",
        "scenario": "serving", "num_requests": 8, "request_rate_per_s": 4.0,
        "max_concurrency": 4, "prompt_len": 1024, "output_len": 128,
        "software": "vLLM bench serve, backend vllm",
        "settings": "burstiness=1.0; num_prompts=8; failed=0",
        "source": "vllm-serve-madeup.json (vllm 20260101-000000)",
        "requests_per_s": {"mean": 3.2}, "output_tokens_per_s": {"mean": 408.0},
        "total_tokens_per_s": {"mean": 3686.4},
        "ttft_s": {"mean": 0.045, "median": 0.0425, "std": 0.006, "percentiles": {"p99": 0.06}},
        "tpot_s": {"mean": 0.00525, "median": 0.0052, "std": 0.0003,
                   "percentiles": {"p99": 0.0061}},
        "itl_s": {"mean": 0.0053, "median": 0.0051, "std": 0.0009, "percentiles": {"p99": 0.0098}},
        "latency_s": {"mean": 0.735, "median": 0.73, "std": 0.035, "percentiles": {"p99": 0.798}},
    }])  # fmt: skip


def test_vllm_latency_and_throughput_need_their_arguments():
    with pytest.raises(ConfigError, match=r"result 1: vllm does not record model, batch, "
                                          r"prompt_len, output_len"):  # fmt: skip
        read_measurements(DATA / "vllm-latency-madeup.json")
    args = {"model": "llama-3-8b", "chip": "h100-sxm", "batch": 8, "prompt_len": 32,
            "output_len": 128}  # fmt: skip
    assert rows_of("vllm-latency-madeup.json", defaults=args) == approx([{
        **args, "phase": "end-to-end", "software": "vLLM bench latency",
        "source": "vllm-latency-madeup.json", "reps": 5,
        "latency_s": {"mean": 1.25, "std": 0.02, "min": 1.23, "max": 1.27,
                      "percentiles": {"p10": 1.234, "p25": 1.24, "p50": 1.25, "p75": 1.26,
                                      "p90": 1.266, "p99": 1.2696}},
    }])  # fmt: skip
    args = {"model": "llama-3-8b", "prompt_len": 512, "output_len": 128}
    assert rows_of("vllm-throughput-madeup.json", defaults=args) == approx([{
        **args, "phase": "end-to-end", "scenario": "offline", "num_requests": 1000,
        "software": "vLLM bench throughput",
        "settings": "elapsed_time=40.0; total_num_tokens=640000",
        "source": "vllm-throughput-madeup.json",
        "requests_per_s": {"mean": 25.0}, "total_tokens_per_s": {"mean": 16000.0},
    }])  # fmt: skip


def test_trtllm_bench_report():
    assert rows_of("trtllm-bench-madeup.json", defaults={"chip": "h100-sxm"}) == approx([{
        "chip": "h100-sxm", "model": "meta-llama/Llama-3.1-8B", "phase": "end-to-end",
        "scenario": "offline", "num_requests": 500, "prompt_len": 1024, "output_len": 512,
        "max_batch": 256, "tensor_parallel": 2, "act_dtype": "bf16",
        "weights_dtype": "fp8_e4m3", "kv_dtype": "fp8_e4m3",
        "software": "TensorRT-LLM 1.0.0 (Pytorch)",
        "settings": "ep_size=1; max_num_tokens=8192; scheduling_policy=GUARANTEED_NO_EVICT; "
                    "kv_cache_percentage=0.9; issue_rate=1234.5",
        "source": "trtllm-bench-madeup.json, trtllm-bench report",
        "requests_per_s": {"mean": 10.0}, "output_tokens_per_s": {"mean": 5116.0},
        "total_tokens_per_s": {"mean": 15356.0},
        "latency_s": {"mean": 18.0, "median": 17.5, "min": 9.0, "max": 30.0,
                      "percentiles": {"p50": 17.5, "p90": 24.0, "p95": 26.0, "p99": 29.0}},
        "ttft_s": {"mean": 2.5, "median": 2.4, "min": 0.1, "max": 5.2,
                   "percentiles": {"p50": 2.4, "p90": 4.0, "p95": 4.5, "p99": 5.0}},
        "tpot_s": {"mean": 0.031, "median": 0.03, "min": 0.02, "max": 0.048,
                   "percentiles": {"p50": 0.03, "p90": 0.04, "p95": 0.042, "p99": 0.045}},
    }])  # fmt: skip


@pytest.mark.parametrize(
    ("name", "fmt"),
    [("llama-bench-madeup.json", "llama-bench"), ("llama-bench-madeup.csv", "llama-bench"),
     ("vllm-serve-madeup.json", "vllm"), ("vllm-latency-madeup.json", "vllm"),
     ("vllm-throughput-madeup.json", "vllm"), ("trtllm-bench-madeup.json", "trtllm-bench")],
)  # fmt: skip
def test_formats_are_told_apart(name, fmt):
    path = DATA / name
    text = path.read_text()
    assert detect(path, text, parse(text, path)) == fmt


def test_importer_errors_name_the_test_and_field(tmp_path):
    tests = json.loads((DATA / "llama-bench-madeup.json").read_text())
    tests[1]["avg_ts"] = "fast"
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(tests))
    with pytest.raises(ConfigError, match=r"bench\.json test 2: avg_ts = 'fast'"):
        read_measurements(path)
    tests[1]["avg_ts"] = -3.0
    path.write_text(json.dumps(tests))
    with pytest.raises(ConfigError, match=r"bench\.json test 2: output_tokens_per_s_mean = -3\.0"):
        read_measurements(path)
    serve = json.loads((DATA / "vllm-serve-madeup.json").read_text())
    path.write_text(json.dumps({**serve, "completed": 0}))
    with pytest.raises(ConfigError, match="result 1: completed = 0: no request finished"):
        read_measurements(path, format="vllm")
    with pytest.raises(ConfigError, match="report 1: not a trtllm-bench report"):
        read_measurements(DATA / "vllm-serve-madeup.json", format="trtllm-bench")


def test_ggml_dtype_names():
    assert ggml_dtype("Q4_K - Medium") == "q4_k_m"
    assert ggml_dtype("mostly Q4_0") == "q4_0"
    assert ggml_dtype("F16") == "fp16" and ggml_dtype("bf16") == "bf16"
    assert ggml_dtype("IQ2_XXS - 2.0625 bpw") == "iq2_xxs"
    assert ggml_dtype("MXFP8 unknown") is None


def test_calibrate_reads_tool_output_and_names_the_row_it_cannot_cost():
    """The vLLM sample names a Hugging Face model id, which is not a preset or a config file:
    calibrate reads the row and refuses it with its number, exit 2."""
    app = typer.Typer(pretty_exceptions_enable=False)
    register(app)
    result = CliRunner().invoke(app, ["calibrate", str(DATA / "vllm-serve-madeup.json"),
                                      "--chip", "h100-sxm", "--set", "chip=h100-sxm"])  # fmt: skip
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert "model row 1" in text and "Llama-3.1-8B-Instruct" in text
    bad = CliRunner().invoke(app, ["calibrate", str(DATA / "vllm-serve-madeup.json"),
                                   "--set", "chip"])  # fmt: skip
    assert bad.exit_code == 2 and "expected KEY=VALUE" in bad.output
    help_text = " ".join(CliRunner().invoke(app, ["calibrate", "--help"]).output.split())
    assert all(f in help_text for f in FORMATS)
