"""The dataflow commands: ``map`` (one GEMM or convolution mapped onto a chip's array, optionally
run by the event engine) and ``scalesim`` (SCALE-Sim's per-layer figures as infersim predicts
them: the event engine's replay of its memory system under its column names, the analytic
estimate beside, its report files on request). :func:`register` adds them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from infersim.cli.common import ChipOpt, JsonOpt, console, print_json, user_errors
from infersim.errors import InfersimError
from infersim.units import fmt_bytes, fmt_energy, fmt_percent, fmt_time, significant

if TYPE_CHECKING:  # imported by the commands that use them (a fast start)
    from infersim.arch_models import Chip
    from infersim.dataflow.loopnest import Mapping
    from infersim.dataflow.scalesim_io import ScaleSimConfig, ScaleSimLayer
    from infersim.workloads.ops import Conv2d, Gemm

    pass


def _ints(text: str, names: tuple[str, ...], flag: str) -> list[int]:
    parts = [p.strip() for p in text.split(",")]
    digits = all(p.isascii() and p.isdigit() and len(p) <= 12 for p in parts)  # not "²"
    if len(parts) != len(names) or not digits or not all(int(p) > 0 for p in parts):
        raise InfersimError(
            f"{flag} {text!r}: expected {len(names)} positive integers {','.join(names)}"
        )
    return [int(p) for p in parts]


def _op(gemm: str | None, conv: str | None, dtype: str, batch: int) -> Gemm | Conv2d:
    from infersim.workloads.ops import Conv2d, Gemm

    if (gemm is None) == (conv is None):
        raise InfersimError("give exactly one of --gemm M,K,N or --conv H,W,R,S,C,K,STRIDE")
    if gemm is not None:
        m, k, n = _ints(gemm, ("M", "K", "N"), "--gemm")
        return Gemm(name="gemm", m=m, k=k, n=n, a_dtype=dtype, b_dtype=dtype, out_dtype=dtype)
    h, w, r, s, c, k, stride = _ints(conv or "", ("H", "W", "R", "S", "C", "K", "STRIDE"), "--conv")
    if r > h or s > w:
        raise InfersimError(f"--conv: the {r}x{s} filter is larger than the {h}x{w} input")
    return Conv2d(
        name="conv",
        batch=batch,
        in_channels=c,
        in_h=h,
        in_w=w,
        out_channels=k,
        kernel_h=r,
        kernel_w=s,
        stride=stride,
        dtype=dtype,
        weight_dtype=dtype,
        out_dtype=dtype,
    )


def mapping_document(mapping: Mapping, chip_name: str, energy_pj: dict[str, Any]) -> dict[str, Any]:
    """The JSON ``infersim map`` prints: the mapping's fields plus its energy per level."""
    return {"chip": chip_name, **mapping.to_dict(), "energy_pj": energy_pj}


def op_document(op: Gemm | Conv2d, chip: Chip, dataflow: str) -> dict[str, Any]:
    """What ``infersim simulate`` costs the op at (the analytic engine): on a chip with a
    shared SRAM the cores' mapping above is against the L2, and this adds the DRAM level,
    the dequantization and the launch overhead."""
    from infersim.simulator.engines import analytic

    cost = analytic.cost(op, chip, dataflow)
    return {"time_s": cost.time_s, "bound": cost.bound, "dram_bytes": cost.dram_bytes,
            "launch_overhead_s": chip.kernel_overhead_s}


ENGINES = ("analytic", "events")
"""Engines ``infersim map`` runs a mapping with."""

MAX_TOP_K = 1000
"""Most mappings ``infersim map --top-k`` lists (a million took a minute and 300 MB of JSON)."""


def events_document(op: Gemm | Conv2d, chip: Chip, mapping: Mapping) -> dict[str, Any]:
    """The event engine's run of ``mapping`` (cores fed straight from DRAM): total cycles,
    time, stalls (cycles, means over the cores used), waves and what was simulated."""
    from infersim.simulator.engines.events import simulate_mapping

    cycles, timeline = simulate_mapping(op, chip, mapping)
    st = timeline.stats
    return {
        "total_cycles": cycles,
        "time_s": cycles / chip.freq_hz,
        "first_load_cycles": st.first_load_cycles,
        "compute_stall_cycles": st.compute_stall_cycles,
        "dma_stall_cycles": st.dma_stall_cycles,
        "waves": st.waves,
        "cores_used": st.cores_used,
        "core_groups": st.core_groups,
        "tiles": st.tiles,
        "blocks": st.blocks,
        "events": st.events,
    }


def _events_rows(ev: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        ("events: total cycles", f"{ev['total_cycles']:,.0f} ({fmt_time(ev['time_s'])})"),
        (
            "events: stalls (compute / DMA)",
            f"{ev['compute_stall_cycles']:,.0f} / {ev['dma_stall_cycles']:,.0f} cycles",
        ),
        (
            "events: waves, core groups",
            f"{ev['waves']} waves on {ev['cores_used']} cores, {ev['core_groups']} groups",
        ),
        (
            "events: simulated",
            f"{ev['blocks']:,} blocks of {ev['tiles']:,} tiles, {ev['events']:,} events",
        ),
    ]


def map_command(
    chip: ChipOpt,
    gemm: Annotated[str | None, typer.Option(help="GEMM M,K,N (C[M,N] = A[M,K]·B[K,N])")] = None,
    conv: Annotated[str | None, typer.Option(help="Convolution H,W,R,S,C,K,STRIDE")] = None,
    batch: Annotated[int, typer.Option(help="Images (convolution batch)")] = 1,
    dtype: Annotated[str, typer.Option(help="Operand dtype")] = "bf16",
    dataflow: Annotated[str, typer.Option(help="ws, os, is, rs, nlr, tc or best")] = "best",
    objective: Annotated[str, typer.Option(help="latency, energy or edp")] = "latency",
    top_k: Annotated[
        int,
        typer.Option(min=1, max=MAX_TOP_K, help="Mappings listed, the best first (at most "
                     f"{MAX_TOP_K:,}: each is analyzed and printed in full)"),
    ] = 1,
    engine: Annotated[
        str,
        typer.Option(help="analytic, or events: also run the best mapping tile by tile (at "
                     "most 4,194,304 SRAM tiles, about 1.5 s and 0.8 GB; more is refused)"),
    ] = "analytic",
    as_json: JsonOpt = False,
) -> None:
    """Map one GEMM or convolution onto a chip's array: loop nest, traffic, cycles, energy."""
    from infersim.arch_models import load_chip
    from infersim.dataflow.energy import energy
    from infersim.dataflow.loopnest import LEVELS
    from infersim.dataflow.mapper import map_op
    from infersim.simulator.engines.analytic import level_views, op_backing

    with user_errors():
        if engine not in ENGINES:
            raise InfersimError(f"--engine {engine!r}: allowed: {', '.join(ENGINES)}")
        the_chip = load_chip(chip)
        if batch < 1:
            raise InfersimError(f"--batch {batch}: must be >= 1")
        op = _op(gemm, conv, dtype, batch)
        # a chip with a shared SRAM (a GPU's L2) maps its cores against it with the DRAM level
        # behind it, as simulate does
        view, backing = the_chip, None
        if the_chip.shared_sram is not None:
            view, backing = level_views(the_chip)[0], op_backing(op, the_chip)  # type: ignore[arg-type]
        found = map_op(op, view, dataflow, objective, top_k,  # type: ignore[call-overload]
                       backing=backing)
        mappings = found if isinstance(found, list) else [found]
        docs = [mapping_document(m, the_chip.name, energy(m, view).to_dict())
                for m in mappings]
        docs[0]["op"] = op_document(op, the_chip, dataflow) if objective == "latency" else None
        if engine == "events":  # refuses a mapping of too many tiles (exit 2)
            docs[0]["events"] = events_document(op, the_chip, mappings[0])
    if as_json:
        print_json(docs[0] if top_k == 1 else docs)
        return
    best, doc = mappings[0], docs[0]
    table = Table(title=f"{op.kind} on {the_chip.name}: {best.dataflow}, objective {objective}")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for label, value in (
        (
            "loop nest (outer → inner)",
            "; ".join(
                f"{lvl}: " + " ".join(f"{d}{n}" for d, n in loops)
                for lvl, loops in best.loop_nest().items()
            ),
        ),
        ("compute cycles", f"{best.compute_cycles:,}"),
        ("total cycles", f"{best.total_cycles:,.0f} ({best.bound}-bound)"),
        ("time", fmt_time(best.time_s)),
        *((("op time (as simulate costs it)",
            f"{fmt_time(doc['op']['time_s'])} ({doc['op']['bound']}-bound, "
            f"{fmt_bytes(doc['op']['dram_bytes'])} DRAM)"),) if doc.get("op") else ()),
        ("folds", f"{best.folds:,}"),
        ("mapping efficiency", fmt_percent(best.mapping_efficiency, 1)),
        ("compute utilization", fmt_percent(best.compute_utilization, 1)),
        (
            "SRAM tile (double-buffered)",
            f"{fmt_bytes(best.sram_bytes)} of {fmt_bytes(best.sram_capacity_bytes)}",
        ),
        ("DRAM traffic", fmt_bytes(best.dram_bytes)),
        ("energy", fmt_energy(doc["energy_pj"]["total_pj"] * 1e-12)),
        *(_events_rows(doc["events"]) if "events" in doc else ()),
    ):
        table.add_row(label, value)
    console.print(table)
    levels = Table(title="traffic and energy per level")
    for col in ("level", "input", "weight", "output", "energy (µJ)"):
        levels.add_column(col, justify="left" if col == "level" else "right")
    by_level = doc["energy_pj"]["by_level"]
    for level in LEVELS:
        cells = [
            fmt_bytes(best.traffic[level][o].total_bytes) for o in ("input", "weight", "output")
        ]
        levels.add_row(level, *cells, significant(by_level.get(level, 0.0) / 1e6))
    levels.add_row("mac", "", "", "", significant(by_level.get("mac", 0.0) / 1e6))
    console.print(levels)
    for rank, m in enumerate(mappings[1:], start=2):
        console.print(
            f"#{rank}: {m.dataflow}, {m.total_cycles:,.0f} cycles, {fmt_bytes(m.dram_bytes)} DRAM",
            markup=False,
            highlight=False,
        )


ANALYTIC_COLUMNS = ("infersim analytic Total Cycles", "infersim analytic Stall Cycles")
"""Columns of ``infersim scalesim`` holding the analytic estimate (the dataflow engine's tiling
and DRAM model), beside SCALE-Sim's own columns, which hold the replay."""

PREDICTION_COLUMN = "infersim prediction"
"""Which engine filled SCALE-Sim's columns of a row: ``replay``, or ``analytic`` where the
replay refuses the layer (too large, or a config feature it does not model)."""

EVENT_COLUMNS = ("Event Total Cycles", "Event Stall Cycles")
"""The replay's total and stall cycles under their former names (USER configs; None where the
replay refuses the layer), kept for scripts that read them: the same as ``Total Cycles`` and
``Stall Cycles`` of a replayed row."""

TABLE_COLUMNS = (
    "Layer",
    "Total Cycles",
    "Stall Cycles",
    "Overall Util %",
    "Mapping Efficiency %",
    "Compute Util %",
    *ANALYTIC_COLUMNS,
)


def scalesim_rows(
    cfg: ScaleSimConfig, layers: list[ScaleSimLayer]
) -> tuple[list[dict[str, Any]], list[dict[str, Any] | None], list[str]]:
    """Per layer: the ``infersim scalesim`` row (SCALE-Sim's COMPUTE_REPORT columns from the
    replay, the analytic estimate in :data:`ANALYTIC_COLUMNS`), the replay's cells of all three
    SCALE-Sim reports (None where it refused the layer), and why it refused."""
    from infersim.dataflow.scalesim_io import (
        COMPUTE_REPORT_COLUMNS,
        REPORT_COLUMNS,
        scalesim_report,
    )
    from infersim.simulator.engines.events.scalesim import simulate_layer
    from infersim.simulator.engines.events.scalesim_report import report_figures

    analytic = scalesim_report(cfg, [layer.op for layer in layers])
    rows: list[dict[str, Any]] = []
    figures: list[dict[str, Any] | None] = []
    refusals: list[str] = []
    for i, (layer, est) in enumerate(zip(layers, analytic, strict=True)):
        row: dict[str, Any] = {"LayerID": i, "Layer": layer.op.name}
        try:
            fig: dict[str, Any] | None = report_figures(
                simulate_layer(cfg, layer.op, layer.ifmap_extent)
            )
        except InfersimError as exc:
            fig = None
            refusals.append(f"layer {i} ({layer.op.name}): {exc}")
        if fig is not None:
            row.update({c: fig[c] for c in COMPUTE_REPORT_COLUMNS})
        else:
            row.update({c: est[c] for c in REPORT_COLUMNS if c != "LayerID"})
        row[ANALYTIC_COLUMNS[0]] = est["Total Cycles"]
        row[ANALYTIC_COLUMNS[1]] = est["Stall Cycles"]
        row[PREDICTION_COLUMN] = "replay" if fig is not None else "analytic"
        if cfg.interface_bandwidth == "USER":
            row[EVENT_COLUMNS[0]] = fig["Total Cycles"] if fig else None
            row[EVENT_COLUMNS[1]] = fig["Stall Cycles"] if fig else None
        rows.append(row)
        figures.append(fig)
    return rows, figures, refusals


def scalesim_command(
    config: Annotated[Path, typer.Option(help="SCALE-Sim config (.cfg INI)")],
    topology: Annotated[Path, typer.Option(help="SCALE-Sim topology CSV")],
    gemm: Annotated[bool, typer.Option("--gemm", help="The topology is M,N,K GEMMs")] = False,
    dtype: Annotated[str, typer.Option(help="Word type: int8 or int16")] = "int8",
    out: Annotated[
        Path | None,
        typer.Option(
            help="Also write SCALE-Sim's COMPUTE_REPORT.csv, BANDWIDTH_REPORT.csv and "
            "DETAILED_ACCESS_REPORT.csv (its format) into OUT/<run_name>/, as its -p OUT does"
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """SCALE-Sim's per-layer figures predicted by infersim: its columns hold the event engine's
    replay of its memory system, the analytic estimate has columns of its own."""
    from infersim.dataflow.scalesim_io import read_config, read_layers, write_reports

    with user_errors():
        if dtype not in ("int8", "int16"):
            raise InfersimError(f"--dtype {dtype!r}: SCALE-Sim words are int8 or int16")
        cfg = read_config(config)
        layers = read_layers(topology, dtype, gemm=True if gemm else None)  # type: ignore[arg-type]
        rows, figures, refusals = scalesim_rows(cfg, layers)
        written: list[Path] = []
        if out is not None:
            if refusals:
                raise InfersimError(
                    f"--out: the replay refuses {refusals[0]}; SCALE-Sim's "
                    "report files need every layer replayed"
                )
            written = write_reports(out / cfg.run_name, [f for f in figures if f is not None])
    if as_json:
        print_json(rows)
        return
    table = Table(title=f"{topology.name} on {config.name} ({cfg.dataflow})")
    headers = {
        "Mapping Efficiency %": "Mapping Eff. %",
        ANALYTIC_COLUMNS[0]: "analytic Total",
        ANALYTIC_COLUMNS[1]: "analytic Stall",
    }
    for col in TABLE_COLUMNS:
        table.add_column(headers.get(col, col), justify="left" if col == "Layer" else "right")
    for row in rows:
        cells = [
            f"{row[c]:,.2f}" if isinstance(row[c], float) else f"{row[c]:,}"
            for c in TABLE_COLUMNS[1:]
        ]
        mark = "" if row[PREDICTION_COLUMN] == "replay" else " *"
        table.add_row(f"{row['Layer']}{mark}", *cells)
    console.print(table)
    notes = [
        "Total/Stall Cycles and the utilizations: SCALE-Sim's memory system replayed by the "
        "event engine (also under Event Total Cycles / Event Stall Cycles in --json, for older "
        "scripts); analytic (infersim analytic ... in --json): the dataflow engine's tiling "
        "and DRAM model.",
        *(f"* analytic instead of the replay for {r}" for r in refusals),
        *(f"wrote {p}" for p in written),
    ]
    for note in notes:
        console.print(note, markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``map`` and ``scalesim`` to the CLI."""
    app.command(name="map")(map_command)
    app.command(name="scalesim")(scalesim_command)
