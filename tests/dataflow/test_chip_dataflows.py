"""What an array's hardware implements: the dataflows it lists (``array.supported_dataflows``)
and a double-buffered stationary operand (``array.double_buffered``), with hand-computed folds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from infersim.arch_models.chip import DataflowName
from infersim.arch_models.presets import list_chips, load_chip
from infersim.dataflow import TEMPLATES, clear_cache, energy, map_op
from infersim.dataflow.loopnest import Tiling, analyze
from infersim.dataflow.mapper import GENERIC_DATAFLOWS, dataflows_of
from infersim.errors import ConfigError, InfersimError
from infersim.workloads.ops import Gemm

BIN = Path(sys.executable).parent


def int8_gemm(m: int, k: int, n: int) -> Gemm:
    return Gemm(m=m, k=k, n=n, a_dtype="int8", b_dtype="int8", out_dtype="int8")


def test_the_dataflow_names_are_the_templates() -> None:
    assert set(get_args(DataflowName)) == set(TEMPLATES)


def test_presets_list_what_their_hardware_runs() -> None:
    assert load_chip("tpu-v1").array.supported_dataflows == ("ws",)
    assert load_chip("tpu-v4").array.supported_dataflows == ("ws",)
    assert load_chip("eyeriss-v1").array.supported_dataflows == ("rs",)
    assert load_chip("tpu-v1").array.double_buffered
    assert dataflows_of(load_chip("h100-sxm")) == ["tc"]  # tensor cores fed by CTA tiles
    assert dataflows_of(load_chip("h100-sxm").with_(**{"array.supported_dataflows": None})) == (
        list(GENERIC_DATAFLOWS))  # a generic array


def test_a_dataflow_listed_twice_or_none_is_refused() -> None:
    chip = load_chip("tpu-v1")
    with pytest.raises(ConfigError, match="supported_dataflows"):
        chip.with_(**{"array.supported_dataflows": ["ws", "ws"]})
    with pytest.raises(ConfigError, match="supported_dataflows"):
        chip.with_(**{"array.supported_dataflows": []})
    with pytest.raises(ConfigError, match="supported_dataflows"):
        chip.with_(**{"array.supported_dataflows": ["ws", "nope"]})


@settings(max_examples=30, deadline=None)
@given(
    preset=st.sampled_from(list_chips()),
    listed=st.sets(st.sampled_from(list(TEMPLATES)), min_size=1),
    m=st.integers(1, 3000), k=st.integers(1, 5000), n=st.integers(1, 5000),
)
def test_best_never_leaves_the_listed_dataflows(
    preset: str, listed: set[str], m: int, k: int, n: int
) -> None:
    chip = load_chip(preset).with_(**{"array.supported_dataflows": sorted(listed)})
    dtype = next(d for d in ("int8", "bf16", "int16") if d in chip.array.macs_per_pe_per_cycle)
    op = Gemm(m=m, k=k, n=n, a_dtype=dtype, b_dtype=dtype, out_dtype=dtype)
    clear_cache()
    try:
        picks = map_op(op, chip, "best", "latency", 3)
    except InfersimError:  # only RS can find nothing: its RF holds filter rows
        picks = []
    if not picks:
        assert listed == {"rs"}
        return
    assert {p.dataflow for p in picks} <= listed
    # the best of the listed dataflows, each searched on its own
    alone = []
    for name in sorted(listed):
        try:
            alone.append(map_op(op, chip, name).time_s)
        except InfersimError:
            continue
    assert picks[0].time_s == min(alone)


def test_an_unlisted_dataflow_is_a_clear_error() -> None:
    with pytest.raises(InfersimError, match=r"'tpu-v1' implements the ws dataflow.*not 'os'"):
        map_op(int8_gemm(512, 2048, 256), load_chip("tpu-v1"), "os")


def test_cli_refuses_an_unlisted_dataflow_unless_the_chip_yaml_lists_it(tmp_path: Path) -> None:
    args = ["map", "--gemm", "512,2048,256", "--dtype", "int8", "--dataflow", "os", "--json"]
    run = subprocess.run([str(BIN / "infersim"), *args, "--chip", "tpu-v1"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert "implements the ws dataflow" in run.stderr and "Traceback" not in run.stderr
    doc = load_chip("tpu-v1").model_dump(mode="json")
    doc["array"]["supported_dataflows"] = ["ws", "os"]
    path = tmp_path / "tpu-v1-os.yaml"
    path.write_text(yaml.safe_dump(doc))
    run = subprocess.run([str(BIN / "infersim"), *args, "--chip", str(path)],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr


# --- double-buffered stationary operand: hand-computed folds ------------------------------------
# tpu-v1: a 256 x 256 int8 array, 1 MAC per PE per cycle. A whole-op WS tile of M x K x N =
# m x 2048 x 256 lays K over the rows (8 folds of 256) and N over the columns (one fold); each
# fold streams T = m rows. Without double buffering a fold costs 2R + C - 2 + T (SCALE-Sim);
# with it, the next fold's 256 weight rows shift in during the current fold's stream and the
# folds pipeline: 8 max(T, 256) + (2R + C - 2) once. The analyzer reports the sum less one.

R = C = 256
OVERHEAD = 2 * R + C - 2


@pytest.mark.parametrize("m", [512, 256, 100, 1])
def test_double_buffered_weights_hide_all_but_the_first_load(m: int) -> None:
    buffered = load_chip("tpu-v1")
    plain = buffered.with_(**{"array.double_buffered": False})
    op = int8_gemm(m, 2048, 256)
    got = analyze(op, buffered, TEMPLATES["ws"], Tiling())
    assert got.folds == 8
    assert got.compute_cycles == 8 * max(m, R) + OVERHEAD - 1
    assert analyze(op, plain, TEMPLATES["ws"], Tiling()).compute_cycles == 8 * (OVERHEAD + m) - 1


def test_double_buffering_changes_nothing_without_a_stationary_load() -> None:
    # OS drains its outputs (no stationary operand to load), RS loads its RF behind the fold
    op = int8_gemm(300, 700, 900)
    chip = load_chip("tpu-v1").with_(**{"array.supported_dataflows": None})
    plain = chip.with_(**{"array.double_buffered": False})
    for name in ("os", "rs"):
        a = analyze(op, chip, TEMPLATES[name], Tiling())
        b = analyze(op, plain, TEMPLATES[name], Tiling())
        assert a.compute_cycles == b.compute_cycles


@pytest.mark.parametrize("buffered", [False, True])
def test_a_matrix_just_over_half_the_array_costs_a_whole_fold(buffered: bool) -> None:
    # width C/2 + 1 on a C-column array: the idle columns still take the fold's cycles
    chip = load_chip("tpu-v1").with_(**{"array.double_buffered": buffered})
    half = analyze(int8_gemm(512, 2048, C // 2 + 1), chip, TEMPLATES["ws"], Tiling())
    full = analyze(int8_gemm(512, 2048, C), chip, TEMPLATES["ws"], Tiling())
    assert half.folds == full.folds == 8
    assert half.compute_cycles == full.compute_cycles
    assert half.mapping_efficiency == pytest.approx((C // 2 + 1) / C)


def test_the_mapper_picks_weight_stationary_on_a_weight_stationary_chip() -> None:
    # the example: OS was picked on tpu-v1 (2R + C - 2 per WS fold); now WS, and
    # double-buffered WS beats the old per-fold charge on the same tiling
    chip = load_chip("tpu-v1")
    best = map_op(int8_gemm(4096, 7168, 4096), chip)
    assert best.dataflow == "ws"
    plain = analyze(int8_gemm(4096, 7168, 4096), chip.with_(**{"array.double_buffered": False}),
                    TEMPLATES["ws"], best.tiling)  # fmt: skip
    assert best.compute_cycles < plain.compute_cycles


@pytest.mark.parametrize("share", [0.0, 0.5])
def test_idle_pes_of_a_padded_fold_spend_their_share_of_a_mac(share: float) -> None:
    chip = load_chip("tpu-v1").with_(**{"energy.idle_pe_share": share})
    op = int8_gemm(512, 2048, C // 2 + 1)
    mapping = analyze(op, chip, TEMPLATES["ws"], Tiling())
    per_mac = chip.energy.mac("int8")
    macs = 512 * 2048 * (C // 2 + 1)
    idle_slots = 512 * 2048 * (C - (C // 2 + 1))  # the columns each fold leaves idle
    assert energy(mapping, chip).mac_pj == pytest.approx((macs + share * idle_slots) * per_mac)


def test_a_pe_of_several_macs_loads_its_stationary_rows_as_several_arrays() -> None:
    # tpu-v4: four 128 x 128 MXUs per core modeled as one array of 4 MACs per PE per cycle; each
    # MXU loads its own weights, so a double-buffered fold hides a load of 128 / 4 = 32 cycles.
    # A GEMV of k = 1024 over n = 128: 8 row folds of T = ceil(1 / 4) = 1 streamed cycle each.
    chip = load_chip("tpu-v4")
    assert chip.array.double_buffered and chip.array.macs_per_pe_per_cycle["bf16"] == 4
    op = Gemm(m=1, k=1024, n=128)
    got = analyze(op, chip, TEMPLATES["ws"], Tiling())
    assert got.folds == 8
    assert got.compute_cycles == 8 * max(1, 128 // 4) + (2 * 128 + 128 - 2) - 1
