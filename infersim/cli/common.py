"""What every command group shares: consoles, JSON output, the bad-input → exit 2 rule, and the
options several commands take (one definition each).

Command modules (``infersim/cli/*.py``) import from here, never from :mod:`infersim.cli`.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeGuard

import typer
from rich.console import Console
from rich.markup import escape

from infersim.errors import InfersimError, format_validation_error
from infersim.simulator.defaults import engine_help

if TYPE_CHECKING:
    from pydantic import ValidationError

console = Console()
err_console = Console(stderr=True, soft_wrap=True)  # messages are never hard-wrapped

USAGE_ERROR = 2
"""Exit code for bad input (as click uses for bad options)."""


def fail(message: str) -> typer.Exit:
    """Print ``error: message`` on stderr and return the exit-2 exception to raise."""
    err_console.print(
        "error: " + message, style="bold red", markup=False, highlight=False, emoji=False
    )
    return typer.Exit(USAGE_ERROR)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn bad input into one message on stderr and exit code 2 (never a traceback)."""
    try:
        yield
    except InfersimError as exc:
        raise fail(str(exc)) from None
    except Exception as exc:
        if not _is_validation_error(exc):
            raise
        raise fail(format_validation_error(exc)) from None


def _is_validation_error(exc: BaseException) -> TypeGuard[ValidationError]:
    """Whether ``exc`` is pydantic's ``ValidationError``, without importing pydantic at start:
    one can only have been raised once ``pydantic_core`` (which defines it) is loaded."""
    core = sys.modules.get("pydantic_core")
    return core is not None and isinstance(exc, core.ValidationError)


def finite(data: Any, path: str = "") -> tuple[Any, list[str]]:
    """``data`` with every non-finite float (inf, nan) replaced by None, and the JSON paths of
    those values (JSON has no Infinity or NaN)."""
    if isinstance(data, float):
        return (data, []) if math.isfinite(data) else (None, [path or "(value)"])
    if isinstance(data, dict):
        out: dict[Any, Any] = {}
        found: list[str] = []
        for key, value in data.items():
            out[key], sub = finite(value, f"{path}.{key}" if path else str(key))
            found += sub
        return out, found
    if isinstance(data, list | tuple):
        items = [finite(v, f"{path}[{i}]") for i, v in enumerate(data)]
        return [v for v, _ in items], [p for _, sub in items for p in sub]
    return data, []


def print_json(data: Any) -> None:
    """Write ``data`` as indented, valid JSON on stdout (no rich formatting): a non-finite
    figure is written as null, and a note on stderr names it."""
    clean, bad = finite(data)
    if bad:
        shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        err_console.print(
            f"note: not finite, written as null: {shown}", markup=False, highlight=False
        )
    sys.stdout.write(json.dumps(clean, indent=2, default=str, allow_nan=False) + "\n")


_CONTROL = dict.fromkeys([*range(0x20), *range(0x7F, 0xA0)], "\N{REPLACEMENT CHARACTER}")
del _CONTROL[0x09]


def plain(text: object) -> str:
    """``text`` safe to print through rich: markup escaped, control characters (terminal
    escape sequences included) replaced. Use it for every user-supplied name in a table."""
    return escape(str(text).translate(_CONTROL))


def writable(path: Path, what: str, folder: bool = False) -> Path:
    """Check, before any work starts, that ``path`` can be written: its parent folder exists
    (or can be made) and is writable, and it is not an existing folder (a file) or an
    existing file (a folder).

    Raises:
        InfersimError: naming the option's path and why.
    """
    if folder:
        if path.exists() and not path.is_dir():
            raise InfersimError(f"{what} {path}: exists and is not a folder")
        target = path if path.exists() else path.parent
    else:
        if path.is_dir():
            raise InfersimError(f"{what} {path}: is a folder, not a file")
        target = path.parent
    probe = target
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise InfersimError(f"{what} {path}: {probe} is not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise InfersimError(f"{what} {path}: {probe} is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        raise InfersimError(f"{what} {path}: not writable")
    return path


class PhaseChoice(StrEnum):
    """Which step to simulate."""

    prefill = "prefill"
    decode = "decode"


ChipOpt = Annotated[str, typer.Option("--chip", help="Chip preset name or YAML path")]
PhaseOpt = Annotated[PhaseChoice, typer.Option("--phase", help="prefill or decode")]
BatchOpt = Annotated[int, typer.Option("--batch", help="Sequences in the batch")]
PromptOpt = Annotated[int, typer.Option("--prompt-len", help="Prompt tokens (prefill)")]
ContextOpt = Annotated[int, typer.Option("--context", help="Cached tokens per sequence (decode)")]
EmulationOpt = Annotated[
    bool,
    typer.Option(
        "--allow-emulation/--no-allow-emulation",
        help="Cost dtypes the chip lacks as emulated at a wider one",
    ),
]
EngineOpt = Annotated[str, typer.Option("--engine", help=engine_help())]
DataflowOpt = Annotated[
    str,
    typer.Option(
        "--dataflow", help="GEMM dataflow (analytic and events engines): ws, os, is, rs, nlr, best"
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON")]
"""Options several commands share (one definition each)."""
