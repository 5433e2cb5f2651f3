"""Public GPU measurements (papers, vendor-cloud benchmark guides, project READMEs) and the error
table of infersim's predictions against them.

The measurements are data: ``infersim/validation/data/public_gpu/<kind>.csv``, one file per kind
(``gemm``, ``memory``, ``latency``, ``collectives``, ``models``), every row citing the file it was
read from (``source``: ``github.com/<owner>/<repo>@<commit>:<path>`` or a URL) and where in it
(``location``); ``README.md`` there lists the sources. :func:`load_public` reads a kind into typed
rows, :func:`error_table` predicts every row through infersim's public API and
:func:`format_table` prints the result. A row infersim cannot express (a dtype it lacks, a model
that is not a preset, a quantity its chip model has no figure for) is kept with the reason it was
skipped, never dropped.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from infersim.arch_models import load_chip
from infersim.arch_models.chip import Chip
from infersim.errors import InfersimError
from infersim.simulator.inference import cost_ops, engine_fn, simulate
from infersim.workloads import Precision, Scenario, load_model
from infersim.workloads.ops import Collective, Elementwise, Gemm, OpBase

Kind = Literal["gemm", "memory", "latency", "collectives", "models"]
KINDS: tuple[Kind, ...] = ("gemm", "memory", "latency", "collectives", "models")
"""The kinds of public measurement, each a ``<kind>.csv`` in the data folder."""

DATA_PACKAGE = "infersim.validation"
DATA_DIR = "data/public_gpu"

FORBIDDEN_SOURCES: tuple[str, ...] = (
    r"deepgemm",
    r"2307\.08691", r"2407\.08608", r"flashattention-?[23]", r"flash-attention",
    r"tensorrt[-_ ]?llm", r"trt-?llm",
    r"\bnim\b", r"build\.nvidia\.com",
    r"llama\.cpp", r"ggml-org", r"ggerganov", r"discussions/4167",
    r"gpu-benchmarks-on-llm-inference",
)
"""Patterns (case-insensitive regexes) no row's text may match: sources reserved as independent
checks (the DeepGEMM README, the FlashAttention-2/-3 papers, TensorRT-LLM performance pages and
NVIDIA NIM benchmarks, the llama.cpp scoreboards, the GPU-Benchmarks-on-LLM-Inference repo)."""

_FORBIDDEN = re.compile("|".join(FORBIDDEN_SOURCES), re.IGNORECASE)


class PublicRow(BaseModel):
    """What every public measurement carries: the chip it ran on and where it was read."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    chip: str = Field(min_length=1, description="infersim chip preset name (h100-sxm, ...)")
    source: str = Field(min_length=1, description="github.com/owner/repo@commit:path or a URL")
    location: str = Field(min_length=1, description="Where in the source: table, row, column")
    note: str = Field(default="", description="How it was measured; conversions made")

    def texts(self) -> tuple[str, ...]:
        """Every free-text field of the row (what :data:`FORBIDDEN_SOURCES` is checked on)."""
        return tuple(v for v in self.model_dump().values() if isinstance(v, str))

    def label(self) -> str:
        """A short description of the measured case for tables."""
        raise NotImplementedError


class GemmRow(PublicRow):
    """A dense GEMM C[m, n] = A[m, k] @ B[k, n] timed on its own (cuBLAS / cuBLASLt / torch)."""

    m: int = Field(ge=1, description="Rows of A and C")
    n: int = Field(ge=1, description="Columns of B and C")
    k: int = Field(ge=1, description="Reduction dim")
    a_dtype: str = Field(description="A's dtype (infersim name)")
    b_dtype: str = Field(description="B's dtype")
    out_dtype: str = Field(description="C's dtype")
    measured_tflops: float = Field(gt=0, description="Dense TFLOP/s as the source reports it")
    library: str = Field(description="Library and version that ran it")

    def label(self) -> str:
        return f"{self.m}x{self.n}x{self.k} {self.a_dtype}"


class MemoryRow(PublicRow):
    """A streaming kernel's bandwidth from DRAM (``dram_copy``: 1 read + 1 write stream,
    ``dram_triad``: 2 read + 1 write) or from an L2-resident working set (``l2_read``)."""

    kind: Literal["dram_copy", "dram_triad", "l2_read"] = Field(description="What was streamed")
    bytes_moved: float | None = Field(default=None, gt=0, description="Bytes one kernel moves")
    working_set_bytes: float | None = Field(default=None, gt=0, description="L2 working set")
    measured_bytes_per_s: float = Field(gt=0, description="Bytes per second as reported")
    benchmark: str = Field(description="Benchmark and kernel")

    def label(self) -> str:
        size = self.bytes_moved if self.kind != "l2_read" else self.working_set_bytes
        return f"{self.kind} {size or 0:.3g} B"


class LatencyRow(PublicRow):
    """A latency: a dependent load from L2 or DRAM, or the time of one tiny kernel launched
    back to back (plain stream launches or one CUDA graph)."""

    kind: Literal["dram_latency", "l2_latency", "kernel_back_to_back_stream",
                  "kernel_back_to_back_graph"] = Field(description="What was timed")
    measured_s: float | None = Field(
        default=None, gt=0, description="Seconds (derived from cycles where noted); absent "
        "when the source reports cycles at an unstated clock"
    )
    measured_cycles: float | None = Field(default=None, gt=0, description="Cycles, if reported")
    clock_hz: float | None = Field(default=None, gt=0, description="Clock of the cycle count")
    bytes_moved: float | None = Field(default=None, gt=0, description="Bytes the kernel moves")

    @model_validator(mode="after")
    def _seconds_or_cycles(self) -> LatencyRow:
        if self.measured_s is None and self.measured_cycles is None:
            raise ValueError("a latency row needs measured_s or measured_cycles")
        return self

    @property
    def in_cycles(self) -> bool:
        """Compared in cycles (the source gives no clock to turn them into seconds)."""
        return self.measured_s is None

    def label(self) -> str:
        return self.kind


class CollectiveRow(PublicRow):
    """A collective over ``n_gpus`` GPUs, as nccl-tests reports it (bus bandwidth)."""

    n_gpus: int = Field(ge=2, description="GPUs taking part")
    collective: Literal["all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                        "send-recv"] = Field(description="The collective")
    message_bytes: float = Field(gt=0, description="Bytes of the tensor on each GPU")
    measured_busbw_bytes_per_s: float = Field(gt=0, description="nccl-tests busbw")
    library: str = Field(description="NCCL version")

    def label(self) -> str:
        return f"{self.collective} x{self.n_gpus} {self.message_bytes:.3g} B"


class ModelRow(PublicRow):
    """A whole model run by an inference engine: ``generate`` (batch sequences, prompt_len
    tokens in, output_len out; tokens/s = batch x output_len / wall time), ``decode`` (one
    step; tpot_s or tokens_per_s) or ``prefill`` (ttft_s)."""

    model: str = Field(description="infersim model preset name")
    source_model: str = Field(description="The checkpoint the source ran")
    tp: int = Field(ge=1, description="Tensor-parallel GPUs")
    phase: Literal["generate", "decode", "prefill"] = Field(description="What was timed")
    batch: int = Field(ge=1, description="Sequences")
    prompt_len: int = Field(ge=1, description="Prompt tokens per sequence")
    output_len: int = Field(ge=1, description="Generated tokens per sequence")
    weights_dtype: str = Field(description="Weight format")
    act_dtype: str = Field(description="Activation format")
    kv_dtype: str = Field(description="KV-cache format")
    metric: Literal["tokens_per_s", "tpot_s", "ttft_s"] = Field(description="What is reported")
    measured: float = Field(gt=0, description="The reported value, in the metric's unit")
    engine: str = Field(description="Inference engine that ran it")
    techniques: str = Field(
        default="",
        description="What that engine ran that infersim models as techniques, in infersim's "
        "technique syntax (cuda-graphs: its decode steps replay from CUDA graphs)",
    )

    def label(self) -> str:
        return (f"{self.model} tp{self.tp} b{self.batch} {self.prompt_len}/{self.output_len} "
                f"w:{self.weights_dtype}")


ROW_TYPES: dict[Kind, type[PublicRow]] = {
    "gemm": GemmRow, "memory": MemoryRow, "latency": LatencyRow,
    "collectives": CollectiveRow, "models": ModelRow,
}


@overload
def load_public(kind: Literal["gemm"]) -> list[GemmRow]: ...
@overload
def load_public(kind: Literal["memory"]) -> list[MemoryRow]: ...
@overload
def load_public(kind: Literal["latency"]) -> list[LatencyRow]: ...
@overload
def load_public(kind: Literal["collectives"]) -> list[CollectiveRow]: ...
@overload
def load_public(kind: Literal["models"]) -> list[ModelRow]: ...
@overload
def load_public(kind: str) -> list[PublicRow]: ...
def load_public(kind: str) -> list[Any]:
    """The rows of ``<kind>.csv`` in the packaged data folder, typed.

    Raises:
        ValueError: an unknown kind, a row that does not parse (file and line in the message),
            or a row whose text names a source reserved as an independent check.
    """
    if kind not in ROW_TYPES:
        raise ValueError(f"kind(={kind!r}) must be one of {', '.join(KINDS)}")
    row_type = ROW_TYPES[kind]  # type: ignore[index]
    path = resources.files(DATA_PACKAGE) / DATA_DIR / f"{kind}.csv"
    rows = []
    with io.StringIO(path.read_text(), newline="") as f:
        for line, record in enumerate(csv.DictReader(f), start=2):
            try:
                row = row_type.model_validate({k: v for k, v in record.items() if v != ""})
            except ValidationError as e:
                raise ValueError(f"{kind}.csv line {line}: {e}") from None
            for text in row.texts():
                if hit := _FORBIDDEN.search(text):
                    raise ValueError(
                        f"{kind}.csv line {line} names a reserved source ({hit.group(0)!r})"
                    )
            rows.append(row)
    return rows


@dataclass(frozen=True, slots=True)
class ErrorRow:
    """One measurement against infersim's prediction. ``error_pct`` is signed:
    100 x (predicted - measured) / measured; a skipped row has ``predicted`` None and says why."""

    kind: Kind
    chip: str
    case: str
    metric: str
    """Name and unit of ``measured`` and ``predicted`` (``tflops``, ``bytes_per_s``, ...)."""
    measured: float
    predicted: float | None
    predictor: str
    """What produced the prediction: ``engine:<name>`` or the chip-model field read."""
    source: str
    skipped: str = ""

    @property
    def error_pct(self) -> float | None:
        """Signed error in percent, None for a skipped row."""
        if self.predicted is None:
            return None
        return 100.0 * (self.predicted - self.measured) / self.measured


class _Skip(Exception):  # noqa: N818 - a control-flow signal, not an error
    """A row infersim cannot express; the message is the reason."""


Prediction = tuple[str, float, str]  # metric, predicted value, predictor


def _op_s(op: OpBase, chip: Chip, engine: str) -> float:
    return cost_ops([op], chip, engine)[0].time_s


def _gemm(row: GemmRow, chip: Chip, engine: str) -> Prediction:
    op = Gemm(m=row.m, n=row.n, k=row.k, a_dtype=row.a_dtype, b_dtype=row.b_dtype,
              out_dtype=row.out_dtype, b_is_weight=False, name="public.gemm")
    time_s = _op_s(op, chip, engine)
    return "tflops", 2.0 * row.m * row.n * row.k / time_s / 1e12, f"engine:{engine}"


_STREAMS = {"dram_copy": (1, 0.0), "dram_triad": (2, 2.0)}  # inputs read, FLOPs per element


def _memory(row: MemoryRow, chip: Chip, engine: str) -> Prediction:
    if row.kind == "l2_read":
        if chip.shared_sram is None:
            raise _Skip(f"{chip.name} has no shared SRAM (L2) in its chip model")
        bandwidth = (chip.shared_sram.bandwidth_bytes_per_cycle * chip.freq_hz
                     * chip.calibration.shared_sram_bandwidth_efficiency)
        return "bytes_per_s", bandwidth, "chip:shared_sram bandwidth x freq x efficiency"
    if row.bytes_moved is None:
        raise _Skip("no bytes_moved recorded")
    inputs, flops = _STREAMS[row.kind]
    # fp32 elements of the same byte count (infersim has no fp64; the kernels are bandwidth-bound)
    elements = max(1, round(row.bytes_moved / ((inputs + 1) * 4)))
    op = Elementwise(elements=elements, inputs=inputs, flops_per_element=flops, dtype="fp32",
                     name=f"public.{row.kind}")
    return "bytes_per_s", op.compulsory_bytes / _op_s(op, chip, engine), f"engine:{engine}"


def _latency(row: LatencyRow, chip: Chip, engine: str) -> Prediction:
    if row.kind == "dram_latency":
        if row.in_cycles:
            return "cycles", chip.dram.latency_s * chip.freq_hz, "chip:dram.latency_s x freq_hz"
        return "s", chip.dram.latency_s, "chip:dram.latency_s"
    if row.kind == "l2_latency":
        raise _Skip("infersim's chip model has no L2 (shared SRAM) latency")
    if row.bytes_moved is None or row.in_cycles:
        raise _Skip("a kernel time needs bytes_moved and measured_s")
    if row.kind == "kernel_back_to_back_graph" and chip.launch is not None:
        chip = chip.with_(**{"launch.graphs": True})  # replayed from one CUDA graph
    # one SCALE kernel (read + write, one multiply per element), fp32 elements of the same bytes
    op = Elementwise(elements=max(1, round(row.bytes_moved / 8)), inputs=1, dtype="fp32",
                     name="public.small_kernel")
    return "s", _op_s(op, chip, engine), f"engine:{engine}"


_BUS_FACTOR: dict[str, Callable[[int], float]] = {  # nccl-tests: busbw = algbw x factor
    "all-reduce": lambda n: 2 * (n - 1) / n,
    "all-gather": lambda n: (n - 1) / n,
    "reduce-scatter": lambda n: (n - 1) / n,
    "all-to-all": lambda n: (n - 1) / n,
    "send-recv": lambda n: 1.0,
}


def _collective(row: CollectiveRow, chip: Chip, engine: str) -> Prediction:
    link = chip.chip_link
    if link is None:
        raise _Skip(f"{chip.name} has no chip-to-chip link in its chip model")
    if row.n_gpus > link.max_chips:
        raise _Skip(f"{row.n_gpus} GPUs exceed {chip.name}'s link domain ({link.max_chips})")
    op = Collective(collective=row.collective, payload_bytes=row.message_bytes,
                    participants=row.n_gpus, name="public.collective")
    busbw = row.message_bytes * _BUS_FACTOR[row.collective](row.n_gpus) / _op_s(op, chip, engine)
    return "busbw_bytes_per_s", busbw, f"engine:{engine}"


def _model(row: ModelRow, chip: Chip, engine: str) -> Prediction:
    try:
        model = load_model(row.model)
    except InfersimError as e:
        raise _Skip(f"model {row.model!r} is not a preset: {e}") from None
    try:
        precision = Precision(weights=row.weights_dtype, act=row.act_dtype, kv=row.kv_dtype)
    except (ValidationError, InfersimError):
        raise _Skip(
            f"dtypes (weights {row.weights_dtype}, act {row.act_dtype}, kv {row.kv_dtype}) "
            "not all known to infersim"
        ) from None
    stack = [t.strip() for t in row.techniques.split("+") if t.strip()]
    stack += [f"tp={row.tp}"] if row.tp > 1 else []

    def run(phase: Literal["prefill", "decode"], context_len: int = 0) -> float:
        scenario = Scenario(phase=phase, batch=row.batch, prompt_len=row.prompt_len,
                            context_len=context_len, precision=precision)
        # a source that captures CUDA graphs of its decode steps (gpt-fast) prefills without
        steps = [t for t in stack if phase == "decode" or t != "cuda-graphs"]
        cost = simulate(chip, model, scenario, engine=engine,
                        techniques="+".join(steps) or None, ways_out=False)
        return cost.latency_s

    predictor = f"engine:{engine} (simulate)"
    if row.phase == "prefill":
        return "ttft_s", run("prefill"), predictor
    # a decode step at the run's mean context stands for each of its steps
    step_s = run("decode", row.prompt_len + row.output_len // 2)
    if row.phase == "decode":
        value = step_s if row.metric == "tpot_s" else row.batch / step_s
        return row.metric, value, predictor
    total_s = run("prefill") + (row.output_len - 1) * step_s
    return "tokens_per_s", row.batch * row.output_len / total_s, predictor


_PREDICT: dict[Kind, Callable[[Any, Chip, str], Prediction]] = {
    "gemm": _gemm, "memory": _memory, "latency": _latency,
    "collectives": _collective, "models": _model,
}


def _measured(kind: Kind, row: Any) -> tuple[str, float]:
    if kind == "gemm":
        return "tflops", row.measured_tflops
    if kind == "memory":
        return "bytes_per_s", row.measured_bytes_per_s
    if kind == "latency":
        return ("cycles", row.measured_cycles) if row.in_cycles else ("s", row.measured_s)
    if kind == "collectives":
        return "busbw_bytes_per_s", row.measured_busbw_bytes_per_s
    return row.metric, row.measured


def error_table(engine: str = "analytic",
                kinds: Iterable[Kind] = KINDS) -> list[ErrorRow]:
    """Every public measurement of ``kinds`` against ``engine``'s prediction on the named chip
    preset, in file order. Rows infersim cannot express come back skipped, with the reason.

    Raises:
        ValueError: a data file does not parse (see :func:`load_public`).
        InfersimError: an unknown engine.
    """
    engine_fn(engine)  # an unknown engine fails here, not as a skipped row
    chips: dict[str, Chip] = {}
    out: list[ErrorRow] = []
    for kind in kinds:
        for row in load_public(kind):
            metric, measured = _measured(kind, row)
            predicted: float | None = None
            predictor, skipped = "", ""
            try:
                if row.chip not in chips:
                    chips[row.chip] = load_chip(row.chip)
                metric, predicted, predictor = _PREDICT[kind](row, chips[row.chip], engine)
            except _Skip as e:
                skipped = str(e)
            except (InfersimError, ValidationError) as e:
                skipped = f"{type(e).__name__}: {str(e).splitlines()[0]}"
            out.append(ErrorRow(kind=kind, chip=row.chip, case=row.label(), metric=metric,
                                measured=measured, predicted=predicted, predictor=predictor,
                                source=row.source, skipped=skipped))
    return out


def _num(value: float) -> str:
    return f"{value:.4g}"


def summary(rows: Iterable[ErrorRow]) -> dict[str, dict[str, float]]:
    """Per kind: ``rows``, ``predicted`` (rows not skipped), ``mape_pct`` (mean |error|) and
    ``mean_error_pct`` (mean signed error; NaN where nothing was predicted)."""
    by_kind: dict[str, list[ErrorRow]] = {}
    for row in rows:
        by_kind.setdefault(row.kind, []).append(row)
    out = {}
    for kind, group in by_kind.items():
        errors = [e for r in group if (e := r.error_pct) is not None]
        out[kind] = {
            "rows": float(len(group)),
            "predicted": float(len(errors)),
            "mape_pct": sum(map(abs, errors)) / len(errors) if errors else math.nan,
            "mean_error_pct": sum(errors) / len(errors) if errors else math.nan,
        }
    return out


def format_table(rows: Iterable[ErrorRow]) -> str:
    """A markdown table of ``rows`` (skipped rows carry their reason) followed by the per-kind
    summary of :func:`summary`."""
    rows = list(rows)
    lines = [
        "| kind | chip | case | metric | measured | predicted | error % | predictor / skipped |",
        "|---|---|---|---|---:|---:|---:|---|",
    ]
    for r in rows:
        err = r.error_pct
        lines.append(
            f"| {r.kind} | {r.chip} | {r.case} | {r.metric} | {_num(r.measured)} | "
            f"{_num(r.predicted) if r.predicted is not None else '-'} | "
            f"{f'{err:+.1f}' if err is not None else '-'} | "
            f"{r.predictor if not r.skipped else 'skipped: ' + r.skipped} |"
        )
    lines += ["", "| kind | rows | predicted | MAPE % | mean signed error % |",
              "|---|---:|---:|---:|---:|"]
    for kind, s in summary(rows).items():
        lines.append(f"| {kind} | {s['rows']:.0f} | {s['predicted']:.0f} | "
                     f"{s['mape_pct']:.1f} | {s['mean_error_pct']:+.1f} |")
    return "\n".join(lines)
