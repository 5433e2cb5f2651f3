"""SCALE-Sim's demand and prefetch matrices (v3.0.0, ``scalesim/compute/systolic_compute_*``
and ``operand_matrix``), rebuilt for the replay in :mod:`.scalesim`.

Operand addresses are word indices: ifmap ``((row·W + col)·C + ch)`` (−1 past the image
edge), filter ``FILTER_OFFSET + n·K + k``, ofmap ``OFMAP_OFFSET + m·N + n``. A demand matrix has
one row per array cycle and one column per array edge port (−1: idle); a prefetch tape is the
order in which an operand's SRAM is filled from DRAM.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from infersim.errors import InfersimError
from infersim.workloads.ops import Conv2d, Gemm

Ints = npt.NDArray[np.int64]

FILTER_OFFSET, OFMAP_OFFSET = 10_000_000, 20_000_000
"""SCALE-Sim's default word offsets of the filter and ofmap address spaces."""


def operand_dims(op: Gemm | Conv2d,
                 ifmap_extent: tuple[int, int] | None = None) -> tuple[int, int, int]:
    """(M, K, N) of the address matrices :func:`operands` builds, without building them.

    Raises:
        InfersimError: as :func:`operands`.
    """
    *_, c, nf, _stride, e, f, r, s = _geometry(op, ifmap_extent)
    return e * f, r * s * c, nf


def _geometry(op: Gemm | Conv2d, ifmap_extent: tuple[int, int] | None
              ) -> tuple[int, int, int, int, int, int, int, int, int]:
    """(h, w, c, nf, stride, e, f, r, s) of a layer as SCALE-Sim lays it out."""
    if isinstance(op, Gemm):
        if op.batch != 1:
            raise InfersimError(f"gemm {op.name!r}: SCALE-Sim layers have batch 1")
        h, w, r, s, c, nf, stride, e, f = op.m, op.k, 1, op.k, 1, op.n, 1, op.m, 1
    else:
        if op.batch != 1:
            raise InfersimError(f"conv {op.name!r}: SCALE-Sim layers have batch 1")
        h, w = op.in_h + 2 * op.padding, op.in_w + 2 * op.padding
        r, s, c, nf, stride = op.kernel_h, op.kernel_w, op.in_channels, op.out_channels, op.stride
        e, f = op.out_h, op.out_w
        if ifmap_extent is not None:
            h, w = ifmap_extent
            out = (math.ceil((h - r + stride) / stride), math.ceil((w - s + stride) / stride))
            if out != (e, f):
                raise InfersimError(
                    f"conv {op.name!r}: ifmap extent {h}x{w} does not give its {e}x{f} output"
                )
    return h, w, c, nf, stride, e, f, r, s


def operands(op: Gemm | Conv2d,
             ifmap_extent: tuple[int, int] | None = None) -> tuple[Ints, Ints, Ints]:
    """Address matrices as SCALE-Sim builds them: ifmap (M × K), filter (K × N), ofmap (M × N).

    ``ifmap_extent`` is a convolution's ifmap (height, width) as its topology states it: with a
    stride that does not divide H − R, SCALE-Sim's last window reaches past the edge, and those
    words are idle (−1) and absent from the prefetch order, while the image rows keep the stated
    width. Without it the op's own (padded) extent is used.

    Raises:
        InfersimError: a batched layer, or an extent that does not give the op's output.
    """
    h, w, c, nf, stride, e, f, r, s = _geometry(op, ifmap_extent)
    m, k = e * f, r * s * c
    i, j = np.meshgrid(np.arange(m), np.arange(k), indexing="ij")
    orow, ocol = np.divmod(i, f)
    crow, rem = np.divmod(j, s * c)
    ccol, cch = np.divmod(rem, c)
    valid = (crow + orow * stride < h) & (ccol + ocol * stride < w)
    ifm = np.where(valid, ((orow * stride + crow) * w + ocol * stride + ccol) * c + cch, -1)
    kk, nn = np.meshgrid(np.arange(k), np.arange(nf), indexing="ij")
    mm, no = np.meshgrid(np.arange(m), np.arange(nf), indexing="ij")
    return (ifm.astype(np.int64), (nn * k + kk + FILTER_OFFSET).astype(np.int64),
            (nf * mm + no + OFMAP_OFFSET).astype(np.int64))


def _pad(a: Ints, rows: int, cols: int) -> Ints:
    out = np.full((rows, cols), -1, dtype=np.int64)
    out[: a.shape[0], : a.shape[1]] = a
    return out


def _skew(a: Ints) -> Ints:
    """Column ``j`` moved down by ``j`` rows (the systolic pipeline fill)."""
    rows, cols = a.shape
    out = np.full((rows + cols - 1, cols), -1, dtype=np.int64)
    out[np.arange(rows)[:, None] + np.arange(cols), np.arange(cols)] = a
    return out


def _gap(rows: int, cols: int) -> Ints:
    return np.full((rows, cols), -1, dtype=np.int64)


def _diagonal(a: Ints) -> Ints:
    """Flatten by anti-diagonals (row + col), inside one from the largest row down."""
    r, c = np.indices(a.shape)
    order = np.lexsort((-r.ravel(), (r + c).ravel()))
    return a.ravel()[order]


def _slices(n: int, step: int) -> list[tuple[int, int]]:
    return [(lo, min(lo + step, n)) for lo in range(0, n, step)]


def matrices(df: str, rows: int, cols: int, ifm: Ints, fil: Ints,
              ofm: Ints) -> tuple[Ints, Ints, Ints, Ints, Ints]:
    """(ifmap tape, filter tape, ifmap, filter and ofmap demand matrices) of one dataflow."""
    m, _ = ifm.shape
    n = fil.shape[1]
    d_if: list[Ints] = []
    d_f: list[Ints] = []
    d_o: list[Ints] = []
    if df == "ws":
        t = m
        rs, cs = _slices(ifm.shape[1], rows), _slices(n, cols)
        for c0, c1 in cs:
            for r0, r1 in rs:
                d_if.append(_skew(np.vstack([_gap(rows, rows), _pad(ifm[:, r0:r1], t, rows),
                                             _gap(cols - 1, rows)])))
                d_f.append(np.vstack([np.flipud(_pad(fil[r0:r1, c0:c1], rows, cols)),
                                      _gap(rows + cols + t - 2, cols)]))
                d_o.append(_skew(np.vstack([_gap(2 * rows - 1, cols),
                                            _pad(ofm[:, c0:c1], t, cols)])))
        tape_if = _diagonal(np.vstack([_pad(ifm[:, r0:r1], t, rows) for r0, r1 in rs]))
        tape_f = np.vstack([_pad(fil[:, c0:c1], fil.shape[0], cols) for c0, c1 in cs]).ravel()
    elif df == "os":
        t = ifm.shape[1]
        rs, cs = _slices(m, rows), _slices(n, cols)
        ift = ifm.T
        for c0, c1 in cs:
            for r0, r1 in rs:
                d_if.append(_skew(np.vstack([_pad(ift[:, r0:r1], t, rows), _gap(cols - 1, rows)])))
                d_f.append(_skew(np.vstack([_pad(fil[:, c0:c1], t, cols), _gap(rows - 1, cols)])))
                d_o.append(_skew(np.vstack([_gap(t - 1, cols),
                                            np.flipud(_pad(ofm[r0:r1, c0:c1], rows, cols))])))
        tape_if = _diagonal(np.vstack([_pad(ift[:, r0:r1], t, rows) for r0, r1 in rs]))
        tape_f = _diagonal(np.vstack([_pad(fil[:, c0:c1], t, cols) for c0, c1 in cs]))
    else:  # is
        t = n
        rs, cs = _slices(ifm.shape[1], rows), _slices(m, cols)
        ift = ifm.T
        for c0, c1 in cs:
            for r0, r1 in rs:
                d_if.append(np.vstack([np.flipud(_pad(ift[r0:r1, c0:c1], rows, cols)),
                                       _gap(rows + cols + t - 2, cols)]))
                d_f.append(_skew(np.vstack([_gap(rows, rows), _pad(fil[r0:r1, :].T, t, rows),
                                            _gap(cols - 1, rows)])))
                d_o.append(_skew(np.vstack([_gap(2 * rows - 1, cols),
                                            _pad(ofm[c0:c1, :].T, t, cols)])))
        tape_if = np.vstack([_pad(ift[:, c0:c1], ift.shape[0], cols) for c0, c1 in cs]).ravel()
        tape_f = _diagonal(np.vstack([_pad(fil[r0:r1, :].T, t, rows) for r0, r1 in rs]))
    return tape_if, tape_f, np.vstack(d_if), np.vstack(d_f), np.vstack(d_o)


def demand_rows(df: str, rows: int, cols: int, m: int, k: int, n: int) -> int:
    """SCALE-Sim's demand rows (compute cycles + 1): folds × (fold overhead + stream)."""
    across, down, t = {"ws": (k, n, m), "os": (m, n, k), "is": (k, m, n)}[df]
    overhead = rows + cols - 2 if df == "os" else 2 * rows + cols - 2
    return math.ceil(across / rows) * math.ceil(down / cols) * (overhead + t)


@dataclass(frozen=True)
class FoldFigures:
    """SCALE-Sim's compute-side counters of one layer (``systolic_compute_*``): SRAM words
    demanded (its counts: whole fold slices, past-the-edge words included; OS adds R + C per
    fold to the ofmap writes) and the per-fold mean mapping efficiency and compute utilization
    (fractions, summed in its fold order so that the floats are its own)."""

    ifmap_reads: int
    filter_reads: int
    ofmap_writes: int
    mapping_efficiency: float
    compute_utilization: float


def fold_figures(df: str, rows: int, cols: int, m: int, k: int, n: int) -> FoldFigures:
    """:class:`FoldFigures` of an M × K × N layer on a ``rows × cols`` array."""
    across, down, t = {"ws": (k, n, m), "os": (m, n, k), "is": (k, m, n)}[df]
    row_folds, col_folds = math.ceil(across / rows), math.ceil(down / cols)
    cycles = rows + cols + t - 2 if df == "os" else 2 * rows + 2 * cols + t - 3
    pes = rows * cols
    eff: list[float] = []
    util: list[float] = []
    for fc in range(col_folds):
        for fr in range(row_folds):
            used = min(rows, across - fr * rows) * min(cols, down - fc * cols)
            eff.append(used / pes)
            util.append(used * t / (pes * cycles))
    reads = {
        "ws": (col_folds * m * k, k * n, row_folds * m * n),
        "os": (col_folds * k * m, row_folds * k * n, m * n + len(eff) * (rows + cols)),
        "is": (k * m, col_folds * n * k, row_folds * n * m),
    }[df]
    return FoldFigures(*reads, sum(eff) / len(eff), sum(util) / len(util))
