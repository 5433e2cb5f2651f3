"""Helpers shared by the dataflow tests (imported by name: pytest puts this folder on sys.path)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from infersim.arch_models.chip import Chip
from infersim.arch_models.presets import load_chip
from infersim.workloads.ops import Conv2d

GOLDEN = Path(__file__).parent / "golden" / "scalesim_compute.csv"


CONVS = st.builds(
    lambda c, k, hw, r: Conv2d(name="c", batch=1, in_channels=c, out_channels=k, in_h=hw,
                               in_w=hw, kernel_h=r, kernel_w=r, stride=1, padding=r // 2),
    c=st.sampled_from([3, 64]), k=st.sampled_from([64, 128]), hw=st.sampled_from([14, 56]),
    r=st.sampled_from([1, 3]),
)  # fmt: skip
"""Small same-padded convolutions (1x1 and 3x3, 3 or 64 channels in): the searches' conv cases."""


def golden_rows() -> list[dict[str, str]]:
    """The SCALE-Sim golden rows (comment lines skipped)."""
    with GOLDEN.open(newline="") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def array_chip(rows: int, cols: int, **changes: Any) -> Chip:
    """Eyeriss-v1 with another array (int16, one core, every dataflow: a generic array) and any
    other dotted-path changes."""
    return load_chip("eyeriss-v1").with_(**{
        "array.rows": rows, "array.cols": cols, "array.supported_dataflows": None, **changes,
    })


SCALESIM_V2_CFG = """[general]
run_name = "scale_example_run_32x32_os"

[architecture_presets]
ArrayHeight:    32
ArrayWidth:     32
IfmapSramSzkB:    64
FilterSramSzkB:   64
OfmapSramSzkB:    64
IfmapOffset:    0
FilterOffset:   10000000
OfmapOffset:    20000000
Dataflow : os
Bandwidth : 10
MemoryBanks: 1

[run_presets]
InterfaceBandwidth: CALC
"""
"""A SCALE-Sim v2 config (its stock 32x32 OS example, CALC bandwidth)."""
