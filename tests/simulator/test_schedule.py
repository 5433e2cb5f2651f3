"""A network on an accelerator operator after operator (the chip's schedule): activations kept
on chip, weight loads prefetched behind the previous operator, vector work fused behind the
array; hand-computed expectations, and the two cycle-model engines agreeing on networks."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersim.arch_models.chip import Chip, Schedule
from infersim.arch_models.presets import load_chip
from infersim.dataflow import map_op
from infersim.dataflow.loopnest import problem_of, tile_operand_bytes
from infersim.simulator.inference import cost_ops
from infersim.simulator.results import OpCost
from infersim.workloads.ops import Conv2d, Elementwise, Gemm, Norm, OpBase

MB = 1 << 20


def int8_gemm(name: str, m: int, k: int, n: int) -> Gemm:
    return Gemm(name=name, m=m, k=k, n=n, a_dtype="int8", b_dtype="int8", out_dtype="int8")


def with_schedule(chip: Chip, **fields: object) -> Chip:
    base = chip.schedule.model_dump() if chip.schedule else {"activation_share": 1.0}
    return chip.model_copy(update={"schedule": Schedule(**{**base, **fields})})


def standalone(chip: Chip) -> Chip:
    return chip.model_copy(update={"schedule": None})


def total(costs: list[OpCost]) -> float:
    return sum(c.total_time_s for c in costs)


# --- activations on chip ------------------------------------------------------------------------


def test_an_intermediate_that_fits_never_touches_dram() -> None:
    chip = load_chip("tpu-v1")  # a 24 MiB unified buffer holds the activations
    g1, g2 = int8_gemm("g1", 256, 2048, 2048), int8_gemm("g2", 256, 2048, 2048)
    alone = cost_ops([g1, g2], standalone(chip), "analytic")
    chained = cost_ops([g1, g2], chip, "analytic")
    mid = 256 * 2048  # the intermediate, int8
    # g1 does not store it, g2 does not load it: each moves exactly that much less
    assert chained[0].dram_bytes == pytest.approx(alone[0].dram_bytes - mid)
    assert chained[1].dram_bytes == pytest.approx(alone[1].dram_bytes - mid)
    assert chained[0].onchip_bytes == chained[1].onchip_bytes == mid
    # what is left is g1's input, the weights and g2's output: the chain's compulsory bytes
    assert sum(c.dram_bytes for c in chained) == pytest.approx(2 * mid + 2 * 2048 * 2048)
    assert total(chained) < total(alone)


def test_an_intermediate_that_does_not_fit_round_trips_dram() -> None:
    chip = load_chip("tpu-v1")
    mid = 256 * 2048
    # a buffer a byte short of the intermediate: it spills, the traffic is the standalone one
    tight = with_schedule(chip, activation_share=(mid - 1) / chip.sram.capacity_bytes)
    ops = [int8_gemm("g1", 256, 2048, 2048), int8_gemm("g2", 256, 2048, 2048)]
    assert tight.activation_buffer_bytes == pytest.approx(mid - 1)
    spilled = cost_ops(ops, tight, "analytic")
    alone = cost_ops(ops, standalone(chip), "analytic")
    assert [c.dram_bytes for c in spilled] == [c.dram_bytes for c in alone]
    assert all(c.onchip_bytes == 0 for c in spilled)


def test_the_output_stays_only_beside_a_resident_input_that_still_fits() -> None:
    # g2's input (2 MiB) is resident; its output (2 MiB) fits beside it only in 4 MiB
    chip = load_chip("tpu-v1")
    ops = [int8_gemm("g1", 1024, 2048, 2048), int8_gemm("g2", 1024, 2048, 2048),
           int8_gemm("g3", 1024, 2048, 2048)]  # fmt: skip
    act = 1024 * 2048
    roomy = with_schedule(chip, activation_share=2 * act / chip.sram.capacity_bytes)
    small = with_schedule(chip, activation_share=(2 * act - 1) / chip.sram.capacity_bytes)
    assert [c.onchip_bytes for c in cost_ops(ops, roomy, "analytic")] == [act, 2 * act, act]
    # in the smaller buffer g2's output cannot join its input: g3 reads from DRAM
    assert [c.onchip_bytes for c in cost_ops(ops, small, "analytic")] == [act, act, 0]


# --- weight prefetch ----------------------------------------------------------------------------


def _prefetch_case() -> tuple[Chip, list[OpBase]]:
    # g1 is compute-bound (a long stream of rows against few weights): the DRAM idles while it
    # computes; g2's first weight tile can load then
    chip = with_schedule(load_chip("tpu-v1").with_(**{"dram.bandwidth_bytes_per_s": 400e9}))
    return chip, [int8_gemm("g1", 8192, 256, 256), int8_gemm("g2", 8192, 256, 2048)]


def test_the_next_weights_load_behind_the_compute_when_the_chip_prefetches() -> None:
    chip, ops = _prefetch_case()
    on = cost_ops(ops, with_schedule(chip, prefetch_weights=True), "analytic")
    off = cost_ops(ops, with_schedule(chip, prefetch_weights=False), "analytic")
    assert on[0] == off[0]  # nothing runs before g1
    g1_idle = off[0].time_s - off[0].memory_s
    mapping = map_op(ops[1], chip)
    prob = problem_of(ops[1])
    t_in = tile_operand_bytes(prob, "input", mapping.sram_tile)
    t_w = tile_operand_bytes(prob, "weight", mapping.sram_tile)
    weight_first_s = mapping.first_load_cycles * t_w / (t_in + t_w) / chip.freq_hz
    assert 0 < weight_first_s < g1_idle  # all of it fits in g1's idle DRAM time
    # g2's input is resident, so its exposed first load was the weights' alone: now nothing
    assert off[1].time_s - on[1].time_s == pytest.approx(weight_first_s, rel=1e-6)


def test_without_prefetch_the_first_weight_load_is_exposed() -> None:
    chip, ops = _prefetch_case()
    off = cost_ops(ops, with_schedule(chip, prefetch_weights=False), "analytic")
    mapping = map_op(ops[1], chip)
    busy = mapping.compute_cycles / chip.freq_hz
    assert off[1].time_s > busy  # the load shows before the compute starts


# --- vector work behind the array ---------------------------------------------------------------


def test_vector_work_behind_the_array_costs_only_what_exceeds_its_compute() -> None:
    chip = load_chip("tpu-v1")
    gemm = int8_gemm("g", 512, 2048, 2048)
    relu = Elementwise(name="relu", elements=512 * 2048, dtype="int8")
    heavy = Elementwise(name="heavy", elements=512 * 2048, dtype="int8", flops_per_element=400)
    vec = chip.vector_flops * chip.calibration.vector_efficiency
    fused = cost_ops([gemm, relu, heavy, gemm], chip, "analytic")
    array_s = fused[0].compute_s
    assert fused[1].time_s == 0.0 and fused[1].dram_bytes == 0  # hidden, and on chip
    # the second one overlaps what is left of the array's compute, and no kernel overhead
    left = array_s - relu.vector_flops / vec
    assert fused[2].time_s == pytest.approx(heavy.vector_flops / vec - left)
    unfused = cost_ops([gemm, relu, heavy, gemm], with_schedule(chip, fuse_vector=False),
                       "analytic")  # fmt: skip
    assert unfused[1].time_s == pytest.approx(relu.vector_flops / vec
                                              + chip.calibration.kernel_overhead_s)  # fmt: skip


def test_a_standalone_chip_costs_each_op_alone_and_the_roofline_ignores_schedules() -> None:
    chip = load_chip("tpu-v1")
    ops = [int8_gemm("g1", 256, 2048, 2048), int8_gemm("g2", 256, 2048, 2048)]
    assert cost_ops(ops, chip, "roofline") == cost_ops(ops, standalone(chip), "roofline")
    alone = cost_ops(ops, standalone(chip), "analytic")
    assert all(c.onchip_bytes == 0 for c in alone)


# --- properties and engine agreement -----------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    dims=st.lists(st.tuples(st.integers(1, 2048), st.integers(16, 4096)), min_size=1,
                  max_size=4),
    share=st.floats(0.0, 1.0),
    prefetch=st.booleans(),
    fuse=st.booleans(),
)
def test_a_schedule_never_slows_a_chain_or_hides_weights(
    dims: list[tuple[int, int]], share: float, prefetch: bool, fuse: bool
) -> None:
    chip = with_schedule(load_chip("tpu-v1"), activation_share=share,
                         prefetch_weights=prefetch, fuse_vector=fuse)  # fmt: skip
    m = dims[0][0]
    ops: list[OpBase] = []
    k = dims[0][1]
    for i, (_, n) in enumerate(dims):
        ops.append(int8_gemm(f"g{i}", m, k, n))
        ops.append(Elementwise(name=f"act{i}", elements=m * n, dtype="int8"))
        k = n
    scheduled = cost_ops(ops, chip, "analytic")
    alone = cost_ops(ops, standalone(chip), "analytic")
    assert total(scheduled) <= total(alone) * (1 + 1e-9)
    weights = sum(op.weight_bytes for op in ops)
    assert sum(c.dram_bytes for c in scheduled) >= weights * (1 - 1e-9)
    for s, a in zip(scheduled, alone, strict=True):
        assert s.dram_bytes + s.onchip_bytes == pytest.approx(a.dram_bytes, rel=1e-9)


def _lstm_stack(batch: int, hidden: int, layers: int) -> list[OpBase]:
    """An LSTM-like stack: per layer the four gates' GEMM, the gates' elementwise work and the
    cell update (the TPU v1 paper's LSTM class of application, shapes ours)."""
    ops: list[OpBase] = []
    for i in range(layers):
        ops.append(int8_gemm(f"gates{i}", batch, 2 * hidden, 4 * hidden))
        ops.append(Elementwise(name=f"sigm{i}", elements=batch * 4 * hidden, dtype="int8",
                               flops_per_element=4))  # fmt: skip
        ops.append(Elementwise(name=f"cell{i}", elements=batch * hidden, inputs=3, dtype="int8",
                               flops_per_element=5))  # fmt: skip
    return ops


def _conv_net(batch: int) -> list[OpBase]:
    def conv(name: str, c: int, hw: int, k: int, r: int, stride: int, pad: int) -> Conv2d:
        return Conv2d(name=name, batch=batch, in_channels=c, in_h=hw, in_w=hw, out_channels=k,
                      kernel_h=r, kernel_w=r, stride=stride, padding=pad, dtype="int8",
                      weight_dtype="int8", out_dtype="int8")  # fmt: skip

    return [
        conv("conv1", 3, 112, 64, 7, 2, 3),
        Elementwise(name="relu1", elements=batch * 64 * 56 * 56, dtype="int8"),
        conv("conv2", 64, 56, 128, 3, 2, 1),
        Norm(name="bn2", rows=batch * 28 * 28, cols=128, dtype="int8"),
        conv("conv3", 128, 28, 256, 3, 1, 1),
        conv("conv4", 256, 28, 256, 3, 2, 1),
        int8_gemm("fc", batch, 256 * 14 * 14, 1000),
    ]


NETWORKS = {
    "mlp": lambda: [int8_gemm("fc1", 200, 1024, 4096), int8_gemm("fc2", 200, 4096, 4096),
                    int8_gemm("fc3", 200, 4096, 1024)],
    "lstm": lambda: _lstm_stack(32, 1024, 3),
    "cnn": lambda: _conv_net(8),
}


@pytest.mark.parametrize("chip_name", ["tpu-v1", "edge-npu"])
@pytest.mark.parametrize("network", list(NETWORKS))
def test_the_engines_agree_on_scheduled_networks(chip_name: str, network: str) -> None:
    chip = load_chip(chip_name)
    ops = NETWORKS[network]()
    analytic = cost_ops(ops, chip, "analytic")
    events = cost_ops(ops, chip, "events")
    a, e = total(analytic), total(events)
    assert math.isclose(e, a, rel_tol=0.03), f"{network} on {chip_name}: {e:.4g} vs {a:.4g} s"
    assert [c.dram_bytes for c in events] == pytest.approx([c.dram_bytes for c in analytic])
    assert sum(c.onchip_bytes for c in analytic) > 0  # the schedule took effect


def test_a_port_capped_schedule_never_reports_negative_memory_time() -> None:
    """A core port slower than the DRAM (fuzz case: edge-npu at 0.44 B/cycle per core) makes
    the first load the slower one: what the schedule hides never exceeds what moves."""
    from infersim import simulate
    from infersim.workloads import Precision, Scenario, load_model

    chip = load_chip("edge-npu").with_(**{"sram.fill_bytes_per_cycle": 0.44})
    scenario = Scenario(phase="decode", batch=3, context_len=64,
                        precision=Precision(weights="fp8_e4m3", act="bf16"))
    cost = simulate(chip, load_model("deepseek-v2-lite"), scenario, engine="analytic")
    assert all(c.memory_s >= 0 and c.time_s >= 0 for c in cost.ops)
