"""The engines that cost one operator (or one SCALE-Sim layer) on a chip: op in, cost out.

- :mod:`.roofline`: the bound every engine is checked against, and the cost of what is not mapped;
- :mod:`.analytic`: GEMMs and convolutions from their dataflow mapping, tile by tile in closed form;
- :mod:`.events`: the same mapping executed tile by tile on SimPy, contention and waves included,
  with its timeline; :mod:`.events.scalesim` replays SCALE-Sim's memory system on it.

Every engine returns an :class:`~infersim.simulator.results.OpCost`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from infersim.arch_models.chip import Chip
    from infersim.simulator.results import OpCost
    from infersim.workloads.ops import OpBase

    CostFn = Callable[[OpBase, Chip, str], OpCost]

ENGINE_NAMES: tuple[str, ...] = ("roofline", "analytic", "events")
"""The engines, by name (each module's ``cost(op, chip, dataflow)``)."""


def load(name: str) -> Any:
    """The ``cost`` function of engine ``name``, its module imported on first use (the event
    engine pulls in SimPy).

    Raises:
        KeyError: an unknown engine name.
    """
    if name not in ENGINE_NAMES:
        raise KeyError(name)
    return importlib.import_module(f"infersim.simulator.engines.{name}").cost


MAPPED: tuple[str, ...] = ("analytic", "events")
"""The engines that cost GEMMs and convolutions from the mapper's mappings: an op list's
searches are batched first (:func:`load_prefetch`)."""


def load_prefetch(name: str) -> Any:
    """The ``prefetch(ops, chip, dataflow)`` function that warms engine ``name`` for an op list
    (:func:`infersim.simulator.engines.analytic.prefetch`), or None for an engine that maps
    nothing."""
    if name not in MAPPED:
        return None
    return importlib.import_module("infersim.simulator.engines.analytic").prefetch


SCHEDULED: tuple[str, ...] = ("analytic", "events")
"""The engines that run a chip's schedule (:mod:`infersim.simulator.schedule`); the roofline,
the baseline, costs every operator standalone."""


def load_scheduled(name: str) -> Any:
    """The ``scheduled_cost(op, chip, place, dataflow)`` function of engine ``name``, or None
    for an engine that costs every operator standalone."""
    if name not in SCHEDULED:
        return None
    return importlib.import_module(f"infersim.simulator.engines.{name}").scheduled_cost
