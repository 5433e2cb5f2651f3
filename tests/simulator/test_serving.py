"""The serving simulator: determinism, conservation, and the acceptance figures of issue 6
(paged vs contiguous, continuous vs static, prefix caching, Little's law, speculative decoding).
"""

import math

import numpy as np
import pytest

from infersim.arch_models import load_chip
from infersim.errors import ConfigError
from infersim.simulator.defaults import BASELINE_ENGINE
from infersim.simulator.inference import plan_for
from infersim.simulator.serving import (
    ChunkedPrefill,
    ContiguousKV,
    ContinuousBatching,
    PagedKV,
    ServingConfig,
    StaticBatching,
    Workload,
    kv_budget,
    simulate_serving,
)
from infersim.simulator.serving.workload import parse_arrivals, parse_length
from infersim.workloads import Precision, graph, load_model

H100 = load_chip("h100-sxm")
LLAMA = load_model("llama-3-8b")
SCHEDULERS = [StaticBatching(), ContinuousBatching(), ChunkedPrefill()]


def config(arrivals: str, requests: int, prompt: str, output: str, scheduler=None, kv=None,
           seed: int = 0, **workload) -> ServingConfig:
    wl = Workload(arrivals=parse_arrivals(arrivals), requests=requests,
                  prompt_len=parse_length(prompt), output_len=parse_length(output), **workload)
    return ServingConfig(workload=wl, scheduler=scheduler or ContinuousBatching(),
                         kv=kv or PagedKV(), seed=seed)


def serve(*args, techniques=None, **kwargs):
    """A run costed on the roofline: these tests check the serving simulator's mechanics, which
    take step costs from any engine (the bucketing test below runs the default engine)."""
    return simulate_serving(H100, LLAMA, config(*args, **kwargs), techniques,
                            engine=BASELINE_ENGINE)


# --- determinism and conservation --------------------------------------------------------------


def test_same_seed_same_result_and_other_seeds_other_samples():
    args = ("poisson:20", 150, "lognormal:300:0.5", "uniform:8:200")
    a, b = serve(*args, seed=3), serve(*args, seed=3)
    assert a.summary == b.summary
    assert a.requests.equals(b.requests) and a.timeline.equals(b.timeline)
    c = serve(*args, seed=4)
    assert not np.array_equal(a.requests["arrival_s"], c.requests["arrival_s"])
    assert not np.array_equal(a.requests["prompt_tokens"], c.requests["prompt_tokens"])
    assert a.summary["ttft_s"] != c.summary["ttft_s"]


def check_conserved(result) -> None:
    s, frame = result.summary, result.requests
    assert s["requests_completed"] + s["requests_rejected"] == s["requests_total"] == len(frame)
    assert s["requests_unfinished"] == 0
    done = frame[frame["state"] == "finished"]
    assert (done["generated_tokens"] == done["output_tokens"]).all()
    assert s["output_tokens"] == s["output_tokens_requested"] == done["output_tokens"].sum()
    assert (frame[frame["state"] == "rejected"]["generated_tokens"] == 0).all()
    assert (done["queue_s"] >= 0).all() and (done["ttft_s"] >= done["queue_s"]).all()
    assert (done["e2e_s"] >= done["ttft_s"]).all()
    # KV: nothing allocated once everyone is gone; never more than the pool
    assert result.timeline["kv_allocated_tokens"].max() <= s["kv_capacity_tokens"]
    assert (result.timeline["kv_stored_tokens"] <= result.timeline["kv_allocated_tokens"]).all()


@pytest.mark.parametrize("scheduler", SCHEDULERS, ids=lambda s: s.kind)
@pytest.mark.parametrize("kv", [
    ContiguousKV(kv_capacity_bytes=1.5e9),
    PagedKV(kv_capacity_bytes=1.5e9),
    PagedKV(kv_capacity_bytes=1.5e9, preemption="swap", prefix_cache=True),
], ids=["contiguous", "paged-recompute", "paged-swap-prefix"])
def test_every_request_finishes_or_is_rejected(scheduler, kv):
    """Memory is tight (≈ 11k tokens), so paged runs preempt; a few prompts are too long for the
    pool and are rejected at arrival."""
    result = serve("poisson:40", 120, "lognormal:400:0.9", "uniform:1:300", scheduler, kv,
                   shared_prefix_tokens=256)
    check_conserved(result)
    s = result.summary
    assert s["requests_completed"] > 100
    if isinstance(kv, PagedKV) and not isinstance(scheduler, StaticBatching):
        assert s["preemptions"] > 0
    if kv.preemption == "swap" and s["preemptions"]:
        assert s["swap_s"] > 0


def test_too_long_requests_are_rejected_and_reported():
    kv = PagedKV(kv_capacity_bytes=2000 * graph.kv_cache_bytes(LLAMA, 1, 1, Precision()))
    result = serve("burst", 20, "uniform:100:3000", "64", kv=kv)
    check_conserved(result)
    assert 0 < result.summary["requests_rejected"] < 20
    rejected = result.requests[result.requests["state"] == "rejected"]
    assert (rejected["prompt_tokens"] + 64 > 2000).all()
    assert any("rejected" in note for note in result.notes)


def test_static_batching_waits_for_its_timeout_or_a_full_batch():
    slow = serve("fixed:1", 3, "128", "4", StaticBatching(timeout_s=5.0, max_batch_size=8))
    queue = slow.requests["queue_s"].to_numpy()
    # all three arrive before the first one's timeout: the end of arrivals releases them at t=2
    assert queue[0] == pytest.approx(2.0) and queue[2] == pytest.approx(0.0)
    full = serve("fixed:1", 4, "128", "4", StaticBatching(timeout_s=50.0, max_batch_size=2))
    assert full.requests["queue_s"].iloc[0] == pytest.approx(1.0)  # the 2nd arrival fills it


def test_chunked_prefill_respects_the_token_budget():
    result = serve("poisson:30", 150, "lognormal:1500:0.5", "uniform:16:256",
                   ChunkedPrefill(max_tokens_per_iteration=512))
    check_conserved(result)
    t = result.timeline
    assert (t["prefill_tokens"] + t["decode_sequences"] <= 512).all()
    assert ((t["prefill_sequences"] > 0) & (t["decode_sequences"] > 0)).any()  # mixed batches


def test_bucketed_costs_match_exact_costs_within_2_percent():
    base = config("poisson:20", 150, "lognormal:500:0.6", "lognormal:150:0.6")
    exact = simulate_serving(H100, LLAMA, base.model_copy(update={"bucket_steps_per_octave": 0}))
    fast = simulate_serving(H100, LLAMA, base)
    for key in ("throughput_tokens_per_s", "busy_s"):
        assert fast.summary[key] == pytest.approx(exact.summary[key], rel=0.02)
    assert fast.summary["tpot_s"]["mean"] == pytest.approx(exact.summary["tpot_s"]["mean"],
                                                           rel=0.02)
    assert fast.summary["cost_memo"]["entries"] < exact.summary["cost_memo"]["entries"]


def _plan(stack: str, model=LLAMA):
    return plan_for(H100, model, techniques=stack)


def test_kv_pool_is_dram_less_weights_activations_and_reserve():
    plan, _ = _plan("")
    capacity, per_token = kv_budget(H100, plan, PagedKV(), 8192)
    weights = graph.weights_bytes(LLAMA, plan.precision)
    assert per_token == graph.kv_cache_bytes(LLAMA, 1, 1, plan.precision) == 131072
    assert capacity < 0.9 * H100.dram.capacity_bytes - weights
    assert capacity > 0.9 * H100.dram.capacity_bytes - weights - 2e9
    tp_capacity, tp_per_token = kv_budget(H100, _plan("tp=2")[0], PagedKV(), 8192)
    assert tp_per_token == per_token / 2 and tp_capacity > capacity
    with pytest.raises(ConfigError, match="does not leave room"):
        kv_budget(H100, _plan("", load_model("llama-2-70b"))[0], PagedKV(), 8192)
    with pytest.raises(ConfigError, match="KV cache"):
        kv_budget(H100, _plan("no-kv-cache")[0], PagedKV(), 8192)


# --- acceptance figures ------------------------------------------------------------------------


@pytest.mark.parametrize(("output", "strictly"), [("512", False), ("uniform:16:1008", True)])
def test_paged_admits_more_concurrent_requests_than_contiguous(output, strictly):
    """Equal KV memory (4 GB ≈ 30k tokens), 300 requests at once: contiguous reserves
    prompt + max output for each, paged only what is written."""
    runs = {kv.kind: serve("burst", 300, "512", output, kv=kv)
            for kv in (ContiguousKV(kv_capacity_bytes=4e9), PagedKV(kv_capacity_bytes=4e9))}
    paged, contiguous = runs["paged"].summary, runs["contiguous"].summary
    print(f"\noutput {output}: concurrency max paged {paged['concurrency_max']} vs contiguous "
          f"{contiguous['concurrency_max']}; mean {paged['concurrency_mean']:.1f} vs "
          f"{contiguous['concurrency_mean']:.1f}; waste {paged['kv_waste_fraction_mean']:.1%} vs "
          f"{contiguous['kv_waste_fraction_mean']:.1%}")
    assert paged["concurrency_max"] >= contiguous["concurrency_max"]
    assert paged["concurrency_mean"] >= contiguous["concurrency_mean"]
    assert paged["kv_waste_fraction_mean"] < contiguous["kv_waste_fraction_mean"]
    if strictly:
        assert paged["concurrency_mean"] > 1.5 * contiguous["concurrency_mean"]
        assert paged["throughput_tokens_per_s"] > contiguous["throughput_tokens_per_s"]


def test_continuous_batching_beats_static_on_variable_lengths():
    args = ("burst", 600, "uniform:64:1024", "uniform:16:1024")
    static = serve(*args, StaticBatching()).summary
    continuous = serve(*args, ContinuousBatching()).summary
    ratio = continuous["throughput_tokens_per_s"] / static["throughput_tokens_per_s"]
    print(f"\ncontinuous / static throughput: {ratio:.2f}x "
          f"({continuous['throughput_tokens_per_s']:,.0f} vs "
          f"{static['throughput_tokens_per_s']:,.0f} output tok/s)")
    assert ratio > 1.5


def test_prefix_cache_cuts_ttft_and_leaves_tpot():
    """A 1k-token system prompt shared by every request, at low load (1 req/s)."""
    args = ("poisson:1", 150, "uniform:64:512", "uniform:64:256")
    runs = {pc: serve(*args, kv=PagedKV(prefix_cache=pc), shared_prefix_tokens=1024)
            for pc in (False, True)}
    off, on = runs[False].summary, runs[True].summary
    print(f"\nprefix cache: TTFT mean {off['ttft_s']['mean'] * 1e3:.1f} -> "
          f"{on['ttft_s']['mean'] * 1e3:.1f} ms, TPOT mean {off['tpot_s']['mean'] * 1e3:.2f} -> "
          f"{on['tpot_s']['mean'] * 1e3:.2f} ms, hit rate {on['prefix_cache_hit_rate']:.1%}")
    assert on["prefix_cache_hit_rate"] > 0.9 and off["prefix_cache_hit_tokens"] == 0
    assert on["ttft_s"]["mean"] < 0.6 * off["ttft_s"]["mean"]
    assert on["tpot_s"]["mean"] == pytest.approx(off["tpot_s"]["mean"], rel=0.05)
    assert on["output_tokens"] == off["output_tokens"]  # decode is never shortened
    cached = runs[True].requests["cached_prompt_tokens"]
    assert (cached.iloc[1:] > 0).mean() > 0.9 and (cached <= 1024).all()


def test_littles_law_holds():
    """L = λW: whole run from the engine's own in-system count, and over the middle half of the
    run measured from the request records."""
    result = serve("poisson:30", 2500, "lognormal:256:0.5", "lognormal:128:0.7")
    little = result.summary["littles_law"]
    assert little["relative_error"] < 0.05
    arrive = result.requests["arrival_s"].to_numpy()
    leave = arrive + result.requests["e2e_s"].to_numpy()
    t0, t1 = arrive.min(), leave.max()
    lo, hi = t0 + 0.25 * (t1 - t0), t0 + 0.75 * (t1 - t0)
    in_system = np.clip(np.minimum(leave, hi) - np.maximum(arrive, lo), 0, None).sum() / (hi - lo)
    window = (arrive >= lo) & (arrive < hi)
    lam_w = window.sum() / (hi - lo) * (leave - arrive)[window].mean()
    print(f"\nLittle: L = {in_system:.2f}, λW = {lam_w:.2f}, whole-run error "
          f"{little['relative_error']:.2e}")
    assert in_system == pytest.approx(lam_w, rel=0.05)


def test_speculative_gain_shrinks_with_batch():
    """Draft heads (k=4, α=0.8): a large gain one request at a time, a small one at batch ~150
    where the K+1-token verify pass is no longer nearly free."""
    spec = "spec:heads:k=4:alpha=0.8:cost=0.05"
    gains = {}
    for label, args in (("alone", ("fixed:0.5", 20)), ("batched", ("burst", 256))):
        tpot = [serve(*args, "512", "256", techniques=t).summary for t in (None, spec)]
        gains[label] = tpot[0]["tpot_s"]["mean"] / tpot[1]["tpot_s"]["mean"]
        expected = (1 - 0.8**5) / (1 - 0.8)
        assert tpot[1]["spec_tokens_per_pass_mean"] == pytest.approx(expected, rel=0.05)
    print(f"\nspeculative TPOT gain: {gains['alone']:.2f}x alone, {gains['batched']:.2f}x batched")
    assert gains["alone"] > 2.0
    assert gains["batched"] < gains["alone"] - 0.5


def test_speculative_draft_model_costs_its_steps():
    ngram = serve("fixed:0.5", 5, "256", "64", techniques="spec:ngram:k=4:alpha=0.7").summary
    draft = serve("fixed:0.5", 5, "256", "64",
                  techniques="spec:draft=tiny-test:k=4:alpha=0.7").summary
    assert draft["tpot_s"]["mean"] > ngram["tpot_s"]["mean"]
    assert draft["ttft_s"]["mean"] > ngram["ttft_s"]["mean"]  # the drafter prefills too
    assert math.isfinite(draft["tpot_s"]["mean"])


def test_impossible_setups_raise_config_errors():
    no_link = H100.model_copy(update={"host_link": None})
    swap = config("burst", 3, "64", "4", kv=PagedKV(preemption="swap"))
    with pytest.raises(ConfigError, match="host link"):
        simulate_serving(no_link, LLAMA, swap)
    tiny_budget = config("burst", 3, "64", "4", ChunkedPrefill(max_tokens_per_iteration=3))
    with pytest.raises(ConfigError, match="speculative verify"):
        simulate_serving(H100, LLAMA, tiny_budget, "spec:ngram:k=4:alpha=0.5")


def test_progress_reports_every_request_at_the_end():
    seen = []
    simulate_serving(H100, LLAMA, config("burst", 40, "64", "300"),
                     progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (40, 40) and len(seen) > 1
