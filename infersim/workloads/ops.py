"""The operator IR: immutable values that know their FLOPs and compulsory DRAM traffic.

An operator describes *what* is computed, never how it is mapped or what it costs. ``count``
repeats an identical operator (e.g. once per layer) so engines cost it once. FLOPs count a
multiply-accumulate as 2. ``compulsory_bytes`` is the DRAM traffic no schedule can avoid: every
input read once and every output written once (for unfused attention, the score and probability
matrices it materializes by definition). Every engine's DRAM traffic must be at least this.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from infersim import dtypes

DTypeName = Annotated[str, AfterValidator(dtypes.canonical)]
"""A dtype field: any format of :mod:`infersim.dtypes`, aliases (``fp8``, ``bfloat16``) too."""

Dim = Annotated[int, Field(ge=1, le=1 << 40)]

SOFTMAX_FLOPS_PER_ELEMENT = 5.0
"""Scale, running max, exp, sum, normalize (vector-unit FLOPs per score)."""

NORM_FLOPS_PER_ELEMENT = {"rms": 4.0, "layer": 7.0}
"""RMSNorm: square, accumulate, scale, weight; LayerNorm adds mean, subtract and bias."""


_NOT_COST = frozenset({"name", "count"})
"""Fields that label an operator without changing its cost."""


class OpBase(BaseModel):
    """Fields and accessors every operator shares."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    kind: str = Field(default="", description="Operator type (the discriminator)")
    name: str = Field(default="", max_length=128, description="Label in breakdowns")
    count: int = Field(default=1, ge=1, le=1 << 30, description="Identical repetitions")

    @property
    def array_flops(self) -> float:
        """FLOPs run on the systolic array (matrix multiplies), per repetition."""
        return 0.0

    @property
    def vector_flops(self) -> float:
        """FLOPs run on the vector unit, per repetition."""
        return 0.0

    @property
    def flops(self) -> float:
        """All FLOPs of one repetition."""
        return self.array_flops + self.vector_flops

    @property
    def compute_dtype(self) -> str:
        """The dtype the array computes in (the activation operand's dtype)."""
        return "fp32"

    @property
    def compulsory_bytes(self) -> float:
        """Minimum DRAM bytes of one repetition (inputs read once, outputs written once)."""
        raise NotImplementedError

    @property
    def weight_bytes(self) -> float:
        """Bytes of model weights this operator reads (0 for activation-only operators)."""
        return 0.0

    def signature(self) -> tuple[Any, ...]:
        """Everything that determines the cost of one repetition (not ``name`` or ``count``):
        every memo of a cost is keyed on it, so it is computed once per (immutable) op."""
        return self._signature

    @cached_property
    def _signature(self) -> tuple[Any, ...]:
        fields = type(self).model_fields
        return tuple((key, getattr(self, key)) for key in fields if key not in _NOT_COST)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy (with ``update`` applied) that computes its own :meth:`signature`."""
        copy = super().model_copy(update=update, deep=deep)
        copy.__dict__.pop("_signature", None)
        return copy


DEQUANT_FLOPS_PER_ELEMENT = 2.0
"""Vector FLOPs to dequantize one stored element (scale multiply + zero-point subtract)."""

INDEX_BITS_2_4 = 2
"""Metadata bits per kept value of a 2:4 structured-sparse matrix (its position in the 4)."""

Sparsity = Literal["dense", "2:4", "unstructured"]


def stored_bits(dtype: str, sparsity: Sparsity = "dense", density: float = 1.0) -> float:
    """Bits stored per element of a (possibly sparse) matrix in ``dtype``: 2:4 keeps half the
    values plus 2-bit indices; unstructured keeps ``density`` of them plus the smaller of a
    bitmap (1 bit per element) and a 16-bit index per nonzero."""
    return sparse_bits(dtypes.info(dtype).bits, sparsity, density)


def sparse_bits(bits: float, sparsity: Sparsity = "dense", density: float = 1.0) -> float:
    """Bits stored per element of a matrix whose dense values take ``bits`` each, under
    ``sparsity`` (see :func:`stored_bits`)."""
    if sparsity == "2:4":
        return (bits + INDEX_BITS_2_4) / 2
    if sparsity == "unstructured":
        return density * bits + min(1.0, 16 * density)
    return bits


class Epilogue(BaseModel):
    """Elementwise work fused into a GEMM's output stage (bias, activation, residual, RoPE).

    The fused output is written once, ``out_ratio`` times the GEMM output's size (SwiGLU halves
    it), after reading ``extra_inputs`` tensors of the GEMM output's size (a residual).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    name: str = Field(default="", max_length=64, description="What was fused")
    flops_per_output: float = Field(default=1.0, ge=0, le=1e6, description="FLOPs per element")
    extra_inputs: int = Field(default=0, ge=0, le=16, description="Same-size tensors read")
    out_ratio: float = Field(default=1.0, gt=0, le=1, description="Output elements / GEMM's")


class Gemm(OpBase):
    """``batch`` independent products C[m,n] = A[m,k] · B[k,n]; B is a weight when ``b_is_weight``.

    Computed at A's dtype: a weight stored in another format (weight-only quantization) is
    dequantized on the vector unit. ``sparsity`` describes B: ``2:4`` keeps half the values
    plus 2-bit indices and halves the MACs (only build it for arrays that support it);
    ``unstructured`` stores ``density`` of the values plus an index, and skips
    ``sparse_kernel_efficiency`` of the zero MACs (0: a dense kernel, no compute gain).
    ``weight_bits`` overrides ``b_dtype``'s storage width where a per-tensor mix sets it (a
    GGUF preset gives each weight role its own ggml types); every weight-bytes computation
    goes through :attr:`b_bits`.
    """

    kind: Literal["gemm"] = "gemm"
    m: Dim = Field(description="Rows of A and C (tokens)")
    k: Dim = Field(description="Reduction dim")
    n: Dim = Field(description="Columns of B and C")
    batch: Dim = Field(default=1, description="Independent products (heads, experts)")
    a_dtype: DTypeName = Field(default="bf16", description="Activation operand A")
    b_dtype: DTypeName = Field(default="bf16", description="Operand B (weight or activation)")
    out_dtype: DTypeName = Field(default="bf16", description="Output C")
    b_is_weight: bool = Field(default=True, description="B is a model weight")
    sparsity: Sparsity = Field(default="dense", description="Structure of B's zeros")
    density: float = Field(default=1.0, gt=0, le=1, description="Nonzero fraction (unstructured)")
    sparse_kernel_efficiency: float = Field(
        default=0.0, ge=0, le=1, description="Fraction of zero MACs an unstructured kernel skips"
    )
    epilogue: Epilogue | None = Field(default=None, description="Fused elementwise epilogue")
    weight_bits: float | None = Field(
        default=None,
        gt=0,
        le=64,
        description="Stored bits per element of the weight B, scales included, when a "
        "per-tensor mix sets them (a GGUF preset's role average); None: from b_dtype",
    )
    dequant_ops_per_weight: float | None = Field(
        default=None, ge=0, le=64,
        description="Vector ops that dequantize one weight of B (a GGUF type's block decode); "
        "None: DEQUANT_FLOPS_PER_ELEMENT when B's format differs from the compute dtype",
    )

    @model_validator(mode="after")
    def _check_weight_bits(self) -> Gemm:
        if self.weight_bits is not None and not self.b_is_weight:
            raise ValueError(
                f"weight_bits = {self.weight_bits} on a GEMM whose B is not a weight"
            )
        return self

    @property
    def b_bits(self) -> float:
        """Bits stored per element of B: ``weight_bits`` or ``b_dtype``'s width, compressed
        when sparse (values and indices)."""
        if self.weight_bits is None:
            return stored_bits(self.b_dtype, self.sparsity, self.density)
        return sparse_bits(self.weight_bits, self.sparsity, self.density)

    @property
    def macs(self) -> float:
        """Multiply-accumulates of the dense product, one repetition."""
        return float(self.batch) * self.m * self.k * self.n

    @property
    def executed_macs(self) -> float:
        """MACs the array actually performs (fewer for sparse B)."""
        if self.sparsity == "2:4":
            return self.macs / 2
        if self.sparsity == "unstructured":
            return self.macs * (1 - self.sparse_kernel_efficiency * (1 - self.density))
        return self.macs

    @property
    def array_flops(self) -> float:
        return 2.0 * self.executed_macs

    @property
    def dequantizes(self) -> bool:
        """Whether B is stored in a format other than the compute dtype."""
        return self.b_is_weight and self.b_dtype != self.a_dtype

    @property
    def dequant_flops_per_weight(self) -> float:
        """Vector FLOPs that dequantize one weight of B each time it is loaded (0 when B is
        stored at the compute dtype)."""
        if not self.dequantizes:
            return 0.0
        per_weight = self.dequant_ops_per_weight
        return DEQUANT_FLOPS_PER_ELEMENT if per_weight is None else per_weight

    @property
    def dequant_flops(self) -> float:
        """Vector FLOPs that dequantize B once (a kernel that loads a weight tile again for
        another block of rows dequantizes it again: the cycle-model engines count the loads)."""
        return self.dequant_flops_per_weight * self.batch * self.k * self.n

    @property
    def vector_flops(self) -> float:
        epilogue = self.epilogue.flops_per_output * self.outputs if self.epilogue else 0.0
        return self.dequant_flops + epilogue

    @property
    def compute_dtype(self) -> str:
        return self.a_dtype

    @property
    def outputs(self) -> float:
        """Elements of C before any epilogue."""
        return float(self.batch) * self.m * self.n

    @property
    def a_bytes(self) -> float:
        """Bytes of A."""
        return self.batch * self.m * self.k * dtypes.nbytes(self.a_dtype)

    @property
    def b_bytes(self) -> float:
        """Bytes of B as stored (:attr:`b_bits` per element)."""
        return float(self.batch) * self.k * self.n * self.b_bits / 8

    @property
    def c_bytes(self) -> float:
        """Bytes written to C (after the epilogue) plus the epilogue's extra inputs read."""
        out = dtypes.nbytes(self.out_dtype) * self.outputs
        if self.epilogue is None:
            return out
        return out * (self.epilogue.out_ratio + self.epilogue.extra_inputs)

    @property
    def compulsory_bytes(self) -> float:
        return self.a_bytes + self.b_bytes + self.c_bytes

    @property
    def weight_bytes(self) -> float:
        return self.b_bytes if self.b_is_weight else 0.0


class Conv2d(OpBase):
    """A 2-D convolution (NCHW), lowered to a GEMM by im2col for WS/OS/IS."""

    kind: Literal["conv2d"] = "conv2d"
    batch: Dim = Field(default=1, description="Images N")
    in_channels: Dim = Field(description="Input channels C")
    in_h: Dim = Field(description="Input height H")
    in_w: Dim = Field(description="Input width W")
    out_channels: Dim = Field(description="Filters K")
    kernel_h: Dim = Field(description="Filter height R")
    kernel_w: Dim = Field(description="Filter width S")
    stride: Dim = Field(default=1, description="Stride in both dims")
    padding: int = Field(default=0, ge=0, le=1 << 20, description="Zero padding on each side")
    dtype: DTypeName = Field(default="bf16", description="Activations")
    weight_dtype: DTypeName = Field(default="bf16", description="Filters")
    out_dtype: DTypeName = Field(default="bf16", description="Output feature map")

    @property
    def out_h(self) -> int:
        """Output height P."""
        return (self.in_h + 2 * self.padding - self.kernel_h) // self.stride + 1

    @property
    def out_w(self) -> int:
        """Output width Q."""
        return (self.in_w + 2 * self.padding - self.kernel_w) // self.stride + 1

    def as_gemm(self) -> Gemm:
        """The im2col GEMM: m = N·P·Q output pixels, k = R·S·C window, n = K filters."""
        return Gemm(
            name=self.name,
            count=self.count,
            m=self.batch * self.out_h * self.out_w,
            k=self.kernel_h * self.kernel_w * self.in_channels,
            n=self.out_channels,
            a_dtype=self.dtype,
            b_dtype=self.weight_dtype,
            out_dtype=self.out_dtype,
        )

    @property
    def array_flops(self) -> float:
        return self.as_gemm().array_flops

    @property
    def compute_dtype(self) -> str:
        return self.dtype

    @property
    def weight_bytes(self) -> float:
        filters = self.out_channels * self.in_channels * self.kernel_h * self.kernel_w
        return filters * dtypes.nbytes(self.weight_dtype)

    @property
    def compulsory_bytes(self) -> float:
        ifmap = self.batch * self.in_channels * self.in_h * self.in_w * dtypes.nbytes(self.dtype)
        ofmap = self.batch * self.out_channels * self.out_h * self.out_w
        return ifmap + self.weight_bytes + ofmap * dtypes.nbytes(self.out_dtype)


def _sum_min(lo: int, hi: int, cap: int) -> int:
    """Σ_{j=lo}^{hi} min(j, cap) for 0 <= lo <= hi + 1."""
    if hi < lo:
        return 0
    below_hi = min(hi, cap)
    total = (lo + below_hi) * (below_hi - lo + 1) // 2 if below_hi >= lo else 0
    return total + max(0, hi - max(cap, lo - 1)) * cap


class Attention(OpBase):
    """Scaled dot-product attention of ``q_len`` queries over ``kv_len`` cached keys per sequence.

    ``fused`` is FlashAttention (scores stay on chip); unfused writes the q×kv score and
    probability matrices to DRAM and reads them back. The newest ``q_len`` keys are the last
    ones, so a causal query i attends ``kv_len - q_len + i + 1`` keys (capped by ``window``).
    """

    kind: Literal["attention"] = "attention"
    batch: Dim = Field(default=1, description="Sequences")
    q_len: Dim = Field(description="Query tokens per sequence")
    kv_len: Dim = Field(description="Key/value tokens per sequence (cache + new)")
    heads: Dim = Field(description="Query heads")
    kv_heads: Dim = Field(description="Key/value heads (GQA/MQA share them)")
    head_dim: Dim = Field(description="Query/key head dim")
    v_head_dim: int | None = Field(default=None, ge=1, le=1 << 20, description="Value head dim")
    causal: bool = Field(default=True, description="Queries see only earlier keys")
    window: int | None = Field(default=None, ge=1, le=1 << 40, description="Sliding window")
    fused: bool = Field(default=True, description="FlashAttention-style (no scores in DRAM)")
    shared_kv: bool = Field(
        default=False, description="V is a slice of the cached K (MLA latent): read once"
    )
    dtype: DTypeName = Field(default="bf16", description="Queries, outputs, scores")
    kv_dtype: DTypeName = Field(default="bf16", description="Cached keys and values")

    @property
    def dv(self) -> int:
        """Value head dim."""
        return self.v_head_dim or self.head_dim

    @property
    def pairs(self) -> int:
        """(query, key) pairs scored per sequence and head."""
        cap = self.window or self.kv_len
        if not self.causal:
            return self.q_len * min(self.kv_len, cap)
        first = max(1, self.kv_len - self.q_len + 1)
        return _sum_min(first, first + self.q_len - 1, cap)

    @property
    def keys_read(self) -> int:
        """Cached tokens any query of the sequence needs."""
        if self.window is None:
            return self.kv_len
        return min(self.kv_len, self.window + self.q_len - 1)

    def block_keys(self, rows: int) -> tuple[int, int]:
        """Keys the queries attend when they are cut into blocks of ``rows`` consecutive ones
        (a FlashAttention query block), per sequence and head: (Σ over blocks of the keys the
        block attends, from its first query's earliest to its last query's latest key; Σ over
        blocks of rows × those keys, the (query, key) pairs the block scores, masked ones
        included). One block of all the queries attends :attr:`keys_read` keys.

        Raises:
            ValueError: ``rows`` < 1.
        """
        if rows < 1:
            raise ValueError(f"rows(={rows}) must be >= 1")
        full, last = divmod(self.q_len, rows)
        if not self.causal:
            def span(n: int) -> int:
                return self.kv_len if self.window is None else min(
                    self.kv_len, self.window + n - 1)
            keys_full, keys_last = full * span(rows), span(last) if last else 0
            return keys_full + keys_last, rows * keys_full + last * keys_last
        cap = self.kv_len if self.window is None else min(self.kv_len, self.window + rows - 1)
        base = self.kv_len - self.q_len
        if base + rows >= 1:  # every block ends on or after the first key
            # block j = 1..full ends at key base + j·rows and attends min(base + j·rows, cap)
            below = min(full, max(0, (cap - base) // rows))
            keys_full = below * base + rows * below * (below + 1) // 2 + (full - below) * cap
        else:  # more queries than keys (not a cached prefix): count block by block
            keys_full = sum(min(max(1, base + j * rows), cap) for j in range(1, full + 1))
        keys_last = 0
        if last:
            keys_last = self.kv_len if self.window is None else min(
                self.kv_len, self.window + last - 1)
        return keys_full + keys_last, rows * keys_full + last * keys_last

    @property
    def array_flops(self) -> float:
        return 2.0 * self.batch * self.heads * self.pairs * (self.head_dim + self.dv)

    @property
    def exponentials(self) -> float:
        """Exponentials the softmax evaluates, one per score (one of its
        ``SOFTMAX_FLOPS_PER_ELEMENT`` vector FLOPs)."""
        return float(self.batch * self.heads * self.pairs)

    @property
    def vector_flops(self) -> float:
        softmax = SOFTMAX_FLOPS_PER_ELEMENT * self.batch * self.heads * self.pairs
        if self.kv_dtype == self.dtype:
            return softmax
        per_token = self.head_dim + (0 if self.shared_kv else self.dv)
        kv_elements = self.batch * self.kv_heads * self.keys_read * per_token
        return softmax + DEQUANT_FLOPS_PER_ELEMENT * kv_elements

    @property
    def compute_dtype(self) -> str:
        return self.dtype

    @property
    def kv_token_bytes(self) -> float:
        """Bytes of one cached token's keys and values for one KV head."""
        return (self.head_dim + (0 if self.shared_kv else self.dv)) * dtypes.nbytes(self.kv_dtype)

    @property
    def kv_bytes(self) -> float:
        """Bytes of cached keys and values read."""
        per_token = self.head_dim + (0 if self.shared_kv else self.dv)
        return (
            self.batch * self.kv_heads * self.keys_read * per_token * dtypes.nbytes(self.kv_dtype)
        )

    @property
    def compulsory_bytes(self) -> float:
        act = dtypes.nbytes(self.dtype)
        q_o = self.batch * self.heads * self.q_len * (self.head_dim + self.dv) * act
        total = q_o + self.kv_bytes
        if not self.fused:
            scores = self.batch * self.heads * self.q_len * self.kv_len * act
            total += 4 * scores  # write S, read S, write P, read P
        return total


class Elementwise(OpBase):
    """A pointwise operator (activation, residual add, RoPE, gather) over ``elements``."""

    kind: Literal["elementwise"] = "elementwise"
    elements: Dim = Field(description="Output elements")
    inputs: int = Field(
        default=1, ge=0, le=1 << 16,
        description="Input tensors of that size read (a MoE combine reads top-k of them)",
    )
    flops_per_element: float = Field(default=1.0, ge=0, le=1e6, description="FLOPs per element")
    dtype: DTypeName = Field(default="bf16", description="Element dtype")

    @property
    def vector_flops(self) -> float:
        return self.elements * self.flops_per_element

    @property
    def compulsory_bytes(self) -> float:
        return self.elements * (self.inputs + 1) * dtypes.nbytes(self.dtype)


class Norm(OpBase):
    """RMSNorm or LayerNorm over ``cols`` features of ``rows`` tokens."""

    kind: Literal["norm"] = "norm"
    rows: Dim = Field(description="Tokens")
    cols: Dim = Field(description="Features normalized together")
    norm: Literal["rms", "layer"] = Field(default="rms", description="RMSNorm or LayerNorm")
    dtype: DTypeName = Field(default="bf16", description="Activations and norm weights")

    @property
    def vector_flops(self) -> float:
        return NORM_FLOPS_PER_ELEMENT[self.norm] * self.rows * self.cols

    @property
    def weight_bytes(self) -> float:
        return self.cols * (1 if self.norm == "rms" else 2) * dtypes.nbytes(self.dtype)

    @property
    def compulsory_bytes(self) -> float:
        return 2 * self.rows * self.cols * dtypes.nbytes(self.dtype) + self.weight_bytes


class Softmax(OpBase):
    """A row softmax over ``cols`` of ``rows`` (router scores, sampling)."""

    kind: Literal["softmax"] = "softmax"
    rows: Dim = Field(description="Rows")
    cols: Dim = Field(description="Entries per row")
    dtype: DTypeName = Field(default="fp32", description="Element dtype")

    @property
    def vector_flops(self) -> float:
        return SOFTMAX_FLOPS_PER_ELEMENT * self.rows * self.cols

    @property
    def compulsory_bytes(self) -> float:
        return 2 * self.rows * self.cols * dtypes.nbytes(self.dtype)


_LINK_FACTOR = {
    # The algorithms a collective library (NCCL) picks among, per collective: for p chips,
    # (latency-bound steps, bytes each chip sends over its busiest link per payload byte).
    "all-reduce": {
        # reduce-scatter then all-gather around the ring: bandwidth-optimal, 2(p-1) steps
        "ring": (lambda p: 2 * (p - 1), lambda p: 2 * (p - 1) / p),
        # double binary tree (Sanders et al. 2009; NCCL 2.4): reduce up and broadcast down
        # two trees of depth ceil(log2 p), each carrying half the payload; a chip is inner
        # (two children) in one tree and a leaf in the other, so it sends 2x the payload
        "tree": (lambda p: 2 * (p - 1).bit_length(), lambda p: 2.0 if p > 2 else 1.0),
    },
    "all-gather": {"ring": (lambda p: p - 1, lambda p: (p - 1) / p)},
    "reduce-scatter": {"ring": (lambda p: p - 1, lambda p: (p - 1) / p)},
    "all-to-all": {"pairwise": (lambda p: p - 1, lambda p: (p - 1) / p)},
    "send-recv": {"direct": (lambda p: 1, lambda p: 1.0)},
}


class Collective(OpBase):
    """A communication step over the chip-to-chip link among ``participants`` chips."""

    kind: Literal["collective"] = "collective"
    collective: Literal["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send-recv"]
    payload_bytes: float = Field(gt=0, le=1e15, description="Bytes of the tensor on each chip")
    participants: int = Field(default=2, ge=2, le=1 << 20, description="Chips taking part")

    @property
    def algorithms(self) -> dict[str, tuple[int, float]]:
        """Each algorithm a collective library picks among (``ring``, ``tree``, ...), as
        (latency-bound steps, bytes each chip sends over its busiest link)."""
        p = self.participants
        return {
            name: (steps(p), self.payload_bytes * per_byte(p))
            for name, (steps, per_byte) in _LINK_FACTOR[self.collective].items()
        }

    @property
    def link_bytes(self) -> float:
        """Bytes each chip sends over its link with the bandwidth-optimal algorithm."""
        return min(sent for _, sent in self.algorithms.values())

    @property
    def compulsory_bytes(self) -> float:
        return 2 * self.payload_bytes  # read the input, write the result


class HostTransfer(OpBase):
    """Bytes streamed from host memory over the host link (CPU offload of weights)."""

    kind: Literal["host-transfer"] = "host-transfer"
    transfer_bytes: float = Field(gt=0, le=1e15, description="Bytes moved over the host link")

    @property
    def compulsory_bytes(self) -> float:
        return self.transfer_bytes  # landed in DRAM before use


Op = Annotated[
    Gemm | Conv2d | Attention | Elementwise | Norm | Softmax | Collective | HostTransfer,
    Field(discriminator="kind"),
]
"""Any operator, discriminated by ``kind``."""

OP_KINDS: tuple[str, ...] = (
    "gemm", "conv2d", "attention", "elementwise", "norm", "softmax", "collective",
    "host-transfer",
)
