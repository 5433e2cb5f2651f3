"""Executors run chunks of points and yield result tables as they finish (in any order).

- :class:`LocalExecutor` — a ``concurrent.futures`` process pool (``workers`` = 1 runs in this
  process); each worker receives the sweep context once, then chunks of points. On Linux the
  workers are forked (milliseconds; spawning re-imports everything, seconds), and
  :meth:`~LocalExecutor.open` forks them before the caller starts any thread (the progress bar).
- :class:`RayExecutor` — Ray tasks on a local Ray it starts (``address=None``) or on a running
  cluster (``"auto"`` or ``HOST:PORT``; infersim must be installed on its nodes).

Both keep at most two chunks per worker in flight, so memory stays flat however many points a
sweep has. Results do not depend on the executor: a point's row is a function of the point.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, Protocol

import pyarrow as pa

from infersim.errors import ConfigError
from infersim.explorer.evaluate import Context, evaluate_chunk
from infersim.explorer.space import Point


class Executor(Protocol):
    """Runs work under one sweep context; results come back in completion order."""

    workers: int

    def open(self, ctx: Context) -> None:
        """Start the workers for ``ctx`` (idempotent; ``map`` opens on first use)."""
        ...

    def close(self) -> None:
        """Stop the workers this executor started."""
        ...

    def map(self, ctx: Context, fn: Callable[[Context, Any], Any],
            items: Iterable[Any]) -> Iterator[Any]:
        """``fn(ctx, item)`` for every item (``fn`` a module-level function)."""
        ...


def run_points(executor: Executor, ctx: Context,
               chunks: Iterable[list[Point]]) -> Iterator[pa.Table]:
    """Evaluate chunks of points on ``executor``: one result table per chunk."""
    return executor.map(ctx, evaluate_chunk, chunks)


def default_workers() -> int:
    """The CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


_WORKER_CONTEXT: list[Context] = []
"""The context a pool worker received from its initializer (one per worker process)."""


def _init_worker(ctx: Context) -> None:
    _WORKER_CONTEXT[:] = [ctx]


def _call_in_worker(fn: Callable[[Context, Any], Any], item: Any) -> Any:
    return fn(_WORKER_CONTEXT[0], item)


def _ready(_ctx: Context, item: int) -> int:
    return item


def _bounded(submit: Callable[[Any], Any], wait_one: Callable[[list[Any]], tuple[Any, list[Any]]],
             items: Iterable[Any], limit: int) -> Iterator[Any]:
    """Submit ``items`` keeping at most ``limit`` in flight; yield results as they finish."""
    pending: list[Any] = []
    for item in items:
        pending.append(submit(item))
        while len(pending) >= limit:
            result, pending = wait_one(pending)
            yield result
    while pending:
        result, pending = wait_one(pending)
        yield result


class LocalExecutor:
    """A process pool on this machine (``workers`` processes; 1 = in this process)."""

    def __init__(self, workers: int | None = None) -> None:
        if workers is not None and workers < 1:
            raise ConfigError(f"workers = {workers}: must be >= 1")
        self.workers = workers or default_workers()
        self._pool: ProcessPoolExecutor | None = None
        self._ctx: Context | None = None

    def open(self, ctx: Context) -> None:
        """Fork (spawn, off Linux) the worker processes for ``ctx`` now."""
        if self.workers == 1 or (self._pool is not None and self._ctx is ctx):
            return
        self.close()
        method = "fork" if sys.platform == "linux" else "spawn"
        self._pool = ProcessPoolExecutor(
            self.workers, mp_context=multiprocessing.get_context(method),
            initializer=_init_worker, initargs=(ctx,),
        )
        self._ctx = ctx
        list(self._pool.map(_call_in_worker, [_ready] * self.workers, range(self.workers)))

    def close(self) -> None:
        """Shut the pool down (pending work is cancelled)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        self._pool, self._ctx = None, None

    def map(self, ctx: Context, fn: Callable[[Context, Any], Any],
            items: Iterable[Any]) -> Iterator[Any]:
        """``fn(ctx, item)`` for every item, yielded in completion order."""
        if self.workers == 1:
            for item in items:
                yield fn(ctx, item)
            return
        self.open(ctx)
        pool = self._pool
        assert pool is not None

        def wait_one(pending: list[Future[Any]]) -> tuple[Any, list[Future[Any]]]:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            first = next(iter(done))
            return first.result(), [f for f in pending if f is not first]

        yield from _bounded(lambda item: pool.submit(_call_in_worker, fn, item), wait_one,
                            items, 2 * self.workers)


def _ray_call(fn: Callable[[Context, Any], Any], ctx: Context, item: Any) -> Any:
    return fn(ctx, item)


class RayExecutor:
    """Ray tasks: a local Ray of ``workers`` CPUs, or the cluster at ``address``."""

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        try:
            import ray  # noqa: F401
        except ImportError:
            raise ConfigError("the ray executor needs Ray: pip install 'infersim[dist]'") from None
        if workers is not None and workers < 1:
            raise ConfigError(f"workers = {workers}: must be >= 1")
        self.address = address
        self.workers = workers or default_workers()
        self._started = False
        self._ctx: Context | None = None
        self._ctx_ref: Any = None

    def open(self, ctx: Context) -> None:
        """Start (or join) Ray and put ``ctx`` in its object store."""
        import ray

        if not ray.is_initialized():
            options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                       "configure_logging": False}
            if self.address:
                ray.init(address=self.address, **options)
                self.workers = max(1, int(ray.cluster_resources().get("CPU", self.workers)))
            else:
                ray.init(num_cpus=self.workers, **options)
            self._started = True
        if self._ctx is not ctx:
            self._ctx, self._ctx_ref = ctx, ray.put(ctx)

    def close(self) -> None:
        """Shut down the Ray this executor started (a cluster it joined keeps running)."""
        import ray

        if self._started:
            ray.shutdown()
        self._started, self._ctx, self._ctx_ref = False, None, None

    def map(self, ctx: Context, fn: Callable[[Context, Any], Any],
            items: Iterable[Any]) -> Iterator[Any]:
        """``fn(ctx, item)`` for every item as Ray tasks, yielded in completion order."""
        import ray

        self.open(ctx)
        task = ray.remote(num_cpus=1, max_retries=2)(_ray_call)

        def wait_one(pending: list[Any]) -> tuple[Any, list[Any]]:
            done, rest = ray.wait(pending, num_returns=1)
            return ray.get(done[0]), rest

        yield from _bounded(lambda item: task.remote(fn, self._ctx_ref, item), wait_one, items,
                            2 * self.workers)


def make_executor(kind: str, workers: int | None = None, address: str | None = None) -> Executor:
    """``local`` or ``ray`` (``address`` only for ray).

    Raises:
        ConfigError: unknown kind, workers < 1, an address for local, or Ray not installed.
    """
    if kind == "local":
        if address:
            raise ConfigError("--address is for the ray executor")
        return LocalExecutor(workers)
    if kind == "ray":
        return RayExecutor(address, workers)
    raise ConfigError(f"unknown executor {kind!r}; allowed: local, ray")
