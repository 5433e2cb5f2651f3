"""The engine of one serving run: SimPy processes for arrivals and iterations, the queues, the KV
pool, the random streams and the records. The public entry point is
:func:`infersim.simulator.serving.simulate_serving`."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from operator import attrgetter
from typing import Any

import numpy as np
import pandas as pd
import simpy

from infersim.arch_models.chip import Chip
from infersim.errors import ConfigError
from infersim.simulator.serving.config import ServingConfig
from infersim.simulator.serving.cost import StepCost, kv_budget
from infersim.simulator.serving.kv import KVPool
from infersim.simulator.serving.metrics import TIMELINE_COLUMNS, RunTotals, request_frame
from infersim.simulator.serving.scheduler import Request, State, Step
from infersim.simulator.serving.workload import generate
from infersim.workloads.techniques import Plan

_COMPUTED = attrgetter("computed")
_SHARED = attrgetter("shared_blocks")

PROGRESS_EVERY = 256
"""Iterations between progress callbacks."""

Progress = Callable[[int, int], None]
"""Called with (requests done or rejected, requests total)."""


class Run:
    """The engine of one simulation: SimPy processes for arrivals and iterations, the queues,
    the KV pool and the records. Schedulers read and call it through
    :class:`~infersim.simulator.serving.scheduler.Engine`."""

    def __init__(self, chip: Chip, plan: Plan, config: ServingConfig, cost: StepCost,
                 progress: Progress | None) -> None:
        self.config, self.cost, self.progress = config, cost, progress
        sched, kv = config.scheduler, config.kv
        spec = plan.speculative
        self.decode_tokens = spec.k + 1 if spec else 1
        self.spec_alpha = spec.alpha if spec else 0.0
        sched.check(self.decode_tokens)
        if kv.preemption == "swap" and chip.host_link is None:
            raise ConfigError(f"swap preemption needs a host link; chip {chip.name!r} has none")
        self.host_link = chip.host_link
        capacity_bytes, self.kv_bytes_per_token = kv_budget(
            chip, plan, kv, sched.max_tokens_per_iteration)
        self.pool = KVPool(kv, int(capacity_bytes // self.kv_bytes_per_token),
                           self.decode_tokens - 1)
        streams = [np.random.default_rng(s) for s in np.random.SeedSequence(config.seed).spawn(4)]
        arrays = generate(config.workload, *streams[:3])
        self.accept_rng = streams[3]
        self.requests = [
            Request(id=i, arrival_s=float(arrays.arrival_s[i]),
                    prompt_tokens=int(arrays.prompt_tokens[i]),
                    output_tokens=int(arrays.output_tokens[i]),
                    max_output_tokens=arrays.max_output_tokens,
                    prefix_id=int(arrays.prefix_id[i]), prefix_tokens=int(arrays.prefix_tokens[i]))
            for i in range(len(arrays))
        ]
        self.prompt_limit = sched.prompt_limit
        self.env = simpy.Environment()
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.swapped: deque[Request] = deque()
        self.all_arrived = False
        self.padding_slots = 0
        self._idle: simpy.Event | None = None
        self._transfer_s = 0.0
        self._host_bytes = 0.0
        self._in_system = 0
        self._area_s = 0.0
        self._last_change_s = 0.0
        self.done = 0
        self.preemptions = 0
        self.swap_s = 0.0
        self.spec_passes = self.spec_tokens = 0
        self.timeline: dict[str, list[float]] = {c: [] for c in TIMELINE_COLUMNS}

    # --- the Engine protocol ------------------------------------------------------------------

    @property
    def now(self) -> float:
        """Simulated seconds."""
        return self.env.now

    def admission_tokens(self, req: Request) -> int:
        """Prefill tokens ``req`` needs if admitted now (its cached prefix excluded)."""
        return req.prefill_target - self.pool.cached_prefix_tokens(req)

    def admit(self, req: Request) -> bool:
        """Move ``req`` (the head of the queue) to running if its KV fits."""
        if not self.pool.acquire(req, req.prefill_target, admission=True,
                                 watermark=bool(self.running)):
            return False
        self.waiting.popleft()
        if math.isnan(req.scheduled_s):
            req.scheduled_s = self.env.now
            req.cached_tokens = req.computed
        req.state = State.RUNNING
        self.running.append(req)
        return True

    def grow(self, decoders: list[Request]) -> list[Request]:
        """The decoders with KV room for this step; the newest running requests are preempted
        (possibly the decoder itself) until each older one fits."""
        need = self.decode_tokens
        out: list[Request] = []
        append = out.append
        for req in decoders:
            if req.computed + need <= req.cap_tokens:  # the common case: room in its last block
                append(req)
                continue
            if req.state is not State.RUNNING:
                continue  # preempted (its KV released) while an older decoder grew
            if self.pool.grow(req, req.computed + need):
                append(req)
                continue
            while True:
                victim = self.running[-1]
                self._preempt(victim)
                if victim is req:
                    break
                if self.pool.grow(req, req.computed + need):
                    append(req)
                    break
        return out

    def resume_swapped(self, max_batch: int) -> bool:
        """Swap preempted requests back in, oldest first, while KV and slots allow."""
        while self.swapped and len(self.running) < max_batch:
            req = self.swapped[0]
            tokens = max(req.prefill_target, req.computed + self.decode_tokens)
            if not self.pool.acquire(req, tokens, admission=False, watermark=False):
                break
            self.swapped.popleft()
            req.state = State.RUNNING
            self.running.append(req)
            moved = req.computed * self.kv_bytes_per_token
            self._host_bytes -= moved
            self._transfer(moved)
        return not self.swapped

    # --- internals ----------------------------------------------------------------------------

    def _transfer(self, nbytes: float) -> None:
        assert self.host_link is not None
        seconds = nbytes / self.host_link.bandwidth_bytes_per_s + self.host_link.latency_s
        self._transfer_s += seconds
        self.swap_s += seconds

    def _preempt(self, victim: Request) -> None:
        assert victim is self.running[-1]
        self.running.pop()
        victim.preemptions += 1
        self.preemptions += 1
        nbytes = victim.computed * self.kv_bytes_per_token
        self.pool.release(victim)
        link = self.host_link
        if (self.config.kv.preemption == "swap" and link is not None
                and self._host_bytes + nbytes <= link.host_capacity_bytes):
            self._host_bytes += nbytes
            self._transfer(nbytes)
            victim.state = State.SWAPPED
            self.swapped.appendleft(victim)
            return
        victim.computed = 0
        victim.prefill_target = victim.prompt_tokens + victim.generated
        victim.state = State.QUEUED
        self.waiting.appendleft(victim)

    def _count(self, delta: int) -> None:
        now = self.env.now
        self._area_s += self._in_system * (now - self._last_change_s)
        self._last_change_s = now
        self._in_system += delta

    def _wake(self) -> None:
        if self._idle is not None and not self._idle.triggered:
            self._idle.succeed()

    def _arrive(self, req: Request) -> None:
        req.prefill_target = req.prompt_tokens
        too_long = self.prompt_limit is not None and req.prompt_tokens > self.prompt_limit
        if too_long or not self.pool.fits_alone(req):
            req.state = State.REJECTED
            self.done += 1
            return
        self._count(+1)
        self.waiting.append(req)
        self._wake()

    def _finish(self, req: Request) -> None:
        req.state = State.FINISHED
        req.finish_s = self.env.now
        self.pool.release(req)
        self._count(-1)
        self.done += 1

    def _emit(self, req: Request, tokens: int) -> None:
        if req.generated == 0:
            req.first_token_s = self.env.now
        req.generated += tokens
        if req.generated >= req.output_tokens:
            self._finish(req)

    def _accepted(self, n: int) -> list[int]:
        """Tokens each of ``n`` speculating sequences gains: accepted drafts up to the first
        rejection (each accepted with probability α), plus the target's own token."""
        k = self.decode_tokens - 1
        accepts = self.accept_rng.random((n, k)) < self.spec_alpha
        runs = np.where(accepts.all(axis=1), k, np.argmin(accepts, axis=1))
        return (runs + 1).tolist()

    def _step_seconds(self, step: Step) -> float:
        pre, dec = step.prefills, step.decodes
        pre_tokens = prior = context = 0.0
        if pre:
            chunks = [c for _, c in pre]
            pre_tokens = max(chunks) if step.pad_prefill else sum(chunks) / len(pre)
            prior = sum(r.computed for r, _ in pre) / len(pre)
        if dec:
            context = sum(map(_COMPUTED, dec)) / len(dec)
        return self.cost.seconds(len(pre), pre_tokens, prior, max(len(dec), step.decode_slots),
                                 context)

    def _record(self, step: Step, seconds: float) -> None:
        pool, t, running = self.pool, self.timeline, self.running
        stored = sum(map(_COMPUTED, running))
        if pool.prefix_cache:  # a shared block is stored once
            shared = sum(map(_SHARED, running)) - pool.referenced_cached_blocks
            stored -= shared * pool.block_tokens
        t["start_s"].append(self.env.now)
        t["duration_s"].append(seconds)
        t["prefill_sequences"].append(len(step.prefills))
        t["prefill_tokens"].append(sum(c for _, c in step.prefills))
        t["decode_sequences"].append(len(step.decodes))
        t["batch_size"].append(len(step.prefills) + len(step.decodes))
        t["running"].append(len(running))
        t["waiting"].append(len(self.waiting))
        t["kv_allocated_tokens"].append(pool.allocated_tokens)
        t["kv_stored_tokens"].append(stored)

    def _apply(self, step: Step) -> None:
        finished = False
        for req, chunk in step.prefills:
            req.computed += chunk
            if req.computed >= req.prefill_target:
                if self.pool.prefix_cache:
                    self.pool.publish(req)
                self._emit(req, 1)
                finished |= req.state is State.FINISHED
        decodes = step.decodes
        if decodes and self.decode_tokens > 1:
            gains = self._accepted(len(decodes))
            self.spec_passes += len(gains)
            self.spec_tokens += sum(gains)
            for req, gain in zip(decodes, gains, strict=True):
                take = min(gain, req.output_tokens - req.generated)
                req.computed += take
                req.generated += take
                if req.generated >= req.output_tokens:
                    self._finish(req)
                    finished = True
        else:  # the hot loop of a run: one token each (decoders have their first token)
            for req in decodes:
                req.computed += 1
                req.generated += 1
                if req.generated >= req.output_tokens:
                    self._finish(req)
                    finished = True
        if finished:
            self.running = [r for r in self.running if r.state is State.RUNNING]

    # --- processes ----------------------------------------------------------------------------

    def _arrivals(self) -> Any:
        for req in self.requests:
            delay = req.arrival_s - self.env.now
            if delay > 0:
                yield self.env.timeout(delay)
            self._arrive(req)
        self.all_arrived = True
        self._wake()

    def _engine(self) -> Any:
        scheduler = self.config.scheduler
        iterations = 0
        while True:
            step = scheduler.next_step(self)
            if step is None:
                if self.all_arrived and not (self.waiting or self.running or self.swapped):
                    return
                self._idle = self.env.event()
                events = [self._idle]
                wake = scheduler.wake_at(self)
                if wake is not None and wake > self.env.now:
                    events.append(self.env.timeout(wake - self.env.now))
                elif self.all_arrived:
                    return  # nothing can change any more: the leftovers are reported unfinished
                yield self.env.any_of(events)
                self._idle = None
                continue
            seconds = self._step_seconds(step) + self._transfer_s
            self._transfer_s = 0.0
            self._record(step, seconds)
            yield self.env.timeout(seconds)
            self._apply(step)
            iterations += 1
            if self.progress is not None and iterations % PROGRESS_EVERY == 0:
                self.progress(self.done, len(self.requests))

    def run(self) -> tuple[pd.DataFrame, pd.DataFrame, RunTotals]:
        """Simulate until every request is finished or rejected."""
        self.env.process(self._arrivals())
        self.env.process(self._engine())
        self.env.run()
        self._count(0)
        if self.progress is not None:
            self.progress(self.done, len(self.requests))
        totals = RunTotals(
            kv_capacity_tokens=self.pool.capacity_tokens,
            kv_bytes_per_token=self.kv_bytes_per_token,
            in_system_area_s=self._area_s,
            preemptions=self.preemptions,
            swap_s=self.swap_s,
            prefix_hit_tokens=self.pool.prefix_hit_tokens,
            prefix_lookup_tokens=self.pool.prefix_lookup_tokens,
            spec_passes=self.spec_passes,
            spec_tokens=self.spec_tokens,
            memo_entries=len(self.cost.memo),
            memo_calls=self.cost.calls,
        )
        return request_frame(self.requests), pd.DataFrame(self.timeline), totals
