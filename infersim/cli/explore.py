"""The explorer's commands: ``sweep``, ``report`` and ``pareto``, and the sweep's progress bar.

:func:`register` adds them to the app. Bad input exits with code 2 and one message
(``user_errors``), never a traceback.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.markup import escape
from rich.table import Table

from infersim.cli.common import console, err_console, plain, print_json, user_errors, writable
from infersim.errors import ConfigError, InfersimError

if TYPE_CHECKING:  # rich.progress is imported by the sweep's bar itself (a fast start)
    from rich.progress import ProgressColumn, TaskID

T = TypeVar("T")


class ExecutorChoice(StrEnum):
    """Where points are evaluated."""

    local = "local"
    ray = "ray"


ExecutorOpt = Annotated[
    ExecutorChoice,
    typer.Option(
        help=escape("local: a process pool; ray: Ray tasks (pip install 'infersim[dist]')")
    ),
]
WorkersOpt = Annotated[
    int | None,
    typer.Option(
        min=1, help="Worker processes (default: every CPU; small sweeps run in this process)"
    ),
]
AddressOpt = Annotated[
    str | None,
    typer.Option(help="Ray cluster to join: auto or HOST:PORT (default: start a local Ray)"),
]
RayTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--ray-timeout",
        help="Seconds to wait for the Ray cluster at --address to answer before giving up "
        "(exit 2)",
    ),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar")]

RAY_TIMEOUT_S = 30.0
"""The default of ``--ray-timeout`` (as :data:`infersim.explorer.executors.RAY_CONNECT_TIMEOUT_S`,
which the CLI does not import at start)."""


def _executor(kind: ExecutorChoice, workers: int | None, address: str | None,
              ray_timeout_s: float = RAY_TIMEOUT_S) -> Any:
    from infersim.explorer.executors import make_executor

    if kind == ExecutorChoice.local and workers is None and address is None:
        return None  # run_sweep picks in-process or a pool by the sweep's size
    return make_executor(kind.value, workers, address, ray_timeout_s)


def _is_results(path: Path) -> bool:
    from infersim.explorer.store import SHARDS

    return (path / SHARDS).is_dir()


def _rate_column(start: Callable[[], int]) -> ProgressColumn:
    """A column with the points per minute of a progress task since it started, the figure
    the sweep's summary line gives (``start()``: the points already done when the bar started,
    e.g. resumed ones, which are not counted). The class is made here, so that rich.progress
    is imported only by a sweep that shows a bar."""
    from rich.progress import ProgressColumn, Task
    from rich.table import Column
    from rich.text import Text

    from infersim.units import fmt_rate

    class RateColumn(ProgressColumn):
        """Points per minute of a progress task since its start."""

        def __init__(self) -> None:
            super().__init__(table_column=Column(no_wrap=True, min_width=18))

        def render(self, task: Task) -> Text:
            """``1,236 points/min`` (blank until a point is done)."""
            elapsed = task.finished_time if task.finished else task.elapsed
            done = task.completed - start()
            if not elapsed or done <= 0:
                return Text("", style="progress.data.speed")
            return Text(fmt_rate(done / elapsed * 60, "points/min"), style="progress.data.speed")

    return RateColumn()


class SweepBar:
    """A sweep's progress bar on stderr, fed by ``run_sweep``'s ``progress(done, total)``.

    It starts at the first report, which comes once the workers have started: a process pool
    forks before the bar's refresh thread exists. Its rate is points per minute since then,
    as the summary line gives it; after the points, :meth:`stage` names the extra table being
    computed."""

    def __init__(self, description: str) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.table import Column

        self.description = description
        self.started_at = 0
        self.bar = Progress(
            TextColumn("[progress.description]{task.description}",
                       table_column=Column(no_wrap=True, overflow="ellipsis", max_width=24)),
            BarColumn(bar_width=10),
            MofNCompleteColumn(),
            _rate_column(lambda: self.started_at),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=err_console,
            transient=False,
        )
        self.task: TaskID | None = None

    def __call__(self, done: int, total: int | None) -> None:
        """Show ``done`` of ``total`` points (``total`` None: not known)."""
        if self.task is None:
            self.bar.start()
            self.started_at = done
            self.task = self.bar.add_task(plain(self.description), total=total, completed=done)
        else:
            self.bar.update(self.task, completed=done)

    def stage(self, name: str) -> None:
        """Say which extra table the sweep computes now (the points are done)."""
        if self.task is not None:
            self.bar.update(self.task, description=plain(f"{name} table"))

    def stop(self) -> None:
        """Leave the bar's last state on the terminal (nothing if it never started)."""
        if self.task is not None:
            self.bar.stop()


def _run(
    spec_path: Path | None,
    out: Path,
    executor: Any,
    resume: bool,
    quiet: bool,
    chunk_size: int | None = None,
) -> Any:
    from infersim.explorer.defaults import default_spec
    from infersim.explorer.spec import load_spec
    from infersim.explorer.sweep import LARGE_SWEEP_POINTS, check_size, run_sweep

    spec = default_spec() if spec_path is None else load_spec(spec_path)
    points = check_size(spec)
    if points > LARGE_SWEEP_POINTS:
        err_console.print(
            f"note: {points:,} points to evaluate: this may take hours and gigabytes of "
            "results (a killed sweep continues with --resume)", markup=False, highlight=False,
        )
    bar = None if quiet else SweepBar(spec.name)
    try:
        return run_sweep(
            spec, out, executor=executor, resume=resume, chunk_size=chunk_size, progress=bar,
            stage=bar.stage if bar is not None else None,
        )
    finally:
        if bar is not None:
            bar.stop()


def _summary_line(summary: Any, where: str | None = None) -> str:
    """One line: points evaluated, stored and failed; seconds in all, the evaluation's rate
    (the progress bar's figure) and the extra tables' seconds; the results folder (``where``
    replaces its path, e.g. for a temporary folder gone when the command ends)."""
    from infersim.units import fmt_rate, fmt_time

    errors = f", {summary.errors:,} could not run" if summary.errors else ""
    rate = (f"{fmt_rate(summary.points_per_min, 'points/min')} over "
            f"{fmt_time(summary.evaluate_s)} of evaluation" if summary.evaluated else
            "nothing to evaluate")
    extras = f", extra tables {fmt_time(summary.extras_s)}" if summary.extras_s >= 0.05 else ""
    return (
        f"{summary.points:,} points: {summary.evaluated:,} evaluated, {summary.skipped:,} "
        f"already stored{errors} in {fmt_time(summary.elapsed_s)} ({rate}{extras}) → "
        f"{where or summary.directory}"
    )


def sweep(
    spec: Annotated[
        Path, typer.Argument(help="Sweep spec (YAML)", metavar="SPEC.yaml", show_default=False)
    ],
    out: Annotated[Path, typer.Option("--out", help="Results folder (Parquet shards)")],
    executor: ExecutorOpt = ExecutorChoice.local,
    workers: WorkersOpt = None,
    address: AddressOpt = None,
    ray_timeout: RayTimeoutOpt = RAY_TIMEOUT_S,
    resume: Annotated[
        bool, typer.Option("--resume", help="Evaluate only the points the folder lacks")
    ] = False,
    chunk_size: Annotated[
        int | None, typer.Option(min=1, help="Points per task (default: sized to the workers)")
    ] = None,
    csv: Annotated[Path | None, typer.Option("--csv", help="Also export every row to CSV")] = None,
    quiet: QuietOpt = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON")] = False,
) -> None:
    """Evaluate every point of a sweep spec into a results folder (resumable). A spec of more
    than 10,000,000 points is refused before any work (exit 2: narrow the axes or use a random
    or lhs search); above 100,000 the count is noted first."""
    with user_errors():
        writable(out, "--out", folder=True)
        if csv is not None:
            writable(csv, "--csv")
        runner = _executor(executor, workers, address, ray_timeout)
        summary = _run(spec, out, runner, resume, quiet, chunk_size)
        rows = None
        if csv is not None:
            from infersim.explorer.store import export_csv

            rows = _written(csv, "--csv", lambda: export_csv(out, csv))
    if as_json:
        print_json(
            {
                "directory": str(summary.directory),
                "points": summary.points,
                "evaluated": summary.evaluated,
                "skipped": summary.skipped,
                "errors": summary.errors,
                "elapsed_s": summary.elapsed_s,
                "evaluate_s": summary.evaluate_s,
                "extras_s": summary.extras_s,
                "points_per_min": summary.points_per_min,
                "csv": str(csv) if csv else None,
                "display": {"summary": _summary_line(summary)},
            }
        )
        return
    console.print(_summary_line(summary), markup=False, highlight=False)
    if csv is not None:
        console.print(f"{rows:,} rows → {csv}", markup=False, highlight=False)


def report(
    source: Annotated[
        Path | None,
        typer.Argument(
            help="A results folder, or a sweep spec to run first; none: the packaged default sweep",
            metavar="SOURCE",
            show_default=False,
        ),
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="The HTML report")] = Path(
        "infersim-report.html"
    ),
    static: Annotated[
        Path | None, typer.Option("--static", help="Also write each figure as PNG and SVG here")
    ] = None,
    results: Annotated[
        Path | None,
        typer.Option(
            help="Where a spec's sweep goes (kept; rerunning reuses it). Default: a "
            "temporary folder"
        ),
    ] = None,
    validation: Annotated[
        list[Path] | None,
        typer.Option(
            "--validation",
            help="Results of `infersim validate` (repeatable): the predicted-vs-measured scatter",
        ),
    ] = None,
    executor: ExecutorOpt = ExecutorChoice.local,
    workers: WorkersOpt = None,
    address: AddressOpt = None,
    ray_timeout: RayTimeoutOpt = RAY_TIMEOUT_S,
    quiet: QuietOpt = False,
) -> None:
    """Write a self-contained HTML design report (runs the sweep first when given a spec)."""
    from infersim.explorer.report import write_report

    with user_errors(), tempfile.TemporaryDirectory(prefix="infersim-sweep-") as tmp:
        writable(out, "--out")
        if static is not None:
            writable(static, "--static", folder=True)
        if results is not None:
            writable(results, "--results", folder=True)
        if source is not None and source.is_dir():
            if not _is_results(source):
                raise ConfigError(f"{source}: not a results folder (run infersim sweep first)")
            folder, label = source, None
        else:
            if source is not None and not source.is_file():
                raise ConfigError(f"{source}: no such spec file or results folder")
            folder = results or Path(tmp) / "results"
            label = None if results else "a temporary folder (pass --results DIR to keep them)"
            resume = _is_results(folder)
            runner = _executor(executor, workers, address, ray_timeout)
            summary = _run(source, folder, runner, resume, quiet)
            err_console.print(_summary_line(summary, label), markup=False, highlight=False)
        result = _written(
            out, "--out", lambda: write_report(folder, out, static, label, validation or ())
        )
    for image in result.images:
        err_console.print(f"figure → {image}", markup=False, highlight=False)
    console.print(str(result.path), markup=False, highlight=False, soft_wrap=True)


def pareto(
    results: Annotated[
        Path, typer.Argument(help="Results folder", metavar="RESULTS_DIR", show_default=False)
    ],
    objectives: Annotated[
        str | None,
        typer.Option(
            help="METRIC:min|max,... e.g. tokens_per_s:max,area_mm2:min (default: the "
            "spec's objectives)"
        ),
    ] = None,
    by: Annotated[
        str, typer.Option(help="Rank within groups of this column ('' = all rows together)")
    ] = "workload",
    include_infeasible: Annotated[
        bool, typer.Option("--all", help="Also rank points that break a constraint")
    ] = False,
    top: Annotated[int, typer.Option(min=1, help="Front rows shown per group")] = 15,
    csv: Annotated[
        Path | None, typer.Option("--csv", help="Write every ranked row (pareto_rank) to CSV")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the fronts as JSON")] = False,
) -> None:
    """Print the Pareto front of a results folder over 1-3 objectives."""
    from infersim.explorer.pareto import front as front_rows
    from infersim.explorer.pareto import pareto as rank
    from infersim.explorer.pareto import parse_objectives
    from infersim.explorer.report.data import ReportData

    with user_errors():
        if csv is not None:
            writable(csv, "--csv")
        data = ReportData.load(results)
        objs = parse_objectives(objectives) if objectives else data.objectives
        if not 1 <= len(objs) <= 3:
            raise ConfigError(f"give 1 to 3 objectives, got {len(objs)}")
        df = data.ok
        if not include_infeasible and "feasible" in df:
            df = df[df["feasible"].fillna(False).astype(bool)]
        if df.empty:
            raise ConfigError(
                f"{results}: no point to rank (every one failed or broke a "
                "constraint; --all ranks those too)"
            )
        group = by or None
        if csv is not None:
            ranked = rank(df, objs, group)
            _written(csv, "--csv", lambda: ranked.to_csv(csv, index=False))
        best = front_rows(df, objs, group)
    ident = [
        c
        for c in ("workload", "chip", "design", "technique", "dataflow", "engine")
        if c in best and best[c].notna().any()
    ]
    metrics = [o.metric for o in objs]
    if as_json:
        print_json(
            [
                {k: _plain(v) for k, v in row.items()}
                for row in best[["key", *ident, *metrics]].to_dict("records")
            ]
        )
        return
    from infersim.explorer.metrics import format_metric, header

    senses = ", ".join(f"{header(o.metric)} ({'higher' if o.sense == 'max' else 'lower'} is "
                       "better)" for o in objs)
    groups = best.groupby(group, sort=False) if group else [("all points", best)]
    for name, part in groups:
        table = Table(
            title=f"Pareto front — {plain(name)} ({len(part)} of "
            f"{int((df[group] == name).sum()) if group else len(df)} points)",
            caption=f"objectives: {plain(senses)}; best first, near-ties (within 1%) broken "
            "by the next objective; ≈: an estimate, not a published figure",
        )
        shown = [c for c in ident if c != group]
        for col in shown:
            table.add_column(col, justify="left")
        for o in objs:
            table.add_column(header(o.metric), justify="right")
        for _, row in part.head(top).iterrows():
            marked = str(row.get("estimated_figures") or "").split(",")  # ≈: an estimate
            table.add_row(
                *(plain(row[c]) if row[c] is not None else "" for c in shown),
                *(("≈" if m in marked else "") + format_metric(m, row[m]) for m in metrics),
            )
        console.print(table)


def _written(path: Path, what: str, write: Callable[[], T]) -> T:
    """Run ``write``; a failed write is a clear error naming the path (finished work stays)."""
    try:
        return write()
    except OSError as exc:
        raise InfersimError(f"{what} {path}: cannot write ({exc.strerror or exc})") from None


def _plain(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value.item() if hasattr(value, "item") else value


def register(app: typer.Typer) -> None:
    """Add ``sweep``, ``report`` and ``pareto`` to ``app``."""
    app.command(name="sweep")(sweep)
    app.command(name="report")(report)
    app.command(name="pareto")(pareto)
