"""The Eyeriss paper's dataflow comparison as accounting (Chen, Emer, Sze, ISCA 2016, Sec. V-VI):
no local reuse (NLR) as a template, and row-stationary (RS) against weight-stationary (WS),
output-stationary (OS) and NLR on AlexNet's layers.

The paper's setup, not its results: 256 PEs (16 × 16), 16-bit data, energy per access relative
to a MAC RF 1 : inter-PE 2 : buffer 6 : DRAM 200 (the eyeriss-v1 preset), and every dataflow
given the same on-chip storage. The paper equalizes area, from a baseline of 256 × 512 B of
register file plus a 256 × 512 B = 128 KiB global buffer; we equalize bytes instead (an
assumption: we have no area model): RS keeps 512 B/PE of register file and a 128 KiB buffer;
WS, OS and NLR hold nothing in the PE beyond their one pipeline register per operand, so all of
their 256 KiB is buffer. (Equal area would give them a larger buffer still: RF bytes cost more
area than SRAM bytes.) Each dataflow gets its own energy-optimal tiling. The paper's measured
energies and figures are used for nothing here: the tests assert only orderings.

Measured with this accounting (µJ, AlexNet CONV1-5 summed, grouped layers counted per group;
RS's margin is over the cheapest of WS, OS, IS and NLR, always WS):

    batch  RS      WS      OS      IS      NLR     RS margin
    1      4 103   4 971   5 369   5 012   9 146   1.21×
    4      15 742  19 031  20 656  19 431  35 766  1.21×
    16     62 969  76 073  82 432  77 704  142 875 1.21×

and per layer 1.17× (CONV5) to 1.27× (CONV2). FC6-8 summed, as GEMMs (µJ):

    batch  RS      WS      OS      IS      NLR
    16     17 473  17 643  17 761  17 223  23 077   RS 1.0 % below WS
    64     36 939  37 413  39 720  36 997  60 574   RS 1.3 % below WS

As GEMMs the batch is the rows m, which RS lays across the array columns only: a PE reuses its
weights over the batch just across column folds (m > 16), never over the images it holds
itself, so FC7 and FC8 alone are up to 2.5 % cheaper with WS (the sum holds by FC6). Written as
the convolutions they are (FC6 a 6 × 6 filter over the 6 × 6 × 256 CONV5 output, FC7 and FC8
1 × 1, the batch as images N), RS keeps each filter row in the register file across the images
of its PE, as the paper maps it, and is 4 % to 10 % below WS and OS on every FC layer.
"""

from __future__ import annotations

import pytest
from dataflow_helpers import array_chip

from infersim.arch_models.chip import Chip
from infersim.dataflow import TEMPLATES, energy, map_op
from infersim.dataflow.loopnest import Tiling, analyze
from infersim.dataflow.mapper import GENERIC_DATAFLOWS, dataflows_of
from infersim.workloads.ops import Conv2d, Gemm, OpBase

I16 = {"dtype": "int16", "weight_dtype": "int16", "out_dtype": "int16"}
G16 = {"a_dtype": "int16", "b_dtype": "int16", "out_dtype": "int16"}

PES_SIDE = 16
RF_BYTES_PER_PE = 512
BUFFER_BYTES = PES_SIDE * PES_SIDE * RF_BYTES_PER_PE  # the paper's baseline: 128 KiB
STORAGE_BYTES = PES_SIDE * PES_SIDE * RF_BYTES_PER_PE + BUFFER_BYTES  # equal for every dataflow


def equal_storage_chip(dataflow: str) -> Chip:
    """The 16 × 16 comparison array with ``dataflow``'s share of the same on-chip bytes: RS a
    512 B register file per PE and the rest as buffer, the others (which keep nothing in an RF)
    all of it as buffer."""
    rf = RF_BYTES_PER_PE if dataflow == "rs" else 0
    return array_chip(PES_SIDE, PES_SIDE, **{
        "register_file.bytes_per_pe": rf,
        "sram.capacity_bytes": STORAGE_BYTES - PES_SIDE * PES_SIDE * rf,
    })


def alexnet_convs(batch: int) -> list[Conv2d]:
    """AlexNet's CONV1-5 (Krizhevsky et al. 2012): CONV2, CONV4 and CONV5 are two groups of
    half the channels each (``count=2``)."""
    def conv(name: str, size: int, kernel: int, channels: int, filters: int, *, stride: int = 1,
             pad: int = 0, groups: int = 1) -> Conv2d:
        return Conv2d(name=name, count=groups, batch=batch, in_h=size, in_w=size,
                      kernel_h=kernel, kernel_w=kernel, in_channels=channels,
                      out_channels=filters, stride=stride, padding=pad, **I16)

    return [
        conv("CONV1", 227, 11, 3, 96, stride=4),
        conv("CONV2", 27, 5, 48, 128, pad=2, groups=2),
        conv("CONV3", 13, 3, 256, 384, pad=1),
        conv("CONV4", 13, 3, 192, 192, pad=1, groups=2),
        conv("CONV5", 13, 3, 192, 128, pad=1, groups=2),
    ]


def alexnet_fcs(batch: int) -> list[Gemm]:
    """FC6-8 at ``batch`` images: C[batch, n] = A[batch, k] · W[k, n]."""
    return [
        Gemm(name="FC6", m=batch, k=9216, n=4096, **G16),
        Gemm(name="FC7", m=batch, k=4096, n=4096, **G16),
        Gemm(name="FC8", m=batch, k=4096, n=1000, **G16),
    ]


def alexnet_fcs_as_convs(batch: int) -> list[Conv2d]:
    """FC6-8 as the convolutions they are, the batch as images N."""
    def fc(name: str, size: int, channels: int, filters: int) -> Conv2d:
        return Conv2d(name=name, batch=batch, in_h=size, in_w=size, kernel_h=size,
                      kernel_w=size, in_channels=channels, out_channels=filters, **I16)

    return [fc("FC6", 6, 256, 4096), fc("FC7", 1, 4096, 4096), fc("FC8", 1, 4096, 1000)]


def energy_pj(op: OpBase, dataflow: str) -> float:
    """pJ of all of ``op``'s repetitions with ``dataflow``'s energy-optimal tiling on its
    equal-storage chip."""
    chip = equal_storage_chip(dataflow)
    return energy(map_op(op, chip, dataflow, "energy"), chip).total_pj * op.count


def margins(pj: dict[str, float], rivals: tuple[str, ...]) -> str:
    """RS's margin over each rival, for the failure message and ``pytest -s``."""
    return ", ".join(f"{d} {pj[d] / pj['rs']:.3f}×" for d in rivals)


# --- NLR: nothing stays in the PE ----------------------------------------------------------------


def test_no_local_reuse_reads_every_operand_from_the_buffer_at_every_mac() -> None:
    """One fold of a 16 × 8 GEMM step on a 16 × 8 array (k on the rows, n on the columns, the
    8 rows of m streamed): 1,024 MACs."""
    op = Gemm(m=8, k=16, n=8, **G16)
    chip = array_chip(16, 8)
    nlr, ws = analyze(op, chip, TEMPLATES["nlr"]), analyze(op, chip, TEMPLATES["ws"])
    macs, word = 1024, 2
    assert nlr.folds == ws.folds == 1
    assert nlr.rf_bytes == 0
    assert all(a.total_bytes == 0 for a in nlr.traffic["register_file"].values())
    # every MAC gets its input, its weight and its psum through the array
    array = nlr.traffic["array"]
    assert array["input"].reads_bytes == array["weight"].reads_bytes == macs * word
    assert array["output"].writes_bytes == macs * word
    sram = nlr.traffic["sram"]
    assert sram["weight"].reads_bytes == macs * word  # unicast: each use read from the buffer
    assert sram["input"].reads_bytes == 8 * 16 * word  # multicast to the 8 columns
    assert sram["output"].writes_bytes == 8 * 8 * word  # psums reduced over k in the array
    # WS differs only in the weight: read once and held in the PE's register
    assert ws.traffic["sram"]["weight"].reads_bytes == 16 * 8 * word
    assert ws.traffic["register_file"]["weight"].reads_bytes == macs * word
    for name in ("input", "output"):
        assert ws.traffic["sram"][name] == sram[name]
        assert ws.traffic["array"][name] == array[name]
    assert nlr.traffic["dram"] == ws.traffic["dram"]


def test_nlr_is_mapped_when_asked_but_best_searches_it_only_where_listed() -> None:
    op = Gemm(m=64, k=256, n=128, **G16)
    generic = array_chip(16, 16)
    assert dataflows_of(generic) == list(GENERIC_DATAFLOWS) == ["ws", "os", "is", "rs"]
    assert map_op(op, generic, "nlr").dataflow == "nlr"
    assert map_op(op, generic, "best").dataflow != "nlr"
    listed = generic.with_(**{"array.supported_dataflows": ["rs", "nlr"]})
    assert dataflows_of(listed) == ["rs", "nlr"]
    only = generic.with_(**{"array.supported_dataflows": ["nlr"]})
    assert map_op(op, only, "best").dataflow == "nlr"


# --- RS: the filter rows stay in the register file --------------------------------------------


@pytest.mark.parametrize(("m", "kept"), [(64, True), (32, False)])
def test_rs_keeps_its_weights_over_the_column_folds_where_that_saves_energy(
    m: int, kept: bool
) -> None:
    """A GEMM under RS on a 4 × 16 array: k = 16 in chunks of C' = 4 on the rows, m across the
    16 columns (m / 16 column folds), each PE holding K' × C' = 8 × 4 weights that the rows of
    m do not change. Over 4 folds keeping them (one delivery, then a register-file read per MAC:
    2 + 1 + 4 × 1 per weight and PE) beats delivering them every fold (4 × 2); over 2 folds
    (2 + 1 + 2 against 2 × 2, the buffer's reads aside) it does not."""
    op = Gemm(m=m, k=16, n=8, **G16)
    mapping = analyze(op, array_chip(4, 16), TEMPLATES["rs"], Tiling(rf={"N": 1, "K": 8, "C": 4}))
    macs, word, weights = m * 16 * 8, 2, 16 * 8
    assert mapping.folds == m // 16
    weight = {level: a["weight"] for level, a in mapping.traffic.items()}
    if kept:  # each weight to the 16 columns once; read from the RF at every MAC
        assert weight["array"].reads_bytes == 16 * weights * word
        assert weight["sram"].reads_bytes == weights * word
        assert weight["register_file"].reads_bytes == macs * word
        assert weight["register_file"].writes_bytes == 16 * weights * word
    else:  # every fold delivers them again, each used once as it arrives
        assert weight["array"].reads_bytes == macs * word
        assert weight["sram"].reads_bytes == m // 16 * weights * word
        assert weight["register_file"].total_bytes == 0


# --- the comparison --------------------------------------------------------------------------


@pytest.mark.parametrize("batch", [1, 4, 16])
def test_rs_spends_the_least_energy_on_alexnet_conv_layers(batch: int) -> None:
    """On every CONV layer and on their sum, RS below WS, OS and NLR (measured margins: the
    module docstring)."""
    rivals = ("ws", "os", "nlr")
    total = dict.fromkeys(("rs", *rivals), 0.0)
    for op in alexnet_convs(batch):
        pj = {d: energy_pj(op, d) for d in total}
        for d, v in pj.items():
            total[d] += v
        assert all(pj["rs"] < pj[d] for d in rivals), (op.name, margins(pj, rivals))
    assert all(total["rs"] < total[d] for d in rivals), margins(total, rivals)
    print(f"CONV1-5 batch {batch}: RS margin over {margins(total, rivals)}")


@pytest.mark.parametrize("batch", [16, 64])
def test_rs_spends_less_energy_than_ws_and_os_on_alexnet_fc_layers(batch: int) -> None:
    """FC6-8 summed, as GEMMs: RS below WS and OS (by 1.0-1.3 %: the module docstring)."""
    rivals = ("ws", "os")
    total = {d: sum(energy_pj(op, d) for op in alexnet_fcs(batch)) for d in ("rs", *rivals)}
    assert all(total["rs"] < total[d] for d in rivals), margins(total, rivals)
    print(f"FC6-8 (GEMMs) batch {batch}: RS margin over {margins(total, rivals)}")


@pytest.mark.parametrize("batch", [16, 64])
def test_rs_reuses_filters_across_the_batch_on_every_fc_layer_as_a_convolution(
    batch: int,
) -> None:
    """With the batch as images N, RS keeps each filter row in the register file across the
    images of its PE (the N register-file factor) and is below WS and OS on every FC layer; WS
    and OS, which see the same matrix product either way, cost what they cost on the GEMM."""
    rivals = ("ws", "os")
    for conv, gemm in zip(alexnet_fcs_as_convs(batch), alexnet_fcs(batch), strict=True):
        pj = {d: energy_pj(conv, d) for d in ("rs", *rivals)}
        assert all(pj["rs"] < pj[d] for d in rivals), (conv.name, margins(pj, rivals))
        assert pj["rs"] < energy_pj(gemm, "rs")
        for d in rivals:
            assert pj[d] == pytest.approx(energy_pj(gemm, d), rel=1e-12)
        print(f"{conv.name} (conv) batch {batch}: RS margin over {margins(pj, rivals)}")
