"""Executors run chunks of points and yield result tables as they finish (in any order).

- :class:`LocalExecutor` — a ``concurrent.futures`` process pool (``workers`` = 1 runs in this
  process); each worker receives the sweep context once, then chunks of points. On Linux the
  workers are forked (milliseconds; spawning re-imports everything, seconds), and
  :meth:`~LocalExecutor.open` forks them before the caller starts any thread (the progress bar).
- :class:`RayExecutor` — Ray tasks on a local Ray it starts (``address=None``) or on a running
  cluster (``"auto"`` or ``HOST:PORT``; infersim must be installed on its nodes), joined
  within a bounded time (:data:`RAY_CONNECT_TIMEOUT_S`) or refused.

Both keep at most two chunks per worker in flight, so memory stays flat however many points a
sweep has. Results do not depend on the executor: a point's row is a function of the point.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, Protocol

import pyarrow as pa

from infersim.errors import ConfigError
from infersim.explorer.evaluate import Context, evaluate_chunk
from infersim.explorer.space import Point
from infersim.simulator.engines import store


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
    try:
        return fn(_WORKER_CONTEXT[0], item)
    finally:
        store.flush()  # a forked worker never runs its exit handlers


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
    try:
        return fn(ctx, item)
    finally:
        store.flush()


RAY_CONNECT_TIMEOUT_S = 30.0
"""How long joining a Ray cluster may take before the sweep gives up (Ray itself retries a
missing head for many minutes)."""


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of a ``HOST:PORT`` (or ``ray://HOST:PORT``) address; None for ``auto``.

    Raises:
        ConfigError: neither ``auto`` nor ``HOST:PORT`` with a port in 1..65535.
    """
    if address == "auto":
        return None
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    number = port.isascii() and port.isdigit() and 1 <= int(port) <= 65535
    if not (sep and host and number):
        raise ConfigError(f"--address {address!r}: expected auto or HOST:PORT (a port in "
                          "1..65535)")
    return host.strip("[]"), int(port)


def _probe(address: str, host: str, port: int, timeout_s: float) -> None:
    """Wait up to ``timeout_s`` for ``host:port`` to accept a TCP connection (a head node may
    still be starting).

    Raises:
        ConfigError: nothing accepted a connection there in time, with the last reason.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        try:
            socket.create_connection((host, port), timeout=max(0.1, min(left, 5.0))).close()
            return
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
            if deadline - time.monotonic() <= 0:
                raise ConfigError(
                    f"cannot reach the Ray cluster at {address} within {timeout_s:g} s "
                    f"({reason}): start its head there (ray start --head --port={port}), or "
                    "give another --address (--ray-timeout sets the wait)"
                ) from None
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))


class _NoThreadNotice(logging.Filter):
    """Drops Ray's notice that ``ray.init`` off the main thread sets no SIGTERM handler (the
    sweep needs none: SIGTERM ends the process as it would without Ray)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("SIGTERM handler is not set")


def _join(address: str, timeout_s: float, wait_s: float, options: dict[str, Any]) -> None:
    """``ray.init(address)`` given at most ``wait_s`` of the ``timeout_s`` allowed: Ray retries
    an address without a cluster for many minutes, so the call runs in a daemon thread that is
    abandoned when it does not return in time (the process can still exit).

    Raises:
        ConfigError: no answer in time, or Ray's ConnectionError (no cluster at ``auto``).
    """
    import ray

    failure: list[BaseException] = []

    def init() -> None:
        try:
            ray.init(address=address, **options)
        except BaseException as exc:  # handed to the caller's thread, raised there
            failure.append(exc)

    logging.getLogger("ray._private.worker").addFilter(_NoThreadNotice())
    thread = threading.Thread(target=init, name="ray-init", daemon=True)
    thread.start()
    thread.join(wait_s)
    if thread.is_alive():
        raise ConfigError(
            f"the Ray cluster at {address} did not answer within {timeout_s:g} s (is it a Ray "
            "head's GCS port?); --ray-timeout sets the wait"
        )
    if failure:
        if isinstance(failure[0], ConnectionError):
            raise ConfigError(f"cannot join the Ray cluster at {address}: {failure[0]}") from None
        raise failure[0]


class RayExecutor:
    """Ray tasks: a local Ray of ``workers`` CPUs, or the cluster at ``address`` (joined
    within ``connect_timeout_s``)."""

    def __init__(self, address: str | None = None, workers: int | None = None,
                 connect_timeout_s: float = RAY_CONNECT_TIMEOUT_S) -> None:
        try:
            import ray  # noqa: F401
        except ImportError:
            raise ConfigError("the ray executor needs Ray: pip install 'infersim[dist]'") from None
        if workers is not None and workers < 1:
            raise ConfigError(f"workers = {workers}: must be >= 1")
        if not 0 < connect_timeout_s <= 3600:
            raise ConfigError(f"--ray-timeout {connect_timeout_s:g}: must be > 0 and <= 3600 s")
        self.target = _host_port(address) if address else None
        self.address = address
        self.workers = workers or default_workers()
        self.connect_timeout_s = connect_timeout_s
        self._started = False
        self._ctx: Context | None = None
        self._ctx_ref: Any = None

    def open(self, ctx: Context) -> None:
        """Start (or join) Ray and put ``ctx`` in its object store.

        Raises:
            ConfigError: the cluster at ``address`` cannot be joined within the timeout.
        """
        import ray

        if not ray.is_initialized():
            options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                       "configure_logging": False}
            if self.address:
                start = time.monotonic()
                if self.target is not None:
                    _probe(self.address, *self.target, self.connect_timeout_s)
                left = self.connect_timeout_s - (time.monotonic() - start)
                _join(self.address, self.connect_timeout_s, max(left, 1.0), options)
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


def make_executor(kind: str, workers: int | None = None, address: str | None = None,
                  connect_timeout_s: float = RAY_CONNECT_TIMEOUT_S) -> Executor:
    """``local`` or ``ray`` (``address`` and ``connect_timeout_s`` only for ray).

    Raises:
        ConfigError: unknown kind, workers < 1, an address for local, a malformed address or
            timeout, or Ray not installed.
    """
    if kind == "local":
        if address:
            raise ConfigError("--address is for the ray executor")
        return LocalExecutor(workers)
    if kind == "ray":
        return RayExecutor(address, workers, connect_timeout_s)
    raise ConfigError(f"unknown executor {kind!r}; allowed: local, ray")
