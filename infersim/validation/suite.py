"""What the harness runs: kernel descriptions (typed by ``kind``), their infersim operators, and
the packaged suites (YAML lists of kernels).

A kernel description says *what* runs, never how it is timed: backends turn one into a Triton
launch (GPU, interpreter) or torch calls (host CPU), and :meth:`ops` turns it into the infersim
operators whose predicted time is compared with the measurement.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from infersim.errors import ConfigError
from infersim.io import read_document, validate
from infersim.workloads.ops import Attention, Elementwise, Gemm, OpBase

KernelDType = Literal["fp32", "fp16", "bf16"]
"""Activation dtypes the kernels take (weights of quantized kernels are int8/int4)."""

ACTIVATION_FLOPS_PER_ELEMENT: dict[str, float] = {
    "none": 0.0,
    "relu": 1.0,
    "silu": 4.0,
    "gelu": 8.0,
}
"""Vector FLOPs per element: relu = max; silu = exp, add, divide, multiply; gelu (tanh form) =
cube, FMA, scale, exp-based tanh, add, two multiplies (counted as eight)."""

Dim = Annotated[int, Field(ge=1, le=1 << 24)]


SCALE_BITS_PER_GROUP = 32
"""Bits of quantization parameters stored per group of K rows, per column, of a weight-only
quantized kernel: an fp32 scale (the Triton kernel), or a 16-bit scale and a 16-bit zero point
(torch's CPU int4 kernel; AWQ and GPTQ checkpoints)."""


def quantized_weight_bits(bits: int, group_size: int) -> float:
    """Stored bits per weight of a ``bits``-bit weight with one :data:`SCALE_BITS_PER_GROUP`
    group of parameters per ``group_size`` K rows (4-bit, g128: 4.25)."""
    return bits + SCALE_BITS_PER_GROUP / group_size


class KernelBase(BaseModel):
    """Fields every kernel description shares (a suite's kernels and measured kernels)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str = Field(default="", description="Kernel type (the discriminator)")
    dtype: str = Field(default="bf16", description="Compute (activation) dtype")

    @property
    def label(self) -> str:
        """A short, unique, stable name for tables and CSV rows."""
        raise NotImplementedError

    def ops(self) -> list[OpBase]:
        """The infersim operators this kernel launches, in order (one per launch)."""
        raise NotImplementedError


class SuiteKernel(KernelBase):
    """A kernel the backends run: its dtype is one torch and Triton compute on every device."""

    dtype: KernelDType = Field(default="bf16", description="Activation (and output) dtype")


class GemmKernel(SuiteKernel):
    """C[m, n] = A[m, k] · W[k, n] with a dense weight: ``gemv`` marks decode shapes (small m)."""

    kind: Literal["gemm", "gemv"] = "gemm"
    m: Dim = Field(description="Rows of A (tokens)")
    k: Dim = Field(description="Reduction dim")
    n: Dim = Field(description="Output columns")
    block_m: int | None = Field(default=None, ge=16, le=256, description="Triton BLOCK_M")
    block_n: int | None = Field(default=None, ge=16, le=256, description="Triton BLOCK_N")
    block_k: int | None = Field(default=None, ge=16, le=256, description="Triton BLOCK_K")
    num_warps: int | None = Field(default=None, ge=1, le=16, description="Triton num_warps")
    num_stages: int | None = Field(default=None, ge=1, le=8, description="Triton num_stages")

    @property
    def label(self) -> str:
        return f"{self.kind} {self.m}x{self.k}x{self.n} {self.dtype}"

    def ops(self) -> list[OpBase]:
        return [
            Gemm(
                name=self.label, m=self.m, k=self.k, n=self.n,
                a_dtype=self.dtype, b_dtype=self.dtype, out_dtype=self.dtype,
            )
        ]  # fmt: skip


class QuantGemmKernel(SuiteKernel):
    """Weight-only quantized GEMM: int8 (``w8a16``) or packed int4 (``w4a16``) weights with one
    scale per ``group_size`` rows of K, dequantized to the activation dtype on the fly. The
    weight's bytes count the scales (:func:`quantized_weight_bits`), so the group size moves
    the predicted time of a weight-bound kernel.
    """

    kind: Literal["w8a16", "w4a16"]
    m: Dim = Field(description="Rows of A (tokens)")
    k: Dim = Field(description="Reduction dim")
    n: Dim = Field(description="Output columns")
    group_size: int = Field(default=128, ge=2, le=1 << 16, description="K rows per scale")

    @model_validator(mode="after")
    def _groups_tile_k(self) -> QuantGemmKernel:
        if self.k % self.group_size:
            raise ValueError(f"k(={self.k}) must be a multiple of group_size(={self.group_size})")
        return self

    @property
    def bits(self) -> int:
        """Weight bits (8 or 4)."""
        return 8 if self.kind == "w8a16" else 4

    @property
    def label(self) -> str:
        return f"{self.kind} {self.m}x{self.k}x{self.n} g{self.group_size} {self.dtype}"

    def ops(self) -> list[OpBase]:
        weight = "int8" if self.bits == 8 else "int4"
        return [
            Gemm(
                name=self.label, m=self.m, k=self.k, n=self.n,
                a_dtype=self.dtype, b_dtype=weight, out_dtype=self.dtype,
                weight_bits=quantized_weight_bits(self.bits, self.group_size),
            )
        ]  # fmt: skip


def check_attention_shape(heads: int, kv_heads: int, q_len: int, kv_len: int,
                          causal: bool) -> None:
    """Raise ValueError for an attention shape no kernel runs: query heads that are not a
    multiple of the KV heads, or a causal mask over more queries than keys."""
    if heads % kv_heads:
        raise ValueError(f"heads(={heads}) must be a multiple of kv_heads(={kv_heads})")
    if causal and q_len > kv_len:
        raise ValueError(f"causal needs q_len(={q_len}) <= kv_len(={kv_len})")


class AttentionKernel(SuiteKernel):
    """Attention of ``q_len`` queries over ``kv_len`` keys per sequence, fused (FlashAttention)
    or unfused (scores and probabilities through memory); GQA when ``kv_heads < heads``.
    """

    kind: Literal["attention"] = "attention"
    batch: Dim = Field(default=1, description="Sequences")
    heads: Dim = Field(description="Query heads")
    kv_heads: Dim = Field(description="Key/value heads")
    q_len: Dim = Field(description="Query tokens per sequence")
    kv_len: Dim = Field(description="Key/value tokens per sequence")
    head_dim: int = Field(default=128, ge=16, le=256, description="Head dim (power of two)")
    causal: bool = Field(default=True, description="Bottom-right causal mask")
    fused: bool = Field(default=True, description="FlashAttention (True) or unfused")

    @model_validator(mode="after")
    def _shapes(self) -> AttentionKernel:
        check_attention_shape(self.heads, self.kv_heads, self.q_len, self.kv_len, self.causal)
        if self.head_dim & (self.head_dim - 1):
            raise ValueError(f"head_dim(={self.head_dim}) must be a power of two")
        return self

    @property
    def label(self) -> str:
        mode = "fused" if self.fused else "unfused"
        mask = "causal" if self.causal else "full"
        return (
            f"attention {mode} b{self.batch} h{self.heads}/{self.kv_heads} "
            f"q{self.q_len} kv{self.kv_len} d{self.head_dim} {mask} {self.dtype}"
        )

    def ops(self) -> list[OpBase]:
        return [
            Attention(
                name=self.label, batch=self.batch, q_len=self.q_len, kv_len=self.kv_len,
                heads=self.heads, kv_heads=self.kv_heads, head_dim=self.head_dim,
                causal=self.causal, fused=self.fused, dtype=self.dtype, kv_dtype=self.dtype,
            )
        ]  # fmt: skip


class ElementwiseKernel(SuiteKernel):
    """The matmul epilogue act(x + bias) + residual over [rows, cols]: one fused pass or three
    passes (bias, activation, residual) through memory.
    """

    kind: Literal["elementwise"] = "elementwise"
    rows: Dim = Field(description="Rows (tokens)")
    cols: Dim = Field(description="Columns (features); the bias has this length")
    activation: Literal["none", "relu", "silu", "gelu"] = Field(default="silu", description="Act")
    fused: bool = Field(default=True, description="One pass (True) or three")

    @property
    def label(self) -> str:
        mode = "fused" if self.fused else "unfused"
        return f"elementwise {mode} {self.rows}x{self.cols} {self.activation} {self.dtype}"

    def ops(self) -> list[OpBase]:
        act = ACTIVATION_FLOPS_PER_ELEMENT[self.activation]
        return epilogue_ops(self.label, self.rows, self.cols, act, self.fused, self.dtype)


def epilogue_ops(
    label: str, rows: int, cols: int, act_flops: float, fused: bool, dtype: str
) -> list[OpBase]:
    """The operators of act(x + bias) + residual over [rows, cols] with ``act_flops`` vector
    FLOPs per element for the activation: one pass reading x and the residual, or three passes
    (bias, activation, residual) through memory."""
    n = rows * cols
    if fused:
        return [
            Elementwise(
                name=label, elements=n, inputs=2, flops_per_element=act_flops + 2, dtype=dtype
            )
        ]
    passes = (("bias", 1, 1.0), ("act", 1, act_flops), ("res", 2, 1.0))
    return [
        Elementwise(
            name=f"{label} {what}",
            elements=n,
            inputs=inputs,
            flops_per_element=flops,
            dtype=dtype,
        )
        for what, inputs, flops in passes
    ]


Kernel = Annotated[
    GemmKernel | QuantGemmKernel | AttentionKernel | ElementwiseKernel,
    Field(discriminator="kind"),
]
"""Any kernel description, discriminated by ``kind``."""

KERNEL_KINDS: tuple[str, ...] = ("gemm", "gemv", "w8a16", "w4a16", "attention", "elementwise")

_KERNEL = TypeAdapter(Kernel)


def parse_kernel(data: dict[str, object], source: str) -> KernelBase:
    """A validated kernel description from a mapping.

    Raises:
        ConfigError: unknown ``kind`` or invalid fields; the message names them.
    """
    kind = data.get("kind")
    if kind not in KERNEL_KINDS:
        raise ConfigError(
            f"{source}: kernel kind {kind!r} unknown; allowed: {', '.join(KERNEL_KINDS)}"
        )
    return validate(_Holder, {"kernel": data}, source).kernel


class _Holder(BaseModel):
    """Wraps one kernel so :func:`infersim.io.validate` can name the bad field."""

    kernel: Kernel


class Suite(BaseModel):
    """A named list of kernels (a packaged suite or a user's YAML file)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=64, description="Suite name")
    description: str = Field(default="", description="What the suite is for")
    kernels: list[Kernel] = Field(min_length=1, description="Kernels, in run order")
    budget_s: float | None = Field(
        default=None,
        gt=0,
        le=86400,
        description="Seconds the cpu backend's warm-up and timed rounds should take on any "
        "host: from a first measured speed of the host, shapes shrink and rounds drop (to 3) "
        "until the estimate fits (see infersim.validation.sizing); None: shapes as written",
    )

    @model_validator(mode="after")
    def _unique_labels(self) -> Suite:
        seen: set[str] = set()
        for kernel in self.kernels:
            if kernel.label in seen:
                raise ValueError(f"kernel {kernel.label!r} appears twice")
            seen.add(kernel.label)
        return self


SUITES: tuple[str, ...] = ("default", "quick", "gpu", "tiny")
"""Packaged suites: default (CPU, broad), quick (CPU, CI-sized), gpu (one GPU), tiny
(interpreter-sized shapes for correctness)."""


def load_suite(name_or_path: str | Path) -> Suite:
    """A packaged suite by name, or a user's suite YAML file.

    Raises:
        ConfigError: unknown name, unreadable file, or invalid kernels.
    """
    text = str(name_or_path)
    if text in SUITES:
        path = Path(str(resources.files("infersim.validation") / "suites" / f"{text}.yaml"))
    else:
        path = Path(text).expanduser()
        if not path.is_file():
            raise ConfigError(
                f"unknown suite {text!r}; packaged: {', '.join(SUITES)} (or a YAML path)"
            )
    return validate(Suite, read_document(path), path.name)
