"""The engine every entry point uses when none is named: ``simulate``, ``compare``, ``serve``,
``sweep``, ``report``, ``validate`` and ``calibrate``, and the Python API behind them.

The default is the dataflow-aware analytic engine: GEMMs and convolutions are mapped onto the
array, so the array's geometry and the SRAM's capacity move the answer. The roofline stays
available by name as the baseline: the lower bound the analytic engine never beats, and the
fast path of a sweep. A module of constants only, so that the CLI names the default without
importing the simulator.
"""

from __future__ import annotations

from typing import Final

DEFAULT_ENGINE: Final = "analytic"
"""The engine of every command and API call that names none."""

BASELINE_ENGINE: Final = "roofline"
"""The engine the default is compared with: per op, the larger of compute and compulsory
traffic over their peaks."""

ENGINE_SUMMARIES: Final[dict[str, str]] = {
    "analytic": "GEMMs mapped onto the array by the dataflow engine",
    "events": "the same mappings run tile by tile on SimPy",
    "roofline": "the baseline bound, fastest",
}
"""One line per engine (the keys are :data:`infersim.simulator.engines.ENGINE_NAMES`)."""


def engine_help() -> str:
    """The help text of every ``--engine`` option that takes a cost engine: each engine with its
    summary, the default and the baseline named."""
    parts = []
    for name, summary in ENGINE_SUMMARIES.items():
        role = "; the default" if name == DEFAULT_ENGINE else ""
        parts.append(f"{name} ({summary}{role})")
    return "Cost engine: " + ", ".join(parts)
