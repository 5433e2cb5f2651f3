"""Bad input at the CLI's edges: output paths checked before work, user names printed as
text (no markup, no terminal escapes), JSON always valid, repeated technique keys, unwrapped
error messages (the fuzz classes of the bad-input issue)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from infersim.cli import app
from infersim.cli.common import finite, plain

RUNNER = CliRunner()
CHIP = Path(__file__).parents[1] / "infersim/arch_models/presets/edge-npu.yaml"


def _chip(tmp_path: Path, name: str) -> Path:
    doc = yaml.safe_load(CHIP.read_text())
    doc["name"] = name
    path = tmp_path / "chip.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    return path


@pytest.mark.parametrize(
    "args",
    [
        ["sweep", "examples/sweep-techniques.yaml", "--out", "/etc/hostname"],
        ["sweep", "examples/sweep-techniques.yaml", "--out", "{tmp}/r", "--csv", "/etc/hostname/x"],
        ["report", "--out", "{tmp}"],
        ["report", "--out", "/etc/hostname/report.html"],
        ["report", "--out", "{tmp}/r.html", "--static", "/etc/hostname"],
        ["pareto", "{tmp}", "--csv", "/etc/hostname/p.csv"],
    ],
)
def test_bad_output_paths_exit_2_before_any_work(tmp_path: Path, args: list[str]):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    result = RUNNER.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "error:" in result.output
    assert not (tmp_path / "r").exists()  # nothing was evaluated


@pytest.mark.parametrize("name", ["[/]", "[bold]x", "\x1b[2Jcleared", "a\x07b"])
def test_user_names_print_as_text(tmp_path: Path, name: str):
    path = _chip(tmp_path, name)
    result = RUNNER.invoke(app, ["simulate", "--chip", str(path), "--model", "tiny-test",
                                 "--engine", "roofline"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "\x1b[2J" not in result.stdout and "\x07" not in result.stdout
    if name == "[bold]x":
        assert "[bold]x" in result.stdout  # shown, not swallowed as markup
    compare = RUNNER.invoke(app, ["compare", "--chip", str(path), "--model", "tiny-test",
                                  "--techniques", "bf16,[red]"])  # fmt: skip
    assert compare.exit_code in (0, 2) and "Traceback" not in compare.output


def test_plain_escapes_markup_and_control_characters():
    assert plain("[bold]x") == "\\[bold]x"
    assert "\x1b" not in plain("\x1b[2J") and "\t" in plain("a\tb")


def test_json_has_no_infinity_or_nan():
    clean, bad = finite({"a": float("inf"), "b": [1.0, float("nan")], "c": {"d": 2.0}})
    assert clean == {"a": None, "b": [1.0, None], "c": {"d": 2.0}}
    assert bad == ["a", "b[1]"]
    json.dumps(clean, allow_nan=False)


def test_repeated_technique_key_is_exit_2():
    for stack in ("spec:ngram:k=4:alpha=0.5:drafter=draft", "spec:ngram:k=4:k=5:alpha=0.5",
                  "tp=2:n=4"):  # fmt: skip
        result = RUNNER.invoke(app, ["simulate", "--chip", "h100-sxm", "--model", "tiny-test",
                                     "--techniques", stack])  # fmt: skip
        assert result.exit_code == 2, (stack, result.output)
        assert "given more than once" in result.output


def test_error_messages_are_not_hard_wrapped():
    result = RUNNER.invoke(app, ["simulate", "--chip", "no-such-chip-" + "x" * 120,
                                 "--model", "tiny-test"])  # fmt: skip
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, lines


def test_a_step_beyond_the_operator_bounds_names_the_users_inputs():
    result = RUNNER.invoke(app, ["simulate", "--chip", "h100-sxm", "--model", "llama-3-8b",
                                 "--phase", "prefill", "--batch", "65536",
                                 "--prompt-len", "8192"])  # fmt: skip
    assert result.exit_code == 2
    assert "batch 65536, prompt_len 8192 is too large" in result.output


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"hidden_size": 2, "head_dim": None}, "smaller than num_attention_heads"),
        ({"first_k_dense_replace": 99, "num_experts": 8, "num_experts_per_tok": 2},
         "first_k_dense_replace = 99 exceeds"),
    ],
)  # fmt: skip
def test_inconsistent_model_configs_are_refused(tmp_path: Path, change: dict, match: str):
    doc = json.loads((Path(__file__).parents[1] / "infersim/workloads/presets/tiny-test.json")
                     .read_text())  # fmt: skip
    doc.update(change)
    doc = {k: v for k, v in doc.items() if v is not None}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc))
    result = RUNNER.invoke(app, ["simulate", "--chip", "h100-sxm", "--model", str(path)])
    assert result.exit_code == 2, result.output
    assert match in result.output


@pytest.mark.parametrize(
    ("field", "value"),
    [("freq_hz", 5e-324), ("dram.bandwidth_bytes_per_s", 5e-324),
     ("calibration.dram_bandwidth_efficiency", 1e-300)],
)  # fmt: skip
def test_denormal_rates_are_refused_with_the_range(tmp_path: Path, field: str, value: float):
    doc = yaml.safe_load(CHIP.read_text())
    node = doc
    *parents, leaf = field.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value
    path = tmp_path / "chip.yaml"
    path.write_text(yaml.safe_dump(doc))
    result = RUNNER.invoke(app, ["simulate", "--chip", str(path), "--model", "tiny-test",
                                 "--json"])  # fmt: skip
    assert result.exit_code == 2
    assert field in result.output and "allowed: >=" in result.output


# --- root causes the API fuzzer (tests/fuzz_api.py) found -------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [("array.macs_per_pe_per_cycle", {"bf16": 5e-324}, "must be >= 0.001"),
     ("vector.flops_per_lane_per_cycle", 5e-324, "allowed: >= 0.001"),
     ("calibration.compute_efficiency_by_dtype", {"bf16": 1e-300}, "must be >= 0.0001")],
)  # fmt: skip
def test_denormal_rates_in_every_rate_field_are_refused(tmp_path: Path, field: str,
                                                        value: object, allowed: str):
    """A denormal rate made a step's time overflow to infinity: refused with the range."""
    doc = yaml.safe_load(CHIP.read_text())
    section, leaf = field.split(".")
    doc.setdefault(section, {})[leaf] = value
    path = tmp_path / "chip.yaml"
    path.write_text(yaml.safe_dump(doc))
    result = RUNNER.invoke(app, ["simulate", "--chip", str(path), "--model", "tiny-test"])
    assert result.exit_code == 2, result.output
    assert field in result.output and allowed in result.output


def test_offloading_more_than_a_transfer_holds_names_the_offload():
    from infersim import Scenario, load_chip, simulate
    from infersim.errors import InfersimError
    from infersim.workloads.models import ModelConfig

    huge = ModelConfig(name="huge", hidden_size=1 << 16, intermediate_size=1 << 20,
                       num_hidden_layers=4096, num_attention_heads=256, vocab_size=1024)
    with pytest.raises(InfersimError, match=r"huge: offloading .* bytes of weights is too large"):
        simulate(load_chip("h100-sxm"), huge, Scenario(phase="decode"), engine="roofline",
                 techniques="offload=0.9", ways_out=False)


def test_a_moe_routing_to_more_than_64_experts_is_costed():
    """moe.combine reads top-k expert outputs per token: a top-k above 64 was an invalid op."""
    from infersim import Scenario, load_chip, simulate
    from infersim.workloads.models import ModelConfig

    moe = ModelConfig(name="wide-moe", hidden_size=256, intermediate_size=512,
                      num_hidden_layers=2, num_attention_heads=4, vocab_size=512,
                      num_experts=256, num_experts_per_tok=128)
    cost = simulate(load_chip("h100-sxm"), moe, Scenario(phase="prefill"), engine="roofline")
    assert cost.latency_s > 0


def test_the_serving_kv_budget_names_the_token_budget():
    """The KV budget costs the activations of the largest iteration: an iteration of 2^24
    prompt tokens through a 2^20-wide MLP is beyond the operator bounds (was a traceback)."""
    from infersim import load_chip
    from infersim.errors import InfersimError
    from infersim.simulator.serving import ServingConfig, simulate_serving
    from infersim.workloads.models import ModelConfig

    wide = ModelConfig(name="wide", hidden_size=4096, intermediate_size=1 << 20,
                       num_hidden_layers=1, num_attention_heads=32, vocab_size=512)
    config = ServingConfig.model_validate({
        "workload": {"arrivals": {"kind": "burst"}, "requests": 1},
        "scheduler": {"kind": "chunked-prefill", "max_tokens_per_iteration": 1 << 24}})
    with pytest.raises(InfersimError, match="lower the scheduler's max_tokens_per_iteration"):
        simulate_serving(load_chip("h100-sxm"), wide, config, engine="roofline")


def test_a_denormal_arrival_rate_is_refused():
    result = RUNNER.invoke(app, ["serve", "--chip", "h100-sxm", "--model", "tiny-test",
                                 "--requests", "2", "--arrivals", "fixed:5e-324"])  # fmt: skip
    assert result.exit_code == 2 and "rate_per_s" in result.output
    assert "1e-06" in result.output


def test_a_model_of_100000_layers_costs_its_gguf_formats_quickly():
    """GGUF mixes are costed per class of layers, not per tensor: the ways out of a model that
    does not fit try every format, which once took minutes at this depth."""
    import time

    from infersim import Scenario, load_chip, simulate
    from infersim.workloads.models import ModelConfig

    deep = ModelConfig(name="deep", hidden_size=64, intermediate_size=128,
                       num_hidden_layers=100_000, num_attention_heads=4, vocab_size=512)
    start = time.perf_counter()
    cost = simulate(load_chip("edge-npu"), deep, Scenario(phase="decode"), engine="roofline")
    assert not cost.memory.fits and cost.ways_out
    assert time.perf_counter() - start < 30


def test_baseline_inside_a_stack_is_the_identity():
    """--allow-emulation appends +emulate to every stack: 'baseline+emulate' was unknown."""
    from infersim.workloads.techniques import parse

    assert [type(t).__name__ for t in parse("baseline+emulate").techniques] == ["Emulate"]
    result = RUNNER.invoke(app, ["compare", "--chip", "edge-npu", "--model", "tiny-test",
                                 "--engine", "roofline", "--techniques", "baseline,int8-weight",
                                 "--allow-emulation", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output


# --- the event engine: negative stalls, and mappings too large to unroll ----------------------


def test_event_stalls_are_never_negative_on_a_huge_gemm():
    """edge-npu, 16384^3 int8: rounding at 2e9 cycles made the compute stall print as -0."""
    result = RUNNER.invoke(app, ["map", "--chip", "edge-npu", "--gemm", "16384,16384,16384",
                                 "--engine", "events", "--dtype", "int8", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    events = json.loads(result.stdout)["events"]
    for key in ("first_load_cycles", "compute_stall_cycles", "dma_stall_cycles"):
        assert events[key] >= 0, (key, events[key])
    text = RUNNER.invoke(app, ["map", "--chip", "edge-npu", "--gemm", "16384,16384,16384",
                               "--engine", "events", "--dtype", "int8"])  # fmt: skip
    assert "-0 " not in text.stdout


def test_a_mapping_of_too_many_tiles_is_refused_with_its_size():
    from infersim.simulator.engines.events.plan import MAX_TILES

    result = RUNNER.invoke(app, ["map", "--chip", "edge-npu", "--gemm", "8388608,1,65536",
                                 "--dtype", "int8", "--dataflow", "os", "--engine", "events"])
    assert result.exit_code == 2, result.output  # was a traceback: raised outside user_errors
    assert "SRAM tiles" in result.output and "GB to simulate" in result.output
    assert f"{MAX_TILES:,}" in result.output
    help_text = " ".join(RUNNER.invoke(app, ["map", "--help"]).output.split())
    assert f"{MAX_TILES:,} SRAM tiles" in help_text.replace("│ ", "")


def test_an_event_engine_prefill_of_16m_tokens_is_refused_at_once():
    import time

    start = time.perf_counter()
    result = RUNNER.invoke(app, ["simulate", "--chip", "h100-sxm", "--model", "llama-3-8b",
                                 "--phase", "prefill", "--prompt-len", "16777216",
                                 "--engine", "events"])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "SRAM tiles" in result.output and "use the analytic engine" in result.output
    assert time.perf_counter() - start < 30


# --- huge jobs: top-k and sweep size ----------------------------------------------------------


def test_map_top_k_is_bounded():
    from infersim.cli.dataflow import MAX_TOP_K

    result = RUNNER.invoke(app, ["map", "--chip", "h100-sxm", "--gemm", "64,64,64",
                                 "--top-k", "1000000"])  # fmt: skip
    assert result.exit_code == 2 and "--top-k" in result.output
    ok = RUNNER.invoke(app, ["map", "--chip", "h100-sxm", "--gemm", "64,64,64", "--top-k",
                             str(MAX_TOP_K), "--json"])  # fmt: skip
    assert ok.exit_code == 0 and 1 <= len(json.loads(ok.stdout)) <= MAX_TOP_K


def _spec(tmp_path: Path, **extra: object) -> Path:
    doc = {"name": "s", "chips": ["h100-sxm"], "workloads": [{"model": "tiny-test"}],
           "engines": ["roofline"], **extra}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_sweep_grid_of_1e15_points_is_refused_before_any_work(tmp_path: Path):
    from infersim.explorer.sweep import MAX_SWEEP_POINTS

    axes = {f"{a}": {"low": 1.0e6, "high": 1.0e9, "num": 100_000}
            for a in ("sram.bandwidth_bytes_per_cycle", "dram.latency_s", "freq_hz")}
    axes["dram.latency_s"] = {"low": 0.0, "high": 1e-6, "num": 100_000}
    axes["sram.bandwidth_bytes_per_cycle"] = {"low": 1.0, "high": 1e4, "num": 100_000}
    spec = _spec(tmp_path, chips=[{"chip": "h100-sxm", "axes": axes}])
    result = RUNNER.invoke(app, ["sweep", str(spec), "--out", str(tmp_path / "r"), "-q"])
    assert result.exit_code == 2, result.output
    assert "1,000,000,000,000,000 points" in result.output
    assert f"at most {MAX_SWEEP_POINTS:,}" in result.output
    assert not (tmp_path / "r").exists()
    help_text = " ".join(RUNNER.invoke(app, ["sweep", "--help"]).output.split())
    assert f"{MAX_SWEEP_POINTS:,} points" in help_text


def test_a_large_sweep_notes_its_size_first(tmp_path: Path, monkeypatch):
    from infersim.explorer import sweep

    monkeypatch.setattr(sweep, "LARGE_SWEEP_POINTS", 1)
    spec = _spec(tmp_path, workloads=[{"model": "tiny-test", "batch": [1, 2]}])
    result = RUNNER.invoke(app, ["sweep", str(spec), "--out", str(tmp_path / "r"), "-q"])
    assert result.exit_code == 0, result.output
    assert "note: 2 points to evaluate" in result.output


# --- a serving trace that does not exist ------------------------------------------------------


def test_a_missing_serving_trace_in_a_sweep_is_exit_2_naming_it(tmp_path: Path):
    serving = {"engine": "roofline", "config": {"workload": {
        "arrivals": {"kind": "trace", "path": "no-such-trace.csv"},
        "prompt_len": {"kind": "trace"}, "output_len": {"kind": "trace"}}}}
    spec = _spec(tmp_path, serving=serving)
    result = RUNNER.invoke(app, ["sweep", str(spec), "--out", str(tmp_path / "r"), "-q"])
    assert result.exit_code == 2, result.output
    assert str(tmp_path / "no-such-trace.csv") in result.output  # resolved against the spec
    assert not (tmp_path / "r").exists()
    trace = Path(__file__).parents[1] / "examples/serving_trace.csv"
    (tmp_path / "no-such-trace.csv").write_bytes(trace.read_bytes())
    ok = RUNNER.invoke(app, ["sweep", str(spec), "--out", str(tmp_path / "r"), "-q"])
    assert ok.exit_code == 0, ok.output


# --- SCALE-Sim layers whose address matrices would not fit memory -----------------------------


def test_a_scalesim_layer_too_large_to_replay_is_refused_before_allocating(tmp_path: Path):
    import resource
    import sys

    sys.path.insert(0, str(Path(__file__).parent / "dataflow"))
    from dataflow_helpers import SCALESIM_V2_CFG

    cfg = tmp_path / "v2.cfg"
    cfg.write_text(SCALESIM_V2_CFG)
    topo = tmp_path / "big.csv"
    topo.write_text("Layer, M, N, K,\nbig, 100000, 100000, 100000,\n")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = RUNNER.invoke(app, ["scalesim", "--config", str(cfg), "--topology", str(topo),
                                 "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output  # the analytic estimate, with the reason
    (row,) = json.loads(result.stdout)
    assert row["infersim prediction"] == "analytic"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 2_000_000  # KiB
    text = " ".join(RUNNER.invoke(app, ["scalesim", "--config", str(cfg), "--topology",
                                        str(topo)]).output.split())  # fmt: skip
    assert "30,000,000,000 words" in text and "GiB to build" in text
    out = RUNNER.invoke(app, ["scalesim", "--config", str(cfg), "--topology", str(topo),
                              "--out", str(tmp_path / "reports")])  # fmt: skip
    assert out.exit_code == 2 and "too large to replay" in out.output


# --- a Ray cluster that is not there ----------------------------------------------------------


def _sweep_on_ray(tmp_path: Path, address: str, timeout: str = "2") -> tuple[int, str, float]:
    import os
    import subprocess
    import sys
    import time

    pytest.importorskip("ray")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", "from infersim.cli import app; app()", "sweep",
         str(_spec(tmp_path)), "--out",
         str(tmp_path / "r"), "--executor", "ray", "--address", address, "--ray-timeout",
         timeout, "-q"], capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    return done.returncode, done.stderr, time.perf_counter() - start


def test_an_unreachable_ray_address_exits_2_within_the_timeout(tmp_path: Path):
    code, err, wall = _sweep_on_ray(tmp_path, "127.0.0.1:1")
    assert code == 2, err
    assert "cannot reach the Ray cluster at 127.0.0.1:1 within 2 s" in err
    assert "Traceback" not in err and wall < 60


def test_a_ray_address_that_never_answers_exits_2_within_the_timeout(tmp_path: Path):
    import socket

    with socket.socket() as silent:  # accepts connections, never speaks Ray's protocol
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        code, err, wall = _sweep_on_ray(tmp_path, f"127.0.0.1:{port}")
    assert code == 2, err
    assert f"127.0.0.1:{port}" in err and "within 2 s" in err
    assert "Traceback" not in err and wall < 60


def test_ray_addresses_and_timeouts_are_checked():
    from infersim.cli.explore import RAY_TIMEOUT_S
    from infersim.errors import ConfigError
    from infersim.explorer.executors import RAY_CONNECT_TIMEOUT_S, make_executor

    pytest.importorskip("ray")
    assert RAY_TIMEOUT_S == RAY_CONNECT_TIMEOUT_S
    for address in ("127.0.0.1", "host:0", "host:99999", ":6379", "host:x"):
        with pytest.raises(ConfigError, match="expected auto or HOST:PORT"):
            make_executor("ray", address=address)
    with pytest.raises(ConfigError, match="--ray-timeout 0"):
        make_executor("ray", address="auto", connect_timeout_s=0)


def test_a_long_serving_run_notes_its_size_first(monkeypatch):
    from infersim.cli import serve
    from infersim.simulator.serving import ServingConfig
    from infersim.simulator.serving.config import estimated_iterations

    def config(requests: int, tokens: int) -> ServingConfig:
        return ServingConfig.model_validate({"workload": {
            "arrivals": {"kind": "burst"}, "requests": requests,
            "output_len": {"kind": "fixed", "tokens": tokens}}})  # fmt: skip

    assert estimated_iterations(config(10_000_000, 1 << 24)) > serve.LARGE_RUN_ITERATIONS
    assert estimated_iterations(config(4, 8)) < 100
    monkeypatch.setattr(serve, "LARGE_RUN_ITERATIONS", 5)
    result = RUNNER.invoke(app, ["serve", "--chip", "h100-sxm", "--model", "tiny-test",
                                 "--engine", "roofline", "--requests", "4", "--output-len", "8",
                                 "--arrivals", "burst"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "note: about" in result.output and "iterations to simulate" in result.output
    help_text = " ".join(RUNNER.invoke(app, ["serve", "--help"]).output.split())
    assert "10,000,000 iterations" in help_text
