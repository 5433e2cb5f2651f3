#!/usr/bin/env python3
# ruff: noqa
# Copied from the generation workspace (run there with a venv holding scalesim==3.0.0 and
# numpy<2.4). scalesim_compute.csv beside it is a column subset of the golden.csv it writes;
# scalesim_grid.csv and grid_timings.csv are what `--grid` writes here, run from the repository
# root with its .venv (the grid's cost estimate imports infersim to choose the cases it runs).
"""Generate SCALE-Sim 3.0.0 golden (reference) data for infersim's dataflow engine.

For every case this script writes a SCALE-Sim v3 config (.cfg, INI), a topology CSV and a
layout CSV into a per-case temporary directory, runs SCALE-Sim through its Python API in a
child process (so that a run slower than --timeout seconds can be killed and skipped), reads
COMPUTE_REPORT.csv, BANDWIDTH_REPORT.csv and DETAILED_ACCESS_REPORT.csv, and upserts one row
per case into golden.csv (rows with the same case_id are replaced, others are kept).
Timings (seconds) go to timings.csv, including the skipped (timed-out / failed) cases.

A copy of the exact inputs of every case is kept in inputs/<case_id>/ (scale.cfg, topo.csv,
layout.csv) so any row can be re-run by hand:
    .venv/bin/python -m scalesim.scale -c inputs/<id>/scale.cfg -t inputs/<id>/topo.csv \
        -l inputs/<id>/layout.csv -i gemm|conv -p /tmp/out -s N

Usage:
    .venv/bin/python gen_golden.py                      # groups gemm, conv, stall, alexnet
    .venv/bin/python gen_golden.py --groups gemm conv   # some groups
    .venv/bin/python gen_golden.py --list               # print the case ids only
Groups: gemm, conv, stall, alexnet; and grid (never by default), the finite-bandwidth grid:
    .venv/bin/python tests/dataflow/golden/gen_golden.py --grid      # -> scalesim_grid.csv
The grid is a seeded sample (GRID_SEED) of layers x dataflows x arrays x Bandwidth x unequal
SRAM sizes, USER bandwidth; its cases run one after another in one worker process (a case past
--timeout kills the worker, is recorded in grid_timings.csv and skipped), and every row carries
SCALE-Sim's three reports whole (COMPUTE, BANDWIDTH, DETAILED_ACCESS columns).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden.csv"
TIMINGS = HERE / "timings.csv"
INPUTS = HERE / "inputs"

RUN_NAME = "run"

# Fixed config values (documented in NOTES.md).
CALC_SRAM_KB = (256, 256, 128)  # ifmap, filter, ofmap kB (SCALE-Sim sample-config sizes)
OFFSETS = (0, 10000000, 20000000)  # ifmap, filter, ofmap address offsets (SCALE-Sim defaults)
REQ_BUF = 32  # Read/WriteRequestBuffer (only used with Ramulator traces)

# ----------------------------------------------------------------------------- case list

GEMM_SHAPES = [
    (64, 256, 128),
    (17, 33, 70),
    (100, 7, 300),
    (1, 512, 256),
    (256, 64, 64),
    (128, 128, 128),
]  # (M, N, K)
GEMM_ARRAYS = [(8, 8), (32, 32), (128, 128)]
DATAFLOWS = ["ws", "os", "is"]

CONV_LAYERS = [  # (name, H=W, R=S, C, K(num_filter), stride)
    ("c14r3s1", 14, 3, 16, 32, 1),
    ("c15r3s2", 15, 3, 8, 16, 2),
    ("c16r5s3", 16, 5, 3, 8, 3),
    ("c27r5s1", 27, 5, 16, 24, 1),
    # extra: strides that do not divide (H - R), to pin down the output-size rule
    ("c10r3s2", 10, 3, 4, 8, 2),
    ("c13r4s4", 13, 4, 2, 6, 4),
]
CONV_ARRAYS = [(8, 8), (32, 32)]

STALL_SHAPES = [(64, 256, 128), (17, 33, 70)]
STALL_ARRAYS = [(8, 8), (32, 32)]
STALL_BWS = [1, 4, 16]
STALL_SRAM_KB = [4, 16, 64]

ALEXNET = [  # (name, H=W (padded), R=S, C, K, stride)
    ("alex_conv1", 227, 11, 3, 96, 4),
    ("alex_conv2", 31, 5, 96, 256, 1),
    ("alex_conv3", 15, 3, 256, 384, 1),
    ("alex_conv4", 15, 3, 384, 384, 1),
    ("alex_conv5", 15, 3, 384, 256, 1),
]


def _base(
    kind,
    group,
    rows,
    cols,
    df,
    mode="CALC",
    bw="",
    sram=CALC_SRAM_KB,
    ifmap_bank_bw=None,
    filter_bank_bw=None,
):
    d = dict(
        kind=kind,
        group=group,
        array_rows=rows,
        array_cols=cols,
        dataflow=df,
        bandwidth_mode=mode,
        bandwidth_words_per_cycle=bw,
        ifmap_sram_kb=sram[0],
        filter_sram_kb=sram[1],
        ofmap_sram_kb=sram[2],
    )
    # [layout] IfmapSRAMBankBandwidth / FilterSRAMBankBandwidth: in USER mode these (not
    # `Bandwidth`) are the ifmap / filter DRAM->SRAM words per cycle (see NOTES.md).
    d["ifmap_dram_bw_words"] = ifmap_bank_bw if ifmap_bank_bw is not None else (bw or 10)
    d["filter_dram_bw_words"] = filter_bank_bw if filter_bank_bw is not None else (bw or 10)
    return d


def gemm_case(group, M, N, K, rows, cols, df, **kw):
    c = _base("gemm", group, rows, cols, df, **kw)
    c.update(M=M, N=N, K=K)
    tag = (
        "calc"
        if c["bandwidth_mode"] == "CALC"
        else (f"user_bw{c['bandwidth_words_per_cycle']}_sram{c['ifmap_sram_kb']}")
    )
    if c["bandwidth_mode"] == "USER" and (
        c["ifmap_dram_bw_words"] != c["bandwidth_words_per_cycle"]
    ):
        tag += f"_rdbw{c['ifmap_dram_bw_words']}"
    c["case_id"] = f"gemm_M{M}_N{N}_K{K}_a{rows}x{cols}_{df}_{tag}"
    return c


def conv_case(group, name, H, R, C, Kf, stride, rows, cols, df, **kw):
    c = _base("conv", group, rows, cols, df, **kw)
    c.update(
        layer_name=name,
        ifmap_h=H,
        ifmap_w=H,
        filter_h=R,
        filter_w=R,
        channels=C,
        num_filter=Kf,
        stride=stride,
    )
    c["case_id"] = f"conv_{name}_H{H}_R{R}_C{C}_K{Kf}_s{stride}_a{rows}x{cols}_{df}_calc"
    return c


def all_cases():
    cases = []
    for M, N, K in GEMM_SHAPES:
        for r, c in GEMM_ARRAYS:
            for df in DATAFLOWS:
                cases.append(gemm_case("gemm", M, N, K, r, c, df))
    for name, H, R, C, Kf, s in CONV_LAYERS:
        for r, c in CONV_ARRAYS:
            for df in DATAFLOWS:
                cases.append(conv_case("conv", name, H, R, C, Kf, s, r, c, df))
    for M, N, K in STALL_SHAPES:
        for r, c in STALL_ARRAYS:
            for df in DATAFLOWS:
                for bw in STALL_BWS:
                    for kb in STALL_SRAM_KB:
                        cases.append(
                            gemm_case(
                                "stall", M, N, K, r, c, df, mode="USER", bw=bw, sram=(kb, kb, kb)
                            )
                        )
    # Quirk demonstration: `Bandwidth`=1 but the [layout] bank bandwidths left at 10.
    for df in DATAFLOWS:
        cases.append(
            gemm_case(
                "stall",
                64,
                256,
                128,
                32,
                32,
                df,
                mode="USER",
                bw=1,
                sram=(4, 4, 4),
                ifmap_bank_bw=10,
                filter_bank_bw=10,
            )
        )
    for name, H, R, C, Kf, s in ALEXNET:
        for df in DATAFLOWS:
            cases.append(conv_case("alexnet", name, H, R, C, Kf, s, 12, 14, df))
    return cases


# ----------------------------------------------------------------------------- input files


def cfg_text(c) -> str:
    bw_line = (
        f"Bandwidth = {c['bandwidth_words_per_cycle']}\n" if c["bandwidth_mode"] == "USER" else ""
    )
    return (
        "[general]\n"
        f"run_name = {RUN_NAME}\n"
        "\n"
        "[architecture_presets]\n"
        f"ArrayHeight = {c['array_rows']}\n"
        f"ArrayWidth = {c['array_cols']}\n"
        f"ifmapsramszkB = {c['ifmap_sram_kb']}\n"
        f"filtersramszkB = {c['filter_sram_kb']}\n"
        f"ofmapsramszkB = {c['ofmap_sram_kb']}\n"
        f"IfmapOffset = {OFFSETS[0]}\n"
        f"FilterOffset = {OFFSETS[1]}\n"
        f"OfmapOffset = {OFFSETS[2]}\n"
        f"Dataflow = {c['dataflow']}\n"
        f"{bw_line}"
        f"ReadRequestBuffer = {REQ_BUF}\n"
        f"WriteRequestBuffer = {REQ_BUF}\n"
        "\n"
        "[layout]\n"
        "IfmapCustomLayout = False\n"
        f"IfmapSRAMBankBandwidth = {c['ifmap_dram_bw_words']}\n"
        f"IfmapSRAMBankNum = {c.get('bank_num', 1)}\n"
        "IfmapSRAMBankPort = 2\n"
        "FilterCustomLayout = False\n"
        f"FilterSRAMBankBandwidth = {c['filter_dram_bw_words']}\n"
        f"FilterSRAMBankNum = {c.get('bank_num', 1)}\n"
        "FilterSRAMBankPort = 2\n"
        "\n"
        "[sparsity]\n"
        "SparsitySupport = false\n"
        "SparseRep = ellpack_block\n"
        "OptimizedMapping = false\n"
        "BlockSize = 8\n"
        "RandomNumberGeneratorSeed = 40\n"
        "\n"
        "[run_presets]\n"
        f"InterfaceBandwidth = {c['bandwidth_mode']}\n"
        "UseRamulatorTrace = False\n"
    )


def topo_text(c) -> str:
    if c["kind"] == "gemm":
        return f"Layer, M, N, K,\nl0, {c['M']}, {c['N']}, {c['K']},\n"
    return (
        "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, "
        "Num Filter, Strides,\n"
        f"{c['layer_name']}, {c['ifmap_h']}, {c['ifmap_w']}, {c['filter_h']}, "
        f"{c['filter_w']}, {c['channels']}, {c['num_filter']}, {c['stride']},\n"
    )


LAYOUT_HEADER = (
    "Layer name, IFMAP Height Intraline Factor, IFMAP Width Intraline Factor, "
    "Filter Height Intraline Factor, Filter Width Intraline Factor, "
    "Channel Intraline Factor, Num Filter Intraline Factor, "
    "IFMAP Height Intraline Order, IFMAP Width Intraline Order, "
    "Channel Intraline Order, IFMAP Height Interline Order, "
    "IFMAP Width Interline Order, Channel Interline Order, "
    "Num Filter Intraline Order, Channel Intraline Order, "
    "Filter Height Intraline Order, Filter Width Intraline Order, "
    "Num Filter Interline Order, Channel Interline Order, "
    "Filter Height Interline Order, Filter Width Interline Order,\n"
)


def layout_text(c) -> str:
    # Never read while [layout] *CustomLayout = False, but scalesim parses the file: one row of
    # ints per layer, trailing comma. Factors 1 and identity orders.
    name = "l0" if c["kind"] == "gemm" else c["layer_name"]
    return LAYOUT_HEADER + f"{name},1,1,1,1,1,1,3,4,5,0,1,2,4,5,6,7,0,1,2,3,\n"


# ----------------------------------------------------------------------------- derived values


def conv_out(H, R, s):
    """SCALE-Sim topology_utils: ofmap = ceil((H - R + s) / s)  (== ceil((H-R)/s) + 1)."""
    return int(math.ceil((H - R + s) / s))


def sim_mnk(c):
    """The (M, N, K) GEMM that SCALE-Sim simulates for this case, and (E, F)."""
    if c["kind"] == "gemm":
        return c["M"], c["N"], c["K"], c["M"], 1
    E = conv_out(c["ifmap_h"], c["filter_h"], c["stride"])
    F = conv_out(c["ifmap_w"], c["filter_w"], c["stride"])
    return E * F, c["num_filter"], c["filter_h"] * c["filter_w"] * c["channels"], E, F


def demand_lines(c):
    """Number of demand rows SCALE-Sim steps through (= compute cycles + 1)."""
    M, N, K, _, _ = sim_mnk(c)
    R, C = c["array_rows"], c["array_cols"]
    df = c["dataflow"]
    if df == "ws":
        return math.ceil(K / R) * math.ceil(N / C) * (2 * R + C + M - 2)
    if df == "is":
        return math.ceil(K / R) * math.ceil(M / C) * (2 * R + C + N - 2)
    return math.ceil(M / R) * math.ceil(N / C) * (R + C + K - 2)


# ----------------------------------------------------------------------------- child process


def child_run(case_dir: str, gemm: bool) -> dict:
    t0 = time.perf_counter()
    from scalesim.scale_sim import scalesim  # noqa: E402  (import timed separately)

    t1 = time.perf_counter()
    s = scalesim(
        save_disk_space=True,
        verbose=False,
        config=os.path.join(case_dir, "scale.cfg"),
        topology=os.path.join(case_dir, "topo.csv"),
        layout=os.path.join(case_dir, "layout.csv"),
        input_type_gemm=gemm,
    )
    t2 = time.perf_counter()
    s.run_scale(top_path=os.path.join(case_dir, "out"))
    t3 = time.perf_counter()
    return {"wall_s_import": t1 - t0, "wall_s_init": t2 - t1, "wall_s_run": t3 - t2}


def read_report(path: Path) -> dict:
    import pandas as pd

    if not path.exists():
        return {}
    df = pd.read_csv(path, skipinitialspace=True)
    df = df.loc[:, [col for col in df.columns if not str(col).startswith("Unnamed")]]
    df.columns = [str(col).strip() for col in df.columns]
    row = df.iloc[0].to_dict()
    row.pop("LayerID", None)
    return row


def run_case(c: dict, timeout: float) -> tuple[dict | None, dict]:
    tmp = Path(tempfile.mkdtemp(prefix="ssref_"))
    try:
        files = {"scale.cfg": cfg_text(c), "topo.csv": topo_text(c), "layout.csv": layout_text(c)}
        keep = INPUTS / c["case_id"]
        keep.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (tmp / name).write_text(text)
            (keep / name).write_text(text)
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--child",
            str(tmp),
            "gemm" if c["kind"] == "gemm" else "conv",
        ]
        t0 = time.perf_counter()
        status, info = "ok", {}
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            if p.returncode != 0:
                status = f"error rc={p.returncode}: {p.stderr.strip().splitlines()[-1:]}"
            else:
                info = json.loads(p.stdout.strip().splitlines()[-1])
        except subprocess.TimeoutExpired:
            status = f"timeout>{timeout:.0f}s"
        wall = time.perf_counter() - t0
        timing = {
            "case_id": c["case_id"],
            "group": c["group"],
            "kind": c["kind"],
            "array_rows": c["array_rows"],
            "array_cols": c["array_cols"],
            "dataflow": c["dataflow"],
            "bandwidth_mode": c["bandwidth_mode"],
            "demand_lines": demand_lines(c),
            "status": status,
            "wall_s_run": round(info.get("wall_s_run", float("nan")), 4),
            "wall_s_init": round(info.get("wall_s_init", float("nan")), 4),
            "wall_s_import": round(info.get("wall_s_import", float("nan")), 4),
            "wall_s_subprocess": round(wall, 4),
        }
        if status != "ok":
            return None, timing
        out = tmp / "out" / RUN_NAME
        row = {k: c.get(k, "") for k in ROW_INPUT_COLS}
        M, N, K, E, F = sim_mnk(c)
        row.update(M=M, N=N, K=K, ofmap_h=E, ofmap_w=F)
        row.update(read_report(out / "COMPUTE_REPORT.csv"))
        row.update(read_report(out / "BANDWIDTH_REPORT.csv"))
        row.update(read_report(out / "DETAILED_ACCESS_REPORT.csv"))
        row["wall_s_run"] = timing["wall_s_run"]
        return row, timing
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


ROW_INPUT_COLS = [
    "case_id",
    "group",
    "kind",
    "array_rows",
    "array_cols",
    "dataflow",
    "bandwidth_mode",
    "bandwidth_words_per_cycle",
    "ifmap_dram_bw_words",
    "filter_dram_bw_words",
    "ifmap_sram_kb",
    "filter_sram_kb",
    "ofmap_sram_kb",
    "M",
    "N",
    "K",
    "layer_name",
    "ifmap_h",
    "ifmap_w",
    "filter_h",
    "filter_w",
    "channels",
    "num_filter",
    "stride",
    "ofmap_h",
    "ofmap_w",
]


def upsert_csv(path: Path, rows: list[dict], key="case_id"):
    old = []
    if path.exists():
        with open(path, newline="") as f:
            old = list(csv.DictReader(f))
    new_ids = {r[key] for r in rows}
    merged = [r for r in old if r[key] not in new_ids] + rows
    cols: list[str] = []
    for r in merged:
        for k in r:
            if k not in cols:
                cols.append(k)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for r in merged:
            w.writerow(r)



# ----------------------------------------------------------------------------- the grid

GRID = HERE / "scalesim_grid.csv"
GRID_TIMINGS = HERE / "grid_timings.csv"
GRID_SEED = 17
GRID_DRAWS = 5  # configurations drawn per (layer, dataflow)
GRID_MAX_LINES = 30_000  # demand rows (compute cycles + 1) a case may have: SCALE-Sim ~60 us each
GRID_MAX_S = 6.0  # estimated SCALE-Sim seconds a case may take (estimate_s)
GRID_ARRAYS = [
    (4, 4), (8, 8), (16, 16), (32, 32), (64, 64), (128, 128), (256, 256),
    (4, 64), (64, 4), (8, 32), (32, 8), (16, 128), (128, 16), (32, 256), (256, 32),
]
GRID_BWS = [1, 2, 4, 8, 10, 16, 64]
GRID_SRAM_KB = [1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
GRID_BANK_QUIRK = 0.2  # share of cases keeping the sample config's [layout] 10 words x 10 banks
GRID_GEMMS = [  # (name, M, N, K)
    ("m1_n256_k256", 1, 256, 256),
    ("m1_n1000_k64", 1, 1000, 64),
    ("m1_n64_k1000", 1, 64, 1000),
    ("m1_n30_k30", 1, 30, 30),
    ("m3_n100_k20", 3, 100, 20),
    ("m17_n33_k70", 17, 33, 70),
    ("m64_n256_k128", 64, 256, 128),
    ("m100_n7_k300", 100, 7, 300),
    ("m256_n64_k64", 256, 64, 64),
    ("m128_n128_k128", 128, 128, 128),
    ("m40_n24_k50", 40, 24, 50),
    ("m200_n200_k3", 200, 200, 3),
    ("m512_n16_k8", 512, 16, 8),
    ("m8_n512_k64", 8, 512, 64),
    ("m33_n65_k129", 33, 65, 129),
    ("m256_n1_k256", 256, 1, 256),
    ("m64_n64_k1", 64, 64, 1),
    ("m300_n40_k100", 300, 40, 100),
    ("m1024_n8_k16", 1024, 8, 16),
    ("m12_n12_k2048", 12, 12, 2048),
]
GRID_CONVS = [  # (name, H, W, R, S, C, num_filter, stride); "edge": a stride not dividing H - R
    ("c14_r3_s1", 14, 14, 3, 3, 16, 32, 1),
    ("c15_r3_s2", 15, 15, 3, 3, 8, 16, 2),
    ("c16_r5_s3_edge", 16, 16, 5, 5, 3, 8, 3),
    ("c10_r3_s2_edge", 10, 10, 3, 3, 4, 8, 2),
    ("c13_r4_s4_edge", 13, 13, 4, 4, 2, 6, 4),
    ("c31_r7_s3", 31, 31, 7, 7, 3, 16, 3),
    ("c36_r11_s4_edge", 36, 36, 11, 11, 3, 24, 4),
    ("c24_r7_s4_edge", 24, 24, 7, 7, 3, 40, 4),
    ("c9x7_r2x3_s1", 9, 7, 2, 3, 3, 12, 1),
    ("c7_r3_c64", 7, 7, 3, 3, 64, 64, 1),
    ("c28_r1_pw", 28, 28, 1, 1, 32, 16, 1),
    ("c20_r5_s2_edge", 20, 20, 5, 5, 16, 32, 2),
    ("c27_r5_s1", 27, 27, 5, 5, 16, 24, 1),
    ("c12_r12_full", 12, 12, 12, 12, 3, 8, 1),
    ("c40_r9_s5_edge", 40, 40, 9, 9, 1, 8, 5),
    ("c19x24_r5x3_s2_edge", 19, 24, 5, 3, 4, 10, 2),
    ("c56_r3_c8", 56, 56, 3, 3, 8, 8, 1),
]


def grid_cases():
    """The seeded grid sample: GRID_DRAWS configurations per (layer, dataflow); an array that
    would give more than GRID_MAX_LINES demand rows is drawn again (the smallest such case is
    kept after 50 draws)."""
    import random

    rng = random.Random(GRID_SEED)
    layers = [("gemm", g) for g in GRID_GEMMS] + [("conv", c) for c in GRID_CONVS]
    cases = []
    for kind, layer in layers:
        for df in DATAFLOWS:
            for _ in range(GRID_DRAWS):
                bw = rng.choice(GRID_BWS)
                sram = tuple(rng.choice(GRID_SRAM_KB) for _ in range(3))
                quirk = rng.random() < GRID_BANK_QUIRK
                best, best_s = None, math.inf
                for _ in range(50):
                    rows, cols = rng.choice(GRID_ARRAYS)
                    c = _grid_case(kind, layer, rows, cols, df, bw, sram, quirk, len(cases))
                    est = estimate_s(c)
                    if est < best_s:
                        best, best_s = c, est
                    if est <= GRID_MAX_S:
                        break
                    # too slow for SCALE-Sim: draw the bandwidth and SRAMs again as well
                    bw = rng.choice(GRID_BWS)
                    sram = tuple(rng.choice(GRID_SRAM_KB) for _ in range(3))
                best["estimate_s"] = round(best_s, 2)
                cases.append(best)
    return cases


def estimate_s(c):
    """Rough seconds SCALE-Sim 3.0.0 takes on a case (2-core machine): per demand row, per
    demanded word, per prefetch-order word (its fetch matrix is filled word by word), and its
    DRAM trace, copied whole at every refill (quadratic in the refills). The refill counts come
    from infersim's replay of the case; they only choose which cases are run."""
    if demand_lines(c) > GRID_MAX_LINES:
        return math.inf
    from infersim.dataflow.scalesim_io import ScaleSimConfig
    from infersim.simulator.engines.events.scalesim import simulate_layer
    from infersim.simulator.engines.events.scalesim_demand import matrices, operands
    from infersim.workloads.ops import Conv2d, Gemm

    cfg = ScaleSimConfig(
        run_name="est", array_rows=c["array_rows"], array_cols=c["array_cols"],
        ifmap_sram_kb=c["ifmap_sram_kb"], filter_sram_kb=c["filter_sram_kb"],
        ofmap_sram_kb=c["ofmap_sram_kb"], dataflow=c["dataflow"], interface_bandwidth="USER",
        bandwidth_words_per_cycle=c["bandwidth_words_per_cycle"],
        ifmap_bank_bandwidth_words=c["ifmap_dram_bw_words"],
        filter_bank_bandwidth_words=c["filter_dram_bw_words"])
    i8 = dict(a_dtype="int8", b_dtype="int8", out_dtype="int8")
    extent = None
    if c["kind"] == "gemm":
        op = Gemm(name="l", m=c["M"], n=c["N"], k=c["K"], **i8)
    else:
        _, _, _, E, F = sim_mnk(c)
        st = c["stride"]
        op = Conv2d(name="l", in_h=c["filter_h"] + (E - 1) * st,
                    in_w=c["filter_w"] + (F - 1) * st, kernel_h=c["filter_h"],
                    kernel_w=c["filter_w"], in_channels=c["channels"],
                    out_channels=c["num_filter"], stride=st, dtype="int8",
                    weight_dtype="int8", out_dtype="int8")
        extent = (c["ifmap_h"], c["ifmap_w"])
    ifm, fil, ofm = operands(op, extent)
    t_if, t_f, d_if, d_f, _ = matrices(c["dataflow"], c["array_rows"], c["array_cols"],
                                      ifm, fil, ofm)
    r = simulate_layer(cfg, op, extent)
    words = int((d_if != -1).sum() + (d_f != -1).sum())
    est = 60e-6 * demand_lines(c) + 3e-6 * words + 1e-6 * (len(t_if) + len(t_f))
    for n, kb, bw in ((r.ifmap_refills, c["ifmap_sram_kb"], c["ifmap_dram_bw_words"]),
                      (r.filter_refills, c["filter_sram_kb"], c["filter_dram_bw_words"])):
        lines = math.ceil(kb * 512 / bw)
        est += 60e-6 * n + n * n / 2 * lines * (bw + 1) * 8 / 3e9
    return est


def _grid_case(kind, layer, rows, cols, df, bw, sram, quirk, index):
    bank_bw = 10 if quirk else bw
    c = _base(kind, "grid", rows, cols, df, mode="USER", bw=bw, sram=sram,
              ifmap_bank_bw=bank_bw, filter_bank_bw=bank_bw)
    c["bank_num"] = 10 if quirk else 1
    if kind == "gemm":
        name, M, N, K = layer
        c.update(M=M, N=N, K=K)
    else:
        name, H, W, R, S, C, Kf, stride = layer
        c.update(layer_name=name, ifmap_h=H, ifmap_w=W, filter_h=R, filter_w=S, channels=C,
                 num_filter=Kf, stride=stride)
    c["layer"] = name
    tag = f"_rd{bank_bw}x10" if quirk else ""
    c["case_id"] = (f"grid{index:03d}_{name}_a{rows}x{cols}_{df}_bw{bw}"
                    f"_sram{sram[0]}-{sram[1]}-{sram[2]}{tag}")
    return c


GRID_INPUT_COLS = ROW_INPUT_COLS[:ROW_INPUT_COLS.index("ifmap_sram_kb")] + [
    "bank_num", "ifmap_sram_kb", "filter_sram_kb", "ofmap_sram_kb", "layer",
] + ROW_INPUT_COLS[ROW_INPUT_COLS.index("M"):]


def worker():
    """Run the cases named on stdin (one JSON per line: dir, kind), one JSON result per line
    on stdout; SCALE-Sim's own prints are swallowed."""
    import contextlib
    import io

    from scalesim.scale_sim import scalesim

    real = sys.stdout
    for line in sys.stdin:
        job = json.loads(line)
        d = job["dir"]
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            s = scalesim(save_disk_space=True, verbose=False,
                         config=os.path.join(d, "scale.cfg"),
                         topology=os.path.join(d, "topo.csv"),
                         layout=os.path.join(d, "layout.csv"),
                         input_type_gemm=job["kind"] == "gemm")
            s.run_scale(top_path=os.path.join(d, "out"))
        real.write(json.dumps({"wall_s_run": time.perf_counter() - t0}) + "\n")
        real.flush()


class _Worker:
    def __init__(self):
        self.p = None

    def run(self, case_dir, kind, timeout):
        import selectors

        if self.p is None:
            self.p = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, text=True)
        self.p.stdin.write(json.dumps({"dir": str(case_dir), "kind": kind}) + "\n")
        self.p.stdin.flush()
        sel = selectors.DefaultSelector()
        sel.register(self.p.stdout, selectors.EVENT_READ)
        ready = sel.select(timeout)
        sel.close()
        line = self.p.stdout.readline() if ready else ""
        if not line:
            self.close()
            return None
        return json.loads(line)

    def close(self):
        if self.p is not None:
            self.p.kill()
            self.p.wait()
            self.p = None


def run_grid(timeout, limit=None):
    cases = grid_cases()[:limit]
    rows, timings = [], []
    w = _Worker()
    t_all = time.perf_counter()
    try:
        for i, c in enumerate(cases):
            tmp = Path(tempfile.mkdtemp(prefix="ssgrid_"))
            try:
                (tmp / "scale.cfg").write_text(cfg_text(c))
                (tmp / "topo.csv").write_text(topo_text(c))
                (tmp / "layout.csv").write_text(layout_text(c))
                info = w.run(tmp, c["kind"], timeout)
                status = "ok" if info is not None else f"timeout>{timeout:.0f}s"
                timings.append({"case_id": c["case_id"], "demand_lines": demand_lines(c),
                                "estimate_s": c["estimate_s"], "status": status,
                                "wall_s_run": round(info["wall_s_run"], 3) if info else ""})
                if info is not None:
                    out = tmp / "out" / RUN_NAME
                    row = {k: c.get(k, "") for k in GRID_INPUT_COLS}
                    M, N, K, E, F = sim_mnk(c)
                    row.update(M=M, N=N, K=K, ofmap_h=E, ofmap_w=F)
                    for name in ("COMPUTE_REPORT", "BANDWIDTH_REPORT", "DETAILED_ACCESS_REPORT"):
                        row.update(read_report_text(out / f"{name}.csv"))
                    row["wall_s_run"] = timings[-1]["wall_s_run"]
                    rows.append(row)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            print(f"[{i + 1}/{len(cases)}] {c['case_id']}: {status} "
                  f"run={timings[-1]['wall_s_run']}s", flush=True)
    finally:
        w.close()
    elapsed = time.perf_counter() - t_all
    _write_grid(rows, elapsed)
    with open(GRID_TIMINGS, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(timings[0]))
        wr.writeheader()
        wr.writerows(timings)
    print(f"done: {len(rows)}/{len(cases)} ok in {elapsed:.1f}s")


def read_report_text(path: Path) -> dict:
    """One layer's report row as SCALE-Sim wrote it (the cells' text, not re-parsed floats)."""
    lines = path.read_text().splitlines()
    header = [h.strip() for h in lines[0].split(",")][1:]
    cells = [v.strip() for v in lines[1].split(",")][1:]
    return {h: v for h, v in zip(header, cells) if h}


def _write_grid(rows, elapsed):
    import numpy

    cols = list(rows[0])
    with open(GRID, "w", newline="") as f:
        f.write(f"# SCALE-Sim 3.0.0 (numpy {numpy.__version__}) reports of the finite-bandwidth "
                f"grid: {len(rows)} cases, USER bandwidth.\n")
        f.write("# Produced by: .venv/bin/python tests/dataflow/golden/gen_golden.py --grid "
                f"({elapsed / 60:.1f} min on one core; seed {GRID_SEED}).\n")
        f.write("# Report cells are SCALE-Sim's text; wall_s_run = seconds in run_scale.\n")
        wr = csv.DictWriter(f, fieldnames=cols)
        wr.writeheader()
        wr.writerows(rows)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--groups", nargs="*", default=["gemm", "conv", "stall", "alexnet"])
    ap.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds per case (child process killed and case skipped beyond it)",
    )
    ap.add_argument("--only", nargs="*", default=None, help="case ids to run")
    ap.add_argument("--list", action="store_true")
    ap.add_argument(
        "--max-lines",
        type=int,
        default=None,
        help="do not run cases with more demand lines (= compute cycles + 1) than "
        "this; they are recorded in timings.csv as skipped",
    )
    ap.add_argument("--golden", default=str(GOLDEN), help="output CSV (upserted by case_id)")
    ap.add_argument("--timings", default=str(TIMINGS), help="timings CSV (upserted by case_id)")
    ap.add_argument("--child", nargs=2, metavar=("DIR", "KIND"), help=argparse.SUPPRESS)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--grid", action="store_true", help="run the grid into scalesim_grid.csv")
    ap.add_argument("--grid-limit", type=int, default=None, help="only the first N grid cases")
    a = ap.parse_args()

    if a.worker:
        worker()
        return
    if a.grid:
        if a.list:
            for c in grid_cases()[: a.grid_limit]:
                print(c["case_id"], demand_lines(c), c["estimate_s"])
            return
        run_grid(a.timeout, a.grid_limit)
        return

    if a.child:
        print(json.dumps(child_run(a.child[0], a.child[1] == "gemm")))
        return

    cases = [c for c in all_cases() if c["group"] in a.groups]
    if a.only:
        cases = [c for c in cases if c["case_id"] in set(a.only)]
    if a.list:
        for c in cases:
            print(c["case_id"], demand_lines(c))
        return

    rows, timings = [], []
    t_all = time.perf_counter()
    for i, c in enumerate(cases):
        if a.max_lines is not None and demand_lines(c) > a.max_lines:
            timing = {
                "case_id": c["case_id"],
                "group": c["group"],
                "kind": c["kind"],
                "array_rows": c["array_rows"],
                "array_cols": c["array_cols"],
                "dataflow": c["dataflow"],
                "bandwidth_mode": c["bandwidth_mode"],
                "demand_lines": demand_lines(c),
                "status": f"skipped: predicted >{a.timeout:.0f}s "
                f"({demand_lines(c)} demand lines > --max-lines {a.max_lines})",
            }
            upsert_csv(Path(a.timings), [timing])
            print(f"[{i + 1}/{len(cases)}] {c['case_id']}: {timing['status']}", flush=True)
            continue
        row, timing = run_case(c, a.timeout)
        timings.append(timing)
        if row is not None:
            rows.append(row)
        print(
            f"[{i + 1}/{len(cases)}] {c['case_id']}: {timing['status']} "
            f"run={timing['wall_s_run']}s"
            + (f" total={row.get('Total Cycles')} stall={row.get('Stall Cycles')}" if row else ""),
            flush=True,
        )
        # write incrementally so an interrupted sweep keeps what it has
        if row is not None:
            upsert_csv(Path(a.golden), [row])
        upsert_csv(Path(a.timings), [timing])
    print(f"done: {len(rows)}/{len(cases)} ok in {time.perf_counter() - t_all:.1f}s")


if __name__ == "__main__":
    main()
