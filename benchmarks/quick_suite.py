"""Wall time of the README's quick CPU suite command, exactly as the README gives it.

Run: ``.venv/bin/python benchmarks/quick_suite.py [--repeat N]``. Runs
``infersim validate --backend cpu --suite quick --out cpu.json`` in a scratch folder (so
``cpu.json`` lands there), timing the whole process from the shell's side (start-up, the host
probes, sizing, warm-up, timed rounds, predictions, the table), and prints each run's wall time,
the suite's own ``wall_s``, the kernels timed, skipped (a dtype the host only emulates) and
resized (the quick suite is sized to its budget from a first measure of the host). The target
is <= 90 s on a 2-core machine (issue 16); the exit status is 1 when a run misses it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMAND = ["infersim", "validate", "--backend", "cpu", "--suite", "quick", "--out", "cpu.json"]
"""The README's command (its quick-start block)."""
TARGET_S = 90.0


def run_once(folder: Path) -> tuple[float, dict]:
    """Wall seconds of one run of :data:`COMMAND` in ``folder``, and its results JSON."""
    exe = shutil.which("infersim") or str(Path(sys.executable).with_name("infersim"))
    start = time.perf_counter()
    subprocess.run([exe, *COMMAND[1:]], cwd=folder, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - start
    return wall, json.loads((folder / "cpu.json").read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs (each one printed)")
    args = parser.parse_args()
    missed = False
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            wall, data = run_once(Path(tmp))
            s, sizing = data["summary"], data.get("sizing") or {}
            missed |= wall > TARGET_S
            print(
                f"run {i + 1}: `{' '.join(COMMAND)}`: {wall:.1f} s wall "
                f"(suite {data['wall_s']:.1f} s; target <= {TARGET_S:g} s), {s['n']} kernels "
                f"timed, {s['skipped']} skipped, {len(sizing.get('resized', []))} resized, "
                f"up to {sizing.get('rounds', '?')} rounds, MAPE {s['mape']:.1%}"
            )
            for reason in sorted({row["reason"] for row in data["skipped"]}):
                print(f"  skipped: {reason}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
