"""Fit calibration profiles for the GPU presets on the public measurements, and write them.

Reads ``infersim/validation/data/public_gpu/`` (the cited rows the error table uses), writes
per chip a measurement-records CSV of them (``measurements/<chip>.csv``, the schema of
docs/measurements.md) and fits it through the default engine with 4-fold cross-validation
(``infersim calibrate FILE --chip CHIP --folds 4 --profile profiles/<chip>.yaml``), printing
each fit's held-out error. What goes in:

- GEMM rows (TFLOP/s) as kernel rows;
- nccl-tests all-reduce rows as collective kernel rows: time = bytes x 2(n-1)/n / busbw;
- HBM stream rows (BabelStream copy and triad) as memory-bound norm kernels moving the same
  bytes (read and write once; their vector work is a few per cent of their DRAM time), so the
  DRAM efficiency is seen where no model row binds on it;
- gpt-fast's batch-1 generation rows (a100 only) as end-to-end model rows, tokens/s of output.

Rows infersim cannot express (int4-g32 weights) are left out, as the error table leaves them.

    .venv/bin/python scripts/public_profiles.py
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "infersim" / "validation" / "data" / "public_gpu"
CHIPS = ("a100-sxm-80gb", "h100-sxm", "h200")
COLUMNS = (
    "record", "kernel", "m", "k", "n", "dtype", "b_dtype", "out_dtype", "rows", "cols", "norm",
    "collective", "payload_bytes", "participants", "measured_s", "measured_tflops", "chip",
    "model", "phase", "scenario", "batch", "prompt_len", "output_len", "tensor_parallel",
    "weights_dtype", "act_dtype", "kv_dtype", "output_tokens_per_s", "source",
)
DTYPE = {"fp8_e4m3": "fp8"}


def _read(name: str) -> list[dict[str, str]]:
    with (DATA / name).open(newline="") as f:
        return list(csv.DictReader(f))


def rows_for(chip: str) -> list[dict[str, object]]:
    """The measurement records of ``chip``'s public rows."""
    out: list[dict[str, object]] = []
    for r in _read("gemm.csv"):
        if r["chip"] == chip:
            out.append({"record": "kernel", "kernel": "gemm", "m": r["m"], "k": r["k"],
                        "n": r["n"], "dtype": DTYPE.get(r["a_dtype"], r["a_dtype"]),
                        "b_dtype": DTYPE.get(r["b_dtype"], r["b_dtype"]),
                        "out_dtype": DTYPE.get(r["out_dtype"], r["out_dtype"]),
                        "measured_tflops": r["measured_tflops"], "source": r["source"]})
    for r in _read("collectives.csv"):
        if r["chip"] == chip and r["collective"] == "all-reduce":
            n, size = int(r["n_gpus"]), float(r["message_bytes"])
            seconds = size * 2 * (n - 1) / n / float(r["measured_busbw_bytes_per_s"])
            out.append({"record": "kernel", "kernel": "collective", "collective": "all-reduce",
                        "payload_bytes": size, "participants": n, "measured_s": seconds,
                        "source": r["source"]})
    for r in _read("memory.csv"):
        if r["chip"] == chip and r["kind"] in ("dram_copy", "dram_triad"):
            moved = float(r["bytes_moved"])
            elements = int(moved / 4)  # bf16, read once and written once
            cols = 8192
            out.append({"record": "kernel", "kernel": "norm", "rows": elements // cols,
                        "cols": cols, "norm": "rms", "dtype": "bf16",
                        "measured_s": moved / float(r["measured_bytes_per_s"]),
                        "source": r["source"]})
    for r in _read("models.csv"):
        if r["chip"] == chip and r["weights_dtype"] != "int4-g32":
            out.append({"record": "model", "chip": chip, "model": r["model"],
                        "phase": "end-to-end", "scenario": "batch", "batch": r["batch"],
                        "prompt_len": r["prompt_len"], "output_len": r["output_len"],
                        "tensor_parallel": r["tp"], "weights_dtype": r["weights_dtype"],
                        "act_dtype": r["act_dtype"], "kv_dtype": r["kv_dtype"],
                        "output_tokens_per_s": r["measured"], "source": r["source"]})
    return out


def main() -> None:
    (DATA / "measurements").mkdir(exist_ok=True)
    (DATA / "profiles").mkdir(exist_ok=True)
    for chip in CHIPS:
        path = DATA / "measurements" / f"{chip}.csv"
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS)
            writer.writeheader()
            for row in rows_for(chip):
                writer.writerow(row)
        profile = DATA / "profiles" / f"{chip}.yaml"
        cmd = [sys.executable, "-m", "infersim", "calibrate", str(path), "--chip", chip,
               "--folds", "4", "--profile", str(profile), "--json"]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{chip}: {' '.join(cmd)} exited {done.returncode}:\n"
                             f"{done.stdout}{done.stderr}")
        report = json.loads(done.stdout)
        fit, held = report.get("fit", {}), report.get("holdout") or {}
        print(f"{chip}: {len(rows_for(chip))} rows; fit MAPE {fit.get('mape_before')} -> "
              f"{fit.get('mape_after')}; held out ({held.get('method')}) "
              f"{held.get('mape_before')} -> {held.get('mape_after')}; good {report.get('good')}; "
              f"warnings {report.get('warnings')}")
        print("   knobs:", {k["knob"] if isinstance(k, dict) else k: v for k, v in
                            (report.get("knobs") or {}).items()})


if __name__ == "__main__":
    main()
