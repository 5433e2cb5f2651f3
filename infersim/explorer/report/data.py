"""What a report reads: a results folder's rows, spec, extras and per-op costs — nothing is
re-simulated. Also the reductions figures share: Pareto ranks and each chip's representative
design."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, get_args

import numpy as np
import pandas as pd

from infersim.explorer.metrics import Objective, parse_objective
from infersim.explorer.pareto import pareto
from infersim.explorer.store import EXTRAS, load_extra, load_ops, load_results
from infersim.simulator.results import Bound


def esc(text: Any) -> str:
    """``text`` HTML-escaped (every user-supplied name goes through this before display)."""
    return html.escape(str(text), quote=True)


@dataclass
class ReportData:
    """A results folder, loaded for reporting."""

    directory: Path
    rows: pd.DataFrame
    spec: dict[str, Any]
    extras: dict[str, pd.DataFrame] = field(default_factory=dict)

    @classmethod
    def load(cls, directory: str | Path) -> ReportData:
        """Rows (without per-op lists), spec and every extra table of ``directory``.

        Raises:
            ConfigError: not a results folder.
        """
        from infersim.explorer.store import ResultStore

        path = Path(directory)
        rows = load_results(path)
        spec = ResultStore(path).read_spec() or {}
        extras = {}
        folder = path / EXTRAS
        if folder.is_dir():
            for file in sorted(folder.glob("*.parquet")):
                table = load_extra(path, file.stem)
                if table is not None:
                    extras[file.stem] = table
        return cls(path, rows, spec, extras)

    @property
    def name(self) -> str:
        """The sweep's name."""
        return str(self.spec.get("name", self.directory.name))

    @property
    def ok(self) -> pd.DataFrame:
        """Rows that evaluated without error."""
        if self.rows.empty or "error" not in self.rows:
            return self.rows
        return self.rows[self.rows["error"].isna()]

    @property
    def objectives(self) -> list[Objective]:
        """The spec's objectives (tokens/s up, area down when the spec has none)."""
        texts = self.spec.get("objectives") or ["tokens_per_s:max", "area_mm2:min"]
        return [parse_objective(t) for t in texts]

    def first(self, column: str) -> Any:
        """The first value of ``column`` in spec order (the 'baseline' technique, dataflow...)."""
        order = {"technique": "techniques", "engine": "engines", "dataflow": "dataflows"}
        listed = self.spec.get(order.get(column, ""), [])
        if listed:
            return listed[0]
        values: list[Any] = (
            list(self.rows[column].dropna().unique()) if column in self.rows else []
        )
        return values[0] if values else None

    def reference(self) -> pd.DataFrame:
        """OK rows of the first technique, dataflow and engine (one row per design×workload)."""
        df = self.ok
        for column in ("technique", "engine"):
            value = self.first(column)
            if value is not None and column in df:
                df = df[df[column] == value]
        if "dataflow" in df and df["dataflow"].notna().any():
            df = df[df["dataflow"] == self.first("dataflow")]
        return df

    @cached_property
    def ranked(self) -> pd.DataFrame:
        """OK rows with Pareto ranks per workload over the spec's objectives (feasible rows
        only; infeasible ones get no rank)."""
        df = self.ok
        if df.empty:
            return df.assign(pareto_rank=pd.Series(dtype="Int64"), pareto=False)
        objs = self.objectives
        feasible = df[df["feasible"].fillna(False).astype(bool)]
        if feasible.empty:  # nothing meets the constraints: nothing is ranked
            return df.assign(pareto_rank=pd.Series(pd.NA, index=df.index, dtype="Int64"),
                             pareto=False)
        ranked = pareto(feasible, objs, by="workload")
        out = df.join(ranked[["pareto_rank", "pareto"]], how="left")
        out["pareto"] = out["pareto"].fillna(False).astype(bool)
        return out

    @cached_property
    def representatives(self) -> dict[str, str]:
        """Chip entry name → the design key that represents it: its only design, or the one
        with the best geometric mean of the first objective over its workloads (feasible
        designs first)."""
        df = self.reference()
        if df.empty:
            return {}
        goal = self.objectives[0]
        out: dict[str, str] = {}
        for chip, rows in df.groupby("chip", sort=False):
            scores = []
            for key, design_rows in rows.groupby("design_key", sort=False):
                values = pd.to_numeric(design_rows[goal.metric], errors="coerce").to_numpy(float)
                values = values[np.isfinite(values) & (values > 0)]
                if values.size == 0:
                    continue
                gmean = float(np.exp(np.log(values).mean()))
                score = -gmean if goal.sense == "max" else gmean
                feasible = bool(design_rows["feasible"].fillna(False).all())
                scores.append((not feasible, score, str(key)))
            if scores:
                out[str(chip)] = min(scores)[2]
        return out

    def chip_order(self) -> list[str]:
        """Chip entry names in the order the spec lists them."""
        return list(dict.fromkeys(self.rows["chip"].tolist())) if not self.rows.empty else []

    def ops(self, keys: list[str]) -> pd.DataFrame:
        """Per-op costs of the points ``keys`` (stored at sweep time)."""
        return load_ops(self.directory, keys)


def dominant_bound(rows: pd.DataFrame) -> pd.Series:
    """Per row, the bound that takes the largest share of the step's time and that share, as
    text (``"memory 71%"``, the share rounded down), from the stored per-bound times
    (``time_<bound>_s``); the stored ``bound`` alone where those are missing or zero, ``"–"``
    where both are."""
    columns = [f"time_{b}_s" for b in get_args(Bound) if f"time_{b}_s" in rows]
    fallback = (rows["bound"].fillna("–").astype(str) if "bound" in rows
                else pd.Series("–", index=rows.index))
    if not columns or rows.empty:
        return fallback
    times = rows[columns].apply(pd.to_numeric, errors="coerce").fillna(0.0)
    total = times.sum(axis=1)
    top = times.idxmax(axis=1).str.removeprefix("time_").str.removesuffix("_s")
    share = times.max(axis=1) / total.where(total > 0)
    percent = np.floor(share * 100 + 1e-9).astype("Int64")  # 99.6% is not all of it
    text = top + " " + percent.astype(str) + "%"
    return text.where(total > 0, fallback)


def log_axis(values: pd.Series | np.ndarray) -> bool:
    """Whether positive ``values`` span more than a factor of 20 (worth a log axis)."""
    v = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(float)
    v = v[np.isfinite(v) & (v > 0)]
    return bool(v.size) and v.max() / v.min() > 20 and not math.isclose(v.max(), v.min())
