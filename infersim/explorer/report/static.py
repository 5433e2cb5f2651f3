"""Static PNG and SVG copies of report figures, rendered by kaleido in the system Chromium."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import plotly.io as pio

from infersim.errors import ConfigError
from infersim.explorer.report.figures import Figure

FORMATS = ("png", "svg")
WIDTH_PX = 1100


def chromium_path() -> str | None:
    """The Chromium (or Chrome) executable kaleido will use, if one is on PATH."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def export_static(figures: Sequence[Figure], folder: Path) -> list[Path]:
    """Write ``<id>.png`` and ``<id>.svg`` for each figure into ``folder``; returns the paths.

    Raises:
        ConfigError: kaleido or Chromium is missing, or the export fails.
    """
    try:
        import kaleido  # noqa: F401
    except ImportError:
        raise ConfigError("--static needs kaleido: pip install 'infersim[report]'") from None
    if chromium_path() is None:
        raise ConfigError("--static needs Chromium on PATH (Debian: apt-get install chromium)")
    folder.mkdir(parents=True, exist_ok=True)
    figs, paths, formats, heights = [], [], [], []
    for fig in figures:
        for fmt in FORMATS:
            figs.append(fig.figure)
            paths.append(folder / f"{fig.id}.{fmt}")
            formats.append(fmt)
            heights.append(int(fig.figure.layout.height or 460))
    if not figs:
        return []
    try:
        pio.write_images(figs, paths, format=formats, width=WIDTH_PX, height=heights)
    except Exception as exc:  # kaleido reports browser trouble with many exception types
        raise ConfigError(f"static export failed: {exc}") from None
    return paths
