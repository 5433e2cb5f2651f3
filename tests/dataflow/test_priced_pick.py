"""A searched mapping takes its DRAM and time figures from the search's pricing of its tiling
(:func:`~infersim.dataflow.loopnest.figures.picked_figures`) instead of evaluating them again:
every field equals the full evaluation of the same tiling in plain floats (``analyze``), bit
for bit, on presets, their two-level cores views with the op's DRAM level, batched searches and
the bounded search of ops with many candidates."""

from __future__ import annotations

import dataclasses

from dataflow_helpers import CONVS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infersim.arch_models.chip import Chip
from infersim.arch_models.presets import load_chip
from infersim.dataflow import Backing, Mapping, analyze, clear_cache, map_op, search_many
from infersim.dataflow import mapper as mapper_module
from infersim.errors import InfersimError
from infersim.simulator.engines.analytic import level_views, op_backing
from infersim.workloads.ops import Gemm, OpBase

PRESETS = [load_chip(n) for n in ("h100-sxm", "a100-sxm-80gb", "tpu-v4", "eyeriss-v1")]

gemms = st.builds(
    lambda m, k, n, dtype: Gemm(name="g", m=m, k=k, n=n, a_dtype=dtype, b_dtype=dtype,
                                out_dtype=dtype),
    m=st.sampled_from([1, 7, 64, 300, 2048, 16900]),
    k=st.sampled_from([64, 1000, 4096, 14336]),
    n=st.sampled_from([32, 300, 4096, 28672]),
    dtype=st.sampled_from(["bf16", "int8", "fp8"]),
)  # fmt: skip


def _fields(m: Mapping) -> dict[str, object]:
    return {f.name: getattr(m, f.name) for f in dataclasses.fields(m)}


def _same_as_full(got: Mapping, op: OpBase, chip: Chip, backing: Backing | None) -> None:
    full = analyze(op, chip, got.template, got.tiling, backing)
    assert _fields(got) == _fields(full)
    for m in (got, full):  # a mapping keeps its figures' traffic pairs and levels as they are
        figures = [x for level in m.traffic.values() for a in level.values() for x in a]
        assert all(type(x) is float for x in [*figures, *(m.levels or ())])


def _views(chip: Chip, op: OpBase) -> tuple[Chip, Backing | None]:
    if chip.shared_sram is None:
        return chip, None
    return level_views(chip)[0], op_backing(op, chip)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(op=st.one_of(gemms, gemms, CONVS), chip_index=st.integers(0, len(PRESETS) - 1),
       batched=st.booleans())  # fmt: skip
def test_a_searched_mapping_equals_its_tiling_evaluated_in_full(
    op: OpBase, chip_index: int, batched: bool
) -> None:
    clear_cache()
    try:
        chip, backing = _views(PRESETS[chip_index], op)
        if batched:  # priced with other ops' candidates stacked in one pass
            other = Gemm(name="o", m=5, k=512, n=768)
            search_many([op, other], chip, "best",
                        None if backing is None else [backing, _views(PRESETS[chip_index],
                                                                      other)[1]])  # fmt: skip
        got = map_op(op, chip, backing=backing)
    except InfersimError:
        return  # an op the chip cannot map is refused the same way by both
    _same_as_full(got, op, chip, backing)


def test_the_bounded_search_s_pick_equals_its_tiling_evaluated_in_full() -> None:
    """Ops with more candidates than the seeds priced first: their pick comes from the bounded
    search's pricing (the seeds' or the kept candidates')."""
    chip = load_chip("tpu-v4")
    seen = 0
    for op in (Gemm(name="g", m=m, k=k, n=n) for m in (64, 2048) for k, n in
               ((4096, 4096), (14336, 4096), (4096, 28672))):  # fmt: skip
        clear_cache()
        prob, names = mapper_module._checked(op, chip, "best")
        found = mapper_module._prepare_all(prob, names, chip)
        assert found is not None
        seen += len(found[1].cycles) > 2 * mapper_module.SEEDS
        _same_as_full(map_op(op, chip), op, chip, None)
    assert seen  # the bounded path was taken


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.sampled_from([0.5, 1.0, 2.0, 3.0, float("nan")]), min_size=1,
                       max_size=24), orders=st.integers(1, 6))  # fmt: skip
def test_the_candidate_a_group_keeps_per_part_is_the_one_a_stable_sort_ranks_first(
    values: list[float], orders: int
) -> None:
    """A group's pricing keeps the figures of one candidate per op and template
    (``_first_fastest``): the first of the fastest, order-major, a NaN last, as the stable
    sort of the pick over several parts ranks them; ties and NaNs are common on a coarse
    grid of times."""
    import numpy as np

    size = -(-len(values) // orders)
    flat = np.array((values * orders)[: orders * size]).reshape(orders, size)
    ranked = int(flat.reshape(-1).argsort(kind="stable")[0])
    assert mapper_module._first_fastest(flat) == ranked
    assert mapper_module._first_fastest(flat[:, : max(size - 1, 1)]) == int(
        flat[:, : max(size - 1, 1)].reshape(-1).argsort(kind="stable")[0])
