"""Architectures by model_type: defaults from the architecture, per-layer attention, nested
text configs, quantization configs, snapshot folders, refusals and unknown-field warnings."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from infersim.errors import ConfigError
from infersim.workloads import Precision, load_model
from infersim.workloads.architectures import ARCHITECTURES
from infersim.workloads.graph import decode_step, kv_cache_bytes
from infersim.workloads.models import ModelConfig
from infersim.workloads.ops import Attention

GEMMA2_9B = {
    "model_type": "gemma2", "hidden_size": 3584, "intermediate_size": 14336,
    "num_hidden_layers": 42, "num_attention_heads": 16, "num_key_value_heads": 8,
    "head_dim": 256, "vocab_size": 256000, "sliding_window": 4096,
    "max_position_embeddings": 8192, "query_pre_attn_scalar": 256,
    "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
}  # fmt: skip
"""google/gemma-2-9b's shape fields (its config.json leaves tie_word_embeddings out)."""

BF16 = Precision()


def write(folder: Path, doc: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.json"
    path.write_text(json.dumps(doc))
    return path


def test_every_architecture_builds_a_small_model():
    for name in ARCHITECTURES:
        model = ModelConfig(model_type=name, hidden_size=64, num_hidden_layers=2,
                            num_attention_heads=4, vocab_size=100)  # fmt: skip
        assert model.params() > 0, name
        assert model.unknown_fields == (), name


def test_gemma_ties_its_lm_head_without_the_field():
    model = ModelConfig(**GEMMA2_9B)
    assert model.tie_word_embeddings and model.lm_head_params() == 0
    assert model.params() == pytest.approx(9.24e9, rel=0.01)  # Gemma 2 report: 9.24B
    untied = ModelConfig(**GEMMA2_9B, tie_word_embeddings=False)
    assert untied.params() - model.params() == 256000 * 3584


def test_gemma2_alternates_sliding_and_global_layers():
    model = ModelConfig(**GEMMA2_9B)
    assert model.layer_types is not None
    assert model.layer_types[:2] == ("sliding_attention", "full_attention")
    assert model.attention_groups() == [(4096, 21), (None, 21)]
    # 21 layers keep 4096 tokens, 21 keep all 8192; 2 x 8 x 256 elements per token, bf16
    assert kv_cache_bytes(model, 1, 8192, BF16) == pytest.approx(2.11e9, rel=0.01)
    assert kv_cache_bytes(model, 1, 2048, BF16) == 42 * 2048 * 2 * 8 * 256 * 2


def test_gemma3_keeps_five_sliding_layers_per_global_one():
    model = ModelConfig(model_type="gemma3_text", hidden_size=1152, intermediate_size=6912,
                        num_hidden_layers=26, num_attention_heads=4, num_key_value_heads=1,
                        head_dim=256, vocab_size=262144, sliding_window=512,
                        sliding_window_pattern=6)  # fmt: skip
    assert model.attention_groups() == [(512, 22), (None, 4)]
    # 22 layers keep 512 tokens, 4 keep all; 2 x 1 x 256 elements per token, bf16
    assert kv_cache_bytes(model, 1, 32768, BF16) == pytest.approx(146e6, rel=0.01)
    assert kv_cache_bytes(model, 1, 1024, BF16) == (22 * 512 + 4 * 1024) * 2 * 256 * 2


def test_decode_attention_splits_by_window_and_grows_with_context():
    model = ModelConfig(**GEMMA2_9B)
    attn = [op for op in decode_step(model, 1, 16384) if isinstance(op, Attention)]
    assert sorted((op.window, op.count) for op in attn if op.window) == [(4096, 21)]
    assert sum(op.count for op in attn) == 42
    short = sum(op.kv_bytes * op.count for op in decode_step(model, 1, 2048)
                if isinstance(op, Attention))  # fmt: skip
    long = sum(op.kv_bytes * op.count for op in attn)
    assert long > 4 * short  # 21 layers read 16k tokens instead of 2k


def test_mistral_window_applies_to_every_layer_and_qwen_only_when_enabled():
    mistral = load_model("mistral-7b")
    assert mistral.attention_groups() == [(4096, 32)]
    qwen = ModelConfig(model_type="qwen2", hidden_size=3584, intermediate_size=18944,
                       num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
                       vocab_size=152064, sliding_window=131072, use_sliding_window=False,
                       max_window_layers=28)  # fmt: skip
    assert qwen.sliding_window is None and qwen.attention_groups() == [(None, 28)]
    assert qwen.attention_bias
    windowed = ModelConfig(model_type="qwen2", hidden_size=64, num_hidden_layers=4,
                           num_attention_heads=4, vocab_size=100, sliding_window=16,
                           use_sliding_window=True, max_window_layers=1)  # fmt: skip
    assert windowed.attention_groups() == [(16, 3), (None, 1)]


def test_a_pipeline_stage_keeps_the_layer_pattern_proportions():
    model = ModelConfig(**GEMMA2_9B)
    stage = model.model_copy(update={"num_hidden_layers": 21})
    groups = dict(stage.attention_groups())
    assert groups[4096] + groups[None] == 21 and abs(groups[4096] - groups[None]) <= 1


def test_gptj_null_inner_size_is_four_times_the_width():
    model = ModelConfig(model_type="gptj", n_embd=4096, n_layer=28, n_head=16, n_inner=None,
                        n_positions=2048, vocab_size=50400, rotary_dim=64)  # fmt: skip
    assert model.intermediate_size == 16384 and model.norms_per_layer == 1
    assert model.params() == pytest.approx(6.05e9, rel=0.01)  # EleutherAI: 6,053,381,344


def test_falcon_kv_heads_by_decoder_architecture():
    new = ModelConfig(model_type="falcon", hidden_size=14848, num_hidden_layers=80,
                      num_attention_heads=232, num_kv_heads=8, new_decoder_architecture=True,
                      vocab_size=65024, parallel_attn=True, bias=False)  # fmt: skip
    assert new.kv_heads == 8 and new.mlp == "plain" and new.intermediate_size == 4 * 14848
    assert not new.attention_bias and not new.mlp_bias
    old = ModelConfig(model_type="falcon", hidden_size=4544, num_hidden_layers=32,
                      num_attention_heads=71, multi_query=True, vocab_size=65024,
                      parallel_attn=True, bias=False)  # fmt: skip
    assert old.kv_heads == 1 and old.norms_per_layer == 1
    assert old.params() == pytest.approx(7.22e9, rel=0.01)  # tiiuae/falcon-7b: 7.22B stored
    assert 179e9 <= ModelConfig(**{**new.model_dump(exclude={"notes", "unknown_fields"}),
                                   "model_type": "falcon"}).params() <= 181e9


def test_unknown_and_refused_model_types_are_clear_errors():
    with pytest.raises(ValueError, match=r"'llama9' is not supported; supported: .*gemma2"):
        ModelConfig(model_type="llama9", hidden_size=64, num_hidden_layers=2,
                    num_attention_heads=4, vocab_size=100)  # fmt: skip
    with pytest.raises(ValueError, match="state-space"):
        ModelConfig(model_type="mamba", hidden_size=64, num_hidden_layers=2,
                    num_attention_heads=4, vocab_size=100)  # fmt: skip
    with pytest.raises(ValueError, match="'linear_attention' cannot be costed"):
        ModelConfig(model_type="qwen3", hidden_size=64, num_hidden_layers=2,
                    num_attention_heads=4, vocab_size=100, sliding_window=8,
                    layer_types=["linear_attention", "full_attention"])  # fmt: skip


def test_model_type_from_the_architectures_class_name():
    model = ModelConfig(architectures=["Gemma2ForCausalLM"], **{
        k: v for k, v in GEMMA2_9B.items() if k != "model_type"})
    assert model.model_type == "gemma2" and model.tie_word_embeddings


def test_a_field_that_is_not_understood_warns(tmp_path: Path):
    path = write(tmp_path / "odd", {**GEMMA2_9B, "num_memory_tokens": 64})
    with pytest.warns(UserWarning, match="not understood, not costed: num_memory_tokens"):
        model = load_model(path)
    assert model.unknown_fields == ("num_memory_tokens",)
    assert any("num_memory_tokens" in note for note in model.notes)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_model(write(tmp_path / "plain", GEMMA2_9B))  # known fields only: no warning


def test_nested_text_config_and_snapshot_folder(tmp_path: Path):
    doc = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
           "text_config": {"model_type": "gemma3_text", "hidden_size": 2560,
                           "intermediate_size": 10240, "num_hidden_layers": 34,
                           "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                           "vocab_size": 262208, "sliding_window": 1024},
           "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152}}  # fmt: skip
    write(tmp_path / "gemma-3-4b", doc)
    model = load_model(tmp_path / "gemma-3-4b")  # the folder, not the file
    assert model.name == "gemma-3-4b" and model.model_type == "gemma3_text"
    assert model.attention_groups() == [(1024, 29), (None, 5)]
    assert any("vision encoder is not costed" in note for note in model.notes)
    with pytest.raises(ConfigError, match="has no config.json"):
        load_model(tmp_path)


@pytest.mark.parametrize(
    ("quant", "weights"),
    [
        ({"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}, "fp8_e4m3"),
        ({"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn"]},
         "mxfp4"),
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, "int4-g128"),
        ({"quant_method": "gptq", "bits": 4, "group_size": 128}, "int4-g128"),
        ({"quant_method": "bitsandbytes", "load_in_8bit": True}, "int8"),
    ],
)  # fmt: skip
def test_quantization_config_is_the_checkpoint_weight_format(quant, weights):
    model = ModelConfig(**GEMMA2_9B, quantization_config=quant)
    assert model.quantized_weights == weights


def test_unknown_quantization_method_is_noted():
    model = ModelConfig(**GEMMA2_9B, quantization_config={"quant_method": "hqq", "nbits": 3})
    assert model.quantized_weights is None
    assert any("hqq" in note for note in model.notes)


def test_cli_unknown_model_type_is_exit_2_with_the_list(tmp_path: Path):
    from typer.testing import CliRunner

    from infersim.cli import app

    path = write(tmp_path / "odd", {**GEMMA2_9B, "model_type": "llama9"})
    result = CliRunner().invoke(app, ["simulate", "--chip", "h100-sxm", "--model", str(path)])
    assert result.exit_code == 2
    assert "'llama9' is not supported; supported:" in result.output and "gemma2" in result.output


def test_a_context_beyond_the_trained_length_is_noted():
    from infersim import Scenario, load_chip, simulate

    model = load_model("llama-2-7b")  # max_position_embeddings 4096
    cost = simulate(load_chip("h100-sxm"), model, Scenario(phase="decode", context_len=8192),
                    engine="roofline")  # fmt: skip
    assert any("exceed" in n and "max_position_embeddings" in n for n in cost.notes)
    short = simulate(load_chip("h100-sxm"), model, Scenario(phase="decode", context_len=1024),
                     engine="roofline")  # fmt: skip
    assert not any("max_position_embeddings" in n for n in short.notes)
