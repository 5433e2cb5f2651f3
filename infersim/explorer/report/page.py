"""The report page: one self-contained HTML file (plotly.js inlined, opens offline)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import plotly.io as pio
from plotly.offline import get_plotlyjs

from infersim import __version__
from infersim.explorer.metrics import format_metric, header, parse_constraint
from infersim.explorer.report.data import ReportData, esc
from infersim.explorer.report.figures import Figure
from infersim.explorer.report.tables import assumptions, chips_table, summary_table, tie_rule

PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0;
       color: #222; background: #fff; }
header, main, footer { max-width: 1200px; margin: 0 auto; padding: 0 24px; }
header { padding-top: 20px; }
h1 { font-size: 1.6rem; margin-bottom: 4px; }
h2 { font-size: 1.2rem; margin: 28px 0 4px; }
p.meta, p.caption, footer { color: #555; font-size: 0.92rem; }
p.caption { margin: 0 0 6px; }
nav a { margin-right: 14px; font-size: 0.9rem; }
table { border-collapse: collapse; font-size: 0.8rem; margin: 8px 0 12px; }
td.text { max-width: 330px; }
span.src { color: #777; font-size: 0.75rem; }
details { font-size: 0.8rem; color: #444; margin-bottom: 8px; }
details li { margin: 2px 0; }
section ul { font-size: 0.9rem; color: #333; }
tr.group th { text-align: left; background: #f4f6f8; font-weight: 600; }
th, td { border-bottom: 1px solid #e3e3e3; padding: 4px 10px; text-align: right; }
td { white-space: nowrap; }
td.text { white-space: normal; }
td.label { text-align: left; }
th:first-child, td:first-child, td.text { text-align: left; }
section.figure { margin-bottom: 10px; }
div.plot { width: 100%; }
"""


_OPS = {"<=": "≤", ">=": "≥", "==": "=", "!=": "≠", "<": "<", ">": ">"}


def constraint_text(constraints: Sequence[str]) -> str:
    """The spec's constraints for a reader: ``fits in memory, area ≤ 858 mm², power ≤ 700 W``
    (a constraint that no longer parses is shown as written)."""
    out = []
    for text in constraints:
        try:
            c = parse_constraint(text)
        except Exception:  # a results folder of another build
            out.append(text)
            continue
        if c.metric == "fits":
            out.append("fits in one chip's memory" if c.value is True else text)
            continue
        out.append(f"{header(c.metric)} {_OPS[c.op]} {format_metric(c.metric, c.value)}")
    return ", ".join(out)


def _counts(data: ReportData) -> str:
    rows = data.rows
    if rows.empty:
        return "no points"
    errors = int(rows["error"].notna().sum())
    feasible = int(rows["feasible"].fillna(False).astype(bool).sum())
    return (
        f"{len(rows):,} points · {rows['design_key'].nunique():,} designs · "
        f"{rows['workload'].nunique()} workloads · {rows['technique'].nunique()} technique "
        f"stacks · {feasible:,} meet every constraint · {errors:,} could not run"
    )


def render(data: ReportData, figures: Sequence[Figure], results_label: str | None = None) -> str:
    """The whole report as one HTML document (plotly.js inlined); the footer names the results
    folder (or ``results_label``)."""
    constraints = constraint_text(data.spec.get("constraints") or [])
    objectives = ", ".join(f"{header(o.metric)} ({'higher' if o.sense == 'max' else 'lower'} "
                           "is better)" for o in data.objectives)
    sections = []
    for fig in figures:
        div = pio.to_html(
            fig.figure, full_html=False, include_plotlyjs=False, div_id=fig.id,
            config=PLOTLY_CONFIG, default_height=f"{fig.figure.layout.height or 460}px",
        )
        sections.append(
            f'<section class="figure" id="section-{fig.id}"><h2>{fig.title}</h2>'
            f'<p class="caption">{fig.caption}</p><div class="plot">{div}</div></section>'
        )
    nav = "".join(f'<a href="#section-{f.id}">{f.title}</a>' for f in figures)
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    description = data.spec.get("description") or ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>infersim design report — {esc(data.name)}</title>
<style>{_STYLE}</style>
<script type="text/javascript">{get_plotlyjs()}</script>
</head><body>
<header><h1>infersim design report — {esc(data.name)}</h1>
<p class="meta">{esc(description)}</p>
<p class="meta">{_counts(data)}<br>objectives: {esc(objectives)} · constraints:
{esc(constraints or "none")}</p>
<nav><a href="#summary">Best designs</a><a href="#chips">Chips and assumptions</a>{nav}</nav>
</header>
<main>
<section id="summary"><h2>Best designs</h2>
<p class="caption">The best designs per workload among those that meet every constraint,
{tie_rule(data)}; each with the bound that takes most of its step's time (compute: the array;
memory: DRAM; sram: the shared SRAM feeding the cores; vector: the vector unit) and that
bound's share. ≈ marks an estimate (see chips and assumptions).</p>{summary_table(data)}
</section>
<section id="chips"><h2>Chips and assumptions</h2>
<p class="caption">What each chip of the sweep is, with the die area, TDP and price its
description publishes (≈: an estimate; "cost model": none is published), and what every
figure of this report assumes.</p>{chips_table(data)}{assumptions(data)}</section>
{"".join(sections)}
</main>
<footer><p>infersim {esc(__version__)} · {when} · real chips' area, TDP and price are
published figures (sources under chips and assumptions); custom designs' are estimates of the
cost model (infersim/explorer/cost.py), good for ranking designs, not sign-off figures.
Results: {esc(results_label or data.directory)}</p></footer>
</body></html>
"""
