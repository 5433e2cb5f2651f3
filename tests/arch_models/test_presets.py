"""Every chip preset reproduces its vendor's published figures from its own fields."""

from pathlib import Path

import pytest
import yaml

from infersim.arch_models import Chip, list_chips, load_chip
from infersim.errors import ConfigError, UnsupportedDtypeError

REQUIRED = {"tpu-v1", "tpu-v4", "eyeriss-v1", "a100-sxm-80gb", "h100-sxm", "h200", "b200"}
PRESETS = list_chips()


def test_required_presets_ship():
    assert set(PRESETS) >= REQUIRED
    assert len(set(PRESETS) - REQUIRED) >= 1  # the edge design


@pytest.mark.parametrize("name", PRESETS)
def test_preset_cites_its_source(name):
    chip = load_chip(name)
    assert chip.name == name
    assert len(chip.source) > 40
    assert chip.spec is not None and chip.spec.dense_flops


@pytest.mark.parametrize("name", PRESETS)
def test_peak_flops_match_published_dense_figures(name):
    chip = load_chip(name)
    assert chip.spec is not None
    for mac_class, published in chip.spec.dense_flops.items():
        assert chip.peak_flops(mac_class) == pytest.approx(published, rel=0.01), mac_class


@pytest.mark.parametrize("name", PRESETS)
def test_bandwidth_matches_published_figure(name):
    chip = load_chip(name)
    assert chip.spec is not None
    if chip.spec.dram_bandwidth_bytes_per_s is not None:
        assert chip.peak_bandwidth_bytes_per_s == pytest.approx(
            chip.spec.dram_bandwidth_bytes_per_s, rel=0.01
        )


@pytest.mark.parametrize(
    ("name", "dtype", "tflops", "tb_per_s"),
    [
        ("h100-sxm", "bf16", 989.4, 3.35),
        ("h100-sxm", "fp8", 1978.9, 3.35),
        ("h200", "bf16", 989.4, 4.8),
        ("a100-sxm-80gb", "fp16", 312.0, 2.039),
        ("b200", "fp4", 9000.0, 8.0),
        ("tpu-v4", "bf16", 275.0, 1.2),
        ("tpu-v1", "int8", 92.0, 0.034),
    ],
)
def test_headline_figures(name, dtype, tflops, tb_per_s):
    """Independent of the YAML spec block: the figures everyone quotes."""
    chip = load_chip(name)
    assert chip.peak_flops(dtype) / 1e12 == pytest.approx(tflops, rel=0.01)
    assert chip.peak_bandwidth_bytes_per_s / 1e12 == pytest.approx(tb_per_s, rel=0.01)


def test_ridge_point_is_peak_over_bandwidth():
    chip = load_chip("h100-sxm")
    assert chip.ridge_point("bf16") == pytest.approx(989.4e12 / 3.35e12, rel=0.01)


def test_storage_dtypes_map_to_compute_classes():
    chip = load_chip("h100-sxm")
    assert chip.peak_flops("fp8_e5m2") == chip.peak_flops("fp8") == chip.peak_flops("fp8_e4m3")


@pytest.mark.parametrize(("name", "dtype"), [("a100-sxm-80gb", "fp8"), ("h100-sxm", "fp4"),
                                             ("tpu-v1", "bf16"), ("eyeriss-v1", "fp16")])
def test_dtype_the_chip_cannot_compute_is_a_clear_error(name, dtype):
    chip = load_chip(name)
    assert not chip.supports(dtype)
    with pytest.raises(UnsupportedDtypeError, match=f"cannot compute {dtype}.*supported:"):
        chip.peak_flops(dtype)


def test_user_yaml_loads_like_a_preset(tmp_path: Path):
    data = load_chip("edge-npu").model_dump(mode="json")
    data["name"] = "my-npu"
    data["array"]["rows"] = 64
    path = tmp_path / "my-npu.yaml"
    path.write_text(yaml.safe_dump(data))
    chip = load_chip(path)
    assert chip.name == "my-npu"
    assert chip.peak_flops("int8") == pytest.approx(2 * load_chip("edge-npu").peak_flops("int8"))


def test_with_changes_a_dotted_path_and_revalidates():
    chip = load_chip("h100-sxm")
    assert chip.with_(**{"array.rows": 64}).array.pes == 2 * chip.array.pes
    assert chip.with_(**{"array.rows": 64}).key != chip.key
    with pytest.raises(ConfigError, match=r"array\.rows = 0"):
        chip.with_(**{"array.rows": 0})
    with pytest.raises(ConfigError, match="no field"):
        chip.with_(**{"array.nope": 1})


def test_chips_are_immutable_values():
    chip = load_chip("h100-sxm")
    with pytest.raises(Exception, match="frozen"):
        chip.cores = 1  # type: ignore[misc]
    assert Chip.model_validate(chip.model_dump()) == chip


def test_unknown_preset_lists_the_presets():
    with pytest.raises(ConfigError, match="unknown chip 'h900'.*h100-sxm"):
        load_chip("h900")


def test_missing_file_is_named(tmp_path: Path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_chip(tmp_path / "nope.yaml")


def test_malformed_yaml_names_the_line(tmp_path: Path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\ncores: [1, 2\nfreq_hz: 1\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: malformed YAML at line"):
        load_chip(path)


def test_unknown_field_is_rejected(tmp_path: Path):
    data = load_chip("edge-npu").model_dump(mode="json")
    data["array"]["colums"] = 4
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"array\.colums: unknown field"):
        load_chip(path)
