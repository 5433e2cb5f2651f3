"""Importers: what benchmark tools write, read as measurement records (model rows of
:mod:`infersim.validation.schema`).

Each importer module turns a tool's output into flat rows of the schema; :func:`read` then
validates every row as a measurements file's row is (a bad one names its row and field), with
``defaults`` filling what the tool does not record (the chip preset, often; a vLLM latency run's
model and lengths). Formats:

- ``llama-bench``: its ``-o json``, ``-o jsonl`` and ``-o csv`` outputs (:mod:`.llama_bench`).
- ``vllm``: the result JSON of vLLM's benchmark scripts: ``vllm bench serve`` /
  ``benchmark_serving.py``, ``vllm bench latency`` / ``benchmark_latency.py``, ``vllm bench
  throughput`` / ``benchmark_throughput.py`` (:mod:`.vllm`).
- ``trtllm-bench``: the ``--report_json`` of ``trtllm-bench throughput`` and ``latency``
  (:mod:`.trtllm`).
- ``infersim``: measurement records (CSV or JSON); ``results``: ``infersim validate`` results.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from infersim.errors import ConfigError
from infersim.io import read_text
from infersim.validation import records
from infersim.validation.importers import llama_bench, trtllm, vllm
from infersim.validation.schema import ModelRecord

FORMATS: tuple[str, ...] = ("auto", "infersim", "results", "llama-bench", "vllm", "trtllm-bench")
"""What :func:`read` takes as ``format``."""

Rows = list[tuple[str, dict[str, Any]]]
"""An importer's output: (where, flat row) of each measurement, ``where`` naming it in errors."""

IMPORTERS: dict[str, Callable[[Any, str], Rows]] = {
    "llama-bench": llama_bench.rows,
    "vllm": vllm.rows,
    "trtllm-bench": trtllm.rows,
}
"""Tool format → its importer (parsed document or CSV text, file name → rows)."""

NEEDS = "_needs"
"""The key under which an importer lists fields its tool does not record (then required from
``defaults``)."""


def parse(text: str, path: Path) -> Any:
    """A JSON document, or the list of a JSON Lines file's objects, or None (not JSON).

    Raises:
        ConfigError: JSON Lines with a bad line (the line named).
    """
    try:
        return json.loads(text)
    except ValueError:
        pass
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not lines[0].lstrip().startswith("{"):
        return None
    out = []
    for i, line in enumerate(lines, start=1):
        try:
            out.append(json.loads(line))
        except ValueError as exc:
            raise ConfigError(f"{path.name} line {i}: not JSON ({exc})") from None
    return out


def detect(path: Path, text: str, data: Any) -> str:
    """The format of a file from its fields (see :data:`FORMATS`).

    Raises:
        ConfigError: none of the formats, with the formats to pass instead.
    """
    if data is None:
        header = next(csv.reader(io.StringIO(text)), [])
        if llama_bench.is_csv_header(header):
            return "llama-bench"
        if path.suffix.lower() == ".csv":
            return "infersim"
    items = data if isinstance(data, list) else [data] if data is not None else []
    first = items[0] if items and isinstance(items[0], dict) else {}
    if isinstance(data, dict) and data.get("schema") == records.RESULTS_SCHEMA:
        return "results"
    if isinstance(data, dict) and data.get("schema") == records.MEASUREMENTS_SCHEMA:
        return "infersim"
    if llama_bench.is_test(first):
        return "llama-bench"
    if trtllm.is_report(first):
        return "trtllm-bench"
    if vllm.is_result(first):
        return "vllm"
    if first and {"record", "kernel", "model"} & set(first):
        return "infersim"
    raise ConfigError(
        f"{path}: cannot tell which tool wrote it; pass the format "
        f"({', '.join(f for f in FORMATS if f != 'auto')})"
    )


def read(path: Path, format: str = "auto", defaults: Mapping[str, Any] | None = None) -> Any:
    """The :class:`~infersim.validation.records.MeasurementSet` of ``path`` in ``format``.

    Raises:
        ConfigError: unknown format or default field, a file that is not of the format, or a
            bad row (its row and field named).
    """
    if format not in FORMATS:
        raise ConfigError(f"format {format!r} unknown; allowed: {', '.join(FORMATS)}")
    defaults = dict(defaults or {})
    unknown = [k for k in defaults if k not in ModelRecord.model_fields or k == "record"]
    if unknown:
        fields = ", ".join(f for f in ModelRecord.model_fields if f != "record")
        raise ConfigError(f"unknown model-row field(s) {', '.join(unknown)}; fields: {fields}")
    text = read_text(path, "measurements")
    data = parse(text, path)
    if format == "auto":
        format = detect(path, text, data)
    if format == "results":
        return records.results_set(data, path)
    if format == "infersim":
        if data is None:
            return records.read_csv(path, defaults)
        return records.read_json(data, path, defaults)
    found = IMPORTERS[format](text if data is None else data, path.name)
    rows = []
    for where, row in found:
        missing = [k for k in row.pop(NEEDS, ()) if row.get(k) is None and k not in defaults]
        if missing:
            raise ConfigError(
                f"{where}: {format} does not record {', '.join(missing)}: give them as defaults "
                f"(infersim calibrate --set {missing[0]}=...)"
            )
        rows.append(records.parse_row(row, where, defaults))
    return records.rows_to_set(rows, path)
