"""Design-space exploration: sweep specs → points → executors → result store → Pareto fronts
→ reports.

    from infersim.explorer import load_spec, run_sweep, load_results, pareto, write_report
    spec = load_spec("examples/sweep-systolic.yaml")
    run_sweep(spec, "results/")
    df = pareto(load_results("results/"), "tokens_per_s:max,area_mm2:min", by="workload")
    write_report("results/", "report.html")

Names are imported on first use, so worker processes load only what they run.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ResultStore": "infersim.explorer.store",
    "export_csv": "infersim.explorer.store",
    "load_ops": "infersim.explorer.store",
    "load_results": "infersim.explorer.store",
    "SweepSpec": "infersim.explorer.spec",
    "load_spec": "infersim.explorer.spec",
    "parse_spec": "infersim.explorer.spec",
    "SweepSummary": "infersim.explorer.sweep",
    "run_sweep": "infersim.explorer.sweep",
    "best_first": "infersim.explorer.pareto",
    "front": "infersim.explorer.pareto",
    "pareto": "infersim.explorer.pareto",
    "write_report": "infersim.explorer.report",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'infersim.explorer' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
