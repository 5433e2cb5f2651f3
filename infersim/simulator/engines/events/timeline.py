"""Timelines of the event engine: (resource, start, end, label) spans, with their export as
Chrome-trace JSON (opens in Perfetto and chrome://tracing) and as a pandas DataFrame.

A resource name is ``kind:detail`` (``compute:core 0-130``, ``dma-in:core 0-130``, ``hbm``,
``l2``); in a Chrome trace every kind is a process and every resource a thread of it. Times are
core clock cycles; seconds appear only in the exports (``cycles / freq_hz``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import pandas as pd


class Span(NamedTuple):
    """One busy interval of one resource, in core clock cycles."""

    resource: str
    start_cycles: float
    end_cycles: float
    label: str


@dataclass(frozen=True)
class EventStats:
    """What one event simulation did. Per-core figures are means over the cores used (a core
    group counts once per core): ``first_load_cycles`` is the wait for the first tile (the
    pipeline fill), ``compute_busy_cycles`` the array's work, ``compute_stall_cycles`` the
    array waiting for data after the first tile, ``dma_stall_cycles`` DMA-in waiting for SRAM
    space."""

    makespan_cycles: float = 0.0
    events: int = 0
    tiles: int = 0
    blocks: int = 0
    core_groups: int = 0
    cores_used: int = 0
    waves: int = 0
    first_load_cycles: float = 0.0
    compute_busy_cycles: float = 0.0
    compute_stall_cycles: float = 0.0
    dma_stall_cycles: float = 0.0

    def plus(self, other: EventStats) -> EventStats:
        """Field-wise sum (the stats of two simulations run one after the other)."""
        return EventStats(**{
            f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)
        })


@dataclass(frozen=True)
class Timeline:
    """Spans of one simulation (or of several laid end to end) at clock ``freq_hz``."""

    freq_hz: float
    spans: tuple[Span, ...] = ()
    stats: EventStats = field(default_factory=EventStats)

    @property
    def end_cycles(self) -> float:
        """The last span's end (0 when empty)."""
        return max((s.end_cycles for s in self.spans), default=0.0)

    def resources(self) -> list[str]:
        """Resource names in order of first appearance."""
        return list(dict.fromkeys(s.resource for s in self.spans))

    def shifted(self, offset_cycles: float, prefix: str = "") -> Timeline:
        """This timeline moved later by ``offset_cycles``, labels prefixed with ``prefix``."""
        spans = tuple(
            Span(s.resource, s.start_cycles + offset_cycles, s.end_cycles + offset_cycles,
                 prefix + s.label)
            for s in self.spans
        )
        return Timeline(self.freq_hz, spans, self.stats)

    def then(self, other: Timeline) -> Timeline:
        """Both timelines' spans (already placed) and their summed stats."""
        return Timeline(self.freq_hz, self.spans + other.spans, self.stats.plus(other.stats))

    def to_chrome_trace(self) -> dict[str, Any]:
        """The Chrome trace-event document: one complete event (``ph: "X"``, ``ts``/``dur`` in
        µs) per span, a process per resource kind and a thread per resource, named by
        metadata events."""
        us = 1e6 / self.freq_hz
        pids: dict[str, int] = {}
        tids: dict[str, int] = {}
        meta: list[dict[str, Any]] = []
        events: list[dict[str, Any]] = []
        for s in self.spans:
            kind = s.resource.split(":", 1)[0]
            if kind not in pids:
                pids[kind] = len(pids) + 1
                meta.append({"name": "process_name", "ph": "M", "pid": pids[kind], "tid": 0,
                             "args": {"name": kind}})
            if s.resource not in tids:
                tids[s.resource] = len(tids) + 1
                meta.append({"name": "thread_name", "ph": "M", "pid": pids[kind],
                             "tid": tids[s.resource], "args": {"name": s.resource}})
            events.append({
                "name": s.label, "cat": kind, "ph": "X", "pid": pids[kind],
                "tid": tids[s.resource], "ts": s.start_cycles * us,
                "dur": max(s.end_cycles - s.start_cycles, 0.0) * us,
            })
        return {"traceEvents": meta + events, "displayTimeUnit": "ns",
                "otherData": {"freq_hz": self.freq_hz, "clock": "core cycles"}}

    def write_chrome_trace(self, path: str | Path) -> None:
        """Write :meth:`to_chrome_trace` as JSON to ``path``."""
        Path(path).write_text(json.dumps(self.to_chrome_trace()))

    def to_dataframe(self) -> pd.DataFrame:
        """One row per span: resource, label, start/end/duration in cycles and in seconds."""
        import pandas as pd

        frame = pd.DataFrame(self.spans, columns=list(Span._fields))
        frame["duration_cycles"] = frame["end_cycles"] - frame["start_cycles"]
        for col in ("start", "end", "duration"):
            frame[f"{col}_s"] = frame[f"{col}_cycles"] / self.freq_hz
        return frame
