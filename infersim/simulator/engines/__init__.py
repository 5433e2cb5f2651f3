"""The engines that cost one operator (or one SCALE-Sim layer) on a chip: op in, cost out.

- :mod:`.roofline`: the bound every engine is checked against, and the cost of what is not mapped;
- :mod:`.analytic`: GEMMs and convolutions from their dataflow mapping, tile by tile in closed form;
- :mod:`.events`: the same mapping executed tile by tile on SimPy, contention and waves included,
  with its timeline; :mod:`.events.scalesim` replays SCALE-Sim's memory system on it.

Every engine returns an :class:`~infersim.simulator.results.OpCost`.
"""
