"""A network on an accelerator, operator after operator: which activations stay on chip, which
weight loads hide behind the previous operator, which vector work runs behind the array.

A chip's :class:`~infersim.arch_models.chip.Schedule` says how its hardware chains operators
(a chip without one runs each operator standalone, DRAM to DRAM, as a GPU runs kernels). The
walk over an operator list in order (:func:`schedule_ops`) decides for each operator a
:class:`Placement`, and the engine prices the operator under it:

- **activations on chip.** The operators of a list are a chain: each consumes the previous
  one's output (its activation input: a GEMM's A, a convolution's ifmap, attention's queries,
  a vector op's first input). An operator's output stays in the activation buffer when a next
  operator exists and the output fits there beside the operator's own input, if that is on
  chip too; the consumer then reads it from the buffer, not DRAM, and the producer does not
  store it. Anything else round-trips DRAM, and the traffic says so.
- **weight prefetch.** With ``prefetch_weights``, an operator's first weight tile loads during
  the DRAM's idle time of the previous operator (its time less its DRAM busy time): the
  exposed first load shrinks by that much, never below the input's share.
- **vector work behind the array.** With ``fuse_vector``, a vector operator (elementwise,
  norm, softmax) that follows an array operator (or another such vector operator) runs in the
  pipeline behind the array on its outputs: it has no kernel of its own (no launch overhead)
  and its vector time overlaps the array operator's compute; only what exceeds it shows.

The pricing of one operator under a placement belongs to the engine (the analytic engine
re-times its mapping with the bytes that moved and the loads that were hidden:
:func:`infersim.simulator.engines.analytic.scheduled_cost`); the walk is shared.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from infersim import dtypes
from infersim.arch_models.chip import Chip
from infersim.simulator.results import OpCost
from infersim.workloads.ops import (
    Attention,
    Conv2d,
    Elementwise,
    Gemm,
    Norm,
    OpBase,
    Softmax,
)


@dataclass(frozen=True)
class Placement:
    """What the schedule decided for one operator."""

    input_on_chip: bool = False
    """Its activation input is read from the on-chip buffer (the previous operator left it)."""
    output_on_chip: bool = False
    """Its output stays in the on-chip buffer for the next operator (never stored to DRAM)."""
    prefetch_s: float = 0.0
    """Seconds of DRAM idle time of the previous operator its first weight load may use."""
    overlap_s: float | None = None
    """A vector operator run behind the array: the array compute seconds its vector work
    overlaps (None: not fused, a kernel of its own)."""


STANDALONE = Placement()
"""An operator run on its own: from DRAM, to DRAM, nothing hidden."""

Pricer = Callable[[OpBase, Placement], OpCost]
"""The engine's price of one repetition of an operator under a placement."""


def tensors(op: OpBase) -> tuple[float, float] | None:
    """(bytes of the activation input an operator takes from the previous one, bytes of the
    output it hands to the next), per repetition; None for an operator outside the chain (a
    collective, a host transfer: what follows it starts from DRAM)."""
    if isinstance(op, Gemm):
        out = op.outputs * dtypes.nbytes(op.out_dtype)
        if op.epilogue is not None:
            out *= op.epilogue.out_ratio
        return op.a_bytes, out
    if isinstance(op, Conv2d):
        gemm = op.as_gemm()
        ifmap = op.batch * op.in_channels * op.in_h * op.in_w * dtypes.nbytes(op.dtype)
        return float(ifmap), gemm.outputs * dtypes.nbytes(op.out_dtype)
    if isinstance(op, Attention):
        q = op.batch * op.q_len * op.heads * op.head_dim * dtypes.nbytes(op.dtype)
        return float(q), float(q)  # the output has the queries' shape
    if isinstance(op, Elementwise):
        size = op.elements * dtypes.nbytes(op.dtype)
        return (float(size) if op.inputs else 0.0), float(size)
    if isinstance(op, Norm | Softmax):
        size = op.rows * op.cols * dtypes.nbytes(op.dtype)
        return float(size), float(size)
    return None


def is_array_op(op: OpBase) -> bool:
    """A GEMM or convolution: work the systolic array runs."""
    return isinstance(op, Gemm | Conv2d)


def is_vector_op(op: OpBase) -> bool:
    """Pointwise or row-wise vector work that can run behind the array."""
    return isinstance(op, Elementwise | Norm | Softmax)


def schedule_ops(ops: Sequence[OpBase], chip: Chip, price: Pricer) -> list[OpCost]:
    """The cost of each operator of ``ops`` run in order on ``chip`` under its schedule (each
    standalone on a chip without one); ``price`` is the engine's."""
    policy = chip.schedule
    if policy is None:
        return [price(op, STANDALONE) for op in ops]
    buffer = chip.activation_buffer_bytes
    flows = [tensors(op) for op in ops]
    out: list[OpCost] = []
    resident = False  # the previous operator's output is in the buffer
    idle_s = 0.0  # DRAM idle time of the previous operator
    budget: float | None = None  # array compute seconds a fused vector op may still overlap
    for i, op in enumerate(ops):
        flow = flows[i]
        nxt = flows[i + 1] if i + 1 < len(ops) else None
        input_on_chip = resident and flow is not None and flow[0] > 0
        held = flow[0] if input_on_chip and flow is not None else 0.0
        output_on_chip = (
            flow is not None and nxt is not None and nxt[0] > 0
            and held + flow[1] <= buffer
        )
        fused = policy.fuse_vector and is_vector_op(op) and budget is not None
        place = Placement(
            input_on_chip=input_on_chip,
            output_on_chip=output_on_chip,
            prefetch_s=idle_s if policy.prefetch_weights else 0.0,
            overlap_s=budget if fused else None,
        )
        cost = price(op, place)
        out.append(cost)
        resident = output_on_chip
        idle_s = max(cost.time_s - cost.memory_s, 0.0)
        if is_array_op(op):
            budget = cost.compute_s
        elif fused and budget is not None:
            budget = max(budget - cost.compute_s, 0.0)
        else:
            budget = None
    return out
