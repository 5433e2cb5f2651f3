"""Instructions per cold whole-model point, per engine, counted by callgrind: the cost of the
cycle model against the roofline without the wall clock's noise (a shared 2-core machine
drifts by about ±25% within seconds; these counts repeat to a few instructions per point).

Run: ``.venv/bin/python benchmarks/bench_instructions.py`` (needs ``valgrind``; about 5
minutes). For each engine, runs a child process under ``valgrind --tool=callgrind`` with
address-space randomization off (``setarch -R``, where there is one) and a fixed hash seed,
twice: once warming up (the four points below, each engine once, then nothing) and once
warming up then costing :data:`ROUNDS` rounds of the four points cold (every engine cache
cleared before each). The difference over the points is the instructions per cold point:
imports, preset loading and the first call's warm-up cancel out. Points: llama-3-8b and
llama-3-70b, prefill 2048 and decode at 2048 context, batch 1, on h100-sxm, persistent cost
store off. Prints both engines' counts and their ratio (issue 13: the wall ratio of
``bench_engines.py`` is the target; this is its deterministic companion).

The same runs simulate the caches (``--cache-sim=yes``, a last level of :data:`LL_BYTES`):
the data misses of that level per cold point say how far a point's working set outgrows one
core's private cache, and so how much a neighbour that fills the shared L3 slows it (the
wall ratio of ``bench_engines.py`` rises with the machine's load where these misses are many).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

ROUNDS = 20
"""Rounds of the four cold points counted (80 points per engine)."""

CHILD = """
import os, sys
os.environ["INFERSIM_CACHE"] = "off"
from infersim import Scenario, load_chip, load_model
from infersim.dataflow import clear_cache
from infersim.simulator.engines import analytic, events
from infersim.simulator.inference import simulate

engine, rounds = sys.argv[1], int(sys.argv[2])
chip = load_chip("h100-sxm")
points = [(load_model(m), s) for m in ("llama-3-8b", "llama-3-70b")
          for s in (Scenario(phase="prefill", batch=1, prompt_len=2048),
                    Scenario(phase="decode", batch=1, context_len=2048))]
for model, scenario in points:  # warm-up: imports, presets, first calls of both engines
    for name in ("roofline", "analytic"):
        simulate(chip, model, scenario, engine=name, ways_out=False)
for _ in range(rounds):
    for model, scenario in points:
        clear_cache()
        events.clear_cache()
        analytic.clear_cache()
        simulate(chip, model, scenario, engine=engine, ways_out=False)
"""
POINTS = 4
LL_BYTES = 1 << 20
"""The simulated last-level cache: one core's private L2 on this machine (AMD EPYC, 1 MiB);
what misses it goes to the L3 that other tenants of the host share."""


def counts(engine: str, rounds: int) -> tuple[int, int]:
    """Instructions, and data misses of a simulated :data:`LL_BYTES` last-level cache, that
    callgrind counts for the child costing ``rounds`` rounds cold."""
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
               "--cache-sim=yes", f"--LL={LL_BYTES},16,64", sys.executable, "-c", CHILD,
               engine, str(rounds)]  # fmt: skip
    if shutil.which("setarch"):
        command = ["setarch", "-R", *command]
    # one BLAS thread: the line search's small matrix products otherwise wake OpenBLAS's
    # worker threads, whose spinning callgrind counts (±5% from one run to the next)
    env = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1",
           "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    found = [re.search(pattern + r"\s*([\d,]+)", done.stderr)
             for pattern in (r"I\s+refs:", r"LLd misses:")]  # fmt: skip
    if found[0] is None or found[1] is None:
        raise RuntimeError(f"callgrind printed no counts:\n{done.stderr[-2000:]}")
    return int(found[0].group(1).replace(",", "")), int(found[1].group(1).replace(",", ""))


def main() -> int:
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind): nothing measured")
        return 0
    per_point = {}
    for engine in ("roofline", "analytic"):
        (ins, miss), (ins0, miss0) = counts(engine, ROUNDS), counts(engine, 0)
        per_point[engine] = (ins - ins0) / (ROUNDS * POINTS), (miss - miss0) / (ROUNDS * POINTS)
        print(f"{engine:9s} {per_point[engine][0] / 1e6:6.2f} M instructions, "
              f"{per_point[engine][1]:8,.0f} misses of a {LL_BYTES >> 20} MiB cache per cold point "
              f"({ROUNDS * POINTS} points)")
    print(f"analytic / roofline: {per_point['analytic'][0] / per_point['roofline'][0]:.2f}x "
          "the instructions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
