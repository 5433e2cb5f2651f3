"""Designs and points: grid/random/LHS generation, rounding, and stable content-hash keys."""

from __future__ import annotations

import math

import numpy as np
import pytest

from infersim.explorer.space import DesignSpace, Dimension
from infersim.explorer.spec import RangeAxis, parse_spec


def test_grid_covers_every_combination(tiny_doc):
    space = DesignSpace(parse_spec(tiny_doc))
    designs = list(space.designs())
    assert len(designs) == 1 + 2 * 3 == space.count_designs()
    assert designs[0].overrides == ()
    assert space.points_per_design == 2
    points = list(space.points())
    assert len(points) == len(designs) * 2
    assert [p.seq for p in points] == list(range(len(points)))
    assert len({p.key for p in points}) == len(points)
    bws = sorted({dict(d.overrides)["dram.bandwidth_bytes_per_s"] for d in designs[1:]})
    assert bws == pytest.approx([0.6e12, 1.2e12, 2.4e12])  # geometric


def test_keys_are_stable_and_content_addressed(tiny_doc):
    a = [p.key for p in DesignSpace(parse_spec(tiny_doc)).points()]
    b = [p.key for p in DesignSpace(parse_spec({**tiny_doc, "name": "renamed"})).points()]
    assert a == b  # the sweep's name is not part of a point
    other = dict(tiny_doc, workloads=[{**tiny_doc["workloads"][0], "context_len": 64}])
    c = [p.key for p in DesignSpace(parse_spec(other)).points()]
    assert a[1::2] == c[1::2]  # prefill points unchanged (context does not matter)
    assert not set(a[::2]) & set(c[::2])  # decode points differ


def test_range_grid_rounding_and_dedup():
    dim = Dimension("cores", axis=RangeAxis(low=1, high=4, num=7, integer=True))
    assert dim.grid() == [1, 2, 3, 4]
    log = Dimension("x", axis=RangeAxis(low=1, high=1000, num=4, log=True))
    assert log.grid() == pytest.approx([1, 10, 100, 1000])
    cat = Dimension("y", values=(8, 16, 32))
    assert [cat.at(u) for u in (0.0, 0.34, 0.99)] == [8, 16, 32]
    assert cat.from_x(1.6) == 32 and cat.bounds() == (0.0, 2.0, True)
    assert log.from_x(math.log(50)) == pytest.approx(50)


@pytest.mark.parametrize("kind", ["random", "lhs"])
def test_sampled_searches_are_seeded(tiny_doc, kind):
    doc = dict(tiny_doc, chips=[{"chip": "tpu-v4", "axes": {
        "freq_hz": {"low": 0.5e9, "high": 2e9}, "cores": {"low": 1, "high": 8, "integer": True},
    }}], search={"kind": kind, "n": 12, "seed": 7})
    first = [d.overrides for d in DesignSpace(parse_spec(doc)).designs()]
    again = [d.overrides for d in DesignSpace(parse_spec(doc)).designs()]
    other = [d.overrides for d in DesignSpace(parse_spec(dict(doc, search={
        "kind": kind, "n": 12, "seed": 8}))).designs()]
    assert first == again != other
    assert all(isinstance(dict(o)["cores"], int) and 1 <= dict(o)["cores"] <= 8 for o in first)
    freqs = np.array([dict(o)["freq_hz"] for o in first])
    assert ((freqs >= 0.5e9) & (freqs <= 2e9)).all()
    if kind == "lhs":  # one sample in each of the n strata
        strata = np.floor((freqs - 0.5e9) / 1.5e9 * 12).astype(int)
        assert sorted(strata) == list(range(12))


def test_random_duplicates_are_dropped(tiny_doc):
    doc = dict(tiny_doc, chips=[{"chip": "tpu-v4", "axes": {"cores": [1, 2]}}],
               search={"kind": "random", "n": 50})
    assert len(list(DesignSpace(parse_spec(doc)).designs())) == 2


def test_design_labels_carry_units(tiny_doc):
    space = DesignSpace(parse_spec(tiny_doc))
    label = list(space.designs())[1].label()
    assert label.startswith("array.rows,array.cols=64 dram.bandwidth=600 GB/s")
