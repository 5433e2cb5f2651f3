#!/usr/bin/env python3
"""The analytic estimate's error against SCALE-Sim 3.0.0 on the finite-bandwidth grid.

For every row of ``scalesim_grid.csv`` (SCALE-Sim's own figures, which the replay reproduces
exactly) this prints nothing but the summary: the distribution of the analytic engine's Total
Cycles error (``infersim.dataflow.scalesim_report``: the best latency tiling of the config's
SRAM, double-buffered, and its steady-state DRAM cycles) and of its stall-cycle error as a
share of SCALE-Sim's total, overall and per dataflow / per group of rows. ``--rows`` adds one
line per row.

    .venv/bin/python tests/dataflow/golden/analytic_error.py [--rows]
"""

from __future__ import annotations

import csv
import statistics
import sys
from pathlib import Path

from infersim.dataflow.scalesim_io import ScaleSimConfig, read_layers, scalesim_report

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from gen_golden import topo_text  # noqa: E402  (the topology the generator ran)


def grid_rows() -> list[dict[str, str]]:
    with open(HERE / "scalesim_grid.csv", newline="") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def analytic(row: dict[str, str], tmp: Path) -> dict[str, float]:
    case = {k: (int(v) if v.lstrip("-").isdigit() else v) for k, v in row.items()}
    (tmp / "t.csv").write_text(topo_text(case))
    cfg = ScaleSimConfig.model_validate({
        "run_name": "grid", "array_rows": case["array_rows"], "array_cols": case["array_cols"],
        "ifmap_sram_kb": case["ifmap_sram_kb"], "filter_sram_kb": case["filter_sram_kb"],
        "ofmap_sram_kb": case["ofmap_sram_kb"], "dataflow": case["dataflow"],
        "interface_bandwidth": "USER",
        "bandwidth_words_per_cycle": case["bandwidth_words_per_cycle"],
        "ifmap_bank_bandwidth_words": case["ifmap_dram_bw_words"],
        "filter_bank_bandwidth_words": case["filter_dram_bw_words"],
        "ifmap_bank_num": case["bank_num"], "filter_bank_num": case["bank_num"]})
    [layer] = read_layers(tmp / "t.csv", gemm=case["kind"] == "gemm")
    [est] = scalesim_report(cfg, [layer.op])
    return est


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def summary(name: str, errs: list[float]) -> str:
    a = [abs(e) for e in errs]
    return (f"{name:28s} n={len(a):4d}  |error| median {statistics.median(a):7.1%}  "
            f"p90 {pct(a, 0.9):7.1%}  max {max(a):8.1%}  within 5%: {sum(x <= 0.05 for x in a)}")


def main() -> None:
    import tempfile

    rows = grid_rows()
    tmp = Path(tempfile.mkdtemp())
    by: dict[str, list[float]] = {}
    total_err, stall_share = [], []
    for row in rows:
        est = analytic(row, tmp)
        total, stall = int(row["Total Cycles"]), int(row["Stall Cycles"])
        err = est["Total Cycles"] / total - 1
        total_err.append(err)
        stall_share.append((est["Stall Cycles"] - stall) / total)
        for key in (f"dataflow {row['dataflow']}",
                    "SCALE-Sim stalls 0" if stall == 0 else "SCALE-Sim stalls > 0",
                    "stalls > 1/3 of total" if stall > total / 3 else "stalls <= 1/3"):
            by.setdefault(key, []).append(err)
        if "--rows" in sys.argv:
            print(f"{row['case_id']:64s} SCALE-Sim {total:>9} / {stall:<9} analytic "
                  f"{est['Total Cycles']:>9} / {est['Stall Cycles']:<9} {err:+8.1%}")
    print(summary("Total Cycles, all rows", total_err))
    # compute cycles are exact, so the Stall Cycles error over SCALE-Sim's total is the same
    assert all(abs(a - b) < 1e-9 for a, b in zip(total_err, stall_share, strict=True))
    for key in sorted(by):
        print(summary(f"  {key}", by[key]))
    signed = sorted(total_err)
    print(f"signed Total Cycles error: min {signed[0]:+.1%}  median "
          f"{statistics.median(signed):+.1%}  max {signed[-1]:+.1%}")


if __name__ == "__main__":
    main()
