"""The ``infersim`` command line: one typer app, one module per command group.

- :mod:`.presets`: ``chips``, ``models``;
- :mod:`.simulate`: ``simulate``, ``compare``, ``demo`` (one model step on one chip);
- :mod:`.dataflow`: ``map``, ``scalesim``;
- :mod:`.serve`: ``serve`` (the request-level serving simulation);
- :mod:`.explore`: ``sweep``, ``report``, ``pareto``;
- :mod:`.validate`: ``validate``, ``calibrate``;
- :mod:`.common`: what they share (consoles, JSON output, shared options, the exit-2 rule).

This package is the only place that imports typer or prints with rich; the layers below return
values. Bad input exits with code 2 and one message.
"""

from __future__ import annotations

import typer

from infersim.cli import dataflow, explore, presets, serve, simulate, validate

app = typer.Typer(
    name="infersim",
    help="Cycle-approximate simulator and design-space explorer for LLM inference.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for _group in (presets, simulate, dataflow, serve, explore, validate):
    _group.register(app)  # the order of ``infersim --help``


def main() -> None:
    """Entry point for ``python -m infersim``."""
    app()


__all__ = ["app", "main"]
