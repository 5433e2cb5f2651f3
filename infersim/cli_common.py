"""What every CLI command shares: consoles, JSON output, and the bad-input → exit 2 rule.

Command modules (``infersim/*/commands.py``) import from here, never from ``infersim.cli``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
from pydantic import ValidationError
from rich.console import Console

from infersim.errors import InfersimError, format_validation_error

console = Console()
err_console = Console(stderr=True)

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
    except ValidationError as exc:
        raise fail(format_validation_error(exc)) from None


def print_json(data: Any) -> None:
    """Write ``data`` as indented JSON on stdout (no rich formatting)."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
