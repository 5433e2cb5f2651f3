"""What every command group shares: consoles, JSON output, the bad-input → exit 2 rule, and the
options several commands take (one definition each).

Command modules (``infersim/cli/*.py``) import from here, never from :mod:`infersim.cli`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console

from infersim.errors import InfersimError, format_validation_error
from infersim.simulator.engines import ENGINE_NAMES

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
EngineOpt = Annotated[str, typer.Option("--engine", help=f"Cost engine: {', '.join(ENGINE_NAMES)}")]
DataflowOpt = Annotated[
    str,
    typer.Option(
        "--dataflow", help="GEMM dataflow (analytic and events engines): ws, os, is, rs, best"
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON")]
"""Options several commands share (one definition each)."""
