"""Speed of the dataflow engine against SCALE-Sim at identical compute cycles.

For each layer: our ``map_op`` (tiling search, fresh cache) plus ``analyze`` of the layer as
SCALE-Sim streams it, timed against the real ``scalesim`` run of the same layer (when the
package is importable; otherwise SCALE-Sim's recorded wall time from
tests/dataflow/golden/). Prints both compute-cycle counts and the speed ratios.

    python benchmarks/bench_dataflow.py            # runs SCALE-Sim live, ~3 min (1024³: ~100-180 s)
    python benchmarks/bench_dataflow.py --quick    # the 1024³ layer from its recorded timing
    python benchmarks/bench_dataflow.py --recorded # every SCALE-Sim figure from the records
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import tempfile
import time
import warnings
from pathlib import Path

from infersim.dataflow import TEMPLATES, ScaleSimConfig, analyze, clear_cache, map_op
from infersim.dataflow.scalesim_io import layout_csv, topology_csv
from infersim.workloads.ops import Conv2d, Gemm

GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "dataflow" / "golden"
I8 = {"a_dtype": "int8", "b_dtype": "int8", "out_dtype": "int8"}
C8 = {"dtype": "int8", "weight_dtype": "int8", "out_dtype": "int8"}

LAYERS: list[tuple[str, Gemm | Conv2d, int, str, bool]] = [
    # (recorded case id, layer, array side, dataflow, slow)
    ("gemm_M64_N256_K128_a8x8_ws_calc", Gemm(name="l0", m=64, n=256, k=128, **I8), 8, "ws", False),
    ("gemm_M64_N256_K128_a8x8_is_calc", Gemm(name="l0", m=64, n=256, k=128, **I8), 8, "is", False),
    (
        "conv_c27r5s1_H27_R5_C16_K24_s1_a8x8_os_calc",
        Conv2d(
            name="c27r5s1",
            in_h=27,
            in_w=27,
            kernel_h=5,
            kernel_w=5,
            in_channels=16,
            out_channels=24,
            **C8,
        ),
        8,
        "os",
        False,
    ),
    (
        "conv_c27r5s1_H27_R5_C16_K24_s1_a32x32_ws_calc",
        Conv2d(
            name="c27r5s1",
            in_h=27,
            in_w=27,
            kernel_h=5,
            kernel_w=5,
            in_channels=16,
            out_channels=24,
            **C8,
        ),
        32,
        "ws",
        False,
    ),
    (
        "gemm_M1024_N1024_K1024_a128x128_ws_calc",
        Gemm(name="l0", m=1024, n=1024, k=1024, **I8),
        128,
        "ws",
        True,
    ),
]


def recorded() -> dict[str, tuple[int, float]]:
    """case id -> (compute cycles, SCALE-Sim wall seconds) from the golden records."""
    out = {}
    for name in ("scalesim_compute.csv", "bench_scalesim.csv"):
        with (GOLDEN / name).open(newline="") as f:
            for row in csv.DictReader(line for line in f if not line.startswith("#")):
                cycles = int(float(row["Total Cycles"])) - int(float(row["Stall Cycles"]))
                out[row["case_id"]] = (cycles, float(row["wall_s_run"]))
    return out


def run_scalesim(cfg: ScaleSimConfig, layer: Gemm | Conv2d) -> tuple[int, float]:
    """(compute cycles, seconds in run_scale) of one live SCALE-Sim run."""
    import pandas as pd
    from scalesim.scale_sim import scalesim

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "scale.cfg").write_text(cfg.to_ini())
        (folder / "topo.csv").write_text(topology_csv([layer]))
        (folder / "layout.csv").write_text(layout_csv([layer]))
        sim = scalesim(
            save_disk_space=True,
            verbose=False,
            config=str(folder / "scale.cfg"),
            topology=str(folder / "topo.csv"),
            layout=str(folder / "layout.csv"),
            input_type_gemm=isinstance(layer, Gemm),
        )
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sim.run_scale(top_path=str(folder / "out"))
        seconds = time.perf_counter() - start
        report = pd.read_csv(
            folder / "out" / cfg.run_name / "COMPUTE_REPORT.csv", skipinitialspace=True
        )
        report.columns = [str(c).strip() for c in report.columns]
        cycles = int(report["Total Cycles"].iloc[0] - report["Stall Cycles"].iloc[0])
    return cycles, seconds


def ours(cfg: ScaleSimConfig, layer: Gemm | Conv2d, repeat: int) -> tuple[int, float, float]:
    """(compute cycles, best seconds of analyze, best seconds of map_op + analyze)."""
    chip = cfg.to_chip()
    template = TEMPLATES[cfg.dataflow]
    analyze_s = map_s = float("inf")
    cycles = 0
    for _ in range(repeat):
        clear_cache()
        start = time.perf_counter()
        map_op(layer, chip, cfg.dataflow, "latency")
        middle = time.perf_counter()
        cycles = analyze(layer, chip, template).compute_cycles
        end = time.perf_counter()
        analyze_s = min(analyze_s, end - middle)
        map_s = min(map_s, end - start)
    return cycles, analyze_s, map_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the live 1024³ SCALE-Sim run")
    parser.add_argument("--recorded", action="store_true", help="no live SCALE-Sim runs at all")
    parser.add_argument("--repeat", type=int, default=5, help="timing repeats of our side")
    args = parser.parse_args()
    try:
        import scalesim.scale_sim  # noqa: F401

        live = not args.recorded
    except ImportError:
        live = False
    records = recorded()
    print(
        f"{'layer':48s} {'ours cyc':>9s} {'SCALE-Sim':>9s} {'SS s':>8s} {'analyze':>9s} "
        f"{'ratio':>8s} {'map+an.':>9s} {'ratio':>8s} source"
    )
    worst_analyze = worst_map = float("inf")
    identical = 0
    for case_id, layer, side, dataflow, slow in LAYERS:
        cfg = ScaleSimConfig(
            run_name="bench",
            array_rows=side,
            array_cols=side,
            ifmap_sram_kb=256,
            filter_sram_kb=256,
            ofmap_sram_kb=128,
            dataflow=dataflow,
            interface_bandwidth="CALC",
        )  # type: ignore[arg-type]
        cycles, analyze_s, map_s = ours(cfg, layer, args.repeat)
        if live and not (slow and args.quick):
            their_cycles, their_s = run_scalesim(cfg, layer)
            source = "live"
        else:
            their_cycles, their_s = records[case_id]
            source = "recorded"
        identical += cycles == their_cycles
        worst_analyze = min(worst_analyze, their_s / analyze_s)
        worst_map = min(worst_map, their_s / map_s)
        print(
            f"{case_id:48s} {cycles:9d} {their_cycles:9d} {their_s:8.2f} "
            f"{analyze_s * 1e3:7.2f}ms {their_s / analyze_s:7.0f}x {map_s * 1e3:7.1f}ms "
            f"{their_s / map_s:7.0f}x {source}"
        )
    print(
        f"identical compute cycles: {identical}/{len(LAYERS)}; slowest speed-up: analyze "
        f"{worst_analyze:.0f}x, map+analyze {worst_map:.0f}x"
    )


if __name__ == "__main__":
    main()
