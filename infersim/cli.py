"""The ``infersim`` command line: one typer app. Bad input exits with code 2 and one message."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from infersim.arch_models import Chip, list_chips, load_chip
from infersim.cli_common import console, err_console, print_json, user_errors
from infersim.errors import InfersimError, UnsupportedDtypeError
from infersim.io import validate
from infersim.simulator import events
from infersim.simulator.inference import ENGINES, simulate, simulate_ops, step_ops
from infersim.simulator.results import PhaseCost
from infersim.units import fmt_bytes, fmt_time, si
from infersim.workloads import Scenario, list_models, load_model, load_workload
from infersim.workloads.ops import OpBase
from infersim.workloads.techniques import parse as parse_stack

app = typer.Typer(
    name="infersim",
    help="Cycle-approximate simulator and design-space explorer for LLM inference.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class PhaseChoice(StrEnum):
    """Which step to simulate."""

    prefill = "prefill"
    decode = "decode"


ChipOpt = Annotated[str, typer.Option("--chip", help="Chip preset name or YAML path")]
PhaseOpt = Annotated[PhaseChoice, typer.Option("--phase", help="prefill or decode")]
BatchOpt = Annotated[int, typer.Option("--batch", help="Sequences in the batch")]
PromptOpt = Annotated[int, typer.Option("--prompt-len", help="Prompt tokens (prefill)")]
ContextOpt = Annotated[int, typer.Option("--context", help="Cached tokens per sequence (decode)")]
EmulationOpt = Annotated[
    bool,
    typer.Option(
        "--allow-emulation/--no-allow-emulation",
        help="Cost dtypes the chip lacks as emulated at a wider one",
    ),
]
EngineOpt = Annotated[str, typer.Option("--engine", help=f"Cost engine: {', '.join(ENGINES)}")]
DataflowOpt = Annotated[
    str,
    typer.Option(
        "--dataflow", help="GEMM dataflow (analytic and events engines): ws, os, is, rs, best"
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON")]
"""Options several commands share (one definition each)."""


def _chip_summary(chip: Chip) -> dict[str, Any]:
    classes = list(chip.array.macs_per_pe_per_cycle)
    return {
        "name": chip.name,
        "description": chip.description,
        "cores": chip.cores,
        "freq_hz": chip.freq_hz,
        "array": f"{chip.array.rows}x{chip.array.cols}",
        "peak_flops": {c: chip.peak_flops(c) for c in classes},
        "dram_capacity_bytes": chip.dram.capacity_bytes,
        "dram_bandwidth_bytes_per_s": chip.peak_bandwidth_bytes_per_s,
        "ridge_point_flops_per_byte": {c: chip.ridge_point(c) for c in classes},
        "source": chip.source,
    }


@app.command()
def chips(as_json: JsonOpt = False) -> None:
    """List the chip presets with their peak figures."""
    rows = [_chip_summary(load_chip(name)) for name in list_chips()]
    if as_json:
        print_json(rows)
        return
    table = Table(title="chip presets")
    for col in ("name", "cores", "array", "clock", "dense peak FLOP/s", "DRAM", "bandwidth"):
        table.add_column(col)
    for r in rows:
        peaks = " ".join(f"{c}:{si(f, '').replace(' ', '')}" for c, f in r["peak_flops"].items())
        table.add_row(
            r["name"],
            str(r["cores"]),
            r["array"],
            si(r["freq_hz"], "Hz"),
            peaks,
            fmt_bytes(r["dram_capacity_bytes"]),
            si(r["dram_bandwidth_bytes_per_s"], "B/s"),
        )
    console.print(table)


@app.command()
def models(as_json: JsonOpt = False) -> None:
    """List the model presets with their parameter counts."""
    rows: list[dict[str, Any]] = []
    for name in list_models():
        m = load_model(name)
        rows.append(
            {
                "name": name,
                "params": m.params(),
                "active_params": m.params(active=True),
                "layers": m.num_hidden_layers,
                "hidden_size": m.hidden_size,
                "heads": m.num_attention_heads,
                "kv_heads": m.kv_heads,
                "attention": "mla"
                if m.is_mla
                else (
                    "mha"
                    if m.kv_heads == m.num_attention_heads
                    else ("mqa" if m.kv_heads == 1 else "gqa")
                ),
                "experts": m.num_experts,
                "vocab_size": m.vocab_size,
                "source": m.source,
            }
        )
    if as_json:
        print_json(rows)
        return
    table = Table(title="model presets")
    for col in ("name", "params", "active", "layers", "hidden", "heads/kv", "attention", "experts"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r["name"],
            si(r["params"], ""),
            si(r["active_params"], ""),
            str(r["layers"]),
            str(r["hidden_size"]),
            f"{r['heads']}/{r['kv_heads']}",
            r["attention"],
            str(r["experts"] or "-"),
        )
    console.print(table)


def _print_phase(cost: PhaseCost, top: int) -> None:
    mem = cost.memory
    title = f"{cost.model} on {cost.chip}: {cost.phase}, batch {cost.batch}"
    if cost.techniques != "baseline":
        title += f", {cost.techniques}"
    head = Table(title=title)
    head.add_column("metric")
    head.add_column("value", justify="right")
    latency_name = "TTFT" if cost.phase == "prefill" else "TPOT"
    head.add_row(latency_name, fmt_time(cost.ttft_s or cost.tpot_s or 0.0))
    head.add_row("tokens/s", f"{cost.tokens_per_s:,.1f}")
    head.add_row("FLOPs", si(cost.flops, "FLOP"))
    head.add_row("DRAM traffic", fmt_bytes(cost.dram_bytes))
    head.add_row("energy", f"{cost.energy_j:.3g} J")
    head.add_row(
        "weights / KV / activations",
        " / ".join(fmt_bytes(b) for b in (mem.weights_bytes, mem.kv_bytes, mem.activation_bytes)),
    )
    fits = (
        "yes"
        if mem.fits
        else f"no: short {fmt_bytes(mem.shortfall_bytes)}, {mem.chips_needed} chips"
    )
    head.add_row(f"fits in {fmt_bytes(mem.capacity_bytes)}", fits)
    if cost.chips > 1:
        head.add_row("chips", str(cost.chips))
    console.print(head)
    for note in cost.notes:
        console.print(f"note: {note}", markup=False, highlight=False)
    ops = sorted(cost.ops, key=lambda c: c.total_time_s, reverse=True)[:top]
    table = Table(title=f"top {len(ops)} operators by time")
    for col in ("op", "kind", "count", "FLOPs", "DRAM", "time (all)", "share", "bound"):
        table.add_column(col, justify="right" if col not in ("op", "kind", "bound") else "left")
    for c in ops:
        share = c.total_time_s / cost.latency_s if cost.latency_s else 0.0
        table.add_row(
            c.name,
            c.kind,
            str(c.count),
            si(c.flops, ""),
            fmt_bytes(c.dram_bytes),
            fmt_time(c.total_time_s),
            f"{share:.1%}",
            c.bound,
        )
    console.print(table)


@app.command(name="simulate")
def simulate_cmd(
    chip: ChipOpt,
    model: Annotated[str | None, typer.Option(help="Model preset name or config.json path")] = None,
    workload: Annotated[Path | None, typer.Option(help="YAML list of operators")] = None,
    phase: PhaseOpt = PhaseChoice.decode,
    batch: BatchOpt = 1,
    prompt_len: PromptOpt = 512,
    context: ContextOpt = 512,
    weights_dtype: Annotated[str, typer.Option(help="Weight dtype")] = "bf16",
    act_dtype: Annotated[str, typer.Option(help="Activation/compute dtype")] = "bf16",
    kv_dtype: Annotated[str, typer.Option(help="KV-cache dtype")] = "bf16",
    techniques: Annotated[
        str | None, typer.Option(help="Technique stack, e.g. int4-awq+kv-fp8+flash")
    ] = None,
    allow_emulation: EmulationOpt = False,
    engine: EngineOpt = "analytic",
    dataflow: DataflowOpt = "best",
    top: Annotated[int, typer.Option(min=1, help="Operators shown in the table")] = 12,
    trace: Annotated[
        Path | None,
        typer.Option(help="Write the event timeline as Chrome-trace JSON (--engine events)"),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Simulate one prefill or decode step of a model (or a custom operator list) on a chip."""
    with user_errors():
        if (model is None) == (workload is None):
            raise InfersimError("give exactly one of --model or --workload")
        if trace is not None and engine != "events":
            raise InfersimError(f"--trace needs --engine events (got --engine {engine})")
        the_chip = load_chip(chip)
        if workload is not None:
            wl = load_workload(workload)
            cost = simulate_ops(the_chip, wl.ops, name=wl.name, engine=engine, dataflow=dataflow)
            traced: list[OpBase] = list(wl.ops)
        else:
            options = {
                "phase": phase.value,
                "batch": batch,
                "prompt_len": prompt_len,
                "context_len": context,
                "precision": {"weights": weights_dtype, "act": act_dtype, "kv": kv_dtype},
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
            timeline = events.trace_ops(traced, the_chip, dataflow)
            try:
                timeline.write_chrome_trace(trace)
            except OSError as exc:
                reason = exc.strerror or exc
                raise InfersimError(f"--trace {trace}: cannot write ({reason})") from None
    if as_json:
        print_json(cost.to_dict())
    else:
        _print_phase(cost, top)
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
    """One row per technique stack: memory, fit, latency, throughput, energy, speedup, bound.
    A stack the chip cannot run gives a row with ``error`` instead of stopping the table."""
    model_cfg = load_model(model_name)
    rows: list[dict[str, Any]] = []
    base_rate = None
    for stack in stacks:
        try:
            cost = simulate(
                chip, model_cfg, scenario, engine=engine, techniques=stack, dataflow=dataflow
            )
        except UnsupportedDtypeError as exc:
            rows.append({"technique": stack, "error": str(exc)})
            continue
        if base_rate is None:
            base_rate = cost.tokens_per_s
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
                "bound": cost.bound,
                "notes": list(cost.notes),
            }
        )
    return rows


@app.command()
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
    engine: EngineOpt = "analytic",
    dataflow: DataflowOpt = "best",
    as_json: JsonOpt = False,
) -> None:
    """What each technique stack costs and buys for one model step on one chip."""
    with user_errors():
        the_chip = load_chip(chip)
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
    if as_json:
        print_json(rows)
        return
    latency = "TTFT" if phase == PhaseChoice.prefill else "TPOT"
    table = Table(title=f"{model} on {the_chip.name}: {phase.value}, batch {batch}")
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
            table.add_row(r["technique"], "", "", "", "", "", "", "", "unsupported")
            continue
        table.add_row(
            r["technique"],
            fmt_bytes(r["weights_bytes"]),
            fmt_bytes(r["kv_bytes"]),
            "yes" if r["fits"] else "no",
            fmt_time(r.get("ttft_s") or r.get("tpot_s") or 0.0),
            f"{r['tokens_per_s']:,.1f}",
            f"{r['energy_per_token_j']:.3g}",
            f"{r['speedup']:.2f}x",
            r["bound"],
        )
    console.print(table)
    for r in rows:
        for note in r.get("notes", []):
            console.print(f"note ({r['technique']}): {note}", markup=False, highlight=False)
        if "error" in r:
            console.print(
                f"unsupported ({r['technique']}): {r['error']}", markup=False, highlight=False
            )


@app.command()
def demo() -> None:
    """The main job on embedded defaults: llama-3-8b prefill and decode on h100-sxm."""
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
        table.add_column(col)
    for label, run in runs:
        cost = run()
        shares = cost.time_by_bound()
        main = max(shares, key=shares.__getitem__)
        table.add_row(
            label,
            fmt_time(cost.latency_s),
            f"{cost.tokens_per_s:,.0f}",
            f"{main} ({shares[main] / cost.latency_s:.0%})",
            fmt_bytes(cost.memory.total_bytes),
            "yes" if cost.memory.fits else "no",
        )
    console.print(table)


def _register_commands() -> None:
    """Commands that live with their subsystem (one ``register(app)`` per module)."""
    from infersim.dataflow import commands as dataflow_commands
    from infersim.explorer import commands as explorer_commands
    from infersim.simulator import serve_commands
    from infersim.validation import commands as validation_commands

    for module in (dataflow_commands, serve_commands, explorer_commands, validation_commands):
        module.register(app)


_register_commands()


def main() -> None:
    """Entry point for ``python -m infersim``."""
    app()


if __name__ == "__main__":
    main()
