"""What a Hugging Face ``model_type`` implies that its ``config.json`` leaves out.

Each architecture is data — the fields its modeling code fixes (MLP kind, norm kind and count,
biases, positions, whether the LM head is tied by default), the spellings of its config keys —
plus at most one small function for what needs arithmetic (Falcon's KV heads, Gemma's layer
pattern, Qwen's sliding-window layers). Defaults are those of the architecture's
``transformers`` configuration and modeling classes (``configuration_<type>.py``,
``modeling_<type>.py``), not of whatever a config happens to omit.

:func:`normalize` turns a raw config document into :class:`~infersim.workloads.models.ModelConfig`
fields: it unwraps a multimodal ``text_config``, resolves ``model_type`` (or the
``architectures`` class name), applies aliases and defaults, reads ``layer_types`` /
``sliding_window_pattern`` into one per-layer attention list, reads ``quantization_config`` as
the checkpoint's weight format, and lists every key it neither reads nor knows to be
cost-neutral (``unknown_fields``), so that nothing that changes the cost is dropped silently.

Raises :class:`~infersim.errors.ConfigError` for an unknown ``model_type`` (naming the supported
ones) and for architectures it cannot cost honestly (state-space and linear-attention layers).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from infersim.errors import ConfigError

Doc = dict[str, Any]

SLIDING = "sliding_attention"
FULL = "full_attention"
ATTENTION_KINDS = (FULL, SLIDING)

COMMON_ALIASES: Mapping[str, str] = {
    # GPT-2 / GPT-3 / GPT-J / BLOOM spellings
    "n_embd": "hidden_size",
    "n_embed": "hidden_size",
    "n_layer": "num_hidden_layers",
    "n_head": "num_attention_heads",
    "n_inner": "intermediate_size",
    "n_positions": "max_position_embeddings",
    # OPT
    "ffn_dim": "intermediate_size",
    # Mixtral / DeepSeek / gpt-oss MoE
    "num_local_experts": "num_experts",
    "experts_per_token": "num_experts_per_tok",  # gpt-oss writes both
    "n_routed_experts": "num_experts",
    "n_shared_experts": "num_shared_experts",
}

COST_NEUTRAL: frozenset[str] = frozenset(
    {
        # bookkeeping
        "architectures", "auto_map", "torch_dtype", "dtype", "transformers_version",
        "_name_or_path", "name_or_path", "model_name", "tokenizer_class", "task_specific_params",
        "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "unk_token_id",
        "decoder_start_token_id", "image_token_index", "image_token_id", "boi_token_index",
        "eoi_token_index", "use_cache", "output_attentions", "output_hidden_states",
        "return_dict", "is_decoder", "is_encoder_decoder", "id2label", "label2id",
        "chunk_size_feed_forward", "problem_type", "prefix", "cache_implementation",
        "_attn_implementation", "_attn_implementation_autoset", "pretraining_tp",
        "gradient_checkpointing", "use_return_dict", "tie_encoder_decoder",
        "torchscript", "finetuning_task", "bad_words_ids", "max_length", "min_length",
        "do_sample", "num_beams", "temperature", "top_k", "top_p", "repetition_penalty",
        # numerics that change no shape: eps, init, dropout, activation, scaling, rope base
        "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_eps", "norm_epsilon",
        "initializer_range", "initializer_factor", "init_std", "init_device",
        "hidden_act", "hidden_activation", "activation_function", "mlp_activation",
        "attention_dropout", "hidden_dropout", "hidden_dropout_prob", "dropout",
        "attn_pdrop", "embd_pdrop", "resid_pdrop", "activation_dropout", "classifier_dropout",
        "attention_probs_dropout_prob", "layerdrop", "summary_type", "summary_use_proj",
        "summary_activation", "summary_proj_to_labels", "summary_first_dropout",
        "rope_theta", "rope_scaling", "rope_parameters", "rope_local_base_freq",
        "rotary_emb_base", "rotary_pct", "rotary_dim", "partial_rotary_factor",
        "original_max_position_embeddings", "rope_interleave", "use_mrope",
        "attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar",
        "scale_attn_weights", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn",
        "attention_softmax_in_fp32", "masked_softmax_fusion", "slow_but_exact",
        "offset_alibi", "apply_residual_connection_post_layernorm", "use_parallel_residual",
        "do_layer_norm_before", "parallel_attn", "alibi", "embedding_multiplier",
        "swiglu_limit", "qk_layernorm", "use_qk_norm", "attention_chunk_size",
        # MoE routing numerics (the experts hit per token are num_experts_per_tok)
        "router_aux_loss_coef", "router_jitter_noise", "output_router_logits",
        "norm_topk_prob", "aux_loss_alpha", "seq_aux", "topk_method", "topk_group", "n_group",
        "routed_scaling_factor", "scoring_func", "ep_size", "moe_layer_freq",
        "router_z_loss_coef", "expert_capacity",
        # read by an adapter below, or by ModelConfig itself
        "use_sliding_window", "max_window_layers", "sliding_window_pattern", "layer_types",
        "quantization_config", "text_config", "model_type", "name", "source",
        "new_decoder_architecture", "multi_query", "bias", "num_ln_in_parallel_attn",
        "decoder_sparse_step", "mlp_only_layers", "num_nextn_predict_layers",
        "vision_config", "mm_tokens_per_image", "vision_feature_layer",
        "position_embedding_type", "bias_dropout_fusion", "skip_bias_add", "skip_bias_add_qkv",
        "rotary", "initial_context_length", "n_ctx", "_remove_final_layer_norm",
        "layer_norm_elementwise_affine", "enable_bias",
    }
)
"""Config keys that change neither the shapes nor the counts infersim costs, or that an adapter
here reads. Anything else a config carries that :class:`ModelConfig` has no field for is
listed in ``unknown_fields``."""


@dataclass(frozen=True)
class Architecture:
    """One ``model_type``: the ModelConfig fields it implies, its key spellings, its
    ``transformers`` class names, and an optional adapter for derived fields."""

    defaults: Mapping[str, Any]
    classes: tuple[str, ...] = ()
    aliases: Mapping[str, str] = field(default_factory=dict)
    adapt: Callable[[Doc], Doc] | None = None


def _gemma_pattern(every: int) -> Callable[[Doc], Doc]:
    """Gemma 2 / 3: layer i is sliding unless (i + 1) is a multiple of the pattern (2: every
    other layer; Gemma 3: 5 sliding then 1 global)."""

    def adapt(doc: Doc) -> Doc:
        if doc.get("sliding_window_size") in (None, doc.get("sliding_window")):
            doc.pop("sliding_window_size", None)  # Gemma 2 repeats sliding_window under it
        if "layer_types" not in doc and doc.get("sliding_window"):
            n = int(doc.get("sliding_window_pattern") or every)
            doc["layer_types"] = [
                SLIDING if (i + 1) % n else FULL for i in range(int(doc["num_hidden_layers"]))
            ]
        return doc

    return adapt


def _qwen(doc: Doc) -> Doc:
    """Qwen 2/3: ``sliding_window`` applies only with ``use_sliding_window``, and then to the
    layers from ``max_window_layers`` on; MoE layers are every ``decoder_sparse_step``-th one
    not in ``mlp_only_layers``; a shared expert of its own width."""
    if "layer_types" not in doc:
        if doc.get("use_sliding_window") and doc.get("sliding_window"):
            first = int(doc.get("max_window_layers", 0))
            doc["layer_types"] = [
                SLIDING if i >= first else FULL for i in range(int(doc["num_hidden_layers"]))
            ]
        else:
            doc["sliding_window"] = None
    if doc.get("num_experts"):
        layers = int(doc["num_hidden_layers"])
        step = int(doc.get("decoder_sparse_step") or 1)
        dense_only = set(doc.get("mlp_only_layers") or [])
        moe = sum(1 for i in range(layers) if i not in dense_only and (i + 1) % step == 0)
        doc["first_k_dense_replace"] = layers - moe  # which layers are dense does not matter
    return doc


def _falcon(doc: Doc) -> Doc:
    """Falcon: the new decoder architecture (40B, 180B) has ``num_kv_heads`` KV heads and two
    layer norms per layer; the old one (7B) is multi-query (one KV head) with one layer norm
    feeding the parallel attention and MLP. ``bias`` sets every linear layer's bias."""
    heads = int(doc.get("num_attention_heads", 0))
    if doc.get("new_decoder_architecture"):
        kv = doc.get("num_kv_heads", doc.get("n_head_kv"))
        doc.setdefault("num_key_value_heads", int(kv) if kv is not None else heads)
        doc.setdefault("norms_per_layer", int(doc.get("num_ln_in_parallel_attn") or 2))
    else:
        doc.setdefault("num_key_value_heads", 1 if doc.get("multi_query", True) else heads)
        doc.setdefault("norms_per_layer", 1 if doc.get("parallel_attn", True) else 2)
    doc.pop("num_kv_heads", None)
    doc.pop("n_head_kv", None)
    if "bias" in doc:
        doc.setdefault("attention_bias", bool(doc["bias"]))
        doc.setdefault("mlp_bias", bool(doc["bias"]))
    if doc.get("alibi"):
        doc.setdefault("positions", "alibi")
    return doc


def _opt(doc: Doc) -> Doc:
    """OPT: ``word_embed_proj_dim`` equal to the width is no projection (1.3B and up); a
    narrower one (350M) adds project_in/out matrices, which are not modeled (left unknown)."""
    if doc.get("word_embed_proj_dim") == doc.get("hidden_size"):
        doc.pop("word_embed_proj_dim")
    if "enable_bias" in doc:
        doc.setdefault("attention_bias", bool(doc["enable_bias"]))
        doc.setdefault("mlp_bias", bool(doc["enable_bias"]))
    return doc


_ROPE = {"norm": "rms", "positions": "rope"}
_LLAMA = {"mlp": "gated", **_ROPE, "tie_word_embeddings": False}
_GEMMA = {"mlp": "gated", **_ROPE, "tie_word_embeddings": True}

ARCHITECTURES: dict[str, Architecture] = {
    "llama": Architecture(_LLAMA, ("LlamaForCausalLM",)),
    "mistral": Architecture(_LLAMA, ("MistralForCausalLM",)),
    "mixtral": Architecture(_LLAMA, ("MixtralForCausalLM",)),
    "qwen2": Architecture({**_LLAMA, "attention_bias": True}, ("Qwen2ForCausalLM",), adapt=_qwen),
    "qwen2_moe": Architecture(
        {**_LLAMA, "attention_bias": True}, ("Qwen2MoeForCausalLM",), adapt=_qwen
    ),
    "qwen3": Architecture(_LLAMA, ("Qwen3ForCausalLM",), adapt=_qwen),
    "qwen3_moe": Architecture(_LLAMA, ("Qwen3MoeForCausalLM",), adapt=_qwen),
    "gemma": Architecture(_GEMMA, ("GemmaForCausalLM",)),
    "gemma2": Architecture(
        {**_GEMMA, "norms_per_layer": 4}, ("Gemma2ForCausalLM",), adapt=_gemma_pattern(2)
    ),
    "gemma3_text": Architecture(
        # Gemma3TextConfig's defaults: the 4B/12B/27B multimodal configs' text_config lists
        # only the fields that differ from them
        {**_GEMMA, "norms_per_layer": 4, "vocab_size": 262_208, "num_attention_heads": 8,
         "num_key_value_heads": 4, "head_dim": 256, "sliding_window": 4096,
         "max_position_embeddings": 131_072},
        ("Gemma3ForCausalLM",),
        adapt=_gemma_pattern(6),
    ),
    "phi3": Architecture(_LLAMA, ("Phi3ForCausalLM",)),
    "deepseek_v2": Architecture(_LLAMA, ("DeepseekV2ForCausalLM",)),
    "deepseek_v3": Architecture(_LLAMA, ("DeepseekV3ForCausalLM",)),
    "gpt_oss": Architecture(
        {**_LLAMA, "attention_bias": True, "mlp_bias": True}, ("GptOssForCausalLM",)
    ),
    "gpt2": Architecture(
        {"mlp": "plain", "norm": "layer", "positions": "learned", "attention_bias": True,
         "mlp_bias": True, "tie_word_embeddings": True},
        ("GPT2LMHeadModel",),
    ),
    "gptj": Architecture(
        {"mlp": "plain", "norm": "layer", "positions": "rope", "attention_bias": False,
         "mlp_bias": True, "tie_word_embeddings": False, "norms_per_layer": 1},
        ("GPTJForCausalLM",),
    ),
    "gpt_neox": Architecture(
        {"mlp": "plain", "norm": "layer", "positions": "rope", "attention_bias": True,
         "mlp_bias": True, "tie_word_embeddings": False},
        ("GPTNeoXForCausalLM",),
    ),
    "opt": Architecture(
        {"mlp": "plain", "norm": "layer", "positions": "learned", "attention_bias": True,
         "mlp_bias": True, "position_offset": 2, "tie_word_embeddings": True},
        ("OPTForCausalLM",),
        adapt=_opt,
    ),
    "bloom": Architecture(
        {"mlp": "plain", "norm": "layer", "positions": "alibi", "attention_bias": True,
         "mlp_bias": True, "tie_word_embeddings": True, "embedding_norm": True},
        ("BloomForCausalLM",),
    ),
    "falcon": Architecture(
        # the checkpoints store lm_head beside the embedding (falcon-180B: 81 bf16 shards of
        # 334.4 GiB = 179.5B parameters; falcon-7b: 7.22B), so the head is costed untied
        {"mlp": "plain", "norm": "layer", "positions": "rope", "tie_word_embeddings": False},
        ("FalconForCausalLM", "RWForCausalLM"),
        aliases={"ffn_hidden_size": "intermediate_size"},
        adapt=_falcon,
    ),
}
"""Supported ``model_type`` values (Gemma 3's multimodal ``gemma3`` is read through its
``text_config``, whose type is ``gemma3_text``)."""

REFUSED: Mapping[str, str] = {
    "mamba": "Mamba state-space layers",
    "mamba2": "Mamba-2 state-space layers",
    "falcon_mamba": "Mamba state-space layers",
    "jamba": "Mamba state-space layers mixed with attention",
    "falcon_h1": "Mamba-2 state-space heads beside attention",
    "zamba2": "Mamba-2 state-space layers",
    "qwen3_next": "Gated DeltaNet linear-attention layers",
    "qwen3_5": "Gated DeltaNet linear-attention layers",
    "qwen3_5_text": "Gated DeltaNet linear-attention layers",
    "qwen3_5_moe": "Gated DeltaNet linear-attention layers",
    "qwen3_5_moe_text": "Gated DeltaNet linear-attention layers",
    "rwkv": "RWKV recurrent layers",
    "recurrent_gemma": "Griffin recurrent layers",
}
"""Architectures whose layers infersim's operator set cannot cost honestly yet."""

MODEL_TYPE_ALIASES: Mapping[str, str] = {
    "RefinedWebModel": "falcon",  # Falcon-7B's original remote-code config
    "RefinedWeb": "falcon",  # Falcon-40B's
    "gemma3": "gemma3_text",  # a text-only config under the multimodal type
}

_CLASS_TO_TYPE = {cls: name for name, arch in ARCHITECTURES.items() for cls in arch.classes}


def supported() -> str:
    """The supported model types, for messages."""
    return ", ".join(sorted(ARCHITECTURES))


def _model_type(doc: Doc) -> str:
    if "model_type" in doc:
        return MODEL_TYPE_ALIASES.get(str(doc["model_type"]), str(doc["model_type"]))
    for cls in doc.get("architectures") or []:
        if cls in _CLASS_TO_TYPE:
            return _CLASS_TO_TYPE[cls]
    return "llama"


def _weights_format(quant: Any, notes: list[str]) -> str | None:
    """The checkpoint's weight dtype from ``quantization_config`` (None: not understood)."""
    if not isinstance(quant, dict):
        return None
    method = str(quant.get("quant_method", "")).lower()
    bits = quant.get("bits", quant.get("w_bit"))
    if method == "fp8":
        fmt = str(quant.get("fmt", "e4m3")).lower()
        return "fp8_e5m2" if "e5m2" in fmt else "fp8_e4m3"
    if method == "mxfp4":
        skipped = quant.get("modules_to_not_convert") or []
        if skipped:
            notes.append(
                "quantization_config mxfp4 applied to every linear layer; the checkpoint keeps "
                f"{', '.join(map(str, skipped[:4]))}{', ...' if len(skipped) > 4 else ''} "
                "in bf16 (their share of the bytes is small)"
            )
        return "mxfp4"
    if method in {"gptq", "awq"} and bits in (4, "4"):
        group = quant.get("group_size", quant.get("q_group_size", 128))
        if group not in (128, "128"):
            notes.append(f"{method} group_size {group} costed as 128")
        return "int4-g128"
    if (method in {"gptq", "awq", "bitsandbytes"} and bits in (8, "8")) or quant.get(
        "load_in_8bit"
    ):
        return "int8"
    notes.append(f"quantization_config {method or quant!r} not understood: weights as given")
    return None


def normalize(raw: Doc, known_fields: frozenset[str]) -> Doc:
    """ModelConfig fields from a raw config document (see the module docstring).

    ``known_fields`` are ModelConfig's own field names: keys outside them, the aliases and
    :data:`COST_NEUTRAL` go to ``unknown_fields``.

    Raises:
        ConfigError: an unknown or refused ``model_type``, or ``linear_attention`` layers.
    """
    doc = dict(raw)
    notes: list[str] = list(doc.pop("notes", []) or [])
    text = doc.get("text_config")
    if isinstance(text, dict) and "hidden_size" not in doc:
        outer_type = doc.get("model_type")
        outer = ("name", "source", "published_params", "published_active_params",
                 "quantization_config")  # fmt: skip
        keep: Doc = {k: doc[k] for k in outer if k in doc}
        doc = {**text, **keep}
        if isinstance(raw.get("vision_config"), dict):
            notes.append(f"{outer_type or 'multimodal'} config: the text model only; "
                         "the vision encoder is not costed")  # fmt: skip
    mtype = _model_type(doc)
    if "model_type" not in doc and "architectures" not in doc:
        notes.append("no model_type: costed as llama")
    if mtype in REFUSED:
        raise ConfigError(
            f"model_type {mtype!r} ({REFUSED[mtype]}) cannot be costed by infersim yet; "
            f"supported: {supported()}"
        )
    arch = ARCHITECTURES.get(mtype)
    if arch is None:
        raise ConfigError(f"model_type {mtype!r} is not supported; supported: {supported()}")
    doc["model_type"] = mtype
    aliases = {**COMMON_ALIASES, **arch.aliases}
    for old, new in aliases.items():
        if old in doc:
            value = doc.pop(old)
            if value is not None:
                doc.setdefault(new, value)
    doc = {k: v for k, v in doc.items() if not (v is None and k in _NONE_MEANS_DEFAULT)}
    for key, value in arch.defaults.items():
        doc.setdefault(key, value)
    if "intermediate_size" not in doc and "hidden_size" in doc:
        doc["intermediate_size"] = 4 * int(doc["hidden_size"])  # GPT-2/J/BLOOM: n_inner None
    if arch.adapt is not None and "num_hidden_layers" in doc:
        doc = arch.adapt(doc)
    kinds = doc.get("layer_types")
    if kinds is not None:
        bad = sorted({str(k) for k in kinds} - set(ATTENTION_KINDS))
        if bad:
            raise ConfigError(
                f"layer_types {', '.join(map(repr, bad))} cannot be costed by infersim yet "
                f"(allowed: {', '.join(ATTENTION_KINDS)})"
            )
    if "quantization_config" in doc and "quantized_weights" not in doc:
        fmt = _weights_format(doc["quantization_config"], notes)
        if fmt is not None:
            doc["quantized_weights"] = fmt
    if doc.get("num_nextn_predict_layers"):
        notes.append(f"{doc['num_nextn_predict_layers']} multi-token-prediction layer(s) not "
                     "costed (speculative decoding with them: the spec technique)")  # fmt: skip
    unknown = sorted(k for k in doc if k not in known_fields and k not in COST_NEUTRAL)
    doc["unknown_fields"] = tuple(unknown)
    if unknown:
        notes.append(f"not understood (not costed): {', '.join(unknown)}")
    doc["notes"] = tuple(notes)
    return doc


_NONE_MEANS_DEFAULT = frozenset(
    {"intermediate_size", "num_key_value_heads", "head_dim", "sliding_window",
     "moe_intermediate_size", "q_lora_rank"}
)  # fmt: skip
"""Keys whose explicit ``null`` means "the architecture's default" (GPT-J's ``n_inner``)."""
