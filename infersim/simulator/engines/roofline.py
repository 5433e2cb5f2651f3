"""The roofline engine: the baseline every other engine is checked against, and the cost of
the ops the dataflow engine does not map (attention, vector ops, transfers).

Roofline: time = max(array FLOPs / achievable array FLOP/s at the op's dtype,
vector FLOPs / achievable vector FLOP/s, compulsory DRAM bytes / achievable bandwidth,
link bytes / link bandwidth + latency, host bytes / host-link bandwidth + latency) + the
calibrated per-kernel overhead. The largest term
names the bound. Fused attention re-reads K/V per query block when the shared SRAM cannot
serve the re-reads (:func:`flash_attention_bytes`).
"""

from __future__ import annotations

import math

from infersim import dtypes
from infersim.arch_models.chip import Chip
from infersim.errors import InfersimError
from infersim.simulator.results import Bound, OpCost
from infersim.workloads.ops import Attention, Collective, HostTransfer, OpBase


def _link_s(op: Collective, chip: Chip) -> float:
    if chip.chip_link is None:
        raise InfersimError(f"chip {chip.name!r} has no chip_link; {op.collective} needs one")
    link = chip.chip_link
    bandwidth = link.bandwidth_bytes_per_s * chip.calibration.link_efficiency
    return op.link_bytes / bandwidth + op.steps * link.latency_s


def _host_s(op: HostTransfer, chip: Chip) -> float:
    if chip.host_link is None:
        raise InfersimError(f"chip {chip.name!r} has no host_link; offload needs one")
    return op.transfer_bytes / chip.host_link.bandwidth_bytes_per_s + chip.host_link.latency_s


def flash_attention_bytes(op: Attention, chip: Chip) -> float:
    """DRAM bytes of a fused (FlashAttention) kernel: Q and O once; K and V once per block of
    ``Br`` query rows, where ``Br = ceil(M / 4d)`` with ``M`` the per-core SRAM in elements
    (Dao et al. 2022, Algorithm 1), unless every core's current (sequence, KV head) keys and
    values fit the shared SRAM together, which then serves the re-reads."""
    if not op.fused:
        return op.compulsory_bytes
    elements = chip.sram.capacity_bytes / dtypes.nbytes(op.dtype)
    rows = max(1, math.ceil(elements / (4 * op.head_dim)))
    passes = math.ceil(op.q_len / rows)
    if passes == 1:
        return op.compulsory_bytes
    per_head = op.kv_bytes / (op.batch * op.kv_heads)
    live = per_head * min(chip.cores, op.batch * op.kv_heads)
    if chip.shared_sram is not None and live <= chip.shared_sram.capacity_bytes:
        return op.compulsory_bytes
    return op.compulsory_bytes + op.kv_bytes * (passes - 1)


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
    vector_s = op.vector_flops / (chip.vector_flops * cal.vector_efficiency)
    dram_bytes = flash_attention_bytes(op, chip) if isinstance(op, Attention) else (
        op.compulsory_bytes
    )
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
    time_s = terms[bound] + cal.kernel_overhead_s
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
