"""The roofline engine: the baseline every other engine is checked against, and the cost of
the ops the dataflow engine does not map (attention, vector ops, transfers).

Roofline: time = max(array FLOPs / achievable array FLOP/s at the op's dtype,
vector FLOPs / achievable vector FLOP/s, compulsory DRAM bytes / achievable bandwidth,
a collective's best algorithm (ring or tree: steps x per-step latency + bytes on the busiest
link / achievable bus bandwidth, :func:`collective_s`), host bytes / host-link bandwidth +
latency) + the calibrated per-kernel overhead. The largest term
names the bound. Fused attention re-reads K/V per query block when the shared SRAM cannot
serve the re-reads (:func:`flash_attention_traffic`), and its exponentials run on the
special-function units where the chip has them (:func:`attention_vector_s`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from infersim import dtypes
from infersim.arch_models.chip import Chip
from infersim.errors import InfersimError
from infersim.simulator.results import Bound, OpCost
from infersim.workloads.ops import Attention, Collective, HostTransfer, OpBase


def _link_s(op: Collective, chip: Chip) -> float:
    return collective_s(op, chip)


def collective_s(op: Collective, chip: Chip) -> float:
    """Seconds ``op`` takes over ``chip``'s chip-to-chip link: the fastest of the algorithms
    a collective library picks among (:func:`collective_times_s`).

    Raises:
        InfersimError: ``chip`` has no chip-to-chip link.
    """
    return min(collective_times_s(op, chip).values())


def collective_times_s(op: Collective, chip: Chip) -> dict[str, float]:
    """Seconds of ``op`` over ``chip``'s chip-to-chip link with each of its algorithms
    (``ring``, ``tree``, ...): the algorithm's latency-bound steps x the link's per-step
    latency (x ``calibration.link_latency_factor``), plus the bytes it sends over the busiest
    link over the achievable bus bandwidth (peak x ``bus_bandwidth_efficiency`` x
    ``calibration.link_efficiency``).

    Raises:
        InfersimError: ``chip`` has no chip-to-chip link.
    """
    if chip.chip_link is None:
        raise InfersimError(f"chip {chip.name!r} has no chip_link; {op.collective} needs one")
    link = chip.chip_link
    bus_bytes_per_s = (
        link.bandwidth_bytes_per_s * link.bus_bandwidth_efficiency
        * chip.calibration.link_efficiency
    )
    step_s = link.latency_s * chip.calibration.link_latency_factor
    return {
        name: steps * step_s + sent_bytes / bus_bytes_per_s
        for name, (steps, sent_bytes) in op.algorithms.items()
    }


def _host_s(op: HostTransfer, chip: Chip) -> float:
    if chip.host_link is None:
        raise InfersimError(f"chip {chip.name!r} has no host_link; offload needs one")
    return op.transfer_bytes / chip.host_link.bandwidth_bytes_per_s + chip.host_link.latency_s


class FlashTraffic(NamedTuple):
    """Traffic of one repetition of a fused attention kernel, in bytes."""

    dram_bytes: float
    """To and from DRAM: Q and O once, K and V once plus the re-reads the chip misses."""
    kv_load_bytes: float
    """K and V the kernel's CTAs load into the cores' SRAMs (from the shared SRAM or DRAM)."""


class FlashGrid(NamedTuple):
    """How a FlashAttention kernel cuts one (sequence, KV head)'s queries into CTAs."""

    positions: int
    """Query positions one CTA holds (all its heads' rows of them)."""
    ctas: float
    """CTAs that read this (sequence, KV head)'s keys and values."""
    keys: float
    """Keys those CTAs load, summed over them."""


def flash_block_rows(op: Attention, chip: Chip) -> int:
    """Query rows ``Br`` (and key columns ``Bc``) of one FlashAttention block on ``chip``:
    ``ceil(M / 4d)`` with ``M`` the per-core SRAM in elements of the op's dtype (Dao et al.
    2022, Algorithm 1); one block, one CTA, runs on a core at a time."""
    elements = chip.sram.capacity_bytes / dtypes.nbytes(op.dtype)
    return max(1, math.ceil(elements / (4 * op.head_dim)))


def flash_grid(op: Attention, rows: int) -> FlashGrid:
    """The kernel's CTAs over one (sequence, KV head): one per (query head, block of ``rows``
    queries), or one per block of ``rows // h`` positions holding ``h`` query heads of the GQA
    group (the group packed into the query rows, as FlashAttention-2 does for decode), with
    the ``h`` dividing the group that loads the fewest keys."""
    group = op.heads / op.kv_heads
    blocks = math.ceil(op.q_len / rows)
    grid = FlashGrid(rows, group * blocks, group * op.block_keys(rows)[0])
    if op.heads % op.kv_heads:
        return grid
    whole = op.heads // op.kv_heads
    for heads in range(2, min(whole, rows) + 1):
        if whole % heads:
            continue
        positions = rows // heads
        per_head = whole // heads
        keys = per_head * op.block_keys(positions)[0]
        if keys < grid.keys:
            grid = FlashGrid(positions, per_head * math.ceil(op.q_len / positions), keys)
    return grid


def flash_attention_traffic(
    op: Attention, chip: Chip, grid: FlashGrid | None = None
) -> FlashTraffic:
    """DRAM bytes and K/V bytes loaded into the cores' SRAMs of ``op`` on ``chip``.

    A fused kernel runs one CTA per (sequence, query head, block of :func:`flash_block_rows`
    queries), or packs query heads of a GQA group into a block where that loads fewer keys
    (:func:`flash_grid`); each CTA loads the keys its block attends (:meth:`Attention.block_keys`:
    causal and window aware), and the CTAs of one (sequence, KV head) read the same K/V.
    ``min(cores, CTAs)`` CTAs run at once, launched (sequence, KV head) by (sequence, KV head),
    so about ``ceil(min(cores, CTAs) / CTAs per KV head)`` K/V sets are live: when they fit the
    shared SRAM, DRAM sees K and V once. Otherwise the CTAs running together still share their
    reads through it, and each later wave of CTAs that needs a set reads it from DRAM again;
    without a shared SRAM every CTA loads from DRAM. Unfused attention reads K and V once.
    ``grid``: the kernel's :func:`flash_grid`, when known already.
    """
    if not op.fused:
        return FlashTraffic(op.compulsory_bytes, op.kv_bytes)
    if grid is None:
        grid = flash_grid(op, flash_block_rows(op, chip))
    sets = op.batch * op.kv_heads
    token_bytes = op.kv_token_bytes
    loaded = sets * grid.keys * token_bytes
    shared = chip.shared_sram
    if shared is None:
        reads = grid.keys
    else:
        running = min(chip.cores, round(sets * grid.ctas))  # batch x heads x blocks
        live = math.ceil(running / grid.ctas)
        if live * op.keys_read * token_bytes <= shared.capacity_bytes:
            return FlashTraffic(op.compulsory_bytes, loaded)
        blocks = math.ceil(op.q_len / grid.positions)
        if running < blocks:  # a wave runs consecutive blocks of one head: one larger block
            per_wave = grid.ctas / blocks * op.block_keys(running * grid.positions)[0]
        else:  # c consecutive CTAs in waves of `running` touch 1 + (c - 1) / running waves
            per_wave = (1 + (grid.ctas - 1) / running) * op.keys_read
        reads = min(grid.keys, max(op.keys_read, per_wave))
    extra = sets * (reads - op.keys_read) * token_bytes
    return FlashTraffic(op.compulsory_bytes + extra, loaded)


def flash_attention_bytes(op: Attention, chip: Chip) -> float:
    """DRAM bytes of ``op`` on ``chip`` (:func:`flash_attention_traffic`)."""
    return flash_attention_traffic(op, chip).dram_bytes


def attention_vector_s(op: Attention, chip: Chip) -> float:
    """Seconds of ``op``'s non-matrix work on ``chip``'s vector units, at the calibrated
    ``vector_efficiency``.

    With special-function units (``vector.special_ops_per_cycle``), the exponentials run on
    them beside the lanes: the larger of the lanes' FLOPs (the softmax less its exponentials)
    over the lanes' rate and the exponentials over the units' rate. A fused kernel evaluates
    one per score and one per query row per block of ``Bc`` keys it passes (the online
    softmax's rescale ``exp(m_old - m_new)``, Dao et al. 2022, Algorithm 1). Without them,
    every FLOP runs on the lanes.
    """
    eff = chip.calibration.vector_efficiency
    lanes_s = op.vector_flops / (chip.vector_flops * eff)
    special = chip.vector.special_ops_per_cycle
    if special is None:
        return lanes_s
    exponentials = op.exponentials
    if op.fused:
        rows = flash_block_rows(op, chip)
        tile_pairs = op.block_keys(flash_grid(op, rows).positions)[1]
        exponentials += op.batch * op.heads * tile_pairs / rows
    lanes_s = (op.vector_flops - op.exponentials) / (chip.vector_flops * eff)
    special_s = exponentials / (special * chip.cores * chip.freq_hz * eff)
    return max(lanes_s, special_s)


def cost(op: OpBase, chip: Chip, dataflow: str = "best") -> OpCost:
    """Roofline cost of one repetition of ``op`` on ``chip`` (``dataflow`` is ignored: a
    roofline has no mapping).

    Raises:
        UnsupportedDtypeError: the op's matrix work needs a dtype the array cannot compute.
        InfersimError: a collective on a chip without a chip-to-chip link.
    """
    cal = chip.calibration
    array_flops = op.array_flops
    compute_s = 0.0
    mac_pj = 0.0
    if array_flops:
        mac_class = dtypes.mac_class(op.compute_dtype)
        peak = chip.peak_flops(mac_class) * cal.compute(mac_class)
        compute_s = array_flops / peak
        mac_pj = array_flops / 2 * chip.energy.mac(mac_class)
    if isinstance(op, Attention):
        vector_s = attention_vector_s(op, chip)
        dram_bytes = flash_attention_traffic(op, chip).dram_bytes
    else:
        vector_s = op.vector_flops / (chip.vector_flops * cal.vector_efficiency)
        dram_bytes = op.compulsory_bytes
    memory_s = dram_bytes / (chip.dram.bandwidth_bytes_per_s * cal.dram_bandwidth_efficiency)
    link_s = _link_s(op, chip) if isinstance(op, Collective) else 0.0
    host_s = _host_s(op, chip) if isinstance(op, HostTransfer) else 0.0

    terms: dict[Bound, float] = {
        "compute": compute_s,
        "vector": vector_s,
        "memory": memory_s,
        "link": link_s,
        "host": host_s,
    }
    bound: Bound = max(terms, key=terms.__getitem__)
    time_s = terms[bound] + chip.kernel_overhead_s
    if terms[bound] == 0.0:
        bound = "overhead"
    energy_pj = (
        mac_pj
        + op.vector_flops * chip.energy.vector_pj_per_flop
        + dram_bytes * chip.energy.dram_pj_per_byte
    )
    return OpCost(
        name=op.name,
        kind=op.kind,
        count=op.count,
        flops=op.flops,
        dram_bytes=dram_bytes,
        compute_s=max(compute_s, vector_s),
        memory_s=memory_s,
        time_s=time_s,
        bound=bound,
        cycles=time_s * chip.freq_hz,
        energy_pj=energy_pj,
        link_bytes=op.link_bytes if isinstance(op, Collective) else 0.0,
    )
