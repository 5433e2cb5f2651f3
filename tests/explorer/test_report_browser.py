"""The default report in headless Chromium: no JavaScript errors, every figure drawn with data,
no two labels of a figure drawn over each other (tick labels, axis and subplot titles, legend
entries), and non-background pixels inside every figure's area of a screenshot."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import typer
from png_pixels import read_png
from typer.testing import CliRunner

from infersim.cli.explore import register

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser",
                                               "google-chrome")) if p), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (apt-get install "
                                                         "chromium)")
WIDTH = 1200
SCALE = 0.5

PROBE_HEAD = """<script>window.__errors = [];
addEventListener('error', e => __errors.push('error: ' + e.message));
addEventListener('unhandledrejection', e => __errors.push('rejection: ' + e.reason));
const __consoleError = console.error.bind(console);
console.error = (...a) => { __errors.push('console.error: ' + a.map(String).join(' '));
                            __consoleError(...a); };</script>"""
PROBE_TAIL = """<script>addEventListener('load', () => setTimeout(() => {
  const figs = [...document.querySelectorAll('div.plotly-graph-div')].map(d => {
    const r = d.getBoundingClientRect();
    const data = d._fullData || [];  // traces as drawn (binary arrays decoded)
    return {id: d.id, traces: data.length,
            points: data.reduce((n, t) => n + ((t.x && t.x.length) || (t.y && t.y.length) || 0), 0),
            rendered: !!d._fullLayout, svg: d.querySelectorAll('svg.main-svg').length,
            x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height};
  });
  const overlaps = [];  // pairs of a figure's labels whose boxes intersect (more than 2 px²)
  for (const d of document.querySelectorAll('div.plotly-graph-div')) {
    const labels = [...d.querySelectorAll('svg text')].filter(t => t.textContent.trim())
      .map(t => ({text: t.textContent.trim(), box: t.getBoundingClientRect(),
                  kind: (t.closest('g[class]') || t).getAttribute('class') || ''}))
      .filter(l => l.box.width > 0 && l.box.height > 0);
    for (let i = 0; i < labels.length; i++) for (let j = i + 1; j < labels.length; j++) {
      const a = labels[i].box, b = labels[j].box;
      const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > 1 && h > 1 && w * h > 2)
        overlaps.push([d.id, labels[i].kind, labels[i].text, labels[j].kind, labels[j].text]);
    }
  }
  const pre = document.createElement('pre');
  pre.id = '__probe';
  pre.textContent = JSON.stringify({errors: __errors, figs: figs, overlaps: overlaps,
                                    height: document.documentElement.scrollHeight});
  document.body.appendChild(pre);
}, 300));</script>"""


def _chromium(page: Path, height: int, *extra: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--hide-scrollbars", "--no-first-run",
         f"--force-device-scale-factor={SCALE}", f"--window-size={WIDTH},{height}",
         "--virtual-time-budget=20000", *extra, page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )


@pytest.fixture(scope="module")
def default_report(tmp_path_factory) -> Path:
    """`infersim report` with no arguments, run in a fresh folder: the page it wrote."""
    folder = tmp_path_factory.mktemp("default-report")
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.callback()(lambda: None)
    register(app)
    cwd = Path.cwd()
    try:
        import os

        os.chdir(folder)
        result = CliRunner().invoke(app, ["report", "--quiet"])
    finally:
        os.chdir(cwd)
    assert result.exit_code == 0, result.output
    page = Path(result.stdout.strip().splitlines()[-1])
    assert page == folder / "infersim-report.html" and page.is_file()
    return page




def test_default_report_renders_in_chromium(default_report, tmp_path: Path):
    page = default_report
    text = page.read_text()
    assert "<script src=" not in text  # self-contained: plotly.js is inlined
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("<head>", "<head>" + PROBE_HEAD, 1)
                     .replace("</body>", PROBE_TAIL + "</body>", 1))

    dom = _chromium(probe, 1000, "--dump-dom")
    match = re.search(r'<pre id="__probe">(.*?)</pre>', dom.stdout, re.S)
    assert match, dom.stderr[-2000:]
    report = json.loads(html.unescape(match.group(1)))
    assert report["errors"] == []
    figs = report["figs"]
    ids = [f["id"] for f in figs]
    assert len(ids) == len(set(ids)) >= 6
    for prefix in ("pareto", "roofline-", "dataflow-", "op-breakdown", "technique-waterfall",
                   "serving-cdf"):
        assert any(i.startswith(prefix) for i in ids), (prefix, ids)
    for fig in figs:
        assert fig["rendered"] and fig["svg"] >= 1, fig
        assert fig["traces"] > 0 and fig["points"] > 0, fig
        assert fig["w"] > 300 and fig["h"] > 200, fig
    # waterfall stacks, dataflow names, subplot titles, legends: nothing drawn over another
    assert report["overlaps"] == [], report["overlaps"][:20]

    shot = tmp_path / "shot.png"
    height = int(report["height"]) + 50
    _chromium(probe, height, f"--screenshot={shot}")
    pixels = read_png(shot)[..., :3].astype(int)
    scale = pixels.shape[1] / WIDTH
    for fig in figs:
        y0, x0 = int(fig["y"] * scale), int(fig["x"] * scale)
        y1, x1 = int((fig["y"] + fig["h"]) * scale), int((fig["x"] + fig["w"]) * scale)
        area = pixels[y0:y1, x0:x1]
        assert area.size, (fig["id"], pixels.shape)
        inked = (np.abs(area - 255).max(axis=-1) > 40).mean()
        assert inked > 0.01, f"{fig['id']}: only {inked:.2%} of its area is drawn"
