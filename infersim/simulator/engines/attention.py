"""Fused attention on a GPU's tensor cores: the cycle-model engines' cost of a FlashAttention
kernel on a chip whose array runs the tensor-core template (``tc``).

The kernel runs one CTA per (sequence, KV-head group, block of ``Br`` query rows), as
:func:`~infersim.simulator.engines.roofline.flash_grid` cuts it (GQA heads packed into a
block's rows where that loads fewer keys). A CTA holds its query block in shared memory and
passes over the key blocks its rows attend (:meth:`Attention.block_keys`: a causal block skips
the key blocks above the diagonal, a sliding window the ones before it). Per key block it
computes S = Q·Kᵀ and O += P·V on the tensor cores, its MMA rows padded to the array's rows and
to a warpgroup MMA's 64 (``TEMPLATES["tc"].min_tile_rows``), and the online softmax on the
SM's lanes and special-function units (the exponentials, one per score and one rescale per row
and key block); the two overlap (FlashAttention-3's ping-pong of warpgroups), so a CTA takes
the larger of its MMA and its softmax cycles. K/V stored in another format than the queries
are dequantized on the lanes as they are loaded.

Decode (and any grid with fewer CTAs than SMs) may split each CTA's keys over several CTAs
(split-KV, as flash-decoding and FlashInfer do), at most until every SM has one and at least one
key block per split; the partial outputs (fp32, with their log-sum-exp) meet through the L2 in a
combine kernel, which pays the per-kernel overhead again (:func:`kernels`). The kernel takes the
split that costs the least time, that launch included (:func:`split_options`), as
FlashAttention's split heuristic aims to.

CTAs are dealt to the SMs: equal CTAs in ceil-waves; a causal grid's unequal CTAs longest first
(FlashAttention-2/3 schedule the heavy blocks first), taking at least the longest CTA and at
least the total work over the SMs. The K/V loads come through the L2 (every CTA loads the keys
it attends; :func:`~infersim.simulator.engines.roofline.flash_attention_traffic` counts them and
the DRAM bytes behind them). Time = the largest of the SMs' work (over
``calibration.attention_efficiency``), the L2 feed and the DRAM traffic, plus one DRAM latency
and the launch overhead of each kernel. Unfused attention, and chips without tensor cores, stay
on the roofline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from infersim import dtypes
from infersim.arch_models.chip import Chip
from infersim.dataflow.templates import TEMPLATES
from infersim.simulator.engines import roofline
from infersim.simulator.results import Bound, OpCost
from infersim.workloads.ops import DEQUANT_FLOPS_PER_ELEMENT, SOFTMAX_FLOPS_PER_ELEMENT, Attention

PARTIAL_BYTES = 4
"""Bytes per element of a split's partial output and log-sum-exp (fp32)."""


def on_tensor_cores(op: object, chip: Chip) -> bool:
    """Whether ``op`` is a fused attention this module costs on ``chip`` (an array that lists
    the tensor-core template)."""
    listed = chip.array.supported_dataflows
    return isinstance(op, Attention) and op.fused and listed is not None and "tc" in listed


@dataclass(frozen=True)
class Grid:
    """The kernel's CTAs and what one of them does."""

    ctas: int
    """CTAs of the kernel (splits included)."""
    rows: int
    """Query rows one CTA computes (its heads x positions; before padding)."""
    mma_rows: int
    """Those rows padded to the array and to a warpgroup MMA."""
    block: int
    """Keys per key block (Bc = Br)."""
    keys_mean: float
    """Keys one CTA attends, on average."""
    keys_max: float
    """Keys the longest CTA attends."""
    splits: int
    """CTAs each (sequence, head group, query block) is split into over its keys."""


def grid(
    op: Attention, chip: Chip, splits: int = 1, flash: roofline.FlashGrid | None = None
) -> Grid:
    """The :class:`Grid` of ``op``'s kernel on ``chip`` with each CTA's keys cut into
    ``splits`` (at most one split per key block); ``flash``: its
    :func:`~infersim.simulator.engines.roofline.flash_grid`, when known already."""
    block = roofline.flash_block_rows(op, chip)
    g = roofline.flash_grid(op, block) if flash is None else flash
    heads_per_cta = max(1, block // g.positions)
    rows = min(op.q_len, g.positions) * heads_per_cta
    side = chip.array.rows
    mma_rows = max(math.ceil(rows / side) * side, TEMPLATES["tc"].min_tile_rows)
    base = round(op.batch * op.kv_heads * g.ctas)
    keys_mean = g.keys / g.ctas
    keys_max = float(op.keys_read) if op.causal or op.window is not None else keys_mean
    return split_grid(Grid(base, rows, mma_rows, block, keys_mean, keys_max, 1), splits)


def split_grid(one: Grid, splits: int) -> Grid:
    """The unsplit grid ``one`` with each CTA's keys cut into ``splits`` (at most one split per
    key block)."""
    splits = max(1, min(splits, math.ceil(one.keys_max / one.block)))
    return Grid(one.ctas * splits, one.rows, one.mma_rows, one.block, one.keys_mean / splits,
                one.keys_max / splits, splits)  # fmt: skip


def cta_cycles(op: Attention, chip: Chip, keys: float, gr: Grid) -> tuple[float, float]:
    """(MMA cycles, softmax and dequantization cycles) of one CTA attending ``keys`` keys, at
    the calibrated compute and vector efficiencies."""
    cal = chip.calibration
    mac_class = dtypes.mac_class(op.dtype)
    rate = float(chip.array.macs_per_pe_per_cycle[mac_class])  # type: ignore[index]
    macs = gr.mma_rows * keys * (op.head_dim + op.dv)
    mma = macs / (chip.array.pes * rate) / cal.compute(mac_class)
    scores = gr.rows * keys
    blocks = math.ceil(keys / gr.block) if keys else 0
    exponentials = scores + gr.rows * blocks  # the online softmax's rescales
    lanes_flops = (SOFTMAX_FLOPS_PER_ELEMENT - 1) * scores
    if op.kv_dtype != op.dtype:  # K/V dequantized as they are loaded
        per_token = op.head_dim + (0 if op.shared_kv else op.dv)
        lanes_flops += DEQUANT_FLOPS_PER_ELEMENT * keys * per_token
    lane_rate = chip.vector.lanes * chip.vector.flops_per_lane_per_cycle
    special = chip.vector.special_ops_per_cycle
    if special is None:
        softmax = (lanes_flops + exponentials) / lane_rate
    else:
        softmax = max(lanes_flops / lane_rate, exponentials / special)
    return mma, softmax / cal.vector_efficiency


def split_options(op: Attention, chip: Chip, base: Grid | None = None) -> list[int]:
    """The KV splits the kernel may use: 1, and with fewer CTAs than SMs the powers of two up
    to (and the count that gives) one CTA per SM (``base``: the unsplit :func:`grid`, when
    known already)."""
    base_ctas = (grid(op, chip) if base is None else base).ctas
    if base_ctas >= chip.cores:
        return [1]
    most = math.ceil(chip.cores / base_ctas)
    return sorted({1, most, *(1 << i for i in range(most.bit_length()) if 1 << i < most)})


def kernels(gr: Grid) -> int:
    """Kernels a grid launches: the attention kernel, and with split keys the combine kernel
    that merges the splits' partial outputs (FlashAttention-2's split-KV path runs
    ``flash_fwd_splitkv_kernel`` then ``flash_fwd_splitkv_combine_kernel``); each pays the
    chip's per-kernel overhead."""
    return 2 if gr.splits > 1 else 1


def cost(op: Attention, chip: Chip) -> OpCost:
    """The cost of one repetition of the fused attention ``op`` on ``chip``'s tensor cores (see
    the module docstring), with the KV split of :func:`split_options` that takes the least
    time (the first among equals)."""
    flash = roofline.flash_grid(op, roofline.flash_block_rows(op, chip))
    traffic = roofline.flash_attention_traffic(op, chip, flash)
    one = grid(op, chip, 1, flash)
    best: tuple[Grid, _Timed] | None = None
    for s in split_options(op, chip, one):
        gr = split_grid(one, s)
        timed = _timed(op, chip, gr, traffic)
        if best is None or timed.time_s < best[1].time_s:
            best = (gr, timed)
    assert best is not None  # split_options holds 1
    return _cost(op, chip, *best, traffic)


class _Timed(NamedTuple):
    """The time of a grid (:func:`_timed`) and what its cost reports of it."""

    time_s: float
    bound: Bound
    work_s: float
    memory_s: float
    l2_bytes: float


def _timed(op: Attention, chip: Chip, gr: Grid, traffic: roofline.FlashTraffic) -> _Timed:
    """The time of ``op`` run as the grid ``gr`` (``traffic``: its
    :func:`~infersim.simulator.engines.roofline.flash_attention_traffic`)."""
    cal = chip.calibration
    mma, softmax = cta_cycles(op, chip, gr.keys_mean, gr)
    per_cta = max(mma, softmax)
    if gr.keys_max > gr.keys_mean:  # unequal CTAs, the longest first
        longest = max(cta_cycles(op, chip, gr.keys_max, gr))
        work = max(gr.ctas * per_cta / chip.cores, longest)
    else:
        work = math.ceil(gr.ctas / chip.cores) * per_cta
    work_s = work / cal.attention_efficiency / chip.freq_hz
    act = dtypes.nbytes(op.dtype)
    q_o = op.batch * op.heads * op.q_len * (op.head_dim + op.dv) * act
    partials = 0.0
    if gr.splits > 1:  # written by the splits and read by the combine
        partials = 2.0 * gr.ctas * gr.rows * (op.dv + 1) * PARTIAL_BYTES
    l2_bytes = traffic.kv_load_bytes + q_o + partials
    terms: dict[Bound, float] = {
        "compute" if mma >= softmax else "vector": work_s,
        "memory": traffic.dram_bytes / (chip.dram.bandwidth_bytes_per_s
                                        * cal.dram_bandwidth_efficiency),
    }
    if chip.shared_sram is not None:
        terms["sram"] = l2_bytes / (chip.shared_sram.bandwidth_bytes_per_cycle * chip.freq_hz
                                    * cal.shared_sram_bandwidth_efficiency)
    bound: Bound = max(terms, key=terms.__getitem__)
    time_s = terms[bound] + chip.dram.latency_s + kernels(gr) * chip.kernel_overhead_s
    return _Timed(time_s, bound, work_s, terms["memory"], l2_bytes)


def _cost(
    op: Attention, chip: Chip, gr: Grid, timed: _Timed | None = None,
    traffic: roofline.FlashTraffic | None = None,
) -> OpCost:
    """The cost of ``op`` run as the grid ``gr`` (``timed``: its :func:`_timed`, ``traffic``:
    its :func:`~infersim.simulator.engines.roofline.flash_attention_traffic`, when known
    already)."""
    if traffic is None:
        traffic = roofline.flash_attention_traffic(op, chip)
    if timed is None:
        timed = _timed(op, chip, gr, traffic)
    time_s, bound, work_s, memory_s, l2_bytes = timed
    mac_class = dtypes.mac_class(op.dtype)
    shared_pj = chip.energy.shared_sram_pj_per_byte if chip.shared_sram is not None else 0.0
    energy_pj = (op.array_flops / 2 * chip.energy.mac(mac_class)
                 + op.vector_flops * chip.energy.vector_pj_per_flop
                 + traffic.dram_bytes * chip.energy.dram_pj_per_byte + l2_bytes * shared_pj)
    return OpCost(
        name=op.name, kind=op.kind, count=op.count, flops=op.flops,
        dram_bytes=traffic.dram_bytes, compute_s=work_s, memory_s=memory_s,
        time_s=time_s, bound=bound, cycles=time_s * chip.freq_hz, energy_pj=energy_pj,
        dataflow="tc", utilization=op.array_flops / (time_s * chip.peak_flops(mac_class)),
    )  # fmt: skip
