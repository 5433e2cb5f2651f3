"""A seeded sample of malformed CLI invocations (tests/fuzz_cli.py): none may end in a
traceback; the full run is benchmarks/bench_fuzz.py."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from fuzz_cli import invocation
from typer.testing import CliRunner

from infersim.cli import app

SAMPLE = 150


@pytest.mark.parametrize("seed", range(3))
def test_malformed_invocations_never_trace_back(tmp_path: Path, seed: int):
    rng = random.Random(seed)
    runner = CliRunner()
    bad = []
    for i in range(SAMPLE // 3):
        args = invocation(rng, tmp_path / f"f{i}")
        result = runner.invoke(app, args)
        crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
        if crashed or result.exit_code not in (0, 1, 2) or "Traceback" in result.output:
            bad.append((args, repr(result.exception)))
    assert not bad, "\n".join(f"{a}: {e}" for a, e in bad[:10])
