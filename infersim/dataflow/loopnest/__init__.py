"""One loop-nest analyzer for every dataflow: ``analyze(op, chip, template, tiling) -> Mapping``.

The op is the unified nest of :mod:`infersim.dataflow.templates` (a GEMM is a 1×1 convolution).
A mapping has four levels, outer to inner:

``dram``           loops over SRAM tiles (``Tiling.tile`` extents, ``Tiling.order``); the tiles
                   of the outer loops are dealt to the cores;
``sram``           inside one SRAM tile, the fold loop: the template's fold dims, then the folds
                   of the flattened row group over the array rows and of the column group over
                   the array columns (SCALE-Sim's folds);
``array``          the spatial dims of one fold on ``rows × cols`` PEs;
``register_file``  the in-PE stream loop (``Tiling.rf`` factors for the template's rf_split dims).

Counting rules (elements; bytes = elements × the operand's dtype width; psums at the output dtype):

- DRAM: an operand's tile is fetched again whenever a DRAM loop above its innermost relevant
  loop, that it does not depend on, iterates; a tile that only the loops dealt to the cores
  leave unchanged is fetched once per core (an output, once per chunk of a reduction loop).
  Input rows overlap between P tiles by R − stride (halo). An output revisited by an outer
  reduction loop spills partial sums: written every visit, read back on all but the first.
- SRAM: fills from DRAM are writes; each fold reads the operand elements it feeds the array,
  one read per array edge port per element (the im2col view, SCALE-Sim's counts) unless the
  template reuses the sliding window (RS: an ifmap row feeds a whole diagonal); outputs leaving
  the array are writes, each accumulation into an existing partial sum a read.
- array: every PE receives its share of each fed operand once per fold (one transfer per element
  per PE, forwarding or multicast alike); every PE emits its partial sums once per fold.
- register_file: an operand a PE reuses within a fold (fewer elements delivered than MACs) is
  held in the RF: written on delivery, read by every MAC; an RF-held output is read and written
  by every MAC. Operands used once per delivery are consumed from the pipeline registers.

Compute cycles follow SCALE-Sim: per fold ``fold_cycles(R, C) + ceil(T / r)`` with T the MACs
one PE runs in the fold and r the array's MACs per PE per cycle for the op's dtype (r > 1 packs
r streamed MACs into one cycle; SCALE-Sim itself counts words, r = 1), summed over all folds of
all tiles, minus 1 as SCALE-Sim reports. With several cores, the iterations of the outer DRAM
loops (as many as needed to give every core work; a reduction loop in chunks, split-K: see
:mod:`~.dram`) are dealt in ceil-waves: compute cycles = mean cycles per dealt iteration ×
ceil(iterations / cores) × the longest item's share. Compute cycles are never below MACs /
(PEs × cores × r).

SRAM need: twice (double buffering) the input region, weights and outputs of one SRAM tile, per
core; the shared SRAM (L2) is not a level of this nest. Time: see
:mod:`~infersim.dataflow.loopnest.figures`. The per-kernel launch overhead is not included (the
simulator adds it).

Every rule is written once, against a math namespace (:mod:`~.numerics`): float64 arrays over
many candidate tilings for the mapper's search, plain floats for one tiling. The modules:

``problem``   the op as the nest (:class:`Problem`, :class:`Nest`), :class:`Tiling`, and the
              element counts of tensor regions;
``numerics``  the two math namespaces;
``folds``     the fold level of one SRAM tile (cycles, elements fed, delivered, held);
``tiles``     the tile classes of a tiling and the fold totals over every tile;
``dram``      the DRAM loop order: refetches, copies per core, loops dealt to the cores;
``waves``     the work items dealt to the cores in waves, the rates of the level feeding them,
              and the time of a two-level chip (cores fed by a shared SRAM in front of DRAM);
``figures``   traffic per level, cycles, utilizations and time from all of the above;
``mapping``   :class:`Mapping`, :func:`analyze` and the builders of a mapping from figures.
"""

from infersim.dataflow.loopnest.figures import (
    LEVELS,
    Access,
    evaluate,
    evaluate_orders,
    figures_of,
    total_cycles_orders,
)
from infersim.dataflow.loopnest.folds import rf_need, tile_compute, tile_folds, tile_operand_bytes
from infersim.dataflow.loopnest.mapping import (
    Mapping,
    analyze,
    build_mapping,
    made,
    mapping_of,
    picked_mapping,
)
from infersim.dataflow.loopnest.numerics import NP, PY, Arr, Candidates, Figures, MathNamespace
from infersim.dataflow.loopnest.problem import (
    AXES,
    DEPENDS,
    TILEABLE,
    Nest,
    Order,
    Orders,
    Problem,
    Tiling,
    footprint,
    nest_of,
    problem_of,
    tile_bytes,
    total_footprint,
)
from infersim.dataflow.loopnest.tiles import TileClasses, all_tiles, tile_classes
from infersim.dataflow.templates import DIMS, OPERANDS

__all__ = [
    "AXES",
    "DEPENDS",
    "DIMS",
    "LEVELS",
    "NP",
    "OPERANDS",
    "PY",
    "TILEABLE",
    "Access",
    "Arr",
    "Candidates",
    "Figures",
    "Mapping",
    "MathNamespace",
    "Nest",
    "Order",
    "Orders",
    "Problem",
    "TileClasses",
    "Tiling",
    "all_tiles",
    "analyze",
    "build_mapping",
    "evaluate",
    "evaluate_orders",
    "figures_of",
    "footprint",
    "made",
    "mapping_of",
    "nest_of",
    "picked_mapping",
    "problem_of",
    "rf_need",
    "tile_bytes",
    "tile_classes",
    "tile_compute",
    "tile_folds",
    "tile_operand_bytes",
    "total_cycles_orders",
    "total_footprint",
]
