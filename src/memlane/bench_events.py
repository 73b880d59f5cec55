"""`memlane bench events`: change-event latency between two instances, and what waiting costs.

Instance A (a writer process) appends messages at a steady pace; instance B (this
process, another Memory on the same database and bus) follows the outbox
(``Memory.events(wait=True)``) and times each event from its commit (``at``, the
database's clock) to its arrival. One run per bus: the store's own doorbell (SQLite
``data_version`` or PostgreSQL LISTEN/NOTIFY) and, with ``--redis``, Redis/Valkey.

What waiting costs an idle instance: one look at an outbox with nothing new (what a
polling follower pays per poll, per follower), and on SQLite one ``PRAGMA
data_version`` (what the watcher pays per interval, once per process).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_WRITER = """
import sys, time
from memlane import Memory
redis = sys.argv[4] or None
with Memory(sys.argv[1], embedder="none", redis_url=redis) as mem:
    sid = mem.create_session()
    for i in range(int(sys.argv[2])):
        mem.add(sid, f"bench line {i}")
        time.sleep(float(sys.argv[3]))
"""


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@contextlib.contextmanager
def _postgres() -> Iterator[str]:
    from memlane.store.pg_embedded import EmbeddedPostgres

    with EmbeddedPostgres(fsync=False) as server:
        yield server.create_database("bench_events")


@contextlib.contextmanager
def _valkey() -> Iterator[str]:
    from memlane.bus.redis_bus import embedded_server

    with embedded_server() as url:
        yield url


def _latencies(target: str, redis_url: str | None, events: int, pace: float) -> tuple[list[float], str]:
    from memlane import Memory

    with Memory(target, embedder="none", redis_url=redis_url) as mem:
        since = mem.store.last_event_id()  # type: ignore[attr-defined]
        mem.bus.start()  # listening before the writer starts, as a running instance would be
        writer = subprocess.Popen(
            [sys.executable, "-c", _WRITER, target, str(events), str(pace), redis_url or ""])
        latencies: list[float] = []
        stop = threading.Event()
        try:
            for event in mem.events(since=since, wait=True, stop=stop):
                if event.kind == "message.appended":
                    latencies.append((time.time() - event.at) * 1000)
                    if len(latencies) == events:
                        break
        finally:
            writer.wait()
        return latencies, mem.bus.kind


def _idle_costs(target: str, polls: int) -> dict[str, float]:
    from memlane import Memory
    from memlane.store.sqlite_watch import DEFAULT_INTERVAL

    out: dict[str, float] = {}
    with Memory(target, embedder="none") as mem:
        store: Any = mem.store
        last = store.last_event_id()
        started = time.perf_counter()
        for _ in range(polls):
            store.events_after(last)
        out["empty_poll_us"] = round((time.perf_counter() - started) / polls * 1e6, 1)
        if hasattr(store, "data_version"):
            started = time.perf_counter()
            for _ in range(polls):
                store.data_version()
            dv = (time.perf_counter() - started) / polls * 1e6
            out["data_version_us"] = round(dv, 1)
            out["watcher_interval_ms"] = DEFAULT_INTERVAL * 1000
            out["watcher_core_share_pct"] = round(dv / (DEFAULT_INTERVAL * 1e6) * 100, 3)
    return out


def run_events_bench(
    store: str | None, events: int, pace: float, polls: int, *,
    postgres: bool = False, redis: str | None = None,
) -> dict[str, Any]:
    """``store``: a database (default a new SQLite file; ``postgres=True``: an embedded
    PostgreSQL); ``redis``: a redis:// URL, or "embedded" for a private Valkey."""
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        if store is None and postgres:
            store = stack.enter_context(_postgres())
        target = store or str(Path(tmp) / "events.db")
        redis_url = stack.enter_context(_valkey()) if redis == "embedded" else redis
        runs = []
        for bus_url in [None, redis_url] if redis_url else [None]:
            latencies, kind = _latencies(target, bus_url, events, pace)
            runs.append({
                "bus": kind,
                "events": len(latencies),
                "latency_ms_p50": round(_pct(latencies, 0.5), 2),
                "latency_ms_p95": round(_pct(latencies, 0.95), 2),
                "latency_ms_max": round(max(latencies), 2),
            })
        backend = "postgres" if target.startswith("postgres") else "sqlite"
        return {"backend": backend, "writer_pace_ms": pace * 1000, "runs": runs, **_idle_costs(target, polls)}


def format_table(r: dict[str, Any]) -> str:
    lines = [f"change events between two instances ({r['backend']}, a writer process appending "
             f"every {r['writer_pace_ms']:.0f} ms, a follower process)"]
    for run in r["runs"]:
        lines.append(
            f"  bus {run['bus']:<20} commit -> follower: p50 {run['latency_ms_p50']} ms, "
            f"p95 {run['latency_ms_p95']} ms, max {run['latency_ms_max']} ms ({run['events']} events)")
    lines.append(f"  one look at an outbox with nothing new: {r['empty_poll_us']} us (per follower per poll)")
    if "data_version_us" in r:
        lines.append(
            f"  one look at SQLite's data_version: {r['data_version_us']} us; the watcher looks every "
            f"{r['watcher_interval_ms']:.0f} ms = {r['watcher_core_share_pct']}% of a core per idle process")
    return "\n".join(lines)
