"""Pareto fronts: which points no other point beats on every objective, and the rank of the rest.

Point *a* dominates *b* when *a* is at least as good on every objective and strictly better on
one. Rank 0 is the non-dominated set; rank k is non-dominated once ranks < k are removed.
Identical points share a rank. Two objectives take O(n log n); three or more peel fronts.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from infersim.errors import ConfigError
from infersim.explorer.metrics import ALIASES, METRICS, Objective

ObjectiveLike = str | Objective | tuple[str, str]


def parse_objectives(
    objectives: Sequence[ObjectiveLike] | Mapping[str, str] | str,
) -> list[Objective]:
    """Objectives from ``"tokens_per_s:max,area_mm2:min"``, a list of such strings or
    ``(column, sense)`` pairs, or a ``{column: sense}`` mapping. A known metric may omit its
    sense; any other column needs one.

    Raises:
        ConfigError: an empty list, a sense other than min/max, or a column without a sense.
    """
    if isinstance(objectives, str):
        objectives = [o for o in objectives.split(",") if o.strip()]
    items: list[ObjectiveLike] = (
        list(objectives.items()) if isinstance(objectives, Mapping) else list(objectives)
    )
    out = []
    for item in items:
        if isinstance(item, Objective):
            out.append(item)
            continue
        name, sense = (item.rpartition(":")[::2] if ":" in item else (item, "")) \
            if isinstance(item, str) else item
        name = name.strip()
        name = ALIASES.get(name.lower(), name)
        sense = sense.strip().lower() or (METRICS[name].sense if name in METRICS else "")
        if sense not in ("min", "max"):
            raise ConfigError(f"objective {item!r}: give a direction, e.g. {name}:max or "
                              f"{name}:min")
        out.append(Objective(name, sense))  # type: ignore[arg-type]
    if not out:
        raise ConfigError("give at least one objective, e.g. tokens_per_s:max,area_mm2:min")
    return out


def _rank_2d(values: np.ndarray) -> np.ndarray:
    """Ranks of distinct rows sorted lexicographically (minimize both columns)."""
    mins: list[float] = []
    ranks = np.empty(len(values), dtype=np.int64)
    for i, f2 in enumerate(values[:, 1].tolist()):
        k = bisect.bisect_right(mins, f2)  # first front none of whose members dominates i
        if k == len(mins):
            mins.append(f2)
        else:
            mins[k] = f2
        ranks[i] = k
    return ranks


def _rank_nd(values: np.ndarray) -> np.ndarray:
    """Ranks of distinct rows sorted lexicographically, by peeling fronts.

    A dominator precedes what it dominates in lexicographic order, and a point dominated by any
    remaining point is dominated by a member of the current front, so each candidate is checked
    against the current front only.
    """
    ranks = np.full(len(values), -1, dtype=np.int64)
    remaining = np.arange(len(values))
    rank = 0
    while remaining.size:
        front: list[int] = []
        front_values = np.empty((0, values.shape[1]))
        for i in remaining.tolist():
            v = values[i]
            if front:
                le = np.all(front_values <= v, axis=1)
                lt = np.any(front_values < v, axis=1)
                if np.any(le & lt):
                    continue
            front.append(i)
            front_values = np.vstack([front_values, v])
        ranks[front] = rank
        remaining = remaining[ranks[remaining] < 0]
        rank += 1
    return ranks


def nondominated_rank(costs: np.ndarray) -> np.ndarray:
    """Pareto rank of each row of ``costs`` (n × d, every column minimized; finite values)."""
    if costs.ndim != 2 or costs.shape[0] == 0:
        return np.zeros(costs.shape[0] if costs.ndim else 0, dtype=np.int64)
    distinct, inverse = np.unique(costs, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    if costs.shape[1] == 1:
        ranks = np.arange(len(distinct), dtype=np.int64)
    elif costs.shape[1] == 2:
        ranks = _rank_2d(distinct)
    else:
        ranks = _rank_nd(distinct)
    return ranks[inverse]


def pareto(
    df: pd.DataFrame,
    objectives: Sequence[ObjectiveLike] | Mapping[str, str] | str,
    by: str | Sequence[str] | None = None,
) -> pd.DataFrame:
    """A copy of ``df`` with ``pareto_rank`` (0 = non-dominated; <NA> where an objective is
    missing) and ``pareto`` (rank 0), ranked within each group of ``by`` when given.

    Raises:
        ConfigError: bad objectives, or an objective or ``by`` column ``df`` lacks.
    """
    objs = parse_objectives(objectives)
    groups = [by] if isinstance(by, str) else list(by or [])
    missing = [c for c in [o.metric for o in objs] + groups if c not in df.columns]
    if missing:
        raise ConfigError(f"no column {', '.join(map(repr, missing))} in the results; "
                          f"columns: {', '.join(map(str, df.columns))}")
    out = df.copy()
    costs = np.column_stack([
        pd.to_numeric(df[o.metric], errors="coerce").astype(float).to_numpy()
        * (-1.0 if o.sense == "max" else 1.0)
        for o in objs
    ])
    valid = np.isfinite(costs).all(axis=1)
    ranks = np.full(len(df), -1, dtype=np.int64)
    keys = (df[groups].astype(str).agg("\x1f".join, axis=1).to_numpy() if groups
            else np.zeros(len(df), dtype=object))
    for key in pd.unique(keys[valid]):
        idx = np.flatnonzero(valid & (keys == key))
        ranks[idx] = nondominated_rank(costs[idx])
    out["pareto_rank"] = pd.array(np.where(ranks >= 0, ranks, 0), dtype="Int64")
    out.loc[ranks < 0, "pareto_rank"] = pd.NA
    out["pareto"] = ranks == 0
    return out


def front(
    df: pd.DataFrame,
    objectives: Sequence[ObjectiveLike] | Mapping[str, str] | str,
    by: str | Sequence[str] | None = None,
) -> pd.DataFrame:
    """Only the non-dominated rows of ``df`` (see :func:`pareto`), sorted by the first
    objective (best first) within each group."""
    objs = parse_objectives(objectives)
    ranked = pareto(df, objs, by)
    first = objs[0]
    keys = [*([by] if isinstance(by, str) else list(by or [])), first.metric]
    ascending = [True] * (len(keys) - 1) + [first.sense == "min"]
    return ranked[ranked["pareto"]].sort_values(keys, ascending=ascending, kind="stable")
