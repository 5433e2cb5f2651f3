"""A persistent store of finished op costs, so that a second run of the same job is warm.

The analytic engine's cost of one op on one chip is a pure function of the op's signature, the
whole chip (its :attr:`~infersim.arch_models.chip.Chip.key`), the dataflow and infersim's own
code. The store keeps those costs on disk, keyed by the first three and stamped with a hash of
the code (:func:`code_version`): a store written by other code is emptied when opened, so a
changed model never answers from an old one.

It is SQLite from the standard library (no new dependency): one file, atomic writes, and safe
to share between the processes of a sweep (write-ahead log; a busy or broken store only
disables itself in that process, a cache miss costs nothing but time). Costs are written in
batches (:data:`BATCH`) and at :func:`flush`.

Location: ``$INFERSIM_CACHE_DIR/costs.sqlite``, else ``$XDG_CACHE_HOME/infersim``, else
``~/.cache/infersim``. ``INFERSIM_CACHE=off`` (or ``0``, ``no``, ``false``) turns it off.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import sqlite3
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar, overload

from infersim.simulator.results import OpCost

T = TypeVar("T")

BATCH = 64
"""Costs kept in memory before they are written."""

MAX_BYTES = 512 * 1024 * 1024
"""A store file larger than this is emptied when opened."""

_OFF = {"off", "0", "no", "false"}


@functools.cache
def code_version() -> str:
    """A hash of every Python source file of the installed infersim package."""
    root = Path(__file__).resolve().parents[2]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def enabled() -> bool:
    """Whether the store is on (``INFERSIM_CACHE`` is not ``off``)."""
    return os.environ.get("INFERSIM_CACHE", "on").strip().lower() not in _OFF


def store_path() -> Path:
    """The store's file (see the module docstring)."""
    base = os.environ.get("INFERSIM_CACHE_DIR")
    if base:
        return Path(base) / "costs.sqlite"
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = Path(xdg) if xdg else Path.home() / ".cache"
    return root / "infersim" / "costs.sqlite"


def cost_key(op_signature: tuple[Any, ...], chip_key: str, dataflow: str) -> str:
    """The store's key of one op cost."""
    return hashlib.sha256(repr((op_signature, chip_key, dataflow)).encode()).hexdigest()


class CostStore:
    """Op costs on disk at ``path`` for code ``version`` (see the module docstring)."""

    def __init__(self, path: Path, version: str) -> None:
        self.path, self.version = path, version
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._pending: dict[str, str] = {}
        self.broken = False

    def _open(self) -> sqlite3.Connection | None:
        if self.broken:
            return None
        if self._conn is not None:
            if self._pid == os.getpid():
                return self._conn
            self._pending.clear()  # a forked child: the parent writes its own
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists() and self.path.stat().st_size > MAX_BYTES:
                self.path.unlink()
            conn = sqlite3.connect(self.path, timeout=2.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=OFF")
            conn.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT)")
            conn.execute("CREATE TABLE IF NOT EXISTS costs (k TEXT PRIMARY KEY, v TEXT)")
            row = conn.execute("SELECT v FROM meta WHERE k = 'version'").fetchone()
            if row is None or row[0] != self.version:
                with conn:
                    conn.execute("DELETE FROM costs")
                    conn.execute("INSERT OR REPLACE INTO meta VALUES ('version', ?)",
                                 (self.version,))  # fmt: skip
        except (OSError, sqlite3.Error):
            self.broken = True
            return None
        self._conn, self._pid = conn, os.getpid()
        return conn

    @overload
    def get(self, key: str) -> OpCost | None: ...
    @overload
    def get(self, key: str, kind: type[T]) -> T | None: ...
    def get(self, key: str, kind: type[Any] = OpCost) -> Any:
        """The stored record of ``key`` (an :class:`OpCost`, or a dataclass ``kind`` of plain
        fields), or None."""
        pending = self._pending.get(key)
        if pending is not None:
            return kind(**json.loads(pending))
        conn = self._open()
        if conn is None:
            return None
        try:
            row = conn.execute("SELECT v FROM costs WHERE k = ?", (key,)).fetchone()
        except sqlite3.Error:
            self.broken = True
            return None
        return None if row is None else kind(**json.loads(row[0]))

    def put(self, key: str, cost: Any) -> None:
        """Keep ``cost`` (an :class:`OpCost` or another dataclass of plain fields) under
        ``key`` (written with the next batch)."""
        if self.broken:
            return
        self._pending[key] = json.dumps(asdict(cost))
        if len(self._pending) >= BATCH:
            self.flush()

    def flush(self) -> None:
        """Write the costs kept in memory."""
        if not self._pending:
            return
        conn = self._open()
        if conn is None:
            return
        rows = list(self._pending.items())
        self._pending.clear()
        try:
            with conn:
                conn.executemany("INSERT OR REPLACE INTO costs VALUES (?, ?)", rows)
        except sqlite3.Error:
            self.broken = True

    def close(self) -> None:
        """Flush and close the connection of this process."""
        self.flush()
        if self._conn is not None and self._pid == os.getpid():
            self._conn.close()
        self._conn = None


_STORES: dict[Path, CostStore] = {}


def store() -> CostStore | None:
    """The process's store (None when ``INFERSIM_CACHE`` is off); opened on first use."""
    if not enabled():
        return None
    path = store_path()
    found = _STORES.get(path)
    if found is None:
        found = _STORES[path] = CostStore(path, code_version())
    return found


def flush() -> None:
    """Write what the process's stores keep in memory (a sweep worker calls it after every
    unit of work: a forked process never runs its exit handlers)."""
    for each in _STORES.values():
        each.flush()


atexit.register(flush)
