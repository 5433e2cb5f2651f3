"""Dataflows are data: four template values, validated at construction, one analyzer."""

from __future__ import annotations

import dataclasses

import pytest
from dataflow_helpers import array_chip

from infersim.dataflow import TEMPLATES, FoldCycles, Template, analyze
from infersim.workloads.ops import Conv2d, Gemm


def test_the_four_dataflows_are_values() -> None:
    assert set(TEMPLATES) == {"ws", "os", "is", "rs", "nlr", "tc"}
    ws = TEMPLATES["ws"]
    assert (ws.rows, ws.cols, ws.stream, ws.stationary) == (
        ("C", "R", "S"),
        ("K",),
        ("N", "P", "Q"),
        "weight",
    )
    assert TEMPLATES["os"].stationary == "output"
    assert TEMPLATES["is"].stationary == "input"
    assert TEMPLATES["rs"].window_reuse
    tc = TEMPLATES["tc"]
    assert tc.output_in_registers and tc.stationary == "output"
    assert tc.fold_cycles.overhead_cycles(32, 64) == 0  # pipelined MMAs: no fill or drain
    with pytest.raises(dataclasses.FrozenInstanceError):
        ws.name = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"rows": ("X",)}, "unknown dims"),
        ({"cols": ("C",)}, "both rows and cols"),
        ({"rf_split": ("K",)}, "must be stream dims"),
        ({"stream": ()}, "non-empty"),
        ({"stream": ("P", "P")}, "repeated"),
        ({"extents": (("X", (64,)),)}, "extents"),
        ({"extents": (("P", ()),)}, "extents"),
        ({"output_in_registers": True}, "accumulators in registers"),
    ],
)
def test_template_rejects_bad_values(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(TEMPLATES["ws"], **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["ws", "os", "is", "rs"])
def test_the_stationary_operand_is_what_the_analyzer_keeps_in_the_pe(name: str) -> None:
    """Reuse follows from the operands' dims; the declared ``stationary`` must agree."""
    tpl = TEMPLATES[name]
    op = Conv2d(
        in_h=12,
        in_w=12,
        kernel_h=3,
        kernel_w=3,
        in_channels=8,
        out_channels=16,
        dtype="int16",
        weight_dtype="int16",
        out_dtype="int16",
    )
    mapping = analyze(op, array_chip(8, 8), tpl)
    rf = mapping.traffic["register_file"]
    assert rf[tpl.stationary].reads_bytes > 0
    held = {o for o, a in rf.items() if a.reads_bytes > 0}
    if name == "rs":
        assert held == {"input", "weight", "output"}  # everything reused in the RF
    else:
        assert held == {tpl.stationary}


def test_a_fifth_dataflow_is_one_more_value() -> None:
    """Weight-stationary with the filters on the rows instead (K on rows, C·R·S on columns)."""
    transposed = Template(
        name="ws-t",
        description="weight-stationary, transposed",
        rows=("K",),
        cols=("C", "R", "S"),
        stream=("N", "P", "Q"),
        stationary="weight",
        fold_cycles=FoldCycles(2, 1, -2),
        util_cycles=FoldCycles(2, 2, -3),
    )
    op = Gemm(m=64, k=128, n=256, a_dtype="int16", b_dtype="int16", out_dtype="int16")
    chip = array_chip(32, 32)
    ws = analyze(op, chip, TEMPLATES["ws"])
    wst = analyze(op, chip, transposed)
    assert wst.folds == ws.folds == 32
    assert wst.macs == ws.macs
    # the weights are still read once from SRAM; the inputs now enter along the columns
    assert wst.traffic["sram"]["weight"].reads_bytes == ws.traffic["sram"]["weight"].reads_bytes
    assert wst.traffic["register_file"]["weight"].reads_bytes > 0
