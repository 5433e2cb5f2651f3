"""Small sweep specs shared by the explorer tests (tiny models, few designs: fast)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

TINY: dict[str, Any] = {
    "name": "tiny sweep",
    "chips": [
        "h100-sxm",
        {
            "chip": "tpu-v4",
            "label": "tpu-variant",
            "axes": {
                "array.rows,array.cols": [64, 128],
                "dram.bandwidth_bytes_per_s": {"low": 0.6e12, "high": 2.4e12, "num": 3,
                                               "log": True},
            },
        },
    ],
    "workloads": [
        {"model": "tiny-test", "phase": ["decode", "prefill"], "prompt_len": 128,
         "context_len": 128},
    ],
    "constraints": ["area_mm2 <= 900"],
    "objectives": ["tokens_per_s:max", "area_mm2:min"],
}
"""13 designs (1 fixed + 2 × 3 swept... see the tests) × 2 workloads."""


@pytest.fixture
def tiny_doc() -> dict[str, Any]:
    """A fresh copy of the tiny spec document."""
    return copy.deepcopy(TINY)
