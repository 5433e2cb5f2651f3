"""Transformer model descriptions read from Hugging Face–style ``config.json`` files.

:class:`ModelConfig` keeps HF field names (``hidden_size``, ``num_key_value_heads``,
``kv_lora_rank``...) and accepts the GPT-2/OPT/Mixtral/DeepSeek spellings of the same fields.
Architecture details HF implies by ``model_type`` (gated MLP, norm kind, biases, learned
positions) are explicit fields, filled from the model family when a config leaves them out.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from infersim.io import preset_names, read_document, resolve, validate

_PACKAGE = "infersim.workloads"
_SUFFIX = ".json"

_ALIASES = {
    # GPT-2 / GPT-3 spellings
    "n_embd": "hidden_size",
    "n_layer": "num_hidden_layers",
    "n_head": "num_attention_heads",
    "n_inner": "intermediate_size",
    "n_positions": "max_position_embeddings",
    # OPT
    "ffn_dim": "intermediate_size",
    # Mixtral / DeepSeek MoE
    "num_local_experts": "num_experts",
    "n_routed_experts": "num_experts",
    "n_shared_experts": "num_shared_experts",
}

_FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    # model_type -> architecture fields HF leaves implicit
    "llama": {"mlp": "gated", "norm": "rms", "positions": "rope"},
    "mistral": {"mlp": "gated", "norm": "rms", "positions": "rope"},
    "mixtral": {"mlp": "gated", "norm": "rms", "positions": "rope"},
    "qwen2": {"mlp": "gated", "norm": "rms", "positions": "rope", "attention_bias": True},
    "deepseek_v2": {"mlp": "gated", "norm": "rms", "positions": "rope"},
    "opt": {
        "mlp": "plain",
        "norm": "layer",
        "positions": "learned",
        "attention_bias": True,
        "mlp_bias": True,
        "position_offset": 2,
    },
    "gpt2": {
        "mlp": "plain",
        "norm": "layer",
        "positions": "learned",
        "attention_bias": True,
        "mlp_bias": True,
    },
}


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
    mlp: Literal["gated", "plain"] = Field(default="gated", description="SwiGLU (3 mats) or 2")
    norm: Literal["rms", "layer"] = Field(default="rms", description="RMSNorm or LayerNorm")
    positions: Literal["rope", "learned"] = Field(default="rope", description="Position scheme")
    position_offset: int = Field(default=0, ge=0, description="Extra learned positions (OPT: 2)")
    attention_bias: bool = Field(default=False, description="Biases on Q/K/V/O projections")
    mlp_bias: bool = Field(default=False, description="Biases on MLP projections")
    # Mixture of experts
    num_experts: int = Field(default=0, ge=0, le=1 << 16, description="Routed experts (0: dense)")
    num_experts_per_tok: int = Field(default=0, ge=0, le=1 << 16, description="Top-k")
    num_shared_experts: int = Field(default=0, ge=0, le=1 << 10, description="Always-on experts")
    moe_intermediate_size: int | None = Field(default=None, ge=1, description="Expert MLP width")
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

    @model_validator(mode="before")
    @classmethod
    def _normalize(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        out = {_ALIASES.get(k, k): v for k, v in data.items()}
        family = _FAMILY_DEFAULTS.get(str(out.get("model_type", "llama")), {})
        for key, value in family.items():
            out.setdefault(key, value)
        if "intermediate_size" not in out and "hidden_size" in out:
            out["intermediate_size"] = 4 * out["hidden_size"]  # GPT-2's n_inner = None
        return out

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
    def moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts."""
        return self.num_hidden_layers - self.first_k_dense_replace if self.is_moe else 0

    @property
    def dense_layers(self) -> int:
        """Layers with a dense MLP."""
        return self.num_hidden_layers - self.moe_layers

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
        common = self.attention_params() + 2 * self.norm_params()
        dense = common + self.mlp_params(self.intermediate_size)
        router = self.hidden_size * self.num_experts
        experts = (experts_counted + self.num_shared_experts) * self.mlp_params(self.expert_size)
        return dense, common + router + experts

    def params(self, active: bool = False) -> int:
        """Total parameters, or those one token uses (``active``: top-k routed experts only)."""
        counted = self.num_experts_per_tok if active else self.num_experts
        dense, moe = self._layer_params(counted)
        layers = dense * self.dense_layers + moe * self.moe_layers
        return layers + self.norm_params() + self.embedding_params() + self.lm_head_params()

    def kv_elements_per_token(self) -> int:
        """Cached elements per token per layer (K and V, or the MLA latent + RoPE key)."""
        if self.is_mla:
            return (self.kv_lora_rank or 0) + (self.qk_rope_head_dim or 0)
        return 2 * self.kv_heads * self.head_size


def list_models() -> list[str]:
    """Names of the packaged model presets."""
    return preset_names(_PACKAGE, _SUFFIX)


def load_model(name_or_path: str | Path) -> ModelConfig:
    """A validated :class:`ModelConfig` from a preset name or a ``config.json`` path.

    Raises:
        ConfigError: unknown preset, unreadable or malformed file, or invalid fields.
    """
    path = resolve(name_or_path, _PACKAGE, _SUFFIX, "model")
    return _load(path.resolve(), path.stat().st_mtime_ns)


@lru_cache(maxsize=64)
def _load(path: Path, mtime_ns: int) -> ModelConfig:
    data = read_document(path)
    if isinstance(data, dict):
        data = {"name": path.stem if path.name != "config.json" else path.parent.name, **data}
    return validate(ModelConfig, data, path.name)
