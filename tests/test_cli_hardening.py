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
