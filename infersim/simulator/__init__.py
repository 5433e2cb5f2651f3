"""Engines that cost operators on chips, and whole-model simulation."""

from infersim.simulator.inference import ENGINES, cost_ops, simulate, simulate_ops
from infersim.simulator.results import MemoryReport, OpCost, PhaseCost

__all__ = ["ENGINES", "MemoryReport", "OpCost", "PhaseCost", "cost_ops", "simulate", "simulate_ops"]
