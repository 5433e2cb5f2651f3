"""Iteration costs for the serving simulator: the chip model's seconds per iteration, memoized on
bucketed lengths, and the KV pool a chip has left once the weights are resident."""

from __future__ import annotations

import math

from infersim.arch_models.chip import Chip
from infersim.errors import ConfigError
from infersim.simulator.defaults import DEFAULT_ENGINE
from infersim.simulator.inference import iteration_time, within_bounds
from infersim.simulator.serving.kv import KVConfig
from infersim.workloads import graph
from infersim.workloads.models import ModelConfig
from infersim.workloads.techniques import Plan

BUCKET_STEPS_PER_OCTAVE = 16
"""Iteration costs are memoized on lengths rounded to 16 steps per power of two (≤ 3.1 %
rounding error on each length; values ≤ 32 are exact)."""

def bucket(x: float, steps_per_octave: int) -> int:
    """``x`` rounded to the nearest of ``steps_per_octave`` evenly spaced values in its power of
    two (``0`` steps: rounded to an integer); values up to ``2 · steps`` are exact integers."""
    n = round(x)
    if steps_per_octave <= 0 or n <= 2 * steps_per_octave:
        return n
    spacing = 2.0 ** (math.frexp(x)[1] - 1) / steps_per_octave
    return int(round(x / spacing) * spacing)


class StepCost:
    """Seconds of one serving iteration, memoized on bucketed
    (prefill sequences, tokens per prefill, prior context, decode sequences, decode context).

    With speculative decoding the decodes score K+1 tokens (the verify pass) and the drafter
    adds K draft-model steps (or K × ``cost_fraction`` of a target decode step for draft
    heads); a draft model also prefills every prompt chunk.
    """

    def __init__(self, chip: Chip, plan: Plan, engine: str = DEFAULT_ENGINE,
                 steps_per_octave: int = BUCKET_STEPS_PER_OCTAVE) -> None:
        self.chip, self.plan, self.engine = chip, plan, engine
        self.steps = steps_per_octave
        self.memo: dict[tuple[int, ...], float] = {}
        self.calls = 0

    def _time(self, pre_seqs: int, pre_tokens: float, prior: float, dec_seqs: int,
              context: float, decode_tokens: int, draft: bool) -> float:
        self.calls += 1
        b = self.steps
        key = (bucket(pre_seqs, b), max(1, bucket(pre_tokens, b)) if pre_seqs else 0,
               bucket(prior, b) if pre_seqs else 0, bucket(dec_seqs, b),
               max(1, bucket(context, b)) if dec_seqs else 0, decode_tokens, int(draft))
        seconds = self.memo.get(key)
        if seconds is None:
            chunks = [(key[0], key[1], key[2])] if pre_seqs else []
            model = self.plan.speculative.draft if draft and self.plan.speculative else None
            seconds = iteration_time(self.chip, self.plan, chunks, key[3], key[4], self.engine,
                                     decode_tokens, model)
            self.memo[key] = seconds
        return seconds

    def seconds(self, pre_seqs: int, pre_tokens: float, prior: float, dec_seqs: int,
                context: float) -> float:
        """Seconds of an iteration with ``pre_seqs`` prompt chunks of ``pre_tokens`` tokens
        after ``prior`` cached ones, and ``dec_seqs`` decodes over ``context`` cached tokens
        (means over the sequences)."""
        spec = self.plan.speculative
        if spec is None:
            return self._time(pre_seqs, pre_tokens, prior, dec_seqs, context, 1, False)
        verify = spec.k + 1 if dec_seqs else 1
        seconds = self._time(pre_seqs, pre_tokens, prior, dec_seqs, context, verify, False)
        if dec_seqs and spec.draft is not None:
            seconds += spec.k * self._time(0, 0, 0, dec_seqs, context, 1, True)
        elif dec_seqs and spec.cost_fraction > 0:
            target = self._time(0, 0, 0, dec_seqs, context, 1, False)
            seconds += spec.k * spec.cost_fraction * target
        if pre_seqs and spec.draft is not None:
            seconds += self._time(pre_seqs, pre_tokens, prior, 0, 0, 1, True)
        return seconds


def _kv_share(model: ModelConfig, plan: Plan) -> float:
    """Fraction of a token's KV one chip holds under TP (KV heads shard, MLA replicates) and
    PP (its stage's layers)."""
    tp = plan.graph.tp
    heads = 1.0 if model.is_mla else math.ceil(model.kv_heads / tp) / model.kv_heads
    layers = math.ceil(model.num_hidden_layers / plan.pp) / model.num_hidden_layers
    return heads * layers


def kv_budget(chip: Chip, plan: Plan, kv: KVConfig, max_tokens_per_iteration: int
              ) -> tuple[float, float]:
    """(KV pool bytes per chip, KV bytes per token per chip).

    Raises:
        ConfigError: no KV cache in the plan, or nothing left for KV once weights, activations
            and the reserve are placed.
    """
    if not plan.graph.kv_cache:
        raise ConfigError("serving needs a KV cache; drop 'no-kv-cache' from the techniques")
    model, p = plan.model, plan.precision
    layers = math.ceil(model.num_hidden_layers / plan.pp) / model.num_hidden_layers
    weights = (graph.weights_bytes(model, p, plan.graph) / plan.graph.tp * layers
               * (1 - plan.offload_fraction))
    per_token = graph.kv_cache_bytes(model, 1, 1, p) * _kv_share(model, plan)
    spec = plan.speculative
    if spec is not None and spec.draft is not None:
        weights += graph.weights_bytes(spec.draft, p, plan.graph) / plan.graph.tp
        per_token += graph.kv_cache_bytes(spec.draft, 1, 1, p) * _kv_share(spec.draft, plan)
    if kv.kv_capacity_bytes is not None:
        return kv.kv_capacity_bytes, per_token
    what = f"an iteration of {max_tokens_per_iteration:,} prompt tokens"
    with within_bounds(model, what=what, remedy="lower the scheduler's max_tokens_per_iteration"):
        ops = graph.mixed_step(model, [(1, max_tokens_per_iteration, 0)], 0, 0, p, plan.graph)
    activations = graph.activation_bytes(ops)
    dram = float(chip.dram.capacity_bytes)
    capacity = dram * (1 - kv.memory_reserve_fraction) - weights - activations
    if capacity < per_token:
        raise ConfigError(
            f"{model.name} does not leave room for a KV cache on {chip.name}: {dram / 1e9:.1f} GB"
            f" DRAM, {weights / 1e9:.1f} GB weights per chip, {activations / 1e9:.2f} GB "
            f"activations, {kv.memory_reserve_fraction:.0%} reserve (try tp=N, int4-awq or "
            f"offload=F)"
        )
    return capacity, per_token
