"""Reading description files (YAML, JSON) and resolving preset names, with clear errors.

One mechanism for chips, models and workloads: a name is a packaged preset, anything that looks
like a path is a user's file; either way the text is parsed here and validated by the caller.
"""

from __future__ import annotations

import json
import stat
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from infersim.errors import ConfigError, format_validation_error

M = TypeVar("M", bound=BaseModel)


MAX_INPUT_BYTES = 64 * 1024**2
"""Largest user file read (description files are kilobytes; traces and tables megabytes)."""

MAX_YAML_NODES = 1_000_000
"""Nodes a YAML document may hold once its aliases (``*name``) are expanded: far more than any
config, far fewer than an alias bomb (nine levels of ``[*a, *a, ...]`` expand to billions)."""

MAX_NESTING = 64
"""Deepest nesting of mappings/sequences allowed in a YAML or JSON document."""


def read_text(path: Path, what: str = "file", max_bytes: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of a user's file: a regular file (never a FIFO, device or folder, which
    could block or never end) of at most ``max_bytes``.

    Raises:
        ConfigError: missing, unreadable, not a regular file, too large, or not UTF-8 (the
            message names the file and the byte offset).
    """
    try:
        info = path.stat()
    except OSError as exc:
        raise ConfigError(f"{what} {path}: cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{what} {path}: not a regular file")
    if info.st_size > max_bytes:
        raise ConfigError(
            f"{what} {path}: {info.st_size:,} bytes; at most {max_bytes:,} are read"
        )
    try:
        with path.open("rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise ConfigError(f"{what} {path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > max_bytes:
        raise ConfigError(f"{what} {path}: more than {max_bytes:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{what} {path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None


def _expanded_nodes(root: yaml.Node) -> int:
    """Nodes of a composed YAML document with every alias expanded (shared nodes counted each
    time they are referenced; each distinct node visited once)."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        if done or not children:
            sizes[id(node)] = 1 + sum(sizes[id(c)] for c in children)
            continue
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(root)]


class _BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with a nesting limit and a budget of expanded nodes (checked on the
    composed node graph, before anything is built from it)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_NESTING:
                raise yaml.YAMLError(f"nested deeper than {MAX_NESTING} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def bounded_data(self) -> Any:
        """The document's data, refused when its aliases expand beyond the budget."""
        node = self.get_single_node()
        if node is None:
            return None
        if _expanded_nodes(node) > MAX_YAML_NODES:
            raise yaml.YAMLError(
                f"its aliases expand to more than {MAX_YAML_NODES:,} nodes (an alias bomb?)"
            )
        return self.construct_document(node)


def _depth(value: Any, limit: int) -> None:
    """Raise ValueError when ``value`` nests deeper than ``limit`` (iteratively)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                raise ValueError(f"nested deeper than {limit} levels")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)


def parse_document(text: str, source: str, json_format: bool) -> Any:
    """Parse YAML (bounded aliases and nesting) or JSON text from ``source``.

    Raises:
        ConfigError: malformed, too deeply nested, an alias bomb, or an absurd literal (an
            integer of thousands of digits).
    """
    try:
        if json_format:
            data = json.loads(text)
        else:
            loader = _BoundedLoader(text)
            try:
                data = loader.bounded_data()
            finally:
                loader.dispose()
        _depth(data, MAX_NESTING)
        return data
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}: malformed JSON at line {exc.lineno}: {exc.msg}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{source}: malformed YAML{where}: {problem}") from None
    except RecursionError:
        raise ConfigError(f"{source}: nested deeper than {MAX_NESTING} levels") from None
    except ValueError as exc:  # e.g. an integer literal over Python's 4,300-digit limit
        raise ConfigError(f"{source}: {str(exc).splitlines()[0]}") from None


def read_document(path: Path, what: str = "file") -> Any:
    """Parse a user's YAML or JSON file (by suffix; YAML otherwise) through :func:`read_text`.

    Raises:
        ConfigError: as :func:`read_text` and :func:`parse_document`.
    """
    return parse_document(read_text(path, what), str(path), path.suffix == ".json")


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
    if _is(candidate, Path.is_file):
        return candidate
    names = preset_names(package, suffix)
    if text in names and not looks_like_path:
        return Path(str(resources.files(package) / "presets" / f"{text}{suffix}"))
    if looks_like_path:
        raise ConfigError(f"{what} file {text!r} does not exist")
    raise ConfigError(f"unknown {what} {text!r}; presets: {', '.join(names)} (or a file path)")


def _is(path: Path, test: Any) -> bool:
    """``test(path)`` (``Path.is_file``, ``Path.is_dir``), False for a name the OS refuses
    (too long, an invalid character) instead of an OSError."""
    try:
        return bool(test(path))
    except (OSError, ValueError):
        return False


def is_dir(path: Path) -> bool:
    """Whether ``path`` is a folder; False for a name the OS refuses."""
    return _is(path, Path.is_dir)
