"""``python -m infersim.validation validate|calibrate ...``: the two commands without the rest of
the CLI (what ``scripts/gpu_validate.sh`` runs)."""

from __future__ import annotations

import typer

from infersim.validation.commands import register

app = typer.Typer(
    name="infersim-validation",
    help="Validate infersim against measured kernels and calibrate chips.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
register(app)

if __name__ == "__main__":
    app()
