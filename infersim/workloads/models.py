"""Transformer model descriptions read from Hugging Face–style ``config.json`` files.

:class:`ModelConfig` keeps HF field names (``hidden_size``, ``num_key_value_heads``,
``kv_lora_rank``...). What an architecture implies (gated MLP, norm kind and count, biases,
positions, tied LM head, per-layer sliding/global attention, the checkpoint's weight format) is
explicit fields, filled by :mod:`infersim.workloads.architectures` from the ``model_type`` when
a config leaves them out; keys it does not understand are kept in ``unknown_fields`` and
reported, never dropped silently. A Hugging Face snapshot folder loads through its
``config.json``.
"""

from __future__ import annotations

import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from infersim.errors import ConfigError
from infersim.io import is_dir, preset_names, read_document, resolve, validate
from infersim.workloads import architectures

AttentionKind = Literal["full_attention", "sliding_attention"]

_PACKAGE = "infersim.workloads"
_SUFFIX = ".json"


class RoleBits(BaseModel):
    """Stored bits per weight (scales included) of each weight role of a checkpoint whose
    tensors mix formats: a GGUF file, element-weighted over its tensors of that role."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    attn_qkv: float | None = Field(
        default=None, gt=0, le=64, description="Q, K, V projections (MLA: q, q_a/q_b, kv_a, kv_b)"
    )
    attn_output: float | None = Field(default=None, gt=0, le=64, description="Output projection")
    ffn_up: float | None = Field(
        default=None, gt=0, le=64, description="Dense MLP gate + up (and the shared experts')"
    )
    ffn_down: float | None = Field(
        default=None, gt=0, le=64, description="Dense MLP down (and the shared experts')"
    )
    experts_up: float | None = Field(
        default=None, gt=0, le=64, description="Routed experts' gate + up"
    )
    experts_down: float | None = Field(
        default=None, gt=0, le=64, description="Routed experts' down"
    )
    router: float | None = Field(default=None, gt=0, le=64, description="MoE router")
    lm_head: float | None = Field(
        default=None, gt=0, le=64, description="LM head (the embedding when tied)"
    )
    embedding: float | None = Field(default=None, gt=0, le=64, description="Embedding tables")


class ModelConfig(BaseModel):
    """A decoder-only transformer (dense, MoE, GQA/MQA, MLA), in HF ``config.json`` terms."""

    model_config = ConfigDict(frozen=True, extra="ignore", allow_inf_nan=False)

    name: str = Field(default="model", description="Short identifier")
    source: str = Field(
        default="", description="Where the config and its parameter count come from"
    )
    model_type: str = Field(default="llama", description="HF model_type (sets family defaults)")
    hidden_size: int = Field(ge=1, le=1 << 20, description="Model width d")
    intermediate_size: int = Field(ge=1, le=1 << 22, description="Dense MLP width")
    num_hidden_layers: int = Field(ge=1, le=100_000, description="Decoder layers")
    num_attention_heads: int = Field(ge=1, le=1 << 16, description="Query heads")
    num_key_value_heads: int | None = Field(
        default=None, ge=1, le=1 << 16, description="KV heads (GQA/MQA); default = query heads"
    )
    head_dim: int | None = Field(default=None, ge=1, le=1 << 16, description="Per-head dim")
    vocab_size: int = Field(ge=1, le=1 << 24, description="Vocabulary")
    max_position_embeddings: int = Field(default=4096, ge=1, le=1 << 28, description="Context")
    tie_word_embeddings: bool = Field(default=False, description="LM head shares the embedding")
    sliding_window: int | None = Field(default=None, ge=1, description="Attention window")
    layer_types: tuple[AttentionKind, ...] | None = Field(
        default=None,
        description="Per-layer attention: sliding_attention layers use sliding_window, "
        "full_attention layers the whole context (None: every layer sliding if a window is set)",
    )
    mlp: Literal["gated", "plain"] = Field(default="gated", description="SwiGLU (3 mats) or 2")
    norm: Literal["rms", "layer"] = Field(default="rms", description="RMSNorm or LayerNorm")
    norms_per_layer: int = Field(default=2, ge=1, le=8, description="Norms in one layer")
    embedding_norm: bool = Field(default=False, description="A norm after the embedding (BLOOM)")
    positions: Literal["rope", "learned", "alibi"] = Field(
        default="rope", description="Position scheme"
    )
    position_offset: int = Field(default=0, ge=0, description="Extra learned positions (OPT: 2)")
    attention_bias: bool = Field(default=False, description="Biases on Q/K/V/O projections")
    mlp_bias: bool = Field(default=False, description="Biases on MLP projections")
    # Mixture of experts
    num_experts: int = Field(default=0, ge=0, le=1 << 16, description="Routed experts (0: dense)")
    num_experts_per_tok: int = Field(default=0, ge=0, le=1 << 16, description="Top-k")
    num_shared_experts: int = Field(default=0, ge=0, le=1 << 10, description="Always-on experts")
    moe_intermediate_size: int | None = Field(default=None, ge=1, description="Expert MLP width")
    shared_expert_intermediate_size: int | None = Field(
        default=None, ge=1, description="Width of the shared experts together (Qwen MoE)"
    )
    first_k_dense_replace: int = Field(default=0, ge=0, description="Leading dense layers")
    # Multi-head latent attention (DeepSeek-V2)
    kv_lora_rank: int | None = Field(default=None, ge=1, description="Latent KV rank")
    q_lora_rank: int | None = Field(default=None, ge=1, description="Latent Q rank (None: full)")
    qk_nope_head_dim: int | None = Field(default=None, ge=1, description="Non-RoPE q/k dims")
    qk_rope_head_dim: int | None = Field(default=None, ge=1, description="Decoupled RoPE dims")
    v_head_dim: int | None = Field(default=None, ge=1, description="Value head dim")
    published_params: float | None = Field(default=None, gt=0, description="Published total")
    published_active_params: float | None = Field(
        default=None, gt=0, description="Published active"
    )
    quantized_weights: str | None = Field(
        default=None,
        description="The checkpoint's weight format from quantization_config (fp8_e4m3, mxfp4, "
        "int4-g128, int8; a GGUF file's preset, q4_k_m...): the default weights dtype when "
        "none is asked for",
    )
    weight_bits_by_role: RoleBits | None = Field(
        default=None,
        description="The checkpoint's own stored bits per weight by role (a GGUF file's tensor "
        "mix), used when the weights dtype is quantized_weights (None: the format's rules)",
    )
    notes: tuple[str, ...] = Field(default=(), description="What the loader assumed")
    unknown_fields: tuple[str, ...] = Field(
        default=(), description="Config keys the loader did not understand (not costed)"
    )

    @model_validator(mode="before")
    @classmethod
    def _normalize(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        try:
            return architectures.normalize(data, frozenset(cls.model_fields))
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    @model_validator(mode="after")
    def _check(self) -> ModelConfig:
        if self.num_attention_heads % self.kv_heads:
            raise ValueError(
                f"num_attention_heads = {self.num_attention_heads} is not a multiple of "
                f"num_key_value_heads = {self.kv_heads}"
            )
        if self.num_experts and not 1 <= self.num_experts_per_tok <= self.num_experts:
            raise ValueError(
                f"num_experts_per_tok = {self.num_experts_per_tok}: "
                f"must be in 1..{self.num_experts}"
            )
        if self.kv_lora_rank and not (self.qk_nope_head_dim and self.qk_rope_head_dim):
            raise ValueError("MLA (kv_lora_rank) needs qk_nope_head_dim and qk_rope_head_dim")
        if self.head_dim is None and self.hidden_size < self.num_attention_heads:
            raise ValueError(
                f"hidden_size = {self.hidden_size} is smaller than num_attention_heads = "
                f"{self.num_attention_heads} (set head_dim, or fewer heads)"
            )
        if self.first_k_dense_replace > self.num_hidden_layers:
            raise ValueError(
                f"first_k_dense_replace = {self.first_k_dense_replace} exceeds "
                f"num_hidden_layers = {self.num_hidden_layers}"
            )
        if self.layer_types is not None and len(self.layer_types) != self.num_hidden_layers:
            raise ValueError(
                f"layer_types has {len(self.layer_types)} entries for "
                f"num_hidden_layers = {self.num_hidden_layers}"
            )
        return self

    # --- derived shapes --------------------------------------------------------------------

    @property
    def kv_heads(self) -> int:
        """KV heads (query heads when the config does not set them)."""
        return self.num_key_value_heads or self.num_attention_heads

    @property
    def head_size(self) -> int:
        """Per-head query/key dim of standard attention."""
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def is_mla(self) -> bool:
        """Multi-head latent attention (DeepSeek-V2)."""
        return self.kv_lora_rank is not None

    @property
    def is_moe(self) -> bool:
        """Mixture of experts."""
        return self.num_experts > 0

    @property
    def expert_size(self) -> int:
        """Width of one expert's MLP."""
        return self.moe_intermediate_size or self.intermediate_size

    @property
    def shared_expert_size(self) -> int:
        """Width of the always-on shared experts together (0: none)."""
        if self.shared_expert_intermediate_size:
            return self.shared_expert_intermediate_size
        return self.num_shared_experts * self.expert_size

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts."""
        return self.num_hidden_layers - self.first_k_dense_replace if self.is_moe else 0

    @property
    def dense_layers(self) -> int:
        """Layers with a dense MLP."""
        return self.num_hidden_layers - self.moe_layers

    def attention_groups(self) -> list[tuple[int | None, int]]:
        """``(window, layers)`` per attention kind: the sliding layers with their window, the
        full layers with None. A copy with another layer count (a pipeline stage, a pruned
        model) keeps the pattern's proportions."""
        n = self.num_hidden_layers
        if self.sliding_window is None:
            return [(None, n)]
        kinds = self.layer_types
        if kinds is None:
            return [(self.sliding_window, n)]
        sliding = sum(kind == "sliding_attention" for kind in kinds)
        if len(kinds) != n:
            sliding = round(sliding * n / len(kinds))
        groups = [(self.sliding_window, sliding), (None, n - sliding)]
        return [(w, c) for w, c in groups if c]

    @property
    def mlp_mats(self) -> int:
        """Weight matrices per MLP (gate, up, down = 3; up, down = 2)."""
        return 3 if self.mlp == "gated" else 2

    # --- parameter counts ------------------------------------------------------------------

    def attention_params(self) -> int:
        """Parameters of one layer's attention block."""
        h, heads = self.hidden_size, self.num_attention_heads
        if self.is_mla:
            nope, rope = self.qk_nope_head_dim or 0, self.qk_rope_head_dim or 0
            v = self.v_head_dim or nope
            rank = self.kv_lora_rank or 0
            q_out = heads * (nope + rope)
            q = (
                h * q_out
                if self.q_lora_rank is None
                else (h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * q_out)
            )
            kv = h * (rank + rope) + rank + rank * heads * (nope + v)
            return q + kv + heads * v * h
        d = self.head_size
        q_out, kv_out = heads * d, self.kv_heads * d
        weights = h * q_out + 2 * h * kv_out + q_out * h
        bias = (q_out + 2 * kv_out + h) if self.attention_bias else 0
        return weights + bias

    def mlp_params(self, width: int) -> int:
        """Parameters of one MLP of inner width ``width``."""
        bias = (width * (self.mlp_mats - 1) + self.hidden_size) if self.mlp_bias else 0
        return self.mlp_mats * self.hidden_size * width + bias

    def norm_params(self) -> int:
        """Parameters of one norm."""
        return self.hidden_size * (1 if self.norm == "rms" else 2)

    def embedding_params(self) -> int:
        """Token (and learned position) embeddings."""
        positions = 0
        if self.positions == "learned":
            positions = (self.max_position_embeddings + self.position_offset) * self.hidden_size
        return self.vocab_size * self.hidden_size + positions

    def lm_head_params(self) -> int:
        """LM head parameters not shared with the embedding."""
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    def _layer_params(self, experts_counted: int) -> tuple[int, int]:
        """(dense-layer, MoE-layer) parameters with ``experts_counted`` routed experts."""
        common = self.attention_params() + self.norms_per_layer * self.norm_params()
        dense = common + self.mlp_params(self.intermediate_size)
        router = self.hidden_size * self.num_experts
        experts = experts_counted * self.mlp_params(self.expert_size)
        shared = self.mlp_params(self.shared_expert_size) if self.shared_expert_size else 0
        return dense, common + router + experts + shared

    def params(self, active: bool = False) -> int:
        """Total parameters, or those one token uses (``active``: top-k routed experts only)."""
        counted = self.num_experts_per_tok if active else self.num_experts
        dense, moe = self._layer_params(counted)
        layers = dense * self.dense_layers + moe * self.moe_layers
        norms = self.norm_params() * (2 if self.embedding_norm else 1)
        return layers + norms + self.embedding_params() + self.lm_head_params()

    def kv_elements_per_token(self) -> int:
        """Cached elements per token per layer (K and V, or the MLA latent + RoPE key)."""
        if self.is_mla:
            return (self.kv_lora_rank or 0) + (self.qk_rope_head_dim or 0)
        return 2 * self.kv_heads * self.head_size


def list_models() -> list[str]:
    """Names of the packaged model presets."""
    return preset_names(_PACKAGE, _SUFFIX)


def load_model(name_or_path: str | Path) -> ModelConfig:
    """A validated :class:`ModelConfig` from a preset name, a ``config.json`` path, a Hugging
    Face snapshot folder holding one, or a ``*.gguf`` file (its header only: the shapes, the
    file type as ``quantized_weights`` and the file's bits per weight role as
    ``weight_bits_by_role``). Config keys the loader does not understand are named in a
    :class:`UserWarning` (and in ``unknown_fields``).

    Raises:
        ConfigError: unknown preset, unreadable or malformed file, an unsupported
            ``model_type`` or GGUF architecture, or invalid fields.
    """
    folder = Path(str(name_or_path)).expanduser()
    if folder.suffix.lower() == ".gguf" and not is_dir(folder):
        try:
            mtime_ns = folder.stat().st_mtime_ns
        except OSError:
            mtime_ns = -1  # read_gguf names the path and the reason
        return _load_gguf(folder.resolve(), mtime_ns)
    if is_dir(folder):
        if not (folder / "config.json").is_file():
            raise ConfigError(f"model folder {str(name_or_path)!r} has no config.json")
        name_or_path = folder / "config.json"
    path = resolve(name_or_path, _PACKAGE, _SUFFIX, "model")
    model = _load(path.resolve(), path.stat().st_mtime_ns)
    if model.unknown_fields:
        warnings.warn(
            f"{path.name}: not understood, not costed: {', '.join(model.unknown_fields)}",
            UserWarning,
            stacklevel=2,
        )
    return model


@lru_cache(maxsize=64)
def _load(path: Path, mtime_ns: int) -> ModelConfig:
    data = read_document(path)
    if isinstance(data, dict):
        data = {"name": path.stem if path.name != "config.json" else path.parent.name, **data}
    return validate(ModelConfig, data, path.name)


@lru_cache(maxsize=8)
def _load_gguf(path: Path, mtime_ns: int) -> ModelConfig:
    """A model from a GGUF file's header (read once per file version: a header takes seconds)."""
    from infersim.workloads.gguf.reader import model_fields, read_gguf  # it imports this module

    return validate(ModelConfig, model_fields(read_gguf(path)), path.name)
