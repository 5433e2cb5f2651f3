"""Reports: every figure from stored results (no re-simulation), captions, escaping, figures
that appear only when their data exists, and static export."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from infersim.explorer.executors import LocalExecutor
from infersim.explorer.report import build_figures, write_report
from infersim.explorer.report.data import ReportData
from infersim.explorer.report.figures import (
    calibration_scatter,
    event_timeline,
    serving_cdfs,
    technique_waterfall,
)
from infersim.explorer.report.static import chromium_path, export_static
from infersim.explorer.spec import parse_spec
from infersim.explorer.store import ResultStore
from infersim.explorer.sweep import run_sweep

EVIL = "<script>alert('x')</script>"


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    doc = {
        "name": f"sweep {EVIL}",
        "chips": ["h100-sxm", {"chip": "tpu-v4", "label": f"tpu {EVIL}",
                               "axes": {"array.rows,array.cols": [64, 128]}}],
        "workloads": [{"model": "tiny-test", "label": f"tiny {EVIL}",
                       "phase": ["decode", "prefill"]}],
        "techniques": ["baseline", "int8-weight", "int8-weight+kv-int8"],
        "constraints": ["area_mm2 <= 900"],
    }
    out = tmp_path_factory.mktemp("results")
    run_sweep(parse_spec(doc), out, executor=LocalExecutor(1))
    return out


def test_report_has_every_figure_with_a_caption(results: Path, tmp_path: Path, monkeypatch):
    from infersim.simulator import inference

    def no_simulation(*args, **kwargs):
        raise AssertionError("a report must read results, not simulate")

    monkeypatch.setattr(inference, "simulate", no_simulation)
    monkeypatch.setattr(inference, "cost_ops", no_simulation)
    result = write_report(results, tmp_path / "report.html")
    text = result.path.read_text()
    ids = [f.id for f in result.figures]
    assert len(ids) == len(set(ids))
    assert {"pareto", "op-breakdown", "technique-waterfall"} <= set(ids)
    assert sum(i.startswith("roofline-") for i in ids) == 2
    for fig in result.figures:
        assert f'id="{fig.id}"' in text and fig.caption in text
        assert fig.caption.count(".") <= 1  # one line, one sentence
    assert "<script src=" not in text and "Plotly.newPlot" in text
    assert len(text) > 3_000_000  # plotly.js inlined


def test_user_names_are_escaped(results: Path, tmp_path: Path):
    text = write_report(results, tmp_path / "report.html").path.read_text()
    assert EVIL not in text
    assert "alert(&#x27;x&#x27;)" in text or "alert(&#39;x&#39;)" in text


def test_figures_wait_for_their_data(results: Path):
    data = ReportData.load(results)
    assert event_timeline(data) == [] and serving_cdfs(data) == []
    assert calibration_scatter(data) == []
    data.extras["serving"] = pd.DataFrame({
        "label": ["a"] * 3 + ["b"] * 3, "metric": ["ttft_s"] * 6,
        "value_s": [0.1, 0.2, 0.3, 0.2, 0.4, 0.5]})
    data.extras["calibration"] = pd.DataFrame({
        "kernel": ["mm", "attn"], "predicted_s": [1e-3, 2e-4], "measured_s": [1.1e-3, 2.5e-4]})
    data.extras["timeline"] = pd.DataFrame({
        "chip": ["h100-sxm"] * 2, "workload": ["w"] * 2, "resource": ["compute:core 0", "hbm"],
        "start_s": [0.0, 0.0], "end_s": [1e-6, 2e-6], "label": ["tile 0", "load 1"]})
    for make in (serving_cdfs, calibration_scatter, event_timeline):
        figs = make(data)
        assert len(figs) == 1 and figs[0].figure.data
    ids = {f.id for f in build_figures(data)}
    assert {"serving-cdf", "calibration", "event-timeline-0-h100-sxm"} <= ids


def test_waterfall_follows_the_spec_order(results: Path):
    data = ReportData.load(results)
    (fig,) = technique_waterfall(data)
    trace = fig.figure.data[0]
    # a stack that extends the previous one is labeled by what it adds; the hover names it all
    assert list(trace.x) == ["baseline", "int8-weight", "+kv-int8", "all applied"]
    assert [row[0] for row in trace.customdata][:3] == ["baseline", "int8-weight",
                                                       "int8-weight+kv-int8"]
    assert list(trace.measure) == ["absolute", "relative", "relative", "total"]
    layout = fig.figure.layout
    assert layout.xaxis.tickangle == -30 and layout.xaxis.automargin
    data.rows = data.rows[data.rows["technique"] == "baseline"]
    assert technique_waterfall(data) == []


def test_extras_are_read_from_the_results_folder(results: Path, tmp_path: Path):
    copy = tmp_path / "copy"
    import shutil

    shutil.copytree(results, copy)
    with ResultStore(copy) as store:
        store.write_extra("calibration", pa.table({
            "kernel": ["mm"], "predicted_s": [1e-3], "measured_s": [1.2e-3]}))
    ids = [f.id for f in write_report(copy, tmp_path / "r.html").figures]
    assert "calibration" in ids


@pytest.mark.skipif(chromium_path() is None, reason="needs Chromium for kaleido")
def test_static_export_writes_png_and_svg(results: Path, tmp_path: Path):
    pytest.importorskip("kaleido")
    figs = [f for f in build_figures(ReportData.load(results)) if f.id == "pareto"]
    paths = export_static(figs, tmp_path / "static")
    assert sorted(p.name for p in paths) == ["pareto.png", "pareto.svg"]
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in paths[1].read_text()[:500]


def test_dataflow_figures(tmp_path: Path):
    doc = {"chips": ["tpu-v4"], "workloads": [{"model": "tiny-test", "phase": "prefill",
                                               "prompt_len": 64}],
           "engines": ["analytic"], "dataflows": ["ws", "os", "is", "rs"]}
    run_sweep(parse_spec(doc), tmp_path / "r", executor=LocalExecutor(1))
    figs = {f.id: f for f in build_figures(ReportData.load(tmp_path / "r"))}
    assert "dataflow-sweep" in figs and "dataflow-0-tpu-v4" in figs
    names = {t.name for t in figs["dataflow-0-tpu-v4"].figure.data}
    assert {"WS", "OS", "IS", "RS", "dram", "sram", "mac"} <= names


def test_serving_runs_feed_the_latency_cdfs(tmp_path: Path):
    doc = {"chips": ["h100-sxm", "tpu-v4", "edge-npu"], "workloads": [{"model": "llama-3-8b"}],
           "serving": {"technique": "int8-weight", "config": {"workload": {
               "arrivals": {"kind": "poisson", "rate_per_s": 5}, "requests": 40}}}}
    run_sweep(parse_spec(doc), tmp_path / "r", executor=LocalExecutor(1))
    data = ReportData.load(tmp_path / "r")
    table = data.extras["serving"]
    curves = table[table["metric"] != "error"]
    assert set(curves["metric"]) == {"ttft_s", "tpot_s", "e2e_s"}
    # 8 GB of LPDDR holds no KV cache next to 8 GB of int8 weights: no curve for the edge NPU,
    # and the table says why instead of leaving it out
    assert set(curves["label"]) == {"h100-sxm · llama-3-8b", "tpu-v4 · llama-3-8b"}
    assert (curves.groupby(["label", "metric"]).size() == 40).all()
    (failed,) = table[table["metric"] == "error"].itertuples()
    assert failed.label == "edge-npu · llama-3-8b" and failed.error
    (fig,) = serving_cdfs(data)
    assert fig.id == "serving-cdf"
    # the caption states the workload and the pair without a curve
    for words in ("Poisson arrivals at 5 requests/s", "40 requests", "prompts 512 tokens",
                  "outputs 128 tokens", "continuous batching", "paged KV cache",
                  "technique int8-weight", "No curve for: edge-npu · llama-3-8b ("):
        assert words in fig.caption, (words, fig.caption)


def test_event_engine_sweeps_record_a_timeline(tmp_path: Path):
    doc = {"chips": ["tpu-v4"], "workloads": [{"model": "tiny-test", "phase": "prefill",
                                               "prompt_len": 64}],
           "engines": ["roofline", "events"]}
    run_sweep(parse_spec(doc), tmp_path / "r", executor=LocalExecutor(1))
    data = ReportData.load(tmp_path / "r")
    spans = data.extras["timeline"]
    assert len(spans) > 3 and (spans["end_s"] >= spans["start_s"]).all()
    assert [f.id for f in event_timeline(data)] == ["event-timeline-0-tpu-v4"]


def test_validation_results_feed_the_calibration_scatter(results: Path, tmp_path: Path):
    """`infersim validate` results (here the packaged CPU run) become the predicted-vs-measured
    scatter, one trace per file."""
    packaged = Path(__file__).parents[2] / "infersim" / "validation" / "data"
    runs = sorted(packaged.glob("*/results.json"))
    assert runs, "the packaged validation run is missing"
    report = write_report(results, tmp_path / "r.html", validation=runs)
    scatter = next(f for f in report.figures if f.id == "calibration")
    assert scatter.figure.data
    points = sum(len(trace.x) for trace in scatter.figure.data if trace.x is not None)
    assert points >= 10


def test_best_designs_leave_out_what_does_not_fit_and_say_how_many(tmp_path: Path):
    doc = {
        "name": "fit or not",
        "chips": ["a100-sxm-80gb", "h100-sxm"],
        "workloads": [{"model": "llama-2-70b", "phase": ["decode"], "context_len": 128}],
        "techniques": ["baseline", "int4-awq"],  # bf16 70B does not fit one GPU; int4 does
    }
    out = tmp_path / "r"
    run_sweep(parse_spec(doc), out, executor=LocalExecutor(1))
    text = write_report(out, tmp_path / "report.html").path.read_text()
    summary = text[text.index('id="summary"'):text.index("</section>", text.index('id="summary"'))]
    assert "2 of 4 points of this workload do not fit" in summary
    assert "baseline</td>" not in summary and "int4-awq</td>" in summary


def test_best_designs_name_the_bound_each_design_hits(results: Path):
    from infersim.explorer.report.data import dominant_bound
    from infersim.explorer.report.page import summary_table

    data = ReportData.load(results)
    table = summary_table(data)
    assert "<th>bound (time share)</th>" in table
    shares = dominant_bound(data.ok)
    assert shares.str.fullmatch(r"(compute|memory|sram|vector|link|host|pipeline|overhead) "
                                r"\d{1,3}%").all(), shares.tolist()
    feasible = data.ok[data.ok["feasible"].fillna(False).astype(bool) & data.ok["fits"]]
    best = feasible.loc[feasible["tokens_per_s"].idxmax()]  # first in its workload's rows
    bound, percent = shares[best.name].split()
    times = {c.removeprefix("time_").removesuffix("_s"): best[c]
             for c in data.ok.columns if c.startswith("time_") and c != "time_s"}
    assert bound == max(times, key=times.__getitem__) == best["bound"]
    assert int(percent[:-1]) == int(100 * times[bound] / sum(times.values()) + 1e-9)
    assert f"{bound} {percent}</td>" in table


SCIENTIFIC = re.compile(r"\d(?:\.\d+)?[eE][+-]?\d")
"""``6.422e+04``: what no table cell, hover text or legend may show."""


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    if hasattr(value, "tolist"):
        return _strings(value.tolist())
    return []


def test_tables_and_hover_texts_write_figures_with_units(results: Path, tmp_path: Path):
    text = write_report(results, tmp_path / "r.html").path.read_text()
    page = re.sub(r"<script.*?</script>", "", text[text.index("<body>"):], flags=re.S)
    assert not SCIENTIFIC.search(page), SCIENTIFIC.search(page)
    for raw in ("tokens_per_s", "area_mm2", "cost_usd", "latency_s"):  # human headers
        assert f"<th>{raw}</th>" not in page
    assert "<th>tokens/s</th>" in page and " tok/s</td>" in page and " mm²" in page
    for fig in build_figures(ReportData.load(results)):
        for trace in fig.figure.data:
            shown = [trace.name, getattr(trace, "hovertemplate", None),
                     *_strings(getattr(trace, "customdata", None))]
            for item in (s for s in shown if isinstance(s, str)):
                assert not SCIENTIFIC.search(item), (fig.id, item)


def test_chips_and_assumptions(results: Path, tmp_path: Path):
    text = write_report(results, tmp_path / "r.html").path.read_text()
    section = text[text.index('id="chips"'):text.index("</section>", text.index('id="chips"'))]
    # the H100's published figures, the estimated price marked, the sources listed
    assert "814 mm²" in section and "700 W" in section and "≈&#8239;$28,000" in section
    assert "sources of the published figures" in section and "whitepaper" in section
    # a swept variant of TPU v4 names its axes; the assumptions name engine and formats
    assert "swept: array.rows,array.cols" in section
    for words in ("Engine:", "analytic", "Number formats: weights bf16, activations bf16",
                  "Calibration:", "price includes the vendor"):
        assert words in section, words
