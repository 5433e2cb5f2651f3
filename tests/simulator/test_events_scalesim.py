"""SCALE-Sim's memory system replayed by the event engine: total and stall cycles against
SCALE-Sim 3.0.0's USER-bandwidth runs (golden rows, and the live package on small layers)."""

from __future__ import annotations

import contextlib
import csv
import io
from pathlib import Path

import pytest

from infersim.dataflow.scalesim_io import (
    ScaleSimConfig,
    layout_csv,
    read_topology,
    scalesim_out_size,
    topology_csv,
)
from infersim.errors import InfersimError
from infersim.simulator.engines.events.scalesim import simulate_layer
from infersim.workloads.ops import Conv2d, Gemm

GOLDEN = Path(__file__).parents[1] / "dataflow" / "golden" / "scalesim_compute.csv"
I8 = {"a_dtype": "int8", "b_dtype": "int8", "out_dtype": "int8"}
C8 = {"dtype": "int8", "weight_dtype": "int8", "out_dtype": "int8"}


def golden_rows(mode: str) -> list[dict[str, str]]:
    with GOLDEN.open(newline="") as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    return [r for r in rows if r["bandwidth_mode"] == mode]


def case(row: dict[str, str]) -> tuple[ScaleSimConfig, Gemm | Conv2d]:
    """The config and layer of a golden row (SCALE-Sim's output size for convolutions)."""
    def words(key: str) -> float | None:
        return float(row[key]) if row[key] else None

    cfg = ScaleSimConfig(
        run_name="golden", array_rows=int(row["array_rows"]), array_cols=int(row["array_cols"]),
        ifmap_sram_kb=float(row["ifmap_sram_kb"]), filter_sram_kb=float(row["filter_sram_kb"]),
        ofmap_sram_kb=float(row["ofmap_sram_kb"]), dataflow=row["dataflow"],  # type: ignore[arg-type]
        interface_bandwidth=row["bandwidth_mode"],  # type: ignore[arg-type]
        bandwidth_words_per_cycle=words("bandwidth_words_per_cycle"),
        ifmap_bank_bandwidth_words=words("ifmap_dram_bw_words"),
        filter_bank_bandwidth_words=words("filter_dram_bw_words"),
    )
    if row["kind"] == "gemm":
        return cfg, Gemm(name="l", m=int(row["M"]), n=int(row["N"]), k=int(row["K"]), **I8)
    h, w, r, s, stride = (int(row[k]) for k in ("ifmap_h", "ifmap_w", "filter_h", "filter_w",
                                                 "stride"))
    e, f = scalesim_out_size(h, r, stride), scalesim_out_size(w, s, stride)
    return cfg, Conv2d(name="c", in_h=r + (e - 1) * stride, in_w=s + (f - 1) * stride,
                       kernel_h=r, kernel_w=s, in_channels=int(row["channels"]),
                       out_channels=int(row["num_filter"]), stride=stride, **C8)


def test_stall_cycles_match_scalesim_user_runs() -> None:
    """All 110 USER-bandwidth golden rows (GEMMs on 8×8 and 32×32 arrays, ws/os/is,
    bandwidth 1/4/16 words per cycle, SRAMs of 4/16/64 kB): per-layer error printed; each
    within 10% (the replay is exact on every row)."""
    rows = golden_rows("USER")
    assert len(rows) == 110
    errors = []
    print("\ncase                                                total (ours / SCALE-Sim)    "
          "stall (ours / SCALE-Sim)  error")
    for row in rows:
        cfg, op = case(row)
        ours = simulate_layer(cfg, op)
        total, stall = int(float(row["Total Cycles"])), int(float(row["Stall Cycles"]))
        err = ours.total_cycles / total - 1
        errors.append(abs(err))
        print(f"{row['case_id']:50s} {ours.total_cycles:>10} / {total:<10} "
              f"{ours.stall_cycles:>10} / {stall:<10} {err:+.2%}")
        assert abs(err) <= 0.10, row["case_id"]
        assert ours.compute_cycles == total - stall
        assert (ours.total_cycles, ours.stall_cycles) == (total, stall), row["case_id"]
    print(f"max |error| {max(errors):.2%}, mean {sum(errors) / len(errors):.2%}")


@pytest.mark.parametrize("row", golden_rows("CALC")[::6], ids=lambda r: r["case_id"])
def test_calc_mode_never_stalls(row: dict[str, str]) -> None:
    cfg, op = case(row)
    ours = simulate_layer(cfg, op)
    assert ours.stall_cycles == 0
    assert ours.total_cycles == int(float(row["Total Cycles"]))


def test_replay_timeline_holds_the_refills_and_stalls() -> None:
    row = next(r for r in golden_rows("USER")
               if r["case_id"] == "gemm_M17_N33_K70_a8x8_os_user_bw1_sram4")
    cfg, op = case(row)
    ours = simulate_layer(cfg, op)
    spans = ours.timeline.spans
    refills = [s for s in spans if s.resource in ("dram:ifmap", "dram:filter")
               and s.label.startswith("refill")]
    stalls = [s for s in spans if s.resource == "array:stall"]
    assert len(refills) == ours.ifmap_refills + ours.filter_refills > 0
    assert sum(s.end_cycles - s.start_cycles for s in stalls) == ours.stall_cycles
    assert max(s.end_cycles for s in spans if s.resource.startswith("array")) == (
        ours.total_cycles)
    assert ours.timeline == simulate_layer(cfg, op).timeline  # deterministic


def test_bad_inputs_are_refused() -> None:
    cfg = ScaleSimConfig(run_name="x", array_rows=8, array_cols=8, ifmap_sram_kb=4,
                         filter_sram_kb=4, ofmap_sram_kb=4, dataflow="ws",
                         interface_bandwidth="USER", bandwidth_words_per_cycle=2.5)
    with pytest.raises(InfersimError, match="whole number"):
        simulate_layer(cfg, Gemm(name="g", m=8, k=8, n=8, **I8))
    with pytest.raises(InfersimError, match="batch 1"):
        simulate_layer(cfg, Gemm(name="g", m=8, k=8, n=8, batch=2, **I8))


scalesim_api = None
with contextlib.suppress(ImportError):
    from scalesim import scale_sim as scalesim_api  # type: ignore[no-redef]

LIVE: list[tuple[Gemm | Conv2d, int, str, int, int]] = [
    (Gemm(name="g0", m=40, n=24, k=50, **I8), 8, "ws", 2, 1),
    (Gemm(name="g1", m=40, n=24, k=50, **I8), 8, "is", 1, 1),
    (Gemm(name="g2", m=17, n=33, k=70, **I8), 8, "os", 3, 2),
    (Conv2d(name="c9r2s1", in_h=9, in_w=7, kernel_h=2, kernel_w=3, in_channels=3,
            out_channels=12, **C8), 8, "ws", 2, 1),
]


@pytest.mark.skipif(scalesim_api is None, reason="the scalesim package is not installed")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize(
    ("layer", "side", "dataflow", "bandwidth", "sram_kb"),
    [  # `make test` runs two live; the rest carry the ``slow`` mark (`make test-all`)
        pytest.param(*c, id=f"{c[0].name}-{c[2]}", marks=() if i < 2 else pytest.mark.slow)
        for i, c in enumerate(LIVE)
    ],
)
def test_equal_to_live_scalesim(layer: Gemm | Conv2d, side: int, dataflow: str,
                                bandwidth: int, sram_kb: int, tmp_path: Path) -> None:
    """Layers outside the golden file (one a convolution) with USER bandwidth, run live."""
    pd = pytest.importorskip("pandas")
    cfg = ScaleSimConfig(
        run_name="live", array_rows=side, array_cols=side, ifmap_sram_kb=sram_kb,
        filter_sram_kb=sram_kb, ofmap_sram_kb=sram_kb, dataflow=dataflow,  # type: ignore[arg-type]
        interface_bandwidth="USER", bandwidth_words_per_cycle=bandwidth,  # type: ignore[arg-type]
    )
    (tmp_path / "scale.cfg").write_text(cfg.to_ini())
    (tmp_path / "topo.csv").write_text(topology_csv([layer]))
    (tmp_path / "layout.csv").write_text(layout_csv([layer]))
    assert scalesim_api is not None
    sim = scalesim_api.scalesim(
        save_disk_space=True, verbose=False, config=str(tmp_path / "scale.cfg"),
        topology=str(tmp_path / "topo.csv"), layout=str(tmp_path / "layout.csv"),
        input_type_gemm=isinstance(layer, Gemm),
    )
    with contextlib.redirect_stdout(io.StringIO()):
        sim.run_scale(top_path=str(tmp_path / "out"))
    report = pd.read_csv(tmp_path / "out" / "live" / "COMPUTE_REPORT.csv", skipinitialspace=True)
    report.columns = [str(c).strip() for c in report.columns]
    theirs = report.iloc[0]
    [op] = read_topology(tmp_path / "topo.csv")
    ours = simulate_layer(cfg, op)
    err = ours.total_cycles / float(theirs["Total Cycles"]) - 1
    print(f"{layer.name} {dataflow}: ours {ours.total_cycles} / {ours.stall_cycles} stall, "
          f"SCALE-Sim {theirs['Total Cycles']} / {theirs['Stall Cycles']} ({err:+.2%})")
    assert abs(err) <= 0.10
    assert ours.stall_cycles > 0
    assert (ours.total_cycles, ours.stall_cycles) == (
        int(theirs["Total Cycles"]), int(theirs["Stall Cycles"]))
