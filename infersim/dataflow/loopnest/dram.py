"""The DRAM level: the loop order over the SRAM tiles, the loops dealt to the cores, and the
bytes each operand moves between DRAM and SRAM.

An operand's tile is fetched again whenever a DRAM loop it does not depend on iterates above a
loop it depends on that iterates; an operand that only dealt loops leave unchanged is fetched
once per core that needs it (partial sums of a dealt reduction loop meet in DRAM). Input rows
overlap between P tiles by R − stride (halo). An output revisited by an outer reduction loop
spills partial sums: written every visit, read back on all but the first.

Dealing (split-K by chunks). The outer loops are dealt to the cores until every core has work:
a loop is dealt while the loops above it iterate fewer times (``above``) than there are cores.
A loop the output depends on is dealt whole (independent work items: a GPU grid, in waves). A
reduction loop (one the output does not depend on, :data:`REDUCTION`) of ``n`` iterations is
dealt in chunks: s = min(n, floor(cores / above), held) of at most ceil(n / s) iterations each
(ceil(n / ceil(n / s)) chunks, none empty), each work item iterating its chunk serially with
its accumulators on the core; the partial sums of the chunks meet in the level above.

That level must hold them: ``held`` (:func:`held_chunks`, at least 1) is how many copies of
the output (its footprint at the output's bytes per element, as the partial-sum traffic below
counts them) the level above the cores holds (its capacity), over the chunks of the reduction
loops dealt outer to this one. The partial sums of a split-K meet in the level that feeds the
cores; on a GPU that is the L2, which cannot hold a workspace larger than itself (cuBLAS puts
one in global memory), so more chunks than it holds are not dealt. A reduction loop dealt in
fewer chunks than its iterations (cut) ends the dealing: no loop inner to it is dealt, so the
dealt loops are always a prefix of the order (without the cap, a cut leaves above × n >
cores, so no inner loop would be dealt anyway). The work items are then not all alike: the
longest iterates ceil(n / s) slices. A mapping that deals a reduction loop in more than one
chunk launches a second kernel that sums the partials (cuBLAS's ``splitKreduce_kernel``):
:attr:`DramFigures.kernels`.

The rule is written once against a math namespace ``xp`` (see
:mod:`infersim.dataflow.loopnest.numerics`): for one loop order of one tiling in floats, or for
several orders of many candidates at once in arrays of shape (orders, candidates).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import numpy as np

from infersim.dataflow.loopnest.numerics import Figures, MathNamespace, prod_skipping_ones
from infersim.dataflow.loopnest.problem import DEPENDS, Orders, Problem, total_footprint
from infersim.dataflow.templates import DIMS, OPERANDS

REDUCTION: frozenset[str] = frozenset(d for d in DIMS if d not in DEPENDS["output"])
"""The reduction dims: loops the output does not depend on, dealt to the cores in chunks."""

Flag = Any
"""Whether one loop is inner (or outer) to another, per loop order: True (in every order), or
a read-only bool array of shape (orders, 1)."""

Loops = tuple[tuple[str, tuple[tuple[str, Flag], ...]], ...]
"""(loop dim, the loop dims related to it with the :data:`Flag` of that relation) per loop."""


class _LoopOrders(NamedTuple):
    """What :func:`dram_traffic` needs of the loop orders alone (see :func:`_loop_orders`)."""

    used: tuple[str, ...]
    """The loop dims that iterate on some candidate."""
    refetch_loops: tuple[Loops, ...]
    """Per operand: each loop it does not depend on, with the loops inner to it that it does
    depend on (an iterating one there makes the operand's tile fetched again)."""
    outer_loops: Loops
    """Per loop: the loops outer to it (it is dealt to the cores while they iterate fewer
    times than there are cores)."""
    n_orders: int


class DramFigures(NamedTuple):
    """What :func:`dram_figures` returns (see there)."""

    reads: Figures
    """DRAM bytes read per operand."""
    writes: Figures
    """DRAM bytes written per operand (the float 0.0 for the input and the weight, which the
    cores never write: no array of zeros over the candidates)."""
    iterations: Any
    """Work items the dealt loops give the cores (1.0 on one core)."""
    longest: Any
    """The longest work item's SRAM tiles over the mean item's (>= 1; above 1 only where a
    chunked reduction loop's last chunk is shorter; 1.0 on one core)."""
    kernels: Any
    """Kernels the mapping launches: 2.0 where a reduction loop is dealt in more than one chunk
    (a second kernel sums the partials), else 1.0."""


    def moved(self) -> tuple[Any, Any]:
        """(bytes read and written, bytes written) over every operand: the sums of the reads
        and the writes in :data:`OPERANDS` order, left to right (the input's and the weight's
        writes, the float 0.0, are not added: adding them changes no sum, and on arrays would
        copy one)."""
        reads, writes = self.reads, self.writes
        return reads["input"] + reads["weight"] + (reads["output"] + writes["output"]), \
            writes["output"]


def _flag(per_order: list[bool]) -> Flag | None:
    """A relation per order as a :data:`Flag`, or None where it holds in no order."""
    if all(per_order):
        return True
    if not any(per_order):
        return None
    flag = np.array(per_order, dtype=bool)[:, None]
    flag.flags.writeable = False
    return flag


@functools.lru_cache(maxsize=64)
def _dims_of(orders: Orders) -> tuple[str, ...]:
    """The dims of :data:`DIMS` that some of ``orders`` loops over."""
    return tuple(d for d in DIMS if any(d in order for order in orders))


@functools.lru_cache(maxsize=256)
def _loop_orders(orders: Orders, iterates: tuple[bool, ...]) -> _LoopOrders:
    """The :class:`_LoopOrders` of the loops of ``orders`` that iterate (``iterates``: per dim
    of :func:`_dims_of`, whether its count exceeds 1 on some candidate; a loop of count 1
    changes no product and no "iterates" test, so the others are left out).

    Raises:
        ValueError: orders that are not permutations of one set of dims.
    """
    varying = {d for d, v in zip(_dims_of(orders), iterates, strict=True) if v}
    used = tuple(d for d in DIMS if d in varying)
    position = [{d: j for j, d in enumerate(d for d in order if d in varying)} for order in orders]
    if any(len(p) != len(used) for p in position):
        raise ValueError(f"loop orders {orders}: must all be orders of the same dims")

    def relation(d: str, e: str, inner: bool) -> Flag | None:  # e inner (or outer) to d, per order
        return _flag([(p[e] > p[d]) == inner for p in position])

    refetch_loops = tuple(
        tuple(
            (d, tuple((e, f) for e in used if e in dep and (f := relation(d, e, True)) is not None))
            for d in used
            if d not in dep
        )
        for dep in (DEPENDS[name] for name in OPERANDS)
    )
    outer_loops = tuple(
        (d, tuple((e, f) for e in used if e != d and (f := relation(d, e, False)) is not None))
        for d in used
    )
    return _LoopOrders(used, refetch_loops, outer_loops, len(orders))


def held_chunks(
    prob: Problem, counts: Figures, capacity_bytes: float, xp: MathNamespace,
    out_bytes: Any = None,
) -> Any:
    """Copies of the partial sums of the output (its footprint at the output's bytes per
    element, as the spilled partial sums are counted; ``out_bytes`` where the caller has it)
    that ``capacity_bytes`` hold: the most chunks a reduction loop is dealt in (whole copies,
    at least 1), with ``counts[d]`` SRAM tiles along each dim."""
    if out_bytes is None:
        out_bytes = total_footprint(prob, "output", counts) * prob.operand_bytes["output"]
    return xp.maximum(xp.floor(capacity_bytes / out_bytes), 1.0)


def _deal(
    st: _LoopOrders, counts: Figures, cores: int, held: Any, xp: MathNamespace
) -> tuple[Figures, Any, Any, Any]:
    """(per loop its iterations dealt to the cores (1.0: not dealt), the work items, the
    longest item's tiles over the mean item's, the kernels launched) of the loops ``st`` on
    ``cores`` > 1 cores, dealt as the module docstring says, the level above the cores holding
    ``held`` copies of the partial sums (:func:`held_chunks`).

    Every ``above`` is a product of whole loop counts, so whether a loop is dealt, and whether
    a reduction loop is cut, depend on the counts alone: the cuts are found first, then each
    loop is dealt where ``above`` < cores and no reduction loop outer to it is cut."""
    above: Figures = {}
    outer_of = dict(st.outer_loops)
    for d, outer in st.outer_loops:
        above[d] = prod_skipping_ones([counts[e] if flag is True else xp.where(flag, counts[e], 1.0)
                                       for e, flag in outer])  # fmt: skip
    chunked: dict[str, tuple[Any, Any, Any]] = {}  # reduction loop: (chunks, slices, cut)
    for d in st.used:
        if d not in REDUCTION:
            continue
        # chunks of the reduction loops outer to d (dealt whole if d is)
        merged = prod_skipping_ones([counts[e] if flag is True else xp.where(flag, counts[e], 1.0)
                                     for e, flag in outer_of[d] if e in REDUCTION])  # fmt: skip
        share = xp.maximum(xp.minimum(xp.floor(float(cores) / above[d]),
                                      xp.floor(held / merged)), 1.0)  # fmt: skip
        slices = xp.ceil_div(counts[d], xp.minimum(counts[d], share))
        chunks = xp.ceil_div(counts[d], slices)
        cut = xp.where(above[d] < cores, chunks < counts[d], False)
        chunked[d] = (chunks, slices, cut)
    split: Any = False
    dealt: Figures = {}
    longest: list[Any] = []  # its factors, as every product below: no product by a float 1.0
    for d, outer in st.outer_loops:
        deal = above[d] < cores
        for e, flag in outer:  # a cut reduction loop outer to d ends the dealing
            if e in chunked:
                deal = xp.where(chunked[e][2] if flag is True else flag & chunked[e][2],
                                False, deal)  # fmt: skip
        if d in chunked:  # in chunks of ceil(n / s) iterations, none empty
            chunks, slices, _ = chunked[d]
            dealt[d] = xp.where(deal, chunks, 1.0)
            longest.append(xp.where(deal, slices * chunks / counts[d], 1.0))
            split = split | (dealt[d] > 1.5)
        else:
            dealt[d] = xp.where(deal, counts[d], 1.0)
    iterations = prod_skipping_ones([dealt[d] for d, _ in st.outer_loops])
    return dealt, iterations, prod_skipping_ones(longest), xp.where(split, 2.0, 1.0)


def _times(refetch: Any, one: Any, factor: Any) -> Any:
    """``refetch`` x ``factor``, or ``factor`` itself where ``refetch`` is still ``one`` (the
    ones a refetch count starts as) and ``factor`` has its shape: 1.0 x x is x exactly, and
    no array of products by one is made."""
    if refetch is one and getattr(factor, "shape", ()) == getattr(one, "shape", ()):
        return factor
    return refetch * factor


def dram_traffic(
    prob: Problem, counts: Figures, orders: Orders, cores: int, xp: MathNamespace,
    multicast: int = 1, capacity_bytes: float | None = None,
) -> tuple[Figures, Figures, Any]:
    """(reads, writes, iterations) of :func:`dram_figures`."""
    fig = dram_figures(prob, counts, orders, cores, xp, multicast, capacity_bytes)
    return fig.reads, fig.writes, fig.iterations


def dram_figures(
    prob: Problem, counts: Figures, orders: Orders, cores: int, xp: MathNamespace,
    multicast: int = 1, capacity_bytes: float | None = None, footprints: Figures | None = None,
) -> DramFigures:
    """DRAM reads and writes per operand (bytes), the work items the dealt DRAM loops give the
    cores and the longest item's share (:class:`DramFigures`), with ``counts[d]`` SRAM tiles
    along each dim, for each of ``orders`` (outer to inner; all orders of the same dims). With
    arrays, reads and writes have shape (orders, candidates) (but the input's and the weight's
    writes, the float 0.0); the other figures broadcast to it.

    The outer loops are dealt to the cores as the module docstring says: whole, or in chunks
    for a reduction loop; a chunked reduction loop's partial sums are written once per chunk
    and read back on all but the first. With ``multicast`` > 1, clusters of that many cores
    load a tile they share once (TMA multicast): the copies of one input or weight tile that
    the cores dealt the loops it does not depend on fetch at once are divided by it (never
    below one), for the operand of the two where that saves more bytes (a cluster is laid
    along one dim of the grid). ``capacity_bytes``: what the level above the cores holds, which
    caps the chunks of a reduction loop (:func:`held_chunks`; None: no cap). ``footprints``:
    per operand, its tiles' bytes each once where the caller has them
    (:func:`~infersim.dataflow.loopnest.figures.footprint_bytes` of ``counts``).
    """
    maxima = xp.max_each([counts[d] for d in _dims_of(orders)])
    st = _loop_orders(orders, tuple(m > 1.5 for m in maxima))
    iterates = {d: counts[d] > 1.5 for d in st.used}
    one = xp.ones(st.n_orders, counts["G"])
    # every count is a whole number, so the products below are exact in any order
    iterations: Any = 1.0
    longest: Any = 1.0
    kernels: Any = 1.0
    dealt: Figures = {}
    if cores > 1:
        held = (float(cores) if capacity_bytes is None else held_chunks(
            prob, counts, capacity_bytes, xp, None if footprints is None else footprints["output"]))
        dealt, iterations, longest, kernels = _deal(st, counts, cores, held, xp)
        cores_used = xp.minimum(iterations, float(cores))
    reads: Figures = {}
    writes: Figures = {}
    saved: Figures = {}
    for name, loops in zip(OPERANDS, st.refetch_loops, strict=True):
        refetch = one
        copies: list[Any] = []  # the factors of each (no product by a float 1.0)
        spread: list[Any] = []  # the dealt loops the operand does not depend on: cores sharing it
        for d, inner in loops:
            # whether a loop inner to d that the operand depends on iterates: the operand's
            # tile changes there, so each iteration of d fetches it again
            reused: Any = False
            for e, flag in inner:
                term = iterates[e] if flag is True else flag & iterates[e]
                reused = term if reused is False else reused | term
            if reused is not False:
                refetch = _times(refetch, one, xp.where(reused, counts[d], 1.0))
            if cores > 1:  # else the cores dealt d's iterations (or chunks) each fetch it
                spread.append(dealt[d])
                copies.append(dealt[d] if reused is False else xp.where(reused, 1.0, dealt[d]))
        total = (total_footprint(prob, name, counts) * prob.operand_bytes[name]
                 if footprints is None else footprints[name])  # fmt: skip
        if cores > 1:
            refetch = _times(refetch, one, xp.minimum(prod_skipping_ones(copies), cores_used))
            if multicast > 1 and name != "output":  # f cores at once load the same tile
                f = xp.minimum(prod_skipping_ones(spread), cores_used)
                saved[name] = total * refetch * (1.0 - xp.maximum(f / multicast, 1.0) / f)
        if name == "output":
            spill = total * (refetch - 1.0)
            reads[name], writes[name] = spill, spill + total * prob.output_write_scale
        else:
            reads[name], writes[name] = total * refetch, 0.0  # (not an array of zeros)
    if saved:
        first = saved["input"] >= saved["weight"]
        reads["input"] = reads["input"] - xp.where(first, saved["input"], 0.0)
        reads["weight"] = reads["weight"] - xp.where(first, 0.0, saved["weight"])
    return DramFigures(reads, writes, iterations, longest, kernels)
