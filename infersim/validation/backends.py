"""Where kernels run: ``cuda`` (Triton on a GPU, timed with ``triton.testing.do_bench``),
``cpu`` (torch on the host), ``interpret`` (Triton's CPU interpreter: correctness only).

A backend reports the device it found and, for a list of kernels, one :class:`Outcome` each:
a timing (``cuda``, ``cpu``) and/or a correctness check against torch (``cuda``, ``interpret``).
torch and Triton are imported only when a backend is made, so infersim works without them.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from infersim.errors import InfersimError
from infersim.validation import sizing
from infersim.validation.sizing import HostSpeed, Plan
from infersim.validation.suite import KernelBase
from infersim.validation.timing import (
    STATISTICS,
    TIMERS,
    Measurement,
    Progress,
    Statistic,
    Step,
    Timer,
    time_once,
)

BackendName = Literal["cpu", "cuda", "interpret"]
BACKENDS: tuple[str, ...] = ("cpu", "cuda", "interpret")

INTERPRETER_MAX_FLOPS = 2e8
"""Largest kernel (FLOPs) the interpret backend accepts: the interpreter runs one Python
program per block, ~1 s per 5e7 FLOPs of matmul on this project's CI machine."""


DEFAULT_BUDGET_S = 60.0
"""The cpu backend's default budget for its warm-up and timed rounds (seconds)."""


def rounds_within(rounds: int, round_s: float, budget_s: float) -> int:
    """How many of ``rounds`` timed rounds of ``round_s`` seconds fit ``budget_s`` (>= 3)."""
    if round_s <= 0:
        return rounds
    return max(3, min(rounds, int(budget_s // round_s)))


@dataclass(frozen=True)
class Check:
    """A correctness check: normalized max error against torch, and the bound it must meet."""

    max_error: float
    tolerance: float

    @property
    def passed(self) -> bool:
        """Whether the error is within the tolerance."""
        return self.max_error <= self.tolerance


@dataclass(frozen=True)
class Outcome:
    """What a backend learned about one kernel."""

    measurement: Measurement | None = None
    check: Check | None = None


@dataclass
class DeviceInfo:
    """The device a backend runs on, in words and figures (JSON-ready)."""

    kind: str
    name: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready fields."""
        return {"kind": self.kind, "name": self.name, **self.details}


def _require(module: str) -> Any:
    try:
        return __import__(module)
    except ImportError:
        raise InfersimError(
            f"the validation backends need {module}: pip install 'infersim[validate]'"
        ) from None


class CpuBackend:
    """torch on the host CPU. Kernels are timed round-robin: each round times every kernel
    (after one untimed call for short ones, so their operands are cached), so a burst of load
    from a neighbour lands on one sample of every kernel rather than on all samples of one.
    """

    name: ClassVar[str] = "cpu"
    timed: ClassVar[bool] = True

    def __init__(
        self,
        threads: int | None = None,
        timer: Timer = "wall",
        rounds: int = 7,
        statistic: Statistic = "median",
        min_round_s: float = 0.02,
        budget_s: float = DEFAULT_BUDGET_S,
    ) -> None:
        """``threads`` torch threads (default: every usable core); ``timer`` "wall" or "cpu"
        (CPU time of this process, valid with one thread only); ``rounds`` >= 3 rounds;
        ``statistic`` "median" or "min" of the samples is the measurement; kernels shorter
        than ``min_round_s`` are repeated within a round; the timed rounds are cut (to no
        fewer than 3) so that warm-up and rounds fit ``budget_s`` seconds, as the warm-up run
        predicts them (a suite with its own budget is also sized to it first: :meth:`plan`).

        Raises:
            InfersimError: torch missing, or a bad option (the value is in the message).
        """
        self.torch = _require("torch")
        usable = len(os.sched_getaffinity(0))
        self.threads = threads or usable
        if not 1 <= self.threads <= 4096:
            raise InfersimError(f"threads(={self.threads}) must be >= 1")
        if timer not in TIMERS:
            raise InfersimError(f"timer {timer!r} unknown; allowed: {', '.join(TIMERS)}")
        if timer == "cpu" and self.threads != 1:
            raise InfersimError(
                "timer 'cpu' counts every thread's CPU time: use it with threads=1, "
                f"not {self.threads}"
            )
        if rounds < 3:
            raise InfersimError(f"rounds(={rounds}) must be >= 3")
        if not budget_s > 0:
            raise InfersimError(f"budget_s(={budget_s}) must be > 0")
        if statistic not in STATISTICS:
            raise InfersimError(
                f"statistic {statistic!r} unknown; allowed: {', '.join(STATISTICS)}"
            )
        self.timer: Timer = timer
        self.rounds = rounds
        self.statistic: Statistic = statistic
        self.min_round_s = min_round_s
        self.budget_s = budget_s

    def skips(self, kernels: Sequence[KernelBase]) -> dict[str, str]:
        """Label → reason of each kernel whose dtype this host only emulates (see
        :func:`~infersim.validation.hostcpu.dtype_speeds`): it is not timed."""
        from infersim.validation.hostcpu import dtype_speeds

        speeds = dtype_speeds(self.threads)
        return {
            k.label: speeds[k.dtype].reason
            for k in kernels
            if k.dtype in speeds and not speeds[k.dtype].native
        }

    def speed(self) -> HostSpeed:
        """A first measure of the host (:class:`~infersim.validation.sizing.HostSpeed`): an
        fp32 GEMM's rate scaled by each natively computed dtype's probed ratio to fp32, and a
        short read stream."""
        from infersim.validation.hostcpu import dtype_speeds, gemm_speed, host_info, stream_speed

        fp32 = gemm_speed(self.threads)
        rates = {n: s.vs_fp32 * fp32 for n, s in dtype_speeds(self.threads).items() if s.native}
        return HostSpeed(rates, stream_speed(self.threads), host_info().llc_bytes)

    def expected_s(self, kernel: KernelBase, speed: HostSpeed) -> float:
        """Expected seconds of one call of ``kernel`` at ``speed`` (roofline x margin)."""
        return sizing.MARGIN * sizing.roofline_s(kernel, speed)

    def plan(self, kernels: Sequence[KernelBase], with_probes: bool = False) -> Plan:
        """The kernels (shrunk where need be) and rounds that fit ``budget_s`` on this host,
        with the host-cpu microbenchmarks in every round when ``with_probes`` (see
        :mod:`~infersim.validation.sizing`)."""
        from infersim.validation.hostcpu import host_info, probe_work

        speed = self.speed()
        fixed = 0.0
        if with_probes:
            stream_bytes, flops = probe_work(self.threads)
            fixed = stream_bytes / speed.dram_bytes_per_s + sum(
                f / speed.flops_per_s[d] for d, f in flops.items()
            )
        return sizing.plan(
            kernels,
            lambda k: self.expected_s(k, speed),
            self.budget_s,
            self.rounds,
            self.min_round_s,
            sizing.MARGIN * fixed,
            min_stream_bytes=2 * host_info().llc_bytes,
        )

    def device(self) -> DeviceInfo:
        """CPU model, cores, how this backend uses them, and each dtype's probed speed."""
        from infersim.validation.hostcpu import dtype_speeds, host_info

        info = host_info()
        return DeviceInfo(
            kind="cpu",
            name=info.cpu_model,
            details={
                "cores": info.cores,
                "threads": self.threads,
                "timer": self.timer,
                "statistic": self.statistic,
                "rounds": self.rounds,
                "budget_s": self.budget_s,
                "freq_hz": info.freq_hz,
                "torch": self.torch.__version__,
                "dtypes": {n: s.to_dict() for n, s in dtype_speeds(self.threads).items()},
            },
        )

    def _round_robin(
        self,
        calls: Sequence[Callable[[], object]],
        labels: Sequence[str],
        expected_s: Sequence[float],
        rounds: int,
        progress: Progress | None,
    ) -> list[list[float]]:
        """Samples (seconds) of every call over up to ``rounds`` interleaved rounds (fewer when
        warm-up and rounds would exceed the budget); ``expected_s`` (one call each) sizes the
        progress total until the warm-up has measured the calls."""
        self.torch.set_num_threads(self.threads)
        start = time.perf_counter()
        done = 0.0

        def report(total: float, what: str) -> None:
            if progress:
                progress(Step(done, max(total, done), what))

        def planned(times: Sequence[float], n_rounds: int) -> float:
            return n_rounds * sum(sizing.round_s(t, self.min_round_s) for t in times)

        estimates: list[float] = []
        for i, (label, fn) in enumerate(zip(labels, calls, strict=True)):
            report(done + sum(2 * t for t in expected_s[i:]) + planned(expected_s, rounds),
                   f"warm-up {label}")  # fmt: skip
            fn()
            estimates.append(time_once(fn, self.timer))
            done = time.perf_counter() - start
        repeats = [sizing.repeats(t, self.min_round_s) for t in estimates]
        round_s = planned(estimates, 1)
        rounds = rounds_within(rounds, round_s, self.budget_s - done)
        total = done + rounds * round_s
        warm_s = done
        samples: list[list[float]] = [[] for _ in calls]
        for r in range(rounds):
            for i, fn in enumerate(calls):
                report(total, f"round {r + 1}/{rounds} {labels[i]}")
                if estimates[i] < self.min_round_s:
                    fn()  # operands into cache
                samples[i].extend(time_once(fn, self.timer) for _ in range(repeats[i]))
                done = time.perf_counter() - start
            total = done + (rounds - r - 1) * (done - warm_s) / (r + 1)  # measured rounds
        report(done, "done")
        return samples

    def run(
        self,
        kernels: Sequence[KernelBase],
        progress: Progress | None = None,
        rounds: int | None = None,
    ) -> list[Outcome]:
        """Time every kernel over ``rounds`` (default: the backend's) round-robin rounds."""
        outcomes, _ = self._run(kernels, progress, False, rounds or self.rounds)
        return outcomes

    def run_with_host_chip(
        self,
        kernels: Sequence[KernelBase],
        progress: Progress | None = None,
        rounds: int | None = None,
    ) -> tuple[list[Outcome], Any]:
        """Time the kernels and the host microbenchmarks in the same rounds; return the
        outcomes and the ``host-cpu`` chip built from the microbenchmarks' best runs."""
        return self._run(kernels, progress, True, rounds or self.rounds)

    def _run(
        self,
        kernels: Sequence[KernelBase],
        progress: Progress | None,
        with_probes: bool,
        rounds: int,
    ) -> tuple[list[Outcome], Any]:
        from infersim.validation import cpu_ops, hostcpu

        speed = self.speed()
        with self.torch.inference_mode():
            arena = cpu_ops.size_arena(list(kernels))
            calls = [cpu_ops.build(k, arena) for k in kernels]
            labels = [k.label for k in kernels]
            expected = [self.expected_s(k, speed) for k in kernels]
            found = hostcpu.probes(self.threads) if with_probes else []
            for p in found:
                rate = speed.dram_bytes_per_s if p.name in ("triad", "read") else (
                    speed.flops_per_s.get(p.name.split("_")[1], speed.flops_per_s["fp32"])
                )  # fmt: skip
                expected.append(sizing.MARGIN * p.work / rate)
            samples = self._round_robin(
                [*calls, *(p.run for p in found)],
                [*labels, *(p.name for p in found)],
                expected,
                rounds,
                progress,
            )
        outcomes = [
            Outcome(measurement=Measurement.of(s, self.statistic)) for s in samples[: len(kernels)]
        ]
        chip = None
        if found:
            best = {p.name: min(s) for p, s in zip(found, samples[len(kernels) :], strict=True)}
            measured = hostcpu.HostMeasurements.from_best(
                found, best, self.threads, self.timer, hostcpu.emulated_dtypes(self.threads)
            )
            chip = hostcpu.host_chip(hostcpu.host_info(), measured)
        return outcomes, chip


class CudaBackend:
    """Triton kernels on one NVIDIA GPU, timed by ``triton.testing.do_bench`` (median of its
    samples; it warms up and flushes L2 before every sample), each checked against torch once.
    """

    name: ClassVar[str] = "cuda"
    timed: ClassVar[bool] = True

    def __init__(self, warmup_ms: int = 25, rep_ms: int = 100) -> None:
        """Raises ``InfersimError`` without torch/triton, without a GPU, or under the
        interpreter."""
        self.torch = _require("torch")
        _require("triton")
        if os.environ.get("TRITON_INTERPRET", "0") == "1":
            raise InfersimError("TRITON_INTERPRET=1 is set: unset it to time kernels on a GPU")
        if not self.torch.cuda.is_available():
            raise InfersimError("no CUDA device found; use --backend cpu or --backend interpret")
        self.warmup_ms = warmup_ms
        self.rep_ms = rep_ms

    def device(self) -> DeviceInfo:
        """GPU name, SM count and memory."""
        props = self.torch.cuda.get_device_properties(0)
        return DeviceInfo(
            kind="cuda",
            name=props.name,
            details={
                "sms": props.multi_processor_count,
                "memory_bytes": props.total_memory,
                "capability": f"{props.major}.{props.minor}",
                "torch": self.torch.__version__,
                "triton": __import__("triton").__version__,
            },
        )

    def run(self, kernels: Sequence[KernelBase], progress: Progress | None = None) -> list[Outcome]:
        """Check and time every kernel, one at a time (inputs freed in between)."""
        import triton.testing

        from infersim.validation import triton_ops

        outcomes = []
        for i, kernel in enumerate(kernels):
            if progress:
                progress(Step(i, len(kernels), kernel.label))
            case = triton_ops.build(kernel, "cuda")
            check = Check(case.check(), triton_ops.TOLERANCE[kernel.dtype])
            times_ms = triton.testing.do_bench(
                case.run, warmup=self.warmup_ms, rep=self.rep_ms, return_mode="all"
            )
            meas = Measurement.of([t * 1e-3 for t in times_ms])
            outcomes.append(Outcome(measurement=meas, check=check))
            del case
            self.torch.cuda.empty_cache()
        if progress:
            progress(Step(len(kernels), len(kernels), "done"))
        return outcomes


class InterpretBackend:
    """Triton's CPU interpreter (``TRITON_INTERPRET=1``): each kernel checked against torch;
    nothing is timed. Only small kernels (see :data:`INTERPRETER_MAX_FLOPS`)."""

    name: ClassVar[str] = "interpret"
    timed: ClassVar[bool] = False

    def __init__(self) -> None:
        """Turns the interpreter on (Triton reads the switch when it is imported, so it must be
        set before). Raises ``InfersimError`` without torch/triton, or when Triton was already
        imported in this process without the interpreter."""
        if os.environ.get("TRITON_INTERPRET", "0") != "1":
            if "triton" in sys.modules:
                raise InfersimError(
                    "Triton was already imported without the interpreter in this process; "
                    "set TRITON_INTERPRET=1 before the first import"
                )
            os.environ["TRITON_INTERPRET"] = "1"
        self.torch = _require("torch")
        _require("triton")

    def device(self) -> DeviceInfo:
        """The host CPU the interpreter runs on."""
        from infersim.validation.hostcpu import host_info

        info = host_info()
        triton = __import__("triton")
        return DeviceInfo(
            kind="interpret",
            name=f"Triton {triton.__version__} interpreter on {info.cpu_model}",
            details={"cores": info.cores, "torch": self.torch.__version__},
        )

    def run(self, kernels: Sequence[KernelBase], progress: Progress | None = None) -> list[Outcome]:
        """Check every kernel against its torch reference.

        Raises:
            InfersimError: a kernel too large for the interpreter.
        """
        from infersim.validation import triton_ops

        for kernel in kernels:
            flops = sum(op.flops * op.count for op in kernel.ops())
            if flops > INTERPRETER_MAX_FLOPS:
                raise InfersimError(
                    f"kernel {kernel.label!r} ({flops:.2g} FLOPs) is too large for the "
                    f"interpreter (max {INTERPRETER_MAX_FLOPS:.0e}); use --suite tiny"
                )
        outcomes = []
        for i, kernel in enumerate(kernels):
            if progress:
                progress(Step(i, len(kernels), kernel.label))
            case = triton_ops.build(kernel, "cpu")
            check = Check(case.check(), triton_ops.TOLERANCE[kernel.dtype])
            outcomes.append(Outcome(check=check))
        if progress:
            progress(Step(len(kernels), len(kernels), "done"))
        return outcomes


Backend = CpuBackend | CudaBackend | InterpretBackend


def make_backend(name: str, **options: Any) -> Backend:
    """The backend called ``name`` with its options (see each class).

    Raises:
        InfersimError: unknown name, missing packages, no device, or bad options.
    """
    makers: dict[str, Callable[..., Backend]] = {
        "cpu": CpuBackend,
        "cuda": CudaBackend,
        "interpret": InterpretBackend,
    }
    if name not in makers:
        raise InfersimError(f"backend {name!r} unknown; allowed: {', '.join(BACKENDS)}")
    return makers[name](**options)
