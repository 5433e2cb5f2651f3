"""Evaluate sweep points: chip designs × workloads → one result row per point (an Arrow table).

Two paths, one answer. The general path calls :func:`infersim.simulator.simulate` per point
(any engine, technique stack and dataflow). The vectorized path costs one workload's operators
on many chip designs at once with numpy (the roofline engine, baseline technique stack):
:func:`roofline_batch` repeats :func:`infersim.simulator.engines.roofline.cost` operation for
operation, so its results are equal to the last bit (a test checks it), and every batch is
checked against ``simulate`` on its first design before it is used; a batch that disagrees falls
back to the general path.

Each row carries the metrics (seconds, tokens/s, joules, mm², W, $: a chip's published die
area, TDP and price where its description has them, the cost model's estimates elsewhere, named
in ``estimated_figures``), the constraint verdict,
the chip's roofline ceilings, and (``record_ops``) the per-operator costs a report plots, so
reports never re-simulate.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, get_args

import numpy as np
import pyarrow as pa

from infersim import __version__, dtypes
from infersim.arch_models.chip import Chip
from infersim.errors import InfersimError
from infersim.explorer.cost import ChipFigures, chip_figures
from infersim.explorer.metrics import Constraint
from infersim.explorer.space import DesignSpace, Point
from infersim.explorer.spec import SweepSpec, WorkloadCase
from infersim.simulator import inference
from infersim.simulator.engines import roofline
from infersim.simulator.results import Bound, MemoryReport, PhaseCost
from infersim.workloads import graph
from infersim.workloads.ops import Attention, Collective, HostTransfer, OpBase

BOUNDS: tuple[str, ...] = get_args(Bound)
"""Bounds an operator's time can have (what set it: a roofline term, the shared SRAM...)."""

_TERMS = ("compute", "vector", "memory", "link", "host")
"""Roofline terms of the vectorized path, in roofline.cost's order (ties go to the first)."""

OP_FIELDS: dict[str, pa.DataType] = {
    "name": pa.string(),
    "kind": pa.string(),
    "count": pa.int64(),
    "flops": pa.float64(),
    "dram_bytes": pa.float64(),
    "time_s": pa.float64(),
    "compute_s": pa.float64(),
    "memory_s": pa.float64(),
    "bound": pa.string(),
    "energy_pj": pa.float64(),
    "intensity": pa.float64(),
    "achieved_flops": pa.float64(),
    "dataflow": pa.string(),
    "utilization": pa.float64(),
}
"""Per-operator fields stored in a row's ``ops`` list (times in s, energy in pJ)."""

_STR, _F64, _I64, _BOOL = pa.string(), pa.float64(), pa.int64(), pa.bool_()

BASE_COLUMNS: dict[str, pa.DataType] = {
    "seq": _I64, "key": _STR, "design_key": _STR, "chip": _STR, "base_chip": _STR,
    "design": _STR, "workload": _STR, "model": _STR, "phase": _STR, "batch": _I64,
    "prompt_len": _I64, "context_len": _I64, "technique": _STR, "dataflow": _STR,
    "engine": _STR, "version": _STR,
    "latency_s": _F64, "ttft_s": _F64, "tpot_s": _F64, "tokens_per_s": _F64, "tokens": _F64,
    "energy_j": _F64, "energy_per_token_j": _F64, "flops": _F64, "dram_bytes": _F64,
    "memory_bytes": _F64, "weights_bytes": _F64, "kv_bytes": _F64, "activation_bytes": _F64,
    "capacity_bytes": _F64, "fits": _BOOL, "chips_needed": _I64, "chips": _I64,
    "bound": _STR, **{f"time_{b}_s": _F64 for b in BOUNDS},
    "area_mm2": _F64, "static_power_w": _F64, "power_w": _F64, "peak_power_w": _F64,
    "cost_usd": _F64, "estimated_figures": _STR, "tokens_per_s_per_mm2": _F64,
    "tokens_per_s_per_w": _F64, "tokens_per_s_per_dollar": _F64,
    "compute_dtype": _STR, "peak_flops": _F64, "dram_bandwidth_bytes_per_s": _F64,
    "freq_hz": _F64, "feasible": _BOOL, "error": _STR, "notes": _STR,
}
"""Every scalar result column and its Arrow type (axis columns ``axis.<key>`` come after)."""


def _axis_type(values: Sequence[Any]) -> pa.DataType:
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    return _F64 if numeric else _STR


@dataclass
class Context:
    """Everything a worker needs to evaluate points of one spec (sent once per worker)."""

    spec: SweepSpec

    @cached_property
    def space(self) -> DesignSpace:
        """The spec's design space (base chips, axes, workload cases)."""
        return DesignSpace(self.spec)

    @cached_property
    def constraints(self) -> list[Constraint]:
        """The spec's constraints, parsed."""
        return self.spec.parsed_constraints

    @cached_property
    def axis_columns(self) -> dict[str, pa.DataType]:
        """``axis.<key>`` → Arrow type (float64 for numeric axes, JSON text otherwise)."""
        values: dict[str, list[Any]] = defaultdict(list)
        for entry in self.spec.chips:
            for key, axis in entry.axes.items():
                values[key].extend(axis if isinstance(axis, list) else [axis.low, axis.high])
        return {f"axis.{k}": _axis_type(v) for k, v in values.items()}

    @cached_property
    def schema(self) -> pa.Schema:
        """The Arrow schema of a result shard."""
        ops = pa.list_(pa.struct([pa.field(k, t) for k, t in OP_FIELDS.items()]))
        fields = [pa.field(k, t) for k, t in {**BASE_COLUMNS, **self.axis_columns}.items()]
        return pa.schema([*fields, pa.field("ops", ops)])

    def __getstate__(self) -> dict[str, Any]:
        return {"spec": self.spec}  # cached views are rebuilt in each worker


class _Columns:
    """Column-wise accumulator of result rows (and their flattened per-op lists)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.cols: dict[str, list[Any]] = {k: [] for k in (*BASE_COLUMNS, *ctx.axis_columns)}
        self.ops: dict[str, list[Any]] = {k: [] for k in OP_FIELDS}
        self.offsets: list[int] = [0]

    def add(self, row: dict[str, Any], ops: dict[str, list[Any]] | None) -> None:
        for key, column in self.cols.items():
            column.append(row.get(key))
        if ops is not None and self.ctx.spec.record_ops:
            for key, column in self.ops.items():
                column.extend(ops[key])
        self.offsets.append(len(self.ops["name"]))

    def table(self) -> pa.Table:
        schema = self.ctx.schema
        arrays = [pa.array(self.cols[f.name], type=f.type) for f in schema if f.name != "ops"]
        struct = pa.StructArray.from_arrays(
            [pa.array(self.ops[k], type=t) for k, t in OP_FIELDS.items()], names=list(OP_FIELDS)
        )
        arrays.append(pa.ListArray.from_arrays(pa.array(self.offsets, pa.int32()), struct))
        return pa.Table.from_arrays(arrays, schema=schema)


# --- the vectorized roofline ------------------------------------------------------------------


@dataclass(frozen=True)
class RooflineBatch:
    """Per-op roofline costs of one operator list on N chips: arrays of shape (N, M), seconds,
    bytes, pJ and cycles; ``bound`` holds indices into :data:`BOUNDS`; ``error`` is per chip."""

    dram_bytes: np.ndarray
    time_s: np.ndarray
    compute_s: np.ndarray
    memory_s: np.ndarray
    bound: np.ndarray
    energy_pj: np.ndarray
    cycles: np.ndarray
    error: list[str | None]


def roofline_batch(ops: Sequence[OpBase], chips: Sequence[Chip]) -> RooflineBatch:
    """Roofline cost of every op in ``ops`` on every chip in ``chips``, equal to
    :func:`infersim.simulator.engines.roofline.cost` per (op, chip) to the last bit.

    A chip that cannot run an op (dtype it lacks, collective without a chip link) gets NaN costs
    and its error message; the others are unaffected.
    """
    n, m = len(chips), len(ops)
    array_flops = np.array([op.array_flops for op in ops], dtype=np.float64)
    vector_flops = np.array([op.vector_flops for op in ops], dtype=np.float64)
    dram = np.tile(np.array([op.compulsory_bytes for op in ops], dtype=np.float64), (n, 1))
    for j, op in enumerate(ops):  # fused attention's K/V re-reads depend on the chip's SRAMs
        if isinstance(op, Attention):
            dram[:, j] = [roofline.flash_attention_bytes(op, chip) for chip in chips]
    is_link = np.array([isinstance(op, Collective) for op in ops], dtype=bool)
    link = np.zeros((n, m))
    for j, op in enumerate(ops):  # the best collective algorithm depends on the chip's link
        if isinstance(op, Collective):
            link[:, j] = [roofline.collective_s(op, chip) if chip.chip_link else math.nan
                          for chip in chips]
    host_bytes = np.array([op.transfer_bytes if isinstance(op, HostTransfer) else 0.0
                           for op in ops])
    is_host = np.array([isinstance(op, HostTransfer) for op in ops], dtype=bool)
    classes: list[str] = []
    cls_of = np.full(m, -1)
    for j, op in enumerate(ops):
        if op.array_flops:
            try:
                cls = dtypes.mac_class(op.compute_dtype)
            except InfersimError as exc:
                return _all_failed(n, m, str(exc))
            if cls not in classes:
                classes.append(cls)
            cls_of[j] = classes.index(cls)

    rates = _ChipRates(chips, classes, bool(is_link.any()), bool(is_host.any()))
    peak, mac_e, error = rates.peak, rates.mac_e, rates.error
    vec, bw = rates.vec, rates.bw
    overhead, freq, vpj, dpj = rates.overhead, rates.freq, rates.vpj, rates.dpj
    has_array = cls_of >= 0
    col = np.where(has_array, cls_of, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        compute = np.where(has_array, array_flops / peak[:, col], 0.0)
        mac_pj = np.where(has_array, array_flops / 2 * mac_e[:, col], 0.0)
        vector = vector_flops / vec[:, None]
        for j, op in enumerate(ops):  # attention's exponentials may run on the SFUs
            if isinstance(op, Attention):
                vector[:, j] = [roofline.attention_vector_s(op, chip) for chip in chips]
        memory = dram / bw[:, None]
        host = np.where(is_host, host_bytes / rates.host_bw[:, None] + rates.host_lat[:, None],
                        0.0)
    terms = np.stack([compute, vector, memory, link, host], axis=-1)
    which = np.argmax(terms, axis=-1)
    top = np.take_along_axis(terms, which[..., None], axis=-1)[..., 0]
    time_s = top + overhead[:, None]
    bound = np.array([BOUNDS.index(t) for t in _TERMS])[which]
    bound = np.where(top == 0.0, BOUNDS.index("overhead"), bound)
    energy = mac_pj + vector_flops * vpj[:, None] + dram * dpj[:, None]
    return RooflineBatch(
        dram_bytes=dram,
        time_s=time_s,
        compute_s=np.maximum(compute, vector),
        memory_s=memory,
        bound=bound,
        energy_pj=energy,
        cycles=time_s * freq[:, None],
        error=error,
    )


class _ChipRates:
    """Per-chip rates of the roofline terms (the chip-dependent half of roofline.cost)."""

    def __init__(self, chips: Sequence[Chip], classes: list[str], needs_link: bool,
                 needs_host: bool) -> None:
        n = len(chips)
        self.error: list[str | None] = [None] * n
        self.peak = np.ones((n, max(len(classes), 1)))
        self.mac_e = np.zeros_like(self.peak)
        self.vec, self.bw = np.zeros(n), np.zeros(n)
        self.overhead, self.freq, self.vpj, self.dpj = (np.zeros(n) for _ in range(4))
        self.host_bw, self.host_lat = np.zeros(n), np.zeros(n)
        for i, chip in enumerate(chips):
            cal = chip.calibration
            for c, cls in enumerate(classes):
                try:
                    self.peak[i, c] = chip.peak_flops(cls) * cal.compute(cls)
                except InfersimError as exc:
                    self.error[i] = str(exc)
                    self.peak[i, c] = math.nan
                self.mac_e[i, c] = chip.energy.mac(cls)
            self.vec[i] = chip.vector_flops * cal.vector_efficiency
            self.bw[i] = chip.dram.bandwidth_bytes_per_s * cal.dram_bandwidth_efficiency
            if chip.chip_link is None and needs_link:
                self.error[i] = f"chip {chip.name!r} has no chip_link; a collective needs one"
            if chip.host_link is not None:
                self.host_bw[i] = chip.host_link.bandwidth_bytes_per_s
                self.host_lat[i] = chip.host_link.latency_s
            elif needs_host:
                self.error[i] = f"chip {chip.name!r} has no host_link; offload needs one"
                self.host_bw[i] = math.nan
            self.overhead[i] = chip.kernel_overhead_s
            self.freq[i] = chip.freq_hz
            self.vpj[i] = chip.energy.vector_pj_per_flop
            self.dpj[i] = chip.energy.dram_pj_per_byte


def _all_failed(n: int, m: int, message: str) -> RooflineBatch:
    nan = np.full((n, m), math.nan)
    zero = np.zeros((n, m), dtype=int)
    return RooflineBatch(nan, nan, nan, nan, zero, nan, nan, [message] * n)


def _seq_sum(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Σ_j values[:, j] · counts[j], added left to right like Python's ``sum``."""
    acc = np.zeros(values.shape[0])
    for j in range(values.shape[1]):
        acc = acc + values[:, j] * counts[j]
    return acc


# --- rows ---------------------------------------------------------------------------------


class Evaluator:
    """Evaluates points of one spec; caches chips, cost estimates and operator graphs."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._chips: dict[str, Chip | str] = {}
        self._costs: dict[str, ChipFigures] = {}
        self._graphs: dict[int, tuple[list[OpBase], MemoryReport]] = {}

    def chip(self, point: Point) -> Chip | str:
        """The design's chip, or the message of why its overrides are invalid."""
        design = point.design
        if design.key not in self._chips:
            base = self.ctx.space.bases[design.entry]
            try:
                chip = base.with_(**design.changes()) if design.overrides else base
                self._chips[design.key] = chip
                self._costs[design.key] = chip_figures(chip,
                                                       base if design.overrides else None)
            except InfersimError as exc:
                self._chips[design.key] = str(exc)
        return self._chips[design.key]

    def evaluate(self, points: Sequence[Point]) -> pa.Table:
        """Result rows of ``points`` (in order of groups of like points), as an Arrow table."""
        self._chips.clear()  # designs rarely span chunks: keep worker memory flat
        self._costs.clear()
        out = _Columns(self.ctx)
        groups: dict[tuple[Any, ...], list[Point]] = defaultdict(list)
        for p in points:
            groups[(p.case, p.technique, p.dataflow, p.engine)].append(p)
        for (case, technique, dataflow, engine), pts in groups.items():
            if (
                engine == "roofline"
                and inference.ENGINES.get("roofline") is roofline.cost
                and technique == "baseline"
                and dataflow is None
                and self.ctx.space.cases[case].model is not None
                and self._vectorized(pts, out)
            ):
                continue
            for p in pts:
                self._simulate_one(p, out)
        return out.table()

    # --- general path ----------------------------------------------------------------------

    def _simulate_one(self, p: Point, out: _Columns) -> None:
        chip = self.chip(p)
        case = self.ctx.space.cases[p.case]
        if isinstance(chip, str):
            out.add(self._error_row(p, chip), None)
            return
        try:
            cost = _simulate(chip, case, p)
        except InfersimError as exc:
            out.add(self._error_row(p, str(exc)), None)
            return
        out.add(self._row(p, chip, case, cost), _ops_of(cost))

    def _row(self, p: Point, chip: Chip, case: WorkloadCase, cost: PhaseCost) -> dict[str, Any]:
        by_bound = cost.time_by_bound()
        mem = cost.memory
        values = {
            "latency_s": cost.latency_s, "ttft_s": cost.ttft_s, "tpot_s": cost.tpot_s,
            "tokens_per_s": cost.tokens_per_s, "tokens": float(cost.tokens),
            "energy_j": cost.energy_j, "flops": cost.flops, "dram_bytes": cost.dram_bytes,
            "memory_bytes": mem.total_bytes, "weights_bytes": mem.weights_bytes,
            "kv_bytes": mem.kv_bytes, "activation_bytes": mem.activation_bytes,
            "capacity_bytes": mem.capacity_bytes, "fits": mem.fits,
            "chips_needed": mem.chips_needed, "chips": cost.chips, "bound": cost.bound,
            "notes": "; ".join(cost.notes) or None,
            **{f"time_{b}_s": by_bound.get(b, 0.0) for b in BOUNDS},
        }
        return self._finish(p, chip, case, values)

    # --- vectorized path -------------------------------------------------------------------

    def _graph(self, index: int) -> tuple[list[OpBase], MemoryReport]:
        if index not in self._graphs:
            case = self.ctx.space.cases[index]
            assert case.model is not None and case.scenario is not None
            ops = graph.build(case.model, case.scenario)
            fp = graph.footprint(case.model, case.scenario, ops)
            self._graphs[index] = (ops, MemoryReport(fp.weights_bytes, fp.kv_bytes,
                                                     fp.activation_bytes, 0.0))
        return self._graphs[index]

    def _vectorized(self, pts: list[Point], out: _Columns) -> bool:
        """Cost ``pts`` (one workload, many designs) with :func:`roofline_batch`; False when
        the batch disagrees with ``simulate`` on its first design (nothing is added then)."""
        case = self.ctx.space.cases[pts[0].case]
        chips = [self.chip(p) for p in pts]
        good = [(p, c) for p, c in zip(pts, chips, strict=True) if isinstance(c, Chip)]
        if not good:
            return False
        ops, fp = self._graph(pts[0].case)
        batch = roofline_batch(ops, [c for _, c in good])
        counts = np.array([op.count for op in ops], dtype=np.float64)
        latency = _seq_sum(batch.time_s, counts)
        energy_j = _seq_sum(batch.energy_pj, counts) * 1e-12
        dram = _seq_sum(batch.dram_bytes, counts)
        flops = sum(op.flops * op.count for op in ops)
        by_bound = {
            b: _seq_sum(np.where(batch.bound == k, batch.time_s, 0.0), counts)
            for k, b in enumerate(BOUNDS)
        }
        ok = [i for i, e in enumerate(batch.error) if e is None]
        if ok:  # the guard: this batch must be what simulate() says on one design
            i = ok[0]
            p, chip = good[i]
            ref = _simulate(chip, case, p)
            total = fp.weights_bytes + fp.kv_bytes + fp.activation_bytes
            if (ref.latency_s != latency[i] or ref.energy_j != energy_j[i] or ref.chips != 1
                    or ref.memory.total_bytes != total or ref.dram_bytes != dram[i]):
                return False
        names = [op.name for op in ops]
        kinds = [op.kind for op in ops]
        op_flops = [op.flops for op in ops]
        int_counts = [op.count for op in ops]
        no_dataflow, no_utilization = [""] * len(ops), [0.0] * len(ops)
        for p, maybe in zip(pts, chips, strict=True):
            if isinstance(maybe, str):
                out.add(self._error_row(p, maybe), None)
        for i, (p, chip) in enumerate(good):
            if batch.error[i] is not None:
                self._simulate_one(p, out)  # the exact message simulate() gives
                continue
            mem = MemoryReport(fp.weights_bytes, fp.kv_bytes, fp.activation_bytes,
                               float(chip.dram.capacity_bytes))
            lat = float(latency[i])
            tokens = float(case.tokens)
            seen = dict.fromkeys(BOUNDS[k] for k in batch.bound[i].tolist())
            main_bound = max(seen, key=lambda b: by_bound[b][i]) if seen else "overhead"
            values = {
                "latency_s": lat,
                "ttft_s": lat if case.scenario and case.scenario.phase == "prefill" else None,
                "tpot_s": lat if case.scenario and case.scenario.phase == "decode" else None,
                "tokens_per_s": tokens / lat if lat else 0.0, "tokens": tokens,
                "energy_j": float(energy_j[i]), "flops": flops, "dram_bytes": float(dram[i]),
                "memory_bytes": mem.total_bytes, "weights_bytes": mem.weights_bytes,
                "kv_bytes": mem.kv_bytes, "activation_bytes": mem.activation_bytes,
                "capacity_bytes": mem.capacity_bytes, "fits": mem.fits,
                "chips_needed": mem.chips_needed, "chips": 1,
                "bound": main_bound,
                **{f"time_{b}_s": float(v[i]) for b, v in by_bound.items()},
            }
            time_s = batch.time_s[i].tolist()
            op_dram = batch.dram_bytes[i].tolist()
            ops_cols = {
                "name": names, "kind": kinds, "count": int_counts, "flops": op_flops,
                "dram_bytes": op_dram, "time_s": time_s,
                "compute_s": batch.compute_s[i].tolist(), "memory_s": batch.memory_s[i].tolist(),
                "bound": [BOUNDS[k] for k in batch.bound[i]],
                "energy_pj": batch.energy_pj[i].tolist(),
                "intensity": [f / d if d else None for f, d in zip(op_flops, op_dram,
                                                                    strict=True)],
                "achieved_flops": [f / t if t else 0.0 for f, t in zip(op_flops, time_s,
                                                                        strict=True)],
                "dataflow": no_dataflow, "utilization": no_utilization,
            }
            out.add(self._finish(p, chip, case, values), ops_cols)
        return True

    # --- shared ----------------------------------------------------------------------------

    def _identity(self, p: Point) -> dict[str, Any]:
        space = self.ctx.space
        case = space.cases[p.case]
        sc = case.scenario
        row: dict[str, Any] = {
            "seq": p.seq, "key": p.key, "design_key": p.design.key,
            "chip": space.names[p.design.entry], "base_chip": space.bases[p.design.entry].name,
            "design": p.design.label(), "workload": case.label, "model": case.model_name,
            "phase": sc.phase if sc else None, "batch": sc.batch if sc else None,
            "prompt_len": sc.prompt_len if sc and sc.phase == "prefill" else None,
            "context_len": sc.context_len if sc and sc.phase == "decode" else None,
            "technique": p.technique, "dataflow": p.dataflow, "engine": p.engine,
            "version": __version__,
        }
        for key, value in p.design.overrides:
            column = f"axis.{key}"
            numeric = self.ctx.axis_columns[column] == _F64
            row[column] = float(value) if numeric else json.dumps(value, sort_keys=True)
        return row

    def _error_row(self, p: Point, message: str) -> dict[str, Any]:
        return {**self._identity(p), "error": message, "feasible": False}

    def _finish(self, p: Point, chip: Chip, case: WorkloadCase,
                values: dict[str, Any]) -> dict[str, Any]:
        design = self._costs[p.design.key]
        chips = int(values["chips"])
        lat, tps, energy = values["latency_s"], values["tokens_per_s"], values["energy_j"]
        static = design.static_power_w * chips
        power = (energy / lat if lat else 0.0) + static
        tokens = values["tokens"]
        dtype = _compute_dtype(case)
        row = {
            **self._identity(p),
            **values,
            "energy_per_token_j": (energy + static * lat) / tokens if tokens else None,
            "area_mm2": design.area_mm2,
            "static_power_w": design.static_power_w,
            "power_w": power,
            "peak_power_w": design.peak_power_w,
            "cost_usd": design.cost_usd,
            "estimated_figures": ",".join(design.estimated) or None,
            "tokens_per_s_per_mm2": tps / (design.area_mm2 * chips),
            "tokens_per_s_per_w": tps / power if power else None,
            "tokens_per_s_per_dollar": tps / (design.cost_usd * chips),
            "compute_dtype": dtype,
            "peak_flops": chip.peak_flops(dtype) if dtype and chip.supports(dtype) else None,
            "dram_bandwidth_bytes_per_s": chip.dram.bandwidth_bytes_per_s,
            "freq_hz": chip.freq_hz,
            "error": None,
        }
        row["feasible"] = all(c.holds(row.get(c.metric)) for c in self.ctx.constraints)
        return row


def _compute_dtype(case: WorkloadCase) -> str | None:
    if case.scenario is not None:
        return case.scenario.precision.act
    dtypes_used = [op.compute_dtype for op in case.ops or () if op.array_flops]
    return max(set(dtypes_used), key=dtypes_used.count) if dtypes_used else None


def _simulate(chip: Chip, case: WorkloadCase, p: Point) -> PhaseCost:
    kwargs: dict[str, Any] = {}
    if p.dataflow is not None:
        kwargs["dataflow"] = p.dataflow
        if not chip.array.implements(p.dataflow):  # a dataflow of the sweep is a design
            chip = chip.with_(**{"array.supported_dataflows": [p.dataflow]})
    if case.ops is not None:
        return inference.simulate_ops(chip, list(case.ops), name=case.label, engine=p.engine,
                                      **kwargs)
    assert case.model is not None and case.scenario is not None
    if p.technique != "baseline":
        kwargs["techniques"] = p.technique
    # a design point that does not fit is recorded as such; its ways out are another design
    return inference.simulate(chip, case.model, case.scenario, engine=p.engine, ways_out=False,
                              **kwargs)


def _ops_of(cost: PhaseCost) -> dict[str, list[Any]]:
    ops = cost.ops
    return {
        "name": [c.name for c in ops], "kind": [c.kind for c in ops],
        "count": [c.count for c in ops], "flops": [c.flops for c in ops],
        "dram_bytes": [c.dram_bytes for c in ops], "time_s": [c.time_s for c in ops],
        "compute_s": [c.compute_s for c in ops], "memory_s": [c.memory_s for c in ops],
        "bound": [c.bound for c in ops], "energy_pj": [c.energy_pj for c in ops],
        "intensity": [c.intensity if c.dram_bytes else None for c in ops],
        "achieved_flops": [c.achieved_flops for c in ops],
        "dataflow": [getattr(c, "dataflow", "") for c in ops],
        "utilization": [getattr(c, "utilization", 0.0) for c in ops],
    }


_EVALUATORS: dict[str, Evaluator] = {}
"""Per-process evaluator per spec fingerprint (workers keep chips and graphs across chunks)."""


def evaluate_chunk(ctx: Context, points: Sequence[Point]) -> pa.Table:
    """Result rows of ``points`` as an Arrow table (the unit of work an executor runs)."""
    fp = ctx.spec.fingerprint()
    if fp not in _EVALUATORS:
        _EVALUATORS.clear()
        _EVALUATORS[fp] = Evaluator(ctx)
    return _EVALUATORS[fp].evaluate(points)
