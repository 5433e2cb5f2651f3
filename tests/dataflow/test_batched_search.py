"""The batched searches of a step's ops (search_many, traffic_many) give exactly the mappings and
tilings the per-op searches give, on presets, their two-level views and random op lists (mixed
dtypes, batched GEMMs, convolutions, ops that fit nowhere), and leave the caches as a search of
each op would: a bandwidth variant re-times them without searching again."""

from __future__ import annotations

from collections.abc import Callable

from dataflow_helpers import CONVS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infersim.arch_models.chip import Chip
from infersim.arch_models.presets import load_chip
from infersim.dataflow import (
    Backing,
    clear_cache,
    map_op,
    map_traffic,
    search_many,
    traffic_many,
    traffic_of,
)
from infersim.dataflow import mapper as mapper_module
from infersim.dataflow.loopnest import problem_of
from infersim.errors import InfersimError
from infersim.simulator.engines.analytic import level_views
from infersim.workloads.ops import Gemm, OpBase


def _chips() -> list[Chip]:
    out = []
    for name in ("h100-sxm", "a100-sxm-80gb", "tpu-v4", "eyeriss-v1", "edge-npu"):
        chip = load_chip(name)
        out.append(chip)
        if chip.shared_sram is not None:
            out.extend(level_views(chip))
    return out


CHIPS = _chips()

gemms = st.builds(
    lambda m, k, n, batch, dtype: Gemm(name="g", m=m, k=k, n=n, batch=batch, a_dtype=dtype,
                                       b_dtype=dtype, out_dtype=dtype),
    m=st.sampled_from([1, 3, 64, 100, 257, 2048, 16900]),
    k=st.sampled_from([64, 128, 1000, 4096, 14336]),
    n=st.sampled_from([32, 300, 4096, 11008]),
    batch=st.sampled_from([1, 1, 4]),
    dtype=st.sampled_from(["bf16", "int8"]),
)


def _each(fn: Callable[[OpBase], object], ops: list[OpBase]) -> list[object]:
    out: list[object] = []
    for op in ops:
        try:
            out.append(fn(op))
        except (InfersimError, ValueError) as exc:  # the same refusal is the expectation
            out.append(type(exc).__name__)
    return out


def _refetch_free(op: OpBase, chip: Chip) -> bool:
    """Whether the traffic search answers ``op`` on ``chip`` without its grid."""
    try:
        return mapper_module._refetch_free(problem_of(op), chip) is not None
    except InfersimError:
        return False


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(st.one_of(gemms, gemms, CONVS), min_size=2, max_size=7),
       chip_index=st.integers(0, len(CHIPS) - 1), best=st.booleans())  # fmt: skip
def test_batched_searches_equal_the_searches_one_by_one(
    ops: list[OpBase], chip_index: int, best: bool
) -> None:
    chip = CHIPS[chip_index]
    dataflow = "best" if best else mapper_module.dataflows_of(chip)[-1]
    clear_cache()
    alone = _each(lambda op: map_op(op, chip, dataflow), ops)
    traffic_alone = _each(lambda op: map_traffic(op, chip).to_dict(), ops)
    dram_alone = _each(lambda op: traffic_of(op, chip), ops)
    clear_cache()
    search_many(ops, chip, dataflow)
    searched = mapper_module.STATS["searches"]
    batched = _each(lambda op: map_op(op, chip, dataflow), ops)
    # what the batch searched is cached: only the ops it left alone are searched now
    refused = {op.signature() for op, a in zip(ops, alone, strict=True) if isinstance(a, str)}
    assert mapper_module.STATS["searches"] - searched <= len(refused)
    traffic_many(ops, chip)
    searched = mapper_module.STATS["searches"]
    assert _each(lambda op: traffic_of(op, chip), ops) == dram_alone
    traffic_batched = _each(lambda op: map_traffic(op, chip).to_dict(), ops)
    if chip.cores == 1:  # else the traffic searches are the per-op ones
        # a plain GEMM that fetches every operand once has its DRAM figures without the grid
        # (mapper._refetch_free): map_traffic searches its tiling when asked
        refused = {op.signature() for op, t in zip(ops, traffic_alone, strict=True)
                   if isinstance(t, str) or _refetch_free(op, chip)}  # fmt: skip
        assert mapper_module.STATS["searches"] - searched <= len(refused)
    for a, b in zip(alone, batched, strict=True):
        if isinstance(a, str) or isinstance(b, str):
            assert a == b
        else:
            assert a.to_dict() == b.to_dict()  # type: ignore[attr-defined]
    assert traffic_alone == traffic_batched


def test_a_batch_fills_the_caches_a_bandwidth_variant_re_times() -> None:
    chip = load_chip("tpu-v4")
    ops = [Gemm(name="a", m=2048, k=4096, n=6144), Gemm(name="b", m=1, k=14336, n=4096),
           Gemm(name="c", m=300, k=777, n=1000)]  # fmt: skip
    assert search_many(ops, chip) == 3
    assert search_many(ops, chip) == 0  # cached
    searched = mapper_module.STATS["searches"]
    faster = chip.with_(**{"dram.bandwidth_bytes_per_s": 4 * chip.dram.bandwidth_bytes_per_s})
    warm = [map_op(op, faster) for op in ops]
    assert mapper_module.STATS["searches"] == searched
    clear_cache()
    assert [m.to_dict() for m in warm] == [map_op(op, faster).to_dict() for op in ops]


TWO_LEVEL = [load_chip(n) for n in ("h100-sxm", "a100-sxm-80gb", "tpu-v4")]
dequantized = st.builds(
    lambda m, k, n: Gemm(name="w4", m=m, k=k, n=n, a_dtype="fp16", b_dtype="q4_0",
                         out_dtype="fp16"),
    m=st.sampled_from([1, 64, 2048]), k=st.sampled_from([4096, 14336]),
    n=st.sampled_from([4096, 11008]),
)  # fmt: skip


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(st.one_of(gemms, gemms, dequantized, CONVS), min_size=2, max_size=6),
       chip_index=st.integers(0, len(TWO_LEVEL) - 1))  # fmt: skip
def test_batched_searches_with_backings_equal_the_searches_one_by_one(
    ops: list[OpBase], chip_index: int
) -> None:
    """The cores' searches of a two-level chip, each op timed with its DRAM level (as the
    engines search them), batched or one by one."""
    from infersim.simulator.engines import analytic

    chip = TWO_LEVEL[chip_index]
    view = level_views(chip)[0]
    found = _each(lambda op: analytic.op_backing(op, chip), ops)  # type: ignore[arg-type]
    kept = [(op, b) for op, b in zip(ops, found, strict=True) if isinstance(b, Backing)]

    def each_alone() -> list[object]:
        return [_each(lambda op, b=b: map_op(op, view, backing=b), [op])[0] for op, b in kept]

    clear_cache()
    alone = each_alone()
    clear_cache()
    search_many([op for op, _ in kept], view, "best", [b for _, b in kept])
    searched = mapper_module.STATS["searches"]
    batched = each_alone()
    refused = sum(isinstance(a, str) for a in alone)
    assert mapper_module.STATS["searches"] - searched <= refused
    for a, b in zip(alone, batched, strict=True):
        if isinstance(a, str) or isinstance(b, str):
            assert a == b
        else:
            assert a.to_dict() == b.to_dict() and a.levels == b.levels  # type: ignore[attr-defined]


TIMING_CHANGES = [
    {"dram.bandwidth_bytes_per_s": 2.0}, {"dram.bandwidth_bytes_per_s": 0.25}, {"freq_hz": 0.7},
]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(st.one_of(gemms, gemms, dequantized, CONVS), min_size=2, max_size=6),
       chip_index=st.integers(0, len(TWO_LEVEL)), change=st.sampled_from(TIMING_CHANGES))
def test_a_timing_variant_of_a_batch_is_re_timed_in_one_pass(
    ops: list[OpBase], chip_index: int, change: dict[str, float]
) -> None:
    """A step's ops searched in a batch on a chip, then on a chip that differs in its DRAM
    bandwidth or clock alone: the variant's costs equal a cold computation on it, nothing is
    searched again, and only the ops the batch searched one by one (more candidates than the
    seeds) are re-timed one by one: the others are priced again group by group."""
    from infersim.simulator.engines import analytic

    chip = [*TWO_LEVEL, load_chip("edge-npu")][chip_index]
    ((field, factor),) = change.items()
    variant = chip.with_(**{field: factor * (chip.dram.bandwidth_bytes_per_s
                                             if field.startswith("dram") else chip.freq_hz)})
    alone = []  # per-op bounded searches
    search_latency = mapper_module._search_latency

    def counted(*args: object, **kwargs: object) -> object:
        alone.append(args[4])  # the op's signature
        return search_latency(*args, **kwargs)  # type: ignore[arg-type]

    def costs(on: Chip) -> list[object]:
        return _each(lambda op: analytic.cost(op, on), ops)

    def clear() -> None:
        clear_cache()
        analytic.clear_cache()

    clear()
    cold = costs(variant)
    clear()
    mapper_module._search_latency = counted  # type: ignore[assignment]
    try:
        analytic.prefetch(ops, chip)
        base_alone = set(alone)
        searched = mapper_module.STATS["searches"]
        alone.clear()
        analytic.prefetch(ops, variant)
        warm = costs(variant)
    finally:
        mapper_module._search_latency = search_latency  # type: ignore[assignment]
    assert mapper_module.STATS["searches"] == searched  # nothing searched again
    assert set(alone) <= base_alone
    assert [repr(c) for c in warm] == [repr(c) for c in cold]
