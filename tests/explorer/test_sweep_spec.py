"""SweepSpec: valid specs parse; an invalid one raises one error naming every bad field."""

from __future__ import annotations

from pathlib import Path

import pytest

from infersim.errors import ConfigError
from infersim.explorer.spec import (
    GridSearch,
    LhsSearch,
    OptimizeSearch,
    RandomSearch,
    RangeAxis,
    load_spec,
    parse_spec,
)
from infersim.simulator.defaults import DEFAULT_ENGINE


def test_valid_spec_parses(tiny_doc):
    spec = parse_spec(tiny_doc)
    assert isinstance(spec.search, GridSearch)
    assert spec.techniques == ["baseline"] and spec.engines == [DEFAULT_ENGINE]
    assert spec.chips[0].chip == "h100-sxm" and spec.chips[0].axes == {}
    axis = spec.chips[1].axes["dram.bandwidth_bytes_per_s"]
    assert isinstance(axis, RangeAxis) and axis.num == 3 and axis.log
    cases = spec.cases()
    assert [c.label for c in cases] == ["tiny-test decode b1 ctx128", "tiny-test prefill b1 p128"]
    assert len({c.key for c in cases}) == 2


def test_search_kinds(tiny_doc):
    for search, kind in (("grid", GridSearch), ({"kind": "random", "n": 5, "seed": 3},
                                                RandomSearch),
                         ({"kind": "lhs", "n": 4}, LhsSearch),
                         ({"kind": "optimize", "maxiter": 2}, OptimizeSearch)):
        assert isinstance(parse_spec({**tiny_doc, "search": search}).search, kind)


def test_paths_resolve_against_the_spec_folder(tmp_path: Path):
    chip = tmp_path / "chips" / "mine.yaml"
    chip.parent.mkdir()
    chip.write_text(Path("infersim/explorer/defaults/custom-systolic.yaml").read_text())
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(
        "chips:\n  - chip: chips/mine.yaml\n    axes: {cores: [4, 8]}\n"
        "workloads:\n  - {model: tiny-test}\n"
    )
    spec = load_spec(spec_file)
    assert spec.chips[0].chip == str(chip.resolve())
    assert spec.chips[0].base_chip().name == "infersim-sa"


def test_every_bad_field_is_listed_at_once(tiny_doc):
    doc = {
        **tiny_doc,
        "chips": [
            "h900",
            {"chip": "tpu-v4", "axes": {"array.rowz": [64], "array.rows": [0, 128],
                                        "cores": {"low": 4, "high": 2}}},
        ],
        "workloads": [{"model": "gpt-9"}, {"model": "tiny-test", "phase": "train"},
                      {"model": "tiny-test", "batch": [1, -4]}],
        "techniques": ["baseline", "int5-magic"],
        "dataflows": ["zz"],
        "engines": ["warp-drive"],
        "constraints": ["area_mm2 <= big", "speed >= 3", "fits == 7"],
        "objectives": ["tokens_per_s:up"],
        "search": {"kind": "random", "n": 0},
        "colour": "blue",
    }
    with pytest.raises(ConfigError) as info:
        parse_spec(doc, "bad.yaml")
    text = str(info.value)
    lines = text.splitlines()
    assert all(line.startswith("bad.yaml: ") for line in lines)
    for expected in (
        "chips.0.chip: unknown chip 'h900'",
        "chips.1.axes: array.rowz = 64: chip has no field 'array.rowz'",
        "chips.1.axes: array.rows = 0: Input should be greater than or equal to 1",
        "high = 2 is below low = 4",
        "workloads.0.model: unknown model 'gpt-9'",
        "workloads.1.phase",
        "batch = -4",
        "unknown technique 'int5-magic'",
        "unknown dataflow 'zz'",
        "unknown engine 'warp-drive'",
        "'big' is not a number",
        "unknown metric 'speed'",
        "fits takes true/false",
        "direction must be min or max",
        "search.random.n = 0",
        "colour: unknown field",
    ):
        assert expected in text, f"{expected!r} missing from:\n{text}"


def test_cross_field_checks(tiny_doc):
    grid_range = {**tiny_doc, "chips": [{"chip": "tpu-v4",
                                         "axes": {"freq_hz": {"low": 1e9, "high": 2e9}}}]}
    with pytest.raises(ConfigError, match="a grid search needs num"):
        parse_spec(grid_range)
    with pytest.raises(ConfigError, match="needs integer: true"):
        parse_spec({**tiny_doc, "chips": [{"chip": "tpu-v4", "axes": {
            "cores": {"low": 1, "high": 4, "num": 4}}}]})
    with pytest.raises(ConfigError, match="no chip has axes to optimize"):
        parse_spec({**tiny_doc, "chips": ["h100-sxm"], "search": {"kind": "optimize"}})
    with pytest.raises(ConfigError, match="dataflows need an engine that maps"):
        parse_spec({**tiny_doc, "engines": ["roofline"], "dataflows": ["ws"]})


def test_dataflows_apply_to_the_engines_that_map(tiny_doc):
    from infersim.explorer.space import DesignSpace

    spec = parse_spec({**tiny_doc, "chips": ["tpu-v4"], "engines": ["roofline", "analytic"],
                       "dataflows": ["ws", "os"]})
    points = list(DesignSpace(spec).points())
    pairs = {(p.engine, p.dataflow) for p in points}
    assert pairs == {("roofline", None), ("analytic", "ws"), ("analytic", "os")}
    assert len(points) == 2 * 3


def test_technique_stacks_are_checked(tiny_doc):
    spec = parse_spec({**tiny_doc, "techniques": ["baseline", "int4-awq+kv-fp8", " fuse "]})
    assert spec.techniques == ["baseline", "int4-awq+kv-fp8", "fuse"]
    with pytest.raises(ConfigError, match="tp=0"):
        parse_spec({**tiny_doc, "techniques": ["tp=0"]})


def test_not_a_mapping_and_missing_file(tmp_path: Path):
    with pytest.raises(ConfigError, match="expected a mapping"):
        parse_spec(["chips"])
    with pytest.raises(ConfigError, match="does not exist"):
        load_spec(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("chips: [h100\n")
    with pytest.raises(ConfigError, match="malformed YAML"):
        load_spec(bad)


def test_fingerprint_is_stable_and_sensitive(tiny_doc):
    a, b = parse_spec(tiny_doc), parse_spec(tiny_doc)
    assert a.fingerprint() == b.fingerprint()
    assert parse_spec({**tiny_doc, "name": "other"}).fingerprint() != a.fingerprint()


def test_serving_block_is_validated(tiny_doc):
    ok = parse_spec({**tiny_doc, "serving": {"config": {"workload": {
        "arrivals": {"kind": "burst"}, "requests": 10}}}})
    assert ok.serving is not None and ok.serving.technique == "baseline"
    with pytest.raises(ConfigError) as info:
        parse_spec({**tiny_doc, "serving": {"technique": "int9", "config": {"workload": {
            "arrivals": {"kind": "poisson", "rate_per_s": -1}, "requests": 10}}}})
    text = str(info.value)
    assert "serving.technique: unknown technique 'int9'" in text
    assert "rate_per_s" in text


def test_yaml_exponents_become_numbers(tmp_path: Path):
    # YAML 1.1 reads 6.4e12 (no sign in the exponent) as a string; axes take it as a number
    path = tmp_path / "spec.yaml"
    path.write_text("chips:\n  - chip: tpu-v4\n    axes: {dram.bandwidth_bytes_per_s: [1.6e12, "
                    "6.4e12], cores: ['2', 4]}\nworkloads: [{model: tiny-test}]\n")
    axes = load_spec(path).chips[0].axes
    assert axes["dram.bandwidth_bytes_per_s"] == [1.6e12, 6.4e12]
    assert axes["cores"] == [2, 4]


@pytest.mark.parametrize("bound", ["nan", "inf", "-inf"])
def test_a_non_finite_constraint_bound_is_refused(bound: str):
    from infersim.errors import ConfigError
    from infersim.explorer.metrics import parse_constraint

    with pytest.raises(ConfigError, match="not a finite number"):
        parse_constraint(f"area_mm2 <= {bound}")


def test_a_chip_entry_applies_its_calibration_profile(tmp_path: Path):
    """``calibration:`` on a chip entry applies a profile (infersim calibrate --profile) to the
    base chip, so a sweep and its report cost the calibrated chip; one for another chip is an
    error naming the field."""
    profile = Path("infersim/validation/data/public_gpu/profiles/h100-sxm.yaml").resolve()
    doc = {"chips": [{"chip": "h100-sxm", "calibration": str(profile)}],
           "workloads": [{"model": "tiny-test"}]}
    base = parse_spec(doc).chips[0].base_chip()
    assert base.calibration.dram_bandwidth_efficiency < 1.0
    assert base.name == "h100-sxm"
    with pytest.raises(ConfigError, match="calibration"):
        parse_spec({**doc, "chips": [{"chip": "a100-sxm-80gb", "calibration": str(profile)}]})
    (tmp_path / "p.yaml").write_text(profile.read_text())
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text("chips:\n  - {chip: h100-sxm, calibration: p.yaml}\n"
                         "workloads:\n  - {model: tiny-test}\n")
    assert load_spec(spec_file).chips[0].base_chip().calibration == base.calibration
