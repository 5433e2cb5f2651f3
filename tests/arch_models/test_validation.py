"""Every bad value of every chip field is a validation error naming the field, never a crash."""

import math
import types
import typing
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from infersim.arch_models import Chip, load_chip
from infersim.arch_models.chip import (
    MAX_MACS_PER_PE_PER_CYCLE,
    MIN_EFFICIENCY,
    MIN_MACS_PER_PE_PER_CYCLE,
)
from infersim.errors import ConfigError
from infersim.io import validate

BASE = load_chip("h100-sxm").model_dump(mode="json")
DICT_RATE_BOUNDS = {
    # dict-valued fields checked by validators: (lower, lower inclusive, upper)
    "array.macs_per_pe_per_cycle": (MIN_MACS_PER_PE_PER_CYCLE, True, MAX_MACS_PER_PE_PER_CYCLE),
    "energy.mac_pj": (0.0, True, 1e6),
    "calibration.compute_efficiency_by_dtype": (MIN_EFFICIENCY, True, 1.0),
}


def _unwrap(annotation: Any) -> Any:
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return next(a for a in typing.get_args(annotation) if a is not type(None))
    return annotation


def _numeric_leaves(model: type[BaseModel], data: dict, prefix: str = ""):
    """(path, python type, bounds) of every numeric field present in ``data``."""
    for name, field in model.model_fields.items():
        if name not in data or data[name] is None:
            continue
        path = f"{prefix}{name}"
        ann = _unwrap(field.annotation)
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from _numeric_leaves(ann, data[name], f"{path}.")
        elif ann in (int, float):
            bounds = {"optional": field.annotation is not ann}
            for meta in field.metadata:
                for key in ("gt", "ge", "lt", "le"):
                    if getattr(meta, key, None) is not None:
                        bounds[key] = getattr(meta, key)
            yield path, ann, bounds
        elif path in DICT_RATE_BOUNDS:
            low, inclusive, high = DICT_RATE_BOUNDS[path]
            key = next(iter(data[name]), None)
            if key is not None:
                bounds = {"ge" if inclusive else "gt": low, "le": high}
                yield f"{path}.{key}", float, bounds


LEAVES = list(_numeric_leaves(Chip, BASE))


def _valid(kind: type, bounds: dict, value: Any) -> bool:
    if value is None:
        return bounds.get("optional", False)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if not math.isfinite(value):
        return False
    if kind is int and value != int(value):
        return False
    checks = {"gt": value > bounds.get("gt", -math.inf), "ge": value >= bounds.get("ge", -math.inf),
              "lt": value < bounds.get("lt", math.inf), "le": value <= bounds.get("le", math.inf)}
    return all(checks.values())


def _set(data: dict, path: str, value: Any) -> dict:
    import copy

    out = copy.deepcopy(data)
    node = out
    *parents, leaf = path.split(".")
    for part in parents:
        node = node[part]
    node[leaf] = value
    return out


def test_schema_walk_finds_every_component():
    prefixes = {p.split(".")[0] for p, _, _ in LEAVES}
    assert {"cores", "freq_hz", "array", "vector", "sram", "dram", "energy", "calibration",
            "host_link", "chip_link"} <= prefixes
    assert len(LEAVES) > 30


values = st.one_of(
    st.integers(min_value=-(2**62), max_value=2**62),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 0.5, 1e300, -1e-300, float("nan"), float("inf"), "fast", None, [1]]),
)


@given(leaf=st.sampled_from(LEAVES), value=values)
def test_every_field_accepts_exactly_its_range(leaf, value):
    path, kind, bounds = leaf
    data = _set(BASE, path, value)
    if _valid(kind, bounds, value):
        validate(Chip, data, "chip.yaml")
        return
    with pytest.raises(ConfigError) as info:
        validate(Chip, data, "chip.yaml")
    message = str(info.value)
    field = path.rsplit(".", 1)[0] if any(path.startswith(d) for d in DICT_RATE_BOUNDS) else path
    assert field in message
    assert "Traceback" not in message


@pytest.mark.parametrize(("path", "value", "expected"), [
    ("array.rows", 0,
     r"array\.rows = 0: .*greater than or equal to 1 \(allowed: >= 1 and <= 65536\)"),
    ("dram.bandwidth_bytes_per_s", -3.35e12, r"dram\.bandwidth_bytes_per_s = -3350000000000\.0"),
    ("calibration.dram_bandwidth_efficiency", 1.5, r"allowed: >= 0.0001 and <= 1"),
    ("freq_hz", "fast", r"freq_hz = 'fast'"),
    ("array.macs_per_pe_per_cycle", {"bf16": -1}, r"rate for bf16 = -1"),
    ("array.macs_per_pe_per_cycle", {"fp9": 1}, r"macs_per_pe_per_cycle\.fp9"),
])
def test_messages_name_field_value_and_range(path, value, expected):
    with pytest.raises(ConfigError, match=expected):
        validate(Chip, _set(BASE, path, value), "chip.yaml")


def test_missing_required_field_is_named():
    data = dict(BASE)
    del data["dram"]
    with pytest.raises(ConfigError, match="dram: required field is missing"):
        validate(Chip, data, "chip.yaml")


def test_all_bad_fields_reported_at_once():
    data = _set(_set(BASE, "cores", 0), "sram.capacity_bytes", -1)
    with pytest.raises(ConfigError) as info:
        validate(Chip, data, "chip.yaml")
    assert "cores = 0" in str(info.value) and "sram.capacity_bytes = -1" in str(info.value)
