"""The full API fuzz run: valid random configurations (tests/fuzz_api.py) through
``infersim.simulate`` on every engine and through a short serving run, each classified by
outcome; prints the table (engine × outcome) and one reproduction per failure class.

Run: ``.venv/bin/python benchmarks/bench_fuzz_api.py [SCALE] [--jobs N]`` (SCALE 1 = 10,600
configurations: 7,000 roofline, 2,000 analytic, 800 events, 800 serving; default jobs: 2
processes). The contract: every result's figures finite and non-negative, or an
InfersimError; never another exception, never a hang (60 s per example).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import warnings
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
os.environ["INFERSIM_CACHE"] = "off"  # fuzzed chips would only fill the persistent cost store

import fuzz_api
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

RUNS: dict[str, int] = {"roofline": 7000, "analytic": 2000, "events": 800, "serving": 800}
"""Examples per run at SCALE 1 (the event engine is the slowest)."""


def _repro(case: dict[str, Any]) -> str:
    return json.dumps(case, default=str)


def run_one(name: str, examples: int, rng_seed: int) -> dict[str, Any]:
    """``examples`` examples of run ``name`` (an engine, or ``serving``)."""
    warnings.simplefilter("ignore")
    counts: Counter[str] = Counter()
    refusals: Counter[str] = Counter()
    first: dict[str, tuple[str, str, str]] = {}
    slowest = (0.0, "")
    busy = 0.0
    serving = name == "serving"
    strategy = (st.tuples(fuzz_api.chips(), fuzz_api.models(small=True),
                          fuzz_api.serving_configs(), fuzz_api.techniques(),
                          st.sampled_from(["roofline"] * 6 + ["analytic"] * 3 + ["events"]),
                          st.just("best"))
                if serving else
                st.tuples(fuzz_api.chips(), fuzz_api.models(small=name == "events"),
                          fuzz_api.scenarios(small=name == "events"), fuzz_api.techniques(),
                          st.just(name), st.sampled_from(fuzz_api.DATAFLOWS)))

    @seed(rng_seed)
    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(strategy)
    def check(case: tuple[Any, ...]) -> None:
        nonlocal slowest, busy
        make = fuzz_api.serving_case if serving else fuzz_api.simulate_case
        start = time.perf_counter()
        result = fuzz_api.outcome(make(*case))
        wall = time.perf_counter() - start
        busy += wall
        counts[result.kind] += 1
        if result.kind == "InfersimError":
            refusals[re.sub(r"[-+0-9.,e]{2,}|'[^']*'", "#", result.detail)[:70]] += 1
        doc = fuzz_api.case_doc(case, serving)
        if wall > slowest[0]:
            slowest = (wall, _repro(doc))
        if result.failed and result.key not in first:
            first[result.key] = (result.kind, result.detail, _repro(doc))

    check()
    return {"name": name, "counts": dict(counts), "first": first, "slowest": slowest,
            "busy": busy,
            "refusals": dict(refusals)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scale", nargs="?", type=float, default=1.0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dump", type=Path, help="Write one reproduction per failure class "
                        "here (JSON lines; replay with tests/fuzz_api.py's replay)")
    args = parser.parse_args()
    start = time.perf_counter()
    jobs = [(name, max(1, round(n * args.scale)), args.seed) for name, n in RUNS.items()]
    # split each run in pieces so the processes stay busy (a piece = its own seed)
    pieces = [(name, -(-n // 4), s * 1000 + i) for name, n, s in jobs for i in range(4)]
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(run_one, *zip(*pieces, strict=True)))
    kinds = ["ok", "InfersimError", "other exception", "bad figure", "hang"]
    table: dict[str, Counter[str]] = {}
    failures: dict[tuple[str, str], tuple[str, str, str]] = {}
    slowest: dict[str, tuple[float, str]] = {}
    refusals: dict[str, Counter[str]] = {}
    busy: Counter[str] = Counter()
    for r in results:
        busy[r["name"]] += r["busy"]
        refusals.setdefault(r["name"], Counter()).update(r["refusals"])
        table.setdefault(r["name"], Counter()).update(r["counts"])
        for key, value in r["first"].items():
            failures.setdefault((r["name"], key), value)
        slowest[r["name"]] = max(slowest.get(r["name"], (0.0, "")), tuple(r["slowest"]))
    total = sum(sum(c.values()) for c in table.values())
    print(f"{total:,} configurations (seed {args.seed}) in {time.perf_counter() - start:.0f} s")
    print(f"  {'run':10s}" + "".join(f"{k:>17s}" for k in kinds)
          + f"{'slowest':>10s}{'total':>9s}")
    for name in RUNS:
        c = table.get(name, Counter())
        print(f"  {name:10s}" + "".join(f"{c[k]:>17,}" for k in kinds)
              + f"{slowest[name][0]:>9.1f}s{busy[name]:>8.0f}s")
    print("most common InfersimError messages per run (numbers and names as #):")
    for name in RUNS:
        for text, n in refusals.get(name, Counter()).most_common(4):
            print(f"  {name:10s} {n:6,}  {text}")
    for (name, key), (kind, detail, repro) in sorted(failures.items()):
        print(f"\nFAILED [{name}] {kind}: {key}\n  {detail}\n  reproduce: {repro}")
    if args.dump:
        slow = [(name, "slowest", f"{wall:.1f} s", "", repro)
                for name, (wall, repro) in slowest.items() if repro]
        fails = [(name, kind, key, detail, repro)
                 for (name, key), (kind, detail, repro) in sorted(failures.items())]
        args.dump.write_text("".join(
            json.dumps({"run": name, "kind": kind, "key": key, "detail": detail,
                        "case": json.loads(repro)}) + "\n"
            for name, kind, key, detail, repro in fails + slow))


if __name__ == "__main__":
    main()
