"""Inference techniques as composable transforms of a :class:`Plan`.

A technique is a small typed value (selected by its ``kind``) with one ``apply(plan) -> plan``
function; a stack applies them left to right, so ``int4-awq+kv-fp8+flash+spec:...`` composes.
Tokens are stable names other tools script against (see :data:`TOKENS` and :func:`parse`).

Graph-level techniques change the :class:`GraphOptions`; number formats change the
:class:`Precision`; pruning changes the model config; parallelism, offload and speculative
decoding are carried in the plan and composed from simulated costs by the simulator.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from infersim import dtypes
from infersim.errors import ConfigError, format_validation_error
from infersim.workloads.graph import GraphOptions
from infersim.workloads.models import ModelConfig, load_model
from infersim.workloads.scenario import Precision


@dataclass(frozen=True)
class Speculative:
    """Speculative decoding: a drafter proposes ``k`` tokens, the target verifies ``k + 1``.

    ``draft`` is a draft model; without one the drafter costs ``cost_fraction`` of a target
    decode step per proposed token (draft heads, Medusa/EAGLE-style), or nothing (n-gram /
    lookahead drafting, ``cost_fraction = 0``). ``alpha`` is the per-token acceptance rate.
    """

    k: int
    alpha: float
    draft: ModelConfig | None = None
    cost_fraction: float = 0.0

    @property
    def expected_tokens(self) -> float:
        """Tokens per target pass: (1 − α^(k+1)) / (1 − α) (Leviathan et al. 2023)."""
        if self.alpha >= 1.0:
            return float(self.k + 1)
        return (1 - self.alpha ** (self.k + 1)) / (1 - self.alpha)

    def sample_tokens_per_pass(self, tokens: int, seed: int = 0) -> float:
        """Monte Carlo mean of tokens per target pass over ``tokens`` generated tokens: each
        draft token is accepted with probability ``alpha`` until the first rejection; the
        target adds one token of its own (the correction, or a bonus after k accepts)."""
        rng = np.random.default_rng(seed)
        generated = passes = 0
        while generated < tokens:
            accepts = rng.random(self.k) < self.alpha
            run = self.k if accepts.all() else int(np.argmin(accepts))
            generated += run + 1
            passes += 1
        return generated / passes


@dataclass(frozen=True)
class Plan:
    """Everything a technique stack decides before costing."""

    model: ModelConfig
    precision: Precision
    graph: GraphOptions = field(default_factory=GraphOptions)
    pp: int = 1
    microbatches: int | None = None
    offload_fraction: float = 0.0
    speculative: Speculative | None = None
    allow_emulation: bool = False
    cuda_graphs: bool = False

    def with_graph(self, **changes: object) -> Plan:
        """A copy with graph options changed."""
        return replace(self, graph=self.graph.model_copy(update=changes))

    def with_precision(self, **changes: str) -> Plan:
        """A copy with number formats changed (validated)."""
        data = {**self.precision.model_dump(), **changes}
        return replace(self, precision=Precision.model_validate(data))


class _Technique(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    def apply(self, plan: Plan) -> Plan:
        """The plan with this technique applied."""
        raise NotImplementedError


class Formats(_Technique):
    """Number formats: weights, activations (the compute dtype) and/or the KV cache."""

    kind: Literal["formats"] = "formats"
    token: str
    weights: str | None = None
    act: str | None = None
    kv: str | None = None

    def apply(self, plan: Plan) -> Plan:
        changes = {k: v for k, v in (("weights", self.weights), ("act", self.act),
                                     ("kv", self.kv)) if v is not None}
        return plan.with_precision(**changes)


class KVCache(_Technique):
    """``no-kv-cache``: every decode step recomputes the whole prefix."""

    kind: Literal["kv-cache"] = "kv-cache"
    enabled: bool

    def apply(self, plan: Plan) -> Plan:
        return plan.with_graph(kv_cache=self.enabled)


class AttentionKernel(_Technique):
    """``flash`` (fused, scores stay on chip) or ``naive-attention`` (scores through DRAM)."""

    kind: Literal["attention"] = "attention"
    flash: bool

    def apply(self, plan: Plan) -> Plan:
        return plan.with_graph(flash_attention=self.flash)


class Fusion(_Technique):
    """``fuse``: activation, residual, RoPE and cache writes fused into GEMM epilogues."""

    kind: Literal["fuse"] = "fuse"

    def apply(self, plan: Plan) -> Plan:
        return plan.with_graph(fuse_epilogues=True)


class Sparse(_Technique):
    """``2:4`` structured or ``sparse:FRACTION[:eff=E]`` unstructured weight sparsity."""

    kind: Literal["sparse"] = "sparse"
    structure: Literal["2:4", "unstructured"]
    zeros: float = Field(default=0.5, ge=0, lt=1, description="Fraction of weights that are 0")
    kernel_efficiency: float = Field(default=0.0, ge=0, le=1, description="Zero MACs skipped")

    def apply(self, plan: Plan) -> Plan:
        if self.structure == "2:4":
            return plan.with_graph(sparsity="2:4", density=0.5)
        return plan.with_graph(sparsity="unstructured", density=1 - self.zeros,
                               sparse_kernel_efficiency=self.kernel_efficiency)


class TensorParallel(_Technique):
    """``tp=N``: GEMMs and heads sharded over N chips, an all-reduce after each block."""

    kind: Literal["tp"] = "tp"
    n: int = Field(ge=1, le=1024)

    def apply(self, plan: Plan) -> Plan:
        return plan.with_graph(tp=self.n)


class PipelineParallel(_Technique):
    """``pp=S[:mb=M]``: layers split into S stages on S chips, M microbatches in flight."""

    kind: Literal["pp"] = "pp"
    stages: int = Field(ge=1, le=1024)
    microbatches: int | None = Field(default=None, ge=1, le=1 << 20)

    def apply(self, plan: Plan) -> Plan:
        return replace(plan, pp=self.stages, microbatches=self.microbatches)


class Offload(_Technique):
    """``offload=FRACTION``: that fraction of the weights lives in host memory and streams over
    the host link every step (llama.cpp-style partial offload)."""

    kind: Literal["offload"] = "offload"
    fraction: float = Field(ge=0, le=1)

    def apply(self, plan: Plan) -> Plan:
        return replace(plan, offload_fraction=self.fraction)


class Prune(_Technique):
    """``prune:heads=F:ffn=F:layers=F``: a structurally pruned model (fractions removed)."""

    kind: Literal["prune"] = "prune"
    heads: float = Field(default=0.0, ge=0, lt=1)
    ffn: float = Field(default=0.0, ge=0, lt=1)
    layers: float = Field(default=0.0, ge=0, lt=1)

    def apply(self, plan: Plan) -> Plan:
        m = plan.model
        kv = m.kv_heads
        groups = max(1, round(m.num_attention_heads / kv * (1 - self.heads)))
        update = {
            "name": f"{m.name}-pruned",
            "head_dim": m.head_size,
            "num_attention_heads": groups * kv,
            "intermediate_size": max(1, round(m.intermediate_size * (1 - self.ffn))),
            "num_hidden_layers": max(1, round(m.num_hidden_layers * (1 - self.layers))),
        }
        if m.moe_intermediate_size:
            update["moe_intermediate_size"] = max(1, round(m.expert_size * (1 - self.ffn)))
        return replace(plan, model=m.model_copy(update=update))


class Speculate(_Technique):
    """``spec:draft=MODEL:k=K:alpha=A``, ``spec:heads:k=K:alpha=A:cost=F`` or
    ``spec:ngram:k=K:alpha=A`` (a zero-cost drafter)."""

    kind: Literal["spec"] = "spec"
    drafter: Literal["draft", "heads", "ngram"]
    k: int = Field(ge=1, le=32)
    alpha: float = Field(ge=0, le=1)
    draft_model: str | None = None
    cost: float = Field(default=0.0, ge=0, le=1, description="Per draft token, of a target step")

    def apply(self, plan: Plan) -> Plan:
        draft = load_model(self.draft_model) if self.draft_model else None
        cost = self.cost if self.drafter == "heads" else 0.0
        spec = Speculative(k=self.k, alpha=self.alpha, draft=draft, cost_fraction=cost)
        return replace(plan, speculative=spec)


class Emulate(_Technique):
    """``emulate``: cost a dtype the chip cannot compute as if emulated at a wider one."""

    kind: Literal["emulate"] = "emulate"

    def apply(self, plan: Plan) -> Plan:
        return replace(plan, allow_emulation=True)


class CudaGraphs(_Technique):
    """``cuda-graphs``: kernels replay from a captured CUDA graph, at the chip's graph launch
    overhead (``launch.graph_s``) instead of its stream launch overhead."""

    kind: Literal["cuda-graphs"] = "cuda-graphs"

    def apply(self, plan: Plan) -> Plan:
        return replace(plan, cuda_graphs=True)


Technique = Annotated[
    Formats | KVCache | AttentionKernel | Fusion | Sparse | TensorParallel | PipelineParallel
    | Offload | Prune | Speculate | Emulate | CudaGraphs,
    Field(discriminator="kind"),
]

_FORMAT_TOKENS: dict[str, dict[str, str]] = {
    "fp16": {"weights": "fp16", "act": "fp16", "kv": "fp16"},
    "bf16": {"weights": "bf16", "act": "bf16", "kv": "bf16"},
    "fp32": {"weights": "fp32", "act": "fp32", "kv": "fp32"},
    "int8-weight": {"weights": "int8"},
    "int4-weight": {"weights": "int4"},
    "int4-awq": {"weights": "int4-g128"},
    "int4-gptq": {"weights": "int4-g128"},
    "w8a8-int8": {"weights": "int8", "act": "int8"},
    "fp8": {"weights": "fp8_e4m3", "act": "fp8_e4m3"},
    "fp4": {"weights": "nvfp4", "act": "nvfp4"},
    "mxfp4": {"weights": "mxfp4", "act": "mxfp4"},
    "kv-fp16": {"kv": "fp16"},
    "kv-fp8": {"kv": "fp8_e4m3"},
    "kv-int8": {"kv": "int8"},
    "kv-int4": {"kv": "int4"},
    "kv-int3": {"kv": "int3"},
    **{name: {"weights": name} for name in dtypes.GGUF_FORMATS},
}

_SIMPLE: dict[str, _Technique] = {
    "no-kv-cache": KVCache(enabled=False),
    "flash": AttentionKernel(flash=True),
    "naive-attention": AttentionKernel(flash=False),
    "fuse": Fusion(),
    "2:4": Sparse(structure="2:4"),
    "emulate": Emulate(),
    "cuda-graphs": CudaGraphs(),
}

TOKENS: tuple[str, ...] = (
    "baseline", *_FORMAT_TOKENS, *_SIMPLE, "sparse:FRACTION[:eff=E]",
    "spec:draft=MODEL:k=K:alpha=A", "spec:heads:k=K:alpha=A:cost=F", "spec:ngram:k=K:alpha=A",
    "tp=N", "pp=S[:mb=M]", "offload=FRACTION", "prune:heads=F:ffn=F:layers=F",
)
"""Every technique token (parameterized ones shown with their grammar)."""


_KEYED: dict[str, tuple[type[_Technique], str]] = {
    "tp": (TensorParallel, "n"),
    "pp": (PipelineParallel, "stages"),
    "offload": (Offload, "fraction"),
}


def _params(parts: list[str], token: str, reserved: tuple[str, ...] = ()) -> dict[str, str]:
    """``KEY=VALUE`` parts as a dict; a repeated key, or one the token's grammar fixes
    (``reserved``), is an error naming the token."""
    out = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or not value:
            raise ConfigError(f"technique {token!r}: expected KEY=VALUE, got {part!r}")
        if key in out or key in reserved:
            raise ConfigError(f"technique {token!r}: {key} given more than once")
        out[key] = value
    return out


def _parse_token(token: str) -> _Technique:
    if token in _FORMAT_TOKENS:
        return Formats(token=token, **_FORMAT_TOKENS[token])
    if token in _SIMPLE:
        return _SIMPLE[token]
    name, eq, value = token.partition("=")
    if eq and name in _KEYED:
        first, *more = value.split(":")
        cls, key = _KEYED[name]
        p = {key: first, **_params(more, token, reserved=(key,))}
        if "mb" in p:
            p["microbatches"] = p.pop("mb")
        return cls.model_validate(p)
    head, _, rest = token.partition(":")
    parts = rest.split(":") if rest else []
    if head == "sparse":
        fraction, *more = parts or [""]
        p = _params(more, token)
        return Sparse(structure="unstructured", zeros=fraction,  # type: ignore[arg-type]
                      kernel_efficiency=p.get("eff", 0.0))  # type: ignore[arg-type]
    if head == "prune":
        return Prune.model_validate(_params(parts, token))
    if head == "spec":
        drafter = parts[0].partition("=")[0] if parts else ""
        if drafter in {"heads", "ngram"}:
            p = _params(parts[1:], token, reserved=("drafter", "draft", "draft_model"))
            return Speculate(drafter=drafter, **p)  # type: ignore[arg-type]
        p = _params(parts, token, reserved=("drafter", "draft_model"))
        if "draft" not in p:
            raise ConfigError(f"technique {token!r}: spec needs draft=MODEL, heads or ngram")
        load_model(p["draft"])  # an unknown draft model fails here, naming the presets
        return Speculate(drafter="draft", draft_model=p.pop("draft"), **p)  # type: ignore[arg-type]
    raise ConfigError(f"unknown technique {token!r}; known: {', '.join(TOKENS)}")


@dataclass(frozen=True)
class TechniqueStack:
    """Techniques applied left to right; ``name`` is the text it was parsed from."""

    name: str
    techniques: tuple[_Technique, ...] = ()

    def plan(self, model: ModelConfig, precision: Precision) -> Plan:
        """The plan for ``model`` at ``precision`` with every technique applied in order."""
        plan = Plan(model=model, precision=precision)
        for technique in self.techniques:
            plan = technique.apply(plan)
        return plan


def parse(text: str | TechniqueStack | None) -> TechniqueStack:
    """Parse ``"int4-awq+kv-fp8+flash"`` (``""`` or ``"baseline"`` is the empty stack, and a
    ``baseline`` token in a stack changes nothing).

    Raises:
        ConfigError: an unknown token or a parameter out of range, naming the token.
    """
    if isinstance(text, TechniqueStack):
        return text
    text = (text or "").strip()
    if text in {"", "baseline"}:
        return TechniqueStack(name="baseline")
    techniques = []
    for raw in text.split("+"):
        token = raw.strip()
        if token == "baseline":
            continue  # the identity: "baseline+emulate" is "emulate" (what --allow-emulation adds)
        try:
            techniques.append(_parse_token(token))
        except ValidationError as exc:
            raise ConfigError(format_validation_error(exc, source=f"technique {token!r}")) from None
    return TechniqueStack(name=text, techniques=tuple(techniques))


parse_stack = parse
"""Alias used by the explorer."""
