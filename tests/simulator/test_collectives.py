"""Collectives over the chip-to-chip link: the best of ring and double-binary-tree algorithms,
each steps x per-step latency + bytes on the busiest link / achievable bus bandwidth.

Hand-computed against the h100-sxm preset's chip link: 450 GB/s per direction, achievable bus
bandwidth 0.822 of it (ring busbw ~370 GB/s, github.com/NVIDIA/nccl-tests/issues/212) and 4.18 us
per step (nccl-tests all_reduce_perf on Azure ND H100 v5, busbw 0.53 GB/s at 8 KB -> 27.0 us
over the tree's 6 steps, of which 1.9 us is the kernel's launch; github.com/Azure/
AI-benchmarking-guide, "Azure Results/ND_H100_v5_results.md"). A collective is a kernel: its
cost adds the chip's launch overhead (``chip.kernel_overhead_s``)."""

from itertools import pairwise

import pytest

from infersim import simulate
from infersim.arch_models import load_chip
from infersim.simulator.engines.roofline import collective_s, collective_times_s, cost
from infersim.workloads import Scenario, load_model
from infersim.workloads.graph import GraphOptions, decode_step
from infersim.workloads.ops import Collective

H100 = load_chip("h100-sxm")
LATENCY_S = 4.18e-6
LAUNCH_S = H100.kernel_overhead_s
BUS_BYTES_PER_S = 0.822 * 450e9
L70 = load_model("llama-3-70b")


def all_reduce(payload_bytes: float, chips: int = 8) -> Collective:
    return Collective(collective="all-reduce", payload_bytes=payload_bytes, participants=chips)


def test_preset_carries_the_measured_link():
    link = H100.chip_link
    assert link is not None
    assert link.latency_s == LATENCY_S
    assert link.bandwidth_bytes_per_s * link.bus_bandwidth_efficiency == BUS_BYTES_PER_S


def test_algorithms_steps_and_bytes():
    ar = all_reduce(1e6)
    assert ar.algorithms == {"ring": (14, pytest.approx(1.75e6)), "tree": (6, 2e6)}
    assert ar.link_bytes == pytest.approx(1.75e6)  # the bandwidth-optimal algorithm's
    assert all_reduce(1e6, chips=2).algorithms == {"ring": (2, 1e6), "tree": (2, 1e6)}
    assert all_reduce(1e6, chips=5).algorithms["tree"] == (6, 2e6)  # depth ceil(log2 5) = 3
    gather = Collective(collective="all-gather", payload_bytes=1e6, participants=8)
    assert gather.algorithms == {"ring": (7, pytest.approx(0.875e6))}
    send = Collective(collective="send-recv", payload_bytes=1e6)
    assert send.algorithms == {"direct": (1, 1e6)}


def test_small_all_reduce_is_latency_bound():
    ar = all_reduce(16e3)
    times = collective_times_s(ar, H100)
    assert min(times, key=times.__getitem__) == "tree"
    c = cost(ar, H100)
    assert c.bound == "link"
    # 6 steps x 4.18 us + the 1.9 us launch = 27 us; the bytes add 2 x 16 kB / 370 GB/s = 0.09 us
    assert c.time_s == pytest.approx(27e-6, rel=0.01)
    assert c.time_s == pytest.approx(6 * LATENCY_S + 2 * 16e3 / BUS_BYTES_PER_S + LAUNCH_S)


def test_large_all_reduce_is_bandwidth_bound():
    ar = all_reduce(256e6)
    times = collective_times_s(ar, H100)
    assert min(times, key=times.__getitem__) == "ring"
    bytes_s = 2 * 7 / 8 * 256e6 / BUS_BYTES_PER_S  # 1.211 ms; the 14 steps add 63 us
    assert cost(ar, H100).time_s == pytest.approx(bytes_s, rel=0.06)
    assert cost(ar, H100).time_s == pytest.approx(bytes_s + 14 * LATENCY_S + LAUNCH_S)


def test_tree_wins_small_messages_and_ring_large_ones():
    # ring - tree = (14 - 6) x latency - (2 - 1.75) x bytes / bus bandwidth: zero at 49.5 MB
    crossover = (14 - 6) * LATENCY_S * BUS_BYTES_PER_S / (2 - 1.75)
    assert crossover == pytest.approx(49.5e6, rel=1e-3)
    for size in (1e3, 64e3, 1e6, 16e6, 0.99 * crossover):
        times = collective_times_s(all_reduce(size), H100)
        assert times["tree"] < times["ring"], size
    for size in (1.01 * crossover, 256e6, 4e9):
        times = collective_times_s(all_reduce(size), H100)
        assert times["ring"] <= times["tree"], size


@pytest.mark.parametrize("kind", ["all-reduce", "all-gather", "reduce-scatter", "all-to-all"])
def test_time_is_monotone_in_size_and_participants(kind):
    sizes = [2.0**k for k in range(10, 34)]
    for chips in (2, 3, 4, 8):
        times = [collective_s(Collective(collective=kind, payload_bytes=s, participants=chips),
                              H100) for s in sizes]
        assert all(a < b for a, b in pairwise(times)), (kind, chips)
    for size in (16e3, 1e6, 256e6):
        times = [collective_s(Collective(collective=kind, payload_bytes=size, participants=p),
                              H100) for p in range(2, 65)]
        assert all(a <= b for a, b in pairwise(times)), (kind, size)
        assert times[-1] > times[0]


def test_achievable_bus_bandwidth_and_calibration_both_scale_the_bytes():
    ar = all_reduce(4e9)
    base = collective_times_s(ar, H100)["ring"]
    ideal = H100.with_(**{"chip_link.bus_bandwidth_efficiency": 1.0})
    calibrated = H100.with_(**{"calibration.link_efficiency": 0.5})
    bytes_s = 2 * 7 / 8 * 4e9 / BUS_BYTES_PER_S
    assert collective_times_s(ar, ideal)["ring"] == pytest.approx(
        14 * LATENCY_S + bytes_s * 0.822)
    assert collective_times_s(ar, calibrated)["ring"] == pytest.approx(
        14 * LATENCY_S + bytes_s * 2)
    assert base == pytest.approx(14 * LATENCY_S + bytes_s)


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_decode_under_tp_does_two_all_reduces_per_layer(tp):
    ops = decode_step(L70, 1, 1024, options=GraphOptions(tp=tp))
    reduces = [op for op in ops if isinstance(op, Collective) and op.collective == "all-reduce"]
    assert sum(op.count for op in reduces) == 2 * L70.num_hidden_layers
    assert {op.name for op in reduces} == {"attn.all_reduce", "mlp.all_reduce"}
    assert {op.payload_bytes for op in reduces} == {L70.hidden_size * 2}  # one bf16 token
    assert all(op.participants == tp for op in reduces)
    no_tp = decode_step(L70, 1, 1024)
    assert not [op for op in no_tp if isinstance(op, Collective)]


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_decode_tpot_grows_with_the_collective_latency(tp):
    def tpot(latency_s: float) -> float:
        chip = H100.with_(**{"chip_link.latency_s": latency_s})
        return simulate(chip, L70, Scenario(phase="decode", batch=1, context_len=1024),
                        techniques=f"bf16+tp={tp}", engine="roofline").tpot_s or 0.0

    times = [tpot(lat) for lat in (1e-6, 2e-6, 4.5e-6, 10e-6)]
    assert all(a < b for a, b in pairwise(times))
    # every collective of a batch-1 step is latency-bound: 2 x 80 tree all-reduces of
    # 2 log2(tp) steps and the lm_head all-gather's tp - 1 ring steps
    steps = 2 * L70.num_hidden_layers * 2 * (tp - 1).bit_length() + (tp - 1)
    assert times[-1] - times[0] == pytest.approx(steps * 9e-6, rel=1e-6)


def test_pipeline_send_recv_of_activations():
    cost_pp = simulate(H100, L70, Scenario(phase="decode", batch=8, context_len=1024),
                       techniques="bf16+pp=2:mb=2", engine="roofline")
    hop = next(c for c in cost_pp.ops if c.name == "pipeline.send")
    payload = 4 * L70.hidden_size * 2  # a micro-batch of 4 tokens' bf16 hidden states
    assert hop.count == 2 and hop.link_bytes == payload
    assert hop.time_s == pytest.approx(LATENCY_S + payload / BUS_BYTES_PER_S + LAUNCH_S)


def test_the_link_latency_knob_scales_every_step():
    ar = all_reduce(16e3)
    slow = H100.with_(**{"calibration.link_latency_factor": 2.0})
    assert collective_times_s(ar, slow)["tree"] - collective_times_s(ar, H100)["tree"] == (
        pytest.approx(6 * LATENCY_S))
