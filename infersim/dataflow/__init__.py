"""Dataflow mapping of operators onto systolic arrays (WS, OS, IS, RS as templates)."""
