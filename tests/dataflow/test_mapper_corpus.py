"""The mapper against the exhaustive search of the corpus's source commit on the golden corpus
(golden/mapper_corpus.json.gz, written by golden/gen_mapper_corpus.py): never worse by more
than a relative 1e-9, equal on at least 99% of the cases, and an error exactly where the
golden found no fitting tiling (or a fitting mapping there, which counts as better)."""

from __future__ import annotations

from collections import Counter

import pytest
from golden.mapper_corpus import (
    FAILURES,
    REL_TOL,
    SAME,
    Corpus,
    Outcome,
    build_chip,
    compare,
    load_corpus,
    report,
)

from infersim.dataflow.templates import TEMPLATES

MIN_CASES = 10_000
MIN_SAME = 0.99


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return load_corpus()


@pytest.fixture(scope="module")
def outcomes(corpus: Corpus) -> list[Outcome]:
    return compare(corpus)


def test_the_corpus_mixes_templates_objectives_and_chips(corpus: Corpus) -> None:
    cases = corpus.cases
    assert len(cases) >= MIN_CASES
    assert corpus.header["rel_tol"] == REL_TOL
    pairs = Counter((c.template, c.objective) for c in cases)
    assert len(pairs) == len(TEMPLATES) * 3  # every template under every objective
    assert min(pairs.values()) >= len(cases) / (2 * len(pairs))
    families = {corpus.chips[c.chip]["family"] for c in cases}
    assert {"preset", "random", "preset-cores-view", "preset-shared-view"} <= families
    assert {op["kind"] for op in (c.op for c in cases)} == {"gemm", "conv2d"}


def test_the_corpus_chips_are_todays_chips(corpus: Corpus) -> None:
    # a preset or the Chip schema changed since the corpus was written: regenerate it
    changed = [(i, spec["preset"], spec["overrides"]) for i, spec in enumerate(corpus.chips)
               if build_chip(spec).key != spec["key"]]
    assert not changed, f"{len(changed)} chips rebuild differently, first: {changed[:3]}"


def test_the_mapper_is_never_worse_than_the_exhaustive_search(
    corpus: Corpus, outcomes: list[Outcome]
) -> None:
    failures = [o for o in outcomes if o.kind in FAILURES]
    kinds = Counter(o.kind for o in failures)
    assert not failures, (
        f"{len(failures)} of {len(outcomes)} cases fail ({dict(kinds)}); worst:\n"
        + report(corpus, failures)
    )


def test_the_mapper_equals_the_exhaustive_search_on_99_percent(
    corpus: Corpus, outcomes: list[Outcome]
) -> None:
    same = sum(o.kind in SAME for o in outcomes)
    kinds = Counter(o.kind for o in outcomes)
    assert same >= MIN_SAME * len(outcomes), (
        f"only {same} of {len(outcomes)} cases equal the golden ({dict(kinds)}); first:\n"
        + report(corpus, outcomes)
    )
