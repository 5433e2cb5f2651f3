"""Costing operators, model steps and request streams on chips.

- :mod:`.engines`: roofline, analytic and event engines (one operator in, an ``OpCost`` out);
- :mod:`.inference` and :mod:`.results`: a model's prefill or decode step on a chip
  (techniques applied, graph built, each distinct operator costed once) → ``PhaseCost``;
- :mod:`.serving`: the request-level SimPy simulation, with ``inference`` as its step-cost oracle.
"""

from infersim.simulator.inference import ENGINES, cost_ops, simulate, simulate_ops
from infersim.simulator.results import MemoryReport, OpCost, PhaseCost

__all__ = ["ENGINES", "MemoryReport", "OpCost", "PhaseCost", "cost_ops", "simulate", "simulate_ops"]
