"""Cross-check against the real ``scalesim`` package (dev extra; skipped when it is absent).

Small layers only (each SCALE-Sim run well under a second): GEMMs and convolutions (one with a
stride that does not divide H − R), for ws/os/is on 8×8, 32×32 and 128×128 arrays. The inputs
SCALE-Sim runs are written by ``scalesim_io`` and read back through it.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from infersim.dataflow import ScaleSimConfig, read_config, read_topology, scalesim_report
from infersim.dataflow.scalesim_io import layout_csv, topology_csv
from infersim.workloads.ops import Conv2d, Gemm

scalesim_api = pytest.importorskip("scalesim.scale_sim")
pd = pytest.importorskip("pandas")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # scalesim on numpy 2.3

I8 = {"a_dtype": "int8", "b_dtype": "int8", "out_dtype": "int8"}
C8 = {"dtype": "int8", "weight_dtype": "int8", "out_dtype": "int8"}
CASES: list[tuple[Gemm | Conv2d, int]] = [
    (Gemm(name="g0", m=17, n=33, k=70, **I8), 8),
    (Gemm(name="g1", m=40, n=24, k=50, **I8), 32),
    (Gemm(name="g2", m=17, n=33, k=70, **I8), 128),
    (
        Conv2d(
            name="c10r3s2",
            in_h=10,
            in_w=10,
            kernel_h=3,
            kernel_w=3,
            in_channels=4,
            out_channels=8,
            stride=2,
            **C8,
        ),
        8,
    ),
    (
        Conv2d(
            name="c9r2s1",
            in_h=9,
            in_w=7,
            kernel_h=2,
            kernel_w=3,
            in_channels=3,
            out_channels=12,
            **C8,
        ),
        32,
    ),
]


def run_scalesim(folder: Path, gemm: bool) -> dict[str, float]:
    sim = scalesim_api.scalesim(
        save_disk_space=True,
        verbose=False,
        config=str(folder / "scale.cfg"),
        topology=str(folder / "topo.csv"),
        layout=str(folder / "layout.csv"),
        input_type_gemm=gemm,
    )
    with contextlib.redirect_stdout(io.StringIO()):
        sim.run_scale(top_path=str(folder / "out"))
    report = pd.read_csv(folder / "out" / "live" / "COMPUTE_REPORT.csv", skipinitialspace=True)
    report.columns = [str(c).strip() for c in report.columns]
    return {k: float(v) for k, v in report.iloc[0].items() if not str(k).startswith("Unnamed")}


CI_SAMPLE = 2
"""`make test` runs the first cases live; the rest carry the ``slow`` mark (`make test-all`)."""


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
@pytest.mark.parametrize(
    ("layer", "side"),
    [
        pytest.param(*c, id=c[0].name, marks=() if i < CI_SAMPLE else pytest.mark.slow)
        for i, c in enumerate(CASES)
    ],
)
def test_equal_to_scalesim(layer: Gemm | Conv2d, side: int, dataflow: str, tmp_path: Path) -> None:
    cfg = ScaleSimConfig(
        run_name="live",
        array_rows=side,
        array_cols=side,
        ifmap_sram_kb=256,
        filter_sram_kb=256,
        ofmap_sram_kb=128,
        dataflow=dataflow,
        interface_bandwidth="CALC",  # type: ignore[arg-type]
    )
    (tmp_path / "scale.cfg").write_text(cfg.to_ini())
    (tmp_path / "topo.csv").write_text(topology_csv([layer]))
    (tmp_path / "layout.csv").write_text(layout_csv([layer]))
    theirs = run_scalesim(tmp_path, isinstance(layer, Gemm))
    assert read_config(tmp_path / "scale.cfg").to_ini() == cfg.to_ini()
    [ours] = scalesim_report(cfg, read_topology(tmp_path / "topo.csv"))
    assert ours["Total Cycles"] == theirs["Total Cycles"]
    assert theirs["Stall Cycles"] == ours["Stall Cycles"] == 0
    for column in ("Overall Util %", "Mapping Efficiency %", "Compute Util %"):
        assert ours[column] == pytest.approx(theirs[column], abs=0.1), column
