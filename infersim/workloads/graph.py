"""Operator graphs of one prefill or one decode step of a :class:`ModelConfig`.

Identical layers appear once with ``count`` = number of layers, so a 80-layer model costs one
layer's simulation. The embedding gather and the LM head are included; the LM head runs on the
last token of each sequence only (what serving engines do). :class:`GraphOptions` carries the
graph-level techniques: KV cache on/off, FlashAttention vs naive, fused epilogues, sparse
weights, tensor-parallel sharding and multi-token decode (speculative verification).

When the weights dtype is a GGUF preset (:data:`infersim.dtypes.GGUF_FORMATS`), each weight GEMM
stores its role's own bits per weight (``Gemm.weight_bits``) from the preset's per-tensor mix on
this model, or from the checkpoint's mix for a model read from a GGUF file of that preset, and
:func:`weights_bytes` counts the mix tensor by tensor.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

from pydantic import BaseModel, ConfigDict, Field

from infersim import dtypes
from infersim.workloads.gguf.presets import tensor_mix
from infersim.workloads.gguf.tensors import RoleMix
from infersim.workloads.models import ModelConfig
from infersim.workloads.ops import (
    Attention,
    Collective,
    Elementwise,
    Epilogue,
    Gemm,
    Norm,
    OpBase,
    Softmax,
    Sparsity,
    sparse_bits,
    stored_bits,
)
from infersim.workloads.scenario import Precision, Scenario

ACTIVATION_FLOPS = {"gated": 5.0, "plain": 8.0}
"""Vector FLOPs per element of SiLU(gate)·up and of GELU (polynomial/tanh approximations)."""

ROPE_FLOPS_PER_ELEMENT = 3.0
"""Rotary embedding: two multiplies and an add per element."""

_QKV = "attn_qkv"
"""The weight role of every attention input projection (Q/K/V; MLA's q, kv_a, kv_b)."""


class GraphOptions(BaseModel):
    """How the step is executed (graph-level techniques); the defaults are a vLLM-like baseline:
    KV cache on, FlashAttention, separate elementwise kernels, dense weights, one chip."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    kv_cache: bool = Field(default=True, description="Off: every step recomputes the prefix")
    flash_attention: bool = Field(default=True, description="Fused attention (no scores in DRAM)")
    fuse_epilogues: bool = Field(default=False, description="Elementwise ops fused into GEMMs")
    sparsity: Sparsity = Field(default="dense", description="Structure of weight zeros")
    density: float = Field(default=1.0, gt=0, le=1, description="Nonzero weight fraction")
    sparse_kernel_efficiency: float = Field(
        default=0.0, ge=0, le=1, description="Fraction of zero MACs skipped (unstructured)"
    )
    tp: int = Field(default=1, ge=1, le=1024, description="Tensor-parallel degree (shards/chip)")
    decode_tokens: int = Field(
        default=1, ge=1, le=64, description="Tokens per sequence a decode step scores (verify)"
    )


def expected_experts_hit(experts: int, top_k: int, tokens: int) -> float:
    """Expected distinct experts a batch of ``tokens`` routes to: E·(1 − (1 − k/E)^B)."""
    return experts * (1.0 - (1.0 - top_k / experts) ** tokens)


def _shard(size: int, tp: int) -> int:
    return max(1, math.ceil(size / tp))


@lru_cache(maxsize=64)
def _gguf_mix(model: ModelConfig, preset: str) -> tuple[Mapping[str, RoleMix], float]:
    """The weight roles of ``model``'s tensors under the GGUF ``preset``, and the bytes of the
    tensors outside every role (norms, biases; a tied LM head is the embedding's tensor)."""
    mix, total = tensor_mix(model, preset)
    tied = model.tie_word_embeddings
    counted = sum(m.n_bytes for role, m in mix.items() if not (tied and role == "lm_head"))
    return MappingProxyType(mix), float(total - counted)


@lru_cache(maxsize=64)
def _gguf_bits(model: ModelConfig, weights: str) -> Mapping[str, float] | None:
    if weights not in dtypes.GGUF_FORMATS:
        return None
    own = model.weight_bits_by_role
    if own is not None and model.quantized_weights == weights:
        return MappingProxyType(own.model_dump(exclude_none=True))
    mix, _ = _gguf_mix(model, weights)
    return MappingProxyType({role: m.bits_per_weight for role, m in mix.items()})


@lru_cache(maxsize=64)
def _gguf_dequant(model: ModelConfig, weights: str) -> Mapping[str, float] | None:
    if weights not in dtypes.GGUF_FORMATS:
        return None
    mix, _ = _gguf_mix(model, weights)
    return MappingProxyType({role: m.dequant_ops_per_weight for role, m in mix.items()})


def role_dequant_ops(model: ModelConfig, weights: str) -> Mapping[str, float] | None:
    """Vector ops per weight that dequantize each weight role when ``weights`` is a GGUF
    preset (element-weighted over its tensor types, see
    :data:`infersim.workloads.gguf.blocks.DEQUANT_OPS_PER_WEIGHT`); None otherwise."""
    return _gguf_dequant(model, dtypes.canonical(weights))


def role_weight_bits(model: ModelConfig, weights: str) -> Mapping[str, float] | None:
    """Stored bits per weight (scales included) of each weight role (``attn_qkv``,
    ``attn_output``, ``ffn_up``, ``ffn_down``, ``experts_up``, ``experts_down``, ``router``,
    ``lm_head``, ``embedding``) when ``weights`` is a GGUF preset: the checkpoint's own mix
    (``model.weight_bits_by_role``) when ``weights`` is the checkpoint's format, else the
    preset's ``llama-quantize`` rules on ``model``; None for any other format (one width)."""
    return _gguf_bits(model, dtypes.canonical(weights))


@dataclass(frozen=True)
class AttnShape:
    """One attention call of a step: ``batch`` sequences of ``q_len`` new tokens over
    ``kv_len`` keys; ``cached`` reads keys from the KV cache (in the KV dtype, MLA absorbed)."""

    batch: int
    q_len: int
    kv_len: int
    cached: bool

    @property
    def tokens(self) -> int:
        """Query tokens."""
        return self.batch * self.q_len


@dataclass(frozen=True)
class _Step:
    """Shapes and options shared by every layer of one step (on one tensor-parallel chip):
    ``tokens`` rows through the linear layers, the attention calls, ``logits`` LM-head rows."""

    model: ModelConfig
    tokens: int
    attention: tuple[AttnShape, ...]
    logits: int
    precision: Precision
    options: GraphOptions

    @property
    def fuse(self) -> bool:
        return self.options.fuse_epilogues

    def gemm(
        self,
        name: str,
        k: int,
        n: int,
        count: int,
        batch: int = 1,
        m: int = 0,
        epilogue: Epilogue | None = None,
        role: str = "",
    ) -> Gemm:
        """A weight GEMM; ``role`` names its weight role for a per-role mix (GGUF)."""
        p, o = self.precision, self.options
        bits = role_weight_bits(self.model, p.weights) if role else None
        dequant = role_dequant_ops(self.model, p.weights) if role else None
        return Gemm(
            name=name,
            count=count,
            m=m or self.tokens,
            k=k,
            n=n,
            batch=batch,
            a_dtype=p.act,
            b_dtype=p.weights,
            out_dtype=p.act,
            sparsity=o.sparsity,
            density=o.density,
            sparse_kernel_efficiency=o.sparse_kernel_efficiency,
            epilogue=epilogue if self.fuse else None,
            weight_bits=bits.get(role) if bits else None,
            dequant_ops_per_weight=dequant.get(role) if dequant else None,
        )

    def vector(
        self, name: str, elements: int, inputs: int, flops: float, count: int
    ) -> Elementwise:
        return Elementwise(
            name=name,
            count=count,
            elements=elements,
            inputs=inputs,
            flops_per_element=flops,
            dtype=self.precision.act,
        )

    def norm(self, name: str, cols: int, count: int, rows: int = 0) -> Norm:
        return Norm(
            name=name,
            count=count,
            rows=rows or self.tokens,
            cols=cols,
            norm=self.model.norm,
            dtype=self.precision.act,
        )

    def all_reduce(self, name: str, count: int, rows: int = 0) -> list[OpBase]:
        tp = self.options.tp
        if tp == 1:
            return []
        payload = (rows or self.tokens) * self.model.hidden_size * dtypes.nbytes(self.precision.act)
        return [
            Collective(
                name=name,
                count=count,
                collective="all-reduce",
                payload_bytes=payload,
                participants=tp,
            )
        ]


def _attention_block(s: _Step, layers: int) -> list[OpBase]:
    m, t, tp = s.model, s.tokens, s.options.tp
    h, heads = m.hidden_size, _shard(m.num_attention_heads, tp)
    ops: list[OpBase] = [s.norm("attn.norm", h, layers)]
    residual = Epilogue(name="residual", flops_per_output=1.0, extra_inputs=1)
    if m.is_mla:
        nope, rope = m.qk_nope_head_dim or 0, m.qk_rope_head_dim or 0
        v, rank = m.v_head_dim or nope, m.kv_lora_rank or 0
        if m.q_lora_rank is None:
            ops.append(s.gemm("attn.q", h, heads * (nope + rope), layers, role=_QKV))
        else:
            ops += [
                s.gemm("attn.q_a", h, m.q_lora_rank, layers, role=_QKV),
                s.norm("attn.q_a_norm", m.q_lora_rank, layers),
                s.gemm("attn.q_b", m.q_lora_rank, heads * (nope + rope), layers, role=_QKV),
            ]
        ops += [
            s.gemm("attn.kv_a", h, rank + rope, layers, role=_QKV),
            s.norm("attn.kv_a_norm", rank, layers),
        ]
        if not s.fuse:
            ops.append(
                s.vector("attn.rope", t * (heads + 1) * rope, 1, ROPE_FLOPS_PER_ELEMENT, layers)
            )
        ops += _kv_write(s, m.kv_elements_per_token(), layers)
        for shape in s.attention:
            rows = shape.tokens
            if shape.cached:  # absorbed: attend over the latent cache, one shared KV head
                ops += [
                    s.gemm("attn.q_absorb", nope, rank, layers, batch=heads, m=rows, role=_QKV),
                    _attention(s, shape, heads, 1, rank + rope, rank, layers, shared_kv=True),
                    s.gemm("attn.o_absorb", rank, v, layers, batch=heads, m=rows, role=_QKV),
                ]
            else:  # decompress K and V, then standard multi-head attention
                ops += [
                    s.gemm("attn.kv_b", rank, heads * (nope + v), layers, m=rows, role=_QKV),
                    _attention(s, shape, heads, heads, nope + rope, v, layers),
                ]
        ops.append(s.gemm("attn.o", heads * v, h, layers, epilogue=residual, role="attn_output"))
    else:
        d, kvh = m.head_size, _shard(m.kv_heads, tp)
        qkv_out = (heads + 2 * kvh) * d
        rope_epilogue = Epilogue(
            name="rope", flops_per_output=ROPE_FLOPS_PER_ELEMENT * (heads + kvh) / (heads + 2 * kvh)
        )
        ops.append(s.gemm("attn.qkv", h, qkv_out, layers, epilogue=rope_epilogue, role=_QKV))
        if not s.fuse:
            ops.append(
                s.vector("attn.rope", t * (heads + kvh) * d, 1, ROPE_FLOPS_PER_ELEMENT, layers)
            )
        ops += _kv_write(s, 2 * kvh * d, layers)
        ops += [
            _attention(s, shape, heads, kvh, d, d, n, window=window)
            for shape in s.attention
            for window, n in m.attention_groups()
        ]
        ops.append(s.gemm("attn.o", heads * d, h, layers, epilogue=residual, role="attn_output"))
    ops += s.all_reduce("attn.all_reduce", layers)
    if not s.fuse:
        ops.append(s.vector("attn.residual", t * h, 2, 1.0, layers))
    return ops


def _kv_write(s: _Step, kv_elems: int, layers: int) -> list[OpBase]:
    """Copy this step's keys and values into the cache (fused: the projection writes them)."""
    if not s.options.kv_cache or s.fuse:
        return []
    return [
        Elementwise(
            name="attn.kv_write",
            count=layers,
            elements=s.tokens * kv_elems,
            inputs=1,
            flops_per_element=0.0,
            dtype=s.precision.kv,
        )
    ]


def _attention(
    s: _Step, shape: AttnShape, heads: int, kv_heads: int, d: int, dv: int, layers: int,
    shared_kv: bool = False, window: int | None = None,
) -> Attention:
    return Attention(
        name="attn.sdpa",
        count=layers,
        batch=shape.batch,
        q_len=shape.q_len,
        kv_len=shape.kv_len,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=d,
        v_head_dim=dv,
        causal=True,
        window=window,
        shared_kv=shared_kv,
        dtype=s.precision.act,
        kv_dtype=s.precision.kv if shape.cached else s.precision.act,
        fused=s.options.flash_attention,
    )


def _mlp(
    s: _Step,
    prefix: str,
    width: int,
    count: int,
    tokens: int = 0,
    batch: int = 1,
    residual: bool = True,
    roles: tuple[str, str] = ("ffn_up", "ffn_down"),
) -> list[OpBase]:
    m = s.model
    t = tokens or s.tokens
    gated = m.mlp == "gated"
    act = Epilogue(
        name="activation",
        flops_per_output=ACTIVATION_FLOPS[m.mlp] / (2 if gated else 1),
        out_ratio=0.5 if gated else 1.0,
    )
    ops: list[OpBase] = [
        s.gemm(
            f"{prefix}.up",
            m.hidden_size,
            2 * width if gated else width,
            count,
            batch=batch,
            m=t,
            epilogue=act,
            role=roles[0],
        ),
    ]
    if not s.fuse:
        ops.append(
            s.vector(
                f"{prefix}.act",
                batch * t * width,
                2 if gated else 1,
                ACTIVATION_FLOPS[m.mlp],
                count,
            )
        )
    add = Epilogue(name="residual", flops_per_output=1.0, extra_inputs=1) if residual else None
    ops.append(
        s.gemm(
            f"{prefix}.down", width, m.hidden_size, count, batch=batch, m=t, epilogue=add,
            role=roles[1],
        )
    )
    return ops


def _moe_block(s: _Step, layers: int) -> list[OpBase]:
    m, t, h = s.model, s.tokens, s.model.hidden_size
    k, e = m.num_experts_per_tok, m.num_experts
    hit = min(e, max(k, round(expected_experts_hit(e, k, t))))
    per_expert = max(1, math.ceil(t * k / hit))
    width = _shard(m.expert_size, s.options.tp)
    ops: list[OpBase] = [
        s.gemm("moe.router", h, e, layers, role="router"),
        Softmax(name="moe.router_softmax", count=layers, rows=t, cols=e),
        *_mlp(
            s, "moe.experts", width, layers, tokens=per_expert, batch=hit, residual=False,
            roles=("experts_up", "experts_down"),
        ),
    ]
    if m.shared_expert_size:
        shared = _shard(m.shared_expert_size, s.options.tp)
        ops += _mlp(s, "moe.shared", shared, layers, residual=False)
    ops.append(s.vector("moe.combine", t * h, k, 2.0 * k, layers))
    return ops


def _graph(step: _Step) -> list[OpBase]:
    m, t, tp = step.model, step.tokens, step.options.tp
    layers = m.num_hidden_layers
    learned = m.positions == "learned"
    ops: list[OpBase] = [
        step.vector("embed", t * m.hidden_size, 2 if learned else 1, 1.0 if learned else 0.0, 1),
    ]
    ops += _attention_block(step, layers)
    ops.append(step.norm("mlp.norm", m.hidden_size, layers))
    if m.dense_layers:
        ops += _mlp(step, "mlp", _shard(m.intermediate_size, tp), m.dense_layers)
    if m.moe_layers:
        ops += _moe_block(step, m.moe_layers)
        if step.fuse:  # the combine kernel also adds the residual
            ops.append(step.vector("mlp.residual", t * m.hidden_size, 2, 1.0, m.moe_layers))
    ops += step.all_reduce("mlp.all_reduce", layers)
    if not step.fuse:
        ops.append(step.vector("mlp.residual", t * m.hidden_size, 2, 1.0, layers))
    logits = step.logits
    ops += [
        step.norm("final_norm", m.hidden_size, 1, rows=logits),
        step.gemm("lm_head", m.hidden_size, _shard(m.vocab_size, tp), 1, m=logits, role="lm_head"),
    ]
    if tp > 1:
        payload = logits * m.vocab_size * dtypes.nbytes(step.precision.act)
        ops.append(
            Collective(
                name="lm_head.all_gather",
                collective="all-gather",
                payload_bytes=payload,
                participants=tp,
            )
        )
    return ops


def prefill(
    model: ModelConfig,
    batch: int,
    prompt_len: int,
    precision: Precision | None = None,
    options: GraphOptions | None = None,
) -> list[OpBase]:
    """Operators of the prefill of ``batch`` prompts of ``prompt_len`` tokens each."""
    shape = AttnShape(batch, prompt_len, prompt_len, cached=False)
    step = _Step(model, shape.tokens, (shape,), batch, precision or Precision(),
                 options or GraphOptions())
    return _graph(step)


def decode_step(
    model: ModelConfig,
    batch: int,
    context_len: int,
    precision: Precision | None = None,
    options: GraphOptions | None = None,
) -> list[OpBase]:
    """Operators of one decode step: ``batch`` sequences each score ``options.decode_tokens``
    new tokens (1, or K+1 when verifying a speculative draft) over ``context_len`` cached ones.
    Without a KV cache the step recomputes the whole prefix, like a prefill of it."""
    opts = options or GraphOptions()
    new = opts.decode_tokens
    if opts.kv_cache:
        shape = AttnShape(batch, new, context_len + new, cached=True)
        logits = batch * new
    else:
        shape = AttnShape(batch, context_len + new, context_len + new, cached=False)
        logits = batch
    return _graph(_Step(model, shape.tokens, (shape,), logits, precision or Precision(), opts))


def mixed_step(
    model: ModelConfig,
    prefill_chunks: Sequence[tuple[int, int, int]],
    decode_batch: int,
    decode_context: int,
    precision: Precision | None = None,
    options: GraphOptions | None = None,
) -> list[OpBase]:
    """One serving iteration that mixes prefill chunks with decodes (continuous batching,
    chunked prefill): ``prefill_chunks`` are ``(sequences, new_tokens, prior_context)`` groups;
    ``decode_batch`` sequences decode ``options.decode_tokens`` tokens over ``decode_context``
    cached tokens each. The linear layers run once over every token of the iteration."""
    opts = options or GraphOptions()
    new = opts.decode_tokens
    shapes = [AttnShape(n, chunk, prior + chunk, cached=False)
              for n, chunk, prior in prefill_chunks if n > 0 and chunk > 0]
    if decode_batch > 0:
        shapes.append(AttnShape(decode_batch, new, decode_context + new, cached=True))
    if not shapes:
        raise ValueError("an iteration needs at least one prefill chunk or decode")
    tokens = sum(shape.tokens for shape in shapes)
    logits = sum(n for n, _, _ in prefill_chunks) + decode_batch * new
    step = _Step(model, tokens, tuple(shapes), max(1, logits), precision or Precision(), opts)
    return _graph(step)


def build(
    model: ModelConfig, scenario: Scenario, options: GraphOptions | None = None
) -> list[OpBase]:
    """The operator graph of ``scenario`` on ``model``."""
    if scenario.phase == "prefill":
        return prefill(model, scenario.batch, scenario.prompt_len, scenario.precision, options)
    return decode_step(model, scenario.batch, scenario.context_len, scenario.precision, options)


@dataclass(frozen=True)
class Footprint:
    """Bytes that must be resident in one chip's DRAM during a step."""

    weights_bytes: float
    kv_bytes: float
    activation_bytes: float

    @property
    def total_bytes(self) -> float:
        """Everything resident."""
        return self.weights_bytes + self.kv_bytes + self.activation_bytes


def weights_bytes(
    model: ModelConfig, precision: Precision, options: GraphOptions | None = None
) -> float:
    """All parameters (every expert) as stored: the weight dtype, compressed when sparse (the
    embedding table, a lookup, stays dense). A GGUF preset counts its per-tensor mix: each
    role's elements at :func:`role_weight_bits` (compressed when sparse), the embedding and
    the tensors outside the roles (norms, biases) as the mix stores them."""
    opts = options or GraphOptions()
    by_role = role_weight_bits(model, precision.weights)
    if by_role is not None:
        mix, other_bytes = _gguf_mix(model, dtypes.canonical(precision.weights))
        total = other_bytes
        for role, part in mix.items():
            if role == "lm_head" and model.tie_word_embeddings:
                continue  # the embedding's tensor
            b = by_role.get(role, part.bits_per_weight)
            if role != "embedding":
                b = sparse_bits(b, opts.sparsity, opts.density)
            total += part.n_elements * b / 8
        return total
    table = model.vocab_size * model.hidden_size
    bits = stored_bits(precision.weights, opts.sparsity, opts.density)
    return (model.params() - table) * bits / 8 + table * dtypes.nbytes(precision.weights)


def kv_cache_bytes(model: ModelConfig, batch: int, tokens: int, precision: Precision) -> float:
    """KV cache of ``batch`` sequences of ``tokens`` (a sliding window caps what its layers
    keep; full-attention layers keep every token)."""
    kept = sum(n * (min(tokens, w) if w else tokens) for w, n in model.attention_groups())
    return batch * kept * model.kv_elements_per_token() * dtypes.nbytes(precision.kv)


def activation_bytes(ops: list[OpBase]) -> float:
    """Peak live activations: the largest input+output set of any one operator (weights and
    cached KV excluded), since activations are freed layer by layer."""
    peak = 0.0
    for op in ops:
        live = op.compulsory_bytes - op.weight_bytes
        if isinstance(op, Attention):
            live -= op.kv_bytes
        peak = max(peak, live)
    return peak


def footprint(
    model: ModelConfig,
    scenario: Scenario,
    ops: list[OpBase] | None = None,
    options: GraphOptions | None = None,
) -> Footprint:
    """Weights, KV cache and peak activations of ``scenario`` on one chip (``options.tp``
    shards weights and KV; without a KV cache nothing is cached)."""
    opts = options or GraphOptions()
    ops = ops if ops is not None else build(model, scenario, opts)
    p = scenario.precision
    kv = kv_cache_bytes(model, scenario.batch, scenario.cached_tokens, p) if opts.kv_cache else 0
    # KV heads shard over TP (replicated when fewer than the chips); an MLA latent is replicated.
    kv_share = 1.0 if model.is_mla else _shard(model.kv_heads, opts.tp) / model.kv_heads
    return Footprint(
        weights_bytes=weights_bytes(model, p, opts) / opts.tp,
        kv_bytes=kv * kv_share,
        activation_bytes=activation_bytes(ops),
    )
