"""The area/power/cost estimate: sourced constants, sane magnitudes, monotone in each knob."""

from __future__ import annotations

import pytest

from infersim import list_chips, load_chip
from infersim.explorer.cost import CONSTANTS, PROCESS_NODE_NM, estimate


def test_every_constant_has_a_unit_and_a_source():
    assert PROCESS_NODE_NM == 7
    for name, c in CONSTANTS.items():
        assert c.value >= 0 and c.unit and len(c.source) > 8, name


@pytest.mark.parametrize("name", list_chips())
def test_every_preset_gets_positive_estimates(name):
    e = estimate(load_chip(name))
    assert e.area_mm2 > 0 and e.cost_usd > 0 and e.peak_power_w > e.static_power_w >= 0
    assert sum(e.area_by_part_mm2.values()) == pytest.approx(e.area_mm2)


def test_magnitudes_are_plausible():
    # H100 (814 mm², 700 W TDP) carries general-purpose SM logic the model does not describe;
    # the estimate is for ranking, within a small factor.
    h100 = estimate(load_chip("h100-sxm"))
    assert 814 / 3 < h100.area_mm2 < 814 * 1.5
    assert 700 / 2 < h100.peak_power_w < 700 * 2.5
    assert 500 < h100.cost_usd < 10_000
    assert estimate(load_chip("edge-npu")).area_mm2 < 30


@pytest.mark.parametrize(("path", "low", "high"), [
    ("array.rows", 64, 256), ("sram.capacity_bytes", 4 << 20, 64 << 20),
    ("dram.bandwidth_bytes_per_s", 1e12, 4e12), ("cores", 2, 8),
    ("vector.lanes", 256, 4096),
])
def test_area_grows_with_each_resource(path, low, high):
    base = load_chip("tpu-v4")
    small, big = estimate(base.with_(**{path: low})), estimate(base.with_(**{path: high}))
    assert big.area_mm2 > small.area_mm2 and big.cost_usd > small.cost_usd


def test_more_compute_classes_cost_area():
    base = load_chip("tpu-v4")
    more = base.with_(**{"array.macs_per_pe_per_cycle": {"bf16": 4, "int8": 4, "fp8": 4}})
    assert estimate(more).area_mm2 > estimate(base).area_mm2
