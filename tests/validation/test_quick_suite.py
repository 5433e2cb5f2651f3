"""A quick suite that is quick: sized from a first measured speed of the host, it fits its
budget on a slow host and runs as written on a fast one. The speeds here are fake (no test
depends on this machine's speed); the wall time of the real command is a benchmark figure
(``benchmarks/quick_suite.py``)."""

from __future__ import annotations

import pytest

from infersim.validation import sizing
from infersim.validation.sizing import MARGIN, MIN_ROUNDS, HostSpeed, plan, roofline_s, shrink
from infersim.validation.suite import (
    AttentionKernel,
    ElementwiseKernel,
    GemmKernel,
    QuantGemmKernel,
    load_suite,
)

LLC = 32 * 1024**2
FLOOR = 2 * LLC
SPEEDS = {
    "fast (workstation)": HostSpeed({"fp32": 2e12, "bf16": 4e12}, 2e11, LLC),
    "this CI machine": HostSpeed({"fp32": 2e11, "bf16": 6e11}, 7e10, LLC),
    "slow (old 2-core)": HostSpeed({"fp32": 5e9, "bf16": 5e9}, 5e9, LLC),
    "very slow": HostSpeed({"fp32": 5e8}, 1e9, LLC),
}


def quick_plan(speed: HostSpeed, budget_s: float | None = None, rounds: int = 7) -> sizing.Plan:
    suite = load_suite("quick")
    return plan(
        suite.kernels,
        lambda k: MARGIN * roofline_s(k, speed),
        budget_s or suite.budget_s or 0.0,
        rounds,
        min_stream_bytes=FLOOR,
    )


def test_the_quick_suite_has_a_budget_well_under_90_s():
    assert load_suite("quick").budget_s is not None
    assert load_suite("quick").budget_s <= 60  # the rest of 90 s: start, probes, predictions
    assert load_suite("default").budget_s is None  # shapes as written


@pytest.mark.parametrize("host", SPEEDS)
def test_the_plan_fits_the_budget_on_any_host(host):
    result = quick_plan(SPEEDS[host])
    budget = load_suite("quick").budget_s
    assert result.estimated_s <= budget
    assert MIN_ROUNDS <= result.rounds <= 7
    labels = [k.label for k in result.kernels]
    assert len(labels) == len(set(labels))
    # every kind of the suite is still measured
    assert {k.kind for k in result.kernels} == {k.kind for k in load_suite("quick").kernels}


def test_a_fast_host_runs_the_suite_as_written():
    result = quick_plan(SPEEDS["fast (workstation)"])
    assert result.kernels == load_suite("quick").kernels
    assert (result.rounds, result.resized, result.dropped) == (7, [], [])


def test_a_slow_host_gets_smaller_shapes_within_their_floors():
    result = quick_plan(SPEEDS["slow (old 2-core)"])
    assert result.resized  # said, not silent
    originals = {k.label: k for k in load_suite("quick").kernels}
    for change in result.resized:
        assert change["from"] in originals and change["to"] != change["from"]
    for kernel in result.kernels:
        if isinstance(kernel, GemmKernel) and kernel.m == 1:
            assert kernel.k * kernel.n * 4 >= FLOOR  # GEMVs still stream from DRAM
        elif isinstance(kernel, QuantGemmKernel):
            assert kernel.k * kernel.n * kernel.bits / 8 >= FLOOR
        elif isinstance(kernel, GemmKernel):
            assert min(kernel.m, kernel.k, kernel.n) >= sizing.MIN_GEMM_DIM
        elif isinstance(kernel, AttentionKernel):
            assert kernel.kv_len >= sizing.MIN_ATTENTION_LEN
        elif isinstance(kernel, ElementwiseKernel):
            assert kernel.rows * kernel.cols * 4 >= FLOOR
    # shapes shrink alike: the GEMMs keep distinct shapes on a host 40x slower than this one
    gemms = [k.label for k in result.kernels if k.kind == "gemm"]
    assert len(gemms) >= 5


def test_floors_are_kept_even_when_nothing_fits():
    result = quick_plan(SPEEDS["very slow"], budget_s=1.0)
    assert result.rounds == MIN_ROUNDS
    assert result.estimated_s > 1.0  # the floors, honestly estimated
    assert all(shrink(k, FLOOR) is None for k in result.kernels)


def test_plan_counts_warmup_repeats_and_probe_rounds():
    kernel = GemmKernel(m=256, k=256, n=256, dtype="fp32")
    one = plan([kernel], lambda k: 0.5, budget_s=100, rounds=7)
    assert one.estimated_s == pytest.approx(2 * 0.5 + 7 * 0.5)
    short = plan([kernel], lambda k: 0.001, budget_s=100, rounds=7, min_round_s=0.02)
    assert short.estimated_s == pytest.approx(0.002 + 7 * 0.001 * (20 + 1))
    probes = plan([kernel], lambda k: 0.5, budget_s=100, rounds=7, fixed_round_s=1.0)
    assert probes.estimated_s == pytest.approx(one.estimated_s + 7)
    tight = plan([kernel], lambda k: 0.5, budget_s=3.0, rounds=7)
    assert tight.rounds == 4  # 1 s warm-up + 4 x 0.5 s
    with pytest.raises(ValueError, match="budget_s"):
        plan([kernel], lambda k: 0.5, budget_s=0, rounds=7)
    with pytest.raises(ValueError, match="rounds"):
        plan([kernel], lambda k: 0.5, budget_s=1, rounds=2)


def test_shrink_keeps_kernels_valid():
    quant = QuantGemmKernel(kind="w4a16", m=1, k=16384, n=32768, group_size=128)
    smaller = shrink(quant, FLOOR)
    assert isinstance(smaller, QuantGemmKernel) and smaller.n == 16384
    attention = AttentionKernel(heads=32, kv_heads=8, q_len=1, kv_len=4096, causal=True)
    decode = shrink(attention, FLOOR)
    assert isinstance(decode, AttentionKernel) and (decode.q_len, decode.kv_len) == (1, 2048)
    heads = shrink(AttentionKernel(heads=8, kv_heads=2, q_len=128, kv_len=128), FLOOR)
    assert isinstance(heads, AttentionKernel) and (heads.heads, heads.kv_heads) == (4, 1)
    assert shrink(GemmKernel(m=128, k=128, n=128), FLOOR) is None


def test_host_speed_rejects_bad_figures():
    with pytest.raises(ValueError, match="fp32"):
        HostSpeed({"bf16": 1e12}, 1e11, LLC)
    with pytest.raises(ValueError, match="dram_bytes_per_s"):
        HostSpeed({"fp32": 1e12}, 0.0, LLC)


def test_progress_steps_reach_the_total():
    """The cpu backend's progress: done never runs past the total, and the last step is done."""
    pytest.importorskip("torch")
    from infersim.validation.backends import CpuBackend

    backend = CpuBackend(threads=1, rounds=3, min_round_s=0.0)
    steps = []
    backend._round_robin([lambda: None, lambda: None], ["a", "b"], [1e-3, 1e-3], 3, steps.append)
    assert steps[0].what == "warm-up a" and steps[-1].what == "done"
    assert all(s.total is not None and s.done <= s.total for s in steps)
    assert [s.done for s in steps] == sorted(s.done for s in steps)
    assert sum("round" in s.what for s in steps) == 3 * 2


def test_the_validate_bar_takes_steps():
    from infersim.cli.validate import step_bar
    from infersim.validation.timing import Step

    with step_bar("quick suite", quiet=False) as bar:
        assert bar is not None
        bar(Step(0.0, None, "warm-up"))
        bar(Step(1.0, 4.0, "round 1/3 " + "x" * 80))
    with step_bar("quick suite", quiet=True) as quiet:
        assert quiet is None
