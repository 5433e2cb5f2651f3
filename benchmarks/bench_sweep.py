"""Sweep throughput and memory.

Run: ``.venv/bin/python benchmarks/bench_sweep.py``. Prints design points per minute of a
10k-point analytic (roofline) sweep on 2 local workers — the vectorized path, target
>= 100k points/min — and the peak memory (driver and the largest worker, RSS) of that sweep and
of a 100k-point one: flat memory means the 100k figures match the 10k ones. Each sweep runs in
a fresh process so peak RSS is its own. Extras (dataflow maps for reports) are off: this
measures point evaluation, streaming and storage.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time

AXES_10K = {
    "array.rows,array.cols": [16, 32, 48, 64, 96, 128, 160, 192, 224, 256],
    "sram.capacity_bytes": {"low": 1048576, "high": 134217728, "num": 10, "log": True,
                            "integer": True},
    "dram.bandwidth_bytes_per_s": {"low": 0.4e12, "high": 8e12, "num": 10, "log": True},
    "freq_hz": {"low": 0.6e9, "high": 2.0e9, "num": 10},
}


def spec_doc(points: int) -> dict:
    axes = dict(AXES_10K)
    if points >= 100_000:
        axes["cores"] = {"low": 1, "high": 10, "num": 10, "integer": True}
    return {
        "name": f"bench {points}",
        "chips": [{"chip": "tpu-v4", "axes": axes}],
        "workloads": [{"model": "llama-3-8b", "phase": "decode", "context_len": 2048}],
        "constraints": ["area_mm2 <= 600"],
        "extras": False,
    }


def child(points: int, workers: int) -> None:
    from infersim.explorer.executors import LocalExecutor
    from infersim.explorer.spec import parse_spec
    from infersim.explorer.sweep import run_sweep

    spec = parse_spec(spec_doc(points))
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        summary = run_sweep(spec, out, executor=LocalExecutor(workers))
        wall = time.perf_counter() - start
    driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    worker = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps({"points": summary.evaluated, "wall_s": wall,
                      "driver_mb": driver, "worker_mb": worker}))


def measure(points: int, workers: int = 2) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", str(points), str(workers)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    small = measure(10_000)
    rate = small["points"] / small["wall_s"] * 60
    print(f"10k-point roofline sweep, 2 workers: {small['points']:,} points in "
          f"{small['wall_s']:.2f} s = {rate:,.0f} points/min (target >= 100,000)")
    big = measure(100_000)
    print(f"100k-point roofline sweep, 2 workers: {big['points']:,} points in "
          f"{big['wall_s']:.1f} s = {big['points'] / big['wall_s'] * 60:,.0f} points/min")
    for name, r in (("10k", small), ("100k", big)):
        print(f"peak RSS {name:>4}: driver {r['driver_mb']:.0f} MB, largest worker "
              f"{r['worker_mb']:.0f} MB")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(int(sys.argv[2]), int(sys.argv[3]))
    else:
        main()
