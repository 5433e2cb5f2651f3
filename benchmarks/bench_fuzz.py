"""The full CLI fuzz run: malformed invocations of every subcommand (tests/fuzz_cli.py), each
classified by outcome; prints the outcome table and the first failures.

Run: ``.venv/bin/python benchmarks/bench_fuzz.py [N]`` (default 3,000 invocations, seed 0).
The contract: exit 0, 1 or 2, never a traceback; the slowest invocation is printed (a run in
process cannot be interrupted, so a hang shows as a run that does not finish).
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))

from fuzz_cli import invocation
from typer.testing import CliRunner

from infersim.cli import app


def main() -> None:
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    rng = random.Random(0)
    runner = CliRunner()
    outcomes: Counter[str] = Counter()
    by_command: Counter[tuple[str, str]] = Counter()
    failures = []
    slowest = (0.0, [])
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(total):
            args = invocation(rng, Path(tmp) / f"f{i % 50}")
            start = time.perf_counter()
            result = runner.invoke(app, args)
            wall = time.perf_counter() - start
            slowest = max(slowest, (wall, args))
            crashed = result.exception is not None and not isinstance(result.exception,
                                                                      SystemExit)  # fmt: skip
            if crashed or "Traceback" in result.output:
                kind = f"traceback ({type(result.exception).__name__})"
                failures.append((args, repr(result.exception)))
            else:
                kind = f"exit {result.exit_code}"
            outcomes[kind] += 1
            by_command[(args[0], kind)] += 1
    print(f"{total:,} malformed invocations (seed 0)")
    for kind, n in sorted(outcomes.items()):
        print(f"  {kind:30s} {n:6,}")
    print("by command:")
    for (command, kind), n in sorted(by_command.items()):
        print(f"  {command:10s} {kind:30s} {n:5,}")
    print(f"slowest: {slowest[0]:.2f} s  {' '.join(slowest[1])[:160]}")
    for args, error in failures[:10]:
        print(f"FAILED {args}: {error}")


if __name__ == "__main__":
    main()
