"""`memlane bench events`: change-event latency between two processes, and what polling costs.

A writer process appends messages at a steady pace; this process follows the outbox
(``Memory.events(wait=True)``) and times each event from its commit time (``at``, the
database's clock) to its arrival. Polling cost: the time of one look at an outbox with
nothing new, and the share of one core a follower spends at the default poll interval.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

_WRITER = """
import sys, time
from memlane import Memory
with Memory(sys.argv[1], embedder="none") as mem:
    sid = mem.create_session()
    for i in range(int(sys.argv[2])):
        mem.add(sid, f"bench line {i}")
        time.sleep(float(sys.argv[3]))
"""


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_events_bench(store: str | None, events: int, pace: float, polls: int) -> dict[str, Any]:
    from memlane import Memory
    from memlane.store.events import DEFAULT_POLL_SECONDS

    with tempfile.TemporaryDirectory() as tmp:
        target = store or str(Path(tmp) / "events.db")
        with Memory(target, embedder="none") as mem:
            since = mem.store.last_event_id()  # type: ignore[attr-defined]
            writer = subprocess.Popen([sys.executable, "-c", _WRITER, target, str(events), str(pace)])
            latencies: list[float] = []
            stop = threading.Event()
            for event in mem.events(since=since, wait=True, stop=stop):
                if event.kind == "message.appended":
                    latencies.append((time.time() - event.at) * 1000)
                    if len(latencies) == events:
                        break
            writer.wait()
            last = mem.store.last_event_id()  # type: ignore[attr-defined]
            started = time.perf_counter()
            for _ in range(polls):
                mem.store.events_after(last)  # type: ignore[attr-defined]
            poll_us = (time.perf_counter() - started) / polls * 1e6
            backend = mem.store.stats()["backend"]
    return {
        "backend": backend,
        "events": len(latencies),
        "writer_pace_ms": pace * 1000,
        "poll_interval_ms": DEFAULT_POLL_SECONDS * 1000,
        "latency_ms_p50": round(_pct(latencies, 0.5), 1),
        "latency_ms_p95": round(_pct(latencies, 0.95), 1),
        "latency_ms_max": round(max(latencies), 1),
        "empty_poll_us": round(poll_us, 1),
        "follower_core_share_pct": round(poll_us / (DEFAULT_POLL_SECONDS * 1e6) * 100, 3),
    }


def format_table(r: dict[str, Any]) -> str:
    return "\n".join([
        f"change events between two processes ({r['backend']}, {r['events']} appends every "
        f"{r['writer_pace_ms']:.0f} ms, follower polls every {r['poll_interval_ms']:.0f} ms)",
        f"  latency commit -> follower: p50 {r['latency_ms_p50']} ms, p95 {r['latency_ms_p95']} ms, "
        f"max {r['latency_ms_max']} ms",
        f"  one look at an outbox with nothing new: {r['empty_poll_us']} us "
        f"({r['follower_core_share_pct']}% of a core for an idle follower)",
    ])
