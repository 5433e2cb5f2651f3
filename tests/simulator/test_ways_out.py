"""A step that does not fit is still answered, with every way out simulated (issue: 'it does not
fit in VRAM — what now?')."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from infersim import Scenario, load_chip, load_model, simulate
from infersim.cli import app

H100 = load_chip("h100-sxm")


def _decode(**kw) -> Scenario:
    return Scenario(phase="decode", **{"batch": 1, "context_len": 128, **kw})


def test_a_70b_on_one_h100_gets_every_way_out_priced():
    cost = simulate(H100, load_model("llama-2-70b"), _decode(), engine="roofline")
    assert not cost.memory.fits and cost.tpot_s > 0  # the question asked is still answered
    ways = {w.techniques: w for w in cost.ways_out}
    assert {"tp=2", "int8-weight", "int4-awq"} <= set(ways)
    assert any(w.kind == "offload" for w in cost.ways_out)
    for way in cost.ways_out:
        assert way.cost.memory.fits, way.techniques
        assert way.cost.ways_out == ()
    assert ways["tp=2"].cost.chips == 2
    assert ways["int4-awq"].cost.tpot_s < ways["int8-weight"].cost.tpot_s < cost.tpot_s
    offload = next(w for w in cost.ways_out if w.kind == "offload")
    assert offload.cost.tpot_s > 10 * cost.tpot_s  # the host-link cliff shows
    assert offload.cost.bound == "host"


def test_the_smallest_ways_are_chosen():
    cost = simulate(H100, load_model("llama-2-70b"), _decode(), engine="roofline")
    offload = next(w for w in cost.ways_out if w.kind == "offload")
    fraction = float(offload.techniques.split("=")[1])
    less = simulate(H100, load_model("llama-2-70b"), _decode(), engine="roofline",
                    techniques=f"offload={fraction - 0.01:.2f}", ways_out=False)  # fmt: skip
    assert not less.memory.fits


def test_kv_batch_and_context_ways_when_the_cache_overflows():
    scenario = _decode(batch=20, context_len=32768)
    cost = simulate(H100, load_model("llama-3-8b"), scenario, engine="roofline")
    assert not cost.memory.fits and cost.memory.weights_bytes < H100.dram.capacity_bytes
    kinds = {w.kind: w for w in cost.ways_out}
    assert kinds["kv"].techniques == "kv-fp8"
    batch = kinds["batch"].cost.batch
    assert 1 <= batch < 20
    bigger = simulate(H100, load_model("llama-3-8b"), _decode(batch=batch + 1, context_len=32768),
                      engine="roofline", ways_out=False)  # fmt: skip
    assert not bigger.memory.fits  # the largest batch that fits
    assert kinds["context"].cost.context_len < 32768


def test_a_fitting_step_and_a_chip_without_links():
    assert simulate(H100, load_model("llama-3-8b"), _decode(), engine="roofline").ways_out == ()
    npu = load_chip("edge-npu")
    cost = simulate(npu, load_model("llama-3-8b"), _decode(), engine="roofline")
    if not cost.memory.fits:
        kinds = {w.kind for w in cost.ways_out}
        if npu.chip_link is None:
            assert "tp" not in kinds and "tp+pp" not in kinds
        if npu.host_link is None:
            assert "offload" not in kinds


def test_simulate_json_and_table_show_the_ways_out():
    runner = CliRunner()
    result = runner.invoke(app, ["simulate", "--chip", "h100-sxm", "--model", "llama-2-70b",
                                 "--context", "128", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["fits"] is False and doc["memory"]["fits"] is False
    ways = {w["techniques"]: w for w in doc["ways_out"]}
    assert {"tp=2", "int8-weight", "int4-awq"} <= set(ways)
    assert any(w["kind"] == "offload" for w in doc["ways_out"])
    assert len({w["tpot_s"] for w in doc["ways_out"]}) == len(doc["ways_out"])
    table = runner.invoke(app, ["simulate", "--chip", "h100-sxm", "--model", "llama-2-70b",
                                "--context", "128"])  # fmt: skip
    assert table.exit_code == 0
    assert "does not fit" in table.stdout and "ways out" in table.stdout
    assert "int4-awq" in table.stdout


@pytest.mark.parametrize("weights", [None, "bf16"])
def test_checkpoint_format_is_the_default_weights(tmp_path, weights):
    doc = json.loads(load_model("llama-3-8b").model_dump_json())
    doc = {k: v for k, v in doc.items() if v is not None and k not in ("notes", "unknown_fields",
                                                                       "layer_types")}
    doc["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3"}
    path = tmp_path / "fp8-llama" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(doc))
    model = load_model(path)
    precision = {} if weights is None else {"weights": weights}
    cost = simulate(H100, model, Scenario(phase="decode", precision=precision), engine="roofline")
    base = simulate(H100, load_model("llama-3-8b"), Scenario(phase="decode"), engine="roofline")
    ratio = cost.memory.weights_bytes / base.memory.weights_bytes
    if weights is None:
        assert ratio == pytest.approx(0.5, rel=0.05)  # fp8 checkpoint: half the bf16 bytes
        assert any("quantization_config" in n for n in cost.notes)
    else:
        assert ratio == pytest.approx(1.0)
