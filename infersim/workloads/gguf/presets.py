"""The ``llama-quantize`` presets as per-tensor type mixes, and their summaries per engine role.

:data:`PRESETS`, :data:`RULES` and :func:`tensor_types` give the ggml type each tensor of a
:class:`ModelConfig` gets under a file type (``Q4_K_M``, ``IQ2_XS``...), following
``llama_tensor_get_type`` in llama.cpp's ``src/llama-quant.cpp`` (tensor role, layer index, GQA
and expert-count conditions, Llama-70B's attn_v bump, the output/embedding rules, the fallback
when a row is not a whole number of blocks). :func:`weights_bytes`, :func:`role_bits` and
:func:`role_dequant_ops` summarize a mix for the engines.

Left out of the preset rules (each changes a handful of tensors at most): Falcon's own rules
(only its Q8_0 output is kept), the ``LLM_TYPE_70B`` bump for architectures other than Llama,
``--pure`` and the ``--output-tensor-type`` / ``--token-embedding-type`` / ``--tensor-type``
overrides (a file made with them is read as it is by :func:`read_gguf` and :func:`role_mix`),
one ``imatrix`` flag for the whole file instead of per tensor, and DeepSeek's newer split
``attn_k_b`` / ``attn_v_b`` layout (``attn_kv_b`` is modeled; MLA counts as GQA 1). Like current
llama.cpp, a fused ``attn_qkv`` follows the attn_v rules.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, get_args

from infersim.errors import ConfigError
from infersim.workloads.gguf.blocks import BLOCK_TYPES
from infersim.workloads.gguf.tensors import (
    RoleMix,
    TensorPlan,
    role_mix,
    tensor_role,
    tensor_shapes,
)
from infersim.workloads.models import ModelConfig


@dataclass(frozen=True, slots=True)
class Preset:
    """One ``llama-quantize`` file type: its ``general.file_type`` id and default ggml type."""

    name: str
    ftype: int
    base: str
    needs_imatrix: bool = False


_PRESET_TABLE: dict[str, tuple[int, str]] = {
    # name: (general.file_type = llama_ftype, as gguf 0.19's LlamaFileType; base type from
    # llama_ftype_get_default_type)
    "f32": (0, "F32"), "f16": (1, "F16"), "bf16": (32, "BF16"), "q4_0": (2, "Q4_0"),
    "q4_1": (3, "Q4_1"), "q5_0": (8, "Q5_0"), "q5_1": (9, "Q5_1"), "q8_0": (7, "Q8_0"),
    "q2_k": (10, "Q2_K"), "q2_k_s": (21, "Q2_K"), "q3_k_s": (11, "Q3_K"),
    "q3_k_m": (12, "Q3_K"), "q3_k_l": (13, "Q3_K"), "q4_k_s": (14, "Q4_K"),
    "q4_k_m": (15, "Q4_K"), "q5_k_s": (16, "Q5_K"), "q5_k_m": (17, "Q5_K"),
    "q6_k": (18, "Q6_K"), "iq2_xxs": (19, "IQ2_XXS"), "iq2_xs": (20, "IQ2_XS"),
    "iq2_s": (28, "IQ2_XS"), "iq2_m": (29, "IQ2_S"), "iq3_xxs": (23, "IQ3_XXS"),
    "iq3_xs": (22, "IQ3_S"), "iq3_s": (26, "IQ3_S"), "iq3_m": (27, "IQ3_S"),
    "iq1_s": (24, "IQ1_S"), "iq1_m": (31, "IQ1_M"), "iq4_nl": (25, "IQ4_NL"),
    "iq4_xs": (30, "IQ4_XS"), "tq1_0": (36, "TQ1_0"), "tq2_0": (37, "TQ2_0"),
    "mxfp4_moe": (38, "MXFP4"), "nvfp4": (39, "NVFP4"), "q1_0": (40, "Q1_0"),
}  # fmt: skip

_NEEDS_IMATRIX = frozenset({"iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq2_m", "iq3_xxs",
                            "iq3_xs", "q2_k_s"})  # fmt: skip
"""llama.cpp's tensor_requires_imatrix."""

PRESETS: dict[str, Preset] = {
    name: Preset(name, ftype, base, name in _NEEDS_IMATRIX)
    for name, (ftype, base) in _PRESET_TABLE.items()
}
"""``llama-quantize`` file types by lower-case name."""

PRESET_BY_FTYPE: dict[int, str] = {p.ftype: p.name for p in PRESETS.values()}
"""Preset name for a ``general.file_type`` value."""

Category = Literal[
    "token_embd", "output", "attn_v", "attn_k", "attn_q", "attn_output",
    "ffn_down", "ffn_gate", "ffn_up", "other",
]  # fmt: skip
Cond = Literal["always", "gqa4", "gqa4_or_experts4", "experts8", "imatrix", "no_imatrix"]
Layers = Literal["all", "more_bits", "first_eighth", "first_sixteenth", "first_2", "first_4",
                 "middle"]  # fmt: skip
Rule = tuple[Cond, Layers, str]
"""When ``Cond`` holds for the model and ``Layers`` for the tensor's layer, use the type."""

_LLAMA_TYPES = frozenset({"llama", "mistral", "mixtral"})
"""Model types llama.cpp loads as LLM_ARCH_LLAMA (for the 70B attn_v bump)."""

_IQ_LOW = {"iq2_xxs", "iq2_xs", "iq2_s", "iq2_m", "iq1_s", "iq1_m"}
"""The 1-2 bit i-quants: llama.cpp's first branch, with its own attn_v / ffn_down rules."""


def _rules() -> dict[str, dict[Category, tuple[Rule, ...]]]:
    """The ``llama_tensor_get_type_impl`` chains, per preset and tensor category (first match
    wins; no match keeps the preset's base type). attn_v covers attn_qkv and MLA's attn_kv_b,
    ffn_* their ``_exps`` / ``_shexp`` variants (llama.cpp matches by substring)."""
    out: dict[str, dict[Category, tuple[Rule, ...]]] = {}
    for name in _IQ_LOW:
        low = "IQ3_S" if name in {"iq2_s", "iq2_m"} else "Q2_K"
        attn_out: tuple[Rule, ...] = (("experts8", "all", "Q5_K"),)
        if name in {"iq1_s", "iq1_m"}:
            attn_out += (("always", "all", "IQ2_XXS"),)
        elif name in {"iq2_s", "iq2_m"}:
            attn_out += (("always", "all", "IQ3_S"),)
        out[name] = {
            "attn_v": (("gqa4_or_experts4", "all", "Q4_K"), ("always", "all", low)),
            "attn_k": (("experts8", "all", "Q4_K"),),
            "ffn_down": (("always", "first_eighth", low),),
            "attn_output": attn_out,
        }
    q8: tuple[Rule, ...] = (("experts8", "all", "Q8_0"),)  # 8-expert models: attn_v/k at Q8_0
    o5: tuple[Rule, ...] = (("experts8", "all", "Q5_K"),)
    chains: dict[str, dict[Category, tuple[Rule, ...]]] = {
        "q2_k": {"attn_v": (("gqa4", "all", "Q4_K"), ("always", "all", "Q3_K")),
                 "ffn_down": (("always", "all", "Q3_K"),),
                 "attn_output": (*o5, ("always", "all", "Q3_K"))},
        "q2_k_s": {"attn_v": (("gqa4", "all", "Q4_K"),),
                   "ffn_down": (("always", "first_eighth", "Q4_K"),)},
        "iq3_xxs": {"attn_v": (("gqa4", "all", "Q4_K"), ("no_imatrix", "all", "IQ3_S")),
                    "attn_k": (("always", "all", "IQ2_S"),),
                    "attn_q": (("always", "all", "IQ2_S"),),
                    "ffn_down": (("no_imatrix", "first_eighth", "Q4_K"),
                                 ("no_imatrix", "all", "Q3_K")),
                    "attn_output": (*o5, ("always", "all", "IQ3_S"))},
        "iq3_xs": {"attn_v": (("gqa4", "all", "Q4_K"),),
                   "attn_k": (("always", "all", "IQ3_XXS"),),
                   "attn_q": (("always", "all", "IQ3_XXS"),),
                   "ffn_gate": (("always", "middle", "IQ3_XXS"),),
                   "ffn_up": (("always", "middle", "IQ3_XXS"),),
                   "attn_output": o5},
        "iq3_s": {"attn_v": (("gqa4", "all", "Q4_K"),), "attn_output": o5},
        "iq3_m": {"attn_v": (("always", "all", "Q4_K"),),
                  "ffn_down": (("always", "first_eighth", "Q4_K"),
                               ("experts8", "more_bits", "Q4_K")),
                  "attn_output": (*o5, ("always", "all", "Q4_K"))},
        "q3_k_s": {"attn_output": o5},
        "q3_k_m": {"attn_v": (("always", "first_2", "Q5_K"), ("always", "all", "Q4_K")),
                   "ffn_down": (("always", "first_sixteenth", "Q5_K"),
                                ("always", "all", "Q4_K")),
                   "attn_output": (*o5, ("always", "all", "Q4_K"))},
        "q3_k_l": {"attn_v": (("always", "all", "Q5_K"),),
                   "ffn_down": (("always", "all", "Q5_K"),),
                   "attn_output": (("experts8", "all", "Q3_K"), ("always", "all", "Q5_K"))},
        "iq4_nl": {"attn_v": (("gqa4", "all", "Q5_K"),),
                   "ffn_down": (("no_imatrix", "first_eighth", "Q5_K"),), "attn_output": o5},
        "iq4_xs": {"attn_v": (("gqa4", "all", "Q5_K"),),
                   "ffn_down": (("no_imatrix", "first_eighth", "Q5_K"),), "attn_output": o5},
        "q4_k_s": {"attn_v": (("always", "first_4", "Q5_K"),),
                   "ffn_down": (("always", "first_eighth", "Q5_K"),), "attn_output": o5},
        "q4_k_m": {"attn_v": (("always", "more_bits", "Q6_K"),),
                   "ffn_down": (("always", "more_bits", "Q6_K"),), "attn_output": o5},
        "q5_k_m": {"attn_v": (("always", "more_bits", "Q6_K"),),
                   "ffn_down": (("always", "more_bits", "Q6_K"),)},
        "q4_0": {"ffn_down": (("imatrix", "first_eighth", "Q4_1"),)},
        "q5_0": {"ffn_down": (("imatrix", "first_eighth", "Q5_1"),)},
    }  # fmt: skip
    for name in PRESETS:
        if name in _IQ_LOW or name == "mxfp4_moe":
            continue
        chain = chains.get(name, {})
        out[name] = {
            **chain,
            "attn_v": (*q8, *chain.get("attn_v", ())),
            "attn_k": (*q8, *chain.get("attn_k", ())),
        }
    return out


RULES: dict[str, dict[Category, tuple[Rule, ...]]] = _rules()
"""Per preset and category, the rules of ``llama_tensor_get_type_impl`` (src/llama-quant.cpp)."""

_TOKEN_EMBD: dict[str, str] = {
    "iq2_xxs": "Q2_K", "iq2_xs": "Q2_K", "iq1_s": "Q2_K", "iq1_m": "Q2_K",
    "iq2_s": "IQ3_S", "iq2_m": "IQ3_S", "iq3_xxs": "IQ3_S",
    "tq1_0": "Q4_K", "tq2_0": "Q4_K", "mxfp4_moe": "Q8_0",
}  # fmt: skip
"""token_embd's type where it differs from the base (an untied embedding)."""

_OUTPUT_Q5_K = {"iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq2_s", "iq2_m", "iq1_m"}
"""Presets whose output (or tied embedding) is Q5_K; the rest get Q6_K, or Q8_0 when the base
is Q8_0, the model is Falcon, the preset is MXFP4_MOE or a row is not whole blocks."""

_LLAMA_70B_ATTN_V = {"Q3_K": "Q5_K", "Q4_K": "Q5_K"}
"""Llama 70B (80 layers, GQA): attn_v one step up, it is 8x smaller than attn_q."""

_FALLBACK: dict[str, str] = {
    **dict.fromkeys(("IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S",
                     "IQ4_XS"), "IQ4_NL"),
    **dict.fromkeys(("Q2_K", "Q3_K", "TQ1_0", "TQ2_0"), "Q4_0"),
    "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0",
}  # fmt: skip
"""tensor_type_fallback: the type for a row that is not whole blocks (then F16 if still not;
llama.cpp aborts for types without a fallback, here they become F16 too)."""

_CATEGORIES: dict[str, Category] = {
    "output": "output", "token_embd": "token_embd", "attn_v": "attn_v", "attn_qkv": "attn_v",
    "attn_kv_b": "attn_v", "attn_k": "attn_k", "attn_q": "attn_q", "attn_output": "attn_output",
}  # fmt: skip
_FFN: tuple[Category, ...] = ("ffn_up", "ffn_gate", "ffn_down")


def _category(role: str) -> Category:
    """llama.cpp's tensor_get_category (it matches ``ffn_*`` by substring: experts and shared
    experts included; the router ``ffn_gate_inp`` is never quantized)."""
    if role in _CATEGORIES:
        return _CATEGORIES[role]
    return next((stem for stem in _FFN if role.startswith(stem)), "other")


@dataclass(frozen=True, slots=True)
class _Traits:
    """What the rules ask of a model."""

    n_layers: int
    gqa: int
    experts: int
    llama_70b: bool
    falcon: bool
    tied: bool
    imatrix: bool


def _more_bits(i: int, n: int) -> bool:
    """llama.cpp's use_more_bits: the first and last eighth and every third layer between."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _layer_holds(sel: Layers, i: int, n: int) -> bool:
    match sel:
        case "all":
            return True
        case "more_bits":
            return _more_bits(i, n)
        case "first_eighth":
            return i < n // 8
        case "first_sixteenth":
            return i < n // 16
        case "first_2":
            return i < 2
        case "first_4":
            return i < 4
        case "middle":
            return n // 8 <= i < 7 * n // 8
    raise AssertionError(sel)


def _cond_holds(cond: Cond, ctx: _Traits) -> bool:
    match cond:
        case "always":
            return True
        case "gqa4":
            return ctx.gqa >= 4
        case "gqa4_or_experts4":
            return ctx.gqa >= 4 or ctx.experts >= 4
        case "experts8":
            return ctx.experts == 8
        case "imatrix":
            return ctx.imatrix
        case "no_imatrix":
            return not ctx.imatrix
    raise AssertionError(cond)


def _choose(preset: Preset, role: str, layer: int | None, ne: tuple[int, ...],
            ctx: _Traits) -> str:  # fmt: skip
    """The ggml type llama-quantize gives a quantizable 2-D/3-D tensor."""
    name, base = preset.name, preset.base
    if base in {"F32", "F16", "BF16"}:
        return base
    cat = _category(role)
    if cat == "output" or (cat == "token_embd" and ctx.tied):
        if name == "mxfp4_moe" or ctx.falcon or ne[0] % BLOCK_TYPES[base].block_size:
            kind = "Q8_0"
        elif name in _OUTPUT_Q5_K:
            kind = "Q5_K"
        else:
            kind = "Q8_0" if base == "Q8_0" else "Q6_K"
    elif name == "mxfp4_moe":
        kind = "MXFP4" if len(ne) == 3 else "Q8_0"
    elif cat == "token_embd":
        kind = _TOKEN_EMBD.get(name, base)
    else:
        kind = base
        i, n = (layer or 0), ctx.n_layers
        for cond, sel, value in RULES[name].get(cat, ()):
            if _cond_holds(cond, ctx) and _layer_holds(sel, i, n):
                kind = value
                break
        if cat == "attn_v" and ctx.llama_70b and name not in _IQ_LOW and ctx.experts != 8:
            kind = _LLAMA_70B_ATTN_V.get(kind, kind)
    if ne[0] % BLOCK_TYPES[kind].block_size:
        kind = _FALLBACK.get(kind, "F16")
        if ne[0] % BLOCK_TYPES[kind].block_size:
            kind = "F16"
    return kind


def preset(name: str) -> Preset:
    """The :class:`Preset` called ``name`` (case-insensitive: ``Q4_K_M`` or ``q4_k_m``).

    Raises:
        ConfigError: unknown preset; the message lists the known ones.
    """
    key = name.strip().lower()
    if key not in PRESETS:
        raise ConfigError(f"unknown GGUF preset {name!r}; known: {', '.join(PRESETS)}")
    return PRESETS[key]


def tensor_types(model: ModelConfig, preset_name: str, *,
                 imatrix: bool | None = None) -> list[TensorPlan]:  # fmt: skip
    """Every tensor of ``model`` as ``llama-quantize PRESET`` writes it (norms, biases, router
    and position tables stay F32). ``imatrix``: whether an importance matrix was given (default:
    only for presets that require one); it changes IQ3_XXS, IQ4_NL/XS, Q4_0 and Q5_0 mixes.

    Raises:
        ConfigError: unknown preset.
    """
    return _plans(model, preset_name, imatrix, None)


def _plans(model: ModelConfig, preset_name: str, imatrix: bool | None,
           layers: Iterable[int] | None) -> list[TensorPlan]:  # fmt: skip
    """:func:`tensor_types` of the tensors outside the blocks and of ``layers`` (None: all)."""
    p = preset(preset_name)
    kv = model.kv_heads if not model.is_mla else model.num_attention_heads
    ctx = _Traits(
        n_layers=model.num_hidden_layers,
        gqa=model.num_attention_heads // kv,
        experts=model.num_experts,
        llama_70b=model.model_type in _LLAMA_TYPES and model.num_hidden_layers == 80
        and model.kv_heads != model.num_attention_heads,
        falcon=model.model_type == "falcon",
        tied=model.tie_word_embeddings,
        imatrix=p.needs_imatrix if imatrix is None else imatrix,
    )
    plans = []
    for stem, layer, ne, quantizable in tensor_shapes(model, layers):
        role = tensor_role(stem)
        kind = _choose(p, role, layer, ne, ctx) if quantizable else "F32"
        n = math.prod(ne)
        name = stem if layer is None else f"blk.{layer}.{stem}"
        plans.append(TensorPlan(name, role, layer, ne, n, kind,
                                BLOCK_TYPES[kind].row_bytes(n)))  # fmt: skip
    return plans


@lru_cache(maxsize=64)
def _layer_classes(n: int, moe_from: int) -> dict[int, int]:
    """A representative layer of each class of ``n`` layers the quantization rules cannot tell
    apart (the same answer to every layer selection; MoE from layer ``moe_from`` on) → the
    class's size."""
    selections = get_args(Layers)
    reps: dict[tuple[bool, ...], int] = {}
    sizes: dict[int, int] = {}
    for i in range(n):
        key = (*(_layer_holds(sel, i, n) for sel in selections), i >= moe_from)
        rep = reps.setdefault(key, i)
        sizes[rep] = sizes.get(rep, 0) + 1
    return sizes


def tensor_mix(model: ModelConfig, preset_name: str, *, imatrix: bool | None = None
               ) -> tuple[dict[str, RoleMix], int]:
    """``role_mix(tensor_types(...))`` and the bytes of all the tensors, without listing every
    layer's tensors: one layer of each class the rules cannot tell apart stands for the class
    (the same figures; a model of thousands of layers costs a handful). Raises as
    :func:`tensor_types`."""
    n = model.num_hidden_layers
    sizes = _layer_classes(n, model.first_k_dense_replace if model.is_moe else n)
    plans = _plans(model, preset_name, imatrix, sorted(sizes))
    counts = [1 if t.layer is None else sizes[t.layer] for t in plans]
    total = sum(t.n_bytes * c for t, c in zip(plans, counts, strict=True))
    return role_mix(plans, counts), total


def weights_bytes(model: ModelConfig, preset_name: str, *, imatrix: bool | None = None) -> float:
    """Bytes of all tensor data of ``model`` under ``preset_name`` (GGUF metadata and the
    32-byte alignment padding between tensors not included). Raises as :func:`tensor_types`."""
    return float(tensor_mix(model, preset_name, imatrix=imatrix)[1])


def role_bits(model: ModelConfig, preset_name: str, *,
              imatrix: bool | None = None) -> dict[str, float]:  # fmt: skip
    """Average stored bits per weight of each engine role (attn_qkv, attn_output, ffn_up =
    gate + up, ffn_down, experts_up, experts_down, router, lm_head, embedding) of ``model``
    under ``preset_name``, element-weighted over all layers (see :func:`role_mix`; for a file's
    own tensors use ``role_mix(header.tensors)``). Raises as :func:`tensor_types`."""
    mix, _ = tensor_mix(model, preset_name, imatrix=imatrix)
    return {r: m.bits_per_weight for r, m in mix.items()}


def role_dequant_ops(model: ModelConfig, preset_name: str, *,
                     imatrix: bool | None = None) -> dict[str, float]:  # fmt: skip
    """Estimated dequantization vector ops per weight of each engine role, element-weighted
    like :func:`role_bits`."""
    mix, _ = tensor_mix(model, preset_name, imatrix=imatrix)
    return {r: m.dequant_ops_per_weight for r, m in mix.items()}

