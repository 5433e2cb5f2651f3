"""CPU validation wall time: the quick suite exactly as the README gives it, then calibration.

Run: ``.venv/bin/python benchmarks/bench_validate.py``. Prints, for
``infersim validate --backend cpu --suite quick`` (all cores, wall clock) and for the same with
``--threads 1 --timer cpu``: the command's wall time from the shell (process start, host
microbenchmarks, timing rounds), the kernels timed and skipped (with the reason: a dtype the
CPU only emulates), MAPE, and the held-out MAPE before and after ``infersim calibrate``.
The target is <= 90 s for the first command on a 2-core machine of either kind (with or
without native bf16).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

INFERSIM = shutil.which("infersim") or str(Path(sys.executable).with_name("infersim"))
RUNS = {
    "as in the README": [],
    "--threads 1 --timer cpu": ["--threads", "1", "--timer", "cpu"],
}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for title, extra in RUNS.items():
            out = Path(tmp) / "cpu.json"
            cmd = [INFERSIM, "validate", "--backend", "cpu", "--suite", "quick", "--out",
                   str(out), *extra]  # fmt: skip
            start = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, text=True)
            wall = time.perf_counter() - start
            data = json.loads(out.read_text())
            s = data["summary"]
            calib = subprocess.run(
                [INFERSIM, "calibrate", str(out), "--json"],
                check=True, capture_output=True, text=True,
            )  # fmt: skip
            report = json.loads(calib.stdout)
            print(f"validate --suite quick ({title}): {wall:.1f} s wall "
                  f"(suite {data['wall_s']:.1f} s), {s['n']} kernels timed, "
                  f"{s['skipped']} skipped, MAPE {s['mape']:.1%}")  # fmt: skip
            for reason in sorted({row["reason"] for row in data["skipped"]}):
                print(f"  skipped: {reason}")
            print(f"  calibrate: held-out MAPE {report['holdout_mape_before']:.1%} -> "
                  f"{report['holdout_mape_after']:.1%}")  # fmt: skip


if __name__ == "__main__":
    main()
