"""The errors infersim raises for bad input, and one formatter for pydantic's.

Every user-facing failure is an :class:`InfersimError` (a ``ValueError``) whose message names
what is wrong and what is allowed; the CLI prints it and exits with code 2.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pydantic's model machinery is imported on first use (a fast CLI start)
    from pydantic import BaseModel, ValidationError


class InfersimError(ValueError):
    """Bad input: the message says what is wrong and what is allowed."""


class ConfigError(InfersimError):
    """A chip, model, workload or scenario description that cannot be used."""


class UnsupportedDtypeError(InfersimError):
    """An operator asks a chip for a dtype its compute units cannot run."""


def _bounds(model: type[BaseModel] | None, loc: tuple[int | str, ...]) -> str:
    """The allowed range of the field at ``loc`` in ``model``, e.g. ``"> 0 and <= 1"``."""
    from pydantic import BaseModel

    field = None
    current: Any = model
    for part in loc:
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            current = None
            break
        field = current.model_fields.get(str(part))
        if field is None:
            return ""
        current = field.annotation
        # Unwrap Optional[X] and dict[str, X] to reach nested models.
        args = getattr(current, "__args__", ())
        models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        if models:
            current = models[0]
    if field is None:
        return ""
    parts = []
    for meta in field.metadata:
        for attr, sym in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            value = getattr(meta, attr, None)
            if value is not None:
                parts.append(f"{sym} {value:g}" if isinstance(value, float) else f"{sym} {value}")
    return " and ".join(parts)


def format_validation_error(
    exc: ValidationError, model: type[BaseModel] | None = None, source: str = ""
) -> str:
    """One line per bad field: ``source: path = value: message (allowed: range)``."""
    lines = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        path = ".".join(str(p) for p in loc) or "(top level)"
        value = err.get("input")
        shown = repr(value)
        if isinstance(value, float) and not math.isfinite(value):
            shown = str(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        allowed = _bounds(model, loc)
        suffix = f" (allowed: {allowed})" if allowed else ""
        where = f"{source}: " if source else ""
        if err["type"] == "missing":
            lines.append(f"{where}{path}: required field is missing")
        elif err["type"] == "extra_forbidden":
            lines.append(f"{where}{path}: unknown field")
        else:
            lines.append(f"{where}{path} = {shown}: {err['msg']}{suffix}")
    return "\n".join(lines)
