"""Reading description files (YAML, JSON) and resolving preset names, with clear errors.

One mechanism for chips, models and workloads: a name is a packaged preset, anything that looks
like a path is a user's file; either way the text is parsed here and validated by the caller.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from infersim.errors import ConfigError, format_validation_error

M = TypeVar("M", bound=BaseModel)


def read_document(path: Path) -> Any:
    """Parse a YAML or JSON file (by suffix; YAML otherwise).

    Raises:
        ConfigError: the file is missing, unreadable or not valid YAML/JSON.
    """
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        if path.suffix == ".json":
            return json.loads(text)
        return yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: malformed JSON at line {exc.lineno}: {exc.msg}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{path}: malformed YAML{where}: {problem}") from None


def validate(model: type[M], data: Any, source: str) -> M:
    """``model.model_validate(data)`` with a :class:`ConfigError` naming every bad field."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of fields, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, model, source)) from None


def preset_names(package: str, suffix: str) -> list[str]:
    """Names of the presets shipped in ``package``/presets with file suffix ``suffix``."""
    folder = resources.files(package) / "presets"
    return sorted(p.name[: -len(suffix)] for p in folder.iterdir() if p.name.endswith(suffix))


def resolve(name_or_path: str | Path, package: str, suffix: str, what: str) -> Path:
    """The file for a preset name or a user path.

    Raises:
        ConfigError: neither a preset nor an existing file; the message lists the presets.
    """
    text = str(name_or_path)
    candidate = Path(text).expanduser()
    looks_like_path = candidate.suffix in {".yaml", ".yml", ".json"} or "/" in text
    if candidate.is_file():
        return candidate
    names = preset_names(package, suffix)
    if text in names and not looks_like_path:
        return Path(str(resources.files(package) / "presets" / f"{text}{suffix}"))
    if looks_like_path:
        raise ConfigError(f"{what} file {text!r} does not exist")
    raise ConfigError(f"unknown {what} {text!r}; presets: {', '.join(names)} (or a file path)")
