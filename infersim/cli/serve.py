"""``infersim serve``: the request-level serving simulation from the command line, with its
progress bar and tables.

:func:`register` adds the command; bad input exits with code 2 and one message.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from infersim.cli.common import (
    ChipOpt,
    JsonOpt,
    console,
    err_console,
    fail,
    plain,
    print_json,
    user_errors,
)
from infersim.errors import InfersimError
from infersim.simulator.defaults import DEFAULT_ENGINE, engine_help
from infersim.units import fmt_percent, fmt_rate, fmt_time, significant

if TYPE_CHECKING:  # the serving simulator (SimPy, pandas) is imported by the command itself
    from infersim.simulator.serving import ServingConfig, ServingResult

DEFAULT_REQUESTS = 1000
"""Synthetic requests simulated when ``--requests`` is not given."""


class SchedulerChoice(StrEnum):
    """Batching policy."""

    static = "static"
    continuous = "continuous"
    chunked_prefill = "chunked-prefill"


class KVChoice(StrEnum):
    """KV-cache memory manager."""

    paged = "paged"
    contiguous = "contiguous"


class PreemptionChoice(StrEnum):
    """What happens to a sequence that cannot grow."""

    recompute = "recompute"
    swap = "swap"


def stack_text(techniques: str | None, spec: str | None) -> str:
    """The technique stack with ``--spec`` appended as a ``spec:`` token."""
    parts = [techniques] if techniques else []
    if spec:
        parts.append(spec if spec.startswith("spec:") else f"spec:{spec}")
    return "+".join(parts)


def build_config(
    arrivals: str,
    requests: int | None,
    prompt_len: str | None,
    output_len: str | None,
    max_output: int | None,
    shared_prefix: int,
    scheduler: SchedulerChoice,
    max_batch: int | None,
    max_tokens: int | None,
    batch_timeout_s: float | None,
    kv: KVChoice,
    block_size: int | None,
    prefix_cache: bool,
    preemption: PreemptionChoice,
    kv_capacity_bytes: float | None,
    slo: dict[str, float],
    seed: int,
) -> ServingConfig:
    """A validated :class:`ServingConfig` from the command-line options.

    Raises:
        ConfigError: a bad option value or a combination that does not apply.
    """
    from infersim.io import validate
    from infersim.simulator.serving import ServingConfig
    from infersim.simulator.serving.workload import Trace, TraceLength, parse_arrivals, parse_length

    arrival = parse_arrivals(arrivals)
    is_trace = isinstance(arrival, Trace)
    default_len = "trace" if is_trace else None
    if requests is None and not is_trace:
        requests = DEFAULT_REQUESTS
    workload: dict[str, Any] = {
        "arrivals": arrival,
        "requests": requests,
        "max_output_tokens": max_output,
        "shared_prefix_tokens": shared_prefix,
    }
    for key, text in (
        ("prompt_len", prompt_len or default_len),
        ("output_len", output_len or default_len),
    ):
        if text is None:
            continue
        workload[key] = parse_length(text)
        if isinstance(workload[key], TraceLength) and not is_trace:
            raise InfersimError(f"--{key.replace('_', '-')} trace needs --arrivals trace:PATH")
    sched: dict[str, Any] = {"kind": scheduler.value}
    if max_batch is not None:
        sched["max_batch_size"] = max_batch
    if max_tokens is not None:
        sched["max_tokens_per_iteration"] = max_tokens
    if batch_timeout_s is not None:
        if scheduler is not SchedulerChoice.static:
            raise InfersimError("--batch-timeout-s applies to --scheduler static only")
        sched["timeout_s"] = batch_timeout_s
    kv_cfg: dict[str, Any] = {
        "kind": kv.value,
        "preemption": preemption.value,
        "kv_capacity_bytes": kv_capacity_bytes,
    }
    if kv is KVChoice.contiguous and (prefix_cache or block_size is not None):
        raise InfersimError("--prefix-cache and --block-size need --kv paged")
    if kv is KVChoice.paged:
        kv_cfg["prefix_cache"] = prefix_cache
        if block_size is not None:
            kv_cfg["block_size_tokens"] = block_size
    data = {"workload": workload, "scheduler": sched, "kv": kv_cfg, "slo": slo, "seed": seed}
    return validate(ServingConfig, data, "serve options")


def _latency_table(summary: dict[str, Any]) -> Table:
    table = Table(title="latency per request")
    for col in ("metric", "mean", "p50", "p90", "p99"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for key, label in (
        ("queue_s", "queueing"),
        ("ttft_s", "TTFT"),
        ("tpot_s", "TPOT"),
        ("e2e_s", "end-to-end"),
    ):
        stats = summary[key]
        table.add_row(
            label,
            *(
                fmt_time(v) if v is not None else "-"
                for v in (stats["mean"], stats["p50"], stats["p90"], stats["p99"])
            ),
        )
    return table


def _print_result(result: ServingResult) -> None:
    s = result.summary
    head = Table(
        title=f"{plain(s['model'])} on {plain(s['chip'])}: {s['scheduler']} batching, "
        f"{s['kv']} KV, {plain(s['techniques'])}"
    )
    head.add_column("metric")
    head.add_column("value", justify="right")
    slo = s["slo"]
    rows = [
        (
            "requests completed / rejected / preempted",
            f"{s['requests_completed']} / {s['requests_rejected']} / {s['requests_preempted']}",
        ),
        ("simulated duration", fmt_time(s["duration_s"])),
        (
            "throughput",
            f"{fmt_rate(s['throughput_requests_per_s'], 'req/s')}, "
            f"{fmt_rate(s['throughput_tokens_per_s'], 'output tok/s')}",
        ),
        (
            f"goodput (TTFT ≤ {fmt_time(slo['ttft_s'])}, TPOT ≤ {fmt_time(slo['tpot_s'])})",
            f"{fmt_rate(s['goodput_requests_per_s'], 'req/s')} "
            f"({fmt_percent(s['slo_attainment'], 1)} of requests)",
        ),
        ("batch size mean / max", f"{s['batch_size_mean']:.1f} / {s['batch_size_max']}"),
        ("running requests mean / max", f"{s['concurrency_mean']:.1f} / {s['concurrency_max']}"),
        ("KV capacity", f"{s['kv_capacity_tokens']:,} tokens"),
        (
            "KV utilization mean / max",
            f"{s['kv_utilization_mean']:.1%} / {s['kv_utilization_max']:.1%}",
        ),
        ("KV waste (allocated, not holding tokens)", f"{s['kv_waste_fraction_mean']:.1%}"),
    ]
    if s["prefix_cache_hit_tokens"]:
        rows.append(("prefix cache hit rate", f"{s['prefix_cache_hit_rate']:.1%}"))
    if s["spec_tokens_per_pass_mean"] is not None:
        rows.append(("speculative tokens per pass", f"{s['spec_tokens_per_pass_mean']:.2f}"))
    if s["swap_s"]:
        rows.append(("swap time", fmt_time(s["swap_s"])))
    rows.append(
        ("iterations (cost memo entries)", f"{s['iterations']:,} ({s['cost_memo']['entries']:,})")
    )
    for label, value in rows:
        head.add_row(label, value)
    console.print(head)
    console.print(_latency_table(s))
    for note in result.notes:
        console.print(f"note: {note}", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Add the ``serve`` command to ``app``."""

    @app.command()
    def serve(
        chip: ChipOpt,
        model: Annotated[str, typer.Option(help="Model preset name or config.json path")],
        techniques: Annotated[
            str | None, typer.Option(help="Technique stack, e.g. int4-awq+kv-fp8")
        ] = None,
        spec: Annotated[
            str | None,
            typer.Option(
                help="Speculative decoding, e.g. draft=llama-3-8b:k=4:alpha=0.7 or "
                "ngram:k=4:alpha=0.7 (appended to the stack as spec:...)"
            ),
        ] = None,
        arrivals: Annotated[
            str, typer.Option(help="poisson:RATE, fixed:RATE (req/s), burst or trace:PATH")
        ] = "poisson:10",
        requests: Annotated[
            int | None,
            typer.Option(help=f"Requests (default {DEFAULT_REQUESTS}; a trace: all of it)"),
        ] = None,
        prompt_len: Annotated[
            str | None,
            typer.Option(
                help=escape("Prompt tokens: N, uniform:LO:HI, lognormal:MEDIAN:SIGMA, trace "
                            "[default: 512, or trace]")
            ),
        ] = None,
        output_len: Annotated[
            str | None,
            typer.Option(help=escape("Output tokens, same forms [default: 128, or trace]")),
        ] = None,
        max_output: Annotated[
            int | None,
            typer.Option(
                help=escape("Output cap (max_tokens) a contiguous KV reserves [default: the "
                            "distribution's longest]")
            ),
        ] = None,
        shared_prefix: Annotated[
            int, typer.Option(help="Tokens of a system prompt every request shares")
        ] = 0,
        scheduler: Annotated[
            SchedulerChoice, typer.Option(help="Batching policy")
        ] = SchedulerChoice.continuous,
        max_batch: Annotated[
            int | None, typer.Option(help="Most sequences running at once [256]")
        ] = None,
        max_tokens: Annotated[
            int | None,
            typer.Option(help="Tokens per iteration [8192; chunked-prefill: 2048]"),
        ] = None,
        batch_timeout_s: Annotated[
            float | None, typer.Option(help="Static batching: longest wait for a full batch")
        ] = None,
        kv: Annotated[KVChoice, typer.Option(help="KV-cache manager")] = KVChoice.paged,
        block_size: Annotated[
            int | None, typer.Option(help="Paged KV: tokens per block [16]")
        ] = None,
        prefix_cache: Annotated[
            bool, typer.Option("--prefix-cache", help="Paged KV: share cached prefix blocks")
        ] = False,
        preemption: Annotated[
            PreemptionChoice, typer.Option(help="Recompute or swap a sequence that cannot grow")
        ] = PreemptionChoice.recompute,
        kv_capacity_bytes: Annotated[
            float | None, typer.Option(help="KV pool per chip in bytes (default: what fits)")
        ] = None,
        slo_ttft_s: Annotated[float, typer.Option(help="SLO: time to first token (s)")] = 1.0,
        slo_tpot_s: Annotated[float, typer.Option(help="SLO: time per output token (s)")] = 0.05,
        slo_attainment: Annotated[
            float, typer.Option(help="Sweep: fraction of requests that must meet the SLO")
        ] = 0.9,
        seed: Annotated[int, typer.Option(help="Seed of every random stream")] = 0,
        engine: Annotated[
            str,
            typer.Option(
                help=engine_help() + "; each distinct iteration is costed once"
            ),
        ] = DEFAULT_ENGINE,
        sweep: Annotated[
            bool,
            typer.Option("--sweep-rate", help="Bisect for the highest rate meeting the SLO"),
        ] = False,
        save_requests: Annotated[
            Path | None, typer.Option(help="Write the per-request table to this CSV")
        ] = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Simulate serving a request stream: batching, KV memory, prefix cache, speculative
        decoding; latency percentiles, throughput and goodput under an SLO. A run estimated
        at more than 10,000,000 iterations (a minute or more) is noted with its size first."""
        from infersim.arch_models import load_chip
        from infersim.workloads import load_model
        from infersim.workloads.techniques import parse as parse_stack

        with user_errors():
            the_chip, the_model = load_chip(chip), load_model(model)
            stack = stack_text(techniques, spec)
            parse_stack(stack)
            slo = {"ttft_s": slo_ttft_s, "tpot_s": slo_tpot_s, "attainment": slo_attainment}
            config = build_config(
                arrivals,
                requests,
                prompt_len,
                output_len,
                max_output,
                shared_prefix,
                scheduler,
                max_batch,
                max_tokens,
                batch_timeout_s,
                kv,
                block_size,
                prefix_cache,
                preemption,
                kv_capacity_bytes,
                slo,
                seed,
            )
            _note_size(config)
            if sweep:
                _sweep(the_chip, the_model, config, stack, engine, as_json)
                return
            result = _run(the_chip, the_model, config, stack, engine, as_json)
        if save_requests is not None:
            try:
                result.requests.to_csv(save_requests, index=False)
            except OSError as exc:
                raise fail(f"cannot write {save_requests}: {exc.strerror or exc}") from None
        if as_json:
            print_json(result.to_dict())
        else:
            _print_result(result)


def _run(
    chip: Any, model: Any, config: ServingConfig, stack: str, engine: str, quiet: bool
) -> ServingResult:
    from infersim.simulator.serving import simulate_serving

    if quiet:
        return simulate_serving(chip, model, config, stack, engine)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("simulating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task("serve", total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        return simulate_serving(chip, model, config, stack, engine, progress=update)


LARGE_RUN_ITERATIONS = 10_000_000
"""Above this many estimated iterations (a minute or more) ``serve`` notes the size first."""


def _note_size(config: ServingConfig) -> None:
    """A note on stderr when the run will simulate more than :data:`LARGE_RUN_ITERATIONS`
    iterations, with the estimate and what sets it."""
    from infersim.simulator.serving.config import SECONDS_PER_ITERATION, estimated_iterations

    iterations = estimated_iterations(config)
    if iterations is not None and iterations > LARGE_RUN_ITERATIONS:
        err_console.print(
            f"note: about {iterations:,} iterations to simulate (~"
            f"{fmt_time(iterations * SECONDS_PER_ITERATION)} or more): fewer --requests, a "
            "shorter --output-len or a larger --max-batch run faster",
            markup=False, highlight=False,
        )


def _sweep(
    chip: Any, model: Any, config: ServingConfig, stack: str, engine: str, as_json: bool
) -> None:
    from infersim.simulator.serving import sweep_rate

    def show(row: dict[str, Any]) -> None:
        if not as_json:
            verdict = "meets" if row["passes"] else "misses"
            err_console.print(
                f"rate {fmt_rate(row['rate_per_s'], 'req/s')}: {verdict} the SLO "
                f"({fmt_percent(row['slo_attainment'], 1)})",
                highlight=False,
            )

    found = sweep_rate(chip, model, config, stack, engine, on_run=show)
    if as_json:
        print_json(
            {"max_rate_per_s": found.rate_per_s, "slo": config.slo.model_dump(), "runs": found.runs}
        )
        return
    table = Table(title="rate sweep")
    for col in ("rate req/s", "meets SLO", "attainment", "goodput req/s", "TTFT p90", "TPOT p90"):
        table.add_column(col, justify="right")
    for row in sorted(found.runs, key=lambda r: r["rate_per_s"]):
        table.add_row(
            significant(row["rate_per_s"], 4),
            "yes" if row["passes"] else "no",
            fmt_percent(row["slo_attainment"], 1),
            significant(row["goodput_requests_per_s"]),
            fmt_time(row["ttft_p90_s"]) if row["ttft_p90_s"] is not None else "-",
            fmt_time(row["tpot_p90_s"]) if row["tpot_p90_s"] is not None else "-",
        )
    console.print(table)
    console.print(f"highest rate meeting the SLO: {fmt_rate(found.rate_per_s, 'req/s')}",
                  highlight=False)
