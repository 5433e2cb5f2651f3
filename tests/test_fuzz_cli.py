"""A seeded sample of malformed CLI invocations (tests/fuzz_cli.py): none may end in a
traceback; and of valid invocations with extreme values: an exit-0 run prints only finite,
non-negative figures and valid JSON. The full run is benchmarks/bench_fuzz.py."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from fuzz_cli import figure_problems, internal_names, invocation, valid_invocation
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
        elif result.exit_code == 2 and (names := internal_names(result.output)):
            bad.append((args, f"names internal operators: {names[:3]}"))
    assert not bad, "\n".join(f"{a}: {e}" for a, e in bad[:10])


VALID_SAMPLE = 60


@pytest.mark.parametrize("seed", range(2))
def test_exit_0_runs_print_only_finite_non_negative_figures(seed: int):
    rng = random.Random(seed)
    runner = CliRunner()
    bad = []
    for _ in range(VALID_SAMPLE // 2):
        args = valid_invocation(rng)
        result = runner.invoke(app, args)
        crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
        if crashed or result.exit_code not in (0, 2):
            bad.append((args, repr(result.exception)))
        elif result.exit_code == 0 and (problems := figure_problems(args, result.stdout)):
            bad.append((args, problems[:3]))
        elif result.exit_code == 2 and (names := internal_names(result.output)):
            bad.append((args, f"names internal operators: {names[:3]}"))
    assert not bad, "\n".join(f"{a}: {e}" for a, e in bad[:10])


def test_the_figure_scan_finds_what_it_must():
    assert figure_problems([], "stalls (compute / DMA) | -0 / 116,230,406 cycles")
    assert figure_problems([], "latency inf s") and figure_problems([], "TPOT nan")
    assert not figure_problems([], "int4-g128 on tpu-v1, 2026-12-01, tp=2, 1.5e-05 s")
    assert figure_problems(["--json"], '{"a": NaN}') == ["not valid JSON: NaN is not JSON"]
    assert figure_problems(["--json"], '{"ops": [{"time_s": -1.0}]}') == ["ops[0].time_s = -1.0"]
    assert not figure_problems(["--json"], '{"a": 0.0, "b": null, "speedup_delta": -2}')


def test_the_internal_name_scan_finds_what_it_must():
    assert internal_names("1 validation error for Gemm\nm  Input should be <= 1048576")
    assert internal_names("cannot cost Elementwise(name='x', inputs=3)")
    assert not internal_names("--batch = 65536: must be <= 4096 (the GEMM's m would overflow)")
