"""Calibration profiles: fitted knobs per chip, written by ``infersim calibrate --profile`` and
applied by ``infersim simulate|compare --calibration FILE`` and :func:`apply_profile`.

A profile is YAML or JSON (by suffix)::

    infersim_calibration_profile: 1
    engine: analytic
    mode: shared            # or per-chip
    chips:
      h100-sxm: {dram_bandwidth_efficiency: 0.81, compute_efficiency_by_dtype.bf16: 0.62}
    fit: {...}              # the report's figures: MAPE before/after, held-out, warnings

Knob names are :class:`~infersim.arch_models.chip.Calibration` fields
(``compute_efficiency_by_dtype.<class>`` for one MAC class).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from infersim.arch_models.chip import Chip
from infersim.errors import ConfigError
from infersim.validation.calibrate import with_knobs
from infersim.validation.fitting import FitResult, check_knobs

PROFILE_VERSION = 1


class Profile(BaseModel):
    """Fitted calibration knobs per chip preset name, and how they were fitted."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    infersim_calibration_profile: int = Field(
        default=PROFILE_VERSION, ge=1, le=PROFILE_VERSION, description="Profile format version"
    )
    engine: str = Field(default="analytic", description="Engine the knobs were fitted through")
    mode: str = Field(default="shared", description="shared (one knob set) or per-chip")
    chips: dict[str, dict[str, float]] = Field(min_length=1, description="Chip -> knob values")
    fit: dict[str, Any] = Field(default_factory=dict, description="Fit metadata and errors")


def profile_from(result: FitResult, report: dict[str, Any]) -> Profile:
    """The profile of a fit (chips by name) with the report's summary figures."""
    meta = {
        "date": dt.date.today().isoformat(),
        "n_rows": report.get("n_rows"),
        "fit": {k: v for k, v in report.get("fit", {}).items() if k != "by_class"},
        "holdout": {
            k: v
            for k, v in (report.get("holdout") or {}).items()
            if k in ("method", "mape_before", "mape_after", "max_error")
        }
        or None,
        "good": report.get("good"),
        "warnings": report.get("warnings", []),
        "uncertainty_rse": {
            g: {k["knob"]: k["rse"] for k in ks} for g, ks in report.get("knobs", {}).items()
        },
    }
    return Profile(
        engine=report.get("engine", "analytic"),
        mode=report.get("mode", "shared"),
        chips={n: result.knob_values(n) for n in sorted(result.chips)},
        fit=meta,
    )


def write_profile(profile: Profile, path: Path) -> None:
    """Write ``profile`` as JSON (``.json``) or YAML (anything else).

    Raises:
        ConfigError: the file cannot be written.
    """
    data = profile.model_dump(mode="json")
    text = (
        json.dumps(data, indent=2) + "\n"
        if path.suffix == ".json"
        else yaml.safe_dump(data, sort_keys=False, width=100)
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write ({exc.strerror or exc})") from None


def load_profile(path: Path | str) -> Profile:
    """A validated profile from a YAML or JSON file.

    Raises:
        ConfigError: unreadable, not a profile, or an unknown knob.
    """
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read a calibration profile ({exc})") from None
    if not isinstance(data, dict) or "chips" not in data:
        raise ConfigError(f"{path}: not a calibration profile (no 'chips' mapping)")
    try:
        profile = Profile.model_validate(data)
        for knobs in profile.chips.values():
            check_knobs(list(knobs))
    except ValueError as exc:
        raise ConfigError(f"{path}: invalid calibration profile: {exc}") from None
    return profile


def apply_profile(chip: Chip, profile: Profile | Path | str) -> Chip:
    """``chip`` with the profile's knobs for it (by name; ``<name>-calibrated`` matches too).

    Raises:
        ConfigError: the profile has no entry for this chip (it names the ones it has), an
            unreadable profile, or a knob value out of range.
    """
    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    name = chip.name.removesuffix("-calibrated")
    knobs = prof.chips.get(chip.name, prof.chips.get(name))
    if knobs is None:
        raise ConfigError(
            f"calibration profile is for {', '.join(sorted(prof.chips))}, not "
            f"{chip.name!r}: pass one of those as --chip, or fit this chip"
        )
    return with_knobs(chip, knobs)
