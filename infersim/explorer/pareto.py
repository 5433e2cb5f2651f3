"""Pareto fronts: which points no other point beats on every objective, and the rank of the rest.

Point *a* dominates *b* when *a* is at least as good on every objective and strictly better on
one. Rank 0 is the non-dominated set; rank k is non-dominated once ranks < k are removed.
Identical points share a rank. Two objectives take O(n log n); three or more peel fronts.

:func:`best_first` orders points for a "best designs" list: by the first objective, where
points within :data:`TIE_TOLERANCE` of each other count as tied and are ordered by the next
objective (and so on), never by the order they happened to be evaluated in.
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


TIE_TOLERANCE = 0.01
"""Relative difference below which two figures of one objective count as tied (1%): the model
is cycle-approximate (its event engine agrees with its analytic engine within 3%), so a 0.5%
lead in tokens/s is no reason to rank a design twice the size above a smaller one."""

TIE_BREAKERS: tuple[Objective, ...] = (
    Objective("area_mm2", "min"), Objective("power_w", "min"), Objective("cost_usd", "min"),
)
"""Objectives that break ties after the ones asked for (smaller, cooler, cheaper first)."""

NAME_COLUMNS = ("chip", "design", "technique", "dataflow", "engine", "key")
"""Columns that order points tied on every objective (alphabetically), for a stable order."""


def _tied(values: np.ndarray, tolerance: float) -> list[np.ndarray]:
    """Positions of ``values`` (sorted ascending, NaN last) split into tie classes: each
    class holds its first value and every later one within ``tolerance`` of it (relative)."""
    classes: list[np.ndarray] = []
    start = 0
    n = len(values)
    while start < n:
        lead = values[start]
        end = start + 1
        if np.isnan(lead):
            end = n  # missing figures: one class, last
        else:
            scale = tolerance * abs(lead)
            while end < n and not np.isnan(values[end]) and values[end] - lead <= scale:
                end += 1
        classes.append(np.arange(start, end))
        start = end
    return classes


def best_first(
    df: pd.DataFrame,
    objectives: Sequence[ObjectiveLike] | Mapping[str, str] | str,
    tolerance: float = TIE_TOLERANCE,
) -> pd.DataFrame:
    """``df`` ordered best first: by the first objective, where values within ``tolerance``
    (relative) of the best remaining one are tied; tied rows are ordered the same way by the
    next objective, then by :data:`TIE_BREAKERS` (area, power, cost: those ``df`` has and the
    objectives do not name), then by :data:`NAME_COLUMNS`. Rows missing an objective come
    last.

    Raises:
        ConfigError: bad objectives, or an objective ``df`` lacks.
    """
    objs = parse_objectives(objectives)
    missing = [o.metric for o in objs if o.metric not in df.columns]
    if missing:
        raise ConfigError(f"no column {', '.join(map(repr, missing))} in the results")
    named = {o.metric for o in objs}
    keys = [*objs, *(o for o in TIE_BREAKERS if o.metric in df.columns and o.metric not in named)]
    costs = [
        pd.to_numeric(df[o.metric], errors="coerce").astype(float).to_numpy()
        * (-1.0 if o.sense == "max" else 1.0)
        for o in keys
    ]
    names = [c for c in NAME_COLUMNS if c in df.columns]
    text = (df[names].fillna("").astype(str).agg("\x1f".join, axis=1).to_numpy() if names
            else np.zeros(len(df), dtype=object))

    def order(rows: np.ndarray, level: int) -> list[int]:
        if rows.size <= 1:
            return rows.tolist()
        if level == len(costs):
            return rows[np.argsort(text[rows], kind="stable")].tolist()
        values = costs[level][rows]
        sort = np.lexsort((np.nan_to_num(values, nan=0.0), np.isnan(values)))
        rows, values = rows[sort], values[sort]
        # a max objective is negated: compare magnitudes of the original figures
        out: list[int] = []
        for cls in _tied(values, tolerance):
            out += order(rows[cls], level + 1)
        return out

    return df.iloc[order(np.arange(len(df)), 0)]


def front(
    df: pd.DataFrame,
    objectives: Sequence[ObjectiveLike] | Mapping[str, str] | str,
    by: str | Sequence[str] | None = None,
) -> pd.DataFrame:
    """Only the non-dominated rows of ``df`` (see :func:`pareto`), best first within each
    group (:func:`best_first`: near-ties on the first objective broken by the next ones)."""
    objs = parse_objectives(objectives)
    ranked = pareto(df, objs, by)
    on_front = ranked[ranked["pareto"]]
    groups = [by] if isinstance(by, str) else list(by or [])
    if not groups or on_front.empty:
        return best_first(on_front, objs)
    parts = [best_first(part, objs) for _, part in on_front.groupby(groups, sort=False)]
    order = on_front[groups].drop_duplicates().astype(str).agg("\x1f".join, axis=1)
    ranks = {key: n for n, key in enumerate(sorted(order.tolist()))}
    parts.sort(key=lambda p: ranks["\x1f".join(p[groups].iloc[0].astype(str))])
    return pd.concat(parts)
