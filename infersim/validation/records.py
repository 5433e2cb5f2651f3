"""Measurements as files: the harness's results (JSON or CSV) and CSVs taken elsewhere.

CSV columns (one kernel per row; a column a kernel kind does not use is left empty):

- ``kernel``: gemm, gemv, w8a16, w4a16, attention or elementwise
- GEMMs: ``m``, ``k``, ``n`` (and ``group_size`` for w8a16/w4a16, default 128)
- attention: ``batch``, ``heads``, ``kv_heads``, ``q_len``, ``kv_len``, ``head_dim``,
  ``causal`` (true/false), optional ``fused`` (default true)
- elementwise: ``rows``, ``cols``, optional ``activation`` (silu), ``fused`` (true)
- ``dtype``: fp32, fp16 or bf16 (the activation dtype)
- ``measured_s`` (seconds per launch) or ``measured_tflops`` (dense TFLOP/s; FLOPs as infersim
  counts them: 2·m·k·n, and 4·b·h·pairs·d for attention)
- optional ``device``, ``source``; other columns (``label``, ``predicted_s``, ...) are ignored.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infersim.arch_models.chip import Chip
from infersim.errors import ConfigError
from infersim.io import read_document, read_text, validate
from infersim.validation.suite import (
    KERNEL_KINDS,
    AttentionKernel,
    ElementwiseKernel,
    GemmKernel,
    KernelBase,
    QuantGemmKernel,
    parse_kernel,
)

RESULTS_SCHEMA = "infersim.validation/1"

SHAPE_COLUMNS: tuple[str, ...] = (
    "m", "k", "n", "group_size",
    "batch", "heads", "kv_heads", "q_len", "kv_len", "head_dim", "causal", "fused",
    "rows", "cols", "activation",
)  # fmt: skip
CSV_COLUMNS: tuple[str, ...] = (
    "kernel", "label", *SHAPE_COLUMNS, "dtype",
    "measured_s", "spread", "reps", "predicted_s", "error", "bound", "device", "source",
)  # fmt: skip
_BOOLS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


@dataclass(frozen=True)
class Measured:
    """One kernel's measured time per launch (seconds) and where it came from."""

    kernel: KernelBase
    measured_s: float
    device: str = ""
    source: str = ""


@dataclass(frozen=True)
class MeasurementSet:
    """Measurements read from a file, and the chip the results were predicted for (if any)."""

    rows: list[Measured]
    chip: Chip | None
    device: str


def kernel_columns(kernel: dict[str, Any]) -> dict[str, Any]:
    """The CSV columns (kernel, shape, dtype) of a kernel description's fields."""
    shape = {k: v for k, v in kernel.items() if k in SHAPE_COLUMNS}
    return {"kernel": kernel["kind"], **shape, "dtype": kernel.get("dtype", "")}


def _cell(text: str, column: str, where: str) -> Any:
    value = text.strip()
    if column in {"causal", "fused"}:
        if value.lower() not in _BOOLS:
            raise ConfigError(f"{where}: {column} = {value!r}: expected true or false")
        return _BOOLS[value.lower()]
    if column == "activation":
        return value
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{where}: {column} = {value!r}: expected an integer") from None


def _positive(text: str, column: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{where}: {column} = {text!r}: expected a number") from None
    if not value > 0 or value == float("inf"):
        raise ConfigError(f"{where}: {column} = {text!r}: must be > 0 and finite")
    return value


def _csv_row(row: dict[str, str], where: str) -> Measured:
    kind = (row.get("kernel") or "").strip()
    if kind not in KERNEL_KINDS:
        raise ConfigError(f"{where}: kernel = {kind!r}: allowed: {', '.join(KERNEL_KINDS)}")
    data: dict[str, Any] = {"kind": kind}
    for column in SHAPE_COLUMNS:
        text = row.get(column)
        if text is not None and text.strip():
            data[column] = _cell(text, column, where)
    if (row.get("dtype") or "").strip():
        data["dtype"] = row["dtype"].strip()
    kernel = _parse_shape(data, where)
    seconds = (row.get("measured_s") or "").strip()
    tflops = (row.get("measured_tflops") or "").strip()
    if seconds:
        measured = _positive(seconds, "measured_s", where)
    elif tflops:
        flops = sum(op.array_flops * op.count for op in kernel.ops())
        if not flops:
            raise ConfigError(f"{where}: measured_tflops given for a kernel without matrix FLOPs")
        measured = flops / (_positive(tflops, "measured_tflops", where) * 1e12)
    else:
        raise ConfigError(f"{where}: needs measured_s or measured_tflops")
    return Measured(
        kernel, measured, (row.get("device") or "").strip(), (row.get("source") or "").strip()
    )


def _parse_shape(data: dict[str, Any], where: str) -> KernelBase:
    """Drop shape columns that the kind does not have (a shared CSV fills some), then parse."""
    models: dict[str, type[KernelBase]] = {
        "gemm": GemmKernel, "gemv": GemmKernel, "w8a16": QuantGemmKernel, "w4a16": QuantGemmKernel,
        "attention": AttentionKernel, "elementwise": ElementwiseKernel,
    }  # fmt: skip
    model = models[data["kind"]]
    fields = set(model.model_fields)
    return parse_kernel({k: v for k, v in data.items() if k in fields}, where)


def read_csv(path: Path) -> MeasurementSet:
    """Measurements from a CSV with the documented columns.

    Raises:
        ConfigError: unreadable file, a missing ``kernel`` column, or a bad row (line named).
    """
    text = read_text(path, "measurements")
    reader = csv.DictReader(text.splitlines())
    try:
        if not reader.fieldnames or "kernel" not in reader.fieldnames:
            raise ConfigError(
                f"{path}: needs a header row with a 'kernel' column; columns: "
                f"{', '.join(CSV_COLUMNS)}"
            )
        rows = [_csv_row(row, f"{path.name} line {i}") for i, row in enumerate(reader, start=2)]
    except csv.Error as exc:
        raise ConfigError(f"{path}: malformed CSV at line {reader.line_num} ({exc})") from None
    if not rows:
        raise ConfigError(f"{path}: no measurement rows")
    devices = sorted({r.device for r in rows if r.device})
    return MeasurementSet(rows, None, ", ".join(devices))


def read_results(path: Path) -> MeasurementSet:
    """Timed rows of a results JSON written by ``infersim validate``.

    Raises:
        ConfigError: not a results file, or one without timed rows (an interpret run).
    """
    data = read_document(path)
    if not isinstance(data, dict) or data.get("schema") != RESULTS_SCHEMA:
        raise ConfigError(
            f"{path}: not an infersim validation results file (schema {RESULTS_SCHEMA})"
        )
    device = str((data.get("device") or {}).get("name", ""))
    rows = []
    for i, row in enumerate(data.get("rows", [])):
        if row.get("measured_s") is None:
            continue
        kernel = parse_kernel(row.get("kernel", {}), f"{path.name} row {i}")
        rows.append(
            Measured(
                kernel,
                _positive(str(row["measured_s"]), "measured_s", f"row {i}"),
                device,
                str(path),
            )
        )
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
    ]
    if not rows:
        raise ConfigError(f"{path}: no timed rows with predictions")
    return rows


def read_measurements(path: Path) -> MeasurementSet:
    """A results JSON (``.json``) or a measurements CSV (``.csv``).

    Raises:
        ConfigError: another suffix, or what the readers raise.
    """
    if path.suffix == ".csv":
        return read_csv(path)
    if path.suffix == ".json":
        return read_results(path)
    raise ConfigError(f"{path}: expected a results .json or a measurements .csv")


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
