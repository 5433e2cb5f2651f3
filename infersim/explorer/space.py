"""The design space of a spec: axes as dimensions, designs (a base chip plus overrides) and
points (a design × workload × technique stack × dataflow × engine), each with a stable key.
A stack that cannot apply to a workload is not a point of it: speculative decoding has no
meaning on a prefill step, so its stacks are left out of prefill (and operator-list) workloads.

Keys are content hashes: a design's key hashes its base chip's full description (``Chip.key``)
with the overrides applied to it; a point's key adds the workload's full description, the
technique stack, the dataflow, the engine and the infersim version. The same point in two sweeps
has the same key, so a result store can resume without duplicating a row.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from infersim import __version__
from infersim.arch_models.chip import Chip
from infersim.explorer.spec import (
    GridSearch,
    LhsSearch,
    RandomSearch,
    RangeAxis,
    SweepSpec,
    WorkloadCase,
    axis_paths,
    dataflow_engines,
)


def _hash(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Dimension:
    """One axis of a chip entry: a list of values or a numeric range."""

    key: str
    values: tuple[Any, ...] | None = None
    axis: RangeAxis | None = None

    def _cast(self, value: float) -> Any:
        assert self.axis is not None
        value = min(max(value, self.axis.low), self.axis.high)
        return round(value) if self.axis.integer else float(value)

    def grid(self) -> list[Any]:
        """The grid values: the list, or ``num`` points over the range (rounded, de-duplicated)."""
        if self.values is not None:
            return list(self.values)
        assert self.axis is not None and self.axis.num is not None
        a, num = self.axis, self.axis.num
        raw = np.geomspace(a.low, a.high, num) if a.log else np.linspace(a.low, a.high, num)
        return list(dict.fromkeys(self._cast(float(v)) for v in raw))

    def at(self, u: float) -> Any:
        """The value at unit coordinate ``u`` in [0, 1) (uniform, or log-uniform on log axes)."""
        if self.values is not None:
            return self.values[min(int(u * len(self.values)), len(self.values) - 1)]
        assert self.axis is not None
        a = self.axis
        if a.log:
            return self._cast(math.exp(math.log(a.low) + u * (math.log(a.high) - math.log(a.low))))
        return self._cast(a.low + u * (a.high - a.low))

    def bounds(self) -> tuple[float, float, bool]:
        """(low, high, integral) of this axis in optimizer coordinates."""
        if self.values is not None:
            return 0.0, float(len(self.values) - 1), True
        assert self.axis is not None
        a = self.axis
        if a.log:
            return math.log(a.low), math.log(a.high), False
        return a.low, a.high, a.integer

    def from_x(self, x: float) -> Any:
        """The axis value at optimizer coordinate ``x`` (indices and integers rounded)."""
        if self.values is not None:
            return self.values[int(min(max(round(x), 0), len(self.values) - 1))]
        assert self.axis is not None
        return self._cast(math.exp(x) if self.axis.log else x)


@dataclass(frozen=True, slots=True)
class Design:
    """A chip design: chip entry ``entry`` with ``overrides`` = ((axis key, value), ...)."""

    entry: int
    overrides: tuple[tuple[str, Any], ...]
    key: str

    def changes(self) -> dict[str, Any]:
        """Dotted path → value, for ``Chip.with_`` (multi-path axes expanded)."""
        return {path: value for key, value in self.overrides for path in axis_paths(key)}

    def label(self) -> str:
        """Short text of the overrides with units, e.g.
        ``array.rows,array.cols=128 sram.capacity=16.8 MB dram.bandwidth=3.2 TB/s``."""
        return " ".join(_short(k, v) for k, v in self.overrides)


_UNITS = (("_bytes_per_s", "B/s"), ("_bytes_per_cycle", "B/cycle"), ("_bytes", "B"),
          ("_hz", "Hz"), ("_s", "s"))


def _short(key: str, value: Any) -> str:
    """``key=value`` with the unit suffix of the key moved onto the value (SI prefixes)."""
    from infersim.units import fmt_bytes_binary, si

    for suffix, unit in _UNITS:
        if key.endswith(suffix) and isinstance(value, int | float) and not isinstance(value, bool):
            if unit == "B" and value >= 1024 and value % 1024 == 0:  # SRAM sizes: 4 MiB
                return f"{key.removesuffix(suffix)}={fmt_bytes_binary(float(value))}"
            return f"{key.removesuffix(suffix)}={si(float(value), unit)}"
    if isinstance(value, float):
        return f"{key}={value:.4g}"
    if isinstance(value, dict):
        return f"{key}={{" + ",".join(f"{k}:{v}" for k, v in value.items()) + "}"
    return f"{key}={value}"


@dataclass(frozen=True, slots=True)
class Point:
    """One evaluation: a design on a workload with a technique stack, dataflow and engine."""

    seq: int
    design: Design
    case: int
    technique: str
    dataflow: str | None
    engine: str
    key: str


class DesignSpace:
    """The spec's designs and points, generated lazily and deterministically."""

    def __init__(self, spec: SweepSpec) -> None:
        self.spec = spec
        self.bases: list[Chip] = [e.base_chip() for e in spec.chips]
        self.names: list[str] = _unique([e.label or b.name for e, b in zip(spec.chips, self.bases,
                                                                             strict=True)])
        self.dims: list[list[Dimension]] = [
            [
                Dimension(k, values=tuple(v)) if isinstance(v, list) else Dimension(k, axis=v)
                for k, v in entry.axes.items()
            ]
            for entry in spec.chips
        ]
        self.cases: list[WorkloadCase] = spec.cases()
        speculative = [t for t in spec.techniques if _speculative(t)]
        self.techniques: list[list[str]] = [
            [t for t in spec.techniques if t not in speculative]
            if speculative and (case.scenario is None or case.scenario.phase != "decode")
            else list(spec.techniques)
            for case in self.cases
        ]
        """Per workload case, the technique stacks it is swept with."""

    def design(self, entry: int, values: Iterable[Any]) -> Design:
        """The design of ``entry`` with its axes set to ``values`` (in axis order)."""
        overrides = tuple(zip((d.key for d in self.dims[entry]), values, strict=True))
        key = _hash({"base": self.bases[entry].key, "overrides": [list(o) for o in overrides]})
        return Design(entry, overrides, key)

    def _samples(self, entry: int, n: int, seed: int, lhs: bool) -> np.ndarray:
        rng = np.random.default_rng([seed, entry])
        d = len(self.dims[entry])
        if lhs:
            from scipy.stats import qmc  # slow to import; only Latin-hypercube sweeps need it

            return qmc.LatinHypercube(d=d, rng=rng).random(n)
        return rng.random((n, d))

    def designs(self) -> Iterator[Design]:
        """Every design of a grid, random or Latin-hypercube search, without repeats."""
        search = self.spec.search
        seen: set[str] = set()
        for entry, dims in enumerate(self.dims):
            if not dims:
                candidates: Iterable[Design] = [self.design(entry, ())]
            elif isinstance(search, GridSearch):
                candidates = (
                    self.design(entry, combo)
                    for combo in itertools.product(*(d.grid() for d in dims))
                )
            elif isinstance(search, RandomSearch | LhsSearch):
                u = self._samples(entry, search.n, search.seed, isinstance(search, LhsSearch))
                candidates = (
                    self.design(entry, [d.at(float(x)) for d, x in zip(dims, row, strict=True)])
                    for row in u
                )
            else:  # optimize: fixed chips here; swept ones come from the optimizer
                continue
            for design in candidates:
                if design.key not in seen:
                    seen.add(design.key)
                    yield design

    def point_key(self, design: Design, case: int, technique: str, dataflow: str | None,
                  engine: str) -> str:
        """The stable key of one point."""
        return _hash({
            "design": design.key,
            "workload": self.cases[case].key,
            "techniques": technique,
            "dataflow": dataflow,
            "engine": engine,
            "version": __version__,
        })

    def points_of(self, design: Design, start: int = 0) -> list[Point]:
        """Every point of ``design``: workloads × techniques × dataflows × engines."""
        out = []
        seq = start
        combos = [
            (index, technique, pair)
            for index in range(len(self.cases))
            for technique in self.techniques[index]
            for pair in self._engine_dataflows
        ]
        for case, technique, (engine, dataflow) in combos:
            key = self.point_key(design, case, technique, dataflow, engine)
            out.append(Point(seq, design, case, technique, dataflow, engine, key))
            seq += 1
        return out

    @property
    def _engine_dataflows(self) -> list[tuple[str, str | None]]:
        """(engine, dataflow) pairs: the spec's dataflows for engines that map, None else."""
        mapped = dataflow_engines()
        return [(e, d) for e in self.spec.engines
                for d in (self.spec.dataflow_axis if e in mapped else [None])]

    @property
    def points_per_design(self) -> int:
        """Points each design expands to."""
        return sum(map(len, self.techniques)) * len(self._engine_dataflows)

    def count_designs(self) -> int | None:
        """How many designs :meth:`designs` yields at most (None for optimize)."""
        search = self.spec.search
        total = 0
        for dims in self.dims:
            if not dims:
                total += 1
            elif isinstance(search, GridSearch):
                total += math.prod(len(d.grid()) for d in dims)
            elif isinstance(search, RandomSearch | LhsSearch):
                total += search.n
            else:
                return None
        return total

    def points(self) -> Iterator[Point]:
        """Every point of the search (not optimize), designs outermost, ``seq`` numbered."""
        seq = 0
        for design in self.designs():
            pts = self.points_of(design, seq)
            seq += len(pts)
            yield from pts


def _speculative(stack: str) -> bool:
    """Whether the technique stack ``stack`` decodes speculatively."""
    from infersim.workloads.techniques import Speculate, parse

    return any(isinstance(t, Speculate) for t in parse(stack).techniques)


def _unique(names: list[str]) -> list[str]:
    out, counts = [], dict.fromkeys(names, 0)
    for name in names:
        counts[name] += 1
        out.append(name if names.count(name) == 1 else f"{name}#{counts[name]}")
    return out
