"""When a step does not fit one chip's memory: every way out, each simulated in full.

For a step whose weights + KV + activations exceed the chip's DRAM, :func:`ways_out` returns
complete alternatives, each a :class:`~infersim.simulator.results.WayOut` holding the simulated
:class:`~infersim.simulator.results.PhaseCost` of the original question asked another way:

- ``tp``: the smallest tensor-parallel degree that fits (on the chip's link);
- ``tp+pp``: when that degree is above :data:`MAX_TP`, TP = MAX_TP with the smallest number of
  pipeline stages that fits;
- ``offload``: the smallest fraction of the weights streamed from host memory every step (its
  host-link time shows the bandwidth cliff);
- ``weights``: each weight format that fits, largest first (int8, fp8 where the chip computes
  it, int4-awq, and the largest GGUF type that fits);
- ``kv``: when the weights fit alone, the widest KV-cache format that makes the rest fit;
- ``batch`` / ``context``: the largest batch, and the longest context (decode) or prompt
  (prefill), that fit unchanged otherwise.

A way out the chip cannot take (no chip link, no host link, a format it cannot compute) is left
out. Memory is engine-independent, so the searches use the roofline; each chosen alternative is
then simulated once with the requested engine.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from infersim import dtypes
from infersim.arch_models.chip import Chip
from infersim.errors import InfersimError
from infersim.simulator.results import MemoryReport, PhaseCost, WayOut
from infersim.workloads.models import ModelConfig
from infersim.workloads.scenario import Scenario

MAX_TP = 8
"""Largest tensor-parallel degree tried alone (one node of NVLink-class chips); beyond it the
way out adds pipeline stages."""

MAX_CHIPS = 1024
"""Largest TP × PP group tried."""

OFFLOAD_STEP = 0.01
"""Offload fractions are rounded up to this step."""

WEIGHT_FORMATS: tuple[str, ...] = ("int8-weight", "fp8", "int4-awq")
"""Weight formats tried first, largest first (fp8 only on chips that compute it)."""

KV_FORMATS: tuple[str, ...] = ("kv-fp8", "kv-int8", "kv-int4")
"""KV-cache formats tried when the KV is what overflows, widest first."""

Simulate = Callable[..., PhaseCost]


def _stack(base: str, extra: str) -> str:
    return f"{base}+{extra}" if base else extra


def ways_out(
    simulate: Simulate,
    chip: Chip,
    model: ModelConfig,
    scenario: Scenario,
    engine: str,
    techniques: str,
    dataflow: str,
) -> list[WayOut]:
    """The priced ways out for a step that does not fit (empty when it fits); ``simulate`` is
    :func:`infersim.simulator.inference.simulate` (passed in to keep this module below it)."""

    def memory(stack: str, scen: Scenario = scenario) -> MemoryReport | None:
        try:
            return simulate(chip, model, scen, "roofline", stack, dataflow, ways_out=False).memory
        except InfersimError:
            return None  # the chip cannot take this way (no link, unsupported format)

    def priced(kind: str, stack: str, description: str, scen: Scenario = scenario) -> WayOut:
        cost = simulate(chip, model, scen, engine, stack, dataflow, ways_out=False)
        return WayOut(kind=kind, techniques=stack, description=description, cost=cost)

    base = memory(techniques)
    if base is None or base.fits:
        return []
    out: list[WayOut] = []
    out += _parallel(memory, priced, techniques, chip)
    out += _offload(memory, priced, techniques, base)
    out += _formats(memory, priced, techniques, base)
    out += _shrink(memory, priced, techniques, scenario)
    return out


Memory = Callable[..., MemoryReport | None]
Priced = Callable[..., WayOut]


def _parallel(memory: Memory, priced: Priced, techniques: str, chip: Chip) -> list[WayOut]:
    if chip.chip_link is None:
        return []
    tp = 2
    while tp <= MAX_TP:
        found = memory(_stack(techniques, f"tp={tp}"))
        if found is not None and found.fits:
            return [priced("tp", _stack(techniques, f"tp={tp}"),
                           f"tensor parallelism over {tp} chips")]  # fmt: skip
        tp *= 2
    stages = 2
    while MAX_TP * stages <= MAX_CHIPS:
        stack = _stack(techniques, f"tp={MAX_TP}+pp={stages}")
        found = memory(stack)
        if found is not None and found.fits:
            return [priced("tp+pp", stack, f"tp={MAX_TP} x {stages} pipeline stages "
                                           f"({MAX_TP * stages} chips)")]  # fmt: skip
        stages *= 2
    return []


def _offload(memory: Memory, priced: Priced, techniques: str, base: MemoryReport) -> list[WayOut]:
    if base.weights_bytes <= 0 or base.shortfall_bytes >= base.weights_bytes:
        return []
    steps = math.ceil(base.shortfall_bytes / base.weights_bytes / OFFLOAD_STEP)
    for step in range(steps, min(steps + 3, round(1 / OFFLOAD_STEP)) + 1):
        fraction = step * OFFLOAD_STEP
        stack = _stack(techniques, f"offload={fraction:.2f}")
        found = memory(stack)
        if found is None:
            return []  # no host link
        if found.fits:
            return [priced("offload", stack,
                           f"{fraction:.0%} of the weights streamed from host memory every step")]
    return []


def _formats(memory: Memory, priced: Priced, techniques: str, base: MemoryReport) -> list[WayOut]:
    out: list[WayOut] = []
    for token in WEIGHT_FORMATS:
        found = memory(_stack(techniques, token))
        if found is not None and found.fits:
            out.append(priced("weights", _stack(techniques, token), f"weights as {token}"))
    gguf = sorted(dtypes.GGUF_FORMATS, key=dtypes.nbytes, reverse=True)
    for token in gguf:
        found = memory(_stack(techniques, token))
        if found is not None and found.fits:
            out.append(priced("weights", _stack(techniques, token),
                              f"weights as GGUF {token} ({8 * dtypes.nbytes(token):.2f} bits)"))
            break
    if base.weights_bytes + base.activation_bytes <= base.capacity_bytes:
        for token in KV_FORMATS:
            found = memory(_stack(techniques, token))
            if found is not None and found.fits:
                out.append(priced("kv", _stack(techniques, token), f"KV cache as {token[3:]}"))
                break
    return out


def _largest(fits: Callable[[int], bool], high: int) -> int:
    """The largest n in 1..high with fits(n) (fits is monotone decreasing); 0 if none."""
    if not fits(1):
        return 0
    low = 1
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low


def _shrink(memory: Memory, priced: Priced, techniques: str, scenario: Scenario) -> list[WayOut]:
    def fits(**changes: int) -> bool:
        found = memory(techniques, scenario.model_copy(update=changes))
        return found is not None and found.fits

    out: list[WayOut] = []
    if scenario.batch > 1:
        batch = _largest(lambda n: fits(batch=n), scenario.batch - 1)
        if batch:
            out.append(priced("batch", techniques, f"batch {batch} instead of {scenario.batch}",
                              scenario.model_copy(update={"batch": batch})))
    field = "prompt_len" if scenario.phase == "prefill" else "context_len"
    length = getattr(scenario, field)
    if length > 1:
        best = _largest(lambda n: fits(**{field: n}), length - 1)
        if best:
            what = "prompt" if field == "prompt_len" else "context"
            out.append(priced("context", techniques, f"{what} {best} instead of {length} tokens",
                              scenario.model_copy(update={field: best})))
    return out
