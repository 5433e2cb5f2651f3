"""Costing operators, model steps and request streams on chips.

- :mod:`.engines`: roofline, analytic and event engines (one operator in, an ``OpCost`` out);
- :mod:`.inference` and :mod:`.results`: a model's prefill or decode step on a chip
  (techniques applied, graph built, each distinct operator costed once) → ``PhaseCost``;
- :mod:`.serving`: the request-level SimPy simulation, with ``inference`` as its step-cost oracle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infersim import lazy

if TYPE_CHECKING:
    from infersim.simulator.inference import ENGINES, cost_ops, simulate, simulate_ops
    from infersim.simulator.results import MemoryReport, OpCost, PhaseCost

_PUBLIC: dict[str, str] = {
    "ENGINES": "infersim.simulator.inference",
    "cost_ops": "infersim.simulator.inference",
    "simulate": "infersim.simulator.inference",
    "simulate_ops": "infersim.simulator.inference",
    "MemoryReport": "infersim.simulator.results",
    "OpCost": "infersim.simulator.results",
    "PhaseCost": "infersim.simulator.results",
}
"""Public name -> defining module, imported on first use (PEP 562)."""


__getattr__ = lazy.attributes("infersim.simulator", globals(), _PUBLIC)


__all__ = ["ENGINES", "MemoryReport", "OpCost", "PhaseCost", "cost_ops", "simulate", "simulate_ops"]
