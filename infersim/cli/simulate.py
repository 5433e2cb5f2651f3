"""The commands that cost one model step on one chip: ``simulate``, ``compare`` and ``demo``.
:func:`register` adds them to the app."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from infersim.cli.common import (
    BatchOpt,
    ChipOpt,
    ContextOpt,
    DataflowOpt,
    EmulationOpt,
    EngineOpt,
    JsonOpt,
    PhaseChoice,
    PhaseOpt,
    PromptOpt,
    console,
    err_console,
    plain,
    print_json,
    user_errors,
)
from infersim.errors import InfersimError, UnsupportedDtypeError
from infersim.simulator.defaults import DEFAULT_ENGINE
from infersim.units import fmt_bytes, fmt_energy, fmt_percent, fmt_time, si, significant

if TYPE_CHECKING:
    from infersim.arch_models import Chip
    from infersim.simulator.results import PhaseCost
    from infersim.workloads import Scenario

    # imported by the commands that use them (a fast start)
    from infersim.workloads.ops import OpBase


def display(cost: PhaseCost, operators: bool = False) -> dict[str, str]:
    """The human-readable companion of a step's JSON: its headline figures written with units
    (the table's words: TTFT or TPOT and tokens/s for a model step, latency and inferences/s
    for an operator list)."""
    out: dict[str, str] = {}
    if operators:
        out["latency"] = fmt_time(cost.latency_s)
        out["inferences/s"] = significant(1 / cost.latency_s if cost.latency_s else 0.0)
    else:
        name = "TTFT" if cost.phase == "prefill" else "TPOT"
        out[name] = fmt_time(cost.ttft_s or cost.tpot_s or 0.0)
        out["tokens/s"] = significant(cost.tokens_per_s)
    out["energy"] = fmt_energy(cost.energy_j)
    if not operators:
        out["energy/token"] = fmt_energy(cost.energy_per_token_j)
    out["FLOPs"] = si(cost.flops, "FLOP")
    out["DRAM traffic"] = fmt_bytes(cost.dram_bytes)
    mem = cost.memory
    out["memory"] = f"{fmt_bytes(mem.total_bytes)} of {fmt_bytes(mem.capacity_bytes)}"
    out["fits"] = "yes" if cost.memory.fits else "no"
    return out


def _print_phase(cost: PhaseCost, top: int, operators: bool = False) -> None:
    """The step's tables; ``operators``: a user operator list (latency and inferences per
    second: it has no tokens)."""
    mem = cost.memory
    what = "one pass" if operators else f"{cost.phase}, batch {cost.batch}"
    title = f"{plain(cost.model)} on {plain(cost.chip)}: {what}"
    if cost.techniques != "baseline":
        title += f", {plain(cost.techniques)}"
    head = Table(title=title)
    head.add_column("metric")
    head.add_column("value", justify="right")
    shown = display(cost, operators)
    for key in ("TTFT", "TPOT", "latency", "tokens/s", "inferences/s", "FLOPs", "DRAM traffic",
                "energy", "energy/token"):
        if key in shown:
            head.add_row(key, shown[key])
    parts = ({"weights": mem.weights_bytes, "activations": mem.activation_bytes} if operators
             else {"weights": mem.weights_bytes, "KV": mem.kv_bytes,
                   "activations": mem.activation_bytes})
    head.add_row(" / ".join(parts), " / ".join(fmt_bytes(b) for b in parts.values()))
    fits = (
        "yes"
        if mem.fits
        else f"[bold red]NO[/]: short {fmt_bytes(mem.shortfall_bytes)}, {mem.chips_needed} chips"
    )
    head.add_row(f"fits in {fmt_bytes(mem.capacity_bytes)}", fits)
    if cost.chips > 1:
        head.add_row("chips", str(cost.chips))
    console.print(head)
    for note in cost.notes:
        console.print(f"note: {note}", markup=False, highlight=False)
    if not mem.fits:
        console.print(
            f"[bold red]does not fit[/]: the figures above assume {fmt_bytes(mem.total_bytes)} "
            f"in {fmt_bytes(mem.capacity_bytes)}"
            + (": the ways out below fit" if cost.ways_out else "")
        )
    if cost.ways_out:
        _print_ways_out(cost)
    ops = sorted(cost.ops, key=lambda c: c.total_time_s, reverse=True)[:top]
    table = Table(title=f"top {len(ops)} operators by time")
    onchip = any(c.onchip_bytes for c in cost.ops)  # the chip's schedule kept activations
    cols = ("op", "kind", "count", "FLOPs", "DRAM", *(("on chip",) if onchip else ()),
            "time (all)", "share", "bound")  # fmt: skip
    for col in cols:
        table.add_column(col, justify="right" if col not in ("op", "kind", "bound") else "left")
    for c in ops:
        share = c.total_time_s / cost.latency_s if cost.latency_s else 0.0
        table.add_row(
            plain(c.name),
            c.kind,
            f"{c.count:,}",
            si(c.flops, ""),
            fmt_bytes(c.dram_bytes),
            *((fmt_bytes(c.onchip_bytes),) if onchip else ()),
            fmt_time(c.total_time_s),
            fmt_percent(share, 1),
            c.bound,
        )
    console.print(table)
    if onchip:
        console.print("on chip: activation bytes the chip's schedule kept in its buffer (read "
                      "from it, or left there for the next operator) instead of DRAM",
                      markup=False, highlight=False)  # fmt: skip


def _print_ways_out(cost: PhaseCost) -> None:
    latency_name = "TTFT" if cost.phase == "prefill" else "TPOT"
    table = Table(title="ways out (each simulated)")
    for col in ("way out", "techniques", "chips", latency_name, "tokens/s", "memory", "bound"):
        table.add_column(col, justify="right" if col in ("chips", latency_name, "tokens/s",
                                                         "memory") else "left")  # fmt: skip
    for way in cost.ways_out:
        c = way.cost
        table.add_row(
            plain(way.description),
            plain(way.techniques or "baseline"),
            str(c.chips),
            fmt_time(c.ttft_s or c.tpot_s or 0.0),
            significant(c.tokens_per_s),
            f"{fmt_bytes(c.memory.total_bytes)} / {fmt_bytes(c.memory.capacity_bytes)}",
            c.bound,
        )
    console.print(table)


CalibrationOpt = Annotated[
    Path | None,
    typer.Option("--calibration", help="Calibration profile (infersim calibrate --profile) to "
                 "apply to --chip; a profile for other chips is an error"),
]


def simulate_cmd(
    chip: ChipOpt,
    model: Annotated[str | None, typer.Option(help="Model preset name or config.json path")] = None,
    workload: Annotated[Path | None, typer.Option(help="YAML list of operators")] = None,
    phase: PhaseOpt = PhaseChoice.decode,
    batch: BatchOpt = 1,
    prompt_len: PromptOpt = 512,
    context: ContextOpt = 512,
    weights_dtype: Annotated[
        str | None,
        typer.Option(help="Weight dtype (default: the checkpoint quantization_config, or bf16)"),
    ] = None,
    act_dtype: Annotated[str, typer.Option(help="Activation/compute dtype")] = "bf16",
    kv_dtype: Annotated[str, typer.Option(help="KV-cache dtype")] = "bf16",
    techniques: Annotated[
        str | None, typer.Option(help="Technique stack, e.g. int4-awq+kv-fp8+flash")
    ] = None,
    allow_emulation: EmulationOpt = False,
    engine: EngineOpt = DEFAULT_ENGINE,
    dataflow: DataflowOpt = "best",
    top: Annotated[int, typer.Option(min=1, help="Operators shown in the table")] = 12,
    trace: Annotated[
        Path | None,
        typer.Option(help="Write the event timeline as Chrome-trace JSON (--engine events)"),
    ] = None,
    as_json: JsonOpt = False,
    calibration: CalibrationOpt = None,
) -> None:
    """Simulate one prefill or decode step of a model (or a custom operator list) on a chip."""
    from infersim.arch_models import load_chip
    from infersim.io import validate
    from infersim.simulator.inference import simulate, simulate_ops, step_ops
    from infersim.workloads import Scenario, load_model, load_workload

    with user_errors():
        if (model is None) == (workload is None):
            raise InfersimError("give exactly one of --model or --workload")
        if trace is not None and engine != "events":
            raise InfersimError(f"--trace needs --engine events (got --engine {engine})")
        the_chip = load_chip(chip)
        if calibration is not None:
            from infersim.validation.profiles import apply_profile

            the_chip = apply_profile(the_chip, calibration)
        if workload is not None:
            wl = load_workload(workload)
            cost = simulate_ops(the_chip, wl.ops, name=wl.name, engine=engine, dataflow=dataflow)
            traced: list[OpBase] = list(wl.ops)
        else:
            precision = {"act": act_dtype, "kv": kv_dtype}
            if weights_dtype is not None:
                precision["weights"] = weights_dtype
            options = {
                "phase": phase.value,
                "batch": batch,
                "prompt_len": prompt_len,
                "context_len": context,
                "precision": precision,
            }
            scenario = validate(Scenario, options, "options")
            stack = techniques or ""
            if allow_emulation:
                stack = f"{stack}+emulate" if stack else "emulate"
            the_model = load_model(model or "")
            cost = simulate(
                the_chip,
                the_model,
                scenario,
                engine=engine,
                techniques=stack,
                dataflow=dataflow,
            )
            traced = step_ops(the_chip, the_model, scenario, stack) if trace else []
        if trace is not None:
            from infersim.simulator.engines import events

            timeline = events.trace_ops(traced, the_chip, dataflow)
            try:
                timeline.write_chrome_trace(trace)
            except OSError as exc:
                reason = exc.strerror or exc
                raise InfersimError(f"--trace {trace}: cannot write ({reason})") from None
    operators = workload is not None
    if as_json:
        doc = cost.to_dict()
        if operators:  # no tokens: one pass of the operator list
            doc.update(ttft_s=None, tokens_per_s=None, energy_per_token_j=None,
                       inferences_per_s=1 / cost.latency_s if cost.latency_s else 0.0)
        doc["display"] = display(cost, operators)
        print_json(doc)
    else:
        _print_phase(cost, top, operators)
    if trace is not None:
        (err_console if as_json else console).print(
            f"trace: {len(timeline.spans)} spans of one repetition of each operator -> {trace}",
            markup=False,
            highlight=False,
        )


DEFAULT_STACKS = (
    "fp16",
    "fp16+int8-weight",
    "fp16+int4-awq",
    "fp16+q4_k_m",
    "w8a8-int8",
    "fp8",
    "fp16+kv-int8",
    "fp16+naive-attention",
    "fp16+fuse",
    "fp16+2:4",
    "fp16+spec:ngram:k=4:alpha=0.7",
    "fp16+tp=2",
    "fp16+int4-awq+kv-fp8+fuse",
)
"""The stacks ``infersim compare`` runs by default; the first is the baseline."""


def compare_rows(
    chip: Chip,
    model_name: str,
    scenario: Scenario,
    stacks: list[str],
    engine: str,
    dataflow: str = "best",
) -> list[dict[str, Any]]:
    """One row per technique stack: memory, fit, latency, throughput, energy, speedup over the
    first stack that runs (``baseline_fits``: whether that one fits the chip's memory), bound,
    and ``display``, the figures as the table writes them. A stack the chip cannot run gives a
    row with ``error`` instead of stopping the table."""
    from infersim.simulator.inference import simulate
    from infersim.workloads import load_model

    model_cfg = load_model(model_name)
    rows: list[dict[str, Any]] = []
    base_rate = None
    base_fits = True
    for stack in stacks:
        try:
            cost = simulate(
                chip,
                model_cfg,
                scenario,
                engine=engine,
                techniques=stack,
                dataflow=dataflow,
                ways_out=False,
            )
        except UnsupportedDtypeError as exc:
            rows.append({"technique": stack, "error": str(exc)})
            continue
        if base_rate is None:
            base_rate = cost.tokens_per_s
            base_fits = cost.memory.fits
        latency = {"ttft_s": cost.ttft_s} if cost.phase == "prefill" else {"tpot_s": cost.tpot_s}
        rows.append(
            {
                "technique": stack,
                "weights_bytes": cost.memory.weights_bytes,
                "kv_bytes": cost.memory.kv_bytes,
                "fits": cost.memory.fits,
                "chips": cost.chips,
                **latency,
                "tokens_per_s": cost.tokens_per_s,
                "energy_per_token_j": cost.energy_per_token_j,
                "speedup": cost.tokens_per_s / base_rate if base_rate else None,
                "baseline_fits": base_fits,
                "bound": cost.bound,
                "notes": list(cost.notes),
            }
        )
    return rows


def compare(
    chip: ChipOpt,
    model: Annotated[str, typer.Option(help="Model preset name or config.json path")],
    phase: PhaseOpt = PhaseChoice.decode,
    batch: BatchOpt = 1,
    prompt_len: PromptOpt = 512,
    context: ContextOpt = 512,
    techniques: Annotated[
        str | None,
        typer.Option(help="Comma-separated stacks ('+' joins techniques); first = baseline"),
    ] = None,
    allow_emulation: EmulationOpt = False,
    engine: EngineOpt = DEFAULT_ENGINE,
    dataflow: DataflowOpt = "best",
    as_json: JsonOpt = False,
    calibration: CalibrationOpt = None,
) -> None:
    """What each technique stack costs and buys for one model step on one chip."""
    from infersim.arch_models import load_chip
    from infersim.io import validate
    from infersim.workloads import Scenario
    from infersim.workloads.techniques import parse as parse_stack

    with user_errors():
        the_chip = load_chip(chip)
        if calibration is not None:
            from infersim.validation.profiles import apply_profile

            the_chip = apply_profile(the_chip, calibration)
        options = {
            "phase": phase.value,
            "batch": batch,
            "prompt_len": prompt_len,
            "context_len": context,
        }
        scenario = validate(Scenario, options, "options")
        stacks = [t.strip() for t in techniques.split(",")] if techniques else list(DEFAULT_STACKS)
        if allow_emulation:
            stacks = [f"{s}+emulate" for s in stacks]
        for stack in stacks:
            parse_stack(stack)  # every token checked before any simulation
        rows = compare_rows(the_chip, model, scenario, stacks, engine, dataflow)
    for r in rows:
        if "error" not in r:
            r["display"] = {
                "weights": fmt_bytes(r["weights_bytes"]), "KV": fmt_bytes(r["kv_bytes"]),
                **{k: fmt_time(r[v]) for k, v in (("TTFT", "ttft_s"), ("TPOT", "tpot_s"))
                   if v in r},
                "tokens/s": significant(r["tokens_per_s"]),
                "energy/token": fmt_energy(r["energy_per_token_j"]),
                "speedup": f"{significant(r['speedup'])}x" if r["speedup"] else "–",
            }
    if as_json:
        print_json(rows)
        return
    latency = "TTFT" if phase == PhaseChoice.prefill else "TPOT"
    table = Table(title=f"{plain(model)} on {plain(the_chip.name)}: {phase.value}, batch {batch}")
    for col in (
        "technique",
        "weights",
        "KV",
        "fits",
        latency,
        "tokens/s",
        "J/token",
        "speedup",
        "bound",
    ):
        table.add_column(col, justify="left" if col in ("technique", "bound") else "right")
    for r in rows:
        if "error" in r:
            table.add_row(plain(r["technique"]), "", "", "", "", "", "", "", "unsupported")
            continue
        table.add_row(
            plain(r["technique"]),
            fmt_bytes(r["weights_bytes"]),
            fmt_bytes(r["kv_bytes"]),
            "yes" if r["fits"] else "[bold red]no[/]",
            fmt_time(r.get("ttft_s") or r.get("tpot_s") or 0.0),
            significant(r["tokens_per_s"]),
            significant(r["energy_per_token_j"]),
            r["display"]["speedup"],
            r["bound"],
        )
    console.print(table)
    base = next((r for r in rows if "error" not in r), None)
    if base is not None and not base["fits"]:
        console.print(
            f"note: the baseline {plain(base['technique'])} does not fit in one chip's memory "
            f"({fmt_bytes(base['weights_bytes'] + base['kv_bytes'])} of weights and KV): the "
            "speedups compare with a step that one chip cannot hold",
            style="bold red", highlight=False,
        )
    for r in rows:
        for note in r.get("notes", []):
            console.print(f"note ({r['technique']}): {note}", markup=False, highlight=False)
        if "error" in r:
            console.print(
                f"unsupported ({r['technique']}): {r['error']}", markup=False, highlight=False
            )


def demo() -> None:
    """The main job on embedded defaults: llama-3-8b prefill and decode on h100-sxm."""
    from infersim.arch_models import load_chip
    from infersim.simulator.inference import simulate
    from infersim.workloads import Scenario, load_model

    chip, model = load_chip("h100-sxm"), load_model("llama-3-8b")
    runs: list[tuple[str, Callable[[], PhaseCost]]] = [
        (
            "prefill 2048 tokens",
            lambda: simulate(chip, model, Scenario(phase="prefill", batch=1, prompt_len=2048)),
        ),
        (
            "decode @ 2048 ctx, batch 1",
            lambda: simulate(chip, model, Scenario(phase="decode", batch=1, context_len=2048)),
        ),
        (
            "decode @ 2048 ctx, batch 64",
            lambda: simulate(chip, model, Scenario(phase="decode", batch=64, context_len=2048)),
        ),
    ]
    table = Table(title="llama-3-8b (bf16) on h100-sxm — analytic engine (mapped GEMMs)")
    for col in ("step", "latency", "tokens/s", "bound (time share)", "memory", "fits"):
        table.add_column(col, justify="left" if col in ("step", "bound (time share)")
                         else "right")
    for label, run in runs:
        cost = run()
        shares = cost.time_by_bound()
        main = max(shares, key=shares.__getitem__)
        table.add_row(
            label,
            fmt_time(cost.latency_s),
            significant(cost.tokens_per_s),
            f"{main} ({fmt_percent(shares[main] / cost.latency_s)})",
            fmt_bytes(cost.memory.total_bytes),
            "yes" if cost.memory.fits else "no",
        )
    console.print(table)


def register(app: typer.Typer) -> None:
    """Add ``simulate``, ``compare`` and ``demo`` to ``app``."""
    app.command(name="simulate")(simulate_cmd)
    app.command(name="compare")(compare)
    app.command(name="demo")(demo)
