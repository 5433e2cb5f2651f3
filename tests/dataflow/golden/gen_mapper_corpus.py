"""Write ``mapper_corpus.json.gz``: the mapper acceptance corpus (see ``mapper_corpus.py``).

Run it against a frozen copy of the mapper it records, never against a working tree being
changed (it refuses when ``infersim`` is imported from this checkout, unless ``--allow-live``):

    mkdir -p /tmp/mapper-head && git archive HEAD | tar -x -C /tmp/mapper-head
    PYTHONPATH=/tmp/mapper-head .venv/bin/python tests/dataflow/golden/gen_mapper_corpus.py \
        --source-commit $(git rev-parse --short HEAD)

The case list is a function of ``--seed`` alone (numpy ``default_rng``): every chip preset
(all have a systolic array), the two level views the analytic engine maps on for presets
with a shared SRAM, random chips perturbed from the presets (array rows and columns, per-core
SRAM, PE register file, cores, DRAM bandwidth, clock), siblings of some random chips that
differ only in DRAM bandwidth and clock (the mapper reuses searches between those), and the
level views of some random chips. Ops are LLM GEMMs (projections, LM heads, decode and
prefill, MoE experts, attention score and value products, sparse and weight-only-quantized
variants), random GEMMs with odd sizes, and convolutions, each in a dtype the chip computes;
each (op, chip) pair gets one to three of the twelve (template, objective) pairs.
Each case is searched from an empty mapper cache.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from mapper_corpus import CORPUS, REL_TOL, build_chip, op_fields

import infersim
from infersim.arch_models.chip import Chip
from infersim.arch_models.presets import list_chips, load_chip
from infersim.dataflow import mapper
from infersim.dataflow.loopnest import problem_of
from infersim.dataflow.mapper import OBJECTIVES, clear_cache, map_op, mapping_cost
from infersim.dataflow.templates import TEMPLATES
from infersim.errors import InfersimError, UnsupportedDtypeError
from infersim.simulator.engines.analytic import level_views
from infersim.workloads.ops import Conv2d, Epilogue, Gemm

SEED = 20261201
REPO = Path(__file__).resolve().parents[3]
COMBOS: tuple[tuple[str, str], ...] = tuple((t, o) for t in TEMPLATES for o in OBJECTIVES)
"""The twelve (template, objective) pairs."""
_RS_WEIGHT = 1.7
"""How much more often RS pairs are drawn: its search grids are the largest, so thinning
(:data:`GRID_KEPT`) drops RS cases most; this keeps the four templates about as frequent."""
_COMBO_P = np.array([_RS_WEIGHT if t == "rs" else 1.0 for t, _ in COMBOS])
_COMBO_P /= _COMBO_P.sum()

PRESET_OPS = 200
"""Ops drawn for each preset chip."""
VIEW_OPS = 80
"""Ops drawn for each level view of a preset."""
RANDOM_CHIPS = 300
RANDOM_OPS = 10
"""Ops drawn for each random chip (its siblings and views map a subset of them)."""
SIBLING_P = 0.3
RANDOM_VIEW_P = 0.3
GRID_KEPT = 5000
"""A case whose search grid (see :func:`grid_size`) is larger is kept with probability
``GRID_KEPT / grid``: the search time grows with the grid (about 1.7 ms + 1.3 us per grid
point on a 2-core machine), and a few large grids take most of the time."""

_STORAGE: dict[str, tuple[str, ...]] = {
    "fp32": ("fp32",), "tf32": ("tf32",), "bf16": ("bf16",), "fp16": ("fp16",),
    "fp8": ("fp8_e4m3", "fp8_e5m2"), "int16": ("int16",), "int8": ("int8",),
    "int4": ("int4",), "fp4": ("fp4", "mxfp4", "nvfp4"),
}
"""Storage dtypes an op may use for each MAC class a chip lists."""
_CLASS_WEIGHT = {"fp32": 0.3, "tf32": 0.3, "bf16": 3, "fp16": 1.5, "fp8": 2, "int16": 2,
                 "int8": 3, "int4": 0.5, "fp4": 0.5}
_WEIGHT_ONLY = ("int4", "int4-g128", "q4_k_m", "q8_0", "q6_k", "fp8_e4m3", "int8")

# hidden, ffn, vocab, heads, kv heads, head dim
_MODELS: tuple[tuple[int, int, int, int, int, int], ...] = (
    (768, 3072, 50257, 12, 12, 64),
    (2048, 8192, 50272, 32, 32, 64),
    (2560, 10240, 51200, 32, 32, 80),
    (4096, 11008, 32000, 32, 32, 128),
    (4096, 14336, 128256, 32, 8, 128),
    (5120, 13824, 32000, 40, 40, 128),
    (8192, 28672, 128256, 64, 8, 128),
    (12288, 32768, 50257, 96, 96, 128),
)
_DECODE_M = (1, 2, 3, 4, 5, 7, 8, 12, 16, 24, 32, 33, 48, 63, 64)
_PREFILL_M = (128, 256, 500, 512, 1000, 1024, 2048, 3000, 4096, 4097, 8192)
_ODD = (65, 96, 127, 129, 255, 257, 1000, 1023, 1025, 3000, 4097, 5000, 11008, 14336, 22016,
        28672)
_CHANNELS = (3, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256, 384, 512)
_SPATIAL = (7, 8, 13, 14, 27, 28, 32, 55, 56, 64, 112, 224)
_RF_BYTES = (0, 2, 4, 8, 16, 32, 64, 128, 256, 520, 1024, 4096)


# ---------------------------------------------------------------------------------- chips


def _log_int(rng: np.random.Generator, lo: int, hi: int) -> int:
    """An integer log-uniform in [lo, hi]."""
    return int(min(hi, max(lo, round(float(np.exp(rng.uniform(np.log(lo), np.log(hi))))))))


def _sig(x: float) -> float:
    """``x`` rounded to four significant digits (readable overrides)."""
    return float(f"{x:.4g}")


def random_overrides(rng: np.random.Generator, base: Chip) -> dict[str, Any]:
    """Perturbations of ``base``: each field is changed with some probability."""
    out: dict[str, Any] = {}
    if rng.random() < 0.8:
        rows = _log_int(rng, 4, 256)
        out["array.rows"] = rows
        out["array.cols"] = rows if rng.random() < 0.4 else _log_int(rng, 4, 256)
    if rng.random() < 0.7:
        sram = _log_int(rng, 4 * 1024, 64 * 1024 * 1024)
        out["sram.capacity_bytes"] = 1 << round(np.log2(sram)) if rng.random() < 0.5 else sram
    if rng.random() < 0.5:
        out["register_file.bytes_per_pe"] = int(rng.choice(_RF_BYTES))
    if rng.random() < 0.6:
        out["cores"] = _log_int(rng, 1, 256)
    if rng.random() < 0.5:
        out["dram.bandwidth_bytes_per_s"] = _sig(10 ** rng.uniform(9, 13))
    if rng.random() < 0.5:
        out["freq_hz"] = _sig(10 ** rng.uniform(8.3, 9.4))
    if base.shared_sram is not None and rng.random() < 0.2:
        out["shared_sram.capacity_bytes"] = _log_int(rng, 1 << 20, 256 << 20)
    if rng.random() < 0.5:
        out["array.double_buffered"] = not base.array.double_buffered
    return out


def generic(preset: str) -> dict[str, Any]:
    """The override that lets ``preset``'s array run every template: the corpus checks the
    search of each template on each geometry, whatever dataflows the chip's hardware lists."""
    listed = load_chip(preset).array.supported_dataflows is not None
    return {"array.supported_dataflows": None} if listed else {}


def sibling_overrides(rng: np.random.Generator, overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` with another DRAM bandwidth and clock (the tiling search is the same)."""
    return {**overrides, "dram.bandwidth_bytes_per_s": _sig(10 ** rng.uniform(9, 13)),
            "freq_hz": _sig(10 ** rng.uniform(8.3, 9.4))}


def view_overrides(chip: Chip, view: Chip) -> dict[str, Any]:
    """The dotted-path changes that turn ``chip`` into ``view`` (one of its level views)."""
    a = chip.model_dump(mode="json")
    b = view.model_dump(mode="json")
    out: dict[str, Any] = {}
    for section, value in b.items():
        if isinstance(value, dict) and isinstance(a.get(section), dict):
            out.update({f"{section}.{k}": v for k, v in value.items() if a[section].get(k) != v})
        elif a.get(section) != value:
            out[section] = value
    return out


# ------------------------------------------------------------------------------------ ops


def _dtype(rng: np.random.Generator, chip: Chip) -> str:
    classes = list(chip.array.macs_per_pe_per_cycle)
    weights = np.array([_CLASS_WEIGHT[c] for c in classes])
    cls = classes[int(rng.choice(len(classes), p=weights / weights.sum()))]
    names = _STORAGE[cls]
    return names[int(rng.integers(len(names)))]


def _out_dtype(rng: np.random.Generator, a_dtype: str) -> str:
    return a_dtype if rng.random() < 0.7 else str(rng.choice(["bf16", "fp32", "fp16"]))


def _m(rng: np.random.Generator) -> int:
    r = rng.random()
    if r < 0.4:
        return int(rng.choice(_DECODE_M)) if rng.random() < 0.6 else int(rng.integers(1, 65))
    if r < 0.75:
        return int(rng.choice(_PREFILL_M))
    return _log_int(rng, 1, 8192)


def llm_gemm(rng: np.random.Generator, chip: Chip, dtype: str) -> Gemm:
    """A projection of an LLM layer (qkv, out, up, gate+up, down, LM head) or a MoE expert."""
    hidden, ffn, vocab, heads, kv_heads, head_dim = _MODELS[int(rng.integers(len(_MODELS)))]
    kind = int(rng.integers(7))
    k, n = [
        (hidden, (heads + 2 * kv_heads) * head_dim), (hidden, hidden), (hidden, ffn),
        (hidden, min(2 * ffn, 32768)), (ffn, hidden), (hidden, vocab), (hidden, ffn // 8),
    ][kind]
    fields: dict[str, Any] = {"m": _m(rng), "k": k, "n": n, "a_dtype": dtype}
    if kind == 6:  # MoE experts: few tokens each, many experts
        fields.update(batch=int(rng.choice([8, 16, 64])), m=int(rng.choice([1, 4, 16, 64, 250])))
    r = rng.random()
    if r < 0.12 and chip.array.sparsity_2_4:
        fields["sparsity"] = "2:4"
    elif r < 0.18:
        fields.update(sparsity="unstructured", density=float(rng.choice([0.3, 0.5, 0.7])),
                      sparse_kernel_efficiency=float(rng.choice([0.0, 0.5, 0.9])))
    if rng.random() < 0.15:
        fields["b_dtype"] = str(rng.choice(_WEIGHT_ONLY))
    else:
        fields["b_dtype"] = dtype
    if rng.random() < 0.1:
        fields["epilogue"] = Epilogue(name="swiglu", out_ratio=0.5, extra_inputs=int(
            rng.integers(2)))
    return Gemm(out_dtype=_out_dtype(rng, dtype), **fields)


def attention_gemm(rng: np.random.Generator, dtype: str) -> Gemm:
    """Q·Kᵀ or P·V of one layer: batch × heads groups, B an activation."""
    heads = int(rng.choice([8, 12, 32, 40, 64]))
    batch = int(rng.choice([1, 2, 4]))
    head_dim = int(rng.choice([64, 80, 128]))
    q_len = 1 if rng.random() < 0.5 else int(rng.choice([16, 128, 512, 1024, 2048]))
    kv_len = _log_int(rng, 64, 8192)
    m, k, n = (q_len, head_dim, kv_len) if rng.random() < 0.5 else (q_len, kv_len, head_dim)
    return Gemm(m=m, k=k, n=n, batch=batch * heads, a_dtype=dtype, b_dtype=dtype,
                out_dtype=_out_dtype(rng, dtype), b_is_weight=False)


def random_gemm(rng: np.random.Generator, dtype: str) -> Gemm:
    """A GEMM of random, often odd, sizes: m in 1..8192, k and n in 64..32768."""
    def dim(lo: int, hi: int) -> int:
        if rng.random() < 0.35:
            return int(rng.choice([d for d in _ODD if lo <= d <= hi]))
        return _log_int(rng, lo, hi)
    return Gemm(m=dim(1, 8192), k=dim(64, 32768), n=dim(64, 32768), a_dtype=dtype,
                b_dtype=dtype, out_dtype=_out_dtype(rng, dtype))


def conv(rng: np.random.Generator, dtype: str) -> Conv2d:
    """A convolution: 1x1, 3x3, 5x5 or 7x7, stride 1 or 2, channels 3..512, spatial 7..224."""
    kernel = int(rng.choice([1, 3, 3, 3, 5, 7]))
    stride = int(rng.choice([1, 1, 2]))
    padding = int(rng.choice([0, kernel // 2]))
    def channels() -> int:
        return int(rng.choice(_CHANNELS)) if rng.random() < 0.7 else int(rng.integers(3, 513))
    def spatial() -> int:
        return int(rng.choice(_SPATIAL)) if rng.random() < 0.7 else int(rng.integers(7, 225))
    in_h = spatial()
    in_w = in_h if rng.random() < 0.85 else spatial()
    return Conv2d(batch=int(rng.choice([1, 1, 2, 4, 8])), in_channels=channels(), in_h=in_h,
                  in_w=in_w, out_channels=channels(), kernel_h=kernel, kernel_w=kernel,
                  stride=stride, padding=padding, dtype=dtype, weight_dtype=dtype,
                  out_dtype=_out_dtype(rng, dtype))


def random_op(rng: np.random.Generator, chip: Chip) -> Gemm | Conv2d:
    """One op in a dtype ``chip`` computes: 45% LLM GEMMs, 10% attention, 15% random GEMMs,
    30% convolutions."""
    dtype = _dtype(rng, chip)
    r = rng.random()
    if r < 0.45:
        return llm_gemm(rng, chip, dtype)
    if r < 0.55:
        return attention_gemm(rng, dtype)
    if r < 0.70:
        return random_gemm(rng, dtype)
    return conv(rng, dtype)


# ------------------------------------------------------------------------------ the plan


def grid_size(op: Gemm | Conv2d, chip: Chip, template: str) -> int:
    """Candidates the exhaustive search prices before its fit test: the product of the tile
    ladders of the cut dims times the register-file options (its private helpers)."""
    prob = problem_of(op)
    tpl = TEMPLATES[template]
    aligns = mapper._aligns_of(tpl, chip.array.rows, chip.array.cols)
    ladders = [len(mapper._ladder(prob.dims[d], aligns[d])) for d in mapper._CUT]
    options = len(mapper._rf_options(prob, tpl, chip)) if tpl.rf_split else 1
    return max(1, int(np.prod(ladders)) * options)


class Plan:
    """Chip specs and (chip, op, template, objective) cases, without duplicates."""

    def __init__(self) -> None:
        self.chips: list[dict[str, Any]] = []
        self.built: list[Chip] = []
        self.cases: list[tuple[int, Gemm | Conv2d, str, str]] = []
        self._seen: set[tuple[Any, ...]] = set()
        self.thinned = 0

    def chip(self, preset: str, overrides: dict[str, Any], family: str, chip: Chip) -> int:
        """Register ``chip`` (which must be ``preset`` with ``overrides``); its index."""
        spec = {"preset": preset, "overrides": overrides, "family": family}
        rebuilt = build_chip(spec)
        if rebuilt != chip or rebuilt.key != chip.key:
            raise AssertionError(f"chip spec {spec} does not rebuild its chip")
        spec["key"] = chip.key
        self.chips.append(spec)
        self.built.append(chip)
        return len(self.chips) - 1

    def add(self, rng: np.random.Generator, chip: int, op: Gemm | Conv2d) -> None:
        """One to three (template, objective) pairs of ``op`` on chip ``chip`` (a large search
        grid is thinned, see :data:`GRID_KEPT`)."""
        for j in rng.choice(len(COMBOS), size=int(rng.integers(1, 4)), replace=False,
                            p=_COMBO_P):
            template, objective = COMBOS[int(j)]
            keep = GRID_KEPT / grid_size(op, self.built[chip], template)
            if rng.random() >= keep:
                self.thinned += 1
                continue
            key = (chip, json.dumps(op_fields(op), sort_keys=True), template, objective)
            if key not in self._seen:
                self._seen.add(key)
                self.cases.append((chip, op, template, objective))


def _views(plan: Plan, preset: str, overrides: dict[str, Any], chip: Chip, family: str,
           rng: np.random.Generator, ops: list[Gemm | Conv2d]) -> None:
    for name, view in zip(("cores", "shared"), level_views(chip), strict=True):
        index = plan.chip(preset, {**overrides, **view_overrides(chip, view)},
                          f"{family}-{name}-view", view)
        for op in ops:
            plan.add(rng, index, op)


def build_plan(seed: int) -> Plan:
    """The case list for ``seed`` (see the module docstring)."""
    rng = np.random.default_rng(seed)
    plan = Plan()
    presets = list_chips()
    for preset in presets:
        base = generic(preset)
        chip = load_chip(preset).with_(**base)
        index = plan.chip(preset, base, "preset", chip)
        for _ in range(PRESET_OPS):
            plan.add(rng, index, random_op(rng, chip))
        if chip.shared_sram is not None:
            ops = [random_op(rng, chip) for _ in range(VIEW_OPS)]
            _views(plan, preset, base, chip, "preset", rng, ops)
    for _ in range(RANDOM_CHIPS):
        preset = presets[int(rng.integers(len(presets)))]
        overrides = {**generic(preset), **random_overrides(rng, load_chip(preset))}
        chip = load_chip(preset).with_(**overrides)
        index = plan.chip(preset, overrides, "random", chip)
        ops = [random_op(rng, chip) for _ in range(RANDOM_OPS)]
        for op in ops:
            plan.add(rng, index, op)
        if rng.random() < SIBLING_P:
            changes = sibling_overrides(rng, overrides)
            sibling = plan.chip(preset, changes, "random-sibling",
                                load_chip(preset).with_(**changes))
            for op in ops[: RANDOM_OPS // 2]:
                plan.add(rng, sibling, op)
        if chip.shared_sram is not None and rng.random() < RANDOM_VIEW_P:
            _views(plan, preset, overrides, chip, "random", rng, ops[: RANDOM_OPS // 2 + 1])
    return plan


# ------------------------------------------------------------------------------ the search


def golden(chip: Chip, op: Gemm | Conv2d, template: str, objective: str) -> dict[str, Any]:
    """The case record: the exhaustive best cost (``map_op(..., exhaustive=True)``: every
    candidate priced), its dataflow and tiling (null cost and the error message where no tiling
    fits), searched from an empty mapper cache."""
    clear_cache()
    record: dict[str, Any] = {"template": template, "objective": objective}
    try:
        mapping = map_op(op, chip, template, objective, exhaustive=True)  # type: ignore[arg-type]
    except UnsupportedDtypeError:
        raise
    except InfersimError as exc:
        return {**record, "cost": None, "dataflow": None, "tiling": None, "error": str(exc)}
    t = mapping.tiling
    tiling = {"tile": dict(t.tile), "order": list(t.order), "rf": dict(t.rf)}
    cost = float(mapping_cost(mapping, chip, objective))  # type: ignore[arg-type]
    return {**record, "cost": cost, "dataflow": mapping.dataflow, "tiling": tiling}


def _size_class(op: Gemm | Conv2d) -> str:
    if isinstance(op, Conv2d):
        return "conv"
    if op.m >= 2048 and op.k * op.n >= 4096 * 11008:
        return "gemm-large"
    return "gemm-decode" if op.m <= 64 else "gemm"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--out", type=Path, default=CORPUS)
    parser.add_argument("--source-commit", required=True,
                        help="the commit the imported infersim was archived from (recorded)")
    parser.add_argument("--sample", type=int, default=0,
                        help="time every Nth case only and write nothing")
    parser.add_argument("--allow-live", action="store_true",
                        help="run even when infersim is imported from this checkout")
    args = parser.parse_args()

    source = Path(infersim.__file__).resolve()
    print(f"infersim imported from {source}")
    if source.is_relative_to(REPO) and not args.allow_live:
        sys.exit(f"infersim comes from this checkout ({REPO}), not a frozen copy: set "
                 "PYTHONPATH to the archived tree (see the module docstring)")

    start = time.perf_counter()
    plan = build_plan(args.seed)
    print(f"plan: {len(plan.chips)} chips, {len(plan.cases)} cases, {plan.thinned} thinned "
          f"({time.perf_counter() - start:.1f} s)")
    step = args.sample or 1
    records: list[dict[str, Any]] = []
    seconds: dict[str, float] = defaultdict(float)
    counts: Counter[str] = Counter()
    search_start = time.perf_counter()
    for chip_index, op, template, objective in plan.cases[::step]:
        t0 = time.perf_counter()
        record = golden(plan.built[chip_index], op, template, objective)
        dt = time.perf_counter() - t0
        for label in (f"template {template}", f"size {_size_class(op)}"):
            seconds[label] += dt
            counts[label] += 1
        records.append({"chip": chip_index, "op": op_fields(op), **record})
    searched = time.perf_counter() - search_start
    print(f"searched {len(records)} cases in {searched:.1f} s "
          f"({1e3 * searched / len(records):.2f} ms per case)")
    for label in sorted(counts):
        print(f"  {label:18s} {counts[label]:6d} cases, {1e3 * seconds[label] / counts[label]:6.2f}"
              f" ms per case, {seconds[label]:6.1f} s")
    family = Counter(plan.chips[r["chip"]]["family"] for r in records)
    combos = Counter(f"{r['template']}/{r['objective']}" for r in records)
    print("by chip family:", dict(sorted(family.items())))
    print("by template/objective:", dict(sorted(combos.items())))
    print("by preset:", dict(sorted(Counter(plan.chips[r["chip"]]["preset"]
                                           for r in records).items())))
    print("no fitting tiling:", sum(r["cost"] is None for r in records))
    if args.sample:
        return
    header = {"format": 1, "source_commit": args.source_commit, "seed": args.seed,
              "rel_tol": REL_TOL, "cases": len(records), "chips": len(plan.chips)}
    data = {"header": header, "chips": plan.chips, "cases": records}
    text = json.dumps(data, separators=(",", ":"))
    args.out.write_bytes(gzip.compress(text.encode(), compresslevel=9, mtime=0))
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB, "
          f"{len(text) / 1e6:.1f} MB of JSON) in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
