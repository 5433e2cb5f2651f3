"""Operator graphs of one prefill or one decode step of a :class:`ModelConfig`.

Identical layers appear once with ``count`` = number of layers, so a 80-layer model costs one
layer's simulation. The embedding gather and the LM head are included; the LM head runs on the
last token of each sequence only (what serving engines do).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infersim import dtypes
from infersim.workloads.models import ModelConfig
from infersim.workloads.ops import (
    Attention,
    Elementwise,
    Gemm,
    Norm,
    OpBase,
    Softmax,
)
from infersim.workloads.scenario import Precision, Scenario

ACTIVATION_FLOPS = {"gated": 5.0, "plain": 8.0}
"""Vector FLOPs per element of SiLU(gate)·up and of GELU (polynomial/tanh approximations)."""

ROPE_FLOPS_PER_ELEMENT = 3.0
"""Rotary embedding: two multiplies and an add per element."""


def expected_experts_hit(experts: int, top_k: int, tokens: int) -> float:
    """Expected distinct experts a batch of ``tokens`` routes to: E·(1 − (1 − k/E)^B)."""
    return experts * (1.0 - (1.0 - top_k / experts) ** tokens)


@dataclass(frozen=True)
class _Step:
    """Shapes shared by every layer of one step."""

    model: ModelConfig
    batch: int
    q_len: int
    kv_len: int
    precision: Precision
    decode: bool

    @property
    def tokens(self) -> int:
        return self.batch * self.q_len

    def gemm(self, name: str, k: int, n: int, count: int, batch: int = 1, m: int = 0) -> Gemm:
        p = self.precision
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


def _attention_block(s: _Step, layers: int) -> list[OpBase]:
    m, t = s.model, s.tokens
    h, heads = m.hidden_size, m.num_attention_heads
    ops: list[OpBase] = [s.norm("attn.norm", h, layers)]
    kv_elems = m.kv_elements_per_token()
    if m.is_mla:
        nope, rope = m.qk_nope_head_dim or 0, m.qk_rope_head_dim or 0
        v, rank = m.v_head_dim or nope, m.kv_lora_rank or 0
        if m.q_lora_rank is None:
            ops.append(s.gemm("attn.q", h, heads * (nope + rope), layers))
        else:
            ops += [
                s.gemm("attn.q_a", h, m.q_lora_rank, layers),
                s.norm("attn.q_a_norm", m.q_lora_rank, layers),
                s.gemm("attn.q_b", m.q_lora_rank, heads * (nope + rope), layers),
            ]
        ops += [
            s.gemm("attn.kv_a", h, rank + rope, layers),
            s.norm("attn.kv_a_norm", rank, layers),
            s.vector("attn.rope", t * (heads + 1) * rope, 1, ROPE_FLOPS_PER_ELEMENT, layers),
            _kv_write(s, kv_elems, layers),
        ]
        if s.decode:  # absorbed: attend over the latent cache, one shared KV head
            ops += [
                s.gemm("attn.q_absorb", nope, rank, layers, batch=heads),
                _attention(s, heads, 1, rank + rope, rank, layers, shared_kv=True),
                s.gemm("attn.o_absorb", rank, v, layers, batch=heads),
            ]
        else:  # decompress K and V, then standard multi-head attention
            ops += [
                s.gemm("attn.kv_b", rank, heads * (nope + v), layers),
                _attention(s, heads, heads, nope + rope, v, layers),
            ]
        ops.append(s.gemm("attn.o", heads * v, h, layers))
    else:
        d, kvh = m.head_size, m.kv_heads
        ops += [
            s.gemm("attn.qkv", h, (heads + 2 * kvh) * d, layers),
            s.vector("attn.rope", t * (heads + kvh) * d, 1, ROPE_FLOPS_PER_ELEMENT, layers),
            _kv_write(s, kv_elems, layers),
            _attention(s, heads, kvh, d, d, layers),
            s.gemm("attn.o", heads * d, h, layers),
        ]
    ops.append(s.vector("attn.residual", t * h, 2, 1.0, layers))
    return ops


def _kv_write(s: _Step, kv_elems: int, layers: int) -> Elementwise:
    return Elementwise(
        name="attn.kv_write",
        count=layers,
        elements=s.tokens * kv_elems,
        inputs=1,
        flops_per_element=0.0,
        dtype=s.precision.kv,
    )


def _attention(
    s: _Step, heads: int, kv_heads: int, d: int, dv: int, layers: int, shared_kv: bool = False
) -> Attention:
    return Attention(
        name="attn.sdpa",
        count=layers,
        batch=s.batch,
        q_len=s.q_len,
        kv_len=s.kv_len,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=d,
        v_head_dim=dv,
        causal=True,
        window=s.model.sliding_window,
        shared_kv=shared_kv,
        dtype=s.precision.act,
        kv_dtype=s.precision.kv if s.decode else s.precision.act,
    )


def _mlp(
    s: _Step, prefix: str, width: int, count: int, tokens: int = 0, batch: int = 1
) -> list[OpBase]:
    m = s.model
    t = tokens or s.tokens
    act = s.vector(
        f"{prefix}.act",
        batch * t * width,
        2 if m.mlp == "gated" else 1,
        ACTIVATION_FLOPS[m.mlp],
        count,
    )
    up_width = 2 * width if m.mlp == "gated" else width
    return [
        s.gemm(f"{prefix}.up", m.hidden_size, up_width, count, batch=batch, m=t),
        act,
        s.gemm(f"{prefix}.down", width, m.hidden_size, count, batch=batch, m=t),
    ]


def _moe_block(s: _Step, layers: int) -> list[OpBase]:
    m, t, h = s.model, s.tokens, s.model.hidden_size
    k, e = m.num_experts_per_tok, m.num_experts
    hit = min(e, max(k, round(expected_experts_hit(e, k, t))))
    per_expert = max(1, math.ceil(t * k / hit))
    ops: list[OpBase] = [
        s.gemm("moe.router", h, e, layers),
        Softmax(name="moe.router_softmax", count=layers, rows=t, cols=e),
        *_mlp(s, "moe.experts", m.expert_size, layers, tokens=per_expert, batch=hit),
    ]
    if m.num_shared_experts:
        ops += _mlp(s, "moe.shared", m.num_shared_experts * m.expert_size, layers)
    ops.append(s.vector("moe.combine", t * h, k, 2.0 * k, layers))
    return ops


def _graph(model: ModelConfig, step: _Step) -> list[OpBase]:
    m, t = model, step.tokens
    ops: list[OpBase] = [
        step.vector(
            "embed",
            t * m.hidden_size,
            2 if m.positions == "learned" else 1,
            1.0 if m.positions == "learned" else 0.0,
            1,
        ),
    ]
    ops += _attention_block(step, m.num_hidden_layers)
    ops.append(step.norm("mlp.norm", m.hidden_size, m.num_hidden_layers))
    if m.dense_layers:
        ops += _mlp(step, "mlp", m.intermediate_size, m.dense_layers)
    if m.moe_layers:
        ops += _moe_block(step, m.moe_layers)
    ops += [
        step.vector("mlp.residual", t * m.hidden_size, 2, 1.0, m.num_hidden_layers),
        step.norm("final_norm", m.hidden_size, 1, rows=step.batch),
        step.gemm("lm_head", m.hidden_size, m.vocab_size, 1, m=step.batch),
    ]
    return ops


def prefill(
    model: ModelConfig, batch: int, prompt_len: int, precision: Precision | None = None
) -> list[OpBase]:
    """Operators of the prefill of ``batch`` prompts of ``prompt_len`` tokens each."""
    step = _Step(model, batch, prompt_len, prompt_len, precision or Precision(), decode=False)
    return _graph(model, step)


def decode_step(
    model: ModelConfig, batch: int, context_len: int, precision: Precision | None = None
) -> list[OpBase]:
    """Operators of one decode step: ``batch`` new tokens over ``context_len`` cached ones."""
    step = _Step(model, batch, 1, context_len + 1, precision or Precision(), decode=True)
    return _graph(model, step)


def build(model: ModelConfig, scenario: Scenario) -> list[OpBase]:
    """The operator graph of ``scenario`` on ``model``."""
    if scenario.phase == "prefill":
        return prefill(model, scenario.batch, scenario.prompt_len, scenario.precision)
    return decode_step(model, scenario.batch, scenario.context_len, scenario.precision)


@dataclass(frozen=True)
class Footprint:
    """Bytes that must be resident in DRAM during a step."""

    weights_bytes: float
    kv_bytes: float
    activation_bytes: float

    @property
    def total_bytes(self) -> float:
        """Everything resident."""
        return self.weights_bytes + self.kv_bytes + self.activation_bytes


def weights_bytes(model: ModelConfig, precision: Precision) -> float:
    """All parameters (every expert) stored at the weight dtype."""
    return model.params() * dtypes.nbytes(precision.weights)


def kv_cache_bytes(model: ModelConfig, batch: int, tokens: int, precision: Precision) -> float:
    """KV cache of ``batch`` sequences of ``tokens`` (a sliding window caps what is kept)."""
    kept = min(tokens, model.sliding_window) if model.sliding_window else tokens
    per_token = model.kv_elements_per_token() * model.num_hidden_layers
    return batch * kept * per_token * dtypes.nbytes(precision.kv)


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


def footprint(model: ModelConfig, scenario: Scenario, ops: list[OpBase] | None = None) -> Footprint:
    """Weights, KV cache and peak activations of ``scenario``."""
    ops = ops if ops is not None else build(model, scenario)
    p = scenario.precision
    return Footprint(
        weights_bytes=weights_bytes(model, p),
        kv_bytes=kv_cache_bytes(model, scenario.batch, scenario.cached_tokens, p),
        activation_bytes=activation_bytes(ops),
    )
