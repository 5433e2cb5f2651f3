"""The mapper acceptance corpus: (op, chip, template, objective) cases with the best cost the
exhaustive search (``map_op(..., exhaustive=True)``: every candidate priced) of the commit in
its header (``source_commit``) found, and the comparison of a mapper against it. Regenerate it
whenever the cost model changes (a new mechanism, a preset): the test of the bounded search
is against the exhaustive search of the same model.

``mapper_corpus.json.gz`` (written by ``gen_mapper_corpus.py`` beside this file) holds
``chips``, a list of ``{"preset": name, "overrides": {dotted path: value}, "key": chip key}``
(a chip is ``load_chip(preset).with_(**overrides)``), and ``cases``, a list of
``{"chip": index into chips, "op": op fields with "kind", "template", "objective",
"cost": float or null, "dataflow", "tiling"}``: ``cost`` is :func:`mapping_cost` of the
golden mapping in the objective's unit (latency s, energy pJ, EDP pJ·s), null where no
tiling fit (the golden raised :class:`InfersimError`).

Importable by the test (``golden.mapper_corpus``, tests/dataflow on ``sys.path``) and by a
benchmark (put tests/dataflow on ``sys.path``).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from infersim.arch_models.chip import Chip
from infersim.arch_models.presets import load_chip
from infersim.dataflow.mapper import map_op, mapping_cost
from infersim.errors import InfersimError
from infersim.workloads.ops import Conv2d, Gemm

CORPUS = Path(__file__).resolve().parent / "mapper_corpus.json.gz"
"""The corpus file."""

REL_TOL = 1e-9
"""Two costs are equal when they differ by at most this fraction of the golden cost."""

Kind = Literal["equal", "better", "worse", "both_fail", "newly_fails", "unfit", "crash"]
FAILURES: frozenset[str] = frozenset({"worse", "newly_fails", "unfit", "crash"})
"""Outcome kinds the acceptance test rejects."""
SAME: frozenset[str] = frozenset({"equal", "both_fail"})
"""Outcome kinds that count as the golden's result."""

Mapper = Callable[[Gemm | Conv2d, Chip, str, str], Any]
"""``map_op``'s signature as the comparison calls it: (op, chip, template, objective)."""


@dataclass(frozen=True)
class Case:
    """One corpus case: the problem, and what the golden search returned for it."""

    index: int
    chip: int
    op: dict[str, Any]
    template: str
    objective: Literal["latency", "energy", "edp"]
    cost: float | None
    dataflow: str | None
    tiling: dict[str, Any] | None

    def spec(self, corpus: Corpus) -> str:
        """A one-line description: chip spec, op fields, template and objective."""
        chip = corpus.chips[self.chip]
        return (f"#{self.index} chip[{self.chip}]={chip['preset']}+{chip['overrides']} "
                f"op={self.op} {self.template}/{self.objective}")


@dataclass(frozen=True)
class Corpus:
    """The corpus file as read: header fields, chip specs and cases."""

    header: dict[str, Any]
    chips: list[dict[str, Any]]
    cases: list[Case]


@dataclass(frozen=True)
class Outcome:
    """A mapper's result on one case beside the golden's.

    ``rel`` is (cost − golden) / |golden| (positive: worse), None unless both mapped.
    """

    case: Case
    kind: Kind
    cost: float | None
    rel: float | None
    detail: str = ""


def load_corpus(path: Path = CORPUS) -> Corpus:
    """The corpus at ``path`` (gzip JSON, see the module docstring)."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        data = json.load(f)
    cases = [
        Case(index=i, chip=c["chip"], op=c["op"], template=c["template"],
             objective=c["objective"], cost=c["cost"], dataflow=c.get("dataflow"),
             tiling=c.get("tiling"))
        for i, c in enumerate(data["cases"])
    ]
    return Corpus(header=data["header"], chips=data["chips"], cases=cases)


def build_chip(spec: dict[str, Any]) -> Chip:
    """The chip of a corpus chip spec: ``load_chip(preset).with_(**overrides)``."""
    chip = load_chip(spec["preset"])
    return chip.with_(**spec["overrides"]) if spec["overrides"] else chip


def build_op(fields: dict[str, Any]) -> Gemm | Conv2d:
    """The op of a corpus op spec (its ``kind`` selects :class:`Gemm` or :class:`Conv2d`)."""
    if fields["kind"] == "gemm":
        return Gemm.model_validate(fields)
    if fields["kind"] == "conv2d":
        return Conv2d.model_validate(fields)
    raise ValueError(f"op kind {fields['kind']!r}: the corpus holds gemm and conv2d")


def op_fields(op: Gemm | Conv2d) -> dict[str, Any]:
    """The corpus spec of ``op``: its kind and every field that differs from the default."""
    return {"kind": op.kind, **op.model_dump(mode="json", exclude_defaults=True)}


class ChipCache:
    """Chips of one corpus built once each (many cases share a chip)."""

    def __init__(self, corpus: Corpus) -> None:
        self._corpus = corpus
        self._chips: dict[int, Chip] = {}

    def __getitem__(self, index: int) -> Chip:
        chip = self._chips.get(index)
        if chip is None:
            chip = build_chip(self._corpus.chips[index])
            self._chips[index] = chip
        return chip


def _relative(cost: float, golden: float) -> float:
    return (cost - golden) / abs(golden) if golden != 0 else cost - golden


def run_case(case: Case, chip: Chip, mapper: Mapper = map_op) -> Outcome:
    """``mapper`` on ``case`` priced by :func:`mapping_cost`, classified against the golden.

    Kinds: ``equal`` / ``better`` / ``worse`` (both mapped; :data:`REL_TOL` apart), ``both_fail``
    (both raised :class:`InfersimError`), ``newly_fails`` (only the mapper raised), ``better``
    also where only the golden raised and the mapper's mapping fits, ``unfit`` where it does
    not, ``crash`` (any other exception).
    """
    op = build_op(case.op)
    try:
        mapping = mapper(op, chip, case.template, case.objective)
        cost = float(mapping_cost(mapping, chip, case.objective))
    except InfersimError as exc:
        kind: Kind = "both_fail" if case.cost is None else "newly_fails"
        return Outcome(case, kind, None, None, str(exc))
    except Exception as exc:  # every other error is reported, not raised
        return Outcome(case, "crash", None, None, repr(exc))
    if case.cost is None:
        kind = "better" if mapping.fits else "unfit"
        return Outcome(case, kind, cost, None, "the golden found no fitting tiling")
    rel = _relative(cost, case.cost)
    kind = "worse" if rel > REL_TOL else "better" if rel < -REL_TOL else "equal"
    return Outcome(case, kind, cost, rel)


def compare(corpus: Corpus, mapper: Mapper = map_op) -> list[Outcome]:
    """:func:`run_case` on every case of ``corpus``, in corpus order."""
    chips = ChipCache(corpus)
    return [run_case(case, chips[case.chip], mapper) for case in corpus.cases]


def differing(outcomes: Iterable[Outcome]) -> list[Outcome]:
    """The outcomes that are not the golden's result, worst first (largest ``rel``, then the
    ones without a relative difference)."""
    rest = [o for o in outcomes if o.kind not in SAME]
    return sorted(rest, key=lambda o: (o.kind not in FAILURES, -(o.rel or 0.0), o.case.index))


def report(corpus: Corpus, outcomes: Iterable[Outcome], limit: int = 20) -> str:
    """The first ``limit`` of :func:`differing` as lines: kind, golden and new cost, the
    relative difference, the case spec, and the golden's dataflow and tiling."""
    lines = []
    for o in differing(outcomes)[:limit]:
        rel = "" if o.rel is None else f" rel={o.rel:+.3e}"
        lines.append(
            f"{o.kind}: golden={o.case.cost!r} new={o.cost!r}{rel} {o.case.spec(corpus)} "
            f"golden tiling={o.case.tiling} {o.detail}"
        )
    return "\n".join(lines)
