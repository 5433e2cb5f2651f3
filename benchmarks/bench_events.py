"""Speed of the event engine against the analytic engine on whole-model steps.

Run: ``.venv/bin/python benchmarks/bench_events.py``. For a Llama-3-70B decode step (batch 1,
4k context) and a 2k-token prefill on h100-sxm it prints, per engine, the wall time of one
step, the events simulated (SimPy events for the event engine; distinct operators costed for
the analytic one, which has no events) and their rate:

- ``events cold``: empty mapper and event caches (mapping + simulation), the issue's budget:
  decode <= 1 s, prefill <= 5 s;
- ``events sim``: mappings cached, simulations not (the SimPy part alone);
- ``analytic cold`` / ``analytic warm``: empty caches / median of repeated steps (budget
  <= 10 ms warm).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from infersim import Scenario, load_chip, load_model
from infersim.dataflow import clear_cache as clear_mappings
from infersim.simulator.engines import events
from infersim.simulator.inference import simulate, step_ops


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    chip, model = load_chip("h100-sxm"), load_model("llama-3-70b")
    scenarios = {
        "decode b1 ctx4k": Scenario(phase="decode", batch=1, context_len=4096),
        "prefill 2k": Scenario(phase="prefill", batch=1, prompt_len=2048),
    }
    print(f"llama-3-70b on h100-sxm (events: max {events.MAX_BLOCKS} blocks per core group)")
    print(f"{'step':16s} {'engine':14s} {'wall':>10s} {'events':>9s} {'events/s':>11s} "
          f"{'latency':>10s}")
    for label, scenario in scenarios.items():
        ops = step_ops(chip, model, scenario)
        distinct = {op.signature(): op for op in ops}

        def run(engine: str, s: Scenario = scenario) -> float:
            return simulate(chip, model, s, engine=engine).latency_s

        rows = []
        clear_mappings()
        events.clear_cache()
        wall = timed(lambda: run("events"))
        n = sum(events.simulate_op(op, chip)[1].stats.events for op in distinct.values())
        rows.append(("events cold", wall, n))
        events.clear_cache()
        rows.append(("events sim", timed(lambda: run("events")), n))
        clear_mappings()
        rows.append(("analytic cold", timed(lambda: run("analytic")), len(distinct)))
        warm = statistics.median(timed(lambda: run("analytic")) for _ in range(30))
        rows.append(("analytic warm", warm, len(distinct)))
        latency = {"events": run("events"), "analytic": run("analytic")}
        for engine, seconds, count in rows:
            lat = latency[engine.split()[0]]
            print(f"{label:16s} {engine:14s} {seconds * 1e3:8.1f} ms {count:9,d} "
                  f"{count / seconds:11,.0f} {lat * 1e3:7.2f} ms")


if __name__ == "__main__":
    main()
