"""best_first(): the order of a "best designs" list — the first objective, near-ties (within
the model's resolution) broken by the next objectives, then area, power, cost, then names;
never the order the points happened to be evaluated in. And the report's best-designs table
follows it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from infersim.explorer.pareto import TIE_TOLERANCE, best_first, front
from infersim.explorer.report.data import ReportData

OBJECTIVES = "tokens_per_s:max,area_mm2:min"


def rows(**columns: list) -> pd.DataFrame:
    n = len(next(iter(columns.values())))
    base = {"chip": [f"c{i}" for i in range(n)], "design": [""] * n}
    return pd.DataFrame({**base, **columns})


def order(df: pd.DataFrame, objectives: str = OBJECTIVES) -> list[str]:
    return best_first(df, objectives)["chip"].tolist()


def test_exact_ties_go_to_the_next_objective():
    # the case: three designs at the same tokens/s, the biggest listed first
    df = rows(tokens_per_s=[64220.0, 64220.0, 64220.0], area_mm2=[638.0, 500.0, 346.0])
    assert order(df) == ["c2", "c1", "c0"]


def test_near_ties_within_the_resolution_go_to_the_next_objective():
    lead = 1000.0
    within = lead * (1 - TIE_TOLERANCE * 0.9)
    beyond = lead * (1 - TIE_TOLERANCE * 1.5)
    df = rows(tokens_per_s=[lead, within, beyond], area_mm2=[600.0, 300.0, 100.0])
    # 0.9% slower but half the area comes first; 1.5% slower is slower, however small
    assert order(df) == ["c1", "c0", "c2"]


def test_ties_are_measured_from_the_best_of_their_class():
    """A chain of small steps does not make a class: each value is compared with the best."""
    step = 1 - TIE_TOLERANCE * 0.6
    df = rows(tokens_per_s=[100.0, 100.0 * step, 100.0 * step**2],
              area_mm2=[300.0, 200.0, 100.0])
    # c1 is within 1% of c0; c2 is 1.2% below c0: a class of its own, after them
    assert order(df) == ["c1", "c0", "c2"]


def test_min_objectives_tie_the_same_way():
    df = rows(latency_s=[1.000e-3, 1.004e-3, 1.2e-3], area_mm2=[500.0, 100.0, 50.0])
    assert order(df, "latency_s:min,area_mm2:min") == ["c1", "c0", "c2"]


def test_then_area_power_cost_then_names_whatever_the_input_order():
    df = rows(tokens_per_s=[10.0] * 5, area_mm2=[5.0, 5.0, 5.0, 5.0, 1.0],
              power_w=[9.0, 3.0, 3.0, 3.0, 99.0], cost_usd=[1.0, 7.0, 2.0, 2.0, 1.0])
    expected = ["c4", "c2", "c3", "c1", "c0"]  # area, then power, then cost, then the name
    assert order(df, "tokens_per_s:max") == expected
    rng = np.random.default_rng(0)
    for _ in range(5):
        shuffled = df.iloc[rng.permutation(len(df))]
        assert order(shuffled, "tokens_per_s:max") == expected


def test_missing_figures_come_last():
    df = rows(tokens_per_s=[np.nan, 5.0, 9.0], area_mm2=[1.0, 1.0, 1.0])
    assert order(df) == ["c2", "c1", "c0"]


def test_front_lists_each_group_best_first():
    df = rows(tokens_per_s=[100.0, 99.5, 50.0, 7.0], area_mm2=[400.0, 200.0, 100.0, 1.0],
              workload=["a", "a", "a", "b"])
    best = front(df, OBJECTIVES, by="workload")
    assert best["chip"].tolist() == ["c1", "c0", "c2", "c3"]


def test_the_report_table_breaks_ties_by_area(tmp_path: Path):
    """Three designs at the same tokens/s: the report lists the smallest first."""
    n = 3
    df = pd.DataFrame({
        "key": [f"k{i}" for i in range(n)], "design_key": [f"d{i}" for i in range(n)],
        "chip": ["custom"] * n, "design": ["sram=64 MiB", "sram=16 MiB", "sram=4 MiB"],
        "technique": ["baseline"] * n, "workload": ["llama prefill"] * n,
        "tokens_per_s": [64220.3] * n, "latency_s": [0.0319] * n,
        "area_mm2": [638.0, 420.0, 346.0], "power_w": [300.0] * n, "cost_usd": [900.0] * n,
        "fits": [True] * n, "feasible": [True] * n, "error": [None] * n,
        "bound": ["compute"] * n, "time_compute_s": [0.0319] * n,
        "estimated_figures": ["area_mm2,peak_power_w,cost_usd"] * n,
    })
    data = ReportData(tmp_path, df, {"objectives": ["tokens_per_s:max", "area_mm2:min"]})
    from infersim.explorer.report.tables import summary_table

    table = summary_table(data)
    positions = [table.index(d) for d in ("sram=4 MiB", "sram=16 MiB", "sram=64 MiB")]
    assert positions == sorted(positions), table
    assert "64,220 tok/s" in table and "≈&#8239;346 mm²" in table
    assert "e+" not in table and "e-0" not in table


@pytest.mark.parametrize("tolerance", [0.0, 0.05])
def test_the_tolerance_is_a_parameter(tolerance: float):
    df = rows(tokens_per_s=[100.0, 97.0], area_mm2=[10.0, 1.0])
    expected = ["c1", "c0"] if tolerance else ["c0", "c1"]
    assert best_first(df, OBJECTIVES, tolerance)["chip"].tolist() == expected
