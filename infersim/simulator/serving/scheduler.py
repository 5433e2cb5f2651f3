"""Serving schedulers: what runs in the next iteration. One small class per policy, selected by
its typed ``kind``; each is a frozen config with ``next_step(engine)``, and the engine (the run)
owns every piece of mutable state — queues, requests, KV blocks, time.

- ``static``: wait for a full batch (or a timeout, or the end of arrivals), prefill it padded to
  the longest prompt, decode it padded to its formation size until every member is done
  (finished sequences keep being computed as padding, as in a static ``generate`` loop).
- ``continuous``: iteration-level admission (Orca; vLLM's default scheduler before chunked
  prefill): a waiting request joins as soon as a slot and KV memory are free; iterations with
  new prompts prefill only them (decodes wait one iteration), others decode every running
  sequence.
- ``chunked-prefill``: Sarathi-Serve / vLLM chunked prefill: every iteration decodes all
  running sequences and fills the rest of a token budget with prompt chunks.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from typing import Annotated, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from infersim.errors import ConfigError

DEFAULT_MAX_BATCH = 256
"""vLLM's default ``max_num_seqs``."""


class State(Enum):
    """Where a request is."""

    QUEUED = "queued"
    RUNNING = "running"
    SWAPPED = "swapped"
    FINISHED = "finished"
    REJECTED = "rejected"


@dataclass(slots=True, eq=False)
class Request:
    """One request and its progress. ``computed`` tokens have KV on chip; the prefill is done
    when ``computed >= prefill_target`` (the prompt, plus the tokens already generated after a
    recompute preemption). Times are simulated seconds (NaN until they happen)."""

    id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    max_output_tokens: int
    prefix_id: int = -1
    prefix_tokens: int = 0
    state: State = State.QUEUED
    computed: int = 0
    prefill_target: int = 0
    generated: int = 0
    cap_tokens: int = 0
    private_blocks: int = 0
    shared_blocks: int = 0
    cached_tokens: int = 0
    preemptions: int = 0
    scheduled_s: float = math.nan
    first_token_s: float = math.nan
    finish_s: float = math.nan

    @property
    def prefilling(self) -> bool:
        """Whether prompt (or recompute) tokens remain to be computed."""
        return self.computed < self.prefill_target


@dataclass(slots=True)
class Step:
    """One iteration: prompt chunks ``(request, tokens)`` and sequences decoding one token each
    (K+1 scored with speculative decoding). ``decode_slots`` and ``pad_prefill`` charge the
    padding of static batching."""

    prefills: list[tuple[Request, int]] = field(default_factory=list)
    decodes: list[Request] = field(default_factory=list)
    decode_slots: int = 0
    pad_prefill: bool = False


class Engine(Protocol):
    """What a scheduler may read and call on the run it schedules."""

    waiting: deque[Request]
    running: list[Request]
    all_arrived: bool
    decode_tokens: int
    padding_slots: int

    @property
    def now(self) -> float:
        """Simulated seconds."""
        ...

    def admission_tokens(self, req: Request) -> int:
        """Prefill tokens ``req`` needs if admitted now (its cached prefix excluded)."""
        ...

    def admit(self, req: Request) -> bool:
        """Move the head of the waiting queue to running if KV memory allows."""
        ...

    def grow(self, decoders: list[Request]) -> list[Request]:
        """The decoders that have room for this step's tokens (others preempted)."""
        ...

    def resume_swapped(self, max_batch: int) -> bool:
        """Swap preempted requests back in; True when none is left on the host."""
        ...


class _Scheduler(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    max_batch_size: int = Field(
        default=DEFAULT_MAX_BATCH, ge=1, le=1 << 16, description="Most sequences running at once"
    )

    def next_step(self, engine: Engine) -> Step | None:
        """The next iteration, or None when there is nothing to run now."""
        raise NotImplementedError

    def wake_at(self, engine: Engine) -> float | None:
        """When an idle engine should ask again even if nothing arrives (simulated s)."""
        return None

    @property
    def prompt_limit(self) -> int | None:
        """The longest prompt (tokens) this policy can ever schedule; None: any."""
        return None

    def check(self, decode_tokens: int) -> None:
        """Raise ConfigError if one decode step scores more tokens than this policy allows."""


class StaticBatching(_Scheduler):
    """Request-level batching: a batch forms, runs to completion, then the next forms."""

    kind: Literal["static"] = "static"
    max_tokens_per_iteration: int = Field(
        default=8192, ge=1, le=1 << 24,
        description="Padded prompt tokens one prefill iteration holds (a batch whose padded "
                    "prompts exceed it prefills over several iterations)",
    )
    timeout_s: float = Field(
        default=0.05, ge=0, le=3600, description="Longest wait for a full batch in seconds"
    )

    def _prefill(self, engine: Engine) -> Step | None:
        """The next group of the batch's prompts whose padded tokens fit the budget."""
        chunks: list[tuple[Request, int]] = []
        longest = 0
        for req in engine.running:
            if not req.prefilling:
                continue
            need = req.prefill_target - req.computed
            if chunks and max(longest, need) * (len(chunks) + 1) > self.max_tokens_per_iteration:
                break
            chunks.append((req, need))
            longest = max(longest, need)
        return Step(chunks, pad_prefill=True) if chunks else None

    def next_step(self, engine: Engine) -> Step | None:
        """Continue the current batch, or form a new one."""
        if engine.running:
            step = self._prefill(engine)
            if step is not None:
                return step
            decodes = engine.grow(list(engine.running))
            if decodes:
                return Step(decodes=decodes, decode_slots=engine.padding_slots)
        engine.padding_slots = 0
        if not engine.resume_swapped(self.max_batch_size):
            return None
        waiting = engine.waiting
        ready = (len(waiting) >= self.max_batch_size or engine.all_arrived
                 or (waiting and engine.now - waiting[0].arrival_s >= self.timeout_s))
        while ready and waiting and len(engine.running) < self.max_batch_size:
            if not engine.admit(waiting[0]):
                break
        engine.padding_slots = len(engine.running)
        step = self._prefill(engine)
        if step is None and engine.running:
            step = Step(decodes=engine.grow(list(engine.running)),
                        decode_slots=engine.padding_slots)
        return step

    def wake_at(self, engine: Engine) -> float | None:
        """The oldest waiting request's batching deadline."""
        if engine.waiting and not engine.running:
            return engine.waiting[0].arrival_s + self.timeout_s
        return None


class ContinuousBatching(_Scheduler):
    """Iteration-level admission; prefill iterations take priority over decodes."""

    kind: Literal["continuous"] = "continuous"
    max_tokens_per_iteration: int = Field(
        default=8192, ge=1, le=1 << 24, description="Prompt tokens one iteration may prefill"
    )

    def next_step(self, engine: Engine) -> Step | None:
        """Prefill newly admitted requests if any fit, else decode every running sequence."""
        prefills: list[tuple[Request, int]] = []
        if engine.resume_swapped(self.max_batch_size):
            budget = self.max_tokens_per_iteration
            while engine.waiting and len(engine.running) < self.max_batch_size:
                req = engine.waiting[0]
                need = engine.admission_tokens(req)
                # a recompute longer than the budget may run alone rather than never
                if need > budget and prefills:
                    break
                if not engine.admit(req):
                    break
                prefills.append((req, req.prefill_target - req.computed))
                budget -= need
        if prefills:
            return Step(prefills)
        decodes = engine.grow([r for r in engine.running if r.computed >= r.prefill_target])
        return Step(decodes=decodes) if decodes else None

    @property
    def prompt_limit(self) -> int | None:
        """A whole prompt must fit one iteration's budget."""
        return self.max_tokens_per_iteration


class ChunkedPrefill(_Scheduler):
    """Decodes first, then prompt chunks up to a token budget per iteration."""

    kind: Literal["chunked-prefill"] = "chunked-prefill"
    max_tokens_per_iteration: int = Field(
        default=2048, ge=1, le=1 << 24,
        description="Token budget of one iteration (decode tokens + prompt chunk tokens)",
    )

    def next_step(self, engine: Engine) -> Step | None:
        """Every decode that fits the budget, then chunks of partly prefilled and new prompts."""
        resumed = engine.resume_swapped(self.max_batch_size)
        budget = self.max_tokens_per_iteration
        per_decode = engine.decode_tokens
        decoders = [r for r in engine.running if r.computed >= r.prefill_target]
        decoders = decoders[: budget // per_decode]
        decodes = engine.grow(decoders)
        budget -= len(decodes) * per_decode
        prefills: list[tuple[Request, int]] = []
        for req in engine.running:
            if budget <= 0:
                break
            if req.prefilling:
                chunk = min(req.prefill_target - req.computed, budget)
                prefills.append((req, chunk))
                budget -= chunk
        while (resumed and budget > 0 and engine.waiting
               and len(engine.running) < self.max_batch_size):
            req = engine.waiting[0]
            if not engine.admit(req):
                break
            chunk = min(req.prefill_target - req.computed, budget)
            prefills.append((req, chunk))
            budget -= chunk
        if prefills or decodes:
            return Step(prefills, decodes)
        return None

    def check(self, decode_tokens: int) -> None:
        """The budget must hold at least one decode (K+1 tokens when speculating)."""
        if self.max_tokens_per_iteration < decode_tokens:
            raise ConfigError(f"chunked-prefill budget {self.max_tokens_per_iteration} tokens is "
                              f"smaller than one speculative verify ({decode_tokens} tokens)")


Scheduler = Annotated[
    StaticBatching | ContinuousBatching | ChunkedPrefill, Field(discriminator="kind")
]
