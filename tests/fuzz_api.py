"""Hypothesis strategies for every configuration kind of the public API, and the property they
are checked against, shared by the CI sample in tests/test_fuzz_api.py and the full run in
benchmarks/bench_fuzz_api.py.

Strategies draw *valid* configurations: chips (every field within its validator's range, the
edges and the extreme in-range values included), models (dense, MoE, MLA, sliding windows),
scenarios, technique stacks, serving workloads and configs. Numeric ranges are read from the
pydantic field bounds, so a tightened validator tightens the strategy.

The property (:func:`outcome`): ``simulate`` (or ``simulate_serving``) either returns a result
whose every reported figure is finite and non-negative, or raises an
:class:`~infersim.errors.InfersimError` — never another exception, never a hang
(:data:`HANG_S`).
"""

from __future__ import annotations

import math
import signal
import traceback
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import cache
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from infersim import dtypes
from infersim.arch_models.chip import (
    MAX_MACS_PER_PE_PER_CYCLE,
    MIN_EFFICIENCY,
    MIN_MACS_PER_PE_PER_CYCLE,
    Chip,
)
from infersim.errors import InfersimError
from infersim.workloads.architectures import ARCHITECTURES
from infersim.workloads.models import ModelConfig
from infersim.workloads.scenario import Scenario

ENGINES = ("roofline", "analytic", "events")

DATAFLOWS = ("best", "best", "ws", "os", "is", "rs")
"""Dataflows the mapped engines are asked for (the mapper's best most often)."""

HANG_S = 60.0
"""An example running longer than this is a hang (a SIGALRM interrupts it)."""

# Strategies are built once (functools.cache): hypothesis validates a new strategy object on every
# draw, which would cost more than most simulations.


# --- numbers ---------------------------------------------------------------------------------


def _bounds(model: type[BaseModel], name: str) -> tuple[float | None, bool, float | None, bool]:
    """(low, low is open, high, high is open) of a field's annotated bounds."""
    lo: float | None = None
    hi: float | None = None
    lo_open = hi_open = False
    for meta in model.model_fields[name].metadata:
        if isinstance(meta, annotated_types.Ge):
            lo = float(meta.ge)  # type: ignore[arg-type]
        elif isinstance(meta, annotated_types.Gt):
            lo, lo_open = float(meta.gt), True  # type: ignore[arg-type]
        elif isinstance(meta, annotated_types.Le):
            hi = float(meta.le)  # type: ignore[arg-type]
        elif isinstance(meta, annotated_types.Lt):
            hi, hi_open = float(meta.lt), True  # type: ignore[arg-type]
    return lo, lo_open, hi, hi_open


@cache
def floats_in(lo: float, hi: float, lo_open: bool = False, hi_open: bool = False
              ) -> st.SearchStrategy[float]:
    """Floats in the range: its edges (the smallest float above an open low edge: 5e-324 for
    ``> 0``), log-uniform values across it, and whatever hypothesis finds nasty."""
    low = math.nextafter(lo, math.inf) if lo_open else lo
    high = math.nextafter(hi, -math.inf) if hi_open else hi
    if low > 0:
        spread = st.floats(math.log(low), math.log(high)).map(
            lambda x: min(max(math.exp(x), low), high))
    else:
        spread = st.floats(-12, math.log10(high) if high > 0 else 0).map(
            lambda x: min(max(10.0**x, low), high))
    # log-uniform values most of the time: an edge in every one of a chip's 40 fields would
    # make every draw an extreme one
    return st.one_of(spread, spread, spread, st.sampled_from(sorted({low, high})),
                     st.floats(low, high, allow_nan=False, allow_infinity=False))


@cache
def ints_in(lo: int, hi: int) -> st.SearchStrategy[int]:
    """Integers in [lo, hi]: the edges, log-uniform values and hypothesis' own."""
    edges = st.sampled_from(sorted({lo, min(lo + 1, hi), hi}))
    if hi <= lo + 2:
        return st.one_of(edges, st.integers(lo, hi))
    spread = st.floats(math.log(max(lo, 1)), math.log(hi)).map(
        lambda x: min(max(round(math.exp(x)), lo), hi))
    return st.one_of(spread, spread, spread, edges, st.integers(lo, hi))


@cache
def number(model: type[BaseModel], name: str, cap: float | None = None,
           low: float | None = None) -> st.SearchStrategy[Any]:
    """Values of a numeric field within its validator's bounds (``cap`` where it has none)."""
    lo, lo_open, hi, hi_open = _bounds(model, name)
    annotation = model.model_fields[name].annotation
    integer = int in (annotation, *get_args(annotation))
    lo = low if low is not None else (lo if lo is not None else 0.0)
    hi = hi if hi is not None else (cap if cap is not None else 1e9)
    if cap is not None:
        hi = min(hi, cap)
    if integer:
        return ints_in(math.floor(lo) + lo_open, math.ceil(hi) - hi_open)
    return floats_in(lo, hi, lo_open, hi_open)


# --- any spec model, from its fields ---------------------------------------------------------


def _of_annotation(model: type[BaseModel], name: str, annotation: Any,
                   overrides: dict[str, Any]) -> st.SearchStrategy[Any] | None:
    origin = get_origin(annotation)
    if origin is Literal:
        return st.sampled_from(get_args(annotation))
    if origin in (Union, types.UnionType):
        options = [a for a in get_args(annotation) if a is not type(None)]
        inner = _of_annotation(model, name, options[0], overrides) if len(options) == 1 else None
        return None if inner is None else st.none() | inner
    if annotation is bool:
        return st.booleans()
    if annotation in (int, float):
        return number(model, name)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return spec(annotation, {k.split(".", 1)[1]: v for k, v in overrides.items()
                                 if k.startswith(f"{name}.")})
    return None


def spec(model: type[BaseModel], overrides: dict[str, Any] | None = None
         ) -> st.SearchStrategy[dict[str, Any]]:
    """A dict of valid field values of ``model``: required fields always, optional ones
    sometimes. ``overrides`` maps a field (or ``"sub.field"``) to its strategy; a field whose
    type has no generic strategy (a string, a dict) keeps its default unless overridden."""
    overrides = overrides or {}
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for name, info in model.model_fields.items():
        strategy = overrides.get(name)
        if strategy is None:
            strategy = _of_annotation(model, name, info.annotation, overrides)
        if strategy is None:
            if info.is_required():
                raise TypeError(f"{model.__name__}.{name}: no strategy")
            continue
        (required if info.is_required() else optional)[name] = strategy
    return st.fixed_dictionaries(required, optional=optional)


# --- chips -----------------------------------------------------------------------------------


def _rates(lo: float, hi: float, lo_open: bool) -> st.SearchStrategy[dict[str, float]]:
    return st.dictionaries(st.sampled_from(dtypes.MAC_CLASSES), floats_in(lo, hi, lo_open),
                           min_size=1, max_size=len(dtypes.MAC_CLASSES))


def _array_rates() -> st.SearchStrategy[dict[str, float]]:
    """MACs per PE per cycle: bf16 (what most scenarios compute at) usually present."""
    lo, hi = MIN_MACS_PER_PE_PER_CYCLE, MAX_MACS_PER_PE_PER_CYCLE
    return st.one_of(
        st.fixed_dictionaries({"bf16": floats_in(lo, hi)},
                              optional={d: floats_in(lo, hi) for d in dtypes.MAC_CLASSES
                                        if d != "bf16"}),
        _rates(lo, hi, False),
    )


@cache
def chip_docs() -> st.SearchStrategy[dict[str, Any]]:
    """Chip descriptions: every field within its validator's range."""
    return spec(Chip, {
        "name": st.just("fuzz-chip"),
        "array.macs_per_pe_per_cycle": _array_rates(),
        "energy.mac_pj": st.dictionaries(st.sampled_from(dtypes.MAC_CLASSES),
                                         floats_in(0, 1e6), max_size=3),
        "calibration.compute_efficiency_by_dtype": st.dictionaries(
            st.sampled_from(dtypes.MAC_CLASSES), floats_in(MIN_EFFICIENCY, 1.0), max_size=3),
        "spec": st.none(),
    })


def _flat(doc: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if isinstance(value, dict) and value and not key.endswith(_DICT_FIELDS):
            out |= _flat(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


_DICT_FIELDS = ("macs_per_pe_per_cycle", "mac_pj", "compute_efficiency_by_dtype")


def _set(doc: dict[str, Any], random: dict[str, Any], path: str, value: Any) -> None:
    """``doc[path] = value``; where ``doc`` lacks a section on the way (no shared SRAM, say),
    the whole section is taken from ``random``."""
    *parents, leaf = path.split(".")
    for part in parents:
        if not isinstance(doc.get(part), dict):
            doc[part] = random[part]
            return
        doc, random = doc[part], random[part]
    doc[leaf] = value


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any], random: dict[str, Any], most: int = 4
            ) -> dict[str, Any]:
    """``base`` with up to ``most`` of its leaf fields taken from ``random``."""
    import copy

    doc = copy.deepcopy(base)
    flat = _flat(random)
    for path in draw(st.lists(st.sampled_from(sorted(flat)), max_size=most, unique=True)):
        _set(doc, random, path, flat[path])
    return doc


@st.composite
def chips(draw: st.DrawFn) -> Chip:
    """Valid :class:`Chip` values: random in every field, or a preset with a few fields
    drawn (near a real chip, where most steps can be costed)."""
    from infersim.arch_models import list_chips, load_chip

    random = draw(chip_docs())
    if draw(st.integers(0, 2)) == 0:
        return Chip.model_validate(random)
    base = load_chip(draw(st.sampled_from(list_chips()))).model_dump(mode="json")
    return Chip.model_validate(draw(mutated(base, random)))


# --- models ----------------------------------------------------------------------------------

_M = ModelConfig


@st.composite
def model_docs(draw: st.DrawFn, small: bool = False) -> dict[str, Any]:
    """``config.json``-style model descriptions that pass ModelConfig's cross-field checks
    (``small``: shapes that a serving run or an event simulation gets through quickly)."""
    def n(name: str, cap: float | None = None, low: float | None = None) -> Any:
        return draw(number(_M, name, cap=cap, low=low))

    cap = 4096 if small else None
    kv = n("num_key_value_heads", cap=64 if small else None)
    group = draw(ints_in(1, max(1, (1 << 16) // kv)))
    heads = min(kv * group, 1 << 16) // kv * kv
    doc: dict[str, Any] = {
        "name": "fuzz-model",
        "model_type": draw(st.sampled_from(sorted(ARCHITECTURES))),
        "hidden_size": n("hidden_size", cap=cap),
        "intermediate_size": n("intermediate_size", cap=cap),
        "num_hidden_layers": n("num_hidden_layers", cap=8 if small else None),
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "vocab_size": n("vocab_size", cap=cap),
        "max_position_embeddings": n("max_position_embeddings"),
    }
    if doc["hidden_size"] < heads or draw(st.booleans()):
        doc["head_dim"] = n("head_dim", cap=cap)
    for name in ("mlp", "norm", "positions"):
        doc[name] = draw(st.sampled_from(get_args(_M.model_fields[name].annotation)))
    for name in ("tie_word_embeddings", "attention_bias", "mlp_bias", "embedding_norm"):
        doc[name] = draw(st.booleans())
    doc["norms_per_layer"] = n("norms_per_layer")
    doc["position_offset"] = n("position_offset", cap=1 << 20)
    if draw(st.booleans()):  # mixture of experts
        experts = n("num_experts", cap=256 if small else None, low=1)
        doc |= {"num_experts": experts, "num_experts_per_tok": draw(ints_in(1, experts)),
                "num_shared_experts": n("num_shared_experts", cap=4 if small else None),
                "first_k_dense_replace": draw(ints_in(0, doc["num_hidden_layers"]))}
        if draw(st.booleans()):
            doc["moe_intermediate_size"] = n("moe_intermediate_size", cap=cap or 1 << 22)
    if draw(st.integers(0, 3)) == 0:  # multi-head latent attention
        doc |= {"kv_lora_rank": n("kv_lora_rank", cap=cap or 1 << 16),
                "qk_nope_head_dim": n("qk_nope_head_dim", cap=cap or 1 << 16),
                "qk_rope_head_dim": n("qk_rope_head_dim", cap=cap or 1 << 16)}
        for name in ("q_lora_rank", "v_head_dim"):
            if draw(st.booleans()):
                doc[name] = n(name, cap=cap or 1 << 16)
    if draw(st.integers(0, 3)) == 0:
        doc["sliding_window"] = n("sliding_window", cap=1 << 24)
        if doc["num_hidden_layers"] <= 64 and draw(st.booleans()):
            doc["layer_types"] = draw(st.lists(
                st.sampled_from(["full_attention", "sliding_attention"]),
                min_size=doc["num_hidden_layers"], max_size=doc["num_hidden_layers"]))
    if draw(st.integers(0, 4)) == 0:
        doc["quantized_weights"] = draw(st.sampled_from(
            ["fp8_e4m3", "mxfp4", "int4-g128", "int8", "q4_k_m", "iq2_xs"]))
    return doc


_MUTABLE = ("hidden_size", "intermediate_size", "num_hidden_layers", "vocab_size",
            "max_position_embeddings", "head_dim", "sliding_window", "mlp", "norm",
            "positions", "tie_word_embeddings", "quantized_weights", "norms_per_layer")
"""Model fields a preset may take from a random draw without breaking its cross-field checks
(the head counts and the expert counts stay the preset's)."""


@st.composite
def models(draw: st.DrawFn, small: bool = False) -> ModelConfig:
    """Valid :class:`ModelConfig` values: random in every field, or a preset with a few fields
    drawn (``small``: small presets only). A draw the family defaults make invalid is
    rejected: hypothesis draws another."""
    from hypothesis import assume

    from infersim.workloads.models import list_models, load_model

    random = draw(model_docs(small))
    doc = random
    if draw(st.integers(0, 2)) > 0:
        names = ["tiny-test", "opt-1.3b"] if small else list_models()
        base = load_model(draw(st.sampled_from(names))).model_dump(mode="json")
        doc = draw(mutated(base, {k: v for k, v in random.items() if k in _MUTABLE}, most=3))
        if doc.get("layer_types") is not None:
            doc["layer_types"] = None  # its length is the preset's layer count
    try:
        return ModelConfig.model_validate(doc)
    except ValidationError:
        assume(False)
        raise  # unreachable: assume(False) rejects the draw


# --- scenarios and techniques ----------------------------------------------------------------

_DTYPES = ("bf16", "bf16", "fp16", "fp32", "fp8_e4m3", "int8", "int4", "int4-g128", "nvfp4",
           "mxfp4", "q4_k_m", "int3", "tf32")


@st.composite
def scenarios(draw: st.DrawFn, small: bool = False) -> Scenario:
    """Valid :class:`Scenario` values (``small``: short lengths, small batches)."""
    cap = 4096 if small or draw(st.booleans()) else None  # typical lengths half the time
    precision = {k: draw(st.sampled_from(_DTYPES)) for k in ("weights", "act", "kv")
                 if draw(st.booleans())}
    if not precision.get("act") or draw(st.booleans()):
        precision["act"] = "bf16"  # what most chips compute at
    return Scenario(
        phase=draw(st.sampled_from(["prefill", "decode"])),
        batch=draw(number(Scenario, "batch", cap=64 if cap else None)),
        prompt_len=draw(number(Scenario, "prompt_len", cap=cap)),
        context_len=draw(number(Scenario, "context_len", cap=cap)),
        precision=precision,
    )


def _fraction(lo: float = 0.0, hi: float = 1.0, hi_open: bool = False) -> st.SearchStrategy[str]:
    return floats_in(lo, hi, hi_open=hi_open).map(repr)


_TOKENS = st.one_of(
    st.sampled_from(["fp16", "bf16", "fp32", "int8-weight", "int4-weight", "int4-awq",
                     "w8a8-int8", "fp8", "fp4", "mxfp4", "kv-fp8", "kv-int8", "kv-int4",
                     "kv-int3", "q4_k_m", "q2_k", "no-kv-cache", "flash", "naive-attention",
                     "fuse", "2:4", "emulate"]),
    st.builds(lambda z, e: f"sparse:{z}:eff={e}", _fraction(hi_open=True), _fraction()),
    st.builds(lambda n: f"tp={n}", ints_in(1, 1024)),
    st.builds(lambda s, m: f"pp={s}" + (f":mb={m}" if m else ""), ints_in(1, 1024),
              st.none() | ints_in(1, 1 << 20)),
    st.builds(lambda f: f"offload={f}", _fraction()),
    st.builds(lambda h, f, n: f"prune:heads={h}:ffn={f}:layers={n}",
              _fraction(hi_open=True), _fraction(hi_open=True), _fraction(hi_open=True)),
    st.builds(lambda d, k, a, c: f"spec:{d}:k={k}:alpha={a}" + (f":cost={c}" if d == "heads"
                                                                  else ""),
              st.sampled_from(["heads", "ngram"]), ints_in(1, 32), _fraction(), _fraction()),
    st.builds(lambda k, a: f"spec:draft=tiny-test:k={k}:alpha={a}", ints_in(1, 32), _fraction()),
)


@cache
def techniques() -> st.SearchStrategy[str]:
    """Technique stacks of 0 to 3 tokens (``""`` is the baseline)."""
    return st.lists(_TOKENS, max_size=3).map("+".join)


# --- serving ---------------------------------------------------------------------------------


@cache
def _length(hi: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.builds(lambda t: {"kind": "fixed", "tokens": t}, ints_in(1, hi)),
        st.builds(lambda a, b: {"kind": "uniform", "lo": min(a, b), "hi": max(a, b)},
                  ints_in(1, hi), ints_in(1, hi)),
        st.builds(lambda m, s: {"kind": "lognormal", "median": m, "sigma": s},
                  floats_in(1, hi), floats_in(0, 4)),
    )


@st.composite
def serving_docs(draw: st.DrawFn) -> dict[str, Any]:
    """Short serving runs (at most 8 requests, short outputs, prompts within a few hundred
    iterations of the token budget): ``ServingConfig`` documents."""
    budget = draw(ints_in(1, 1 << 24))
    from infersim.simulator.serving.workload import Fixed, Poisson

    arrivals = draw(st.one_of(
        st.builds(lambda r: {"kind": "poisson", "rate_per_s": r}, number(Poisson, "rate_per_s")),
        st.builds(lambda r: {"kind": "fixed", "rate_per_s": r}, number(Fixed, "rate_per_s")),
        st.just({"kind": "burst"}),
    ))
    scheduler = draw(st.sampled_from(["static", "continuous", "chunked-prefill"]))
    kv = draw(st.one_of(
        st.builds(lambda p, b, pc, w: {"kind": "paged", "preemption": p, "block_size_tokens": b,
                                       "prefix_cache": pc, "watermark_fraction": w},
                  st.sampled_from(["recompute", "swap"]), ints_in(1, 4096), st.booleans(),
                  floats_in(0, 1, hi_open=True)),
        st.builds(lambda p: {"kind": "contiguous", "preemption": p},
                  st.sampled_from(["recompute", "swap"])),
    ))
    if draw(st.booleans()):
        kv["kv_capacity_bytes"] = draw(floats_in(0, 1e15, lo_open=True))
    kv["memory_reserve_fraction"] = draw(floats_in(0, 1, hi_open=True))
    return {
        "workload": {
            "arrivals": arrivals,
            "requests": draw(ints_in(1, 8)),
            "prompt_len": draw(_length(min(1 << 24, budget * 64))),
            "output_len": draw(_length(32)),
            "shared_prefix_tokens": draw(st.sampled_from([0, 0, 1, 16, 1024])),
        },
        "scheduler": {"kind": scheduler, "max_batch_size": draw(ints_in(1, 1 << 16)),
                      "max_tokens_per_iteration": budget},
        "kv": kv,
        "slo": {"ttft_s": draw(floats_in(0, 1e6, True)), "tpot_s": draw(floats_in(0, 1e6, True)),
                "attainment": draw(floats_in(0, 1, True))},
        "seed": draw(ints_in(0, 2**63 - 1)),
        "bucket_steps_per_octave": draw(ints_in(0, 1024)),
    }


@st.composite
def serving_configs(draw: st.DrawFn) -> Any:
    """Valid ``ServingConfig`` values (see :func:`serving_docs`)."""
    from hypothesis import assume

    from infersim.simulator.serving import ServingConfig

    try:
        return ServingConfig.model_validate(draw(serving_docs()))
    except ValidationError:
        assume(False)
        raise


# --- the property ----------------------------------------------------------------------------


class Hang(BaseException):
    """An example ran past :data:`HANG_S` (a BaseException: no ``except Exception`` eats it)."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`Hang` in this (main) thread after ``seconds``."""
    def alarm(_signum: int, _frame: Any) -> None:
        raise Hang(f"still running after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    # again every second: an alarm that lands in a gc callback is ignored by Python
    signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def bad_figures(data: Any, path: str = "") -> Iterator[str]:
    """JSON paths of every number in ``data`` that is not finite or is negative."""
    if isinstance(data, bool) or data is None:
        return
    if isinstance(data, int | float):
        if not math.isfinite(data) or data < 0:
            yield f"{path} = {data!r}"
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from bad_figures(value, f"{path}.{key}" if path else str(key))
    elif isinstance(data, list | tuple):
        for i, value in enumerate(data):
            yield from bad_figures(value, f"{path}[{i}]")


def phase_figures(cost: Any) -> dict[str, Any]:
    """Every figure a :class:`PhaseCost` reports: its JSON document plus each op's raw fields
    (intensity is infinite by definition for an op without DRAM traffic: left out)."""
    doc = cost.to_dict()
    for op in doc["ops"]:
        op.pop("intensity", None)
    doc["op_costs"] = [{k: v for k, v in c.to_dict().items() if k != "intensity"}
                       for c in cost.ops]
    doc["ways_out"] = [{**w, "cost": phase_figures(way.cost)}
                       for w, way in zip(doc["ways_out"], cost.ways_out, strict=True)]
    return doc


def event_figures(chip: Chip, model: Any, scenario: Scenario, technique: str | None,
                  dataflow: str = "best") -> dict[str, Any]:
    """The event engine's stats and spans of the step's mapped operators (memoized runs: the
    ones ``simulate`` just made)."""
    from infersim.simulator.engines.events import simulate_op
    from infersim.simulator.inference import step_ops
    from infersim.workloads.ops import Conv2d, Gemm

    out: dict[str, Any] = {}
    for op in step_ops(chip, model, scenario, technique):
        if isinstance(op, Gemm | Conv2d):
            _, timeline = simulate_op(op, chip, dataflow)
            out[op.name] = {**asdict(timeline.stats), "spans": [
                [s.start_cycles, s.end_cycles, s.end_cycles - s.start_cycles]
                for s in timeline.spans]}
    return out


@dataclass(frozen=True)
class Outcome:
    """One example's class (``ok``, ``InfersimError``, ``other exception``, ``bad figure``,
    ``hang``), a key naming the failure's root (exception type and where it was raised, or
    the figure's path), and a one-line detail."""

    kind: str
    key: str = ""
    detail: str = ""

    @property
    def failed(self) -> bool:
        """Whether the contract was broken."""
        return self.kind not in ("ok", "InfersimError")


def _where(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "infersim" in f.filename]
    if not frames:
        return "?"
    f = frames[-1]
    return f"{f.filename.split('infersim/', 1)[-1]}:{f.lineno}"


def _figure_key(line: str) -> str:
    path = line.split(" = ", 1)[0]
    parts = []
    for part in path.replace("[", ".[").split("."):
        if part.startswith("["):
            parts.append("[]")
        elif part:
            parts.append(part)
    key = ".".join(parts)
    return key.split("spans.", 1)[0] + "spans" if "spans" in key else key


def outcome(run: Callable[[], dict[str, Any]], hang_s: float = HANG_S) -> Outcome:
    """Run ``run`` (which returns the figures to check) under the contract."""
    try:
        with time_limit(hang_s):
            figures = run()
    except Hang as exc:
        return Outcome("hang", "hang", str(exc))
    except InfersimError as exc:
        return Outcome("InfersimError", type(exc).__name__, str(exc).splitlines()[0][:200])
    except Exception as exc:
        first = str(exc).splitlines()[0][:200] if str(exc) else ""
        return Outcome("other exception", f"{type(exc).__name__} at {_where(exc)}",
                       f"{type(exc).__name__}: {first}")
    bad = list(bad_figures(figures))
    if bad:
        keys = sorted({_figure_key(b) for b in bad})
        return Outcome("bad figure", keys[0], "; ".join(bad[:3]))
    return Outcome("ok")


def simulate_case(chip: Chip, model: ModelConfig, scenario: Scenario, technique: str,
                  engine: str, dataflow: str = "best") -> Callable[[], dict[str, Any]]:
    """The run of one ``simulate`` example: the figures it reports (and, on the event engine,
    its operators' stats and spans)."""
    from infersim.simulator import simulate

    def run() -> dict[str, Any]:
        cost = simulate(chip, model, scenario, engine=engine, techniques=technique or None,
                        dataflow=dataflow)
        figures = phase_figures(cost)
        if engine == "events":
            figures["events"] = event_figures(chip, model, scenario, technique or None,
                                              dataflow)
        return figures

    return run


def serving_case(chip: Chip, model: ModelConfig, config: Any, technique: str,
                 engine: str, dataflow: str = "best") -> Callable[[], dict[str, Any]]:
    """The run of one serving example: its JSON summary and timeline sample (``dataflow`` is
    not a serving parameter: the mapper's best)."""
    from infersim.simulator.serving import simulate_serving

    def run() -> dict[str, Any]:
        result = simulate_serving(chip, model, config, technique or None, engine)
        doc = result.to_dict()
        doc.pop("seed", None)
        doc.pop("notes", None)
        return doc

    return run


def case_doc(case: tuple[Any, ...], serving: bool = False) -> dict[str, Any]:
    """A drawn example as JSON-ready data (the fields it set); see
    :func:`replay`."""
    chip, model, third, technique, engine, dataflow = case
    return {"engine": engine, "dataflow": dataflow, "technique": technique,
            "chip": chip.model_dump(mode="json", exclude_unset=True),
            "model": model.model_dump(mode="json", exclude_unset=True),
            "config" if serving else "scenario": third.model_dump(mode="json",
                                                                  exclude_unset=True)}


def replay(doc: dict[str, Any], hang_s: float = HANG_S) -> Outcome:
    """Run the example :func:`case_doc` wrote (a reproduction the benchmark printed)."""
    chip = Chip.model_validate(doc["chip"])
    model = ModelConfig.model_validate(doc["model"])
    if "config" in doc:
        from infersim.simulator.serving import ServingConfig

        config = ServingConfig.model_validate(doc["config"])
        return outcome(serving_case(chip, model, config, doc["technique"], doc["engine"]), hang_s)
    scenario = Scenario.model_validate(doc["scenario"])
    return outcome(simulate_case(chip, model, scenario, doc["technique"], doc["engine"],
                                 doc.get("dataflow", "best")), hang_s)
