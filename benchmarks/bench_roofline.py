"""Speed of whole-model simulation with the roofline engine.

Run: ``.venv/bin/python benchmarks/bench_roofline.py``. Prints the median wall time of a
Llama-3-70B decode step (batch 1, 4k context) and a 2k-token prefill on h100-sxm, and the rate
of a chips × models × phases sweep. Target (issue 4's analytic budget): ≤ 10 ms per step.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from infersim import Scenario, list_chips, list_models, load_chip, load_model, simulate
from infersim.errors import UnsupportedDtypeError
from infersim.simulator.defaults import BASELINE_ENGINE


def median_s(fn: Callable[[], object], repeat: int = 30) -> float:
    fn()  # warm caches (preset loading)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    chip, model = load_chip("h100-sxm"), load_model("llama-3-70b")
    decode = Scenario(phase="decode", batch=1, context_len=4096)
    prefill = Scenario(phase="prefill", batch=1, prompt_len=2048)
    for label, scenario in (("decode b1 ctx4k", decode), ("prefill 2k", prefill)):
        wall = median_s(lambda s=scenario: simulate(chip, model, s, engine=BASELINE_ENGINE))
        result = simulate(chip, model, scenario, engine=BASELINE_ENGINE)
        print(f"llama-3-70b {label:16s} on h100-sxm: {wall * 1e3:7.2f} ms wall "
              f"(predicted latency {result.latency_s * 1e3:.2f} ms, {len(result.ops)} ops)")

    chips = [load_chip(n) for n in list_chips()]
    models = [load_model(n) for n in list_models()]
    start = time.perf_counter()
    done = 0
    for c in chips:
        for m in models:
            for s in (decode, prefill):
                try:
                    simulate(c, m, s, engine=BASELINE_ENGINE)
                    done += 1
                except UnsupportedDtypeError:
                    pass
    wall = time.perf_counter() - start
    print(f"sweep: {done} simulations (chips x models x phases) in {wall:.2f} s "
          f"= {done / wall:,.0f} simulations/s")


if __name__ == "__main__":
    main()
