"""Packaged defaults: the sweep ``infersim report`` runs with no arguments, and its custom chip."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from infersim.explorer.spec import SweepSpec, load_spec

DEFAULT_SPEC = "default-sweep.yaml"


def default_spec_path() -> Path:
    """The packaged default sweep spec (YAML)."""
    return Path(str(resources.files(__name__) / DEFAULT_SPEC))


def default_spec() -> SweepSpec:
    """The packaged default sweep, validated."""
    return load_spec(default_spec_path())
