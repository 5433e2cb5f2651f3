"""Refresh the README's picture of the default design report (docs/images/report-overview.png).

Runs ``infersim report`` (the packaged default sweep) into a temporary folder and takes a
headless-Chromium screenshot of the top of the page, 1200 × 1560 px, the way
``tests/explorer/test_report_browser.py`` drives Chromium (see the workspace's ENVIRONMENT
notes: ``apt-get install chromium``)::

    .venv/bin/python scripts/report_screenshot.py [--out docs/images/report-overview.png]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "images" / "report-overview.png"
WIDTH, HEIGHT = 1200, 1560


def chromium() -> str:
    """The Chromium executable on PATH.

    Raises:
        SystemExit: none is installed.
    """
    found = next((p for p in map(shutil.which, ("chromium", "chromium-browser",
                                                "google-chrome")) if p), None)
    if found is None:
        raise SystemExit("needs Chromium: apt-get install chromium")
    return found


def screenshot(page: Path, out: Path, width: int = WIDTH, height: int = HEIGHT) -> None:
    """A ``width`` × ``height`` screenshot of the top of ``page`` (plotly given time to draw)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--hide-scrollbars", "--no-first-run",
         "--force-device-scale-factor=1", f"--window-size={width},{height}",
         "--virtual-time-budget=20000", f"--screenshot={out}", page.as_uri()],
        capture_output=True, text=True, timeout=180, check=True,
    )


def main() -> int:
    """Write the default report and its screenshot."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="the PNG to write")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="infersim-shot-") as tmp:
        page = Path(tmp) / "infersim-report.html"
        subprocess.run([sys.executable, "-m", "infersim", "report", "--quiet", "--out",
                        str(page)], cwd=tmp, check=True, stdout=subprocess.DEVNULL)
        screenshot(page, args.out)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
