"""Run a sweep: points → executor → result store (→ extras), reporting progress to a callback.

:func:`run_sweep` streams points lazily in chunks, keeps a bounded number in flight, and writes
a Parquet shard whenever ``flush_rows`` rows or ``flush_s`` seconds have gathered, so memory
stays flat and a killed sweep loses at most the unflushed rows. With ``resume`` it skips every
point whose key the store already holds. The ``optimize`` search runs scipy's differential
evolution, one population per generation through the same executor and store. Progress goes to
a ``progress(done, total)`` callback (the CLI draws it as a bar) and the extra tables' names to
``stage(name)`` as each starts; without them the sweep is silent. The summary's rate is points
evaluated per minute of evaluation (the extra tables' time is reported apart), the figure a bar
fed by ``progress`` shows too.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from infersim.errors import ConfigError
from infersim.explorer.evaluate import Context
from infersim.explorer.executors import Executor, LocalExecutor, default_workers, run_points
from infersim.explorer.extras import EXTRAS
from infersim.explorer.space import Design, DesignSpace, Point
from infersim.explorer.spec import OptimizeSearch, SweepSpec
from infersim.explorer.store import ResultStore


@dataclass(frozen=True)
class SweepSummary:
    """What a sweep did: points in the search, evaluated now, already stored, failed, and the
    wall time in seconds: ``elapsed_s`` in all, ``evaluate_s`` of it evaluating points (the
    rest: opening the store and workers, and the extra tables)."""

    directory: Path
    points: int
    evaluated: int
    skipped: int
    errors: int
    elapsed_s: float
    evaluate_s: float = 0.0

    @property
    def extras_s(self) -> float:
        """Seconds not spent evaluating points (workers, store, the extra tables)."""
        return max(self.elapsed_s - self.evaluate_s, 0.0)

    @property
    def points_per_min(self) -> float:
        """Points evaluated per minute of evaluation (from the first progress report, when the
        workers have started, to the last result): what a progress bar shows."""
        seconds = self.evaluate_s or self.elapsed_s
        return self.evaluated / seconds * 60 if seconds else 0.0


SweepProgress = Callable[[int, int | None], None]
"""Called with (points done, points in the search or None when not known): once when the
workers have started, then as results arrive."""

SweepStage = Callable[[str], None]
"""Called with the name of each extra table as its computation starts (after the points)."""


def _chunks(points: Iterable[Point], size: int) -> Iterator[list[Point]]:
    it = iter(points)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


class _Writer:
    """Buffers result tables and appends them to the store as shards."""

    def __init__(self, store: ResultStore, flush_rows: int, flush_s: float) -> None:
        self.store = store
        self.flush_rows = flush_rows
        self.flush_s = flush_s
        self.buffer: list[pa.Table] = []
        self.rows = 0
        self.last = time.monotonic()
        self.errors = 0
        self.written = 0

    def add(self, table: pa.Table) -> None:
        self.buffer.append(table)
        self.rows += table.num_rows
        self.errors += table.num_rows - table.column("error").null_count
        if self.rows >= self.flush_rows or time.monotonic() - self.last >= self.flush_s:
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            self.store.append(pa.concat_tables(self.buffer))
            self.written += self.rows
        self.buffer, self.rows, self.last = [], 0, time.monotonic()


def run_sweep(
    spec: SweepSpec,
    directory: str | Path,
    executor: Executor | None = None,
    resume: bool = False,
    chunk_size: int | None = None,
    flush_rows: int = 5_000,
    flush_s: float = 2.0,
    progress: SweepProgress | None = None,
    stage: SweepStage | None = None,
) -> SweepSummary:
    """Evaluate every point of ``spec`` into the result store at ``directory``; ``progress``, if
    given, is called with (points done, total) as results arrive (:data:`SweepProgress`), and
    ``stage`` with each extra table's name as it starts (:data:`SweepStage`).

    Raises:
        ConfigError: the spec has more than :data:`MAX_SWEEP_POINTS` points; the folder
            already holds results and ``resume`` is off, or it holds a different spec's
            results; another sweep is writing the folder.
    """
    start = time.perf_counter()
    out = Path(directory)
    check_size(spec)
    spec_doc = spec.model_dump(mode="json")
    with ResultStore(out) as store:
        stored = store.read_spec()
        if store.shards() and not resume:
            raise ConfigError(f"{out} already holds results: pass --resume to finish that "
                              "sweep, or choose another --out")
        if resume and stored is not None and stored != spec_doc:
            raise ConfigError(f"{out} holds the results of a different spec; --resume needs "
                              "the spec it was started with")
        store.write_spec(spec_doc)
        done = store.keys() if resume else set()
        ctx = Context(spec)
        writer = _Writer(store, flush_rows, flush_s)
        space = ctx.space
        designs = space.count_designs()
        total = designs * space.points_per_design if designs is not None else None
        if executor is None:  # small sweeps run faster in this process than in a pool
            small = total is not None and _work(ctx, total - len(done)) < SMALL_SWEEP_POINTS
            executor = LocalExecutor(1 if small else default_workers())
        size = chunk_size or _chunk_size(total, executor.workers, space.points_per_design)
        executor.open(ctx)  # workers start before the first progress report (a bar's thread)
        clock = _Clock()
        try:
            skipped = _run(ctx, store, executor, writer, size, done, total, progress, stage,
                           clock)
        finally:
            executor.close()
    points = writer.written + skipped
    return SweepSummary(out, points, writer.written, skipped, writer.errors,
                        time.perf_counter() - start, clock.seconds)


class _Clock:
    """Seconds between its ``start`` and ``stop`` (the evaluation of the points)."""

    def __init__(self) -> None:
        self.started = 0.0
        self.seconds = 0.0

    def start(self) -> None:
        self.started = time.perf_counter()

    def stop(self) -> None:
        self.seconds = time.perf_counter() - self.started


MAX_SWEEP_POINTS = 10_000_000
"""Most points a sweep may have (refused above, before any work): some 10 GB of results and
hours of evaluation on a workstation. A larger space wants ``search: random`` or ``lhs``."""

LARGE_SWEEP_POINTS = 100_000
"""Above this many points the CLI notes the count before the sweep starts (minutes or more)."""


def planned_points(spec: SweepSpec) -> tuple[int, int]:
    """(designs, points per design) of ``spec``: a design's points are its workloads ×
    techniques × engine/dataflow pairs; for ``optimize``, the designs are at most every
    generation's population, (maxiter + 1) × popsize × axes per swept chip."""
    space = DesignSpace(spec)
    designs = space.count_designs()
    search = spec.search
    if designs is None:
        assert isinstance(search, OptimizeSearch)
        designs = sum((search.maxiter + 1) * search.popsize * len(dims) if dims else 1
                      for dims in space.dims)
    return designs, space.points_per_design


def check_size(spec: SweepSpec) -> int:
    """The points ``spec`` evaluates (:func:`planned_points`).

    Raises:
        ConfigError: more than :data:`MAX_SWEEP_POINTS`, with the count and its factors.
    """
    designs, per_design = planned_points(spec)
    points = designs * per_design
    if points > MAX_SWEEP_POINTS:
        raise ConfigError(
            f"sweep {spec.name!r} has {points:,} points ({designs:,} designs x {per_design:,} "
            f"points each: workloads x techniques x engines/dataflows); infersim sweeps at "
            f"most {MAX_SWEEP_POINTS:,}: narrow the axes (fewer num), or use search: random "
            "or lhs with n designs"
        )
    return points


SMALL_SWEEP_POINTS = 2000
"""Below this much work (:func:`_work`: about this many roofline points) and without an
explicit executor, a sweep runs in this process: a pool's start would cost more than it
saves."""

ENGINE_WORK: dict[str, float] = {"roofline": 1.0, "analytic": 10.0, "events": 300.0}
"""What a cold point (or a serving run's request) costs per engine, in roofline points: the
cycle-model engines search every new op's mapping (``benchmarks/bench_engines.py``: an
analytic whole-model point 7-11x a roofline one; ``bench_events.py``: the event engine
hundreds of times)."""


def _work(ctx: Context, points: int) -> float:
    """The sweep's work in roofline points: ``points`` points, each at the mean
    :data:`ENGINE_WORK` of the spec's engines, plus its serving runs' requests (one run per
    base chip and model)."""
    spec, space = ctx.spec, ctx.space
    engines = [ENGINE_WORK.get(e, ENGINE_WORK["events"]) for e in spec.engines] or [1.0]
    work = points * sum(engines) / len(engines)
    if spec.serving is not None:
        from infersim.simulator.serving import ServingConfig

        models = {case.model.name for case in space.cases if case.model is not None}
        # a whole trace (no request count): taken as large
        requests = ServingConfig.model_validate(spec.serving.config).workload.requests
        requests = SMALL_SWEEP_POINTS if requests is None else requests
        runs = len(space.bases) * len(models)
        work += runs * requests * ENGINE_WORK.get(spec.serving.engine, ENGINE_WORK["events"])
    return work


def _run(ctx: Context, store: ResultStore, executor: Executor, writer: _Writer, size: int,
         done: set[str], total: int | None, progress: SweepProgress | None,
         stage: SweepStage | None, clock: _Clock) -> int:
    """Evaluate the missing points, then the extras; returns points skipped as stored."""
    spec, space = ctx.spec, ctx.space
    skipped = 0
    completed = min(len(done), total or 0)

    def advance(rows: int) -> None:
        nonlocal completed
        completed += rows
        if progress is not None:
            progress(completed, total)

    def todo(points: Iterable[Point]) -> Iterator[Point]:
        nonlocal skipped
        for p in points:
            if p.key in done:
                skipped += 1
            else:
                yield p

    clock.start()
    advance(0)
    for table in run_points(executor, ctx, _chunks(todo(space.points()), size)):
        writer.add(table)
        advance(table.num_rows)
    if isinstance(spec.search, OptimizeSearch):
        skipped += _optimize(ctx, store, executor, writer, size, advance)
    writer.flush()
    clock.stop()
    for name, fn in EXTRAS.items() if spec.extras else ():
        if not store.has_extra(name):
            if stage is not None:
                stage(name)
            extra = fn(ctx, executor)
            if extra is not None:
                store.write_extra(name, extra)
    return skipped


def _chunk_size(total: int | None, workers: int, per_design: int) -> int:
    if total is None:
        return max(per_design, 64)
    target = math.ceil(total / (workers * 4))
    return int(min(max(target, per_design, 32), 1024))


# --- optimize -----------------------------------------------------------------------------


class _Fitness:
    """Scores designs by the objective's geometric mean over their points, with penalties."""

    PENALTY = 1e6

    def __init__(self, ctx: Context, known: dict[str, dict[str, Any]]) -> None:
        search = ctx.spec.search
        assert isinstance(search, OptimizeSearch)
        from infersim.explorer.metrics import parse_objective

        self.objective = parse_objective(search.objective or ctx.spec.objectives[0])
        self.constraints = ctx.constraints
        self.known = known

    @property
    def columns(self) -> list[str]:
        """Result columns a score needs."""
        return ["key", "error", self.objective.metric, *(c.metric for c in self.constraints)]

    def remember(self, table: pa.Table) -> None:
        """Keep the columns a score needs of freshly evaluated rows."""
        for row in table.select(self.columns).to_pylist():
            self.known[row["key"]] = row

    def score(self, points: list[Point]) -> float:
        """Lower is better: ∓ mean log objective, or a penalty above any feasible score."""
        logs, violation = [], 0.0
        for p in points:
            row = self.known[p.key]
            value = row.get(self.objective.metric)
            if row.get("error") or value is None or not value > 0:
                violation += 1.0
                continue
            logs.append(math.log(value))
            violation += sum(c.violation(row.get(c.metric)) for c in self.constraints)
        if violation or not logs:
            return self.PENALTY * (1.0 + violation)
        mean = sum(logs) / len(logs)
        return -mean if self.objective.sense == "max" else mean


def _optimize(ctx: Context, store: ResultStore, executor: Executor, writer: _Writer, size: int,
              advance: Callable[[int], None]) -> int:
    """Differential evolution over each swept chip's axes; returns points found in the store."""
    from scipy.optimize import differential_evolution

    search = ctx.spec.search
    assert isinstance(search, OptimizeSearch)
    space: DesignSpace = ctx.space
    fitness = _Fitness(ctx, {})
    skipped = 0
    writer.flush()
    for shard in store.shards():  # what earlier generations (or a killed run) evaluated
        fitness.remember(pq.read_table(shard, columns=fitness.columns))
    for entry, dims in enumerate(space.dims):
        if not dims:
            continue
        bounds = [d.bounds() for d in dims]

        def population(x: np.ndarray, entry: int = entry, dims: list[Any] = dims) -> np.ndarray:
            nonlocal skipped
            cols = x.T if x.ndim == 2 else x[None, :]
            designs: list[Design] = [
                space.design(entry, [d.from_x(float(v)) for d, v in zip(dims, col, strict=True)])
                for col in cols
            ]
            by_design = {d.key: space.points_of(d) for d in designs}
            new = {p.key: p for pts in by_design.values() for p in pts
                   if p.key not in fitness.known}
            skipped += sum(len(pts) for pts in by_design.values()) - len(new)
            for table in run_points(executor, ctx, _chunks(list(new.values()), size)):
                writer.add(table)
                fitness.remember(table)
                advance(table.num_rows)
            return np.array([fitness.score(by_design[d.key]) for d in designs])

        differential_evolution(
            population,
            [(lo, hi) for lo, hi, _ in bounds],
            integrality=[integral for _, _, integral in bounds],
            maxiter=search.maxiter,
            popsize=search.popsize,
            rng=np.random.default_rng([search.seed, entry]),
            polish=False,
            tol=0.0,
            updating="deferred",
            vectorized=True,
            init="latinhypercube",
        )
    return skipped
