"""The roofline engine: bounds, monotonicity, dtypes and calibration, per operator."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infersim.arch_models import Chip, load_chip
from infersim.errors import InfersimError, UnsupportedDtypeError
from infersim.simulator.engines.roofline import cost
from infersim.workloads import Attention, Collective, Conv2d, Elementwise, Gemm, Norm

PRESETS = ["h100-sxm", "a100-sxm-80gb", "tpu-v4", "edge-npu", "b200"]


@st.composite
def chips(draw) -> Chip:
    base = load_chip(draw(st.sampled_from(PRESETS)))
    return base.with_(**{
        "cores": draw(st.integers(1, 256)),
        "freq_hz": draw(st.floats(1e8, 3e9)),
        "array.rows": draw(st.integers(1, 256)),
        "array.cols": draw(st.integers(1, 256)),
        "dram.bandwidth_bytes_per_s": draw(st.floats(1e9, 1e13)),
        "vector.lanes": draw(st.integers(1, 512)),
    })


dims = st.integers(1, 8192)
ops = st.one_of(
    st.builds(Gemm, m=dims, k=dims, n=dims, a_dtype=st.just("bf16"),
              b_dtype=st.sampled_from(["bf16", "int8", "int4"])),
    st.builds(Attention, q_len=dims, kv_len=st.integers(8192, 16384), heads=st.integers(1, 64),
              kv_heads=st.just(1), head_dim=st.sampled_from([64, 128]), fused=st.booleans()),
    st.builds(Conv2d, in_channels=st.integers(1, 64), in_h=st.integers(8, 64),
              in_w=st.integers(8, 64), out_channels=st.integers(1, 64),
              kernel_h=st.integers(1, 5), kernel_w=st.integers(1, 5)),
    st.builds(Elementwise, elements=dims, inputs=st.integers(0, 3)),
    st.builds(Norm, rows=dims, cols=dims),
)


@given(chip=chips(), op=ops)
def test_time_is_at_least_both_roofline_bounds(chip, op):
    c = cost(op, chip)
    compute_bound = op.array_flops / chip.peak_flops(op.compute_dtype) if op.array_flops else 0
    assert c.time_s >= compute_bound * (1 - 1e-12)
    assert c.time_s >= op.compulsory_bytes / chip.peak_bandwidth_bytes_per_s * (1 - 1e-12)
    lane_flops = op.vector_flops
    if isinstance(op, Attention) and chip.vector.special_ops_per_cycle is not None:
        lane_flops -= op.exponentials  # they run on the special-function units
        sfu_per_s = chip.vector.special_ops_per_cycle * chip.cores * chip.freq_hz
        assert c.time_s >= op.exponentials / sfu_per_s * (1 - 1e-12)
    assert c.time_s >= lane_flops / chip.vector_flops * (1 - 1e-12)
    assert c.dram_bytes >= op.compulsory_bytes


@given(chip=chips(), op=ops, factor=st.floats(1.0, 10.0))
def test_more_bandwidth_is_never_slower(chip, op, factor):
    faster = chip.with_(**{"dram.bandwidth_bytes_per_s": chip.dram.bandwidth_bytes_per_s * factor})
    assert cost(op, faster).time_s <= cost(op, chip).time_s


@given(chip=chips(), op=ops, field=st.sampled_from(["cores", "array.rows", "array.cols"]),
       extra=st.integers(0, 64))
def test_more_compute_is_never_slower(chip, op, field, extra):
    node = chip
    for part in field.split("."):
        node = getattr(node, part)
    bigger = chip.with_(**{field: node + extra})
    assert cost(op, bigger).time_s <= cost(op, chip).time_s


@given(chip=chips(), op=ops, factor=st.floats(1.0, 4.0))
def test_higher_clock_is_never_slower(chip, op, factor):
    assert cost(op, chip.with_(freq_hz=chip.freq_hz * factor)).time_s <= cost(op, chip).time_s


def test_bound_is_named():
    h100 = load_chip("h100-sxm")
    assert cost(Gemm(m=1, k=8192, n=8192), h100).bound == "memory"
    assert cost(Gemm(m=8192, k=8192, n=8192), h100).bound == "compute"
    assert cost(Norm(rows=4096, cols=4096), h100).bound in {"memory", "vector"}


def test_big_gemm_runs_at_peak_and_gemv_at_bandwidth():
    h100 = load_chip("h100-sxm").with_(launch=None)  # the kernels' own time
    big = cost(Gemm(m=8192, k=8192, n=8192), h100)
    assert big.time_s == pytest.approx(2 * 8192**3 / 989.4e12, rel=0.01)
    gemv = Gemm(m=1, k=8192, n=8192)
    assert cost(gemv, h100).time_s == pytest.approx(gemv.compulsory_bytes / 3.35e12, rel=1e-9)


def test_unsupported_dtype_raises():
    with pytest.raises(UnsupportedDtypeError, match="a100-sxm-80gb.*fp8"):
        cost(Gemm(m=64, k=64, n=64, a_dtype="fp8", b_dtype="fp8"), load_chip("a100-sxm-80gb"))


def test_calibration_scales_time():
    h100 = load_chip("h100-sxm").with_(launch=None)  # the kernels' own time
    gemv = Gemm(m=1, k=8192, n=8192)
    slow = h100.with_(**{"calibration.dram_bandwidth_efficiency": 0.5,
                         "calibration.kernel_overhead_s": 2e-6})
    assert cost(gemv, slow).time_s == pytest.approx(2 * cost(gemv, h100).time_s + 2e-6)


def test_collective_uses_the_link():
    h100 = load_chip("h100-sxm").with_(launch=None)  # the kernels' own time
    ar = Collective(collective="all-reduce", payload_bytes=64e6, participants=8)
    c = cost(ar, h100)
    assert c.bound == "link"
    # 64 MB is past the tree/ring crossover: the ring's 14 steps of 4.18 us plus its 2(8-1)/8
    # bytes per payload byte at the achievable bus bandwidth, 0.822 x 450 GB/s
    assert c.time_s == pytest.approx(14 * 4.18e-6 + 2 * 7 / 8 * 64e6 / (0.822 * 450e9))
    with pytest.raises(InfersimError, match="no chip_link"):
        cost(ar, load_chip("eyeriss-v1"))


def test_flash_attention_rereads_kv_only_when_shared_sram_cannot_serve_them():
    from infersim.simulator.engines.roofline import flash_attention_bytes

    attn = Attention(q_len=8192, kv_len=8192, heads=32, kv_heads=8, head_dim=128)
    h100 = load_chip("h100-sxm")
    assert flash_attention_bytes(attn, h100) == attn.compulsory_bytes  # L2 holds K/V per head
    edge = load_chip("edge-npu")  # 2 MiB scratchpad, no shared SRAM: every CTA loads from DRAM
    rows = -(-edge.sram.capacity_bytes // 2 // (4 * 128))
    assert rows == 2048
    # the kernel packs the 4 query heads of each KV head into blocks of 2048 / 4 = 512
    # positions (fewest keys loaded); causal block j = 1..16 loads keys up to 512 j
    keys = 512 * sum(range(1, 17))
    kv_dram = 8 * keys * 256 * 2  # 8 KV heads, 128 + 128 bf16 elements per key
    assert flash_attention_bytes(attn, edge) == attn.compulsory_bytes - attn.kv_bytes + kv_dram
    naive = attn.model_copy(update={"fused": False})
    assert flash_attention_bytes(attn, edge) < naive.compulsory_bytes
    assert cost(attn, edge).dram_bytes == flash_attention_bytes(attn, edge)
