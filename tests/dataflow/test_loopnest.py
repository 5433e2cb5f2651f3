"""The loop-nest analyzer: SCALE-Sim's fold formulas, the reuse rule, traffic, time."""

from __future__ import annotations

import math
from dataclasses import fields

import pytest
from dataflow_helpers import array_chip

from infersim.dataflow import LEVELS, OPERANDS, TEMPLATES, Mapping, Tiling, analyze
from infersim.errors import InfersimError, UnsupportedDtypeError
from infersim.workloads.ops import Attention, Conv2d, Gemm, Softmax

INT16 = {"a_dtype": "int16", "b_dtype": "int16", "out_dtype": "int16"}


def gemm(m: int, k: int, n: int, **kw: object) -> Gemm:
    return Gemm(m=m, k=k, n=n, **{**INT16, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "cycles"), [("ws", 5055), ("os", 3039), ("is", 2799)])
def test_design_example_cycles(name: str, cycles: int) -> None:
    """DESIGN.md: M=64, K=128, N=256 on 32×32 (confirmed by running SCALE-Sim)."""
    mapping = analyze(gemm(64, 128, 256), array_chip(32, 32), TEMPLATES[name])
    assert mapping.compute_cycles == cycles
    r, c = 32, 32
    folds, per_fold = {
        "ws": (math.ceil(128 / r) * math.ceil(256 / c), 2 * r + c + 64 - 2),
        "os": (math.ceil(64 / r) * math.ceil(256 / c), r + c + 128 - 2),
        "is": (math.ceil(128 / r) * math.ceil(64 / c), 2 * r + c + 256 - 2),
    }[name]
    assert mapping.folds == folds
    assert mapping.compute_cycles == folds * per_fold - 1


def test_ws_traffic_by_level() -> None:
    """WS on one tile: every operand crosses DRAM once; SCALE-Sim's SRAM counts; one array
    transfer per PE per streamed element; weights read from the RF by every MAC."""
    op = gemm(64, 128, 256)
    m = analyze(op, array_chip(32, 32), TEMPLATES["ws"])
    t = m.traffic
    assert set(t) == set(LEVELS)
    assert all(set(t[level]) == set(OPERANDS) for level in LEVELS)
    assert t["dram"]["input"].reads_bytes == 64 * 128 * 2
    assert t["dram"]["weight"].reads_bytes == 128 * 256 * 2
    assert t["dram"]["output"].writes_bytes == 64 * 256 * 2
    assert t["dram"]["output"].reads_bytes == 0
    assert m.dram_bytes == op.compulsory_bytes
    fc, fr = 256 // 32, 128 // 32
    assert t["sram"]["input"].reads_bytes == fc * 64 * 128 * 2
    assert t["sram"]["weight"].reads_bytes == 128 * 256 * 2
    assert t["sram"]["output"].writes_bytes == fr * 64 * 256 * 2
    assert t["sram"]["output"].reads_bytes == (fr - 1) * 64 * 256 * 2 + 64 * 256 * 2
    assert t["array"]["input"].reads_bytes == op.macs * 2
    assert t["register_file"]["weight"].reads_bytes == op.macs * 2
    assert t["register_file"]["input"].total_bytes == 0
    assert m.mapping_efficiency == 1.0


def test_reuse_rule_refetches_what_an_outer_loop_does_not_index() -> None:
    """K (n) tiles outside P (m) tiles: the input A is fetched again for every K tile; the
    weight and the output once. A tile no inner loop changes stays resident. With C (k) cut
    outside P (m), outputs spill partial sums to DRAM."""
    op = gemm(256, 256, 256)
    chip = array_chip(32, 32)
    m = analyze(op, chip, TEMPLATES["ws"], Tiling(tile={"K": 64, "P": 128}, order=("K", "P")))
    assert m.dram_loops == (("K", 4), ("P", 2))
    assert m.traffic["dram"]["input"].reads_bytes == 4 * op.a_bytes
    assert m.traffic["dram"]["weight"].reads_bytes == op.b_bytes
    resident = analyze(op, chip, TEMPLATES["ws"], Tiling(tile={"K": 64}, order=("K",)))
    assert resident.traffic["dram"]["input"].reads_bytes == op.a_bytes
    spill = analyze(op, chip, TEMPLATES["ws"], Tiling(tile={"C": 64, "P": 64}, order=("C", "P")))
    out = spill.traffic["dram"]["output"]
    assert out.writes_bytes == 4 * op.c_bytes
    assert out.reads_bytes == 3 * op.c_bytes
    assert spill.traffic["dram"]["weight"].reads_bytes == op.b_bytes  # stays while P iterates
    kept = analyze(op, chip, TEMPLATES["ws"], Tiling(tile={"C": 64, "P": 64}, order=("P", "C")))
    assert kept.traffic["dram"]["output"].writes_bytes == op.c_bytes
    assert kept.traffic["dram"]["input"].reads_bytes == op.a_bytes


def test_tiling_the_stream_adds_fold_overhead_and_remainders_are_exact() -> None:
    op = gemm(100, 64, 64)
    chip = array_chip(32, 32)
    whole = analyze(op, chip, TEMPLATES["ws"])
    cut = analyze(op, chip, TEMPLATES["ws"], Tiling(tile={"P": 64}))
    folds = 2 * 2
    assert cut.tiles == 2
    assert cut.folds == 2 * folds
    # tiles of 64 and 36 streamed rows: each fold pays the 2R + C − 2 overhead again
    overhead = 2 * 32 + 32 - 2
    assert cut.compute_cycles == folds * (overhead + 64) + folds * (overhead + 36) - 1
    assert whole.compute_cycles == folds * (overhead + 100) - 1
    assert cut.sram_bytes < whole.sram_bytes


def test_batch_of_a_gemm_multiplies_folds() -> None:
    one = analyze(gemm(64, 64, 64), array_chip(32, 32), TEMPLATES["os"])
    heads = analyze(gemm(64, 64, 64, batch=8), array_chip(32, 32), TEMPLATES["os"])
    assert heads.folds == 8 * one.folds
    assert heads.compute_cycles + 1 == 8 * (one.compute_cycles + 1)


def test_mac_rate_divides_the_streamed_cycles() -> None:
    op = gemm(64, 128, 256)
    slow = analyze(op, array_chip(32, 32), TEMPLATES["ws"])
    fast_chip = array_chip(32, 32, **{"array.macs_per_pe_per_cycle": {"int16": 2}})
    fast = analyze(op, fast_chip, TEMPLATES["ws"])
    assert fast.compute_cycles == fast.folds * (2 * 32 + 32 - 2 + 32) - 1
    assert fast.compute_cycles < slow.compute_cycles
    assert fast.compute_cycles >= op.macs / (32 * 32 * 2)


def test_cores_share_the_outer_tiles_in_waves() -> None:
    op = gemm(512, 256, 256)
    one = array_chip(32, 32)
    four = array_chip(32, 32, cores=4)
    tiling = Tiling(tile={"P": 64}, order=("P",))
    m1 = analyze(op, one, TEMPLATES["ws"], tiling)
    m4 = analyze(op, four, TEMPLATES["ws"], tiling)
    assert (m4.cores_used, m4.waves) == (4, 2)
    assert m4.compute_cycles == math.ceil((m1.compute_cycles + 1) / 8 * 2) - 1
    # each core fetches its own rows of A, and B once for itself
    assert m4.dram_bytes == m1.dram_bytes + 3 * op.b_bytes
    three = analyze(op, array_chip(32, 32, cores=3), TEMPLATES["ws"], tiling)
    assert three.waves == 3  # the last wave is partial
    assert three.compute_cycles > m4.compute_cycles


def test_a_reduction_loop_is_dealt_in_chunks() -> None:
    """Two output tiles on ten cores: the reduction loop C (16 slices) is dealt in chunks that
    fill the cores, s = min(16, 10 // 2) = 5 of ceil(16 / 5) = 4 slices (4 chunks, none
    empty); each core keeps its accumulators over its chunk, and the chunks' partial sums meet
    in DRAM: written once per chunk, read back on all but the first."""
    op = gemm(64, 1024, 64)
    tiling = Tiling(tile={"P": 64, "K": 32, "C": 64}, order=("K", "C", "P"))
    one = analyze(op, array_chip(32, 32), TEMPLATES["ws"], tiling)
    ten = analyze(op, array_chip(32, 32, cores=10), TEMPLATES["ws"], tiling)
    assert (ten.iterations, ten.cores_used, ten.waves) == (8, 8, 1)
    out_bytes = op.m * op.n * 2
    assert ten.traffic["dram"]["output"].writes_bytes == 4 * out_bytes
    assert ten.traffic["dram"]["output"].reads_bytes == 3 * out_bytes
    for name in ("input", "weight"):  # every slice of A and B is still fetched once
        assert ten.traffic["dram"][name] == one.traffic["dram"][name]
    assert ten.compute_cycles == (one.compute_cycles + 1) // 8 - 1  # 4 of the 32 equal tiles


def test_the_longest_chunk_sets_the_compute_time() -> None:
    """One output tile, 10 slices of C on four cores: chunks of ceil(10 / 4) = 3 slices (3, 3,
    3 and 1): the wave lasts the longest chunk, 3 of the 10 equal tiles."""
    op = gemm(64, 640, 64)
    tiling = Tiling(tile={"P": 64, "K": 64, "C": 64}, order=("K", "C", "P"))
    one = analyze(op, array_chip(32, 32), TEMPLATES["ws"], tiling)
    four = analyze(op, array_chip(32, 32, cores=4), TEMPLATES["ws"], tiling)
    assert (four.iterations, four.waves) == (4, 1)
    assert four.compute_cycles == (one.compute_cycles + 1) * 3 // 10 - 1
    out_bytes = op.m * op.n * 2
    assert four.traffic["dram"]["output"].writes_bytes == 4 * out_bytes


def test_row_stationary_reuses_ifmap_rows_diagonally() -> None:
    conv = Conv2d(
        in_h=16,
        in_w=16,
        kernel_h=3,
        kernel_w=3,
        in_channels=4,
        out_channels=8,
        dtype="int16",
        weight_dtype="int16",
        out_dtype="int16",
    )
    chip = array_chip(12, 14)
    rs = analyze(conv, chip, TEMPLATES["rs"], Tiling(rf={"K": 4, "C": 2}))
    ws = analyze(conv, chip, TEMPLATES["ws"])
    assert rs.macs == ws.macs == 14 * 14 * 3 * 3 * 4 * 8
    # im2col feeds every window position from SRAM; RS shares ifmap rows along diagonals
    assert rs.traffic["sram"]["input"].reads_bytes < ws.traffic["sram"]["input"].reads_bytes / 3
    assert rs.traffic["array"]["input"].reads_bytes < ws.traffic["array"]["input"].reads_bytes
    # the PE keeps 4 filters × 2 channels × 3 weights, a 2 × 3 ifmap window, one psum
    assert rs.rf_bytes == ((4 * 2 * 3 - 1) + (2 * 3 - 1)) * 2
    assert rs.pe_loops == (("Q", 14), ("N", 1), ("K", 4), ("C", 2), ("S", 3))


def test_time_is_load_then_overlapped_tiles_then_store() -> None:
    op = gemm(64, 128, 256)
    chip = array_chip(32, 32)
    m = analyze(op, chip, TEMPLATES["ws"])
    per_cycle = chip.dram.bandwidth_bytes_per_s / chip.freq_hz
    first = (op.a_bytes + op.b_bytes) / per_cycle
    last = op.c_bytes / per_cycle
    assert m.first_load_cycles == pytest.approx(first)
    assert m.total_cycles == pytest.approx(
        first + m.compute_cycles + last + chip.dram.latency_s * chip.freq_hz
    )
    assert m.time_s == pytest.approx(m.total_cycles / chip.freq_hz)
    slow = chip.with_(**{"calibration.dram_bandwidth_efficiency": 0.5})
    assert analyze(op, slow, TEMPLATES["ws"]).first_load_cycles == pytest.approx(2 * first)


def test_unsupported_dtype_and_bad_input_raise() -> None:
    with pytest.raises(UnsupportedDtypeError, match="cannot compute"):
        analyze(Gemm(m=8, k=8, n=8), array_chip(8, 8), TEMPLATES["ws"])  # bf16 on int16 chip
    with pytest.raises(InfersimError, match="no systolic loop nest"):
        analyze(Softmax(rows=4, cols=4), array_chip(8, 8), TEMPLATES["ws"])
    with pytest.raises(InfersimError, match="no systolic loop nest"):
        analyze(
            Attention(q_len=4, kv_len=4, heads=1, kv_heads=1, head_dim=8),
            array_chip(8, 8),
            TEMPLATES["ws"],
        )
    with pytest.raises(InfersimError, match="cannot be tiled"):
        analyze(gemm(8, 8, 8), array_chip(8, 8), TEMPLATES["ws"], Tiling(tile={"R": 1}))
    with pytest.raises(InfersimError, match="must be an integer >= 1"):
        analyze(gemm(8, 8, 8), array_chip(8, 8), TEMPLATES["ws"], Tiling(tile={"P": 0}))
    with pytest.raises(InfersimError, match="not split"):
        analyze(gemm(8, 8, 8), array_chip(8, 8), TEMPLATES["ws"], Tiling(rf={"K": 2}))
    with pytest.raises(InfersimError, match="loop order"):
        analyze(gemm(8, 8, 8), array_chip(8, 8), TEMPLATES["ws"], Tiling(order=("P", "P")))


def test_sparse_and_quantized_weights_move_their_stored_bytes() -> None:
    chip = array_chip(32, 32, **{"array.macs_per_pe_per_cycle": {"int16": 1, "int8": 1}})
    dense = Gemm(m=64, k=128, n=64, a_dtype="int8", b_dtype="int8", out_dtype="int8")
    sparse = dense.model_copy(update={"sparsity": "2:4"})
    d = analyze(dense, chip, TEMPLATES["ws"])
    s = analyze(sparse, chip, TEMPLATES["ws"])
    assert s.macs == sparse.executed_macs == d.macs / 2
    assert s.traffic["dram"]["weight"].reads_bytes == pytest.approx(sparse.b_bytes)
    assert s.traffic["dram"]["input"].reads_bytes == pytest.approx(dense.a_bytes)
    assert s.dram_bytes == pytest.approx(sparse.compulsory_bytes)


def test_to_dict_is_json_ready() -> None:
    import json

    m = analyze(gemm(64, 128, 256), array_chip(32, 32), TEMPLATES["ws"])
    data = json.loads(json.dumps(m.to_dict()))
    for key in (
        "dataflow",
        "compute_cycles",
        "folds",
        "mapping_efficiency",
        "compute_utilization",
        "dram_bytes",
        "sram_bytes",
        "time_s",
    ):
        assert key in data
    assert data["traffic_bytes"]["dram"]["input"]["reads"] == 64 * 128 * 2


def test_a_reduction_loop_is_dealt_in_no_more_chunks_than_the_level_above_holds() -> None:
    """The case above (two output tiles, 16 slices of C on ten cores: 4 chunks of 4 slices)
    below a level that holds 3 copies of the 64 x 64 x 2-byte output (3 x 8,192 bytes and
    change): s = min(16, 10 // 2, 3) = 3 chunks of ceil(16 / 3) = 6 slices (6, 6 and 4), 6
    items, the longest 6 of the 32 equal tiles; partial sums written 3 times, read back twice.
    Below a level that holds less than one copy, C is not split: 1 chunk, and no loop inner to
    it is dealt (2 items, the K tiles), one kernel."""
    op = gemm(64, 1024, 64)
    tiling = Tiling(tile={"P": 64, "K": 32, "C": 64}, order=("K", "C", "P"))
    out_bytes = op.m * op.n * 2
    one = analyze(op, array_chip(32, 32), TEMPLATES["ws"], tiling)
    holds = {"dram.capacity_bytes": 3 * out_bytes + 100}
    three = analyze(op, array_chip(32, 32, cores=10, **holds), TEMPLATES["ws"], tiling)
    assert (three.iterations, three.cores_used, three.waves, three.kernels) == (6, 6, 1, 2)
    assert three.traffic["dram"]["output"].writes_bytes == 3 * out_bytes
    assert three.traffic["dram"]["output"].reads_bytes == 2 * out_bytes
    assert three.compute_cycles == (one.compute_cycles + 1) * 6 // 32 - 1
    none = analyze(op, array_chip(32, 32, cores=10, **{"dram.capacity_bytes": out_bytes - 1}),
                   TEMPLATES["ws"], tiling)  # fmt: skip
    assert (none.iterations, none.cores_used, none.kernels) == (2, 2, 1)
    assert none.traffic["dram"]["output"] == one.traffic["dram"]["output"]


def test_a_split_pays_one_more_kernel_overhead_in_the_mapping_time() -> None:
    """The 4-chunk split above launches a second kernel: with a 2 us overhead on a 1 GHz clock
    its total cycles grow by 2,000 exactly over the same mapping on a chip without one; the
    unsplit mapping (one core) does not move."""
    op = gemm(64, 1024, 64)
    tiling = Tiling(tile={"P": 64, "K": 32, "C": 64}, order=("K", "C", "P"))
    overhead = {"calibration.kernel_overhead_s": 2e-6, "freq_hz": 1e9}
    for cores, kernels in ((10, 2), (1, 1)):
        free = analyze(op, array_chip(32, 32, cores=cores, freq_hz=1e9), TEMPLATES["ws"], tiling)
        paid = analyze(op, array_chip(32, 32, cores=cores, **overhead), TEMPLATES["ws"], tiling)
        assert free.kernels == paid.kernels == kernels
        assert paid.total_cycles - free.total_cycles == pytest.approx(2000.0 * (kernels - 1),
                                                                      abs=1e-6)  # fmt: skip
        assert paid.compute_cycles == free.compute_cycles


def test_a_mapping_holds_every_field_as_its_init_would_set_it() -> None:
    """A :class:`Mapping` and its tiling are made by setting their fields at once (the frozen
    dataclasses' ``__init__`` is slower): each holds every field, and equals the instance its
    ``__init__`` makes of the same values (which checks nothing: neither has a
    ``__post_init__``)."""
    assert not hasattr(Mapping, "__post_init__") and not hasattr(Tiling, "__post_init__")
    for name in ("ws", "os", "is"):
        m = analyze(gemm(100, 70, 300), array_chip(16, 16), TEMPLATES[name],
                    Tiling(tile={"K": 64, "C": 32}))
        assert set(vars(m)) == {f.name for f in fields(Mapping)}
        assert m == Mapping(**vars(m))
        assert set(vars(m.tiling)) == {f.name for f in fields(Tiling)}
        assert m.tiling == Tiling(**vars(m.tiling))


def test_a_candidate_of_the_array_figures_maps_as_its_tiling_does_alone() -> None:
    """:func:`mapping_of` given the array figures of many candidates (``evaluate_orders``)
    makes, for candidate ``i`` in order ``o``, the mapping of that tiling evaluated alone in
    plain floats: every field equal, its traffic and levels floats (not numpy scalars)."""
    import numpy as np

    from infersim.dataflow.loopnest import evaluate_orders, mapping_of, problem_of
    from infersim.dataflow.mapper import ORDERS

    chip = array_chip(16, 16)
    op = gemm(100, 70, 300)
    prob, tpl = problem_of(op), TEMPLATES["ws"]
    tile = {d: np.array([float(prob.dims[d])] * 3) for d in prob.dims}
    tile["K"], tile["C"] = np.array([64.0, 300.0, 70.0]), np.array([32.0, 70.0, 16.0])
    rf: dict[str, np.ndarray] = {}
    fig = evaluate_orders(prob, tpl, chip, tile, ORDERS, rf)
    for o in (0, 3):
        for i in range(3):
            tiling = Tiling(tile={d: int(tile[d][i]) for d in ("K", "C")}, order=ORDERS[o])
            alone = analyze(op, chip, tpl, tiling)
            full = Tiling(tile=tiling.extents(prob), order=ORDERS[o])  # every dim's extent
            got = mapping_of(prob, tpl, chip, full, fig, o, i)
            assert vars(got) == vars(alone)
            assert all(type(x) is float for level in got.traffic.values()
                       for a in level.values() for x in a)  # fmt: skip
