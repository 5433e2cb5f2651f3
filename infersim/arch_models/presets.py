"""Chip presets (YAML package data) and loading a user's chip file the same way."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from infersim.arch_models.chip import Chip
from infersim.io import preset_names, read_document, resolve, validate

_PACKAGE = "infersim.arch_models"
_SUFFIX = ".yaml"


def list_chips() -> list[str]:
    """Names of the packaged chip presets."""
    return preset_names(_PACKAGE, _SUFFIX)


def load_chip(name_or_path: str | Path) -> Chip:
    """A validated :class:`Chip` from a preset name (``h100-sxm``) or a YAML/JSON file path.

    Raises:
        ConfigError: unknown preset, unreadable or malformed file, or invalid fields (every bad
            field is named with its value and allowed range).
    """
    path = resolve(name_or_path, _PACKAGE, _SUFFIX, "chip")
    return _load(path.resolve(), path.stat().st_mtime_ns)


@lru_cache(maxsize=64)
def _load(path: Path, mtime_ns: int) -> Chip:
    return validate(Chip, read_document(path), str(path.name))
