"""A ``host-cpu`` chip measured on this machine, so the CPU backend has a model to predict with.

Microbenchmarks (:func:`probes`): a STREAM-like triad (a = b + 3·c over arrays larger than the
last-level cache; 12 bytes counted per fp32 element, as STREAM counts) and a read-only stream
(a dot product) for DRAM bandwidth, and square GEMMs for the peak FLOP/s of each dtype the CPU
computes (fp32, bf16). Each figure is the best run; the DRAM peak is the larger stream (the
triad does not count its write-allocate reads, so a GEMV's read-only stream can beat it).

The chip is an ordinary :class:`~infersim.arch_models.Chip`: a small array whose rows × cols ×
MACs/PE/cycle × 2 × clock × cores equals the measured peak, and a DRAM whose bandwidth is the
measured peak. Figures that are not measured (vector lanes, SRAM bandwidth) are nominal values
from the CPU's flags and caches, and ``source`` says so.

The CPU backend can time the probes in the same rounds as the kernels it validates
(:meth:`~infersim.validation.backends.CpuBackend.run`), so a neighbour's load on a shared
machine affects the peaks and the kernels alike.

Before any of that, :func:`dtype_speeds` times one small GEMM per dtype (on one thread, the
dtypes in turn): a dtype whose rate is a small fraction of fp32's (bf16 or fp16 on a CPU without
bf16/fp16 units, which torch converts element by element) is *emulated*. Its peak is not
benchmarked, the host chip does not compute it, and the suites skip its kernels, saying so:
timing an emulated 2048³ bf16 GEMM takes minutes and measures the emulation, not a kernel the
model describes. The peak benchmark's sizes are chosen from the same probe, so every run is
short on any machine; a suite with a budget is sized from it, :func:`gemm_speed` and
:func:`stream_speed` (:mod:`~infersim.validation.sizing`).
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

from infersim.arch_models.chip import Chip
from infersim.io import validate
from infersim.validation.timing import Progress, Step, Timer, time_once

ARRAY_ROWS = 4
ARRAY_COLS = 16
"""The host chip's per-core array: 64 PEs, a stand-in for the SIMD FMA units (any shape whose
product with the fitted MAC rate gives the measured peak predicts the same roofline)."""

FLOPS_PER_LANE_PER_CYCLE = 4.0
"""Two FMA ports per core, 2 FLOPs each (nominal, not measured)."""

GEMM_SIZES: dict[str, tuple[int, ...]] = {"fp32": (1024, 1536), "bf16": (1024, 2048)}
"""Candidate square GEMM sizes of each dtype's peak benchmark (the best of them is the peak);
a size whose run the dtype probe predicts to exceed :data:`PEAK_RUN_MAX_S` is left out, the
smallest is always kept."""

PEAK_RUN_MAX_S = 0.25
"""Longest single run of a peak benchmark, as predicted from the dtype probe."""

PROBE_DTYPES: tuple[str, ...] = ("fp32", "bf16", "fp16")
"""The dtypes :func:`dtype_speeds` probes (torch's floating-point GEMM dtypes on a CPU)."""

PROBE_SIZE = 256
"""Side of the probe's square GEMM: 34 MFLOP, ~0.3 ms native, ~15-40 ms emulated."""

PROBE_REPEATS = 5
"""Fewest timed runs of each quick probe (its best counts: a neighbour's load on a shared
machine lengthens some runs, rarely all)."""

PROBE_MIN_S = 0.1
"""Shortest time each quick probe is run for: the first GEMMs after a large allocation or a
stream can run 100x slow for a few calls (threads waking, pages settling), so a probe keeps
timing until this much time has passed."""


def best_time_s(call: Callable[[], object], runs: int = PROBE_REPEATS,
                min_s: float = PROBE_MIN_S) -> float:  # fmt: skip
    """The shortest wall time of ``call`` over at least ``runs`` runs and ``min_s`` seconds."""
    start = time.perf_counter()
    best, n = float("inf"), 0
    while n < runs or time.perf_counter() - start < min_s:
        best = min(best, time_once(call, "wall"))
        n += 1
    return best

EMULATED_BELOW = 0.25
"""A dtype whose probe rate is below this fraction of fp32's is emulated. Native bf16/fp16
units run at 1-8x fp32's rate; torch's element-wise fallback at 1-2% of it."""

MIN_STREAM_BYTES = 256 * 1024**2
"""Smallest stream array; arrays are also at least 2/3 of the last-level cache each."""


@dataclass(frozen=True, slots=True)
class HostInfo:
    """What this machine says about itself (no measurement)."""

    cpu_model: str
    cores: int
    freq_hz: float
    l2_bytes: int
    llc_bytes: int
    memory_bytes: int
    simd_lanes_fp32: int

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready fields."""
        return asdict(self)


def _cpuinfo() -> dict[str, str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    return fields


def _cache_bytes(level: int) -> int:
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in sorted(base.glob("index*")) if base.exists() else []:
        try:
            kind = (index / "type").read_text().strip()
            if int((index / "level").read_text()) == level and kind != "Instruction":
                size = (index / "size").read_text().strip().upper()
                scale = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(size[-1:], 1)
                return int(size.rstrip("KMG")) * scale
        except (OSError, ValueError):
            continue
    return 0


@cache
def host_info() -> HostInfo:
    """CPU model, usable cores, nominal clock, caches and memory from /proc and /sys."""
    info = _cpuinfo()
    flags = set(info.get("flags", "").split())
    lanes = 16 if "avx512f" in flags else 8 if "avx2" in flags else 4
    try:
        mem = int(Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0]) * 1024
    except (OSError, IndexError, ValueError):
        mem = 16 * 1024**3
    try:
        mhz = float(info.get("cpu MHz", "0"))
    except ValueError:
        mhz = 0.0
    return HostInfo(
        cpu_model=info.get("model name", platform.processor() or "unknown CPU"),
        cores=len(os.sched_getaffinity(0)),
        freq_hz=mhz * 1e6 if mhz > 0 else 2.0e9,
        l2_bytes=_cache_bytes(2) or 1024**2,
        llc_bytes=_cache_bytes(3) or _cache_bytes(2) or 32 * 1024**2,
        memory_bytes=mem,
        simd_lanes_fp32=lanes,
    )


@dataclass(frozen=True, slots=True)
class DtypeSpeed:
    """One dtype's probed GEMM rate (FLOP/s) and whether this host computes it natively."""

    dtype: str
    flops_per_s: float
    vs_fp32: float

    @property
    def native(self) -> bool:
        """Whether the rate is at least :data:`EMULATED_BELOW` of fp32's."""
        return self.vs_fp32 >= EMULATED_BELOW

    @property
    def reason(self) -> str:
        """Why the dtype is skipped (or that it is not), in words with the figures."""
        verdict = "native" if self.native else "emulated by this CPU"
        return (
            f"{self.dtype} {verdict}: {PROBE_SIZE}^3 GEMM probe "
            f"{self.flops_per_s / 1e9:.1f} GFLOP/s = {self.vs_fp32:.1%} of fp32's"
        )

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready fields."""
        return {
            "flops_per_s": self.flops_per_s,
            "vs_fp32": self.vs_fp32,
            "native": self.native,
            "reason": self.reason,
        }


def speeds_of(rates: Mapping[str, float]) -> dict[str, DtypeSpeed]:
    """:class:`DtypeSpeed` of each dtype from probed rates (FLOP/s; must include fp32)."""
    fp32 = rates["fp32"]
    return {name: DtypeSpeed(name, rate, rate / fp32) for name, rate in rates.items()}


@cache
def dtype_speeds(threads: int) -> dict[str, DtypeSpeed]:
    """Each of :data:`PROBE_DTYPES` timed once per process: after one warm-up each,
    :data:`PROBE_SIZE`³ GEMMs of every dtype in turn on one thread, for at least
    :data:`PROBE_REPEATS` rounds and :data:`PROBE_MIN_S`; each dtype's best run counts (well
    under a second in all), and its rate for ``threads`` threads is that times ``threads``.

    One thread, because whether a dtype is emulated is a property of each core, and a short
    parallel call on a shared machine can wait a whole scheduler slice for a thread a
    neighbour holds (then fp32 reads as slow as an emulated dtype). Timing the dtypes in turn
    lets a neighbour's load fall on all of them alike; a dtype that still looks emulated on a
    CPU whose flags name units for it (:data:`NATIVE_FLAGS`) is timed :data:`PROBE_RETRY_S`
    longer before it is called so."""
    import torch

    tdt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    best = dict.fromkeys(PROBE_DTYPES, float("inf"))
    try:
        with torch.inference_mode():
            calls = {}
            for name in PROBE_DTYPES:
                x = torch.full((PROBE_SIZE, PROBE_SIZE), 0.01, dtype=tdt[name])
                calls[name] = _matmul_call(x, x, torch.empty_like(x))
                calls[name]()
            _time_in_turn(calls, best, PROBE_MIN_S)
            flags = cpu_flags()
            doubtful = [
                name for name in PROBE_DTYPES
                if best["fp32"] / best[name] < EMULATED_BELOW
                and flags & set(NATIVE_FLAGS.get(name, ()))
            ]  # fmt: skip
            if doubtful:
                _time_in_turn({n: calls[n] for n in ("fp32", *doubtful)}, best, PROBE_RETRY_S)
    finally:
        torch.set_num_threads(previous)
    flops = 2.0 * PROBE_SIZE**3 * threads
    return speeds_of({name: flops / max(t, 1e-9) for name, t in best.items()})


def _time_in_turn(
    calls: Mapping[str, Callable[[], object]], best: dict[str, float], min_s: float
) -> None:
    """Time every call in turn, for at least :data:`PROBE_REPEATS` rounds and ``min_s``
    seconds, keeping each one's best in ``best``."""
    start = time.perf_counter()
    rounds = 0
    while rounds < PROBE_REPEATS or time.perf_counter() - start < min_s:
        for name, call in calls.items():
            best[name] = min(best[name], time_once(call, "wall"))
        rounds += 1


NATIVE_FLAGS: dict[str, tuple[str, ...]] = {
    "bf16": ("avx512_bf16", "amx_bf16"),
    "fp16": ("avx512_fp16", "amx_fp16"),
}
"""x86 CPU flags of units that compute a dtype (/proc/cpuinfo names)."""

PROBE_RETRY_S = 1.0
"""Extra probing of a dtype that looks emulated on a CPU whose flags say it is not."""


@cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (/proc/cpuinfo ``flags``; empty where there is none)."""
    return frozenset(_cpuinfo().get("flags", "").split())


GEMM_PROBE_MIN_CALL_S = 0.02
"""The sizing probe's fp32 GEMM grows (from :data:`PROBE_SIZE`, doubling, up to 2048) until
one call takes this long: a short parallel call on a shared machine can wait a whole scheduler
slice for a thread a neighbour holds, and then reads 100x slow."""


@cache
def gemm_speed(threads: int) -> float:
    """fp32 GEMM FLOP/s for sizing runs: a square GEMM grown until a call takes
    :data:`GEMM_PROBE_MIN_CALL_S`, then its best run over :data:`PROBE_MIN_S` (the dtype probe's
    small GEMM tells dtypes apart; this one measures the host's scale)."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            size = PROBE_SIZE
            while True:
                x = torch.full((size, size), 0.01)
                call = _matmul_call(x, x, torch.empty_like(x))
                call()
                best = best_time_s(call)
                if best >= GEMM_PROBE_MIN_CALL_S or size >= 2048:
                    return 2.0 * size**3 / max(best, 1e-9)
                size *= 2
    finally:
        torch.set_num_threads(previous)


STREAM_PROBE_MIN_BYTES = 128 * 1024**2
"""Smallest array of the quick bandwidth probe (:func:`stream_speed`); each is also at least
the last-level cache."""


@cache
def stream_speed(threads: int) -> float:
    """Read bandwidth (bytes/s) of one dot product over two fp32 arrays larger than the
    last-level cache, the best run over :data:`PROBE_MIN_S` after one warm-up, once per process
    per thread count (a first measure of the host's speed, well under a second; the host chip's
    DRAM figure comes from the longer :func:`probes`)."""
    import torch

    elements = max(STREAM_PROBE_MIN_BYTES, host_info().llc_bytes) // 4
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            b = torch.full((elements,), 1.0)
            c = torch.full((elements,), 2.0)
            call = lambda: torch.dot(b, c)  # noqa: E731
            call()
            best = best_time_s(call)
    finally:
        torch.set_num_threads(previous)
    return 8.0 * elements / max(best, 1e-9)


def probe_work(threads: int, info: HostInfo | None = None) -> tuple[float, dict[str, float]]:
    """The work one round of :func:`probes` does, without allocating it: stream bytes, and
    GEMM FLOPs per dtype (for :mod:`~infersim.validation.sizing` to estimate its time)."""
    info = info or host_info()
    speeds = dtype_speeds(threads)
    elements = max(MIN_STREAM_BYTES, 2 * info.llc_bytes // 3) // 4
    flops = {
        name: sum(2.0 * n**3 for n in peak_sizes(candidates, speeds[name].flops_per_s))
        for name, candidates in GEMM_SIZES.items()
        if speeds[name].native
    }
    return 20.0 * elements, flops


def peak_sizes(candidates: tuple[int, ...], flops_per_s: float) -> tuple[int, ...]:
    """The candidate GEMM sizes whose run at ``flops_per_s`` takes at most
    :data:`PEAK_RUN_MAX_S` (the smallest candidate is always kept)."""
    fit = tuple(n for n in candidates if 2.0 * n**3 / flops_per_s <= PEAK_RUN_MAX_S)
    return fit or (min(candidates),)


@dataclass(frozen=True)
class Probe:
    """One microbenchmark: a zero-argument call and the work one call does (bytes or FLOPs)."""

    name: str
    run: Callable[[], object]
    work: float


def probes(threads: int, info: HostInfo | None = None) -> list[Probe]:
    """The microbenchmarks for ``threads`` torch threads, with their arrays allocated and
    touched (about 1 GB). Only natively computed dtypes get a GEMM peak (:func:`dtype_speeds`).

    Names: ``triad``, ``read`` (work in bytes), ``gemm_<dtype>_<size>`` (work in FLOPs).
    """
    import torch

    info = info or host_info()
    speeds = dtype_speeds(threads)
    elements = max(MIN_STREAM_BYTES, 2 * info.llc_bytes // 3) // 4
    a = torch.zeros(elements)
    b = torch.full((elements,), 1.0)
    c = torch.full((elements,), 2.0)
    out = [
        Probe("triad", lambda: torch.add(b, c, alpha=3.0, out=a), 12.0 * elements),
        Probe("read", lambda: torch.dot(b, c), 8.0 * elements),
    ]
    for name, candidates in GEMM_SIZES.items():
        if not speeds[name].native:
            continue
        tdt = {"fp32": torch.float32, "bf16": torch.bfloat16}[name]
        for size in peak_sizes(candidates, speeds[name].flops_per_s):
            x = torch.full((size, size), 0.01, dtype=tdt)
            y = torch.full((size, size), 0.01, dtype=tdt)
            z = torch.empty((size, size), dtype=tdt)
            out.append(Probe(f"gemm_{name}_{size}", _matmul_call(x, y, z), 2.0 * size**3))
    return out


def _matmul_call(x: Any, y: Any, z: Any) -> Callable[[], object]:
    import torch

    return lambda: torch.matmul(x, y, out=z)


@dataclass(frozen=True, slots=True)
class HostMeasurements:
    """Microbenchmark results: triad and read-only bandwidth (bytes/s), peak FLOP/s per dtype."""

    threads: int
    timer: str
    triad_bytes_per_s: float
    read_bytes_per_s: float
    peak_flops: dict[str, float]
    emulated: tuple[str, ...] = ()

    @property
    def dram_bytes_per_s(self) -> float:
        """The chip's peak DRAM bandwidth: the larger of triad and read-only."""
        return max(self.triad_bytes_per_s, self.read_bytes_per_s)

    @classmethod
    def from_best(
        cls,
        found: list[Probe],
        best_s: Mapping[str, float],
        threads: int,
        timer: str,
        emulated: tuple[str, ...] = (),
    ) -> HostMeasurements:
        """Rates from each probe's best (shortest) time in seconds; ``emulated`` names the
        dtypes left out because the host only emulates them."""
        rate = {p.name: p.work / best_s[p.name] for p in found}
        peaks: dict[str, float] = {}
        for name, value in rate.items():
            if name.startswith("gemm_"):
                dtype = name.split("_")[1]
                peaks[dtype] = max(peaks.get(dtype, 0.0), value)
        return cls(threads, timer, rate["triad"], rate["read"], peaks, emulated)


def measure_host(
    threads: int, timer: Timer = "wall", reps: int = 5, progress: Progress | None = None
) -> HostMeasurements:
    """Run the microbenchmarks alone with ``threads`` torch threads (a few seconds): two
    warm-up calls, then ``reps`` timed rounds over all probes; ``progress`` hears of each
    probe run (seconds done of the seconds the warm-up predicts)."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    start = time.perf_counter()
    try:
        found = probes(threads)
        calls_s = []
        for p in found:
            if progress:
                progress(Step(time.perf_counter() - start, None, f"warm-up {p.name}"))
            p.run()
            calls_s.append(time_once(p.run, timer))
        warm_s = time.perf_counter() - start
        total = warm_s + reps * sum(calls_s)
        best = {p.name: float("inf") for p in found}
        for r in range(reps):
            for p in found:
                if progress:
                    done = time.perf_counter() - start
                    progress(Step(done, total, f"round {r + 1}/{reps} {p.name}"))
                best[p.name] = min(best[p.name], time_once(p.run, timer))
        if progress:
            progress(Step(total, total, "done"))
    finally:
        torch.set_num_threads(previous)
    return HostMeasurements.from_best(found, best, threads, timer, emulated_dtypes(threads))


def emulated_dtypes(threads: int) -> tuple[str, ...]:
    """The probed dtypes this host only emulates (see :func:`dtype_speeds`)."""
    return tuple(name for name, s in dtype_speeds(threads).items() if not s.native)


def host_chip(info: HostInfo, measured: HostMeasurements) -> Chip:
    """The ``host-cpu`` chip for measured figures (pure: no measurement here).

    Raises:
        ConfigError: figures outside the chip schema's ranges.
    """
    cores = measured.threads
    pes_cycles = ARRAY_ROWS * ARRAY_COLS * cores * info.freq_hz
    rates = {name: flops / (2 * pes_cycles) for name, flops in measured.peak_flops.items()}
    today = dt.date.today().isoformat()
    source = (
        f"measured by infersim.validation.hostcpu on {today} ({measured.timer} clock, "
        f"{cores} thread(s)): triad {measured.triad_bytes_per_s / 1e9:.2f} GB/s, "
        f"read {measured.read_bytes_per_s / 1e9:.2f} GB/s (DRAM peak = the larger), "
        + ", ".join(f"{k} GEMM peak {v / 1e9:.1f} GFLOP/s" for k, v in measured.peak_flops.items())
        + f"; vector unit nominal ({info.simd_lanes_fp32} fp32 lanes"
        + f" x {FLOPS_PER_LANE_PER_CYCLE:g})"
        + (
            f"; not computed (emulated by this CPU): {', '.join(measured.emulated)}"
            if measured.emulated
            else ""
        )
    )
    data = {
        "name": "host-cpu",
        "description": f"{info.cpu_model}, {cores} of {info.cores} cores (measured)",
        "source": source,
        "cores": cores,
        "freq_hz": info.freq_hz,
        "array": {"rows": ARRAY_ROWS, "cols": ARRAY_COLS, "macs_per_pe_per_cycle": rates},
        "vector": {
            "lanes": info.simd_lanes_fp32,
            "flops_per_lane_per_cycle": FLOPS_PER_LANE_PER_CYCLE,
        },
        "sram": {"capacity_bytes": info.l2_bytes, "bandwidth_bytes_per_cycle": 64},
        "shared_sram": {"capacity_bytes": info.llc_bytes, "bandwidth_bytes_per_cycle": 32 * cores},
        "dram": {
            "kind": "DDR",
            "capacity_bytes": info.memory_bytes,
            "bandwidth_bytes_per_s": measured.dram_bytes_per_s,
            "latency_s": 100e-9,
        },
        "spec": {
            "dense_flops": dict(measured.peak_flops),
            "dram_bandwidth_bytes_per_s": measured.dram_bytes_per_s,
        },
    }
    return validate(Chip, data, "host-cpu")


@cache
def build_host_chip(threads: int | None = None, timer: Timer = "wall") -> Chip:
    """The ``host-cpu`` chip of this machine, measured once per process per (threads, timer).

    ``threads`` defaults to every core this process may use.
    """
    info = host_info()
    return host_chip(info, measure_host(threads or info.cores, timer))
