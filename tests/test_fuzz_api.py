"""A bounded, deterministic sample of the API fuzz harness (tests/fuzz_api.py): valid random
chips, models, scenarios, technique stacks and serving configs through every engine; each
result's figures are finite and non-negative, or the call raises an InfersimError. The full
run (10,000+ configurations) is benchmarks/bench_fuzz_api.py."""

from __future__ import annotations

import json
import math
import time
import warnings

import fuzz_api
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infersim.errors import InfersimError

SAMPLE = {"roofline": 200, "analytic": 80, "events": 40}
"""Examples per engine (serving: :data:`SERVING`); derandomized, so every run draws the same."""

SERVING = 60

HANG_S = 30.0


def _check(case: tuple, serving: bool = False) -> None:
    make = fuzz_api.serving_case if serving else fuzz_api.simulate_case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = fuzz_api.outcome(make(*case), hang_s=HANG_S)
    assert not result.failed, (
        f"{result.kind}: {result.detail}\nreproduce: "
        f"{json.dumps(fuzz_api.case_doc(case, serving), default=str)}"
    )


def _settings(examples: int) -> settings:
    return settings(max_examples=examples, derandomize=True, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("engine", list(SAMPLE))
def test_simulate_returns_finite_figures_or_an_infersim_error(engine: str):
    small = engine == "events"

    @_settings(SAMPLE[engine])
    @given(st.tuples(fuzz_api.chips(), fuzz_api.models(small=small),
                     fuzz_api.scenarios(small=small), fuzz_api.techniques(), st.just(engine),
                     st.sampled_from(fuzz_api.DATAFLOWS)))
    def check(case: tuple) -> None:
        _check(case)

    check()


def test_serving_returns_finite_figures_or_an_infersim_error():
    @_settings(SERVING)
    @given(st.tuples(fuzz_api.chips(), fuzz_api.models(small=True), fuzz_api.serving_configs(),
                     fuzz_api.techniques(), st.sampled_from(fuzz_api.ENGINES), st.just("best")))
    def check(case: tuple) -> None:
        _check(case, serving=True)

    check()


def test_the_harness_classifies_each_outcome():
    def raises(exc: BaseException) -> dict:
        raise exc

    assert fuzz_api.outcome(lambda: {"a": 1.0, "b": [0, None]}).kind == "ok"
    assert fuzz_api.outcome(lambda: raises(InfersimError("bad"))).kind == "InfersimError"
    other = fuzz_api.outcome(lambda: raises(ZeroDivisionError("x")))
    assert other.failed and other.kind == "other exception"
    bad = fuzz_api.outcome(lambda: {"ops": [{"time_s": math.inf}, {"time_s": -1.0}]})
    assert bad.kind == "bad figure" and bad.key == "ops.[].time_s"
    start = time.perf_counter()
    hang = fuzz_api.outcome(lambda: time.sleep(5) or {}, hang_s=0.2)
    assert hang.kind == "hang" and time.perf_counter() - start < 2
