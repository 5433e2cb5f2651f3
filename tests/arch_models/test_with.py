"""``Chip.with_`` validates only the parts a change reaches: the same chip, key and errors as
validating the whole changed description."""

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersim.arch_models import Chip, list_chips, load_chip
from infersim.errors import ConfigError
from infersim.simulator.engines import analytic

PRESETS = list_chips()

# (path, values to try): in range, out of range, of the wrong type, and paths naming nothing
CHANGES: list[tuple[str, list[Any]]] = [
    ("cores", [1, 7, 0, -3, "x"]),
    ("freq_hz", [1.0e9, 2.5e9, 0.0, float("nan")]),
    ("name", ["variant", ""]),
    ("array.rows", [8, 64, 0]),
    ("array.cols", [16, 300]),
    ("array.macs_per_pe_per_cycle.int4", [8.0, -1.0]),
    ("array.macs_per_pe_per_cycle.nope", [1.0]),
    ("array.supported_dataflows", [None, ["ws"], ["ws", "ws"], []]),
    ("array.double_buffered", [True, False]),
    ("sram.capacity_bytes", [1 << 20, 0]),
    ("sram.fill_bytes_per_cycle", [None, 64.0]),
    ("dram.bandwidth_bytes_per_s", [1.0e12, -5.0]),
    ("dram.latency_s", [0.0, 1e-6]),
    ("shared_sram.capacity_bytes", [4 << 20, 0]),
    ("energy.dram_pj_per_byte", [10.0, -1.0]),
    ("energy.mac_pj.int8", [0.1]),
    ("calibration.compute_efficiency", [0.7, 1.5]),
    ("calibration.compute_efficiency_by_dtype.fp8", [0.8]),
    ("launch", [None]),
    ("array.nope", [1]),
    ("nope.rows", [1]),
    ("cores.rows", [1]),
]


def outcome(chip: Any, changes: dict[str, Any], fast: bool) -> tuple[str, Any]:
    try:
        made = chip.with_(**changes) if fast else chip._with_validated(changes)
    except ConfigError as exc:
        return "error", str(exc)
    return "chip", (made.model_dump(), made.key, type(made.key))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PRESETS),
       st.lists(st.sampled_from([(p, i) for p, vs in CHANGES for i in range(len(vs))]),
                min_size=1, max_size=4, unique_by=lambda c: c[0]))
def test_with_equals_validating_the_whole_description(name: str, picks: list[tuple[str, int]]):
    chip = load_chip(name)
    values = dict(CHANGES)
    changes = {path: values[path][i] for path, i in picks}
    assert outcome(chip, changes, True) == outcome(chip, changes, False)


def test_with_replacing_and_changing_one_part_at_once():
    chip = load_chip("h100-sxm")
    changes = {"array": chip.array.model_dump(), "array.rows": 8}
    assert outcome(chip, changes, True) == outcome(chip, changes, False)


@pytest.mark.parametrize("name", PRESETS)
def test_with_keeps_unchanged_parts(name: str):
    chip = load_chip(name)
    variant = chip.with_(**{"dram.bandwidth_bytes_per_s": 2 * chip.dram.bandwidth_bytes_per_s})
    assert variant.array is chip.array and variant.energy is chip.energy
    assert variant.dram.bandwidth_bytes_per_s == 2 * chip.dram.bandwidth_bytes_per_s
    assert variant.key != chip.key


@pytest.mark.parametrize("name", PRESETS)
def test_a_view_is_the_variant_keyed_by_its_chip_and_role(name: str):
    chip = load_chip(name)
    changes = {"cores": 1, "sram.capacity_bytes": 2 * chip.sram.capacity_bytes}
    cores, same, other = chip.view("a", **changes), chip.view("a", **changes), chip.view("b")
    assert cores == chip.with_(**changes)  # the same fields, of the same types
    assert repr(cores.model_dump()) == repr(chip.with_(**changes).model_dump())
    assert cores.key == same.key  # a function of the chip's key and the role
    assert len({chip.key, cores.key, other.key, chip.with_(**changes).key}) == 4
    # a chip of other fields never shares its views' keys
    bigger = chip.with_(**{"dram.bandwidth_bytes_per_s": 2 * chip.dram.bandwidth_bytes_per_s})
    assert bigger.view("a", **changes).key != cores.key
    with pytest.raises(ConfigError, match="no field"):
        chip.view("a", **{"array.nope": 1})


@pytest.mark.parametrize("name", [n for n in PRESETS if load_chip(n).shared_sram is not None])
def test_the_engines_level_views_are_their_validated_variants(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The analytic engine's views of a two-level chip copy their changes without validating
    them again: they hold the fields, of the same types, that validating them gives."""
    chip = load_chip(name)
    made: list[str] = []
    view = Chip.view

    def checked(self: Chip, role: str, **changes: Any) -> Chip:
        copy, valid = view(self, role, **changes), self.with_(**changes)
        assert repr(copy.model_dump()) == repr(valid.model_dump())
        assert copy.key == f"{self.key}/{role}"
        made.append(role)
        return copy

    monkeypatch.setattr(Chip, "view", checked)
    analytic.clear_cache()
    analytic.level_views(chip)
    analytic.clear_cache()
    assert made == ["cores", "shared SRAM"]
