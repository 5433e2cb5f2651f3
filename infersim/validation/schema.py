"""The measurement record schema: what a row of a measurements file says ran, and what was
measured. Documented for users in ``docs/measurements.md``; files are read by
:mod:`infersim.validation.records` and written by the importers.

Two kinds of row, told apart by ``record`` (or, when it is empty, by which of ``kernel`` and
``model`` is given):

**Kernel rows** (``record: kernel``): one kernel, timed alone. ``kernel`` names its kind and
the other fields its shape, as flat columns:

- ``gemm``, ``gemv`` (decode shapes), ``w8a16``, ``w4a16``: ``m``, ``k``, ``n``; ``batch`` (equal
  independent products: a batched or grouped GEMM, MoE experts; default 1); ``dtype`` (operand
  A, the compute dtype: any infersim dtype, ``fp8`` included); ``b_dtype`` (the stored B; default
  ``dtype``, int8 for w8a16, int4 for w4a16); ``out_dtype`` (default ``dtype``); ``group_size`` (K
  rows per scale of a quantized B; default 128 for w8a16/w4a16; its scales count in B's bytes);
  ``b_is_weight`` (default true; false: B is an activation, e.g. attention scores).
- ``attention``: ``batch``, ``heads``, ``kv_heads`` (GQA when fewer), ``q_len`` (1 for decode),
  ``kv_len``, ``head_dim``, ``causal``, ``fused`` (FlashAttention, default true), ``dtype``,
  ``kv_dtype``.
- ``elementwise`` (the matmul epilogue act(x + bias) + residual): ``rows``, ``cols``,
  ``activation`` (none, relu, silu, gelu), ``fused``, ``dtype``.
- ``norm``: ``rows``, ``cols``, ``norm`` (rms or layer), ``dtype``.
- ``collective``: ``collective`` (all-reduce, all-gather, reduce-scatter, all-to-all,
  send-recv), ``payload_bytes`` (per chip), ``participants`` (chips).

What was measured: ``measured_s`` (seconds per launch; the median when repeated) or
``measured_tflops`` (matrix TFLOP/s as infersim counts them: 2·batch·m·k·n, 4·b·h·pairs·d for
attention); optional ``stddev_s``, ``spread`` (interquartile range / median), ``reps``,
``device`` (as the tool names it), ``source``.

**Model rows** (``record: model``): a whole model on a chip (:class:`ModelRecord`): ``chip``
(the preset to predict with; may be left for ``--chip``), ``device``, ``model``, ``phase``
(prefill, decode or end-to-end), ``scenario`` (batch: ``batch`` sequences run together;
offline: ``num_requests`` submitted at once; serving: requests arriving at
``request_rate_per_s`` with at most ``max_concurrency`` in flight), lengths (``prompt_len``,
``context_len``: tokens already cached, ``output_len``), parallelism (``tensor_parallel``,
``pipeline_parallel``), what ran (``techniques``, ``weights_dtype``, ``act_dtype``,
``kv_dtype``, ``software``, ``settings``), and any of the metrics of :data:`METRICS`. A metric
is a number (its mean) or, in columns ``<metric>_mean``, ``_median``, ``_std``, ``_min``,
``_max``, ``_p<N>`` (percentiles), its statistics over runs or requests (:class:`Stat`).
"""

from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from infersim import dtypes
from infersim.validation.suite import (
    ACTIVATION_FLOPS_PER_ELEMENT,
    KernelBase,
    check_attention_shape,
    epilogue_ops,
    quantized_weight_bits,
)
from infersim.workloads.ops import Attention, Collective, DTypeName, Gemm, Norm, OpBase

QUANT_BITS = {"w8a16": "int8", "w4a16": "int4"}
"""The stored B of the weight-only quantized GEMM kinds."""


class GemmRecord(KernelBase):
    """``batch`` products C[m, n] = A[m, k] · B[k, n] in any dtype pair and output dtype."""

    kind: Literal["gemm", "gemv", "w8a16", "w4a16"] = "gemm"
    m: int = Field(ge=1, le=1 << 30, description="Rows of A (tokens)")
    k: int = Field(ge=1, le=1 << 30, description="Reduction dim")
    n: int = Field(ge=1, le=1 << 30, description="Output columns")
    batch: int = Field(default=1, ge=1, le=1 << 20, description="Equal products (groups)")
    dtype: DTypeName = Field(default="bf16", description="Operand A (the compute dtype)")
    b_dtype: DTypeName | None = Field(default=None, description="Stored B (default: see kind)")
    out_dtype: DTypeName | None = Field(default=None, description="Output C (default: dtype)")
    group_size: int | None = Field(
        default=None, ge=2, le=1 << 20, description="K rows per scale of a quantized B"
    )
    b_is_weight: bool = Field(default=True, description="B is a model weight")

    @model_validator(mode="after")
    def _consistent(self) -> GemmRecord:
        want = QUANT_BITS.get(self.kind)
        if want and self.b_dtype not in (None, want):
            raise ValueError(f"b_dtype(={self.b_dtype}) of a {self.kind} kernel must be {want}")
        group = self.group
        if group and self.k % group:
            raise ValueError(f"k(={self.k}) must be a multiple of group_size(={group})")
        return self

    @property
    def b(self) -> str:
        """B's stored dtype."""
        return self.b_dtype or QUANT_BITS.get(self.kind, self.dtype)

    @property
    def group(self) -> int | None:
        """K rows per scale of B (None: B carries no scales)."""
        return self.group_size or (128 if self.kind in QUANT_BITS else None)

    @property
    def label(self) -> str:
        out = self.out_dtype or self.dtype
        if self.kind in QUANT_BITS:  # B's dtype is the kind's
            types = self.dtype if out == self.dtype else f"{self.dtype}->{out}"
        elif self.b == self.dtype == out:
            types = self.dtype
        else:
            types = f"{self.dtype}x{self.b}->{out}"
        parts = [self.kind, f"{self.m}x{self.k}x{self.n}"]
        parts += [f"batch{self.batch}"] if self.batch > 1 else []
        parts += [f"g{self.group}"] if self.group else []
        return " ".join([*parts, types])

    def ops(self) -> list[OpBase]:
        bits = None
        if self.group:
            bits = quantized_weight_bits(round(dtypes.info(self.b).bits), self.group)
        return [
            Gemm(
                name=self.label[:128], m=self.m, k=self.k, n=self.n, batch=self.batch,
                a_dtype=self.dtype, b_dtype=self.b, out_dtype=self.out_dtype or self.dtype,
                b_is_weight=self.b_is_weight, weight_bits=bits if self.b_is_weight else None,
            )
        ]  # fmt: skip


class AttentionRecord(KernelBase):
    """Attention of ``q_len`` queries over ``kv_len`` keys: prefill (``q_len`` = ``kv_len``),
    decode (``q_len`` = 1), causal or not, GQA when ``kv_heads`` < ``heads``."""

    kind: Literal["attention"] = "attention"
    batch: int = Field(default=1, ge=1, le=1 << 20, description="Sequences")
    heads: int = Field(ge=1, le=1 << 16, description="Query heads")
    kv_heads: int = Field(ge=1, le=1 << 16, description="Key/value heads")
    q_len: int = Field(ge=1, le=1 << 30, description="Query tokens per sequence")
    kv_len: int = Field(ge=1, le=1 << 30, description="Key/value tokens per sequence")
    head_dim: int = Field(default=128, ge=1, le=4096, description="Head dim")
    causal: bool = Field(default=True, description="Bottom-right causal mask")
    fused: bool = Field(default=True, description="FlashAttention (True) or unfused")
    dtype: DTypeName = Field(default="bf16", description="Q, scores and output dtype")
    kv_dtype: DTypeName | None = Field(default=None, description="K/V dtype (default: dtype)")

    @model_validator(mode="after")
    def _shapes(self) -> AttentionRecord:
        check_attention_shape(self.heads, self.kv_heads, self.q_len, self.kv_len, self.causal)
        return self

    @property
    def label(self) -> str:
        mode = "fused" if self.fused else "unfused"
        mask = "causal" if self.causal else "full"
        kv = f" kv:{self.kv_dtype}" if self.kv_dtype not in (None, self.dtype) else ""
        return (
            f"attention {mode} b{self.batch} h{self.heads}/{self.kv_heads} "
            f"q{self.q_len} kv{self.kv_len} d{self.head_dim} {mask} {self.dtype}{kv}"
        )

    def ops(self) -> list[OpBase]:
        return [
            Attention(
                name=self.label[:128], batch=self.batch, q_len=self.q_len, kv_len=self.kv_len,
                heads=self.heads, kv_heads=self.kv_heads, head_dim=self.head_dim,
                causal=self.causal, fused=self.fused, dtype=self.dtype,
                kv_dtype=self.kv_dtype or self.dtype,
            )
        ]  # fmt: skip


class ElementwiseRecord(KernelBase):
    """The matmul epilogue act(x + bias) + residual over [rows, cols] (as the suites run it)."""

    kind: Literal["elementwise"] = "elementwise"
    rows: int = Field(ge=1, le=1 << 30, description="Rows (tokens)")
    cols: int = Field(ge=1, le=1 << 30, description="Columns (features)")
    activation: Literal["none", "relu", "silu", "gelu"] = Field(default="silu", description="Act")
    fused: bool = Field(default=True, description="One pass (True) or three")
    dtype: DTypeName = Field(default="bf16", description="Element dtype")

    @property
    def label(self) -> str:
        mode = "fused" if self.fused else "unfused"
        return f"elementwise {mode} {self.rows}x{self.cols} {self.activation} {self.dtype}"

    def ops(self) -> list[OpBase]:
        flops = ACTIVATION_FLOPS_PER_ELEMENT[self.activation]
        return epilogue_ops(self.label, self.rows, self.cols, flops, self.fused, self.dtype)


class NormRecord(KernelBase):
    """RMSNorm or LayerNorm over ``cols`` features of ``rows`` tokens."""

    kind: Literal["norm"] = "norm"
    rows: int = Field(ge=1, le=1 << 30, description="Tokens")
    cols: int = Field(ge=1, le=1 << 30, description="Features normalized together")
    norm: Literal["rms", "layer"] = Field(default="rms", description="RMSNorm or LayerNorm")
    dtype: DTypeName = Field(default="bf16", description="Activations and norm weights")

    @property
    def label(self) -> str:
        return f"norm {self.norm} {self.rows}x{self.cols} {self.dtype}"

    def ops(self) -> list[OpBase]:
        return [
            Norm(name=self.label, rows=self.rows, cols=self.cols, norm=self.norm, dtype=self.dtype)
        ]


class CollectiveRecord(KernelBase):
    """A collective over the chip-to-chip link: ``payload_bytes`` on each of ``participants``."""

    kind: Literal["collective"] = "collective"
    collective: Literal["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send-recv"]
    payload_bytes: float = Field(gt=0, le=1e15, description="Bytes of the tensor on each chip")
    participants: int = Field(default=2, ge=2, le=1 << 20, description="Chips taking part")
    dtype: DTypeName = Field(default="bf16", description="Element dtype (labels only)")

    @property
    def label(self) -> str:
        return f"{self.collective} {self.payload_bytes:.0f} B x{self.participants}"

    def ops(self) -> list[OpBase]:
        return [
            Collective(
                name=self.label, collective=self.collective,
                payload_bytes=self.payload_bytes, participants=self.participants,
            )
        ]  # fmt: skip


RECORD_KERNELS: dict[str, type[KernelBase]] = {
    "gemm": GemmRecord, "gemv": GemmRecord, "w8a16": GemmRecord, "w4a16": GemmRecord,
    "attention": AttentionRecord, "elementwise": ElementwiseRecord, "norm": NormRecord,
    "collective": CollectiveRecord,
}  # fmt: skip
"""Kernel kind → the model of a kernel row's shape."""


class KernelMeasurement(BaseModel):
    """What a kernel row measured: seconds per launch, or TFLOP/s, and how it spread."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    measured_s: float | None = Field(default=None, gt=0, description="Seconds per launch")
    measured_tflops: float | None = Field(default=None, gt=0, description="Matrix TFLOP/s")
    stddev_s: float | None = Field(default=None, ge=0, description="Standard deviation (s)")
    spread: float | None = Field(default=None, ge=0, description="Interquartile range / median")
    reps: int | None = Field(default=None, ge=1, description="Timed repetitions")
    device: str = Field(default="", max_length=200, description="The device, as the tool names it")
    source: str = Field(default="", max_length=500, description="Where the figure comes from")

    @model_validator(mode="after")
    def _one_figure(self) -> KernelMeasurement:
        if (self.measured_s is None) == (self.measured_tflops is None):
            raise ValueError("give one of measured_s and measured_tflops")
        return self


_PERCENTILE = re.compile(r"^p(\d{1,2}(\.\d+)?|100)$")


class Stat(BaseModel):
    """One metric's statistics over repeated runs or requests (any subset; at least one of
    ``mean``, ``median`` and the ``p50`` percentile)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    mean: float | None = Field(default=None, gt=0, description="Mean")
    median: float | None = Field(default=None, gt=0, description="Median")
    std: float | None = Field(default=None, ge=0, description="Standard deviation")
    min: float | None = Field(default=None, gt=0, description="Smallest")
    max: float | None = Field(default=None, gt=0, description="Largest")
    percentiles: dict[str, float] = Field(
        default_factory=dict, description="Percentiles by name (p90, p99, p99.9)"
    )

    @field_validator("percentiles")
    @classmethod
    def _names(cls, value: dict[str, float]) -> dict[str, float]:
        for name, figure in value.items():
            if not _PERCENTILE.match(name):
                raise ValueError(f"percentile {name!r}: expected p<N> with 0 <= N <= 100")
            if not (math.isfinite(figure) and figure > 0):
                raise ValueError(f"percentile {name} = {figure}: must be > 0 and finite")
        return value

    @model_validator(mode="after")
    def _central(self) -> Stat:
        if self.mean is None and self.median is None and "p50" not in self.percentiles:
            raise ValueError("needs a mean, a median or a p50")
        return self

    @property
    def central(self) -> float:
        """The median (or p50) when given, else the mean."""
        median = self.median if self.median is not None else self.percentiles.get("p50")
        return median if median is not None else float(self.mean)  # type: ignore[arg-type]


METRICS: tuple[str, ...] = (
    "prompt_tokens_per_s", "output_tokens_per_s", "total_tokens_per_s", "requests_per_s",
    "latency_s", "ttft_s", "tpot_s", "itl_s",
)  # fmt: skip
"""Model-row metrics: prompt (prefill) tokens/s, generated tokens/s, both together, requests/s
(all sequences together); latency (of the batch, or per request end to end), time to first
token, time per output token after the first, inter-token latency."""

_NOT_IN_PHASE = {
    "prefill": ("output_tokens_per_s", "tpot_s", "itl_s"),
    "decode": ("prompt_tokens_per_s", "ttft_s"),
    "end-to-end": (),
}


class ModelRecord(BaseModel):
    """One whole-model measurement (a model row; see the module doc)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    record: Literal["model"] = "model"
    chip: str = Field(default="", max_length=200, description="Chip preset to predict with")
    device: str = Field(default="", max_length=200, description="The device, as the tool names it")
    model: str = Field(min_length=1, max_length=200, description="Model preset, HF id or name")
    phase: Literal["prefill", "decode", "end-to-end"] = Field(description="What was timed")
    scenario: Literal["batch", "offline", "serving"] = Field(
        default="batch", description="batch: fixed batch; offline: all at once; serving: arrivals"
    )
    batch: int = Field(default=1, ge=1, le=1 << 20, description="Sequences run together")
    prompt_len: int = Field(default=0, ge=0, le=1 << 30, description="Prompt tokens per request")
    context_len: int = Field(default=0, ge=0, le=1 << 30, description="Tokens already cached")
    output_len: int = Field(default=0, ge=0, le=1 << 30, description="Generated tokens")
    num_requests: int | None = Field(default=None, ge=1, description="Requests (offline, serving)")
    request_rate_per_s: float | None = Field(
        default=None, gt=0, allow_inf_nan=True, description="Arrival rate (serving; inf: at once)"
    )
    max_concurrency: int | None = Field(default=None, ge=1, description="Most requests in flight")
    max_batch: int | None = Field(
        default=None, ge=1, description="Most sequences the engine batches (offline, serving)"
    )
    tensor_parallel: int = Field(default=1, ge=1, le=1 << 16, description="Tensor-parallel chips")
    pipeline_parallel: int = Field(default=1, ge=1, le=1 << 16, description="Pipeline stages")
    techniques: str = Field(default="", max_length=500, description="infersim technique stack")
    weights_dtype: DTypeName | None = Field(default=None, description="Weight dtype")
    act_dtype: DTypeName | None = Field(default=None, description="Activation dtype")
    kv_dtype: DTypeName | None = Field(default=None, description="KV-cache dtype")
    software: str = Field(default="", max_length=500, description="Tool, version, backend")
    settings: str = Field(default="", max_length=2000, description="Other tool settings")
    source: str = Field(default="", max_length=500, description="Where the figures come from")
    reps: int | None = Field(default=None, ge=1, description="Repetitions behind the statistics")
    prompt_tokens_per_s: Stat | None = Field(default=None, description="Prefill tokens/s")
    output_tokens_per_s: Stat | None = Field(default=None, description="Generated tokens/s")
    total_tokens_per_s: Stat | None = Field(default=None, description="Prompt + output tokens/s")
    requests_per_s: Stat | None = Field(default=None, description="Completed requests/s")
    latency_s: Stat | None = Field(default=None, description="Batch or request latency (s)")
    ttft_s: Stat | None = Field(default=None, description="Time to first token (s)")
    tpot_s: Stat | None = Field(default=None, description="Time per output token (s)")
    itl_s: Stat | None = Field(default=None, description="Inter-token latency (s)")

    @field_validator("request_rate_per_s", mode="before")
    @classmethod
    def _rate(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
            return math.inf
        if isinstance(value, float) and math.isnan(value):
            raise ValueError("must be a rate > 0 or inf, not nan")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ModelRecord:
        if not any(getattr(self, m) is not None for m in METRICS):
            raise ValueError(f"needs at least one metric: {', '.join(METRICS)}")
        wrong = [m for m in _NOT_IN_PHASE[self.phase] if getattr(self, m) is not None]
        if wrong:
            raise ValueError(f"{', '.join(wrong)}: not measured by a {self.phase} row")
        if self.phase != "decode" and self.prompt_len < 1:
            raise ValueError(f"a {self.phase} row needs prompt_len >= 1")
        if self.phase != "prefill" and self.output_len < 1:
            raise ValueError(f"a {self.phase} row needs output_len >= 1")
        if self.scenario == "serving" and self.request_rate_per_s is None:
            raise ValueError("a serving row needs request_rate_per_s (inf: all at once)")
        return self

    def metrics(self) -> dict[str, Stat]:
        """The metrics given, by name."""
        return {m: s for m in METRICS if (s := getattr(self, m)) is not None}

    @property
    def label(self) -> str:
        """A short name for tables: model, chip, phase and shape."""
        where = self.chip or self.device or "?"
        shape = f"b{self.batch} p{self.prompt_len} c{self.context_len} o{self.output_len}"
        if self.scenario != "batch":
            rate = self.request_rate_per_s
            shape = f"{self.scenario} n{self.num_requests or '?'}" + (
                f" r{rate:g}" if rate is not None else ""
            ) + f" p{self.prompt_len} o{self.output_len}"
        return f"{self.model} on {where} {self.phase} {shape}"
