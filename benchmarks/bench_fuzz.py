"""The full CLI fuzz run: malformed invocations of every subcommand (tests/fuzz_cli.py), each
classified by outcome; prints the outcome table and the first failures.

Run: ``.venv/bin/python benchmarks/bench_fuzz.py [N] [VALID]`` (default 3,000 malformed and
1,000 valid invocations with extreme values, seed 0). The contract: exit 0, 1 or 2, never a
traceback, and an exit-0 run prints only finite, non-negative figures and valid JSON
(``exit 0, bad figures``), and an error names the user's input, not an internal operator
(``exit 2, internal names``); the slowest invocation is printed (a run in process cannot be
interrupted, so a hang shows as a run that does not finish).
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
os.environ["INFERSIM_CACHE"] = "off"  # as in the tests: every run computes what it prints

from fuzz_cli import figure_problems, internal_names, invocation, valid_invocation
from typer.testing import CliRunner

from infersim.cli import app


def main() -> None:
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    valid = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    rng = random.Random(0)
    runner = CliRunner()
    outcomes: Counter[str] = Counter()
    by_family: Counter[tuple[str, str]] = Counter()
    by_command: Counter[tuple[str, str]] = Counter()
    failures = []
    slowest = (0.0, [])
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(total + valid):
            args = (invocation(rng, Path(tmp) / f"f{i % 50}") if i < total
                    else valid_invocation(rng))
            start = time.perf_counter()
            result = runner.invoke(app, args)
            wall = time.perf_counter() - start
            slowest = max(slowest, (wall, args))
            crashed = result.exception is not None and not isinstance(result.exception,
                                                                      SystemExit)  # fmt: skip
            if crashed or "Traceback" in result.output:
                kind = f"traceback ({type(result.exception).__name__})"
                failures.append((args, repr(result.exception)))
            elif result.exit_code == 0 and (bad := figure_problems(args, result.stdout)):
                kind = "exit 0, bad figures"
                failures.append((args, "; ".join(bad[:3])))
            elif result.exit_code == 2 and (names := internal_names(result.output)):
                kind = "exit 2, internal names"
                failures.append((args, "; ".join(names[:3])))
            else:
                kind = f"exit {result.exit_code}"
            outcomes[kind] += 1
            by_family[("malformed" if i < total else "valid extreme", kind)] += 1
            by_command[(args[0], kind)] += 1
    print(f"{total:,} malformed and {valid:,} valid extreme invocations (seed 0)")
    for kind, n in sorted(outcomes.items()):
        print(f"  {kind:30s} {n:6,}")
    print("by family:")
    for (family, kind), n in sorted(by_family.items()):
        print(f"  {family:14s} {kind:26s} {n:5,}")
    print("by command:")
    for (command, kind), n in sorted(by_command.items()):
        print(f"  {command:10s} {kind:30s} {n:5,}")
    print(f"slowest: {slowest[0]:.2f} s  {' '.join(slowest[1])[:160]}")
    for args, error in failures[:10]:
        print(f"FAILED {args}: {error}")


if __name__ == "__main__":
    main()
