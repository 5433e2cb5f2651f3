"""The presets of real chips carry their published die area and TDP (and price where one is
known), each with a source and estimates marked as such; sweeps record those figures instead of
the cost model's estimates, and say which figures are estimates."""

from __future__ import annotations

from pathlib import Path

import pytest

from infersim.arch_models import load_chip
from infersim.arch_models.chip import PublishedSpec
from infersim.explorer.cost import chip_figures, estimate
from infersim.explorer.executors import LocalExecutor
from infersim.explorer.spec import parse_spec
from infersim.explorer.store import load_results
from infersim.explorer.sweep import run_sweep

REAL = ("h100-sxm", "a100-sxm-80gb", "h200", "b200", "tpu-v1", "tpu-v4", "eyeriss-v1")
MADE_UP = ("edge-npu",)
FIELDS = ("die_area_mm2", "tdp_w", "price_usd")

PUBLISHED = {  # the figures as their sources give them (mm², W)
    "h100-sxm": (814, 700), "a100-sxm-80gb": (826, 400), "h200": (814, 700),
    "b200": (1600, 1000), "tpu-v1": (331, 75), "tpu-v4": (600, 192), "eyeriss-v1": (16, 0.278),
}


def spec_of(name: str) -> PublishedSpec:
    spec = load_chip(name).spec
    assert spec is not None, f"{name} has no spec: block"
    return spec


@pytest.mark.parametrize("name", REAL)
def test_real_chips_have_die_area_and_tdp_with_sources(name: str):
    spec = spec_of(name)
    area, tdp = PUBLISHED[name]
    assert spec.die_area_mm2 == pytest.approx(area) and spec.tdp_w == pytest.approx(tdp)
    given = [f for f in FIELDS if getattr(spec, f) is not None]
    assert set(spec.sources) == set(given), "one source per figure, none for a missing one"
    for field in given:
        source = spec.sources[field]
        # a URL, or a paper named by its authors and venue
        assert "http" in source or " et al." in source, (field, source)
    assert set(spec.estimated) <= set(given)


@pytest.mark.parametrize("name", [n for n in REAL if spec_of(n).price_usd is not None])
def test_prices_are_marked_as_estimates_unless_a_list_price(name: str):
    spec = spec_of(name)
    assert "price_usd" in spec.estimated  # no vendor lists these prices
    assert "estimate" in spec.sources["price_usd"] or "~" in spec.sources["price_usd"]


@pytest.mark.parametrize("name", MADE_UP)
def test_a_made_up_design_publishes_nothing(name: str):
    spec = load_chip(name).spec
    assert spec is None or all(getattr(spec, f) is None for f in FIELDS)


def test_figures_are_published_ones_and_estimates_are_named():
    h100 = load_chip("h100-sxm")
    figures = chip_figures(h100)
    assert (figures.area_mm2, figures.peak_power_w, figures.cost_usd) == (814, 700, 28000)
    assert figures.estimated == ("cost_usd",)  # the price is an estimate, not a list price
    assert figures.static_power_w == estimate(h100).static_power_w
    npu = chip_figures(load_chip("edge-npu"))
    assert npu.estimated == ("area_mm2", "peak_power_w", "cost_usd")
    assert npu.area_mm2 == estimate(load_chip("edge-npu")).area_mm2


def test_a_variant_scales_its_chips_published_figures_and_is_an_estimate():
    h100 = load_chip("h100-sxm")
    more_l2 = h100.with_(**{"shared_sram.capacity_bytes": 4 * h100.shared_sram.capacity_bytes})
    figures = chip_figures(more_l2, h100)
    ratio = estimate(more_l2).area_mm2 / estimate(h100).area_mm2
    assert ratio > 1
    assert figures.area_mm2 == pytest.approx(814 * ratio)
    assert figures.estimated == ("area_mm2", "peak_power_w", "cost_usd")


def test_a_sweep_records_published_figures(tmp_path: Path):
    doc = {"chips": ["h100-sxm", "edge-npu",
                     {"chip": "tpu-v4", "axes": {"dram.bandwidth_bytes_per_s": [1.2e12, 2.4e12]}}],
           "workloads": [{"model": "tiny-test"}], "engines": ["roofline"]}
    run_sweep(parse_spec(doc), tmp_path / "r", executor=LocalExecutor(1))
    df = load_results(tmp_path / "r").set_index("design")
    h100 = df[df["chip"] == "h100-sxm"].iloc[0]
    assert (h100["area_mm2"], h100["peak_power_w"], h100["cost_usd"]) == (814, 700, 28000)
    assert h100["estimated_figures"] == "cost_usd"
    assert h100["tokens_per_s_per_mm2"] == pytest.approx(h100["tokens_per_s"] / 814)
    npu = df[df["chip"] == "edge-npu"].iloc[0]
    assert npu["estimated_figures"] == "area_mm2,peak_power_w,cost_usd"
    tpu = df[df["chip"] == "tpu-v4"]
    assert len(tpu) == 2 and (tpu["estimated_figures"] == "area_mm2,peak_power_w,cost_usd").all()
