"""Fused attention on a GPU: K/V traffic that follows the causal mask and the K/V sets live in
L2 at once, and softmax exponentials on the special-function units (issue 15, point 3).

"K/V loaded" below is ``FlashTraffic.kv_load_bytes``: the key and value bytes all CTAs of the
kernel load into their SM's shared memory, summed over CTAs (from L2 or DRAM). "K/V DRAM" is
the DRAM traffic less the queries and outputs, which every kernel moves once.
"""

from __future__ import annotations

import math
from itertools import pairwise

import pytest

from infersim import dtypes, load_chip
from infersim.simulator.engines import roofline
from infersim.simulator.engines.roofline import (
    attention_vector_s,
    flash_attention_traffic,
    flash_block_rows,
)
from infersim.workloads.ops import Attention

GPUS = ["a100-sxm-80gb", "h100-sxm", "h200", "b200"]
LLAMA_70B = {"heads": 64, "kv_heads": 8, "head_dim": 128}  # attention of llama-3-70b
H100_BR = 228  # ceil(233472 B / 2 B / (4 x 128)): bf16 query rows (and key columns) per block
H100_SFU_PER_S = 16 * 132 * 1.83e9  # exp2 results per clock per SM x SMs x clock


def _self(n: int, **fields: object) -> Attention:
    """Self-attention of an n-token prompt (queries = keys), llama-3-70b shape by default."""
    return Attention(**{"q_len": n, "kv_len": n, **LLAMA_70B, **fields})  # type: ignore[arg-type]


def _kv_dram(op: Attention, chip_name: str) -> float:
    dram = flash_attention_traffic(op, load_chip(chip_name)).dram_bytes
    return dram - (op.compulsory_bytes - op.kv_bytes)


def _old_flash_attention_bytes(op: Attention, chip_name: str) -> float:
    """The rule this replaces: K/V re-read per query block over the whole kv_len unless
    ``min(cores, batch x kv_heads)`` per-head K/V sets fit L2 (kept here to show its cliff)."""
    chip = load_chip(chip_name)
    rows = max(1, math.ceil(chip.sram.capacity_bytes / dtypes.nbytes(op.dtype)
                            / (4 * op.head_dim)))
    passes = math.ceil(op.q_len / rows)
    if passes == 1:
        return op.compulsory_bytes
    live = op.kv_bytes / (op.batch * op.kv_heads) * min(chip.cores, op.batch * op.kv_heads)
    if chip.shared_sram is not None and live <= chip.shared_sram.capacity_bytes:
        return op.compulsory_bytes
    return op.compulsory_bytes + op.kv_bytes * (passes - 1)


# --- which keys a query block attends -----------------------------------------------------


def _brute_block_keys(op: Attention, rows: int) -> tuple[int, int]:
    keys = pairs = 0
    for start in range(0, op.q_len, rows):
        block = range(start, min(start + rows, op.q_len))
        spans = []
        for i in block:
            newest = op.kv_len - op.q_len + i  # the position of query i's own key
            if not op.causal:
                spans.append((0, op.kv_len - 1))
            else:
                first = 0 if op.window is None else max(0, newest - op.window + 1)
                spans.append((first, newest))
        width = max(s[1] for s in spans) - min(s[0] for s in spans) + 1
        keys += width
        pairs += len(block) * width
    return keys, pairs


@pytest.mark.parametrize(("causal", "window"),
                         [(False, None), (True, None), (True, 1), (True, 3), (True, 5), (True, 40)])
def test_block_keys_equal_the_keys_each_block_attends(causal, window):
    for q_len in (1, 2, 7, 12, 30):
        for kv_len in (q_len, q_len + 1, q_len + 9, 64):
            for rows in (1, 2, 3, 5, 8, 31, 64):
                op = Attention(q_len=q_len, kv_len=kv_len, heads=1, kv_heads=1, head_dim=8,
                               causal=causal, window=window)
                assert op.block_keys(rows) == _brute_block_keys(op, rows), (q_len, kv_len, rows)
                if rows >= q_len:
                    assert op.block_keys(rows)[0] == op.keys_read


def test_block_keys_by_hand():
    op = Attention(q_len=8, kv_len=8, heads=1, kv_heads=1, head_dim=8)
    assert op.block_keys(3) == (3 + 6 + 8, 3 * 3 + 3 * 6 + 2 * 8)  # blocks end at keys 3, 6, 8
    assert op.model_copy(update={"causal": False}).block_keys(3) == (3 * 8, 8 * 8)
    windowed = op.model_copy(update={"window": 4})
    assert windowed.block_keys(3) == (3 + 6 + 5, 3 * 3 + 3 * 6 + 2 * 5)  # keys 3-7 for 6-7
    with pytest.raises(ValueError, match="rows"):
        op.block_keys(0)


# --- 1. the causal mask halves the K/V loaded, and the time -------------------------------


def test_causal_prefill_loads_half_the_kv_and_takes_half_the_time():
    h100 = load_chip("h100-sxm").with_(launch=None)  # the kernel's own time
    causal, full = _self(8192), _self(8192, causal=False)
    assert flash_block_rows(full, h100) == H100_BR
    # non-causal: 64 heads x ceil(8192 / 228) = 36 blocks, each loads all 8192 keys of
    # 128 + 128 bf16 elements
    kv_full = flash_attention_traffic(full, h100).kv_load_bytes
    assert kv_full == 64 * 36 * 8192 * 256 * 2
    kv_causal = flash_attention_traffic(causal, h100).kv_load_bytes
    assert kv_causal / kv_full == pytest.approx(0.5, rel=0.10)
    assert roofline.cost(causal, h100).time_s / roofline.cost(full, h100).time_s == (
        pytest.approx(0.5, rel=0.15))
    # both read K and V from DRAM once: L2 serves the re-reads
    for op in (causal, full):
        assert flash_attention_traffic(op, h100).dram_bytes == op.compulsory_bytes


def test_a_sliding_window_loads_only_the_window():
    h100 = load_chip("h100-sxm").with_(launch=None)  # the kernel's own time
    full = flash_attention_traffic(_self(32768), h100).kv_load_bytes
    windowed = flash_attention_traffic(_self(32768, window=4096), h100).kv_load_bytes
    # a causal block reads about half the 32k keys on average, a windowed one at most the
    # window and its own queries
    assert windowed < full * (4096 + H100_BR) / 16384


# --- 2. no cliff: the K/V live at once, not one set per core ------------------------------

LENGTHS = [256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384]
CLIFF_CASES = [
    pytest.param({"batch": 32}, id="gqa-batch32"),
    pytest.param({"batch": 8, "heads": 32, "kv_heads": 32}, id="mha-batch8"),
]


def _steps_within_the_token_growth(traffic: list[float]) -> bool:
    """K/V traffic of n-token self-attention grows at most as n^2 (K/V ∝ n, read once per
    query block, blocks ∝ n): a step from n1 to n2 tokens multiplies it by <= (n2 / n1)^2."""
    return all(
        b / a <= (n2 / n1) ** 2 * (1 + 1e-12)
        for (n1, a), (n2, b) in pairwise(zip(LENGTHS, traffic, strict=True))
    )


@pytest.mark.parametrize("fields", CLIFF_CASES)
@pytest.mark.parametrize("chip_name", GPUS)
def test_kv_dram_bytes_have_no_cliff_in_prompt_length(chip_name, fields):
    ops = [_self(n, **fields) for n in LENGTHS]
    traffic = [_kv_dram(op, chip_name) for op in ops]
    assert _steps_within_the_token_growth(traffic)
    per_token = [t / n for t, n in zip(traffic, LENGTHS, strict=True)]
    assert per_token == sorted(per_token)  # re-reads only grow with the prompt
    if chip_name == "h100-sxm":  # every K/V set live at once fits the 50 MiB L2: read once
        assert traffic == [op.kv_bytes for op in ops]


@pytest.mark.parametrize("fields", CLIFF_CASES)
def test_the_old_rule_had_the_cliff(fields):
    traffic = [_old_flash_attention_bytes(op, "h100-sxm") - (op.compulsory_bytes - op.kv_bytes)
               for op in (_self(n, **fields) for n in LENGTHS)]
    assert not _steps_within_the_token_growth(traffic)
    at = dict(zip(LENGTHS, traffic, strict=True))
    assert at[1024] / at[768] > 6  # 768 tokens: K/V once; 1024: 5 block passes


def test_ctas_running_together_share_kv_through_l2_even_when_the_sets_overflow_it():
    # a 256-token chunk over a 32k context: every CTA runs at once on the 132 SMs, but the
    # 8 KV heads' K/V (16 MiB each) are 128 MiB, more than the L2
    h100 = load_chip("h100-sxm").with_(launch=None)  # the kernel's own time
    op = Attention(q_len=256, kv_len=32768, **LLAMA_70B)
    assert h100.shared_sram is not None and op.kv_bytes > h100.shared_sram.capacity_bytes
    assert op.heads * math.ceil(op.q_len / flash_block_rows(op, h100)) <= h100.cores
    assert op.kv_bytes < _kv_dram(op, "h100-sxm") < 2 * op.kv_bytes
    assert _old_flash_attention_bytes(op, "h100-sxm") - op.compulsory_bytes == op.kv_bytes


def test_a_set_larger_than_l2_is_read_again_by_every_wave_that_needs_it():
    a100 = load_chip("a100-sxm-80gb")  # 40 MiB L2; one 131072-token K/V set is 64 MiB
    op = _self(131072)
    traffic = flash_attention_traffic(op, a100)
    kv_dram = traffic.dram_bytes - (op.compulsory_bytes - op.kv_bytes)
    assert op.kv_bytes < kv_dram <= traffic.kv_load_bytes


# --- GQA: fewer KV heads never cost more K/V traffic --------------------------------------


@pytest.mark.parametrize("chip_name", ["h100-sxm", "a100-sxm-80gb", "edge-npu", "eyeriss-v1"])
@pytest.mark.parametrize(("q_len", "kv_len"), [(1, 4096), (7, 4096), (300, 300), (4096, 4096),
                                               (256, 32768), (131072, 131072)])
def test_fewer_kv_heads_never_increase_kv_dram_bytes(chip_name, q_len, kv_len):
    for causal in (True, False):
        traffic = [
            _kv_dram(Attention(batch=4, q_len=q_len, kv_len=kv_len, heads=64, kv_heads=kv,
                               head_dim=128, causal=causal), chip_name)
            for kv in (64, 32, 16, 8, 4, 2, 1)
        ]
        assert all(b <= a * (1 + 1e-12) for a, b in pairwise(traffic)), traffic


# --- 3. exponentials on the special-function units ----------------------------------------


def test_fp8_attention_is_bound_by_the_special_function_units():
    h100 = load_chip("h100-sxm").with_(launch=None)  # the kernel's own time
    op = _self(8192, dtype="fp8", kv_dtype="fp8")
    c = roofline.cost(op, h100)
    assert c.bound == "vector"
    sfu_floor_s = op.pairs * op.heads * op.batch / H100_SFU_PER_S
    assert sfu_floor_s == pytest.approx(555.7e-6, rel=1e-4)
    assert c.time_s >= sfu_floor_s
    # the tensor cores need exactly as long (256 FP8 MACs per score, 4096 per clock per SM);
    # the online softmax's rescales, one per query row per 456-key block, tip it
    tensor_s = op.array_flops / h100.peak_flops("fp8")
    assert tensor_s == pytest.approx(sfu_floor_s, rel=1e-9)
    assert c.time_s < sfu_floor_s * (1 + 2 / 456)


def test_bf16_attention_stays_on_the_tensor_cores_with_the_sfu_at_half_their_time():
    h100 = load_chip("h100-sxm").with_(launch=None)  # the kernel's own time
    op = _self(8192)
    c = roofline.cost(op, h100)
    assert c.bound == "compute"
    assert c.time_s == op.array_flops / h100.peak_flops("bf16")
    assert attention_vector_s(op, h100) == pytest.approx(c.time_s / 2, rel=0.01)


def test_chips_without_special_function_units_count_exponentials_as_vector_flops():
    edge = load_chip("edge-npu")
    assert edge.vector.special_ops_per_cycle is None
    op = _self(2048)
    assert attention_vector_s(op, edge) == op.vector_flops / (
        edge.vector_flops * edge.calibration.vector_efficiency)


def test_the_sfu_time_scales_with_its_rate():
    h100 = load_chip("h100-sxm").with_(launch=None)  # the kernel's own time
    op = _self(8192, dtype="fp8", kv_dtype="fp8")
    double = h100.with_(**{"vector.special_ops_per_cycle": 32})
    assert attention_vector_s(op, double) == pytest.approx(attention_vector_s(op, h100) / 2)
    assert roofline.cost(op, double).bound == "compute"


# --- decode reads K/V once ----------------------------------------------------------------


@pytest.mark.parametrize("chip_name", [*GPUS, "edge-npu"])
@pytest.mark.parametrize("batch", [1, 8, 64])
@pytest.mark.parametrize("context", [100, 4096, 131072])
def test_decode_attention_reads_kv_once_and_is_memory_bound(chip_name, batch, context):
    chip = load_chip(chip_name)
    op = Attention(batch=batch, q_len=1, kv_len=context, **LLAMA_70B)
    traffic = flash_attention_traffic(op, chip)
    assert traffic.dram_bytes == op.compulsory_bytes  # K and V once
    assert traffic.kv_load_bytes == op.kv_bytes  # the GQA group shares one CTA's loads
    if context > 100:
        assert roofline.cost(op, chip).bound == "memory"
