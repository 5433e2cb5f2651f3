"""Model presets: parameter counts against published figures, HF config loading, bad files."""

import json
from pathlib import Path

import pytest

from infersim.errors import ConfigError
from infersim.workloads import list_models, load_model

# name: (published total, published active or None, relative rounding of the published figure)
PUBLISHED = {
    "llama-2-7b": (6.74e9, None),
    "llama-2-13b": (13.02e9, None),
    "llama-2-70b": (68.98e9, None),  # the issue's ≈ 69.0B
    "llama-3-8b": (8.03e9, None),
    "llama-3-70b": (70.55e9, None),
    "mistral-7b": (7.24e9, None),
    "mixtral-8x7b": (46.7e9, 12.9e9),
    "deepseek-v2-lite": (15.7e9, 2.4e9),
    "gpt-3-175b": (175.0e9, None),
    "opt-1.3b": (1.316e9, None),
}
REQUIRED = set(PUBLISHED) | {"tiny-test"}


def test_required_presets_ship():
    assert set(list_models()) >= REQUIRED


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_within_one_percent(name):
    total, _ = PUBLISHED[name]
    model = load_model(name)
    assert model.params() == pytest.approx(total, rel=0.01)
    assert model.source


def test_mixtral_active_parameters():
    model = load_model("mixtral-8x7b")
    assert model.params(active=True) == pytest.approx(12.9e9, rel=0.01)


def test_deepseek_v2_lite_active_parameters_by_its_convention():
    """DeepSeek counts activated parameters without the input embedding table (a lookup, no
    compute); its 2.4B is rounded to two digits, so [2.35, 2.45]B, within 1%."""
    model = load_model("deepseek-v2-lite")
    active = model.params(active=True) - model.vocab_size * model.hidden_size
    assert 2.35e9 * 0.99 <= active <= 2.45e9 * 1.01


def test_gqa_mqa_mla_shapes():
    assert load_model("llama-2-70b").kv_heads == 8
    assert load_model("llama-2-7b").kv_heads == 32
    ds = load_model("deepseek-v2-lite")
    assert ds.is_mla and ds.kv_elements_per_token() == 512 + 64
    assert load_model("llama-3-8b").kv_elements_per_token() == 2 * 8 * 128


def test_gpt2_and_opt_spellings_are_understood():
    gpt3 = load_model("gpt-3-175b")
    assert (gpt3.hidden_size, gpt3.num_hidden_layers, gpt3.intermediate_size) == (12288, 96, 49152)
    opt = load_model("opt-1.3b")
    assert opt.intermediate_size == 8192 and opt.norm == "layer" and opt.mlp == "plain"


def test_user_config_json_loads(tmp_path: Path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    config = json.loads((Path(__file__).parents[2] / "infersim/workloads/presets/llama-3-8b.json")
                        .read_text())
    config["num_hidden_layers"] = 16
    (folder / "config.json").write_text(json.dumps(config))
    model = load_model(folder / "config.json")
    assert model.name == "my-model"
    assert model.num_hidden_layers == 16
    assert model.params() < load_model("llama-3-8b").params()


@pytest.mark.parametrize(("text", "match"), [
    ("{not json", r"malformed JSON at line 1"),
    ('{"hidden_size": -5, "intermediate_size": 10, "num_hidden_layers": 1, '
     '"num_attention_heads": 1, "vocab_size": 10}', r"hidden_size = -5"),
    ('{"hidden_size": 64}', r"num_hidden_layers: required field is missing"),
    ('{"hidden_size": 64, "intermediate_size": 10, "num_hidden_layers": 1, '
     '"num_attention_heads": 6, "num_key_value_heads": 4, "vocab_size": 10}', r"not a multiple"),
    ("[1, 2]", r"expected a mapping"),
])
def test_bad_config_json_is_a_clear_error(tmp_path: Path, text, match):
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_model(path)


def test_unknown_model_lists_presets():
    with pytest.raises(ConfigError, match="unknown model 'llama-5'.*llama-3-8b"):
        load_model("llama-5")
