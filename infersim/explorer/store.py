"""ResultStore: an append-only folder of Parquet shards, one row per point, keyed by the point's
stable hash.

Layout of a results folder::

    spec.json              the validated spec (written once; resume checks it matches)
    shards/part-*.parquet  result rows; a shard appears whole (written aside, then renamed)
    quarantine/            shards found unreadable by a sweep or resume (their points rerun)
    extras/*.parquet       per-sweep tables a report needs besides the rows (e.g. dataflows)

A killed sweep leaves only whole shards behind, so ``--resume`` reads the keys already stored
and evaluates only the missing points; no row is ever written twice. A lock file keeps two
sweeps from writing one folder at once.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from infersim.errors import ConfigError
from infersim.io import parse_document, read_text

SPEC_FILE = "spec.json"
SHARDS = "shards"
EXTRAS = "extras"
QUARANTINE = "quarantine"


class ResultStore:
    """Append-only result rows of one sweep in ``directory``.

    Use as a context manager to hold the folder's write lock::

        with ResultStore(path) as store:
            done = store.keys()
            store.append(table)
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._lock: Any = None
        self._counter = 0

    # --- writing --------------------------------------------------------------------------

    def __enter__(self) -> ResultStore:
        (self.directory / SHARDS).mkdir(parents=True, exist_ok=True)
        self._lock = (self.directory / ".lock").open("w")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            self._lock = None
            raise ConfigError(f"{self.directory}: another sweep is writing here") from None
        for stale in (self.directory / SHARDS).glob(".tmp-*"):
            stale.unlink()  # a shard a killed sweep did not finish
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    def append(self, table: pa.Table) -> Path | None:
        """Write ``table`` as one new shard, atomically (None when it has no rows)."""
        if table.num_rows == 0:
            return None
        self._counter += 1
        name = f"part-{time.time_ns():020d}-{os.getpid()}-{self._counter:06d}.parquet"
        final = self.directory / SHARDS / name
        tmp = final.with_name(".tmp-" + name)
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, final)
        return final

    def write_spec(self, spec: dict[str, Any]) -> None:
        """Record the sweep's spec (JSON) beside its rows."""
        path = self.directory / SPEC_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(spec, indent=2, sort_keys=True))
        os.replace(tmp, path)

    def write_extra(self, name: str, table: pa.Table) -> Path:
        """Store a per-sweep table ``extras/<name>.parquet`` (replaced whole)."""
        folder = self.directory / EXTRAS
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.parquet"
        tmp = folder / f".tmp-{name}.parquet"
        pq.write_table(table, tmp)
        os.replace(tmp, path)
        return path

    # --- reading --------------------------------------------------------------------------

    def shards(self) -> list[Path]:
        """Readable shard files in write order. A shard that cannot be read (truncated, empty,
        not a file) is left out with a warning naming it; while this store holds the folder's
        write lock (a sweep, a resume) it is also moved to ``quarantine/``, so that resume
        recomputes its points."""
        out = []
        for shard in sorted((self.directory / SHARDS).glob("part-*.parquet")):
            reason = _unreadable(shard)
            if reason is None:
                out.append(shard)
                continue
            if self._lock is not None:
                folder = self.directory / QUARANTINE
                folder.mkdir(exist_ok=True)
                os.replace(shard, folder / shard.name)
                where = f"moved to {folder / shard.name}; its points will be evaluated again"
            else:
                where = "left out (a --resume moves it aside and evaluates its points again)"
            warnings.warn(f"unreadable result shard {shard} ({reason}): {where}",
                          UserWarning, stacklevel=2)  # fmt: skip
        return out

    def keys(self) -> set[str]:
        """Keys of every stored point (what ``--resume`` skips)."""
        out: set[str] = set()
        for shard in self.shards():
            out.update(pq.read_table(shard, columns=["key"]).column("key").to_pylist())
        return out

    def read_spec(self) -> dict[str, Any] | None:
        """The recorded spec, or None for a folder without one.

        Raises:
            ConfigError: a spec.json that cannot be read or parsed.
        """
        path = self.directory / SPEC_FILE
        if not path.exists():
            return None
        data = parse_document(read_text(path, "results spec"), str(path), json_format=True)
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: not a sweep spec (a JSON object)")
        return data

    def has_extra(self, name: str) -> bool:
        """Whether ``extras/<name>.parquet`` exists."""
        return (self.directory / EXTRAS / f"{name}.parquet").is_file()


def _unreadable(shard: Path) -> str | None:
    """Why ``shard`` cannot be read as Parquet (None: it can)."""
    if not shard.is_file():
        return "not a file"
    try:
        pq.read_metadata(shard)
    except (OSError, pa.ArrowException) as exc:
        return str(exc).splitlines()[0] or type(exc).__name__
    return None


def _check_dir(directory: str | Path) -> Path:
    path = Path(directory)
    if not (path / SHARDS).is_dir():
        raise ConfigError(f"{path}: not a results folder (no {SHARDS}/; run infersim sweep)")
    return path


def iter_tables(directory: str | Path, columns: Sequence[str] | None = None) -> Iterator[pa.Table]:
    """Each shard of ``directory`` as an Arrow table (only ``columns`` when given)."""
    store = ResultStore(_check_dir(directory))
    for shard in store.shards():
        table = pq.read_table(shard)
        if columns is not None:
            table = table.select([c for c in columns if c in table.column_names])
        yield table


def load_results(directory: str | Path, with_ops: bool = False) -> pd.DataFrame:
    """Every result row of a results folder as a DataFrame, in point order (``seq``).

    The per-operator ``ops`` lists are left out unless ``with_ops`` (see :func:`load_ops`).

    Raises:
        ConfigError: ``directory`` is not a results folder.
    """
    tables = []
    for shard in ResultStore(_check_dir(directory)).shards():
        schema = pq.read_schema(shard)
        names = [n for n in schema.names if with_ops or n != "ops"]
        tables.append(pq.read_table(shard, columns=names))
    if not tables:
        return pd.DataFrame()
    table = pa.concat_tables(tables, promote_options="default")
    df = table.to_pandas()
    return df.sort_values(["seq", "key"], kind="stable").reset_index(drop=True)


def load_ops(directory: str | Path, keys: Sequence[str]) -> pd.DataFrame:
    """The per-operator costs of the points ``keys``: one row per operator with the point's
    ``key`` and the fields of :data:`infersim.explorer.evaluate.OP_FIELDS`."""
    wanted = pa.array(sorted(set(keys)), pa.string())
    parts = []
    for shard in ResultStore(_check_dir(directory)).shards():
        table = pq.read_table(shard, columns=["key", "ops"])
        table = table.filter(pc.is_in(table.column("key"), value_set=wanted))
        if table.num_rows == 0:
            continue
        ops = table.column("ops").combine_chunks()
        lengths = pc.list_value_length(ops).fill_null(0).to_numpy()
        flat = pc.list_flatten(ops)
        key_col = pa.array(
            [k for k, n in zip(table.column("key").to_pylist(), lengths, strict=True)
             for _ in range(n)], pa.string()
        )
        flat_table = pa.Table.from_struct_array(flat) if len(flat) else None
        if flat_table is None:
            continue
        parts.append(flat_table.add_column(0, "key", key_col))
    if not parts:
        return pd.DataFrame(columns=["key"])
    return pa.concat_tables(parts).to_pandas()


def load_extra(directory: str | Path, name: str) -> pd.DataFrame | None:
    """``extras/<name>.parquet`` of a results folder as a DataFrame, or None when absent."""
    path = Path(directory) / EXTRAS / f"{name}.parquet"
    return pq.read_table(path).to_pandas() if path.is_file() else None


def export_csv(directory: str | Path, path: str | Path) -> int:
    """Write every result row (without per-op lists) to CSV, shard by shard; returns rows."""
    rows = 0
    header = True
    with Path(path).open("w", newline="") as out:
        for table in iter_tables(directory):
            df = table.drop_columns([c for c in ("ops",) if c in table.column_names]).to_pandas()
            df.to_csv(out, index=False, header=header)
            header = False
            rows += len(df)
    return rows
