"""Design-space exploration: sweeps, result store, Pareto fronts, reports."""
