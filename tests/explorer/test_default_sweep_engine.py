"""The default report's sweep runs on the default (analytic) engine, where the custom chip's SRAM
and array axes move the answer; on the roofline baseline the SRAM axis changes nothing.

The designs are the default spec's own (its custom chip, its axis values, its Llama-3-8B
workloads), cut to the baseline technique stack and one axis at a time so the test stays small.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from infersim.explorer.defaults import default_spec
from infersim.explorer.evaluate import Context, Evaluator
from infersim.explorer.spec import SweepSpec
from infersim.simulator.defaults import BASELINE_ENGINE, DEFAULT_ENGINE

CUSTOM = "infersim-sa"
SRAM, ARRAY, DRAM = "sram.capacity_bytes", "array.rows,array.cols", "dram.bandwidth_bytes_per_s"


def _spec(axes: dict[str, list[Any]], engines: list[str] | None) -> SweepSpec:
    """The default spec with only its custom chip (``axes`` over it), its first model and the
    baseline stack; ``engines`` None leaves the spec's default."""
    doc = default_spec().model_dump(mode="json", exclude_defaults=True)
    (custom,) = [e for e in doc["chips"] if isinstance(e, dict) and e.get("label") == CUSTOM]
    doc.update(chips=[{**custom, "axes": axes}], workloads=doc["workloads"][:1],
               techniques=["baseline"], extras=False)
    doc.pop("serving", None)
    doc.pop("engines", None)
    if engines is not None:
        doc["engines"] = engines
    return SweepSpec.model_validate(doc)


def _tokens_per_s(spec: SweepSpec, axis: str) -> pd.DataFrame:
    """tokens/s per workload (rows) and value of ``axis`` (columns)."""
    ctx = Context(spec)
    rows = Evaluator(ctx).evaluate(list(ctx.space.points())).to_pandas()
    assert rows["error"].isna().all(), rows["error"].dropna().tolist()
    return rows.pivot_table(index="workload", columns=f"axis.{axis}", values="tokens_per_s")


def _axis(name: str) -> list[Any]:
    (custom,) = [e for e in default_spec().chips if e.label == CUSTOM]
    values = custom.axes[name]
    assert isinstance(values, list) and len(values) > 1
    return values


def test_the_default_sweep_uses_the_default_engine():
    spec = _spec({SRAM: _axis(SRAM)}, engines=None)
    assert spec.engines == [DEFAULT_ENGINE] == default_spec().engines


@pytest.mark.parametrize(("axis", "fixed"), [
    (SRAM, {ARRAY: [256], DRAM: [1.6e12]}),   # a large array starved by a slow HBM
    (ARRAY, {DRAM: [3.2e12]}),
])
def test_the_custom_chip_axes_move_tokens_per_s(axis: str, fixed: dict[str, list[Any]]):
    table = _tokens_per_s(_spec({**fixed, axis: _axis(axis)}, engines=None), axis)
    assert table.shape[1] == len(_axis(axis))
    spread = table.max(axis=1) / table.min(axis=1)
    assert (spread > 1.01).any(), table  # some workload gains more than 1% along the axis


def test_on_the_roofline_the_sram_axis_changes_nothing():
    fixed = {ARRAY: [256], DRAM: [1.6e12]}
    table = _tokens_per_s(_spec({**fixed, SRAM: _axis(SRAM)}, engines=[BASELINE_ENGINE]), SRAM)
    assert (table.max(axis=1) == table.min(axis=1)).all(), table
