"""Design reports: a results folder → one self-contained HTML page (and optional PNG/SVG).

Reports read results; they never re-simulate. Figures appear when their data is present (see
:data:`~infersim.explorer.report.figures.FIGURES`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from infersim.errors import ConfigError
from infersim.explorer.report.data import ReportData
from infersim.explorer.report.figures import FIGURES, Figure
from infersim.explorer.report.page import render


@dataclass(frozen=True)
class ReportResult:
    """The written page, its figures, and the static images (if any)."""

    path: Path
    figures: tuple[Figure, ...]
    images: tuple[Path, ...] = ()


def build_figures(data: ReportData) -> list[Figure]:
    """Every figure the data supports, in report order."""
    return [fig for make in FIGURES for fig in make(data)]


def write_report(
    results: str | Path, out: str | Path, static_dir: str | Path | None = None,
    results_label: str | None = None, validation: Sequence[str | Path] = (),
) -> ReportResult:
    """Write the HTML report of the results folder ``results`` to ``out``; with ``static_dir``,
    also each figure as PNG and SVG there (kaleido + system Chromium). ``results_label``
    replaces the folder's path in the footer (e.g. for a temporary folder). ``validation`` are
    results files of ``infersim validate``, drawn as the predicted-vs-measured scatter.

    Raises:
        ConfigError: not a results folder, no rows, or static export without Chromium.
    """
    data = ReportData.load(results)
    if validation:
        from infersim.validation.records import prediction_table

        rows = [row for path in validation for row in prediction_table(Path(path))]
        data.extras["calibration"] = pd.DataFrame(rows)
    if data.rows.empty:
        raise ConfigError(f"{results}: the results folder has no rows yet")
    figures = build_figures(data)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(data, figures, results_label), encoding="utf-8")
    images: tuple[Path, ...] = ()
    if static_dir is not None:
        from infersim.explorer.report.static import export_static

        images = tuple(export_static(figures, Path(static_dir)))
    return ReportResult(path.resolve(), tuple(figures), images)


__all__ = ["Figure", "ReportData", "ReportResult", "build_figures", "write_report"]
