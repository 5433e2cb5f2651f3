"""The ``validate`` and ``calibrate`` commands; :func:`register` adds them to the CLI app, and
:func:`main` runs them on their own (``python -m infersim.validation``).

Bad input exits with code 2 and one message; a failed correctness check exits with code 1.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from infersim.cli.common import console, err_console, plain, print_json, user_errors
from infersim.errors import InfersimError
from infersim.simulator.defaults import DEFAULT_ENGINE, engine_help
from infersim.simulator.engines import ENGINE_NAMES as ENGINES
from infersim.units import fmt_time

if TYPE_CHECKING:  # imported by the commands that use them (a fast start)
    from rich.progress import TaskID

    from infersim.arch_models import Chip
    from infersim.validation.timing import Step

HOST_CHIP = "host-cpu"

GPU_PRESETS: tuple[tuple[str, str], ...] = (
    ("H200", "h200"),
    ("H100", "h100-sxm"),
    ("A100", "a100-sxm-80gb"),
)
"""Substring of the CUDA device name → chip preset (first match wins)."""

DEFAULT_SUITE = {"cpu": "default", "cuda": "gpu", "interpret": "tiny"}


class BackendChoice(StrEnum):
    """Where the kernels run."""

    cpu = "cpu"
    cuda = "cuda"
    interpret = "interpret"


class StatisticChoice(StrEnum):
    """Which statistic of the cpu backend's samples is the measurement."""

    median = "median"
    min = "min"


class TimerChoice(StrEnum):
    """The cpu backend's clock."""

    wall = "wall"
    cpu = "cpu"


def preset_for_device(device_name: str) -> str:
    """The chip preset matching a CUDA device name (``NVIDIA H100 80GB HBM3`` → ``h100-sxm``).

    Raises:
        InfersimError: no preset matches; the message asks for ``--chip``.
    """
    for needle, preset in GPU_PRESETS:
        if needle in device_name.upper():
            return preset
    known = ", ".join(f"{n} -> {p}" for n, p in GPU_PRESETS)
    raise InfersimError(f"no chip preset matches GPU {device_name!r} ({known}); pass --chip")


class StepBar:
    """A progress bar with an ETA on stderr, fed by the validation runs' ``Step`` reports
    (``done`` of ``total`` units: seconds of expected run time, or kernels). It starts at the
    first report and leaves nothing behind when stopped (the results table follows)."""

    def __init__(self, title: str) -> None:
        from rich.progress import (
            BarColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.title = title
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=err_console,
            transient=True,
        )
        self.task: TaskID | None = None

    def __call__(self, step: Step) -> None:
        """Show ``step``: what runs now, and how far along the run is."""
        what = f"{self.title}: {step.what}"
        what = plain(what if len(what) <= 48 else what[:47] + "…")
        if self.task is None:
            self.bar.start()
            self.task = self.bar.add_task(what, total=step.total)
            self.bar.update(self.task, completed=step.done)
        else:
            self.bar.update(self.task, description=what, completed=step.done, total=step.total)

    def stop(self) -> None:
        """Remove the bar (nothing if it never started)."""
        if self.task is not None:
            self.bar.stop()


@contextmanager
def step_bar(title: str, quiet: bool) -> Iterator[StepBar | None]:
    """A :class:`StepBar` for the block (None when ``quiet``), stopped on the way out."""
    bar = None if quiet else StepBar(title)
    try:
        yield bar
    finally:
        if bar is not None:
            bar.stop()


def _print_results(results: dict[str, Any]) -> None:
    device = results["device"]
    title = f"{plain(results['suite'])} suite on {plain(device['name'])} ({results['backend']})"
    if results["chip"]:
        title += f" vs {plain(results['chip']['name'])} / {results['engine']}"
    table = Table(title=title)
    timed = any("measured_s" in r for r in results["rows"])
    checked = any("passed" in r for r in results["rows"])
    columns = ["kernel"]
    if timed:
        columns += ["bound", "measured", "spread", "predicted", "error"]
    if checked:
        columns += ["check error", "ok"]
    for col in columns:
        table.add_column(col, justify="left" if col in ("kernel", "bound") else "right")
    for r in results["rows"]:
        cells = [plain(r["label"])]
        if timed:
            cells += [
                r.get("bound", "-"),
                fmt_time(r["measured_s"]),
                f"{r['spread']:.0%}",
                fmt_time(r["predicted_s"]) if "predicted_s" in r else "-",
                f"{r['error']:+.1%}" if "error" in r else "-",
            ]
        if checked:
            cells += [f"{r['check_error']:.1e}", "yes" if r["passed"] else "NO"]
        table.add_row(*cells)
    console.print(table)
    s = results["summary"]
    if s.get("mape") is not None:
        console.print(f"MAPE {s['mape']:.1%}, max error {s['max_error']:.1%} over {s['n']} kernels")
    if "checks_passed" in s:
        console.print(f"correctness: {s['checks_passed']} passed, {s['checks_failed']} failed")
    sizing = results.get("sizing")
    if sizing:
        probe = sizing.get("probe") or {}
        rates = ", ".join(
            f"{d} {r / 1e9:.0f} GFLOP/s" for d, r in (probe.get("flops_per_s") or {}).items()
        )
        read = probe.get("read_bytes_per_s")
        console.print(
            f"sized for this host (probe: {rates}, read {read / 1e9 if read else 0:.0f} GB/s): "
            f"budget {sizing['budget_s']:g} s, estimated {sizing['estimated_s']:.0f} s, up to "
            f"{sizing['rounds']} rounds",
            highlight=False,
        )
        for change in sizing["resized"]:
            console.print(f"  resized {change['from']} -> {change['to']}", highlight=False,
                          markup=False)  # fmt: skip
        for label in sizing["dropped"]:
            console.print(f"  dropped {label} (equal to another once resized)", highlight=False,
                          markup=False)  # fmt: skip
    skipped = results.get("skipped", [])
    if skipped:
        console.print(f"skipped {len(skipped)} kernel(s), not timed:", highlight=False)
        for reason in sorted({row["reason"] for row in skipped}):
            labels = [row["label"] for row in skipped if row["reason"] == reason]
            console.print(f"  {reason}: {', '.join(labels)}", highlight=False, markup=False)
    console.print(f"wall time {results['wall_s']:.1f} s")


def validate_cmd(
    backend: Annotated[
        BackendChoice, typer.Option(help="cpu (torch), cuda (Triton), interpret (correctness)")
    ] = BackendChoice.cpu,
    chip: Annotated[
        str | None,
        typer.Option(
            help="Chip preset, YAML path or host-cpu "
            "(default: host-cpu on cpu, the GPU's preset on cuda)"
        ),
    ] = None,
    suite: Annotated[
        str | None,
        typer.Option(
            help="default, quick, gpu, tiny or a suite YAML "
            "(default: default on cpu, gpu on cuda, tiny on interpret)"
        ),
    ] = None,
    engine: Annotated[str, typer.Option(help=engine_help())] = DEFAULT_ENGINE,
    out: Annotated[Path | None, typer.Option(help="Write the results (.json or .csv)")] = None,
    threads: Annotated[
        int | None, typer.Option(min=1, help="cpu: torch threads (default: all cores)")
    ] = None,
    timer: Annotated[
        TimerChoice,
        typer.Option(help="cpu: wall clock, or cpu = process CPU time (needs --threads 1)"),
    ] = TimerChoice.wall,
    rounds: Annotated[
        int, typer.Option(min=3, max=1000, help="cpu: timing rounds (samples) per kernel")
    ] = 7,
    statistic: Annotated[
        StatisticChoice,
        typer.Option(help="cpu: the median or the minimum of the samples is the measurement"),
    ] = StatisticChoice.median,
    budget_s: Annotated[
        float | None,
        typer.Option(
            "--budget-s",
            min=1.0,
            max=86400.0,
            help="cpu: seconds the warm-up and timed rounds may take (fewer rounds, >= 3, if need "
            "be; a suite with a budget, such as quick, also shrinks its shapes to fit; default: "
            "the suite's budget, else 60)",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results JSON")] = False,
) -> None:
    """Run a kernel suite, predict it with infersim, and report predicted vs measured."""
    from infersim.arch_models import load_chip
    from infersim.validation.backends import make_backend
    from infersim.validation.harness import run_suite
    from infersim.validation.records import write_results
    from infersim.validation.suite import load_suite

    with user_errors():
        if engine not in ENGINES:
            raise InfersimError(f"unknown engine {engine!r}; allowed: {', '.join(ENGINES)}")
        the_suite = load_suite(suite or DEFAULT_SUITE[backend.value])
        options: dict[str, Any] = {}
        if backend is BackendChoice.cpu:
            options = {
                "threads": threads,
                "timer": timer.value,
                "rounds": rounds,
                "statistic": statistic.value,
            }
            if (budget_s or the_suite.budget_s) is not None:
                options["budget_s"] = budget_s or the_suite.budget_s
        the_backend = make_backend(backend.value, **options)
        the_chip: Chip | None = None
        host = chip == HOST_CHIP or (chip is None and backend is BackendChoice.cpu)
        if host and backend is not BackendChoice.cpu:
            raise InfersimError("the host-cpu chip predicts the cpu backend only")
        if chip is not None and not host:
            the_chip = load_chip(chip)
        elif backend is BackendChoice.cuda:
            the_chip = load_chip(preset_for_device(the_backend.device().name))
        with step_bar(f"{the_suite.name} suite", as_json) as bar:
            results = run_suite(the_backend, the_suite, the_chip, engine, bar, host_chip=host)
        if out is not None:
            write_results(results, out)
    if as_json:
        print_json(results)
    else:
        _print_results(results)
        if out is not None:
            console.print(f"results written to {out}")
    if results["summary"].get("checks_failed"):
        raise typer.Exit(1)


def _print_report(report: Any) -> None:
    def pct(value: float | None) -> str:
        return "-" if value is None else f"{value:.1%}"

    table = Table(title=f"calibration of {plain(report.fit.chip.name)}")
    for col in ("split", "kernels", "MAPE before", "MAPE after"):
        table.add_column(col, justify="left" if col == "split" else "right")
    table.add_row(
        "calibration",
        str(report.n_calibration),
        pct(report.calibration_mape_before),
        pct(report.calibration_mape_after),
    )
    table.add_row(
        "held-out",
        str(report.n_holdout),
        pct(report.holdout_mape_before),
        pct(report.holdout_mape_after),
    )
    console.print(table)
    console.print(f"held-out max error {pct(report.holdout_max_error)}")
    knobs = Table(title="knobs")
    knobs.add_column("calibration knob")
    knobs.add_column("value", justify="right")
    knobs.add_column("fitted")
    for knob, value in report.fit.knobs.items():
        knobs.add_row(
            knob,
            f"{value:.4g}",
            "yes" if knob in report.fit.fitted else "no (no row depends on it)",
        )
    console.print(knobs)


def calibrate_cmd(
    measurements: Annotated[
        Path,
        typer.Argument(
            help="results.json from infersim validate, a measurements .csv/.json "
            "(docs/measurements.md), or a benchmark tool's output (see --format)"
        ),
    ],
    chip: Annotated[
        str | None,
        typer.Option(
            help="Chip preset, YAML path or host-cpu to fit (default: the chip in results.json);"
            " or a comma list of presets (a model row's own chip column wins)"
        ),
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Write the calibrated chip YAML here")] = None,
    holdout_frac: Annotated[
        float, typer.Option(min=0.0, max=0.9, help="Fraction of kernels held out of the fit")
    ] = 0.3,
    seed: Annotated[int, typer.Option(help="Seed of the calibration/held-out split")] = 0,
    engine: Annotated[str, typer.Option(help=engine_help())] = DEFAULT_ENGINE,
    file_format: Annotated[
        str,
        typer.Option(
            "--format",
            help="What wrote the file: auto (told apart by its fields), infersim (measurement "
            "records), results (infersim validate), llama-bench, vllm or trtllm-bench",
        ),
    ] = "auto",
    defaults: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="KEY=VALUE: a model-row field the file does not record (chip, model, batch, "
            "prompt_len, output_len, ...), for every model row; repeat for several",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON")] = False,
    shared: Annotated[
        bool | None,
        typer.Option("--shared/--per-chip", help="One knob set for all chips, or one per chip "
                     "(uses the model-row fit; default --shared)"),
    ] = None,
    knobs: Annotated[
        str | None, typer.Option(help="Comma list of knobs to fit (default: those the rows move)")
    ] = None,
    folds: Annotated[int, typer.Option(min=0, help="K-fold cross-validation (0: none)")] = 0,
    holdout_by: Annotated[
        str | None, typer.Option(help="Hold out each chip, model or dtype in turn")
    ] = None,
    profile: Annotated[
        Path | None, typer.Option(help="Write the fitted knobs as a calibration profile here")
    ] = None,
    polish_evals: Annotated[
        int, typer.Option(min=0, help="Most engine evaluations of each fit's polish")
    ] = 30,
) -> None:
    """Fit a chip's calibration knobs to measurements; report held-out error; write YAML.

    Model rows, several chips (--chip a,b,c), --shared/--per-chip, --knobs, --folds,
    --holdout-by or --profile take the fit on kernel and model rows (docs/measurements.md)."""
    from infersim.arch_models import load_chip
    from infersim.validation.calibrate import calibrate, calibrated_chip, write_chip_yaml
    from infersim.validation.records import read_measurements

    with user_errors():
        if engine not in ENGINES:
            raise InfersimError(f"unknown engine {engine!r}; allowed: {', '.join(ENGINES)}")
        data = read_measurements(measurements, file_format, parse_settings(defaults or []))
        multi = chip is not None and "," in chip
        if data.model_rows or multi or shared is not None or knobs or folds or holdout_by or (
            profile is not None
        ):
            _calibrate_rows(data, chip, engine, shared is not False, knobs, folds, holdout_by,
                            seed, polish_evals, (profile, out), as_json)  # fmt: skip
            return
        if not data.rows:
            raise InfersimError(
                f"{measurements}: {len(data.model_rows)} model row(s) and no kernel rows: "
                "calibrating from model rows is not available yet; give kernel rows"
            )
        if data.model_rows and not as_json:
            err_console.print(
                f"note: {len(data.model_rows)} model row(s) not used: the fit takes kernel rows",
                markup=False, highlight=False,
            )  # fmt: skip
        if chip == HOST_CHIP:
            from infersim.validation import hostcpu

            with step_bar("host-cpu microbenchmarks", as_json) as bar:
                info = hostcpu.host_info()
                the_chip = hostcpu.host_chip(info, hostcpu.measure_host(info.cores, progress=bar))
        elif chip is not None:
            the_chip = load_chip(chip)
        elif data.chip is not None:
            the_chip = data.chip
        else:
            raise InfersimError(
                f"{measurements} names no chip: pass --chip (a preset, YAML path or host-cpu)"
            )
        report = calibrate(data.rows, the_chip, engine, holdout_frac, seed)
        result = calibrated_chip(the_chip, report, data.device)
        if out is not None:
            write_chip_yaml(result, out)
    if as_json:
        print_json({**report.to_dict(), "chip": result.name, "out": str(out) if out else None})
    else:
        _print_report(report)
        if out is not None:
            console.print(f"calibrated chip {result.name!r} written to {out}")


def _calibrate_rows(
    data: Any, chip: str | None, engine: str, shared: bool, knobs: str | None, folds: int,
    holdout_by: str | None, seed: int, polish_evals: int,
    outputs: tuple[Path | None, Path | None], as_json: bool,
) -> None:
    """The fit on kernel and model rows over one or several chips (inside ``user_errors``);
    ``outputs``: where the profile and (one chip only) the calibrated chip YAML go."""
    import datetime as dt

    from infersim.arch_models import load_chip
    from infersim.validation.calibrate import write_chip_yaml
    from infersim.validation.fitting import build_problem
    from infersim.validation.heldout import calibrate_problem
    from infersim.validation.profiles import profile_from, write_profile

    names = [c.strip() for c in (chip or "").split(",") if c.strip()]
    if HOST_CHIP in names:
        raise InfersimError(f"--chip {HOST_CHIP} measures this host and takes the kernel fit: "
                            "give kernel rows only, without the model-row options")  # fmt: skip
    names += sorted({r.chip for r in data.model_rows if r.chip and r.chip not in names})
    if not names and data.chip is not None:
        chips = {data.chip.name: data.chip}
    else:
        if not names:
            raise InfersimError("no chip: pass --chip (a preset or a comma list) or give the "
                                "rows a chip column")  # fmt: skip
        chips = {n: load_chip(n) for n in names}
        chips = {c.name: c for c in chips.values()}
    default = next(iter(chips)) if len(chips) == 1 or (chip and "," not in chip) else None
    problem = build_problem(data.rows, data.model_rows, chips, default)
    knob_list = [k.strip() for k in knobs.split(",") if k.strip()] if knobs else None
    result, report = calibrate_problem(problem, knob_list, shared, engine, folds, holdout_by,
                                       seed, polish_evals)  # fmt: skip
    profile, out = outputs
    if out is not None and len(result.chips) != 1:
        raise InfersimError(f"--out writes one chip's YAML and the fit has {len(result.chips)}: "
                            "write them with --profile")  # fmt: skip
    if profile is not None:
        write_profile(profile_from(result, report), profile)
    if out is not None:
        ((name, fitted),) = result.chips.items()
        hold = report["holdout"]
        note = (f"{name} calibrated {dt.date.today().isoformat()} by infersim calibrate on "
                f"{report['n_rows']} rows: MAPE {report['fit']['mape_before']:.1%} -> "
                f"{report['fit']['mape_after']:.1%}"
                + (f", held-out ({hold['method']}) {hold['mape_after']:.1%}" if hold else ""))
        write_chip_yaml(fitted.with_(name=f"{name}-calibrated"[:64], description=note), out)
    report["profile"] = str(profile) if profile else None
    report["out"] = str(out) if out else None
    if as_json:
        print_json(report)
        return
    _print_fit_report(report)


def _print_fit_report(report: dict[str, Any]) -> None:
    def pct(value: float | None) -> str:
        return "-" if value is None else f"{value:.1%}"

    fit, hold = report["fit"], report["holdout"]
    table = Table(title=f"calibration ({report['mode']}) of {plain(', '.join(report['chips']))}")
    for col in ("rows", "targets", "MAPE before", "MAPE after"):
        table.add_column(col, justify="left" if col == "rows" else "right")
    table.add_row("fit (all rows)", str(report["n_targets"]), pct(fit["mape_before"]),
                  pct(fit["mape_after"]))  # fmt: skip
    for cls, v in fit["by_class"].items():
        table.add_row(f"  {plain(cls)}", str(v["n"]), pct(v["mape_before"]), pct(v["mape_after"]))
    if hold:
        table.add_row(f"held-out ({hold['method']})", str(report["n_targets"]),
                      pct(hold["mape_before"]), pct(hold["mape_after"]))  # fmt: skip
        for g, v in hold["by_group"].items():
            table.add_row(f"  {plain(g)}", str(v["n"]), pct(v["mape_before"]),
                          pct(v["mape_after"]))  # fmt: skip
    console.print(table)
    knobs = Table(title="knobs")
    for col in ("group", "knob", "value", "preset", "rse", "note"):
        knobs.add_column(col, justify="right" if col in ("value", "preset", "rse")
                         else "left", no_wrap=col == "knob")  # fmt: skip
    for group, ks in report["knobs"].items():
        for k in ks:
            note = (f"at {k['at_bound']} bound" if k["at_bound"] else "") + (
                "" if k["identifiable"] else " not identifiable")
            rse = "-" if k["rse"] is None else f"{k['rse']:.1%}"
            knobs.add_row(plain(group), k["knob"], f"{k['value']:.4g}", f"{k['preset']:.4g}",
                          rse, note.strip())  # fmt: skip
    console.print(knobs)
    for w in report["warnings"]:
        err_console.print(f"warning: {w}", markup=False, highlight=False)
    console.print("fit: good" if report["good"] else "fit: NOT good (see the warnings)")
    if report.get("profile"):
        console.print(f"calibration profile written to {report['profile']}")
    if report.get("out"):
        console.print(f"calibrated chip written to {report['out']}")


def parse_settings(items: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings as a mapping (the last of a repeated key wins).

    Raises:
        InfersimError: an item without ``=`` or with an empty key.
    """
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InfersimError(f"--set {item!r}: expected KEY=VALUE (e.g. chip=h100-sxm)")
        out[key.strip()] = value.strip()
    return out


def register(app: typer.Typer) -> None:
    """Add the ``validate`` and ``calibrate`` commands to ``app``."""
    app.command(name="validate")(validate_cmd)
    app.command(name="calibrate")(calibrate_cmd)


def main() -> None:
    """``python -m infersim.validation validate|calibrate ...``: the two commands without the
    rest of the CLI (what ``scripts/gpu_validate.sh`` runs)."""
    app = typer.Typer(
        name="infersim-validation",
        help="Validate infersim against measured kernels and calibrate chips.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    register(app)
    app()
