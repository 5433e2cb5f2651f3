"""The report page: one self-contained HTML file (plotly.js inlined, opens offline)."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence

import pandas as pd
import plotly.io as pio
from plotly.offline import get_plotlyjs

from infersim import __version__
from infersim.explorer.report.data import ReportData, dominant_bound, esc
from infersim.explorer.report.figures import Figure

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
tr.group th { text-align: left; background: #f4f6f8; font-weight: 600; }
th, td { border-bottom: 1px solid #e3e3e3; padding: 4px 10px; text-align: right; }
th:first-child, td:first-child, td.text { text-align: left; }
section.figure { margin-bottom: 10px; }
div.plot { width: 100%; }
"""


def _fmt(value: object, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return esc(value)


def summary_table(data: ReportData, per_workload: int = 3) -> str:
    """The best feasible designs per workload by the first objective, as an HTML table."""
    df = data.ranked
    if df.empty:
        return "<p>No point evaluated without error.</p>"
    goal = data.objectives[0]
    columns = [goal.metric] + [m for m in ("latency_s", "tokens_per_s", "area_mm2", "power_w",
                                           "cost_usd") if m != goal.metric]
    with_dataflow = "dataflow" in df and df["dataflow"].notna().any()
    idents = ["chip", "design", "technique"] + (["dataflow"] if with_dataflow else [])
    head = "".join(f"<th>{esc(c)}</th>" for c in idents) + "".join(
        f"<th>{esc(m)}</th>" for m in columns) + "<th>bound (time share)</th>"
    bounds = dominant_bound(df)
    body = []
    for workload, part in df.groupby("workload", sort=False):
        span = len(idents) + len(columns) + 1
        body.append(f'<tr class="group"><th colspan="{span}">{esc(workload)}</th></tr>')
        fits = part["fits"].fillna(False).astype(bool) if "fits" in part else True
        feasible = part[part["feasible"].fillna(False).astype(bool) & fits]
        best = feasible.sort_values(goal.metric, ascending=goal.sense == "min").head(per_workload)
        if best.empty:
            body.append(f'<tr><td colspan="{span}">no design meets every constraint</td></tr>')
        for (_, row), bound in zip(best.iterrows(), bounds.loc[best.index], strict=True):
            cells = [row["chip"], row["design"] or "", row["technique"]]
            if with_dataflow:
                cells.append(row["dataflow"] if pd.notna(row["dataflow"]) else "–")
            text = "".join(f'<td class="text">{esc(c)}</td>' for c in cells)
            values = "".join(f"<td>{_fmt(row[m])}</td>" for m in columns)
            body.append(f'<tr>{text}{values}<td class="text">{esc(bound)}</td></tr>')
        unfit = int((~part["fits"].fillna(False).astype(bool)).sum()) if "fits" in part else 0
        if unfit:
            body.append(f'<tr class="note"><td colspan="{span}">{unfit:,} of {len(part):,} '
                        "points of this workload do not fit their chip's memory (left out; "
                        "<code>infersim simulate</code> prices their ways out)</td></tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


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
    constraints = data.spec.get("constraints") or []
    objectives = ", ".join(str(o) for o in data.objectives)
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
{esc(", ".join(constraints) or "none")}</p>
<nav><a href="#summary">Best designs</a>{nav}</nav></header>
<main>
<section id="summary"><h2>Best designs</h2>
<p class="caption">The best designs per workload by {esc(str(data.objectives[0]))} among those
that meet every constraint, each with the bound that takes most of its step's time (compute:
the array; memory: DRAM; sram: the shared SRAM feeding the cores; vector: the vector unit)
and that bound's share.</p>{summary_table(data)}</section>
{"".join(sections)}
</main>
<footer><p>infersim {esc(__version__)} · {when} · area, power and cost are estimates
(constants and sources in infersim/explorer/cost.py) good for ranking designs, not sign-off
figures. Results: {esc(results_label or data.directory)}</p></footer>
</body></html>
"""
