"""The public GPU measurements: every row parses, cites a source that is not reserved as an
independent check, names a chip and model infersim has, and gets a finite prediction (error
magnitudes are not asserted: they belong to the engine, not to the data)."""

from __future__ import annotations

import math
import re
from importlib import resources

import pytest

from infersim import list_chips, list_models
from infersim.validation.public import (
    DATA_DIR,
    DATA_PACKAGE,
    FORBIDDEN_SOURCES,
    KINDS,
    ErrorRow,
    ModelRow,
    error_table,
    format_table,
    load_public,
    summary,
)

DATA = resources.files(DATA_PACKAGE) / DATA_DIR
SOURCE = re.compile(r"^(github\.com/[\w.-]+/[\w.-]+@[0-9a-f]{40}:\S+|https?://\S+)$")


@pytest.fixture(scope="module")
def table() -> list[ErrorRow]:
    return error_table()


@pytest.mark.parametrize("kind", KINDS)
def test_every_row_parses_and_cites_where_it_was_read(kind):
    rows = load_public(kind)
    assert rows, f"{kind}.csv has no rows"
    for row in rows:
        assert SOURCE.match(row.source), row.source
        assert row.location.strip()


@pytest.mark.parametrize("name", [f"{k}.csv" for k in KINDS])
def test_no_data_file_names_a_reserved_source(name):
    """(README.md names the reserved sources on purpose: it says they were left out.)"""
    text = (DATA / name).read_text()
    for pattern in FORBIDDEN_SOURCES:
        assert not re.search(pattern, text, re.IGNORECASE), (name, pattern)


@pytest.mark.parametrize(
    ("text", "reserved"),
    [
        ("https://github.com/deepseek-ai/DeepGEMM#performance", True),
        ("arXiv 2307.08691 table 1", True),
        ("FlashAttention-3 paper, figure 5", True),
        ("nvidia.github.io/TensorRT-LLM/performance/perf-overview.html", True),
        ("docs.nvidia.com/nim/benchmarking/llm", True),
        ("github.com/ggml-org/llama.cpp/discussions/4167", True),
        ("github.com/XiongjieDai/GPU-Benchmarks-on-LLM-Inference", True),
        ("minimum of 100 iterations, animation off", False),
        ("github.com/te42kyfo/gpu-benches@1c36d5:gpu-stream/h200.txt", False),
    ],
)
def test_the_reserved_source_patterns(text, reserved):
    assert any(re.search(p, text, re.IGNORECASE) for p in FORBIDDEN_SOURCES) is reserved


def test_chips_and_models_are_presets():
    chips, models = set(list_chips()), set(list_models())
    for kind in KINDS:
        for row in load_public(kind):
            assert row.chip in chips, (kind, row.chip)
            if isinstance(row, ModelRow):
                assert row.model in models, row.model


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="kind"):
        load_public("tpu")


def test_every_row_is_predicted_or_says_why_not(table):
    assert len(table) == sum(len(load_public(k)) for k in KINDS)
    for row in table:
        if row.skipped:
            assert row.predicted is None and row.error_pct is None
        else:
            assert row.predicted is not None and math.isfinite(row.predicted), row
            assert row.predicted > 0 and row.predictor, row
            assert row.error_pct is not None and math.isfinite(row.error_pct)
    predicted = [r for r in table if not r.skipped]
    assert {r.kind for r in predicted} == set(KINDS)


def test_table_has_a_line_per_row_and_a_summary_per_kind(table):
    text = format_table(table)
    assert text.count("\n| ") >= len(table) + len(KINDS)
    stats = summary(table)
    assert set(stats) == set(KINDS)
    for kind, s in stats.items():
        assert s["rows"] >= s["predicted"] >= 1, kind
        assert math.isfinite(s["mape_pct"]) and s["mape_pct"] >= 0


def test_an_unknown_engine_is_an_error_not_a_skip():
    with pytest.raises(ValueError, match="unknown engine"):
        error_table("warp-drive")


def test_error_is_signed_relative_to_the_measurement():
    row = ErrorRow(kind="gemm", chip="h100-sxm", case="c", metric="tflops", measured=800.0,
                   predicted=600.0, predictor="engine:x", source="s")
    assert row.error_pct == pytest.approx(-25.0)
