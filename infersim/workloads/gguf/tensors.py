"""The tensors of a GGUF file: which a :class:`ModelConfig` has (names, layers, ggml shapes) and
which engine weight role each plays (:data:`ENGINE_ROLES`, :func:`role_mix`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from infersim.workloads.gguf.blocks import BLOCK_TYPES
from infersim.workloads.models import ModelConfig

_FUSED_QKV = frozenset({"phi3", "gpt2", "bloom", "falcon", "gpt_neox"})
"""Architectures whose GGUF stores Q, K and V as one ``attn_qkv`` tensor."""
_FUSED_GATE_UP = frozenset({"phi3"})
"""Architectures whose GGUF stores gate and up as one ``ffn_up`` tensor of twice the width."""
_NORMS = {
    1: ("attn_norm",), 2: ("attn_norm", "ffn_norm"),
    4: ("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"),
}  # fmt: skip
"""GGUF names of a layer's norms, by count (Gemma 2/3 have four)."""


def _numbered(count: int) -> tuple[str, ...]:
    return tuple(f"norm_{i}" for i in range(count))


@dataclass(frozen=True, slots=True)
class TensorPlan:
    """One GGUF tensor: name, role (name without layer and suffix), layer (None outside the
    blocks), ggml shape (``ne``, row length first), element count, type and bytes."""

    name: str
    role: str
    layer: int | None
    shape: tuple[int, ...]
    n_elements: int
    ggml_type: str
    n_bytes: int

    @property
    def bits_per_weight(self) -> float:
        """Stored bits per element."""
        return 8 * self.n_bytes / self.n_elements


_Shape = tuple[str, int | None, tuple[int, ...], bool]


@dataclass
class _Tensors:
    """(name, layer, ne, quantizable) of a model's tensors, in file order."""

    m: ModelConfig
    out: list[_Shape] = field(default_factory=list)

    def vec(self, name: str, layer: int | None, width: int) -> None:
        self.out.append((name, layer, (width,), False))

    def norm(self, stems: tuple[str, ...], layer: int | None) -> None:
        parts = ("weight",) if self.m.norm == "rms" else ("weight", "bias")
        for stem in stems:
            for part in parts:
                self.vec(f"{stem}.{part}", layer, self.m.hidden_size)

    def mat(self, role: str, layer: int | None, cols: int, rows: int, bias: bool = False,
            experts: int = 0, quantizable: bool = True) -> None:  # fmt: skip
        ne = (cols, rows, experts) if experts else (cols, rows)
        self.out.append((f"{role}.weight", layer, ne, quantizable))
        if bias:
            self.out.append((f"{role}.bias", layer, (rows, experts) if experts else (rows,), False))


def tensor_shapes(m: ModelConfig, layers: Iterable[int] | None = None) -> list[_Shape]:
    """(name, layer, ggml shape ``ne``, quantizable) of every tensor of ``m``'s GGUF, in file
    order, counting exactly what ``m.params()`` counts (``layers``: only those layers' tensors
    besides the ones outside the blocks)."""
    t, h = _Tensors(m), m.hidden_size
    t.mat("token_embd", None, h, m.vocab_size)
    if m.positions == "learned":
        rows = m.max_position_embeddings + m.position_offset
        t.mat("position_embd", None, h, rows, quantizable=False)
    if m.embedding_norm:
        t.norm(("token_embd_norm",), None)
    for i in range(m.num_hidden_layers) if layers is None else layers:
        _layer(t, m, i)
    t.norm(("output_norm",), None)
    if not m.tie_word_embeddings:
        t.mat("output", None, h, m.vocab_size)
    return t.out


def _layer(t: _Tensors, m: ModelConfig, i: int) -> None:
    t.norm(_NORMS.get(m.norms_per_layer, _numbered(m.norms_per_layer)), i)
    _attention(t, m, i)
    if not (m.is_moe and i >= m.first_k_dense_replace):
        _mlp(t, m, i, m.intermediate_size, "")
        return
    t.mat("ffn_gate_inp", i, m.hidden_size, m.num_experts, quantizable=False)
    _mlp(t, m, i, m.expert_size, "_exps", m.num_experts)
    if m.shared_expert_size:
        _mlp(t, m, i, m.shared_expert_size, "_shexp")


def _attention(t: _Tensors, m: ModelConfig, i: int) -> None:
    h, heads, d, bias = m.hidden_size, m.num_attention_heads, m.head_size, m.attention_bias
    if m.is_mla:
        nope, rope = m.qk_nope_head_dim or 0, m.qk_rope_head_dim or 0
        v, rank = m.v_head_dim or nope, m.kv_lora_rank or 0
        if m.q_lora_rank:
            t.mat("attn_q_a", i, h, m.q_lora_rank)
            t.vec("attn_q_a_norm.weight", i, m.q_lora_rank)
            t.mat("attn_q_b", i, m.q_lora_rank, heads * (nope + rope))
        else:
            t.mat("attn_q", i, h, heads * (nope + rope))
        t.mat("attn_kv_a_mqa", i, h, rank + rope)
        t.vec("attn_kv_a_norm.weight", i, rank)
        t.mat("attn_kv_b", i, rank, heads * (nope + v))
        t.mat("attn_output", i, heads * v, h)
        return
    if m.model_type in _FUSED_QKV:
        t.mat("attn_qkv", i, h, (heads + 2 * m.kv_heads) * d, bias)
    else:
        t.mat("attn_q", i, h, heads * d, bias)
        t.mat("attn_k", i, h, m.kv_heads * d, bias)
        t.mat("attn_v", i, h, m.kv_heads * d, bias)
    t.mat("attn_output", i, heads * d, h, bias)


def _mlp(t: _Tensors, m: ModelConfig, i: int, width: int, suffix: str, experts: int = 0) -> None:
    h, bias = m.hidden_size, m.mlp_bias
    if m.mlp == "gated" and m.model_type in _FUSED_GATE_UP and not suffix:
        t.mat("ffn_up", i, h, 2 * width, bias)
    elif m.mlp == "gated":
        t.mat(f"ffn_gate{suffix}", i, h, width, bias, experts)
        t.mat(f"ffn_up{suffix}", i, h, width, bias, experts)
    else:
        t.mat(f"ffn_up{suffix}", i, h, width, bias, experts)
    t.mat(f"ffn_down{suffix}", i, width, h, bias, experts)



ENGINE_ROLES: dict[str, str] = {
    "attn_q": "attn_qkv", "attn_k": "attn_qkv", "attn_v": "attn_qkv", "attn_qkv": "attn_qkv",
    "attn_q_a": "attn_qkv", "attn_q_b": "attn_qkv", "attn_kv_a_mqa": "attn_qkv",
    "attn_kv_b": "attn_qkv", "attn_output": "attn_output",
    "ffn_gate": "ffn_up", "ffn_up": "ffn_up", "ffn_down": "ffn_down",
    "ffn_gate_shexp": "ffn_up", "ffn_up_shexp": "ffn_up", "ffn_down_shexp": "ffn_down",
    "ffn_gate_exps": "experts_up", "ffn_up_exps": "experts_up", "ffn_down_exps": "experts_down",
    "ffn_gate_inp": "router", "output": "lm_head", "token_embd": "embedding",
    "position_embd": "embedding",
}  # fmt: skip
"""Tensor role -> the engines' weight role (shared experts count with the dense MLP roles)."""


class _Tensor(Protocol):
    """A :class:`TensorPlan` or a :class:`GgufTensor`."""

    @property
    def name(self) -> str: ...
    @property
    def ggml_type(self) -> str: ...
    @property
    def n_elements(self) -> int: ...
    @property
    def n_bytes(self) -> int: ...


@dataclass(frozen=True, slots=True)
class RoleMix:
    """The weights of one engine role: elements, bytes, and per weight the stored bits and the
    estimated dequantization vector ops."""

    n_elements: int
    n_bytes: int
    dequant_ops: float

    @property
    def bits_per_weight(self) -> float:
        """Stored bits per weight, element-weighted over the role's tensors."""
        return 8 * self.n_bytes / self.n_elements

    @property
    def dequant_ops_per_weight(self) -> float:
        """Estimated vector ops per weight to dequantize (:data:`DEQUANT_OPS_PER_WEIGHT`)."""
        return self.dequant_ops / self.n_elements


def tensor_role(name: str) -> str:
    """A GGUF tensor name without its ``blk.N.`` prefix and ``.weight``/``.bias`` suffix; old
    files' per-expert ``ffn_up.E`` tensors read as the merged ``ffn_up_exps``."""
    stem = name.rsplit(".", 1)[0] if name.endswith((".weight", ".bias")) else name
    if stem.startswith("blk."):
        stem = stem.split(".", 2)[-1]
    base, _, expert = stem.rpartition(".")
    if expert.isdigit() and base in {"ffn_gate", "ffn_up", "ffn_down"}:
        return f"{base}_exps"
    return stem


def role_mix(tensors: Iterable[_Tensor], counts: Iterable[int] | None = None
             ) -> dict[str, RoleMix]:
    """:class:`RoleMix` per engine role (:data:`ENGINE_ROLES` values) of a tensor list: the
    :func:`tensor_types` of a model or the ``tensors`` of a :class:`GgufHeader` (``counts``:
    how many times each tensor stands, default once). Biases, norms and anything else outside
    :data:`ENGINE_ROLES` are left out; without an ``output`` tensor (tied embeddings) the
    embedding is reported as ``lm_head`` too."""
    elements: dict[str, int] = {}
    nbytes: dict[str, int] = {}
    ops: dict[str, float] = {}
    listed = list(tensors)
    times = [1] * len(listed) if counts is None else list(counts)
    items = [(t, tensor_role(t.name), n) for t, n in zip(listed, times, strict=True)
             if not t.name.endswith(".bias")]
    tied = not any(role == "output" for _, role, _ in items)
    for t, role, n in items:
        targets = [ENGINE_ROLES[role]] if role in ENGINE_ROLES else []
        if tied and role == "token_embd":
            targets.append("lm_head")
        cost = BLOCK_TYPES[t.ggml_type].dequant_ops_per_weight * t.n_elements * n
        for r in targets:
            elements[r] = elements.get(r, 0) + t.n_elements * n
            nbytes[r] = nbytes.get(r, 0) + t.n_bytes * n
            ops[r] = ops.get(r, 0.0) + cost
    return {r: RoleMix(elements[r], nbytes[r], ops[r]) for r in elements}

