"""KV-cache memory for the serving simulator: contiguous reservation vs paged blocks, with a
block-hash prefix cache (LRU under pressure).

Both managers are one :class:`KVPool` of fixed-size blocks: ``contiguous`` reserves, at
admission, one region of prompt + ``max_output_tokens`` tokens (block size 1 token, all of it up
front — the Orca/FasterTransformer layout whose unused tail is internal fragmentation);
``paged`` holds blocks of ``block_size_tokens`` allocated as a sequence grows (PagedAttention,
Kwon et al. 2023), so only the last block of each sequence is partly empty.

A request's capacity is its ``private_blocks`` plus ``shared_blocks`` taken from the prefix
cache. The prefix cache keys a full block by ``(prefix_id, block_index)``: a request whose
shared prefix is cached references those blocks instead of computing them; when its prefill is
done its own full prefix blocks are published. Blocks nobody references stay cached, least
recently released first evicted when an allocation needs room.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from infersim.simulator.serving.scheduler import Request

MEMORY_RESERVE_FRACTION = 0.10
"""DRAM kept out of the KV pool for the framework, CUDA graphs and fragmentation: vLLM's
default ``gpu_memory_utilization = 0.9``."""

WATERMARK_FRACTION = 0.01
"""Blocks a paged admission must leave free so running sequences can grow: vLLM's default
``watermark = 0.01``."""


class _KVBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    preemption: Literal["recompute", "swap"] = Field(
        default="recompute",
        description="When a running sequence cannot grow: drop its KV and recompute it later, "
                    "or swap it to host memory over the host link",
    )
    memory_reserve_fraction: float = Field(
        default=MEMORY_RESERVE_FRACTION, ge=0, lt=1,
        description="Fraction of chip DRAM kept out of the KV pool (besides weights and the "
                    "peak activations of the largest iteration)",
    )
    kv_capacity_bytes: float | None = Field(
        default=None, gt=0, le=1e15,
        description="KV pool size per chip in bytes (overrides DRAM − weights − reserve)",
    )


class ContiguousKV(_KVBase):
    """Reserve prompt + max output tokens per request at admission (never grows, never
    preempts)."""

    kind: Literal["contiguous"] = "contiguous"

    @property
    def block_tokens(self) -> int:
        """Allocation granularity in tokens."""
        return 1


class PagedKV(_KVBase):
    """Blocks of ``block_size_tokens`` allocated on demand (PagedAttention)."""

    kind: Literal["paged"] = "paged"
    block_size_tokens: int = Field(default=16, ge=1, le=4096, description="Tokens per KV block")
    prefix_cache: bool = Field(default=False, description="Share cached prefix blocks")
    watermark_fraction: float = Field(
        default=WATERMARK_FRACTION, ge=0, lt=1,
        description="Fraction of blocks an admission must leave free",
    )

    @property
    def block_tokens(self) -> int:
        """Allocation granularity in tokens."""
        return self.block_size_tokens


KVConfig = Annotated[ContiguousKV | PagedKV, Field(discriminator="kind")]


class KVPool:
    """The run's KV blocks. ``lookahead_tokens`` is the extra room each decode step needs beyond
    one token (K for a speculative verify of K+1 tokens).

    Invariant: ``free_blocks + Σ private_blocks + cached blocks == total_blocks``.
    """

    def __init__(self, config: KVConfig, capacity_tokens: int, lookahead_tokens: int) -> None:
        self.block_tokens = config.block_tokens
        self.up_front = isinstance(config, ContiguousKV)
        self.prefix_cache = isinstance(config, PagedKV) and config.prefix_cache
        self.total_blocks = capacity_tokens // self.block_tokens
        self.free_blocks = self.total_blocks
        self.watermark_blocks = (
            math.ceil(config.watermark_fraction * self.total_blocks)
            if isinstance(config, PagedKV) else 0
        )
        self.lookahead_tokens = lookahead_tokens
        self._refs: dict[tuple[int, int], int] = {}
        self._evictable: OrderedDict[tuple[int, int], None] = OrderedDict()
        self.prefix_hit_tokens = 0
        self.prefix_lookup_tokens = 0

    @property
    def capacity_tokens(self) -> int:
        """Tokens the pool holds when full."""
        return self.total_blocks * self.block_tokens

    @property
    def allocated_tokens(self) -> int:
        """Tokens of capacity held by requests (private blocks and referenced cached blocks)."""
        return (self.total_blocks - self.free_blocks - len(self._evictable)) * self.block_tokens

    @property
    def cached_blocks(self) -> int:
        """Blocks in the prefix cache (referenced or not)."""
        return len(self._refs)

    @property
    def referenced_cached_blocks(self) -> int:
        """Cached blocks some running request references."""
        return len(self._refs) - len(self._evictable)

    def full_reservation(self, req: Request) -> int:
        """Tokens a contiguous manager reserves for ``req``."""
        return req.prompt_tokens + req.max_output_tokens + self.lookahead_tokens

    def fits_alone(self, req: Request) -> bool:
        """Whether ``req`` could run to completion with the whole pool to itself."""
        blocks = math.ceil(self.full_reservation(req) / self.block_tokens)
        return blocks <= self.total_blocks

    def _shareable_blocks(self, req: Request) -> int:
        if not self.prefix_cache or req.prefix_id < 0:
            return 0
        # the last prompt token is always computed: its logits give the first output token
        return min(req.prefix_tokens, req.prompt_tokens - 1) // self.block_tokens

    def cached_prefix_tokens(self, req: Request) -> int:
        """Tokens of ``req``'s shared prefix found in the cache now (whole blocks)."""
        hits, n = 0, self._shareable_blocks(req)
        while hits < n and (req.prefix_id, hits) in self._refs:
            hits += 1
        return hits * self.block_tokens

    def _take(self, blocks: int, keep: int = 0) -> bool:
        """Move ``blocks`` free blocks to the caller, evicting unreferenced cached blocks
        (least recently used first) if needed, leaving at least ``keep`` free."""
        if blocks <= 0:
            return True
        if self.free_blocks + len(self._evictable) - keep < blocks:
            return False
        while self.free_blocks - keep < blocks:
            key, _ = self._evictable.popitem(last=False)
            del self._refs[key]
            self.free_blocks += 1
        self.free_blocks -= blocks
        return True

    def acquire(self, req: Request, tokens: int, admission: bool = True,
                watermark: bool = True) -> bool:
        """Give a request without KV room for ``tokens`` tokens (contiguous: its full
        reservation). An admission reuses the request's cached prefix blocks (and, when it
        starts from scratch, sets ``req.computed`` to the cached tokens); with ``watermark`` it
        must leave the watermark free. Returns False, changing nothing, when there is no room."""
        hits = self.cached_prefix_tokens(req) // self.block_tokens if admission else 0
        if self.up_front:
            tokens = max(tokens, self.full_reservation(req))
        need = max(0, math.ceil(tokens / self.block_tokens) - hits)
        keep = self.watermark_blocks if watermark else 0
        keys = [(req.prefix_id, i) for i in range(hits)]
        protected = sum(1 for key in keys if self._refs[key] == 0)
        if self.free_blocks + len(self._evictable) - protected - keep < need:
            return False
        for key in keys:
            if self._refs[key] == 0:
                del self._evictable[key]
            self._refs[key] += 1
        taken = self._take(need, keep)
        assert taken
        req.private_blocks = need
        req.shared_blocks = hits
        req.cap_tokens = (need + hits) * self.block_tokens
        if admission:
            self.prefix_lookup_tokens += self._shareable_blocks(req) * self.block_tokens
            self.prefix_hit_tokens += hits * self.block_tokens
            if req.computed == 0:
                req.computed = hits * self.block_tokens
        return True

    def grow(self, req: Request, tokens: int) -> bool:
        """Make room for ``tokens`` tokens of ``req``: paged, new blocks on demand; contiguous,
        only within its reservation (a region cannot grow in place)."""
        if tokens <= req.cap_tokens:
            return True
        if self.up_front:
            return False
        need = math.ceil(tokens / self.block_tokens) - req.private_blocks - req.shared_blocks
        if not self._take(need):
            return False
        req.private_blocks += need
        req.cap_tokens = (req.private_blocks + req.shared_blocks) * self.block_tokens
        return True

    def publish(self, req: Request) -> None:
        """After ``req``'s prefill: its full shared-prefix blocks join the cache (a block some
        other request already published is referenced instead, freeing the duplicate)."""
        for i in range(req.shared_blocks, self._shareable_blocks(req)):
            key = (req.prefix_id, i)
            if key in self._refs:
                if self._refs[key] == 0:
                    del self._evictable[key]
                self._refs[key] += 1
                self.free_blocks += 1
            else:
                self._refs[key] = 1
            req.private_blocks -= 1
            req.shared_blocks += 1

    def release(self, req: Request) -> None:
        """Free ``req``'s private blocks; its cached blocks stay, evictable once unreferenced."""
        for i in range(req.shared_blocks):
            key = (req.prefix_id, i)
            self._refs[key] -= 1
            if self._refs[key] == 0:
                self._evictable[key] = None
        self.free_blocks += req.private_blocks
        req.private_blocks = req.shared_blocks = req.cap_tokens = 0

    def check(self, requests: list[Request]) -> None:
        """Assert the block invariant over the requests holding KV (for tests)."""
        private = sum(r.private_blocks for r in requests)
        assert self.free_blocks + private + len(self._refs) == self.total_blocks, (
            self.free_blocks, private, len(self._refs), self.total_blocks)
        assert all(n >= 0 for n in self._refs.values())
        assert sum(r.shared_blocks for r in requests) == sum(self._refs.values())
