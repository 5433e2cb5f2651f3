"""Per-sweep tables a report needs besides the point rows, computed at sweep time.

- ``dataflow``: each base chip × model workload mapped with every dataflow (WS, OS, IS, RS, and
  the Eyeriss paper's no-local-reuse baseline NLR) by
  :func:`infersim.dataflow.mapper.map_op`, on the chip's array as if it implemented each (a
  chip's ``array.supported_dataflows`` says what its hardware runs; this table asks what another
  dataflow would buy): cycles, and energy and traffic by memory level, summed
  over the workload's systolic-array operators. Present when the dataflow package is.
- ``serving``: per-request latencies of the spec's serving runs (one per base chip × model),
  and one ``error`` row per run that could not start (a model that does not fit the chip).
- ``timeline``: the event engine's spans of one step per base chip, when the spec runs it.
- ``chips``: each chip entry's specification (cores, array, clock, peaks, memories), its
  published die area, TDP and price with their sources, the cost model's estimates beside,
  and its calibration: the report's "chips and assumptions" table.

A new table is one function here and one entry in :data:`EXTRAS`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, get_args

import pyarrow as pa

from infersim.arch_models.chip import DataflowName
from infersim.errors import InfersimError
from infersim.explorer.evaluate import Context
from infersim.explorer.executors import Executor
from infersim.workloads import graph

DATAFLOW_NAMES: tuple[str, ...] = get_args(DataflowName)
"""The dataflows the ``dataflow`` table maps with (every template)."""


def _dataflow_rows(
    ctx: Context, item: tuple[int, int]
) -> tuple[tuple[int, int], list[dict[str, Any]]]:
    """``item`` = (chip entry, workload index) and its rows, one per dataflow."""
    from infersim.dataflow.energy import energy
    from infersim.dataflow.mapper import map_op

    entry, index = item
    space = ctx.space
    chip, case = space.bases[entry], space.cases[index]
    if chip.array.supported_dataflows is not None:  # the array as if built for each dataflow
        chip = chip.with_(**{"array.supported_dataflows": None})
    assert case.model is not None and case.scenario is not None
    ops = [op for op in graph.build(case.model, case.scenario) if op.kind in ("gemm", "conv2d")]
    rows = []
    for dataflow in DATAFLOW_NAMES:
        row: dict[str, Any] = {
            "chip": space.names[entry], "workload": case.label, "dataflow": dataflow,
            "ops_mapped": 0, "ops_unmapped": 0, "total_cycles": 0.0, "compute_cycles": 0.0,
            "time_s": 0.0,
        }
        for op in ops:
            try:
                mapping = map_op(op, chip, dataflow=dataflow, objective="latency")
                breakdown = energy(mapping, chip)
            except InfersimError:
                row["ops_unmapped"] += 1
                continue
            row["ops_mapped"] += 1
            row["total_cycles"] += mapping.total_cycles * op.count
            row["compute_cycles"] += mapping.compute_cycles * op.count
            row["time_s"] += mapping.time_s * op.count
            for level, pj in breakdown.by_level.items():
                key = f"energy_{level}_pj"
                row[key] = row.get(key, 0.0) + pj * op.count
            for level in mapping.traffic:
                key = f"traffic_{level}_bytes"
                row[key] = row.get(key, 0.0) + mapping.level_bytes(level) * op.count
        rows.append(row)
    return item, rows


def dataflow_table(ctx: Context, executor: Executor) -> pa.Table | None:
    """Cycles (core clock), energy (pJ) and traffic (bytes) by level per base chip, model
    workload and dataflow, mapped in parallel on ``executor``; None when
    :mod:`infersim.dataflow.mapper` is not available."""
    try:
        import infersim.dataflow.energy
        import infersim.dataflow.mapper  # noqa: F401
    except ImportError:
        return None
    space = ctx.space
    items = [(entry, index) for entry in range(len(space.bases))
             for index, case in enumerate(space.cases) if case.model is not None]
    order = {item: n for n, item in enumerate(items)}
    parts: dict[int, list[dict[str, Any]]] = {}
    for item, rows in executor.map(ctx, _dataflow_rows, items):
        parts[order[tuple(item)]] = rows
    rows = [r for n in sorted(parts) for r in parts[n]]
    if not rows:
        return None
    columns = list(dict.fromkeys(k for r in rows for k in r))
    return pa.table({c: [r.get(c) for r in rows] for c in columns})


def _serving_rows(
    ctx: Context, item: tuple[int, int]
) -> tuple[tuple[int, int], list[dict[str, Any]]]:
    """``item`` = (chip entry, workload index): one row per request and latency metric."""
    from infersim.simulator.serving import ServingConfig, simulate_serving

    runs = ctx.spec.serving
    assert runs is not None
    entry, index = item
    space = ctx.space
    model = space.cases[index].model
    assert model is not None
    config = ServingConfig.model_validate(runs.config)
    label = f"{space.names[entry]} · {model.name}"
    base = {"label": label, "chip": space.names[entry], "model": model.name}
    try:
        result = simulate_serving(space.bases[entry], model, config, techniques=runs.technique,
                                  engine=runs.engine)
    except InfersimError as exc:  # e.g. no room for the KV cache on this chip: no curve
        return item, [{**base, "metric": "error", "value_s": None, "error": str(exc)}]
    rows = []
    for metric in SERVING_METRICS:
        for value in result.requests[metric].dropna().tolist():
            rows.append({**base, "metric": metric, "value_s": float(value), "error": None})
    return item, rows


SERVING_METRICS = ("ttft_s", "tpot_s", "e2e_s")
"""Per-request latencies the serving table keeps (seconds)."""


def serving_table(ctx: Context, executor: Executor) -> pa.Table | None:
    """Per-request TTFT, TPOT and end-to-end latency (s) of the spec's serving runs, one run
    per base chip × model (a run that cannot start: one row of metric ``error`` with its
    message); None when the spec asks for none."""
    if ctx.spec.serving is None:
        return None
    space = ctx.space
    firsts: dict[str, int] = {}
    for index, case in enumerate(space.cases):
        if case.model is not None:
            firsts.setdefault(case.model.name, index)
    items = [(entry, index) for entry in range(len(space.bases)) for index in firsts.values()]
    order = {item: n for n, item in enumerate(items)}
    parts = dict(sorted((order[tuple(i)], rows) for i, rows in
                        executor.map(ctx, _serving_rows, items)))
    rows = [r for n in sorted(parts) for r in parts[n]]
    if not rows:
        return None
    return pa.table({c: [r[c] for r in rows] for c in rows[0]})


MAX_SPANS = 3000
"""Timeline spans kept per base chip (one repetition of each operator of the step)."""


def _timeline_rows(
    ctx: Context, item: tuple[int, int]
) -> tuple[tuple[int, int], list[dict[str, Any]]]:
    """``item`` = (chip entry, workload index): the event engine's spans of one step."""
    from infersim.simulator.engines import events
    from infersim.simulator.inference import step_ops

    entry, index = item
    space = ctx.space
    chip, case = space.bases[entry], space.cases[index]
    if chip.array.supported_dataflows is not None:  # the array as if built for each dataflow
        chip = chip.with_(**{"array.supported_dataflows": None})
    assert case.model is not None and case.scenario is not None
    technique = ctx.spec.techniques[0]
    dataflow = ctx.spec.dataflows[0] if ctx.spec.dataflows else "best"
    try:
        ops = step_ops(chip, case.model, case.scenario, technique)
        timeline = events.trace_ops(ops, chip, dataflow)
    except InfersimError:
        return item, []
    return item, [
        {"chip": space.names[entry], "workload": case.label, "resource": s.resource,
         "start_s": s.start_cycles / timeline.freq_hz, "end_s": s.end_cycles / timeline.freq_hz,
         "label": s.label}
        for s in timeline.spans[:MAX_SPANS]
    ]


def timeline_table(ctx: Context, executor: Executor) -> pa.Table | None:
    """Event-engine timelines (resource, start and end in s, label) of one step per base chip,
    on the first model workload with the first technique and dataflow; None unless the spec
    runs the ``events`` engine (and this build has its tracer)."""
    try:
        from infersim.simulator.engines import events
        from infersim.simulator.inference import step_ops  # noqa: F401
    except ImportError:
        return None
    if "events" not in ctx.spec.engines or not hasattr(events, "trace_ops"):
        return None
    space = ctx.space
    first = next((i for i, c in enumerate(space.cases) if c.model is not None), None)
    if first is None:
        return None
    items = [(entry, first) for entry in range(len(space.bases))]
    parts = dict(executor.map(ctx, _timeline_rows, items))
    rows = [r for item in items for r in parts.get(item, [])]
    if not rows:
        return None
    return pa.table({c: [r[c] for r in rows] for c in rows[0]})


def chips_table(ctx: Context, executor: Executor) -> pa.Table | None:
    """One row per chip entry of the spec: what the chip is (cores, array, clock, dense peak
    per dtype, SRAM, DRAM), its published die area, TDP and price (None where unpublished) with
    which are estimates and their sources, the cost model's estimates of the same figures, its
    calibration knobs (those that differ from the ideal machine) and its swept axes. JSON text
    for the mappings."""
    from infersim.explorer.cost import estimate

    del executor  # a few chips: computed here
    space = ctx.space
    rows = []
    for entry, chip in enumerate(space.bases):
        spec = chip.spec
        model = estimate(chip)
        classes = list(chip.array.macs_per_pe_per_cycle)
        rows.append({
            "chip": space.names[entry],
            "base_chip": chip.name,
            "description": chip.description,
            "source": chip.source,
            "cores": chip.cores,
            "array_rows": chip.array.rows,
            "array_cols": chip.array.cols,
            "freq_hz": chip.freq_hz,
            "peak_flops": json.dumps({c: chip.peak_flops(c) for c in classes}),
            "sram_bytes_per_core": float(chip.sram.capacity_bytes),
            "shared_sram_bytes": float(chip.shared_sram.capacity_bytes)
            if chip.shared_sram else None,
            "dram_kind": chip.dram.kind,
            "dram_capacity_bytes": float(chip.dram.capacity_bytes),
            "dram_bandwidth_bytes_per_s": chip.dram.bandwidth_bytes_per_s,
            "die_area_mm2": spec.die_area_mm2 if spec else None,
            "tdp_w": spec.tdp_w if spec else None,
            "price_usd": spec.price_usd if spec else None,
            "estimated": json.dumps(list(spec.estimated) if spec else []),
            "sources": json.dumps(dict(spec.sources) if spec else {}),
            "model_area_mm2": model.area_mm2,
            "model_peak_power_w": model.peak_power_w,
            "model_cost_usd": model.cost_usd,
            "calibration": json.dumps(chip.calibration.model_dump(mode="json",
                                                                  exclude_defaults=True)),
            "axes": json.dumps([d.key for d in space.dims[entry]]),
        })
    if not rows:
        return None
    return pa.table({c: [r[c] for r in rows] for c in rows[0]})


EXTRAS: dict[str, Callable[[Context, Executor], pa.Table | None]] = {
    "dataflow": dataflow_table,
    "serving": serving_table,
    "timeline": timeline_table,
    "chips": chips_table,
}
"""Extra table name → the function that computes it (None: nothing to store)."""
