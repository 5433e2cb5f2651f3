"""Speed of the serving simulator, and the figures it gives for the techniques of issue 6.

Run: ``.venv/bin/python benchmarks/bench_serving.py``. The headline: 10,000 requests of
llama-3-8b on h100-sxm (Poisson 30 req/s, prompts lognormal median 512 σ 0.6, outputs lognormal
median 200 σ 0.8), continuous batching, paged KV — wall time and requests simulated per wall
second, costed on the roofline baseline (``bench_engines.py`` times the default analytic engine).
Target: ≤ 10 s on a 2-core machine. Then smaller runs compare static vs continuous
batching, contiguous vs paged KV and prefix caching (``--quick`` skips them).
"""

from __future__ import annotations

import sys
import time

from infersim import load_chip, load_model
from infersim.simulator.defaults import BASELINE_ENGINE
from infersim.simulator.serving import (
    ContiguousKV,
    ContinuousBatching,
    PagedKV,
    ServingConfig,
    ServingResult,
    StaticBatching,
    Workload,
    simulate_serving,
)
from infersim.simulator.serving.workload import parse_arrivals, parse_length

CHIP, MODEL = load_chip("h100-sxm"), load_model("llama-3-8b")


def run(arrivals: str, requests: int, prompt: str, output: str, **options: object
        ) -> tuple[ServingResult, float]:
    shared = options.pop("shared_prefix_tokens", 0)
    workload = Workload(arrivals=parse_arrivals(arrivals), requests=requests,
                        prompt_len=parse_length(prompt), output_len=parse_length(output),
                        shared_prefix_tokens=shared)
    config = ServingConfig(workload=workload, **options)
    start = time.perf_counter()
    result = simulate_serving(CHIP, MODEL, config, engine=BASELINE_ENGINE)
    return result, time.perf_counter() - start


def main() -> None:
    result, wall = run("poisson:30", 10_000, "lognormal:512:0.6", "lognormal:200:0.8",
                       scheduler=ContinuousBatching())
    s = result.summary
    print(f"10,000 requests, llama-3-8b on h100-sxm, continuous batching, paged KV: "
          f"{wall:.2f} s wall, {10_000 / wall:,.0f} simulated requests/s "
          f"({s['iterations']:,} iterations, {s['cost_memo']['entries']} cost evaluations)")
    print(f"  simulated: {s['duration_s']:.1f} s, {s['throughput_requests_per_s']:.1f} req/s, "
          f"{s['throughput_tokens_per_s']:,.0f} output tok/s, TTFT p50/p99 "
          f"{s['ttft_s']['p50'] * 1e3:.0f}/{s['ttft_s']['p99'] * 1e3:.0f} ms, TPOT p50/p99 "
          f"{s['tpot_s']['p50'] * 1e3:.1f}/{s['tpot_s']['p99'] * 1e3:.1f} ms, Little's law "
          f"error {s['littles_law']['relative_error']:.1e}")
    if "--quick" in sys.argv:
        return

    burst = ("burst", 1000, "uniform:64:1024", "uniform:16:1024")
    static = run(*burst, scheduler=StaticBatching(), kv=ContiguousKV())[0].summary
    cont = run(*burst, scheduler=ContinuousBatching())[0].summary
    print(f"1,000 requests at once, variable lengths: continuous+paged "
          f"{cont['throughput_tokens_per_s']:,.0f} vs static+contiguous "
          f"{static['throughput_tokens_per_s']:,.0f} output tok/s = "
          f"{cont['throughput_tokens_per_s'] / static['throughput_tokens_per_s']:.2f}x")

    for output in ("512", "uniform:16:1008"):
        kv = {k.kind: run("burst", 300, "512", output, kv=k)[0].summary
              for k in (ContiguousKV(kv_capacity_bytes=4e9), PagedKV(kv_capacity_bytes=4e9))}
        print(f"4 GB of KV, 300 requests at once, output {output}: concurrent requests mean "
              f"paged {kv['paged']['concurrency_mean']:.1f} vs contiguous "
              f"{kv['contiguous']['concurrency_mean']:.1f}; KV waste "
              f"{kv['paged']['kv_waste_fraction_mean']:.1%} vs "
              f"{kv['contiguous']['kv_waste_fraction_mean']:.1%}")

    prefix = {pc: run("poisson:1", 150, "uniform:64:512", "uniform:64:256",
                      kv=PagedKV(prefix_cache=pc), shared_prefix_tokens=1024)[0].summary
              for pc in (False, True)}
    off, on = prefix[False], prefix[True]
    print(f"1k-token shared system prompt, 1 req/s: prefix cache TTFT mean "
          f"{off['ttft_s']['mean'] * 1e3:.1f} -> {on['ttft_s']['mean'] * 1e3:.1f} ms, TPOT mean "
          f"{off['tpot_s']['mean'] * 1e3:.2f} -> {on['tpot_s']['mean'] * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
