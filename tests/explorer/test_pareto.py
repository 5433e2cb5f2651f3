"""pareto(): min/max per objective, ranks, groups — checked against brute force."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from infersim.errors import ConfigError
from infersim.explorer.pareto import front, nondominated_rank, pareto, parse_objectives


def brute_force_ranks(costs: np.ndarray) -> list[int]:
    """Peel non-dominated sets by the definition (all minimized)."""
    n = len(costs)
    ranks = [-1] * n
    rank = 0
    while any(r < 0 for r in ranks):
        left = [i for i in range(n) if ranks[i] < 0]
        layer = [
            i for i in left
            if not any(np.all(costs[j] <= costs[i]) and np.any(costs[j] < costs[i])
                       for j in left)
        ]
        for i in layer:
            ranks[i] = rank
        rank += 1
    return ranks


values = st.integers(0, 6) | st.floats(-1e3, 1e3, allow_nan=False)


@given(
    data=st.lists(st.lists(values, min_size=3, max_size=3), min_size=1, max_size=40),
    dims=st.integers(1, 3),
    senses=st.lists(st.sampled_from(["min", "max"]), min_size=3, max_size=3),
)
def test_matches_brute_force(data, dims, senses):
    cols = ["a", "b", "c"][:dims]
    df = pd.DataFrame([row[:dims] for row in data], columns=cols, dtype=float)
    ranked = pareto(df, [f"{c}:{s}" for c, s in zip(cols, senses, strict=False)])
    costs = df.to_numpy() * np.array([-1.0 if s == "max" else 1.0 for s in senses[:dims]])
    assert ranked["pareto_rank"].tolist() == brute_force_ranks(costs)
    assert ranked["pareto"].tolist() == [r == 0 for r in brute_force_ranks(costs)]


def test_directions_groups_and_missing_values():
    df = pd.DataFrame({
        "tokens_per_s": [10.0, 20.0, 15.0, 5.0, np.nan, 30.0],
        "area_mm2": [100.0, 200.0, 100.0, 50.0, 10.0, 400.0],
        "workload": ["a", "a", "a", "a", "a", "b"],
    })
    ranked = pareto(df, "tokens_per_s:max,area_mm2:min", by="workload")
    assert ranked["pareto_rank"].tolist()[:4] == [1, 0, 0, 0]
    assert ranked["pareto_rank"].isna().tolist() == [False] * 4 + [True, False]
    assert ranked["pareto"].tolist() == [False, True, True, True, False, True]
    best = front(df, {"tokens_per_s": "max", "area_mm2": "min"}, by="workload")
    assert best["tokens_per_s"].tolist() == [20.0, 15.0, 5.0, 30.0]


def test_objective_parsing_errors():
    assert [str(o) for o in parse_objectives("latency,tokens/s,area")] == [
        "latency_s:min", "tokens_per_s:max", "area_mm2:min"]
    with pytest.raises(ConfigError, match="give a direction"):
        parse_objectives("axis.cores")
    with pytest.raises(ConfigError, match="at least one objective"):
        parse_objectives("")
    with pytest.raises(ConfigError, match="no column 'speed'"):
        pareto(pd.DataFrame({"a": [1.0]}), "speed:max")


def test_two_objectives_scale():
    rng = np.random.default_rng(0)
    costs = rng.random((100_000, 2))
    ranks = nondominated_rank(costs)
    sample = rng.choice(len(costs), 300, replace=False)
    assert nondominated_rank(costs[sample]).max() <= ranks.max()
    front0 = costs[ranks == 0]
    order = np.argsort(front0[:, 0])
    assert np.all(np.diff(front0[order, 1]) < 0)  # a 2-D front is a staircase
