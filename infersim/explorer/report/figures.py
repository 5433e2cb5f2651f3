"""The report's figures: one small function each, taking the loaded results and returning the
figures it can draw from them (none when its data is absent — "when available").

Every figure has an id, a title and a one-line caption saying what to read from it. Every
user-supplied name (chips, workloads, designs, operators) is HTML-escaped before it reaches a
label or hover text. Hover texts and legends carry figures written by :mod:`infersim.units`
(``41.1 ms``, ``64,223 tok/s``: never ``6.4e+04``), axes use SI prefixes, and axis labels make
room for themselves (``automargin``). A new figure is one function appended to
:data:`FIGURES`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from infersim.explorer.metrics import METRICS, format_metric, header
from infersim.explorer.report.data import ReportData, dominant_bound, esc, log_axis
from infersim.units import fmt_energy, fmt_time, si, significant

MAX_POINTS_PER_TRACE = 4000
"""Dominated points drawn per workload in the Pareto figure (a deterministic sample beyond)."""

PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
)

LEVEL_COLORS = {
    "dram": "#67000d", "sram": "#cb181d", "array": "#fb6a4a", "register_file": "#fcbba1",
    "mac": "#969696",
}
"""Memory levels, outer (dark) to inner (light); MACs grey."""

DATAFLOW_COLORS = ("#08519c", "#3182bd", "#6baed6", "#9ecae1", "#c6dbef", "#54278f")

SYMBOLS = ("circle", "square", "diamond", "triangle-up", "cross", "star", "hexagon", "pentagon")


@dataclass(frozen=True)
class Figure:
    """One report figure: a stable id (the div id), a title and a one-line caption."""

    id: str
    title: str
    caption: str
    figure: go.Figure


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def _axis_title(metric: str) -> str:
    m = METRICS.get(metric)
    return f"{m.label} ({m.unit})" if m and m.unit else (m.label if m else esc(metric))


def _written(values: pd.Series, metric: str) -> pd.Series:
    """``values`` of result column ``metric`` as text with units (for hover texts)."""
    return values.map(lambda v: format_metric(metric, v))


def _marked(rows: pd.DataFrame, metric: str) -> pd.Series:
    """``metric`` of each row as text, ``≈`` before it where the row's figure is an estimate."""
    text = _written(rows[metric], metric)
    if "estimated_figures" not in rows:
        return text
    flags = rows["estimated_figures"].fillna("").astype(str).str.split(",")
    return pd.Series([f"≈{t}" if metric in f else t for t, f in zip(text, flags, strict=True)],
                     index=rows.index)


def _layout(fig: go.Figure, height: int = 460) -> go.Figure:
    fig.update_layout(
        template="plotly_white",
        height=height,
        margin={"l": 70, "r": 20, "t": 30, "b": 60},
        legend={"font": {"size": 11}},
        hoverlabel={"align": "left"},
    )
    fig.update_xaxes(automargin=True, exponentformat="SI extended")  # P, E: not 10^15
    fig.update_yaxes(automargin=True, exponentformat="SI extended")
    return fig


def _color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


# --- roofline --------------------------------------------------------------------------------


def roofline(data: ReportData) -> list[Figure]:
    """Per chip: every operator of its representative design as a point (intensity, FLOP/s)
    under the chip's compute and bandwidth roofs."""
    out = []
    ref = data.reference()
    for n, (chip, key) in enumerate(data.representatives.items()):
        rows = ref[ref["design_key"] == key]
        if rows.empty:
            continue
        ops = data.ops(rows["key"].tolist())
        if ops.empty:
            continue
        ops = ops.merge(rows[["key", "workload"]], on="key")
        ops = ops[(ops["intensity"] > 0) & np.isfinite(ops["intensity"])
                  & (ops["achieved_flops"] > 0)]
        if ops.empty:
            continue
        fig = go.Figure()
        for i, (workload, part) in enumerate(ops.groupby("workload", sort=False)):
            fig.add_trace(go.Scatter(
                x=part["intensity"], y=part["achieved_flops"], mode="markers",
                name=esc(workload),
                marker={"size": 9, "color": _color(i), "opacity": 0.75,
                        "symbol": SYMBOLS[i % len(SYMBOLS)], "line": {"width": 0.5}},
                customdata=np.column_stack([
                    part["name"].map(esc), part["kind"].map(esc), part["bound"],
                    (part["time_s"] * part["count"]).map(fmt_time),
                    part["intensity"].map(significant), part["achieved_flops"].map(
                        lambda v: si(v, "FLOP/s")),
                ]),
                hovertemplate=(
                    "<b>%{customdata[0]}</b> (%{customdata[1]})<br>intensity %{customdata[4]} "
                    "FLOP/B<br>achieved %{customdata[5]}<br>bound: %{customdata[2]}"
                    "<br>time (all repeats) %{customdata[3]}<extra></extra>"
                ),
            ))
        first = rows.iloc[0]
        bw = float(first["dram_bandwidth_bytes_per_s"])
        xs = np.geomspace(ops["intensity"].min() / 4, ops["intensity"].max() * 4, 200)
        peaks = sorted({float(p) for p in rows["peak_flops"].dropna()})
        for j, peak in enumerate(peaks):
            dtype = rows.loc[rows["peak_flops"] == peak, "compute_dtype"].iloc[0]
            fig.add_trace(go.Scatter(
                x=xs, y=np.minimum(peak, bw * xs), mode="lines",
                name=f"roof ({esc(dtype)}: {si(peak, 'FLOP/s')}, {si(bw, 'B/s')})",
                line={"color": "black", "width": 2, "dash": "solid" if j == 0 else "dot"},
                hoverinfo="skip",
            ))
        fig.update_xaxes(type="log", title="operational intensity (FLOP per DRAM byte)")
        fig.update_yaxes(type="log", title="achieved FLOP/s")
        design = str(first["design"] or "")
        label = f"{chip} [{design}]" if design else chip
        out.append(Figure(
            id=f"roofline-{n}-{_slug(chip)}",
            title=f"Roofline — {esc(label)}",
            caption=(
                "Each dot is one operator of each workload: dots on the slanted roof are "
                "limited by DRAM bandwidth, dots on the flat roof by compute, and dots far "
                "below both leave the chip idle."
            ),
            figure=_layout(go.Figure(fig)),
        ))
    return out


# --- Pareto front --------------------------------------------------------------------------


def pareto_front(data: ReportData) -> list[Figure]:
    """The sweep's Pareto front per workload over the spec's first two objectives."""
    df = data.ranked
    if df.empty:
        return []
    objs = data.objectives
    y_obj = objs[0]
    x_metric = objs[1].metric if len(objs) > 1 else "area_mm2"
    if x_metric == y_obj.metric:
        x_metric = "area_mm2" if y_obj.metric != "area_mm2" else "tokens_per_s"
    fig = go.Figure()
    for i, (workload, group) in enumerate(df.groupby("workload", sort=False)):
        part = group[np.isfinite(pd.to_numeric(group[x_metric], errors="coerce"))
                     & np.isfinite(pd.to_numeric(group[y_obj.metric], errors="coerce"))]
        if part.empty:
            continue
        on_front = part[part["pareto"]].sort_values(x_metric)
        rest = part[~part["pareto"]]
        if len(rest) > MAX_POINTS_PER_TRACE:
            rest = rest.sample(MAX_POINTS_PER_TRACE, random_state=0)
        color = _color(i)
        for subset, front in ((rest, False), (on_front, True)):
            if subset.empty:
                continue
            feasible = subset["feasible"].fillna(False).astype(bool)
            fig.add_trace(go.Scatter(
                x=subset[x_metric], y=subset[y_obj.metric],
                mode="lines+markers" if front else "markers",
                name=esc(workload) + (" — Pareto front" if front else ""),
                legendgroup=esc(workload), showlegend=front or on_front.empty,
                line={"color": color, "width": 2},
                marker={"color": color, "size": 10 if front else 6,
                        "opacity": 1.0 if front else 0.35,
                        "symbol": ["circle" if f else "x" for f in feasible]},
                customdata=np.column_stack([
                    subset["chip"].map(esc), subset["design"].fillna("").map(esc),
                    subset["technique"].map(esc), subset["dataflow"].fillna("-").map(esc),
                    _marked(subset, "area_mm2"), _written(subset["power_w"], "power_w"),
                    _marked(subset, "cost_usd"), _written(subset["latency_s"], "latency_s"),
                    dominant_bound(subset).map(esc), _marked(subset, y_obj.metric),
                    _marked(subset, x_metric),
                ]),
                hovertemplate=(
                    "<b>%{customdata[0]}</b> %{customdata[1]}<br>technique %{customdata[2]}"
                    " · dataflow %{customdata[3]}<br>" + esc(header(y_obj.metric))
                    + " %{customdata[9]}<br>" + esc(header(x_metric)) + " %{customdata[10]}"
                    "<br>area %{customdata[4]} · power %{customdata[5]} · cost "
                    "%{customdata[6]}<br>latency %{customdata[7]} · bound "
                    "%{customdata[8]}<extra></extra>"
                ),
            ))
    if not fig.data:
        return []
    fig.update_xaxes(title=_axis_title(x_metric), type="log" if log_axis(df[x_metric]) else None)
    fig.update_yaxes(title=_axis_title(y_obj.metric),
                     type="log" if log_axis(df[y_obj.metric]) else None)
    better = "higher" if y_obj.sense == "max" else "lower"
    return [Figure(
        id="pareto",
        title="Pareto front",
        caption=(
            f"Every design per workload ({better} {METRICS[y_obj.metric].label} is better; "
            "× = breaks a constraint; ≈ in the hover text: an estimate, not a published "
            "figure); the line joins the designs no other beats on all objectives — choose "
            "along it by budget."
        ),
        figure=_layout(fig, 520),
    )]


# --- dataflow comparison ---------------------------------------------------------------------


def dataflow_comparison(data: ReportData) -> list[Figure]:
    """Per base chip: cycles and energy by memory level of WS/OS/IS/RS mappings (from the
    sweep's ``dataflow`` extra table)."""
    table = data.extras.get("dataflow")
    if table is None or table.empty or not (table["ops_mapped"] > 0).any():
        return []
    out = []
    levels = [c for c in table.columns if c.startswith("energy_") and c.endswith("_pj")]
    for n, (chip, group) in enumerate(table.groupby("chip", sort=False)):
        part = group[group["ops_mapped"] > 0].copy()
        if part.empty:
            continue
        part["energy_pj"] = part[levels].sum(axis=1)
        best = part.groupby("workload", sort=False)["energy_pj"].transform("min")
        fig = make_subplots(rows=2, cols=1, vertical_spacing=0.2, subplot_titles=(
            "cycles of all matrix operators (log scale)",
            "energy by memory level, relative to the workload's most frugal dataflow"))
        workloads = part["workload"].map(esc)
        for i, (dataflow, rows) in enumerate(part.groupby("dataflow", sort=False)):
            fig.add_trace(go.Bar(
                x=rows["workload"].map(esc), y=rows["total_cycles"], name=str(dataflow).upper(),
                marker_color=DATAFLOW_COLORS[i % len(DATAFLOW_COLORS)], offsetgroup=f"d{i}",
                legendgroup="cycles", legendgrouptitle_text="cycles",
                customdata=rows["total_cycles"].map(lambda v: f"{v:,.0f}"),
                hovertemplate="%{x}: %{customdata} cycles<extra>" + str(dataflow).upper()
                + "</extra>",
            ), row=1, col=1)
        x = [workloads.tolist(), part["dataflow"].str.upper().tolist()]
        for column in levels:
            level = column.removeprefix("energy_").removesuffix("_pj")
            fig.add_trace(go.Bar(
                x=x, y=part[column] / best, name=level.replace("_", " "),
                marker_color=LEVEL_COLORS.get(level), offsetgroup="energy",
                legendgroup="energy", legendgrouptitle_text="energy",
                customdata=(part[column] * 1e-12).map(fmt_energy),
                hovertemplate=level + ": %{customdata} (%{y:.2f}× the best total)"
                "<extra></extra>",
            ), row=2, col=1)
        # offset groups: one per dataflow on top (side by side), one stack below
        fig.update_layout(barmode="relative", legend={"groupclick": "toggleitem"})
        fig.update_yaxes(title="cycles", type="log", row=1, col=1)
        fig.update_yaxes(title="× best energy", row=2, col=1)
        out.append(Figure(
            id=f"dataflow-{n}-{_slug(str(chip))}",
            title=f"Dataflow comparison — {esc(chip)}",
            caption=(
                "Weight-, output-, input- and row-stationary mappings of the same matrix work: "
                "the top bars say which dataflow finishes first, the stacks below which memory "
                "level pays for it."
            ),
            figure=_layout(fig, 760),
        ))
    rows = data.ok
    if "dataflow" in rows and rows["dataflow"].nunique() > 1:
        ref = rows[rows["design_key"].isin(list(data.representatives.values()))]
        fig = go.Figure()
        for i, (dataflow, part) in enumerate(ref.groupby("dataflow", sort=False)):
            fig.add_trace(go.Bar(
                x=[part["chip"].map(esc).tolist(), part["workload"].map(esc).tolist()],
                y=part["latency_s"] * 1e3, name=esc(str(dataflow).upper()),
                marker_color=_color(i), customdata=_written(part["latency_s"], "latency_s"),
                hovertemplate="%{x}: %{customdata}<extra>" + esc(str(dataflow).upper())
                + "</extra>",
            ))
        fig.update_yaxes(title="latency of the step (ms)", type="log")
        out.append(Figure(
            id="dataflow-sweep",
            title="Step latency by dataflow",
            caption="The whole step simulated with each dataflow: the shortest bar per group is "
                    "the dataflow to build for that chip and workload.",
            figure=_layout(fig),
        ))
    return out


# --- per-operator breakdown ------------------------------------------------------------------


def op_breakdown(data: ReportData, top: int = 9) -> list[Figure]:
    """Share of step time per operator for each chip's representative design and workload."""
    ref = data.reference()
    keys = ref[ref["design_key"].isin(list(data.representatives.values()))]
    if keys.empty:
        return []
    ops = data.ops(keys["key"].tolist())
    if ops.empty:
        return []
    ops = ops.merge(keys[["key", "chip", "workload", "latency_s"]], on="key")
    ops["total_s"] = ops["time_s"] * ops["count"]
    ops["label"] = ops["chip"].map(esc) + " · " + ops["workload"].map(esc)
    ranking = ops.groupby("name")["total_s"].sum().sort_values(ascending=False)
    keep = set(ranking.index[:top])
    ops["op"] = ops["name"].where(ops["name"].isin(keep), "other")
    table = ops.groupby(["label", "op"], sort=False).agg(
        total_s=("total_s", "sum"), latency_s=("latency_s", "first")).reset_index()
    table["share"] = table["total_s"] / table.groupby("label")["total_s"].transform("sum")
    labels = list(dict.fromkeys(ops["label"]))
    fig = go.Figure()
    order = list(ranking.index[:top]) + (["other"] if len(ranking) > top else [])
    for i, op in enumerate(order):
        part = table[table["op"] == op].set_index("label").reindex(labels)
        fig.add_trace(go.Bar(
            y=labels, x=part["share"] * 100, name=esc(op), orientation="h",
            marker_color=_color(i) if op != "other" else "#cccccc",
            customdata=part["total_s"].map(fmt_time),
            hovertemplate=esc(op) + ": %{x:.1f}% (%{customdata})<extra>%{y}</extra>",
        ))
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title="share of the step's time (%)", range=[0, 100])
    fig.update_yaxes(autorange="reversed")
    return [Figure(
        id="op-breakdown",
        title="Per-operator time breakdown",
        caption=(
            "Where each step's time goes on each chip's representative design: the widest "
            "segment is the operator to speed up first."
        ),
        figure=_layout(fig, max(320, 60 + 34 * len(labels))),
    )]


# --- technique waterfall ---------------------------------------------------------------------


def _step_label(stack: str, previous: str | None) -> str:
    """A waterfall bar's label: what ``stack`` adds to the ``previous`` one (``+kv-fp8``) when
    it extends it, else the whole stack."""
    if previous and stack.startswith(previous + "+"):
        return "+" + stack[len(previous) + 1:]
    return stack


def technique_waterfall(data: ReportData, max_workloads: int = 4) -> list[Figure]:
    """Tokens/s as the spec's technique stacks are applied in order, on the first chip that
    ran more than one stack (its representative design)."""
    rows = data.ok
    if "technique" not in rows or rows["technique"].nunique() < 2:
        return []
    stacks = data.spec.get("techniques") or list(dict.fromkeys(rows["technique"]))
    for chip, key in data.representatives.items():
        design = rows[rows["design_key"] == key]
        if "dataflow" in design and design["dataflow"].notna().any():
            design = design[design["dataflow"] == data.first("dataflow")]
        design = design[design["engine"] == data.first("engine")]
        workloads = [w for w, part in design.groupby("workload", sort=False)
                     if part["technique"].nunique() > 1][:max_workloads]
        if not workloads:
            continue
        row_px = 330
        height = row_px * len(workloads) + 60
        spacing = min(150 / height, 0.9 / max(len(workloads) - 1, 1))  # room for the labels
        fig = make_subplots(rows=len(workloads), cols=1, vertical_spacing=spacing,
                            subplot_titles=[esc(w) for w in workloads])
        for r, workload in enumerate(workloads, start=1):
            part = design[design["workload"] == workload].set_index("technique")
            present = [s for s in stacks if s in part.index]
            values = [float(part.loc[s, "tokens_per_s"]) for s in present]
            deltas = [values[0]] + [b - a for a, b in itertools.pairwise(values)]
            labels = [_step_label(s, p) for s, p in zip(present, [None, *present], strict=False)]
            written = [format_metric("tokens_per_s", v) for v in values]
            changes = [written[0]] + [("+" if d >= 0 else "−") + format_metric(
                "tokens_per_s", abs(d)) for d in deltas[1:]]
            fig.add_trace(go.Waterfall(
                x=[esc(label) for label in labels] + ["all applied"],
                y=[*deltas, 0], measure=["absolute"] + ["relative"] * (len(present) - 1)
                + ["total"],
                name=esc(workload), showlegend=False,
                customdata=np.column_stack([
                    [esc(s) for s in present] + [esc(present[-1])],
                    [*changes, written[-1]], [*written, written[-1]],
                ]),
                hovertemplate="%{customdata[0]}<br>%{customdata[1]} → %{customdata[2]}"
                "<extra></extra>",
            ), row=r, col=1)
            fig.update_yaxes(title="tokens/s", row=r, col=1)
        fig.update_xaxes(tickangle=-30)
        return [Figure(
            id="technique-waterfall",
            title=f"Technique waterfall — {esc(chip)}",
            caption=(
                "Tokens/s as each technique stack of the spec is applied in turn (a label "
                "starting with + is what that stack adds to the previous one): each bar is "
                "what it gains or loses."
            ),
            figure=_layout(fig, height),
        )]
    return []


# --- figures that appear when other engines provide their data -------------------------------


def event_timeline(data: ReportData) -> list[Figure]:
    """Per base chip: a Gantt chart of one step from the event engine (``timeline`` extra
    table: ``chip``, ``workload``, ``resource``, ``start_s``, ``end_s``, ``label``), when the
    sweep ran that engine."""
    table = data.extras.get("timeline")
    if table is None or table.empty:
        return []
    out = []
    for n, (chip, ev) in enumerate(table.groupby("chip", sort=False)):
        fig = go.Figure()
        for i, (resource, part) in enumerate(ev.groupby("resource", sort=False)):
            fig.add_trace(go.Bar(
                y=[esc(resource)] * len(part), x=(part["end_s"] - part["start_s"]) * 1e6,
                base=part["start_s"] * 1e6, orientation="h", name=esc(resource),
                marker_color=_color(i), showlegend=False,
                customdata=np.column_stack([part["label"].map(esc), part["start_s"].map(fmt_time),
                                            (part["end_s"] - part["start_s"]).map(fmt_time)]),
                hovertemplate="%{customdata[0]}<br>from %{customdata[1]} for %{customdata[2]}"
                "<extra></extra>",
            ))
        fig.update_xaxes(title="time (µs)")
        fig.update_yaxes(autorange="reversed")
        resources = ev["resource"].nunique()
        out.append(Figure(
            id=f"event-timeline-{n}-{_slug(str(chip))}",
            title=f"Event timeline — {esc(chip)} · {esc(ev['workload'].iloc[0])}",
            caption="What each resource does over one step: gaps on the compute rows are "
                    "stalls waiting for DMA or for shared HBM.",
            figure=_layout(fig, max(320, 80 + 26 * resources)),
        ))
    return out


SERVING_TITLES = {"ttft_s": "time to first token", "tpot_s": "time per output token",
                  "e2e_s": "end-to-end latency"}
"""Per-request latencies of the serving table, as the CDF subplots name them."""


def _length(dist: object) -> str:
    kind = getattr(dist, "kind", None)
    if kind == "fixed":
        return f"{getattr(dist, 'tokens', 0):,} tokens"
    if kind == "uniform":
        return f"uniform {getattr(dist, 'lo', 0):,}–{getattr(dist, 'hi', 0):,} tokens"
    if kind == "lognormal":
        return (f"lognormal, median {significant(getattr(dist, 'median', 0.0), trim=True)} "
                f"tokens, σ {significant(getattr(dist, 'sigma', 0.0), trim=True)}")
    return "from the trace"


def _clip(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def serving_workload(spec: dict[str, object]) -> str:
    """The spec's serving runs in words: arrivals, requests, prompt and output lengths,
    scheduler, KV manager, technique and engine (empty without serving runs)."""
    runs = spec.get("serving")
    if not isinstance(runs, dict):
        return ""
    try:
        from infersim.simulator.serving import ServingConfig

        config = ServingConfig.model_validate(runs.get("config") or {})
    except Exception:  # a results folder of another build: say what is known
        return f"technique {esc(runs.get('technique', 'baseline'))}"
    w = config.workload
    arrivals = w.arrivals
    kind = getattr(arrivals, "kind", "")
    rate = getattr(arrivals, "rate_per_s", None)
    arriving = {"poisson": f"Poisson arrivals at {significant(rate, trim=True)} requests/s",
                "fixed": f"one request every {fmt_time(1 / rate) if rate else '–'}",
                "burst": "all requests at once", "trace": "arrivals from a trace"}.get(kind, kind)
    requests = f"{w.requests:,} requests" if w.requests else "every request of the trace"
    engine = runs.get("engine") or "the default engine"
    return (f"{arriving}, {requests}, prompts {_length(w.prompt_len)}, outputs "
            f"{_length(w.output_len)}; {esc(config.scheduler.kind)} batching, "
            f"{esc(config.kv.kind)} KV cache; technique {esc(runs.get('technique', 'baseline'))}"
            f", {esc(engine)} engine")


def serving_cdfs(data: ReportData) -> list[Figure]:
    """Latency CDFs from the serving simulation (``serving`` extra table: ``label``,
    ``metric``, ``value_s`` per request; a row of metric ``error`` names a chip/model pair
    whose run could not start), when a sweep recorded one. The caption states the workload and
    the pairs that do not fit."""
    table = data.extras.get("serving")
    if table is None or table.empty:
        return []
    curves = table[table["metric"] != "error"]
    if curves.empty:
        return []
    metrics = list(dict.fromkeys(curves["metric"]))
    fig = make_subplots(rows=1, cols=len(metrics), shared_yaxes=True,  # one set of y labels
                        horizontal_spacing=0.06,
                        subplot_titles=[esc(SERVING_TITLES.get(m, m)) for m in metrics])
    for c, metric in enumerate(metrics, start=1):
        for i, (label, part) in enumerate(curves[curves["metric"] == metric].groupby(
                "label", sort=False)):
            values = np.sort(part["value_s"].to_numpy(float))
            fractions = np.arange(1, len(values) + 1) / len(values)
            fig.add_trace(go.Scatter(
                x=values * 1e3, y=fractions, mode="lines",
                name=esc(label), legendgroup=esc(label), showlegend=c == 1,
                line={"color": _color(i)},
                customdata=np.column_stack([[fmt_time(v) for v in values],
                                            [f"{f:.0%}" for f in fractions]]),
                hovertemplate=esc(label) + ": %{customdata[1]} of requests within "
                "%{customdata[0]}<extra></extra>",
            ), row=1, col=c)
        fig.update_xaxes(title="ms (log scale)", type="log", row=1, col=c)
    fig.update_yaxes(range=[0, 1], tickformat=".0%")
    fig.update_yaxes(title="fraction of requests", row=1, col=1)
    fig.update_layout(legend={"orientation": "h", "y": -0.25, "yanchor": "top"})
    failed = table[table["metric"] == "error"]
    missing = ""
    if not failed.empty:
        reasons = failed["error"] if "error" in failed else pd.Series("", index=failed.index)
        pairs = "; ".join(f"{esc(label)} ({esc(_clip(str(why or 'could not run')))})"
                          for label, why in zip(failed["label"], reasons, strict=True))
        missing = f" No curve for: {pairs}."
    workload = serving_workload(data.spec)
    return [Figure(
        id="serving-cdf",
        title="Serving latency CDFs",
        caption=(f"Fraction of requests served within a latency, for {workload}: curves "
                 f"further left are faster, and the top of each curve is the tail.{missing}"),
        figure=_layout(fig, 500),
    )]


def calibration_scatter(data: ReportData) -> list[Figure]:
    """Predicted vs measured kernel times (``calibration`` extra table: ``kernel``,
    ``predicted_s``, ``measured_s``, optional ``subset``), when calibration ran."""
    table = data.extras.get("calibration")
    if table is None or table.empty:
        return []
    groups = table.groupby("subset", sort=False) if "subset" in table else [("kernels", table)]
    fig = go.Figure()
    for i, (subset, part) in enumerate(groups):
        fig.add_trace(go.Scatter(
            x=part["measured_s"] * 1e6, y=part["predicted_s"] * 1e6, mode="markers",
            name=esc(subset), marker={"color": _color(i), "size": 8},
            customdata=np.column_stack([part["kernel"].map(esc), part["measured_s"].map(fmt_time),
                                        part["predicted_s"].map(fmt_time)]),
            hovertemplate="%{customdata[0]}<br>measured %{customdata[1]}<br>predicted "
                          "%{customdata[2]}<extra></extra>",
        ))
    lo = float(min(table["measured_s"].min(), table["predicted_s"].min()) * 1e6 / 2)
    hi = float(max(table["measured_s"].max(), table["predicted_s"].max()) * 1e6 * 2)
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="prediction = "
                             "measurement", line={"color": "black", "dash": "dash"}))
    fig.update_xaxes(title="measured (µs)", type="log")
    fig.update_yaxes(title="predicted (µs)", type="log")
    return [Figure(
        id="calibration",
        title="Predicted vs measured",
        caption="Each dot is one kernel: on the dashed line the model is exact; the distance "
                "from it is the prediction error.",
        figure=_layout(fig),
    )]


FIGURES: tuple[Callable[[ReportData], list[Figure]], ...] = (
    pareto_front,
    roofline,
    dataflow_comparison,
    op_breakdown,
    technique_waterfall,
    event_timeline,
    serving_cdfs,
    calibration_scatter,
)
"""Every figure function, in report order."""
