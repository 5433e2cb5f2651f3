"""GGUF: ggml block layouts, llama-quantize mixes against published file sizes, header reading,
and per-role weight bits in the operator graph."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import gguf
import numpy as np
import pytest

from infersim import dtypes, simulate
from infersim.arch_models import load_chip
from infersim.errors import ConfigError
from infersim.workloads import Gemm, Precision, Scenario, graph
from infersim.workloads.gguf.blocks import BLOCK_LAYOUTS, BLOCK_TYPES, GGML_TYPE_SIZES
from infersim.workloads.gguf.presets import (
    PRESETS,
    role_bits,
    role_dequant_ops,
    tensor_types,
    weights_bytes,
)
from infersim.workloads.gguf.reader import model_fields, read_gguf
from infersim.workloads.gguf.tensors import role_mix, tensor_role
from infersim.workloads.graph import GraphOptions, decode_step
from infersim.workloads.models import ModelConfig, list_models, load_model

GB, GIB = 1e9, 2**30
Q = gguf.GGMLQuantizationType

# --- block types -------------------------------------------------------------------------------

BITS = {
    "F32": 32, "F16": 16, "BF16": 16, "Q4_0": 4.5, "Q4_1": 5.0, "Q5_0": 5.5, "Q5_1": 6.0,
    "Q8_0": 8.5, "Q2_K": 2.625, "Q3_K": 3.4375, "Q4_K": 4.5, "Q5_K": 5.5, "Q6_K": 6.5625,
    "IQ1_S": 1.5625, "IQ1_M": 1.75, "IQ2_XXS": 2.0625, "IQ2_XS": 2.3125, "IQ2_S": 2.5625,
    "IQ3_XXS": 3.0625, "IQ3_S": 3.4375, "IQ4_NL": 4.5, "IQ4_XS": 4.25, "TQ1_0": 1.6875,
    "TQ2_0": 2.0625, "MXFP4": 4.25,
}  # fmt: skip
"""Bits per weight from the ggml-common.h block structs (the comments there say the same)."""


@pytest.mark.parametrize(("name", "bits"), BITS.items())
def test_bits_per_weight_from_the_block_layout(name, bits):
    block = BLOCK_TYPES[name]
    assert block.bits_per_weight == bits
    assert 8 * sum(n for _, n in BLOCK_LAYOUTS[name]) / block.block_size == bits


def test_every_gguf_type_is_described_and_matches_ggml_quant_sizes():
    assert {t.name for t in Q} == set(BLOCK_TYPES)
    for qtype in Q:
        block = BLOCK_TYPES[qtype.name]
        assert (block.block_size, block.block_bytes) == gguf.GGML_QUANT_SIZES[qtype]
        layout = sum(n for _, n in BLOCK_LAYOUTS[qtype.name])
        if qtype.name == "Q8_1":  # gguf: 2 fp32 + 32 int8; ggml-common.h: 2 fp16 + 32 int8
            assert (layout, block.block_bytes) == (36, 40)
            continue
        assert layout == block.block_bytes
        assert block.dequant_ops_per_weight >= 0


def test_dequant_cost_grows_with_the_decode_work():
    ops = {name: b.dequant_ops_per_weight for name, b in BLOCK_TYPES.items()}
    assert ops["F32"] == 0 < ops["F16"] == ops["Q8_0"]
    assert ops["Q4_0"] < ops["Q5_0"] and ops["Q4_K"] < ops["Q5_K"]
    assert ops["IQ4_NL"] < ops["IQ2_XXS"] < ops["IQ1_S"]


# --- published sizes ---------------------------------------------------------------------------

LLAMA3_8B_HEADER = 7_835_936
"""Metadata + tensor infos of a Meta-Llama-3-8B-Instruct GGUF: file size minus our tensor bytes,
the same to the byte for all seven byte-exact files below (tokenizer: 128,256 tokens and
280,147 merges, chat template); 0.05-0.25 % of the files."""
LLAMA3_70B_HEADER = 8_374_752
"""The same for Meta-Llama-3-70B-Instruct (hermes42's Q4_0 and Q6_K files, byte-exact)."""
HEADER = {"llama-3-8b": LLAMA3_8B_HEADER, "llama-3-70b": LLAMA3_70B_HEADER}

DDH0 = "https://huggingface.co/ddh0/UnquantizedEmbeddingTesting/raw/main/sizes.txt"
HERMES = "https://huggingface.co/hermes42/Meta-Llama-3-70B-Instruct-GGUF"
MRAD = "https://huggingface.co/mradermacher/Meta-Llama-3-70B-Instruct-GGUF/tree/e32d7d1d3eb6255c06dcae8f11ffe610985f7f2d"
MRAD_BASE = "https://huggingface.co/mradermacher/Meta-Llama-3-70B-GGUF/tree/main"

PUBLISHED_BYTES = [
    # (model, preset, imatrix, file bytes): LFS sizes / `ls -l` in bytes, byte-exact
    # ddh0/UnquantizedEmbeddingTesting sizes.txt (DDH0), Meta-Llama-3-8B-Instruct-<type>.gguf
    ("llama-3-8b", "q2_k", None, 3_179_131_168),
    ("llama-3-8b", "q3_k_s", None, 3_664_498_976),
    ("llama-3-8b", "q3_k_m", None, 4_018_917_664),
    ("llama-3-8b", "q3_k_l", None, 4_321_956_128),
    ("llama-3-8b", "q4_k_s", None, 4_692_668_704),
    ("llama-3-8b", "q4_k_m", None, 4_920_733_984),
    ("llama-3-8b", "bf16", None, 16_068_890_912),
    # hermes42/Meta-Llama-3-70B-Instruct-GGUF commit 83c2377, Meta-Llama-3-70B-Instruct.Q4_0.gguf:
    # the first upload (no imatrix) and its replacement (with one: Q4_1 in the first ffn_down)
    ("llama-3-70b", "q4_0", False, 39_970_245_088),
    ("llama-3-70b", "q4_0", True, 40_117_045_728),
    # hermes42 commits 90ea329 + 0bbe045: Meta-Llama-3-70B-Instruct.Q6_K.0000{1,2}-of-00002.gguf
    ("llama-3-70b", "q6_k", None, 32_212_254_720 + 25_676_401_120),
]

PUBLISHED_GB = [
    # (model, preset, imatrix, file GB as Hugging Face lists it, 3 significant digits)
    # QuantFactory/Meta-Llama-3-8B-Instruct-GGUF, Meta-Llama-3-8B-Instruct.Q4_0.gguf / .Q8_0.gguf
    ("llama-3-8b", "q4_0", None, 4.66),
    ("llama-3-8b", "q8_0", None, 8.54),
    # SanctumAI/Meta-Llama-3.1-8B-Instruct-GGUF, meta-llama-3.1-8b-instruct.Q4_1.gguf (3.1: same
    # tensor shapes plus a 64-float rope_freqs)
    ("llama-3-8b", "q4_1", None, 5.13),
    # armx40/Meta-Llama-3-8B-Instruct-GGUF tree 9467aa0, Meta-Llama-3-8B-Q5_0/Q5_K_S/Q5_K_M.gguf
    ("llama-3-8b", "q5_0", None, 5.6),
    ("llama-3-8b", "q5_k_s", None, 5.6),
    ("llama-3-8b", "q5_k_m", None, 5.73),
    # SanctumAI/Meta-Llama-3-8B-Instruct-GGUF, meta-llama-3-8b-instruct.Q5_1.gguf
    ("llama-3-8b", "q5_1", None, 6.07),
    # mradermacher/Meta-Llama-3-8B-Instruct-GGUF tree c94a041, Meta-Llama-3-8B-Instruct.Q6_K.gguf
    ("llama-3-8b", "q6_k", None, 6.6),
    # MRAD: Meta-Llama-3-70B-Instruct.<type>.gguf
    ("llama-3-70b", "q2_k", None, 26.4),
    ("llama-3-70b", "q3_k_s", None, 30.9),
    ("llama-3-70b", "q3_k_m", None, 34.3),
    ("llama-3-70b", "q3_k_l", None, 37.1),
    ("llama-3-70b", "q4_k_s", None, 40.3),
    ("llama-3-70b", "q4_k_m", None, 42.5),
    ("llama-3-70b", "q5_k_s", None, 48.7),
    # MRAD_BASE (the base model, same shapes): Meta-Llama-3-70B.Q5_K_M.gguf, Q8_0 in two parts
    ("llama-3-70b", "q5_k_m", None, 49.9),
    ("llama-3-70b", "q8_0", None, 37.6 + 37.4),
    # HERMES tree 03a771d: Meta-Llama-3-70B-Instruct.Q4_1.gguf; blob 29e44b0: .Q5_0.gguf
    ("llama-3-70b", "q4_1", None, 44.3),
    ("llama-3-70b", "q5_0", None, 48.7),
]


@pytest.mark.parametrize(("model", "preset", "imatrix", "published"), PUBLISHED_BYTES)
def test_file_bytes_are_tensor_bytes_plus_the_header_exactly(model, preset, imatrix, published):
    assert weights_bytes(load_model(model), preset, imatrix=imatrix) + HEADER[model] == published


@pytest.mark.parametrize(
    ("model", "preset", "imatrix", "published"),
    [*PUBLISHED_BYTES, *((m, p, i, gb * GB) for m, p, i, gb in PUBLISHED_GB)],
)
def test_file_size_within_two_percent_of_llama_quantize(model, preset, imatrix, published):
    ours = weights_bytes(load_model(model), preset, imatrix=imatrix) + HEADER[model]
    assert ours == pytest.approx(published, rel=0.02)
    assert ours == pytest.approx(published, rel=0.003)  # what the sources support


README = {
    # llama.cpp tools/quantize/README.md, "meta-llama/Llama-3.1-8B" table: bits/weight and size
    # in GiB of the tensors (llama-bench's model size; 3.1 has Llama-3-8B's shapes)
    "iq1_s": (2.0042, 1.87), "iq1_m": (2.1460, 2.01), "iq2_xxs": (2.3824, 2.23),
    "iq2_xs": (2.5882, 2.42), "iq2_s": (2.7403, 2.56), "iq2_m": (2.9294, 2.74),
    "iq3_xxs": (3.2548, 3.04), "iq3_xs": (3.4977, 3.27), "iq3_s": (3.6606, 3.42),
    "iq3_m": (3.7628, 3.52), "iq4_xs": (4.4597, 4.17), "iq4_nl": (4.6818, 4.38),
    "q2_k_s": (2.9697, 2.78), "q2_k": (3.1593, 2.95), "q3_k_s": (3.6429, 3.41),
    "q3_k_l": (4.2979, 4.02), "q4_k_s": (4.6672, 4.36), "q4_k_m": (4.8944, 4.58),
    "q5_k_s": (5.5704, 5.21), "q5_k_m": (5.7036, 5.33), "q6_k": (6.5633, 6.14),
    "q8_0": (8.5008, 7.95), "f16": (16.0005, 14.96),
}  # fmt: skip


@pytest.mark.parametrize(("preset", "bpw", "gib"), [(p, b, g) for p, (b, g) in README.items()])
def test_llama_cpp_readme_table(preset, bpw, gib):
    m = load_model("llama-3-8b")
    ours = weights_bytes(m, preset)
    assert 8 * ours / m.params() == pytest.approx(bpw, abs=5e-4)
    assert ours / GIB == pytest.approx(gib, abs=0.006)


def test_llama_3_70b_q3_k_m_tensor_types_match_a_loader_log():
    # ollama/ollama#10553 (https://github.com/ollama/ollama/issues/10553), Llama 3.1 70B Instruct
    # Q3_K_M: "type f32: 162, q3_K: 321, q4_K: 155, q5_K: 85, q6_K: 1; file size = 31.91 GiB"
    # (3.1's extra F32 tensor is rope_freqs)
    plans = tensor_types(load_model("llama-3-70b"), "q3_k_m")
    assert Counter(t.ggml_type for t in plans) == {
        "F32": 161, "Q3_K": 321, "Q4_K": 155, "Q5_K": 85, "Q6_K": 1}
    assert sum(t.n_bytes for t in plans) / GIB == pytest.approx(31.91, abs=0.006)


# --- preset rules ------------------------------------------------------------------------------


def _types(plans, role):
    return [t.ggml_type for t in plans if t.role == role]


def test_q4_k_m_gives_half_of_attn_v_and_ffn_down_more_bits():
    plans = tensor_types(load_model("llama-3-8b"), "q4_k_m")
    more = [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]  # use_more_bits(i, 32)
    for role in ("attn_v", "ffn_down"):
        assert [i for i, k in enumerate(_types(plans, role)) if k == "Q6_K"] == more
    assert set(_types(plans, "attn_q") + _types(plans, "ffn_up")) == {"Q4_K"}
    assert _types(plans, "token_embd") == ["Q4_K"] and _types(plans, "output") == ["Q6_K"]
    assert set(_types(plans, "attn_norm")) == {"F32"}


def test_llama_70b_attn_v_gets_one_step_more():
    q3m = tensor_types(load_model("llama-3-70b"), "q3_k_m")
    assert set(_types(q3m, "attn_v")) == {"Q5_K"}
    q3m_8b = tensor_types(load_model("llama-3-8b"), "q3_k_m")
    assert _types(q3m_8b, "attn_v")[:3] == ["Q5_K", "Q5_K", "Q4_K"]


def test_rows_that_are_not_whole_blocks_fall_back():
    m = load_model("tiny-test")  # hidden 64 (not a multiple of 256), intermediate 176 (nor of 32)
    plans = tensor_types(m, "q4_k_m")
    assert set(_types(plans, "attn_q") + _types(plans, "ffn_up")) == {"Q5_0"}
    assert set(_types(plans, "ffn_down")) == {"F16"}
    assert _types(plans, "output") == ["Q8_0"]
    assert set(_types(tensor_types(m, "iq2_xs"), "attn_q")) == {"IQ4_NL"}


def test_tied_embedding_is_quantized_as_the_output():
    m = load_model("llama-3-8b").model_copy(update={"tie_word_embeddings": True})
    plans = tensor_types(m, "q4_k_m")
    assert _types(plans, "token_embd") == ["Q6_K"] and not _types(plans, "output")
    bits = role_bits(m, "q4_k_m")
    assert bits["lm_head"] == bits["embedding"] == 6.5625


def test_eight_experts_and_mxfp4_moe():
    m = load_model("mixtral-8x7b")
    plans = tensor_types(m, "q4_k_m")
    assert set(_types(plans, "attn_v") + _types(plans, "attn_k")) == {"Q8_0"}
    assert set(_types(plans, "attn_output")) == {"Q5_K"}
    assert _types(plans, "ffn_gate_inp") == ["F32"] * 32
    bits = role_bits(m, "q4_k_m")
    assert bits["experts_up"] == 4.5 and "ffn_up" not in bits
    mx = tensor_types(m, "mxfp4_moe")
    assert set(_types(mx, "ffn_up_exps") + _types(mx, "ffn_down_exps")) == {"MXFP4"}
    assert set(_types(mx, "attn_q") + _types(mx, "output") + _types(mx, "token_embd")) == {"Q8_0"}


def test_mla_kv_b_is_quantized_like_attn_v():
    m = load_model("deepseek-v2-lite")
    plans = tensor_types(m, "q4_k_m")
    assert [i for i, k in enumerate(_types(plans, "attn_kv_b")) if k == "Q6_K"][:4] == [0, 1, 2, 5]
    assert set(_types(plans, "ffn_down_exps")) <= {"Q5_0", "Q8_0"}  # 1408 is not whole 256-blocks
    assert set(role_bits(m, "q4_k_m")) >= {"attn_qkv", "experts_up", "experts_down", "ffn_up"}


@pytest.mark.parametrize("name", list_models())
@pytest.mark.parametrize("preset", ["q4_k_m", "iq2_xs", "q8_0", "mxfp4_moe"])
def test_the_tensors_count_what_params_counts(name, preset):
    m = load_model(name)
    plans = tensor_types(m, preset)
    assert sum(t.n_elements for t in plans) == m.params()
    assert all(t.n_bytes == BLOCK_TYPES[t.ggml_type].row_bytes(t.n_elements) for t in plans)
    assert len({t.name for t in plans}) == len(plans)


def test_role_bits_and_dequant_ops_of_a_dense_model():
    m = load_model("llama-3-8b")
    bits = role_bits(m, "q4_k_m")
    assert set(bits) == {"attn_qkv", "attn_output", "ffn_up", "ffn_down", "lm_head", "embedding"}
    assert bits["ffn_up"] == bits["attn_output"] == 4.5
    assert bits["ffn_down"] == pytest.approx((16 * 6.5625 + 16 * 4.5) / 32)
    assert 4.5 < bits["attn_qkv"] < 5 and bits["lm_head"] == 6.5625
    ops = role_dequant_ops(m, "q4_k_m")
    assert ops["attn_output"] == BLOCK_TYPES["Q4_K"].dequant_ops_per_weight


def test_tensor_roles():
    assert tensor_role("blk.12.attn_kv_b.weight") == "attn_kv_b"
    assert tensor_role("blk.0.ffn_up.3.weight") == "ffn_up_exps"  # old per-expert Mixtral files
    assert tensor_role("output_norm.bias") == "output_norm"
    assert tensor_role("token_embd.weight") == "token_embd"


def test_unknown_preset_names_the_known_ones():
    with pytest.raises(ConfigError, match="unknown GGUF preset 'q4_k_x'.*q4_k_m"):
        tensor_types(load_model("tiny-test"), "q4_k_x")
    assert len(tensor_types(load_model("tiny-test"), "Q4_K_M")) > 0


def test_gguf_dtypes_are_presets_with_the_mix_average():
    m = load_model("llama-3-8b")
    assert set(dtypes.GGUF_FORMATS) <= set(PRESETS)
    for name in ("q4_1", "q5_0", "q5_1", "q2_k_s", "iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s",
                 "iq2_m", "iq3_xxs", "iq3_xs", "iq3_s", "iq3_m", "iq4_nl", "iq4_xs", "tq1_0",
                 "tq2_0"):  # fmt: skip
        info = dtypes.info(name)
        assert info.storage_only and "Llama-3-8B" in info.source
        assert info.bits == pytest.approx(8 * weights_bytes(m, name) / m.params(), abs=0.005)


# --- reading GGUF headers ----------------------------------------------------------------------


def _write(path: Path, arch: str, tensors: dict[str, tuple[np.ndarray, Q | None]],
           meta: dict[str, int], vocab: int) -> None:  # fmt: skip
    w = gguf.GGUFWriter(path, arch)
    w.add_name("tiny test")
    for key, value in meta.items():
        w.add_uint32(key if key.startswith("general.") else f"{arch}.{key}", value)
    w.add_token_list([f"tok{i}" for i in range(vocab)])
    for name, (data, raw) in tensors.items():
        w.add_tensor(name, data, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


LLAMA_META = {"block_count": 1, "context_length": 256, "embedding_length": 64,
              "feed_forward_length": 128, "attention.head_count": 4,
              "attention.head_count_kv": 2, "general.file_type": 7}  # fmt: skip


def test_a_small_file_reads_back_its_types_counts_and_bytes(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((128, 64)).astype(np.float32)  # numpy (rows, cols) = ggml ne (64, 128)
    tensors = {
        "token_embd.weight": (rng.standard_normal((100, 64)).astype(np.float16), None),
        "blk.0.attn_norm.weight": (np.ones(64, np.float32), None),
        "blk.0.ffn_up.weight": (gguf.quants.quantize(w, Q.Q8_0), Q.Q8_0),
        "blk.0.ffn_gate.weight": (gguf.quants.quantize(w, Q.Q4_0), Q.Q4_0),
        "blk.0.ffn_down.weight": (gguf.quants.quantize(w.T.copy(), Q.BF16), Q.BF16),
    }
    path = tmp_path / "tiny.gguf"
    _write(path, "llama", tensors, LLAMA_META, vocab=100)
    header = read_gguf(path)
    got = {t.name: (t.ggml_type, t.shape, t.n_elements, t.n_bytes) for t in header.tensors}
    assert got == {
        "token_embd.weight": ("F16", (64, 100), 6400, 12800),
        "blk.0.attn_norm.weight": ("F32", (64,), 64, 256),
        "blk.0.ffn_up.weight": ("Q8_0", (64, 128), 8192, 8192 // 32 * 34),
        "blk.0.ffn_gate.weight": ("Q4_0", (64, 128), 8192, 8192 // 32 * 18),
        "blk.0.ffn_down.weight": ("BF16", (128, 64), 8192, 16384),
    }
    assert header.total_bytes == sum(v[3] for v in got.values())
    assert header.architecture == "llama" and header.preset == "q8_0"
    assert header.header_bytes < header.file_bytes
    assert header.metadata["general.name"] == "tiny test"
    mix = role_mix(header.tensors)  # no output.weight: the embedding is the LM head
    assert mix["lm_head"] == mix["embedding"] and mix["lm_head"].bits_per_weight == 16
    assert mix["ffn_up"].n_bytes == 8192 // 32 * (34 + 18)
    model = ModelConfig(**model_fields(header))
    assert (model.hidden_size, model.intermediate_size, model.num_hidden_layers) == (64, 128, 1)
    assert (model.num_attention_heads, model.kv_heads, model.vocab_size) == (4, 2, 100)
    assert model.tie_word_embeddings and model.quantized_weights == "q8_0"
    assert model.name == "tiny test" and "tiny.gguf" in model.source


def test_a_planned_file_round_trips(tmp_path):
    model = ModelConfig(name="rt", model_type="llama", hidden_size=256, intermediate_size=512,
                        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                        vocab_size=320, max_position_embeddings=512)  # fmt: skip
    plans = tensor_types(model, "q4_k_m")
    tensors = {}
    for t in plans:
        qtype = Q[t.ggml_type]
        shape = gguf.quants.quant_shape_to_byte_shape(tuple(reversed(t.shape)), qtype)
        tensors[t.name] = (np.zeros(shape, np.uint8), qtype)
    meta = {**LLAMA_META, "embedding_length": 256, "feed_forward_length": 512,
            "block_count": 2, "context_length": 512, "general.file_type": 15}  # fmt: skip
    path = tmp_path / "rt.gguf"
    _write(path, "llama", tensors, meta, vocab=320)
    header = read_gguf(path)
    assert [(t.name, t.ggml_type, t.shape, t.n_bytes) for t in header.tensors] == [
        (t.name, t.ggml_type, t.shape, t.n_bytes) for t in plans]
    assert role_mix(header.tensors) == role_mix(plans)
    back = ModelConfig(**model_fields(header))
    assert back.params() == model.params() == header.n_elements
    assert not back.tie_word_embeddings and back.quantized_weights == "q4_k_m"
    assert [t.ggml_type for t in tensor_types(back, header.preset or "")] == [
        t.ggml_type for t in plans]


def _rss_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs Linux /proc")
def test_tensor_data_is_never_read(tmp_path):
    path = tmp_path / "big.gguf"
    rows, cols = 8192, 65536  # one 2 GiB F32 tensor, stored sparse
    w = gguf.GGUFWriter(path, "llama")
    for key, value in {**LLAMA_META, "embedding_length": cols}.items():
        w.add_uint32(key if key.startswith("general.") else f"llama.{key}", value)
    w.add_tensor_info("token_embd.weight", (rows, cols), np.dtype(np.float32), rows * cols * 4)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    start = -(-path.stat().st_size // 32) * 32
    os.truncate(path, start + rows * cols * 4)
    before = _rss_bytes()
    header = read_gguf(path)
    assert _rss_bytes() - before < 64 * 2**20
    assert header.total_bytes == 2 * GIB and header.header_bytes == start


def test_bad_files_name_the_path_and_the_reason(tmp_path):
    text = tmp_path / "notes.gguf"
    text.write_text("these are not weights\n")
    with pytest.raises(ConfigError, match=r"notes\.gguf: not a GGUF file"):
        read_gguf(text)
    with pytest.raises(ConfigError, match=r"missing\.gguf: cannot read"):
        read_gguf(tmp_path / "missing.gguf")
    good = tmp_path / "good.gguf"
    data = {"token_embd.weight": (np.zeros((100, 64), np.float16), None)}
    _write(good, "llama", data, LLAMA_META, vocab=100)
    raw = good.read_bytes()
    for cut in (40, len(raw) // 2, len(raw) - 1):
        short = tmp_path / f"short{cut}.gguf"
        short.write_bytes(raw[:cut])
        with pytest.raises(ConfigError, match=rf"short{cut}\.gguf: truncated"):
            read_gguf(short)
    bare = tmp_path / "bare.gguf"
    _write(bare, "llama", data, {"block_count": 1, "embedding_length": 64}, vocab=100)
    with pytest.raises(ConfigError, match=r"bare\.gguf: GGUF metadata lacks llama\.feed_forward"):
        read_gguf(bare)
    odd = tmp_path / "mamba.gguf"
    _write(odd, "mamba", data, {"block_count": 1}, vocab=100)
    with pytest.raises(ConfigError, match=r"mamba\.gguf: GGUF architecture 'mamba' is not"):
        read_gguf(odd)


# --- the package layout ------------------------------------------------------------------------


def test_block_and_preset_tables_match_the_installed_gguf_package():
    for qtype in Q:
        assert GGML_TYPE_SIZES[qtype.name] == gguf.GGML_QUANT_SIZES[qtype]
    ftypes = {t.name.removeprefix("MOSTLY_").removeprefix("ALL_").lower(): int(t.value)
              for t in gguf.LlamaFileType}  # fmt: skip
    assert {name: p.ftype for name, p in PRESETS.items()} == {
        name: ftypes[name] for name in PRESETS}


@pytest.mark.parametrize("module", ["infersim.workloads.gguf", "infersim.workloads",
                                    "infersim.cli"])  # fmt: skip
def test_importing_infersim_does_not_import_the_gguf_package(module):
    code = (f"import sys, {module}; "
            "print(sorted({'gguf', 'requests', 'tqdm'} & set(sys.modules)))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)  # fmt: skip
    assert out.stdout.strip() == "[]"


# --- per-role bits in the operator graph -------------------------------------------------------

H100 = load_chip("h100-sxm").with_(launch=None)  # the byte rules: without the launch overhead


def _gguf_published():
    """Every cited published size of a GGUF preset (bf16 is not one) as tensor bytes."""
    for model, preset, imatrix, published in PUBLISHED_BYTES:
        if preset in dtypes.GGUF_FORMATS:
            yield model, preset, imatrix, published - HEADER[model]
    for model, preset, imatrix, gb in PUBLISHED_GB:
        yield model, preset, imatrix, gb * GB - HEADER[model]
    for preset, (_, gib) in README.items():
        if preset in dtypes.GGUF_FORMATS:
            yield "llama-3-8b", preset, None, gib * GIB


@pytest.mark.parametrize(("model", "preset", "imatrix", "tensor_bytes"), list(_gguf_published()))
def test_graph_weights_bytes_are_the_published_tensor_bytes(model, preset, imatrix, tensor_bytes):
    m = load_model(model)
    ours = graph.weights_bytes(m, Precision(weights=preset))
    assert ours == pytest.approx(tensor_bytes, rel=0.02)
    assert ours == pytest.approx(weights_bytes(m, preset), rel=1e-12)  # the default imatrix


def test_the_preset_average_alone_misses_a_70b_q2_k():
    m = load_model("llama-3-70b")
    average = m.params() * dtypes.info("q2_k").bits / 8  # the Llama-2-7B-measured 3.35 bits
    published = 26.4 * GB - LLAMA3_70B_HEADER
    assert average / published > 1.1
    assert graph.weights_bytes(m, Precision(weights="q2_k")) == pytest.approx(published, rel=0.003)


def _weight_gemms(ops):
    return [op for op in ops if isinstance(op, Gemm) and op.b_is_weight]


@pytest.mark.parametrize("model", ["llama-3-8b", "llama-3-70b", "mistral-7b"])
@pytest.mark.parametrize("preset", ["q2_k", "q3_k_m", "q4_k_m", "iq2_xs", "q8_0"])
def test_decode_gemm_bytes_are_graph_weights_bytes(model, preset):
    m, p = load_model(model), Precision(weights=preset)
    ops = decode_step(m, batch=1, context_len=128, precision=p)
    gemms = _weight_gemms(ops)
    assert all(op.weight_bits is not None for op in gemms)
    table = m.vocab_size * m.hidden_size * graph.role_weight_bits(m, preset)["embedding"] / 8
    read = sum(op.weight_bytes * op.count for op in gemms)
    assert read + table == pytest.approx(graph.weights_bytes(m, p), rel=0.005)


def test_each_gemm_gets_its_role_bits():
    m = load_model("llama-3-8b")
    bits = role_bits(m, "q4_k_m")
    by_name = {op.name: op for op in _weight_gemms(
        decode_step(m, 1, 64, Precision(weights="q4_k_m")))}  # fmt: skip
    assert by_name["attn.o"].weight_bits == by_name["mlp.up"].weight_bits == 4.5
    assert by_name["attn.qkv"].weight_bits == bits["attn_qkv"]
    assert by_name["mlp.down"].weight_bits == bits["ffn_down"]
    assert by_name["lm_head"].weight_bits == 6.5625 and by_name["lm_head"].b_dtype == "q4_k_m"
    plain = decode_step(m, 1, 64, Precision(weights="int4-g128"))
    assert all(op.weight_bits is None for op in _weight_gemms(plain))


def test_moe_and_mla_roles():
    mixtral = load_model("mixtral-8x7b")
    bits = role_bits(mixtral, "q4_k_m")
    ops = {op.name: op for op in _weight_gemms(
        decode_step(mixtral, 1, 64, Precision(weights="q4_k_m")))}  # fmt: skip
    assert ops["moe.experts.up"].weight_bits == bits["experts_up"] == 4.5
    assert ops["moe.experts.down"].weight_bits == bits["experts_down"]
    assert ops["moe.router"].weight_bits == bits["router"] == 32  # llama.cpp keeps it F32
    lite = load_model("deepseek-v2-lite")
    bits = role_bits(lite, "q4_k_m")
    ops = {op.name: op for op in _weight_gemms(
        decode_step(lite, 1, 64, Precision(weights="q4_k_m")))}  # fmt: skip
    for name in ("attn.q", "attn.kv_a", "attn.q_absorb", "attn.o_absorb"):
        assert ops[name].weight_bits == bits["attn_qkv"]
    assert ops["moe.shared.up"].weight_bits == bits["ffn_up"]
    assert ops["moe.shared.down"].weight_bits == bits["ffn_down"]


def test_sparsity_still_compresses_gguf_and_other_weights():
    m = load_model("llama-3-8b")
    two_four = GraphOptions(sparsity="2:4")
    for weights in ("q4_k_m", "int8"):
        p = Precision(weights=weights)
        dense, sparse = graph.weights_bytes(m, p), graph.weights_bytes(m, p, two_four)
        assert 0.5 < sparse / dense < 0.75
    op = Gemm(m=1, k=256, n=256, b_dtype="q4_k_m", weight_bits=4.5, sparsity="2:4")
    assert op.b_bits == (4.5 + 2) / 2 and op.weight_bytes == 256 * 256 * 3.25 / 8


@pytest.mark.parametrize(("bits", "b_is_weight"), [(0, True), (65, True), (4.5, False)])
def test_gemm_weight_bits_are_validated(bits, b_is_weight):
    with pytest.raises(ValueError, match="weight_bits|greater than 0|less than or equal"):
        Gemm(m=1, k=32, n=32, weight_bits=bits, b_is_weight=b_is_weight)


@pytest.mark.parametrize("model", ["llama-3-8b", "llama-3-70b"])
def test_batch1_decode_speeds_up_by_the_q8_0_to_q2_k_byte_ratio(model):
    m = load_model(model)

    def step(weights):
        scenario = Scenario(phase="decode", batch=1, context_len=128,
                            precision=Precision(weights=weights))  # fmt: skip
        return simulate(H100, m, scenario, engine="roofline", ways_out=False)

    q8, q2 = step("q8_0"), step("q2_k")
    assert q8.bound == q2.bound == "memory"
    read = {w: sum(op.weight_bytes * op.count for op in _weight_gemms(
        decode_step(m, 1, 128, Precision(weights=w)))) for w in ("q8_0", "q2_k")}  # fmt: skip
    assert q8.latency_s / q2.latency_s == pytest.approx(read["q8_0"] / read["q2_k"], rel=0.03)
    assert q8.memory.weights_bytes == graph.weights_bytes(m, Precision(weights="q8_0"))


def test_a_gguf_file_is_a_model_with_its_own_mix(tmp_path):
    # a Q4_K_M-labelled file whose tensors are all Q8_0 (llama-quantize --pure, say): the
    # file's mix is costed, not the preset's rules
    model = ModelConfig(name="pure", model_type="llama", hidden_size=256, intermediate_size=512,
                        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                        vocab_size=320, max_position_embeddings=512)  # fmt: skip
    tensors = {}
    for t in tensor_types(model, "q4_k_m"):
        qtype = Q.F32 if t.ggml_type == "F32" else Q.Q8_0
        shape = gguf.quants.quant_shape_to_byte_shape(tuple(reversed(t.shape)), qtype)
        tensors[t.name] = (np.zeros(shape, np.uint8), qtype)
    meta = {**LLAMA_META, "embedding_length": 256, "feed_forward_length": 512,
            "block_count": 2, "context_length": 512, "general.file_type": 15}  # fmt: skip
    path = tmp_path / "pure.gguf"
    _write(path, "llama", tensors, meta, vocab=320)
    loaded = load_model(path)
    assert loaded is load_model(str(path))  # read once
    assert loaded.quantized_weights == "q4_k_m" and loaded.params() == model.params()
    assert loaded.weight_bits_by_role is not None
    assert loaded.weight_bits_by_role.model_dump(exclude_none=True) == dict.fromkeys(
        ("attn_qkv", "attn_output", "ffn_up", "ffn_down", "lm_head", "embedding"), 8.5)
    file_bytes = read_gguf(path).total_bytes
    q4km = Precision(weights="q4_k_m")
    assert graph.weights_bytes(loaded, q4km) == pytest.approx(file_bytes, rel=1e-12)
    rules = loaded.model_copy(update={"weight_bits_by_role": None})
    assert graph.weights_bytes(rules, q4km) == pytest.approx(weights_bytes(model, "q4_k_m"))
    assert graph.weights_bytes(rules, q4km) < 0.75 * file_bytes
    assert all(op.weight_bits == 8.5 for op in _weight_gemms(decode_step(loaded, 1, 16, q4km)))
    other = Precision(weights="q2_k")  # another format: that preset's rules
    assert graph.weights_bytes(loaded, other) == pytest.approx(weights_bytes(model, "q2_k"))

    scenario = Scenario(phase="decode", batch=1, context_len=16)
    cost = simulate(H100, loaded, scenario, engine="roofline")
    assert any("q4_k_m" in note for note in cost.notes)  # the checkpoint's format
    assert cost.memory.weights_bytes == pytest.approx(file_bytes, rel=1e-12)
    assert cost.latency_s > simulate(H100, rules, scenario, engine="roofline").latency_s


def test_a_missing_gguf_file_names_the_path(tmp_path):
    with pytest.raises(ConfigError, match=r"nothing\.gguf: cannot read"):
        load_model(tmp_path / "nothing.gguf")


def test_dequantization_ops_follow_the_gguf_type():
    """The vector work of a GGUF weight GEMM is its type's block decode, not one flat figure:
    Q8_0 (int8 x scale) costs less per weight than Q4_K_M's nibble and sub-scale decode."""
    from infersim.workloads import Precision, load_model
    from infersim.workloads.graph import decode_step
    from infersim.workloads.ops import Gemm

    model = load_model("llama-3-8b")

    def per_weight(fmt: str) -> float:
        ops = [op for op in decode_step(model, 1, 128, Precision(weights=fmt))
               if isinstance(op, Gemm) and op.name == "mlp.up"]  # fmt: skip
        (up,) = ops
        assert up.dequant_ops_per_weight is not None
        return up.vector_flops / (up.k * up.n)

    assert per_weight("q8_0") == pytest.approx(1.0, rel=0.05)
    assert per_weight("q4_k_m") > per_weight("q8_0")
    bf16 = [op for op in decode_step(model, 1, 128) if isinstance(op, Gemm)]
    assert all(op.dequant_ops_per_weight is None for op in bf16)


@pytest.mark.parametrize("name", ["llama-3-70b", "mixtral-8x7b", "deepseek-v2-lite", "tiny-test"])
@pytest.mark.parametrize("fmt", ["q4_k_m", "q3_k_m", "iq2_xs", "q6_k", "mxfp4_moe"])
def test_the_layer_class_mix_equals_every_tensor_listed(name: str, fmt: str):
    """tensor_mix costs one layer per class of layers the rules cannot tell apart: the same
    figures as listing every tensor (and a model of thousands of layers in milliseconds)."""
    from infersim.workloads.gguf.presets import tensor_mix

    if fmt not in PRESETS:
        pytest.skip(f"no preset {fmt}")
    def same(model: ModelConfig) -> None:
        plans = tensor_types(model, fmt)
        mix, total = tensor_mix(model, fmt)
        listed = role_mix(plans)
        assert total == sum(t.n_bytes for t in plans)
        assert mix.keys() == listed.keys()
        for role, m in mix.items():  # dequant ops are float sums: only their order differs
            assert (m.n_elements, m.n_bytes) == (listed[role].n_elements, listed[role].n_bytes)
            assert m.dequant_ops == pytest.approx(listed[role].dequant_ops, rel=1e-12)

    model = load_model(name)
    same(model)
    same(model.model_copy(update={"num_hidden_layers": 4096, "first_k_dense_replace": 1}))
