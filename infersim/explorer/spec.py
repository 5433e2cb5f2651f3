"""SweepSpec: what a design-space sweep covers, as typed data read from YAML.

A spec names base chips (presets, files or inline descriptions), each with optional axes over
any chip field by dotted path (``array.rows``, ``sram.capacity_bytes``; ``"array.rows,array.cols"``
sets both to one value); workloads (model presets or config files with lists of phases, batches
and lengths, or operator-list files); technique stacks; dataflows; engines; constraints;
objectives; and a search (grid, random, Latin hypercube or differential-evolution optimize).

Validation is complete before anything runs: :func:`load_spec` raises one :class:`ConfigError`
that lists every bad field.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from infersim.arch_models.chip import Chip, DataflowName
from infersim.arch_models.presets import load_chip
from infersim.errors import ConfigError, InfersimError
from infersim.explorer.metrics import parse_constraint, parse_objective
from infersim.io import read_document
from infersim.io import validate as validate_model
from infersim.simulator.defaults import DEFAULT_ENGINE
from infersim.workloads.models import ModelConfig, load_model
from infersim.workloads.ops import OpBase
from infersim.workloads.scenario import Phase, Precision, Scenario
from infersim.workloads.workload import load_workload

DATAFLOWS: tuple[str, ...] = (*get_args(DataflowName), "best")
"""Dataflow names a spec may list (weight/output/input/row stationary, no local reuse, or the
mapper's best)."""

_PATH_SUFFIXES = (".yaml", ".yml", ".json")


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class RangeAxis(_Strict):
    """A numeric axis from ``low`` to ``high``: ``num`` grid points, or sampled continuously."""

    low: float = Field(description="Smallest value, in the field's unit")
    high: float = Field(description="Largest value, in the field's unit")
    num: int | None = Field(
        default=None, ge=1, le=100_000, description="Grid points (needed by the grid search)"
    )
    log: bool = Field(default=False, description="Space points (and samples) geometrically")
    integer: bool = Field(default=False, description="Round values to integers")

    @model_validator(mode="after")
    def _ordered(self) -> RangeAxis:
        if self.high < self.low:
            raise ValueError(f"high = {self.high:g} is below low = {self.low:g}")
        if self.log and self.low <= 0:
            raise ValueError(f"log axis needs low > 0, got {self.low:g}")
        return self


AxisValues = Annotated[list[Any], Field(min_length=1)] | RangeAxis


def _is_pathlike(text: str) -> bool:
    return text.endswith(_PATH_SUFFIXES) or "/" in text


def _absolute(text: str, info: ValidationInfo) -> str:
    """A path-looking ``text`` made absolute against the spec file's folder."""
    if not _is_pathlike(text):
        return text
    base = Path((info.context or {}).get("base_dir", "."))
    path = Path(text).expanduser()
    return str(path if path.is_absolute() else (base / path).resolve())


def axis_paths(key: str) -> tuple[str, ...]:
    """The dotted chip paths one axis key sets (``"array.rows,array.cols"`` sets two)."""
    return tuple(p.strip() for p in key.split(",") if p.strip())


def _numeric(value: Any) -> Any:
    """A number written as text (YAML 1.1 reads ``6.4e12`` as a string) as the number."""
    if isinstance(value, str):
        for kind in (int, float):
            try:
                return kind(value)
            except ValueError:
                pass
    return value


def _one_line(err: Any) -> str:
    msg = str(err["msg"]).removeprefix("Value error, ")
    where = ".".join(str(p) for p in err["loc"])
    return f"{where} = {err.get('input')!r}: {msg}" if where else msg


def _try_axis(base: Chip, key: str, paths: tuple[str, ...], values: Any) -> list[str]:
    """Problems of setting each path of axis ``key`` to each listed value (or range end)."""
    candidates: list[Any]
    hint = ""
    if isinstance(values, RangeAxis):
        candidates = [values.low, values.high, (values.low + values.high) / 2]
        if values.integer:
            candidates = [round(v) for v in candidates]
        else:
            hint = " (a range over a whole-number field needs integer: true)"
    else:
        candidates = list(values)
    problems = []
    for path in paths:
        for candidate in candidates:
            try:
                base.with_(**{path: candidate})
            except InfersimError as exc:
                line = str(exc).splitlines()[-1]
                marker = f"{path} = "
                if marker in line:
                    problems.append(line[line.index(marker):] + hint)
                else:
                    problems.append(f"{path} = {candidate!r}: {line.rsplit(': ', 1)[-1]}{hint}")
                break
    return problems


def _calibrated(chip: Chip, profile: str) -> Chip:
    """``chip`` with the calibration profile at ``profile`` applied."""
    from infersim.validation.profiles import apply_profile

    return apply_profile(chip, profile)


def _load_base(chip: str | dict[str, Any]) -> Chip:
    if isinstance(chip, dict):
        return validate_model(Chip, chip, "inline chip")
    return load_chip(chip)


class ChipEntry(_Strict):
    """A base chip and the axes swept over its fields (none: the chip as it is)."""

    chip: str | dict[str, Any] = Field(
        description="Preset name, chip YAML/JSON path, or an inline chip description"
    )
    label: str | None = Field(default=None, max_length=64, description="Name in reports")
    axes: dict[str, AxisValues] = Field(
        default_factory=dict, description="Dotted chip path → list of values or a range"
    )
    calibration: str | None = Field(
        default=None, max_length=4096,
        description="A calibration profile (infersim calibrate --profile) applied to the base "
        "chip before its axes",
    )

    @field_validator("calibration", mode="after")
    @classmethod
    def _profile(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        value = str(Path(value).expanduser() if Path(value).is_absolute()
                    else Path((info.context or {}).get("base_dir", ".")) / value)
        chip = info.data.get("chip")
        try:
            if chip is not None:
                _calibrated(_load_base(chip), value)
        except InfersimError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("chip", mode="after")
    @classmethod
    def _resolve(cls, value: str | dict[str, Any], info: ValidationInfo) -> Any:
        if isinstance(value, str):
            value = _absolute(value, info)
        try:
            _load_base(value)
        except InfersimError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("axes", mode="before")
    @classmethod
    def _check_axes(cls, value: Any, info: ValidationInfo) -> Any:
        """Every axis parsed and every value tried on the base chip; all problems at once."""
        if not isinstance(value, dict):
            return value
        chip = info.data.get("chip")
        base = _load_base(chip) if chip is not None else None
        problems: list[str] = []
        parsed: dict[str, Any] = {}
        for key, raw in value.items():
            values = raw
            paths = axis_paths(str(key))
            if not paths:
                problems.append(f"axis {key!r}: names no chip field")
                continue
            if isinstance(values, dict):
                try:
                    values = RangeAxis.model_validate(values)
                except ValidationError as exc:
                    problems.extend(f"{key}: {_one_line(e)}" for e in exc.errors())
                    continue
            elif not isinstance(values, list) or not values:
                problems.append(f"{key}: give a list of values or a range "
                                "{low, high, num, log, integer}")
                continue
            else:
                values = [_numeric(v) for v in values]
            parsed[key] = values
            if base is not None:
                problems.extend(_try_axis(base, key, paths, values))
        if problems:
            raise ValueError("\n".join(problems))
        return parsed

    def base_chip(self) -> Chip:
        """The validated base chip, calibrated by the entry's profile when it names one."""
        base = _load_base(self.chip)
        return base if self.calibration is None else _calibrated(base, self.calibration)

    @property
    def name(self) -> str:
        """The entry's label: ``label`` or the base chip's name."""
        return self.label or self.base_chip().name


class WorkloadEntry(_Strict):
    """A model (preset or config.json) with lists of phases, batches and lengths, or an
    operator-list file; every combination is one workload."""

    model: str | None = Field(default=None, description="Model preset name or config.json path")
    ops: str | None = Field(default=None, description="Operator-list YAML path (non-LLM)")
    label: str | None = Field(default=None, max_length=96, description="Name prefix in reports")
    phase: list[Phase] = Field(
        default_factory=lambda: ["decode"],  # type: ignore[arg-type,return-value]
        min_length=1, description="prefill and/or decode",
    )
    batch: list[int] = Field(default_factory=lambda: [1], min_length=1,
                             description="Sequences per batch")
    prompt_len: list[int] = Field(default_factory=lambda: [512], min_length=1,
                                  description="Prompt tokens (prefill)")
    context_len: list[int] = Field(default_factory=lambda: [512], min_length=1,
                                   description="Cached tokens (decode)")
    precision: Precision = Field(default_factory=Precision, description="Number formats")

    @field_validator("phase", "batch", "prompt_len", "context_len", mode="before")
    @classmethod
    def _listed(cls, value: Any) -> Any:
        return value if isinstance(value, list) else [value]

    @field_validator("model", "ops", mode="after")
    @classmethod
    def _paths(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        value = _absolute(value, info)
        try:
            if info.field_name == "model":
                load_model(value)
            else:
                load_workload(value)
        except InfersimError as exc:
            raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _one_source(self) -> WorkloadEntry:
        if (self.model is None) == (self.ops is None):
            raise ValueError("give exactly one of model or ops")
        if self.model is not None:
            problems = []
            for combo in self._combos():
                try:
                    Scenario.model_validate(combo)
                except ValidationError as exc:
                    for err in exc.errors(include_url=False):
                        where = ".".join(str(p) for p in err["loc"])
                        problems.append(f"{where} = {err.get('input')!r}: {err['msg']}")
            if problems:
                raise ValueError("\n".join(sorted(set(problems))))
        return self

    def _combos(self) -> Iterator[dict[str, Any]]:
        for phase, batch, prompt, context in itertools.product(
            self.phase, self.batch, self.prompt_len, self.context_len
        ):
            if phase == "prefill" and context != self.context_len[0]:
                continue  # context length does not change a prefill
            if phase == "decode" and prompt != self.prompt_len[0]:
                continue  # nor prompt length a decode step
            yield {
                "phase": phase,
                "batch": batch,
                "prompt_len": prompt,
                "context_len": context,
                "precision": self.precision,
            }


class GridSearch(_Strict):
    """Every combination of every axis (range axes need ``num``)."""

    kind: Literal["grid"] = "grid"


class RandomSearch(_Strict):
    """``n`` designs per swept chip, drawn uniformly (log-uniformly on log axes)."""

    kind: Literal["random"] = "random"
    n: int = Field(ge=1, le=10_000_000, description="Designs per swept chip")
    seed: int = Field(default=0, ge=0, description="Random seed (same seed, same designs)")


class LhsSearch(_Strict):
    """``n`` designs per swept chip from a Latin hypercube (scipy.stats.qmc)."""

    kind: Literal["lhs"] = "lhs"
    n: int = Field(ge=1, le=10_000_000, description="Designs per swept chip")
    seed: int = Field(default=0, ge=0, description="Random seed")


class OptimizeSearch(_Strict):
    """Differential evolution (scipy) over each swept chip's axes: integer and list axes are
    rounded, constraints are penalties, the fitness is the objective's geometric mean over
    every workload of the design."""

    kind: Literal["optimize"] = "optimize"
    objective: str | None = Field(default=None, description="Default: the first objective")
    maxiter: int = Field(default=10, ge=1, le=10_000, description="Generations")
    popsize: int = Field(default=6, ge=1, le=1000, description="Population per axis")
    seed: int = Field(default=0, ge=0, description="Random seed")

    @field_validator("objective")
    @classmethod
    def _objective(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_objective(value)
            except InfersimError as exc:
                raise ValueError(str(exc)) from None
        return value


Search = Annotated[
    GridSearch | RandomSearch | LhsSearch | OptimizeSearch, Field(discriminator="kind")
]


class ServingRuns(_Strict):
    """Request-level serving runs at sweep time, one per base chip × model, whose latency
    distributions the report draws (see :mod:`infersim.simulator.serving`)."""

    technique: str = Field(default="baseline", description="Technique stack of every run")
    engine: str = Field(
        default=DEFAULT_ENGINE,
        description=f"Engine that costs each iteration ({DEFAULT_ENGINE} unless named; "
                    "roofline is the fast baseline)",
    )
    config: dict[str, Any] = Field(
        description="A serving config: workload (arrivals, requests, lengths), scheduler, kv, "
                    "slo, seed"
    )

    @field_validator("config")
    @classmethod
    def _config(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        try:
            from infersim.simulator.serving import ServingConfig
        except ImportError:
            raise ValueError("this infersim build has no serving simulator") from None
        arrivals = (value.get("workload") or {}).get("arrivals") or {}
        if isinstance(arrivals, dict) and isinstance(arrivals.get("path"), str):
            # always a path (no preset names here): relative to the spec's folder
            base = Path((info.context or {}).get("base_dir", "."))
            path = Path(arrivals["path"]).expanduser()
            arrivals["path"] = str(path if path.is_absolute() else (base / path).resolve())
        try:
            config = ServingConfig.model_validate(value)
        except ValidationError as exc:
            raise ValueError("\n".join(_one_line(e) for e in exc.errors())) from None
        _check_trace(config)
        return value

    @field_validator("technique")
    @classmethod
    def _technique(cls, value: str) -> str:
        parse, _ = _techniques_api()
        if value.strip() not in ("", "baseline") and parse is not None:
            try:
                parse(value)
            except InfersimError as exc:
                raise ValueError(str(exc)) from None
        return value.strip() or "baseline"


def _check_trace(config: Any) -> None:
    """Read a trace-driven serving config's trace now (its first ``requests`` rows), so that a
    missing or malformed file stops the sweep before any work instead of dropping its curves.

    Raises:
        ValueError: the trace's problem, naming its path.
    """
    from infersim.simulator.serving.workload import Trace, read_trace

    workload = config.workload
    if isinstance(workload.arrivals, Trace):
        try:
            read_trace(workload.arrivals.path, workload.requests)
        except InfersimError as exc:
            raise ValueError(f"workload.arrivals.path: {exc}") from None


def _techniques_api() -> tuple[Any, bool]:
    """(parse_stack or None, whether simulate() takes ``techniques``)."""
    from infersim.simulator import inference

    try:
        from infersim.workloads import techniques as tech_module
    except ImportError:
        return None, False
    parse = getattr(tech_module, "parse_stack", None) or getattr(tech_module, "parse", None)
    takes = "techniques" in inspect.signature(inference.simulate).parameters
    return parse, takes


def dataflow_engines() -> set[str]:
    """Engines whose simulate() takes a ``dataflow`` (none until the dataflow engine lands)."""
    from infersim.simulator import inference

    if "dataflow" not in inspect.signature(inference.simulate).parameters:
        return set()
    return {name for name in inference.ENGINES if name != "roofline"}


class SweepSpec(_Strict):
    """A design-space sweep: chips × axes × workloads × techniques × dataflows × engines."""

    name: str = Field(default="sweep", min_length=1, max_length=96, description="Sweep name")
    description: str = Field(default="", max_length=2000, description="One paragraph")
    chips: list[ChipEntry] = Field(min_length=1, description="Base chips and their axes")
    workloads: list[WorkloadEntry] = Field(min_length=1, description="What runs")
    techniques: list[str] = Field(
        default_factory=lambda: ["baseline"], min_length=1, description="Technique stacks"
    )
    dataflows: list[str] = Field(
        default_factory=list,
        description="Dataflows the arrays are built for, one design each, for the engines "
        "that map onto the array (others ignore them); a chip that lists its dataflows is "
        "evaluated as if built for each",
    )
    engines: list[str] = Field(
        default_factory=lambda: [DEFAULT_ENGINE],
        min_length=1,
        description=f"Cost engines ({DEFAULT_ENGINE} unless named; roofline is the baseline)",
    )
    constraints: list[str] = Field(
        default_factory=list, description="'METRIC OP VALUE', e.g. 'area_mm2 <= 800'"
    )
    objectives: list[str] = Field(
        default_factory=lambda: ["tokens_per_s:max", "area_mm2:min"],
        min_length=1,
        max_length=3,
        description="'METRIC:min|max' (1 to 3)",
    )
    search: Search = Field(default_factory=GridSearch, description="How designs are chosen")
    serving: ServingRuns | None = Field(
        default=None, description="Serving runs whose latency CDFs the report draws"
    )
    record_ops: bool = Field(default=True, description="Store per-operator costs per point")
    extras: bool = Field(
        default=True, description="Compute the per-sweep tables reports draw (dataflow maps)"
    )

    @field_validator("chips", mode="before")
    @classmethod
    def _chip_shorthand(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"chip": v} if isinstance(v, str) else v for v in value]
        return value

    @field_validator("search", mode="before")
    @classmethod
    def _search_shorthand(cls, value: Any) -> Any:
        return {"kind": value} if isinstance(value, str) else value

    @field_validator("engines", mode="before")
    @classmethod
    def _engine_shorthand(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("techniques")
    @classmethod
    def _techniques(cls, value: list[str]) -> list[str]:
        parse, takes = _techniques_api()
        out, problems = [], []
        for raw in value:
            text = raw.strip() or "baseline"
            if text == "baseline":
                out.append(text)
                continue
            if parse is None or not takes:
                problems.append(
                    f"technique {text!r}: this infersim build simulates only 'baseline' "
                    "(technique stacks arrive with simulate(techniques=...))"
                )
                continue
            try:
                parse(text)
            except InfersimError as exc:
                problems.append(str(exc))
            out.append(text)
        if problems:
            raise ValueError("\n".join(problems))
        return out

    @field_validator("dataflows")
    @classmethod
    def _dataflows(cls, value: list[str]) -> list[str]:
        return _known(value, DATAFLOWS, "dataflow")

    @field_validator("engines")
    @classmethod
    def _engines(cls, value: list[str]) -> list[str]:
        from infersim.simulator.engines import ENGINE_NAMES

        return _known(value, ENGINE_NAMES, "engine")

    @field_validator("constraints")
    @classmethod
    def _constraints(cls, value: list[str]) -> list[str]:
        problems = []
        for text in value:
            try:
                parse_constraint(text)
            except InfersimError as exc:
                problems.append(str(exc))
        if problems:
            raise ValueError("\n".join(problems))
        return value

    @field_validator("objectives")
    @classmethod
    def _objectives(cls, value: list[str]) -> list[str]:
        problems = []
        for text in value:
            try:
                parse_objective(text)
            except InfersimError as exc:
                problems.append(str(exc))
        if problems:
            raise ValueError("\n".join(problems))
        return value

    @model_validator(mode="after")
    def _cross_checks(self) -> SweepSpec:
        problems = []
        if self.dataflows:
            mapped = dataflow_engines()
            if not set(self.engines) & mapped:
                problems.append(
                    "dataflows need an engine that maps onto the array"
                    + (f" ({', '.join(sorted(mapped))}); " if mapped else "; ")
                    + f"{', '.join(map(repr, self.engines))} does not"
                )
        if isinstance(self.search, GridSearch):
            for i, entry in enumerate(self.chips):
                for key, axis in entry.axes.items():
                    if isinstance(axis, RangeAxis) and axis.num is None:
                        problems.append(f"chips.{i}.axes.{key}: a grid search needs num")
        if isinstance(self.search, OptimizeSearch) and not any(e.axes for e in self.chips):
            problems.append("search optimize: no chip has axes to optimize over")
        if problems:
            raise ValueError("\n".join(problems))
        return self

    # --- derived -----------------------------------------------------------------------------

    @property
    def parsed_objectives(self) -> list[Any]:
        """The objectives as :class:`~infersim.explorer.metrics.Objective` values."""
        return [parse_objective(o) for o in self.objectives]

    @property
    def parsed_constraints(self) -> list[Any]:
        """The constraints as :class:`~infersim.explorer.metrics.Constraint` values."""
        return [parse_constraint(c) for c in self.constraints]

    @property
    def dataflow_axis(self) -> list[str | None]:
        """The dataflow values points take (``[None]`` when the spec lists none)."""
        return list(self.dataflows) or [None]

    def fingerprint(self) -> str:
        """A stable hash of the whole spec (resume checks the stored spec has it)."""
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def cases(self) -> list[WorkloadCase]:
        """Every workload the spec expands to, in order, without duplicates."""
        out: list[WorkloadCase] = []
        seen: set[str] = set()
        for entry in self.workloads:
            for case in _expand(entry):
                if case.key not in seen:
                    seen.add(case.key)
                    out.append(case)
        return out


@dataclass(frozen=True)
class WorkloadCase:
    """One concrete workload: a model step (model + scenario) or a user operator list."""

    label: str
    model: ModelConfig | None
    scenario: Scenario | None
    ops: tuple[OpBase, ...] | None
    key: str

    @property
    def model_name(self) -> str:
        """The model (or operator-list) name."""
        return self.model.name if self.model is not None else self.label

    @property
    def tokens(self) -> int:
        """Tokens the step processes (1 for operator lists)."""
        return self.scenario.new_tokens if self.scenario is not None else 1


def _hash(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def _expand(entry: WorkloadEntry) -> Iterator[WorkloadCase]:
    if entry.ops is not None:
        wl = load_workload(entry.ops)
        ops = tuple(wl.ops)
        key = _hash({"ops": [op.model_dump(mode="json") for op in ops], "name": wl.name})
        yield WorkloadCase(entry.label or wl.name, None, None, ops, key)
        return
    model = load_model(entry.model or "")
    for combo in entry._combos():
        sc = Scenario.model_validate(combo)
        length = f"p{sc.prompt_len}" if sc.phase == "prefill" else f"ctx{sc.context_len}"
        label = f"{entry.label or model.name} {sc.phase} b{sc.batch} {length}"
        if sc.precision != Precision():
            p = sc.precision
            label += f" w{p.weights}/a{p.act}/kv{p.kv}"
        unused = "context_len" if sc.phase == "prefill" else "prompt_len"  # no effect on the step
        key = _hash({"model": model.model_dump(mode="json"),
                     "scenario": sc.model_dump(mode="json", exclude={unused})})
        yield WorkloadCase(label, model, sc, None, key)


def _format(exc: ValidationError, source: str) -> str:
    lines = []
    for err in exc.errors(include_url=False):
        path = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "missing":
            lines.append(f"{source}: {path}: required field is missing")
        elif err["type"] == "extra_forbidden":
            lines.append(f"{source}: {path}: unknown field")
        elif err["type"] == "value_error":
            lines.extend(f"{source}: {path}: {part}" for part in msg.split("\n"))
        else:
            shown = repr(err.get("input"))
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            lines.append(f"{source}: {path} = {shown}: {msg}")
    return "\n".join(dict.fromkeys(lines))


def parse_spec(data: Any, source: str = "spec", base_dir: Path | None = None) -> SweepSpec:
    """A validated :class:`SweepSpec` from parsed YAML/JSON ``data``.

    Relative paths in the spec are resolved against ``base_dir`` (default: the working folder).

    Raises:
        ConfigError: one message listing every bad field, one per line.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of fields, got {type(data).__name__}")
    try:
        return SweepSpec.model_validate(data, context={"base_dir": str(base_dir or Path.cwd())})
    except ValidationError as exc:
        raise ConfigError(_format(exc, source)) from None


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a sweep spec YAML/JSON file (see :func:`parse_spec`).

    Raises:
        ConfigError: missing or malformed file, or every bad field of the spec.
    """
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"sweep spec {str(path)!r} does not exist")
    return parse_spec(read_document(file), file.name, file.parent.resolve())


def _known(value: list[str], allowed: tuple[str, ...], what: str) -> list[str]:
    """``value`` when every entry is one of ``allowed``; else the error naming the others."""
    bad = [v for v in value if v not in allowed]
    if bad:
        raise ValueError(f"unknown {what} {', '.join(map(repr, bad))}; allowed: "
                         f"{', '.join(allowed)}")
    return value
