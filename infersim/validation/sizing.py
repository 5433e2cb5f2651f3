"""Fit a suite to a time budget on this host: shapes shrink and rounds drop, from a first
measured speed of the host.

A suite with a ``budget_s`` (the quick suite) must finish in about that long on any machine,
a 2-core CI runner as well as a workstation. :func:`plan` estimates the time the cpu backend
spends on each kernel (one untimed and one timed warm-up call, then per round the timed
repeats and, for short kernels, one untimed call) from a roofline of the kernel's operators at
the host's probed speed (:class:`HostSpeed`: the dtype probe's GEMM rates and a short read
stream), times :data:`MARGIN` (real kernels run below their roofline). While the estimate at
:data:`MIN_ROUNDS` rounds exceeds the budget, kernels are halved along one dimension
(:func:`shrink`), within floors that keep what it measures: GEMMs stay compute-bound
(dims >= :data:`MIN_GEMM_DIM`), GEMVs and elementwise passes keep operands larger than the
last-level cache. Kernels are halved in passes, the costliest first and each at most once a
pass, so they shrink alike and keep their differences. Then as many rounds as fit (up to the
backend's) are kept.

Everything here is pure: the speed is an input, so tests size suites for a fake slow or fast
host without timing anything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from infersim import dtypes
from infersim.validation.suite import (
    AttentionKernel,
    ElementwiseKernel,
    GemmKernel,
    KernelBase,
    QuantGemmKernel,
)

MARGIN = 2.0
"""Estimated time = roofline time x MARGIN: on the CI machine the GEMMs run at ~0.95 of the
probe's rate, attention at ~0.9, GEMVs and elementwise passes at 0.4-0.6 of the read stream."""

MIN_ROUNDS = 3
"""Fewest timed rounds (a median of fewer samples is not a measurement)."""

MIN_GEMM_DIM = 128
"""Smallest m, k or n a prefill GEMM is shrunk to (it stays compute-bound)."""

MIN_ATTENTION_LEN = 128
"""Shortest query/key length an attention kernel is shrunk to."""

MAX_REPEATS = 20
"""Most timed repeats of a short kernel within one round (as the cpu backend does)."""


@dataclass(frozen=True)
class HostSpeed:
    """A first measure of the host: GEMM FLOP/s per dtype (those it computes natively), read
    bandwidth (bytes/s) and the last-level cache (bytes) that streamed operands must exceed."""

    flops_per_s: dict[str, float]
    dram_bytes_per_s: float
    llc_bytes: int

    def __post_init__(self) -> None:
        if "fp32" not in self.flops_per_s or not all(v > 0 for v in self.flops_per_s.values()):
            raise ValueError(f"flops_per_s(={self.flops_per_s}) needs fp32 and rates > 0")
        if not self.dram_bytes_per_s > 0:
            raise ValueError(f"dram_bytes_per_s(={self.dram_bytes_per_s}) must be > 0")


def roofline_s(kernel: KernelBase, speed: HostSpeed) -> float:
    """Seconds one run of ``kernel`` takes at ``speed``'s roofline: per operator the larger of
    FLOPs at its dtype's rate (fp32's for a dtype not probed) and compulsory bytes at the read
    bandwidth, summed over operators and their repetitions."""
    total = 0.0
    for op in kernel.ops():
        name = dtypes.canonical(op.compute_dtype) if op.compute_dtype else "fp32"
        rate = speed.flops_per_s.get(name, speed.flops_per_s["fp32"])
        total += op.count * max(op.flops / rate, op.compulsory_bytes / speed.dram_bytes_per_s)
    return total


def repeats(call_s: float, min_round_s: float) -> int:
    """Timed calls per round of a kernel taking ``call_s``: enough to fill ``min_round_s``
    (1 to :data:`MAX_REPEATS`), as the cpu backend times it."""
    return max(1, min(MAX_REPEATS, round(min_round_s / max(call_s, 1e-6))))


def round_s(call_s: float, min_round_s: float) -> float:
    """Seconds one round spends on a kernel of ``call_s``: its timed repeats, plus one untimed
    call first when it is shorter than ``min_round_s`` (operands into cache)."""
    return call_s * (repeats(call_s, min_round_s) + (call_s < min_round_s))


def run_s(call_s: float, rounds: int, min_round_s: float) -> float:
    """Seconds the cpu backend spends on a kernel of ``call_s``: two warm-up calls, then
    ``rounds`` rounds."""
    return 2.0 * call_s + rounds * round_s(call_s, min_round_s)


def shrink(kernel: KernelBase, min_stream_bytes: float) -> KernelBase | None:
    """``kernel`` with one dimension halved, or None when every dimension is at its floor:
    prefill GEMMs halve their largest of m, n, k (>= :data:`MIN_GEMM_DIM`); GEMVs and quantized
    GEMVs halve n while the weight stays >= ``min_stream_bytes``; attention halves its lengths
    (>= :data:`MIN_ATTENTION_LEN`), then its heads; elementwise passes halve their rows while
    the input stays >= ``min_stream_bytes``.
    """
    data = kernel.model_dump()
    if isinstance(kernel, GemmKernel | QuantGemmKernel) and kernel.m <= 16:
        width = dtypes.nbytes(kernel.dtype) if isinstance(kernel, GemmKernel) else kernel.bits / 8
        if kernel.n < 2 or kernel.k * (kernel.n // 2) * width < min_stream_bytes:
            return None
        data["n"] = kernel.n // 2
    elif isinstance(kernel, GemmKernel):
        dim = max(("m", "n", "k"), key=lambda d: data[d])
        if data[dim] // 2 < MIN_GEMM_DIM:
            return None
        data[dim] //= 2
    elif isinstance(kernel, AttentionKernel):
        if kernel.kv_len // 2 >= MIN_ATTENTION_LEN:
            data["kv_len"] = kernel.kv_len // 2
            data["q_len"] = max(1, kernel.q_len // 2)
        elif kernel.kv_heads % 2 == 0:
            data["heads"], data["kv_heads"] = kernel.heads // 2, kernel.kv_heads // 2
        elif kernel.heads // kernel.kv_heads % 2 == 0:
            data["heads"] = kernel.heads // 2
        else:
            return None
    elif isinstance(kernel, ElementwiseKernel):
        row_bytes = kernel.cols * dtypes.nbytes(kernel.dtype)
        if kernel.rows < 2 or (kernel.rows // 2) * row_bytes < min_stream_bytes:
            return None
        data["rows"] = kernel.rows // 2
    else:
        return None
    return type(kernel).model_validate(data)


@dataclass(frozen=True)
class Plan:
    """What to run: the kernels (resized where the budget needed it), the timed rounds, the
    estimated seconds (warm-up and rounds, margin included), and each change made, in words."""

    kernels: list[KernelBase]
    rounds: int
    estimated_s: float
    resized: list[dict[str, str]] = field(default_factory=list)
    """``{"from": label, "to": label}`` of each kernel whose shape was shrunk."""
    dropped: list[str] = field(default_factory=list)
    """Labels of kernels left out because shrinking made them equal to another kernel."""


def plan(
    kernels: Sequence[KernelBase],
    estimate_s: Callable[[KernelBase], float],
    budget_s: float,
    rounds: int,
    min_round_s: float = 0.02,
    fixed_round_s: float = 0.0,
    min_stream_bytes: float = 0.0,
) -> Plan:
    """Shapes and rounds whose estimated run time fits ``budget_s`` (see the module doc).

    ``estimate_s`` gives one call's seconds (margin included); ``fixed_round_s`` is time every
    round spends besides the kernels (the host-cpu microbenchmarks timed in the same rounds).
    When even the floors do not fit, the plan keeps the floors at :data:`MIN_ROUNDS` rounds.

    Raises:
        ValueError: ``budget_s`` not > 0 or ``rounds`` < :data:`MIN_ROUNDS`.
    """
    if not budget_s > 0:
        raise ValueError(f"budget_s(={budget_s}) must be > 0")
    if rounds < MIN_ROUNDS:
        raise ValueError(f"rounds(={rounds}) must be >= {MIN_ROUNDS}")
    current = list(kernels)
    times = [estimate_s(k) for k in current]

    def total(n_rounds: int) -> float:
        kernels_s = sum(run_s(t, n_rounds, min_round_s) for t in times)
        return kernels_s + n_rounds * fixed_round_s

    shrunk = True
    while total(MIN_ROUNDS) > budget_s and shrunk:
        # One pass: the costliest kernels first, each halved at most once, until it fits; so
        # kernels shrink alike and keep their differences (no collapse onto one shape).
        shrunk = False
        for i in sorted(range(len(current)), key=lambda j: -times[j]):
            if total(MIN_ROUNDS) <= budget_s:
                break
            smaller = shrink(current[i], min_stream_bytes)
            if smaller is not None:
                current[i], times[i], shrunk = smaller, estimate_s(smaller), True
    n_rounds = max(
        [r for r in range(MIN_ROUNDS, rounds + 1) if total(r) <= budget_s], default=MIN_ROUNDS
    )
    resized = [
        {"from": old.label, "to": new.label}
        for old, new in zip(kernels, current, strict=True)
        if new != old
    ]
    kept: dict[str, KernelBase] = {}
    dropped: list[KernelBase] = []
    for kernel in current:
        if kernel.label in kept:
            dropped.append(kernel)
        else:
            kept[kernel.label] = kernel
    estimated = total(n_rounds) - sum(run_s(estimate_s(k), n_rounds, min_round_s) for k in dropped)
    return Plan(list(kept.values()), n_rounds, estimated, resized, [k.label for k in dropped])
