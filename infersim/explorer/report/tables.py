"""The report's HTML tables: the best designs per workload, and the chips and assumptions.

Every figure is written by :mod:`infersim.units` (through the metric table), so a cell reads
``64,223 tok/s``, ``1.21 ms`` or ``814 mm²``, never ``6.422e+04``. A figure that is an estimate
rather than a published one (a custom design's area, a chip's street price) is marked ``≈``.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from infersim.explorer.metrics import METRICS, format_metric, header
from infersim.explorer.pareto import TIE_BREAKERS, TIE_TOLERANCE, best_first
from infersim.explorer.report.data import ReportData, dominant_bound, esc
from infersim.units import (
    MISSING,
    fmt_area,
    fmt_bytes,
    fmt_bytes_binary,
    fmt_power,
    fmt_usd,
    si,
)

SUMMARY_METRICS = ("latency_s", "tokens_per_s", "area_mm2", "power_w", "cost_usd")
"""Columns of the best-designs table after the first objective."""

ESTIMATE_MARK = "≈"
"""Written before a figure that is an estimate (not a published figure)."""


def _estimated(row: pd.Series) -> set[str]:
    text = row.get("estimated_figures")
    return set(str(text).split(",")) if isinstance(text, str) and text else set()


def _cell(row: pd.Series, metric: str, estimated: set[str]) -> str:
    text = esc(format_metric(metric, row.get(metric)))
    if metric in estimated and text != MISSING:
        text = f'<span title="estimate">{ESTIMATE_MARK}&#8239;{text}</span>'
    return f"<td>{text}</td>"


def tie_rule(data: ReportData) -> str:
    """The order of the best-designs table in words."""
    objs = data.objectives
    named = {o.metric for o in objs}
    then = [header(o.metric) for o in objs[1:]]
    then += [header(o.metric) for o in TIE_BREAKERS if o.metric not in named]
    return (f"best {esc(header(objs[0].metric))} first; designs within {TIE_TOLERANCE:.0%} of "
            f"each other on it (the model's resolution) count as tied and are ordered by "
            f"{esc(', then '.join(then))}")


def summary_table(data: ReportData, per_workload: int = 3) -> str:
    """The best feasible designs per workload as an HTML table: ordered by the first objective,
    near-ties broken by the next objectives (:func:`~infersim.explorer.pareto.best_first`),
    figures with their units, estimates marked ``≈``."""
    df = data.ranked
    if df.empty:
        return "<p>No point evaluated without error.</p>"
    goal = data.objectives[0]
    columns = [goal.metric] + [m for m in SUMMARY_METRICS if m != goal.metric]
    with_dataflow = "dataflow" in df and df["dataflow"].notna().any()
    idents = ["chip", "design", "technique"] + (["dataflow"] if with_dataflow else [])
    head = "".join(f"<th>{esc(c)}</th>" for c in idents) + "".join(
        f"<th>{esc(header(m))}</th>" for m in columns) + "<th>bound (time share)</th>"
    bounds = dominant_bound(df)
    body = []
    for workload, part in df.groupby("workload", sort=False):
        span = len(idents) + len(columns) + 1
        body.append(f'<tr class="group"><th colspan="{span}">{esc(workload)}</th></tr>')
        fits = part["fits"].fillna(False).astype(bool) if "fits" in part else True
        feasible = part[part["feasible"].fillna(False).astype(bool) & fits]
        best = best_first(feasible, data.objectives).head(per_workload)
        if best.empty:
            body.append(f'<tr><td colspan="{span}">no design meets every constraint</td></tr>')
        for (_, row), bound in zip(best.iterrows(), bounds.loc[best.index], strict=True):
            cells = [row["chip"], row["design"] or "", row["technique"]]
            if with_dataflow:
                cells.append(row["dataflow"] if pd.notna(row["dataflow"]) else "–")
            text = "".join(f'<td class="text">{esc(c)}</td>' for c in cells)
            estimated = _estimated(row)
            values = "".join(_cell(row, m, estimated) for m in columns)
            body.append(f'<tr>{text}{values}<td class="label">{esc(bound)}</td></tr>')
        unfit = int((~part["fits"].fillna(False).astype(bool)).sum()) if "fits" in part else 0
        if unfit:
            body.append(f'<tr class="note"><td colspan="{span}">{unfit:,} of {len(part):,} '
                        "points of this workload do not fit their chip's memory (left out; "
                        "<code>infersim simulate</code> prices their ways out)</td></tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


# --- chips and assumptions -------------------------------------------------------------------


def _published(value: Any, field: str, estimated: list[str], model: float,
               write: Any) -> str:
    """A published figure (``≈`` when its source calls it an estimate), or the cost model's
    estimate where none is published."""
    if value is None or pd.isna(value):
        return (f'{ESTIMATE_MARK}&#8239;{esc(write(model))}<br><span class="src">(cost model)'
                "</span>")
    text = esc(write(float(value)))
    return f"{ESTIMATE_MARK}&#8239;{text}" if field in estimated else text


def _peaks(text: str) -> str:
    peaks: dict[str, float] = json.loads(text)
    return "<br>".join(f"{esc(dtype)} {esc(si(flops, 'FLOP/s'))}"
                       for dtype, flops in peaks.items())


def _calibration(text: str) -> str:
    knobs: dict[str, Any] = json.loads(text)
    if not knobs:
        return "ideal"  # no knob fitted: the machine its description gives
    return "<br>".join(f"{esc(k)} {esc(v)}" for k, v in knobs.items())


def chips_table(data: ReportData) -> str:
    """The chips of the sweep as an HTML table (cores and array, clock, dense peak per dtype,
    SRAM, DRAM, die area, TDP, price, calibration), with the sources of the published figures;
    empty when the results folder has no ``chips`` table."""
    table = data.extras.get("chips")
    if table is None or table.empty:
        return ""
    head = ("chip", "cores × array", "clock", "dense peak", "SRAM per core / shared", "DRAM",
            "die area", "TDP", "price", "calibration")
    rows, sources = [], []
    for _, chip in table.iterrows():
        estimated = json.loads(chip["estimated"])
        shared = chip["shared_sram_bytes"]
        sram = fmt_bytes_binary(chip["sram_bytes_per_core"]) + (
            f" / {fmt_bytes_binary(shared)}" if shared is not None and pd.notna(shared) else "")
        axes = json.loads(chip["axes"])
        name = esc(chip["chip"]) + (f' <span class="src">(swept: {esc(", ".join(axes))})</span>'
                                    if axes else "")
        cells = [
            name,
            f"{int(chip['cores']):,} × {int(chip['array_rows'])}×{int(chip['array_cols'])}",
            esc(si(chip["freq_hz"], "Hz")),
            _peaks(chip["peak_flops"]),
            esc(sram),
            esc(f"{fmt_bytes(chip['dram_capacity_bytes'])} {chip['dram_kind']}") + "<br>"
            + esc(si(chip["dram_bandwidth_bytes_per_s"], "B/s")),
            _published(chip["die_area_mm2"], "die_area_mm2", estimated, chip["model_area_mm2"],
                       fmt_area),
            _published(chip["tdp_w"], "tdp_w", estimated, chip["model_peak_power_w"],
                       fmt_power),
            _published(chip["price_usd"], "price_usd", estimated, chip["model_cost_usd"],
                       fmt_usd),
            _calibration(chip["calibration"]),
        ]
        first = '<td class="text">' + cells[0] + "</td>"
        rows.append("<tr>" + first + "".join(f"<td>{c}</td>" for c in cells[1:-1])
                    + f'<td class="text">{cells[-1]}</td></tr>')
        for field, source in json.loads(chip["sources"]).items():
            mark = " (an estimate)" if field in estimated else ""
            sources.append(f"<li><b>{esc(chip['chip'])}</b> {esc(field)}{mark}: "
                           f"{esc(source)}</li>")
    heads = "".join(f"<th>{esc(h)}</th>" for h in head)
    out = f"<table><thead><tr>{heads}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    if sources:
        out += ("<details><summary>sources of the published figures</summary><ul>"
                + "".join(sources) + "</ul></details>")
    return out


def _precisions(spec: dict[str, Any]) -> str:
    seen = []
    for entry in spec.get("workloads") or []:
        precision = entry.get("precision") or {}
        if entry.get("ops"):
            continue
        text = (f"weights {precision.get('weights', 'bf16')}, activations "
                f"{precision.get('act', 'bf16')}, KV cache {precision.get('kv', 'bf16')}")
        if text not in seen:
            seen.append(text)
    return "; ".join(seen) or "as each operator list gives them"


def assumptions(data: ReportData) -> str:
    """What the figures assume, as an HTML list: engines, dataflows, number formats, technique
    stacks, where area, power and cost come from, and the calibration."""
    from infersim.simulator.defaults import ENGINE_SUMMARIES

    spec = data.spec
    rows = data.rows
    engines = list(dict.fromkeys(rows["engine"].dropna())) if "engine" in rows else []
    engine_text = "; ".join(f"<b>{esc(e)}</b> ({esc(ENGINE_SUMMARIES.get(e, ''))})"
                            for e in engines) or MISSING
    dataflows = spec.get("dataflows") or []
    stacks = spec.get("techniques") or ["baseline"]
    chips = data.extras.get("chips")
    calibrated = []
    if chips is not None and not chips.empty:
        calibrated = [str(c) for c, k in zip(chips["chip"], chips["calibration"], strict=True)
                      if json.loads(k)]
    calibration = (f"the calibrated knobs of {esc(', '.join(calibrated))} (in the table above); "
                   "every other chip is the ideal machine of its description" if calibrated
                   else "none: every chip is the ideal machine of its description (no "
                   "achievable-fraction knobs fitted)")
    items = [
        f"Engine: {engine_text}.",
        "Dataflow: " + (esc(", ".join(dataflows)) if dataflows
                        else "each chip's best (the dataflows its array implements)") + ".",
        f"Number formats: {esc(_precisions(spec))}, unless a technique stack changes them; "
        f"stacks, applied in turn: {esc(' → '.join(stacks))} (speculative decoding on decode "
        "workloads only).",
        "Area, TDP and price: published figures for real chips (sources above; "
        f"{ESTIMATE_MARK} marks the ones their sources estimate); for custom designs and "
        "variants of real chips, 7 nm estimates of the cost model (constants and sources in "
        "<code>infersim/explorer/cost.py</code>; a variant scales its chip's published "
        "figures). A real chip's price includes the vendor's margin; a design's estimated unit "
        "cost does not.",
        f"Power: the energy model's average on each workload ({esc(METRICS['power_w'].label)})"
        ", dynamic energy per step plus static power.",
        f"Calibration: {calibration}.",
    ]
    return "<ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>"
