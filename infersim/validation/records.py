"""Measurements as files: measurement records (CSV or JSON, the schema of
:mod:`infersim.validation.schema`, documented in ``docs/measurements.md``), the results
``infersim validate`` writes, and what benchmark tools write (through
:mod:`infersim.validation.importers`).

Every row is validated on its own; a bad row raises :class:`~infersim.errors.ConfigError`
naming the file, the row (and, in a CSV, its line), the column and the value, e.g.
``runs.csv row 3 (line 4): m = 'x': Input should be a valid integer``. The CLI turns that into
exit code 2.

A measurements JSON is ``{"schema": "infersim.measurements/1", "rows": [...]}`` (or the bare
list of rows): each row holds the CSV's columns as typed values; a model row's metric may also
be an object of its statistics (``"ttft_s": {"median": 0.21, "p99": 0.35}``).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from infersim.arch_models.chip import Chip
from infersim.errors import ConfigError
from infersim.io import read_document, read_text, validate
from infersim.validation.schema import (
    METRICS,
    RECORD_KERNELS,
    KernelMeasurement,
    ModelRecord,
    Stat,
)
from infersim.validation.suite import KernelBase, parse_kernel

RESULTS_SCHEMA = "infersim.validation/1"
MEASUREMENTS_SCHEMA = "infersim.measurements/1"

SHAPE_COLUMNS: tuple[str, ...] = (
    "m", "k", "n", "group_size",
    "batch", "heads", "kv_heads", "q_len", "kv_len", "head_dim", "causal", "fused",
    "rows", "cols", "activation",
)  # fmt: skip
"""The shape columns of the suites' kernels (what ``infersim validate`` writes)."""
CSV_COLUMNS: tuple[str, ...] = (
    "kernel", "label", *SHAPE_COLUMNS, "dtype",
    "measured_s", "spread", "reps", "predicted_s", "error", "bound", "device", "source",
)  # fmt: skip
"""The columns of a results CSV written by ``infersim validate``."""
IGNORED_COLUMNS: tuple[str, ...] = (
    "label", "predicted_s", "error", "bound", "median_s", "min_s", "statistic", "flops",
    "dram_bytes", "check_error", "check_tolerance", "passed", "kind",
)  # fmt: skip
"""Columns a kernel row may carry that are not read (what ``infersim validate`` adds)."""
STATISTICS: tuple[str, ...] = ("mean", "median", "std", "min", "max")
"""Suffixes of a metric's statistic columns (besides ``p<N>`` percentiles)."""

_METRIC_COLUMN = re.compile(
    r"^(?P<metric>" + "|".join(METRICS) + r")(?:_(?P<stat>"
    + "|".join(STATISTICS) + r"|p(?:\d{1,2}(?:\.\d+)?|100)))?$"
)  # fmt: skip
_KERNEL_COLUMNS = frozenset(
    {name for model in RECORD_KERNELS.values() for name in model.model_fields}
    | set(KernelMeasurement.model_fields) | set(IGNORED_COLUMNS)
)  # fmt: skip
_MODEL_COLUMNS = frozenset(set(ModelRecord.model_fields) - set(METRICS))
_BOTH = frozenset({"record", "kernel", "model"})


@dataclass(frozen=True)
class Measured:
    """One kernel's measured time per launch (seconds), its spread when given, and where it
    came from."""

    kernel: KernelBase
    measured_s: float
    device: str = ""
    source: str = ""
    stddev_s: float | None = None
    spread: float | None = None
    reps: int | None = None


@dataclass(frozen=True)
class MeasurementSet:
    """Measurements read from a file: kernel rows, model rows, and the chip the results were
    predicted for (results of ``infersim validate`` only)."""

    rows: list[Measured]
    chip: Chip | None
    device: str
    model_rows: list[ModelRecord] = field(default_factory=list)


def known_column(name: str) -> bool:
    """Whether ``name`` is a column of the measurement schema (kernel or model rows)."""
    return name in _BOTH or name in _KERNEL_COLUMNS or name in _MODEL_COLUMNS or bool(
        _METRIC_COLUMN.match(name)
    )  # fmt: skip


def kernel_columns(kernel: dict[str, Any]) -> dict[str, Any]:
    """The CSV columns (kernel, shape, dtype) of a kernel description's fields."""
    shape = {k: v for k, v in kernel.items() if k in SHAPE_COLUMNS}
    return {"kernel": kernel["kind"], **shape, "dtype": kernel.get("dtype", "")}


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _column(loc: Sequence[int | str]) -> str:
    """The flat column a pydantic error location stands for (``ttft_s.percentiles.p99`` →
    ``ttft_s_p99``)."""
    parts = [str(p) for p in loc if p != "percentiles"]
    return "_".join(parts)


M = TypeVar("M", bound=BaseModel)


def _validated(model: type[M], data: dict[str, Any], where: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False):
            column = _column(err["loc"])
            message = str(err["msg"]).removeprefix("Value error, ")
            if not column:
                problems.append(message)
            elif err["type"] == "missing":
                problems.append(f"{column}: required, missing")
            elif err["type"] == "extra_forbidden":
                problems.append(f"{column} = {err.get('input')!r}: not a field of this row")
            else:
                problems.append(f"{column} = {err.get('input')!r}: {message}")
        raise ConfigError(f"{where}: " + "; ".join(problems)) from None


def parse_row(
    data: Mapping[str, Any], where: str, defaults: Mapping[str, Any] | None = None
) -> Measured | ModelRecord:
    """One row of a measurements file (CSV cells as strings, JSON values typed; empty cells
    and nulls are absent): a :class:`Measured` kernel or a :class:`ModelRecord`. ``defaults``
    fill model-row fields the row leaves empty.

    Raises:
        ConfigError: the row, as ``where`` names it, with each bad column and its value.
    """
    values = {str(k).strip(): v for k, v in data.items() if not _empty(v)}
    record = values.pop("record", None)
    if record is None:
        record = "kernel" if "kernel" in values else "model" if "model" in values else None
    if record == "kernel":
        return _kernel_row(values, where)
    if record == "model":
        filled = {k: v for k, v in (defaults or {}).items() if not _empty(v)}
        return _model_row({**filled, **values}, where)
    raise ConfigError(
        f"{where}: record = {record!r}: expected kernel or model (or a kernel or model column)"
    )


def _kernel_row(values: dict[str, Any], where: str) -> Measured:
    kind = str(values.pop("kernel", "")).strip()
    if kind not in RECORD_KERNELS:
        raise ConfigError(f"{where}: kernel = {kind!r}: allowed: {', '.join(RECORD_KERNELS)}")
    model = RECORD_KERNELS[kind]
    measure = {k: values.pop(k) for k in list(values) if k in KernelMeasurement.model_fields}
    shape = {k: v for k, v in values.items() if k not in IGNORED_COLUMNS}
    for column, value in shape.items():
        if column not in model.model_fields or column == "kind":
            fields = ", ".join(f for f in model.model_fields if f != "kind")
            raise ConfigError(
                f"{where}: {column} = {value!r}: not a field of a {kind} kernel ({fields})"
            )
    kernel = _validated(model, {"kind": kind, **shape}, where)
    figure = _validated(KernelMeasurement, measure, where)
    if figure.measured_s is not None:
        seconds = figure.measured_s
    else:
        flops = sum(op.array_flops * op.count for op in kernel.ops())
        if not flops:
            raise ConfigError(f"{where}: measured_tflops given for a kernel without matrix FLOPs")
        seconds = flops / (float(figure.measured_tflops or 0.0) * 1e12)
    return Measured(
        kernel, seconds, figure.device, figure.source, figure.stddev_s, figure.spread, figure.reps
    )


def _model_row(values: dict[str, Any], where: str) -> ModelRecord:
    data: dict[str, Any] = {}
    for column, value in values.items():
        match = _METRIC_COLUMN.match(column)
        if match is None:
            data[column] = value
            continue
        metric, stat = match["metric"], match["stat"] or "mean"
        entry = data.setdefault(metric, {})
        if isinstance(value, Mapping) and not match["stat"]:
            for key, figure in value.items():
                if key == "percentiles" and isinstance(figure, Mapping):
                    entry.setdefault("percentiles", {}).update(figure)
                elif str(key).startswith("p"):
                    entry.setdefault("percentiles", {})[str(key)] = figure
                else:
                    entry[str(key)] = figure
        elif stat.startswith("p"):
            entry.setdefault("percentiles", {})[stat] = value
        else:
            entry[stat] = value
    return _validated(ModelRecord, data, where)


def rows_to_set(
    rows: Sequence[Measured | ModelRecord], path: Path, chip: Chip | None = None
) -> MeasurementSet:
    """The :class:`MeasurementSet` of parsed rows (kernel rows and model rows apart).

    Raises:
        ConfigError: no rows.
    """
    if not rows:
        raise ConfigError(f"{path}: no measurement rows")
    kernels = [r for r in rows if isinstance(r, Measured)]
    models = [r for r in rows if isinstance(r, ModelRecord)]
    devices = sorted(({r.device for r in kernels} | {r.device for r in models}) - {""})
    return MeasurementSet(kernels, chip, ", ".join(devices), models)


def read_csv(path: Path, defaults: Mapping[str, Any] | None = None) -> MeasurementSet:
    """Measurement records from a CSV with the schema's columns (one row each).

    Raises:
        ConfigError: unreadable file, a header without ``kernel`` or ``model`` or with a column
            the schema does not have, or a bad row (row and line named).
    """
    text = read_text(path, "measurements")
    reader = csv.DictReader(io.StringIO(text))
    rows: list[Measured | ModelRecord] = []
    try:
        header = [h.strip() for h in reader.fieldnames or []]
        if not ({"kernel", "model", "record"} & set(header)):
            raise ConfigError(
                f"{path}: needs a header row with a 'kernel' or 'model' column "
                "(see docs/measurements.md)"
            )
        unknown = [h for h in header if h and not known_column(h)]
        if unknown:
            raise ConfigError(
                f"{path.name} line 1: unknown column(s) {', '.join(map(repr, unknown))} "
                "(see docs/measurements.md)"
            )
        for i, row in enumerate(reader, start=1):
            where = f"{path.name} row {i} (line {reader.line_num})"
            if None in row:
                raise ConfigError(f"{where}: more cells than header columns")
            rows.append(parse_row(row, where, defaults))
    except csv.Error as exc:
        raise ConfigError(f"{path}: malformed CSV at line {reader.line_num} ({exc})") from None
    return rows_to_set(rows, path)


def read_json(
    data: Any, path: Path, defaults: Mapping[str, Any] | None = None
) -> MeasurementSet:
    """Measurement records from a parsed measurements JSON (``{"schema": ..., "rows": [...]}``
    or the bare list of rows).

    Raises:
        ConfigError: another schema, a row that is not an object, or a bad row.
    """
    if isinstance(data, dict):
        if data.get("schema") != MEASUREMENTS_SCHEMA:
            raise ConfigError(
                f"{path}: schema {data.get('schema')!r}: expected {MEASUREMENTS_SCHEMA!r}"
            )
        data = data.get("rows")
    if not isinstance(data, list):
        raise ConfigError(f"{path}: expected a list of measurement rows")
    rows: list[Measured | ModelRecord] = []
    for i, row in enumerate(data, start=1):
        where = f"{path.name} row {i}"
        if not isinstance(row, dict):
            raise ConfigError(f"{where}: expected an object of fields, got {type(row).__name__}")
        unknown = [k for k in row if not known_column(str(k))]
        if unknown:
            raise ConfigError(f"{where}: unknown field(s) {', '.join(map(repr, unknown))}")
        rows.append(parse_row(row, where, defaults))
    return rows_to_set(rows, path)


def read_results(path: Path) -> MeasurementSet:
    """Timed rows of a results JSON written by ``infersim validate``.

    Raises:
        ConfigError: not a results file, or one without timed rows (an interpret run).
    """
    data = read_document(path)
    return results_set(data, path)


def results_set(data: Any, path: Path) -> MeasurementSet:
    """The timed rows of a parsed results document (see :func:`read_results`)."""
    if not isinstance(data, dict) or data.get("schema") != RESULTS_SCHEMA:
        raise ConfigError(
            f"{path}: not an infersim validation results file (schema {RESULTS_SCHEMA})"
        )
    device = str((data.get("device") or {}).get("name", ""))
    rows = []
    for i, row in enumerate(data.get("rows", []), start=1):
        if row.get("measured_s") is None:
            continue
        where = f"{path.name} row {i}"
        kernel = parse_kernel(row.get("kernel", {}), where)
        figure = _validated(KernelMeasurement, {"measured_s": row["measured_s"]}, where)
        rows.append(Measured(kernel, float(figure.measured_s or 0.0), device, str(path),
                             spread=row.get("spread"), reps=row.get("reps")))  # fmt: skip
    if not rows:
        raise ConfigError(
            f"{path}: no timed rows (results of the interpret backend cannot calibrate)"
        )
    chip = validate(Chip, data["chip"], f"{path.name} chip") if data.get("chip") else None
    return MeasurementSet(rows, chip, device)


def prediction_table(path: Path) -> list[dict[str, Any]]:
    """Predicted vs measured rows of a results JSON written by ``infersim validate``, for the
    report's calibration scatter: ``kernel``, ``predicted_s``, ``measured_s`` and ``subset``
    (the file's name and chip, so a run before and after calibration show side by side).

    Raises:
        ConfigError: not a results file, or one without timed rows.
    """
    data = read_document(path)
    if not isinstance(data, dict) or data.get("schema") != RESULTS_SCHEMA:
        raise ConfigError(
            f"{path}: not an infersim validation results file (schema {RESULTS_SCHEMA})"
        )
    chip = str((data.get("chip") or {}).get("name", ""))
    subset = f"{path.stem} ({chip})" if chip else path.stem
    rows = [
        {"kernel": str(row.get("label", "")), "predicted_s": float(row["predicted_s"]),
         "measured_s": float(row["measured_s"]), "subset": subset}
        for row in data.get("rows", [])
        if row.get("measured_s") is not None and row.get("predicted_s") is not None
    ]  # fmt: skip
    if not rows:
        raise ConfigError(f"{path}: no timed rows with predictions")
    return rows


def read_measurements(
    path: Path, format: str = "auto", defaults: Mapping[str, Any] | None = None
) -> MeasurementSet:
    """Measurements from any file infersim reads: measurement records (.csv or .json), the
    results of ``infersim validate`` (.json), or a benchmark tool's output (``format``:
    llama-bench, vllm, trtllm-bench; ``auto`` tells them apart by their fields). ``defaults``
    fill model-row fields a file leaves out (a vLLM latency JSON names no model or lengths).

    Raises:
        ConfigError: an unknown format, a file none of the readers recognizes, or what the
            reader raises (bad rows with their row number and field).
    """
    from infersim.validation import importers

    return importers.read(path, format, defaults or {})


def write_results(data: dict[str, Any], path: Path) -> None:
    """Write a results dict as JSON (``.json``) or its rows as CSV (``.csv``).

    Raises:
        ConfigError: another suffix, or the file cannot be written.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".json":
            path.write_text(json.dumps(data, indent=2, default=str) + "\n")
        elif path.suffix == ".csv":
            with path.open("w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS, extrasaction="ignore")
                writer.writeheader()
                device = (data.get("device") or {}).get("name", "")
                for row in data["rows"]:
                    extra = {"device": device, "source": "infersim validate"}
                    writer.writerow({**row, **kernel_columns(row["kernel"]), **extra})
        else:
            raise ConfigError(f"{path}: results go to a .json or .csv file")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write ({exc.strerror or exc})") from None


def model_columns(record: ModelRecord) -> dict[str, Any]:
    """A model row as flat columns (metrics as ``<metric>_<stat>`` and ``<metric>_p<N>``)."""
    out: dict[str, Any] = {}
    for name, value in record.model_dump(exclude_none=True).items():
        if name not in METRICS:
            out[name] = value
            continue
        stat = Stat.model_validate(value)
        for key in STATISTICS:
            if getattr(stat, key) is not None:
                out[f"{name}_{key}"] = getattr(stat, key)
        for key, figure in stat.percentiles.items():
            out[f"{name}_{key}"] = figure
    return out


def write_model_rows(rows: Sequence[ModelRecord], path: Path) -> None:
    """Write model rows as a measurements CSV (``.csv``) or JSON (``.json``) that
    :func:`read_measurements` reads back to the same rows.

    Raises:
        ConfigError: another suffix, or the file cannot be written.
    """
    flat = [model_columns(r) for r in rows]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".json":
            doc = {"schema": MEASUREMENTS_SCHEMA, "rows": flat}
            path.write_text(json.dumps(doc, indent=2) + "\n")
        elif path.suffix == ".csv":
            columns = list(dict.fromkeys(c for row in flat for c in row))
            with path.open("w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=columns)
                writer.writeheader()
                writer.writerows(flat)
        else:
            raise ConfigError(f"{path}: measurements go to a .json or .csv file")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write ({exc.strerror or exc})") from None
