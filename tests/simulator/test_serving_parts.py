"""Serving building blocks: workload text forms, traces, the cost memo's buckets, the KV pool."""

from pathlib import Path

import numpy as np
import pytest

from infersim.errors import ConfigError
from infersim.simulator.serving import bucket
from infersim.simulator.serving.kv import ContiguousKV, KVPool, PagedKV
from infersim.simulator.serving.scheduler import Request
from infersim.simulator.serving.workload import (
    Burst,
    FixedLength,
    LognormalLength,
    Poisson,
    Trace,
    UniformLength,
    Workload,
    generate,
    parse_arrivals,
    parse_length,
    read_trace,
)

EXAMPLE_TRACE = Path(__file__).parents[2] / "examples" / "serving_trace.csv"


def rngs(seed: int = 0) -> list[np.random.Generator]:
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3)]


@pytest.mark.parametrize(("text", "expected"), [
    ("poisson:2.5", Poisson(rate_per_s=2.5)),
    ("burst", Burst()),
    ("trace:some/file.csv", Trace(path=Path("some/file.csv"))),
])
def test_parse_arrivals(text, expected):
    assert parse_arrivals(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("512", FixedLength(tokens=512)),
    ("uniform:16:64", UniformLength(lo=16, hi=64)),
    ("lognormal:300:0.5", LognormalLength(median=300, sigma=0.5)),
])
def test_parse_length(text, expected):
    assert parse_length(text) == expected


@pytest.mark.parametrize("text", ["poisson", "poisson:0", "poisson:1:2", "gamma:3", "trace:"])
def test_bad_arrivals_name_the_text(text):
    with pytest.raises(ConfigError, match="arrivals|rate_per_s|poisson"):
        parse_arrivals(text)


@pytest.mark.parametrize("text", ["0", "-3", "uniform:9:3", "uniform:3", "lognormal:0:1", "x"])
def test_bad_lengths_raise(text):
    with pytest.raises(ConfigError):
        parse_length(text)


def test_lengths_stay_in_range():
    rng = np.random.default_rng(1)
    uni = UniformLength(lo=5, hi=9).sample(rng, 2000)
    assert uni.min() == 5 and uni.max() == 9
    logn = LognormalLength(median=200, sigma=1.0)
    sample = logn.sample(rng, 20000)
    assert sample.min() >= 1 and sample.max() <= logn.upper_bound
    assert np.median(sample) == pytest.approx(200, rel=0.05)


def test_generate_caps_outputs_and_adds_the_shared_prefix():
    wl = Workload(arrivals=Poisson(rate_per_s=5), requests=500,
                  prompt_len=UniformLength(lo=10, hi=20),
                  output_len=UniformLength(lo=1, hi=400), max_output_tokens=100,
                  shared_prefix_tokens=64)
    arrays = generate(wl, *rngs())
    assert len(arrays) == 500
    assert arrays.output_tokens.max() == 100 and arrays.max_output_tokens == 100
    assert arrays.prompt_tokens.min() >= 74 and arrays.prompt_tokens.max() <= 84
    assert (arrays.prefix_tokens == 64).all() and (arrays.prefix_id == 0).all()
    assert (np.diff(arrays.arrival_s) > 0).all()
    assert 500 / arrays.arrival_s[-1] == pytest.approx(5, rel=0.15)


def test_streams_are_independent():
    """Changing the output distribution leaves arrivals and prompts as they were."""
    base = {"arrivals": Poisson(rate_per_s=3), "requests": 50,
            "prompt_len": UniformLength(lo=1, hi=99)}
    a = generate(Workload(**base, output_len=FixedLength(tokens=5)), *rngs(4))
    b = generate(Workload(**base, output_len=UniformLength(lo=1, hi=50)), *rngs(4))
    assert np.array_equal(a.arrival_s, b.arrival_s)
    assert np.array_equal(a.prompt_tokens, b.prompt_tokens)


def test_read_the_example_trace():
    cols = read_trace(EXAMPLE_TRACE)
    assert len(cols["arrival_s"]) == 24
    assert (np.diff(cols["arrival_s"]) >= 0).all()
    labelled = cols["prefix_id"] >= 0
    assert labelled.any() and (~labelled).any()
    assert (cols["prefix_tokens"][labelled] > 0).all()
    assert (cols["prefix_tokens"] <= cols["prompt_tokens"]).all()
    assert len(read_trace(EXAMPLE_TRACE, limit=5)["arrival_s"]) == 5


@pytest.mark.parametrize(("body", "message"), [
    ("arrival_s,prompt_tokens\n0,5\n", "missing column"),
    ("arrival_s,prompt_tokens,output_tokens\n0,5,x\n", "line 2: output_tokens"),
    ("arrival_s,prompt_tokens,output_tokens\n0,5,3\n-1,5,3\n", "line 3: arrival_s"),
    ("arrival_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n0,5,3,a,9\n", "exceeds"),
    ("arrival_s,prompt_tokens,output_tokens\n", "no requests"),
])
def test_bad_traces_name_the_line(tmp_path, body, message):
    path = tmp_path / "t.csv"
    path.write_text(body)
    with pytest.raises(ConfigError, match=message):
        read_trace(path)


def test_trace_lengths_need_trace_arrivals():
    with pytest.raises(ValueError, match="trace arrivals"):
        Workload(arrivals=Burst(), requests=3, output_len=parse_length("trace"))


def test_bucket_is_exact_when_small_and_within_3_percent_above():
    assert [bucket(x, 16) for x in range(33)] == list(range(33))
    xs = np.unique(np.geomspace(33, 1e6, 4000).astype(int))
    got = np.array([bucket(int(x), 16) for x in xs])
    assert np.abs(got / xs - 1).max() <= 1 / 32 + 1e-9
    assert (np.diff(got) >= 0).all()
    assert len(set(got)) < len(xs) / 10  # few distinct keys: what the memo is for
    assert bucket(12345, 0) == 12345


# --- the KV pool ------------------------------------------------------------------------------


def req(i: int, prompt: int = 40, output: int = 10, prefix_id: int = -1, prefix: int = 0
        ) -> Request:
    r = Request(id=i, arrival_s=0.0, prompt_tokens=prompt, output_tokens=output,
                max_output_tokens=output, prefix_id=prefix_id, prefix_tokens=prefix)
    r.prefill_target = prompt
    return r


def test_contiguous_reserves_prompt_plus_max_output_up_front():
    pool = KVPool(ContiguousKV(), capacity_tokens=100, lookahead_tokens=0)
    a, b = req(0), req(1)
    assert pool.acquire(a, a.prefill_target)
    assert a.cap_tokens == 50 and pool.allocated_tokens == 50
    assert pool.grow(a, 50) and not pool.grow(a, 51)
    assert pool.acquire(b, b.prefill_target)
    assert not pool.acquire(req(2), 40)
    pool.release(a)
    assert pool.free_blocks == 50
    pool.check([b])


def test_paged_allocates_blocks_on_demand():
    pool = KVPool(PagedKV(block_size_tokens=16, watermark_fraction=0), 160, 0)
    a = req(0, prompt=40)
    assert pool.acquire(a, 40)
    assert a.private_blocks == 3 and a.cap_tokens == 48
    assert pool.grow(a, 48) and a.private_blocks == 3
    assert pool.grow(a, 49) and a.private_blocks == 4
    assert pool.allocated_tokens == 64
    b = req(1, prompt=96)
    assert pool.acquire(b, 96) and not pool.grow(b, 97)
    pool.check([a, b])


def test_watermark_applies_to_admissions_only():
    pool = KVPool(PagedKV(block_size_tokens=1, watermark_fraction=0.1), 100, 0)
    assert not pool.acquire(req(0, prompt=95), 95)
    assert pool.acquire(req(1, prompt=95), 95, watermark=False)


def test_prefix_blocks_are_shared_published_and_evicted_lru():
    pool = KVPool(PagedKV(block_size_tokens=16, prefix_cache=True, watermark_fraction=0), 256, 0)
    first = req(0, prompt=80, prefix_id=7, prefix=64)
    assert pool.acquire(first, 80) and first.computed == 0
    first.computed = 80
    pool.publish(first)
    assert pool.cached_blocks == 4 and first.shared_blocks == 4 and first.private_blocks == 1
    second = req(1, prompt=70, prefix_id=7, prefix=64)
    assert pool.cached_prefix_tokens(second) == 64
    assert pool.acquire(second, 70)
    assert second.computed == 64 and second.shared_blocks == 4 and second.private_blocks == 1
    pool.check([first, second])
    # a prompt that is all prefix still computes its last token
    whole = req(2, prompt=64, prefix_id=7, prefix=64)
    assert pool.cached_prefix_tokens(whole) == 48
    pool.release(first)
    pool.release(second)
    assert pool.cached_blocks == 4 and pool.allocated_tokens == 0
    pool.check([])
    # pressure: the whole pool for one request evicts the unreferenced cached blocks
    big = req(3, prompt=256)
    assert pool.acquire(big, 256)
    assert pool.cached_blocks == 0 and pool.free_blocks == 0
    pool.check([big])


def test_hits_are_not_evicted_for_their_own_request():
    pool = KVPool(PagedKV(block_size_tokens=16, prefix_cache=True, watermark_fraction=0), 96, 0)
    first = req(0, prompt=80, prefix_id=1, prefix=64)
    assert pool.acquire(first, 80)
    first.computed = 80
    pool.publish(first)
    pool.release(first)  # 4 cached blocks, unreferenced; 2 free
    again = req(1, prompt=96, prefix_id=1, prefix=64)
    assert pool.acquire(again, 96)  # 4 hits + 2 new: fits only if the hits are kept
    assert again.shared_blocks == 4 and again.private_blocks == 2
    too_big = req(2, prompt=96, prefix_id=2, prefix=0)
    assert not pool.acquire(too_big, 96)
    pool.check([again])
