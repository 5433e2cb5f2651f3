"""Real Hugging Face config.json texts (tests/workloads/hf_configs/, sources in SOURCES.yaml)
load through their architecture and count within 1% of the published parameter counts; the
architectures infersim cannot cost are refused with the reason."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import yaml

from infersim.errors import ConfigError
from infersim.workloads import Precision, load_model
from infersim.workloads.graph import kv_cache_bytes

CONFIGS = Path(__file__).parent / "hf_configs"

# file: (published total, published active or None, counting convention), each cited
PUBLISHED: dict[str, tuple[float, float | None]] = {
    "gemma-2-9b.json": (9_241_705_984, None),  # Gemma 2 report, Table 1 (917.5M + 8,324M)
    "gemma-3-1b-it.json": (1_000e6, None),  # Gemma 3 report, Table 1 (302M + 698M)
    "gemma-3-4b-it.json": (3_884e6, None),  # Gemma 3 report: 675M + 3,209M (text; vision 417M)
    "derived-gemma-7b.json": (8_538_074_112, None),  # google/gemma-7b model card
    "falcon-180B.json": (179.5e9, None),  # "180B"; its bf16 shards: 334.4 GiB = 179.5B
    "falcon-7b.json": (7.22e9, None),  # tiiuae/falcon-7b: 7.22B stored (lm_head beside embedding)
    "derived-gpt-j-6b.json": (6_053_381_344, None),  # EleutherAI/gpt-j-6b card
    "derived-gpt-neox-20b.json": (20_554_567_680, None),  # Black et al. 2022, Table 1
    "derived-pythia-1b.json": (1_011_781_632, None),  # EleutherAI/pythia README, total
    "derived-bloom-560m.json": (559_214_592, None),  # bigscience/bloom-560m card
    "derived-opt-1.3b.json": (1.316e9, None),  # Zhang et al. 2022 ("1.3B"), as the preset
    "derived-mistral-7b-v0.1.json": (7.24e9, None),  # mistralai/Mistral-7B-v0.1 (HF: 7.24B)
    "gpt2.json": (124_439_808, None),  # openai-community/gpt2 (HF: 124M)
    "gpt-oss-20b.json": (20.91e9, 3.61e9),  # OpenAI gpt-oss model card, Table 1
    "qwen2.5-7b.json": (7.61e9, None),  # Qwen/Qwen2.5-7B card: 7.61B
    "qwen3-8b.json": (8.2e9, None),  # Qwen/Qwen3-8B card: 8.2B
    "qwen3-30b-a3b.json": (30.5e9, 3.3e9),  # Qwen/Qwen3-30B-A3B card: 30.5B, 3.3B activated
    "qwen2-57b-a14b.json": (57.4e9, 14.2e9),  # Qwen2 report, Table 1: 57B/14B (57.41B stored)
    "llama-3.2-1b-instruct.json": (1.23e9, None),  # meta-llama/Llama-3.2-1B card: 1.23B
    "mixtral-8x7b-v0.1.json": (46.7e9, 12.9e9),  # Jiang et al. 2024
    "phi-3-mini-4k-instruct.json": (3.821e9, None),  # microsoft/Phi-3-mini card: 3.8B
    "deepseek-v3.json": (671e9, 37e9),  # DeepSeek-V3 report (without the 14B MTP module)
    "deepseek-v2-lite.json": (15.7e9, 2.4e9),  # DeepSeek-V2 report, Appendix B
}
EMBEDDING_EXCLUDED_FROM_ACTIVE = {"gpt-oss-20b.json", "deepseek-v3.json", "deepseek-v2-lite.json"}
"""Whose published active count leaves out the input embedding table (a lookup)."""
ROUNDED_ACTIVE = {"qwen3-30b-a3b.json": 0.05, "deepseek-v3.json": 0.03,
                  "deepseek-v2-lite.json": 0.03, "qwen2-57b-a14b.json": 0.01}  # fmt: skip
"""Active counts published to two digits ('3.3B', '37B', '2.4B'): half a unit of the last
digit, as relative tolerance."""
REFUSED = {"mamba-2.8b.json": "state-space", "qwen3.5-35b-a3b.json": "linear-attention"}


def test_every_shipped_config_is_covered_and_cited():
    files = {p.name for p in CONFIGS.glob("*.json")}
    assert files == set(PUBLISHED) | set(REFUSED)
    cited = {f["name"] for f in yaml.safe_load((CONFIGS / "SOURCES.yaml").read_text())["files"]}
    assert files <= cited


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_real_config_counts_within_one_percent(name: str):
    total, active = PUBLISHED[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every key of a real config is understood
        model = load_model(CONFIGS / name)
    assert model.params() == pytest.approx(total, rel=0.01)
    if active is not None:
        counted = model.params(active=True)
        if name in EMBEDDING_EXCLUDED_FROM_ACTIVE:
            counted -= model.vocab_size * model.hidden_size
        assert counted == pytest.approx(active, rel=max(0.01, ROUNDED_ACTIVE.get(name, 0)))


def test_real_configs_per_layer_attention_and_formats():
    oss = load_model(CONFIGS / "gpt-oss-20b.json")
    assert oss.attention_groups() == [(128, 12), (None, 12)]
    assert oss.quantized_weights == "mxfp4"
    bf16 = Precision()
    assert kv_cache_bytes(oss, 1, 1024, bf16) == pytest.approx(28.3e6, rel=0.01)
    assert kv_cache_bytes(oss, 1, 32768, bf16) == pytest.approx(808e6, rel=0.01)
    assert load_model(CONFIGS / "deepseek-v3.json").quantized_weights == "fp8_e4m3"
    assert load_model(CONFIGS / "qwen2.5-7b.json").attention_groups() == [(None, 28)]
    assert load_model(CONFIGS / "gemma-2-9b.json").tie_word_embeddings
    assert load_model(CONFIGS / "falcon-180B.json").kv_heads == 8
    assert load_model(CONFIGS / "falcon-7b.json").kv_heads == 1


@pytest.mark.parametrize(("name", "why"), sorted(REFUSED.items()))
def test_architectures_that_cannot_be_costed_are_refused(name: str, why: str):
    with pytest.raises(ConfigError, match=why):
        load_model(CONFIGS / name)
