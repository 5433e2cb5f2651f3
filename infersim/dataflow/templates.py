"""Dataflows as data: weight-, output-, input- and row-stationary and no-local-reuse are five
:class:`Template` values.

Every operator is analyzed as the seven-deep convolution loop nest (plus independent groups):

    G groups (a GEMM's batch: heads, experts; nothing is shared between groups)
    N images  K filters (output channels)  C input channels
    P, Q output rows and columns  R, S filter rows and columns  (input rows = P·stride + R)

A GEMM C[m,n] = A[m,k]·B[k,n] is the 1×1 convolution with P = m, C = k, K = n (Q = R = S = 1),
so one analyzer serves both. A template names the dims laid across the array rows and the array
columns (a group of dims is flattened, last dim fastest, and cut into array-sized folds), the
in-PE loop that streams through each PE during one fold (outer → inner), and the stream dims whose
PE-internal factor the mapper chooses under the register-file capacity (``rf_split``; the rest of
such a dim goes to its array role, or to the fold loop). Every other dim is a fold loop.

Which operand stays in the PE, what is reused across the array and what is accumulated
spatially all follow from which dims each operand depends on; ``stationary`` names the operand
the PE keeps (a test checks the analyzer agrees), and it stays there across the consecutive
folds that do not change it (see :func:`~infersim.dataflow.loopnest.folds.tile_folds`).
Adding a dataflow is adding a value to :data:`TEMPLATES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from infersim.arch_models.chip import DataflowName  # noqa: F401  (the names of TEMPLATES)

DIMS: tuple[str, ...] = ("G", "N", "K", "C", "P", "Q", "R", "S")
"""Loop dims of the unified nest (see the module docstring)."""

Operand = Literal["input", "weight", "output"]
OPERANDS: tuple[Operand, ...] = ("input", "weight", "output")
"""The three operands: activations in, weights (filters, GEMM B), outputs / partial sums."""


@dataclass(frozen=True, slots=True)
class FoldCycles:
    """Per-fold overhead in cycles: ``rows·R + cols·C + const`` for an R × C array."""

    rows: int
    cols: int
    const: int

    def overhead_cycles(self, array_rows: int, array_cols: int) -> int:
        """Fill, skew and drain cycles one fold adds to its streamed cycles."""
        return self.rows * array_rows + self.cols * array_cols + self.const


@dataclass(frozen=True, slots=True)
class Template:
    """One dataflow: the spatial dims, the in-PE stream and the per-fold systolic overhead.

    ``fold_cycles`` is what one fold costs beyond its streamed cycles T (SCALE-Sim: WS/IS
    2R + C − 2, OS R + C − 2). ``util_cycles`` is the per-fold window SCALE-Sim divides by for
    its "Compute Util %" (WS/IS 2R + 2C − 3 + T, OS R + C − 2 + T). ``load_cycles`` is the part
    of ``fold_cycles`` that loads the stationary operand into the PEs (WS/IS: R cycles, one row
    per cycle; R / r where a PE of r > 1 MACs per cycle stands for r arrays side by side); on an
    array that double-buffers it (``array.double_buffered``) the next fold's
    load overlaps the current fold's stream and consecutive folds pipeline through the array,
    so a tile of F folds costs F × max(T, load) + ``fold_cycles`` (the first load and the last
    skew and drain, once); None: nothing to hide (OS drains its outputs, RS loads its RF behind
    the previous fold already). ``window_reuse`` says the
    dataflow exploits the sliding window between output rows and filter rows (row-stationary's
    diagonal ifmap reuse); without it a convolution is fed as its im2col matrix, as SCALE-Sim does.
    ``stationary`` is the operand the PE keeps (None: none). ``local_reuse`` False: the PE keeps
    nothing from one MAC to the next (no register file, no stationary register): every MAC's
    operands are read from the buffer and delivered through the array, and its partial sum
    leaves the PE (the ``stream`` then only orders the MACs of a fold).
    ``extents`` lists, per dim, the SRAM-tile extents the mapper tries (each capped at the dim)
    instead of its ladder of halvings and array-side multiples: the tile shapes real kernels
    are compiled for (a GPU's CTA tiles). ``output_in_registers``: the output tile's
    accumulators stay in the core's register file across the whole reduction (a CTA's MMA
    accumulators), so the SRAM holds only the double-buffered input and weight tiles, and the
    output tile must fit :data:`ACCUMULATOR_SHARE` of the core's register file at
    :data:`ACCUMULATOR_BYTES` per element. ``min_tile_rows``: an SRAM tile holds at least
    this many positions of the flattened row group (a Hopper warpgroup MMA's 64 rows), or the
    whole group where it is smaller. ``vector_macs``: the core's vector lanes can run the MACs
    instead of the array, one multiply-add per lane per cycle with the dequantization of a
    weight-only quantized operand on the same lanes (a GPU SM's CUDA cores: a decode GEMV
    kernel's FMAs); an engine times a mapping's compute at the faster of the two
    (:func:`infersim.simulator.engines.analytic.busy_factor`).
    """

    name: str
    description: str
    rows: tuple[str, ...]
    cols: tuple[str, ...]
    stream: tuple[str, ...]
    stationary: Operand | None
    fold_cycles: FoldCycles
    util_cycles: FoldCycles
    rf_split: tuple[str, ...] = ()
    window_reuse: bool = False
    load_cycles: FoldCycles | None = None
    local_reuse: bool = True
    extents: tuple[tuple[str, tuple[int, ...]], ...] = ()
    output_in_registers: bool = False
    min_tile_rows: int = 1
    vector_macs: bool = False

    def __hash__(self) -> int:
        """The name's hash: equal templates share a name, and the memos keyed by a template
        (the mapper's grids, the held streams of :func:`~infersim.dataflow.loopnest.folds.
        rf_need`) hash it on every lookup, where the fields' hash walks every tuple of it."""
        return hash(self.name)

    def __post_init__(self) -> None:
        for role in (self.rows, self.cols, self.stream, self.rf_split):
            bad = [d for d in role if d not in DIMS]
            if bad:
                raise ValueError(f"template {self.name!r}: unknown dims {bad}; dims: {DIMS}")
        if not self.rows or not self.cols or not self.stream:
            raise ValueError(f"template {self.name!r}: rows, cols and stream must be non-empty")
        if set(self.rows) & set(self.cols):
            raise ValueError(f"template {self.name!r}: a dim cannot be on both rows and cols")
        if not set(self.rf_split) <= set(self.stream):
            raise ValueError(
                f"template {self.name!r}: rf_split {self.rf_split} must be stream dims"
            )
        shared = (set(self.rows) | set(self.cols)) & set(self.stream)
        if not shared <= set(self.rf_split):
            raise ValueError(
                f"template {self.name!r}: spatial stream dims {sorted(shared)} must be rf_split"
            )
        if len(set(self.stream)) != len(self.stream):
            raise ValueError(f"template {self.name!r}: repeated stream dim in {self.stream}")
        if self.local_reuse == (self.stationary is None):
            raise ValueError(
                f"template {self.name!r}: stationary={self.stationary!r} with "
                f"local_reuse={self.local_reuse}: a PE that keeps an operand reuses it locally"
            )
        bad = [d for d, _ in self.extents if d not in DIMS]
        if bad or any(not values or min(values) < 1 for _, values in self.extents):
            raise ValueError(
                f"template {self.name!r}: extents {self.extents} must name dims of {DIMS} "
                "with positive extents"
            )
        if self.output_in_registers and self.stationary != "output":
            raise ValueError(
                f"template {self.name!r}: accumulators in registers need the output stationary"
            )
        if not self.local_reuse and (self.rf_split or self.window_reuse or self.load_cycles):
            raise ValueError(
                f"template {self.name!r}: without local reuse there is no register file to "
                "split, no window to reuse and nothing to load"
            )


ACCUMULATOR_BYTES = 4
"""Bytes of one accumulator of an ``output_in_registers`` template (fp32, or int32 for int8)."""

ACCUMULATOR_SHARE = 0.5
"""Share of a core's register file that holds accumulators; the rest holds operand fragments,
addresses and loop state. CUTLASS's largest Hopper CTA tile, 128 x 256 with fp32 accumulators
(128 KiB), is half of an SM's 256 KiB register file (CUTLASS 3.x, sm90 collective builders)."""

_PIPELINED = FoldCycles(rows=0, cols=0, const=0)

_SYSTOLIC_PRELOAD = FoldCycles(rows=2, cols=1, const=-2)  # preload R, skew R - 1, drain C - 1
_SYSTOLIC_PRELOAD_UTIL = FoldCycles(rows=2, cols=2, const=-3)
_SYSTOLIC_LOAD = FoldCycles(rows=1, cols=0, const=0)  # the stationary operand: a row per cycle
_SYSTOLIC_OUTPUT = FoldCycles(rows=1, cols=1, const=-2)  # output drain overlaps the next fold

TEMPLATES: dict[str, Template] = {
    "ws": Template(
        name="ws",
        description="weight-stationary: B[k,n] held in each PE, A streams across, psums down",
        rows=("C", "R", "S"),
        cols=("K",),
        stream=("N", "P", "Q"),
        stationary="weight",
        fold_cycles=_SYSTOLIC_PRELOAD,
        util_cycles=_SYSTOLIC_PRELOAD_UTIL,
        load_cycles=_SYSTOLIC_LOAD,
    ),
    "os": Template(
        name="os",
        description="output-stationary: C[m,n] accumulates in each PE, A and B stream through",
        rows=("N", "P", "Q"),
        cols=("K",),
        stream=("C", "R", "S"),
        stationary="output",
        fold_cycles=_SYSTOLIC_OUTPUT,
        util_cycles=_SYSTOLIC_OUTPUT,
    ),
    "is": Template(
        name="is",
        description="input-stationary: A[m,k] held in each PE, B streams across, psums down",
        rows=("C", "R", "S"),
        cols=("N", "P", "Q"),
        stream=("K",),
        stationary="input",
        fold_cycles=_SYSTOLIC_PRELOAD,
        util_cycles=_SYSTOLIC_PRELOAD_UTIL,
        load_cycles=_SYSTOLIC_LOAD,
    ),
    "rs": Template(
        # Eyeriss (Chen et al., ISCA 2016): PE (r, p) convolves filter row r with ifmap row
        # p·stride + r; filter rows are reused along array rows, ifmap rows along diagonals,
        # psums ripple up the columns (R − 1 cycles per fold; RF loads overlap the previous
        # fold). Each PE's register file holds S weights of K'×C' filter rows, an S-wide ifmap
        # window of C' channels for N' images, and its psum; the in-PE loop slides over Q.
        # For a GEMM (R = S = Q = 1) this is k chunked by C' into weight-row segments in the RF.
        name="rs",
        description="row-stationary (Eyeriss): filter rows in the PE register file, "
        "ifmap rows reused diagonally, psums accumulated vertically",
        rows=("C", "R"),
        cols=("P",),
        stream=("Q", "N", "K", "C", "S"),
        stationary="weight",
        fold_cycles=FoldCycles(rows=1, cols=0, const=-1),
        util_cycles=FoldCycles(rows=1, cols=0, const=-1),
        rf_split=("N", "K", "C"),
        window_reuse=True,
    ),
    "nlr": Template(
        # No local reuse (Chen, Emer, Sze, ISCA 2016, Sec. V-C; DianNao-like): the PEs have no
        # register file. Each cycle the buffer multicasts one input per array row to every
        # column, unicasts a weight to every PE, and each column reduces its psums spatially
        # over C·R·S (an adder chain: R − 1 cycles to fill) and writes them back to the buffer.
        # The comparison baseline of the Eyeriss paper, not a product's dataflow: the mapper's
        # "best" does not search it on a generic array (mapper.GENERIC_DATAFLOWS).
        name="nlr",
        description="no local reuse: nothing stays in the PE; inputs multicast and weights "
        "unicast from the buffer every MAC, psums reduced across the array",
        rows=("C", "R", "S"),
        cols=("K",),
        stream=("N", "P", "Q"),
        stationary=None,
        fold_cycles=FoldCycles(rows=1, cols=0, const=-1),
        util_cycles=FoldCycles(rows=1, cols=0, const=-1),
        local_reuse=False,
    ),
    "tc": Template(
        # A GPU SM's tensor cores (NVIDIA Volta and later): each CTA keeps a BM x BN output
        # tile's accumulators in registers while the reduction streams BK-deep slices of A and
        # B through shared memory (CUTLASS / Triton GEMMs; a multi-stage cp.async or TMA
        # pipeline). The MMA instructions issue back to back: a fold (an array-sized block of
        # the output tile, one MMA per BK slice) has no fill or drain of its own, and only the
        # pipeline's prologue and epilogue are exposed (the first load and the last store of
        # the loop nest's time rule). The CTA tiles are the shapes such kernels are built for.
        name="tc",
        description="tensor cores: a CTA's output tile accumulates in registers while "
        "BK-deep slices of A and B stream through shared memory into pipelined MMAs",
        rows=("N", "P", "Q"),
        cols=("K",),
        stream=("C", "R", "S"),
        stationary="output",
        fold_cycles=_PIPELINED,
        util_cycles=_PIPELINED,
        extents=(
            ("G", (1,)),  # a CTA computes one product of a batched GEMM
            # BM: one to four warpgroups' MMA rows; the smaller ones are an implicit GEMM's
            # output rows of a convolution (BM = P' x Q) and MMA tiles of few tokens
            ("P", (1, 2, 4, 8, 16, 32, 64, 128, 256)),
            ("K", (32, 64, 128, 256)),  # BN
            ("C", (32, 64, 128, 256)),  # BK
        ),
        output_in_registers=True,
        min_tile_rows=64,  # wgmma.m64nNk16: a warpgroup's MMA is 64 rows (PTX ISA, sm_90a)
        # Decode GEMV kernels run their FMAs on the CUDA cores, not the tensor cores (whose
        # MMAs would spend a 64-row fold on one token): TensorRT-LLM's weight-only batched GEMV
        # (cpp/tensorrt_llm/kernels/weightOnlyBatchedGemv), the AWQ GEMV kernel
        # (llm-awq awq/kernels/csrc/quantization/gemv_cuda.cu), exllama's GPTQ q4 matmul, which
        # dequantize each weight in registers and multiply-add it with half2/float FMAs while
        # the next weights load (cp.async or many warps in flight).
        vector_macs=True,
    ),
}
"""The dataflows, by name."""

