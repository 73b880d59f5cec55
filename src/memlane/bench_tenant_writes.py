"""`memlane bench tenant-writes`: what the per-tenant data version costs concurrent writers
of one tenant on PostgreSQL (store/data_versions.py), side by side in one run.

Several writer processes (instances) share one embedded PostgreSQL (fsync on) and one
tenant; in each, some threads append messages to their own sessions and others rewrite
derived rows (what summaries and the tracker write in the background). The same load
runs, round after round in turn, against three databases on that server: the data
version as this memlane keeps it (counter rows per tenant that no two writers share,
migration 24), as migration 21 kept it (one row per tenant), and without the triggers
(what the hot cache's keys cost at all). While it runs, the backends waiting for a lock
are sampled from ``pg_locks``; ``pg_stat_database`` counts the deadlocks.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

#: One writer process: ``url threads_append threads_derived seconds``; prints its timings.
_WORKER = """
import json, sys, threading, time
from memlane.models import Message, Session
from memlane.store.postgres import PostgresStore
url, appenders, deriveds, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
store = PostgresStore(url)
out = {"append": [], "derived": [], "errors": []}
def work(kind, n):
    while True:  # a new session takes the event lock: under one-row versions it can deadlock
        try:
            sid = store.create_session(Session(id=f"{kind}-{n}-{time.time_ns()}", tenant_id="bench")).id
            break
        except Exception as exc:
            out["errors"].append(type(exc).__name__)
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        started = time.perf_counter()
        try:
            if kind == "append":
                store.append(sid, [Message(role="user", content=f"line {i}")])
            else:
                store.put_derived(sid, "summary", {"text": f"summary {i}"})
        except Exception as exc:  # a write that failed after the store's retries (deadlocks)
            out["errors"].append(type(exc).__name__)
            continue
        out[kind].append((time.perf_counter() - started) * 1000)
        i += 1
threads = [threading.Thread(target=work, args=(k, n)) for k, count in (("append", appenders), ("derived", deriveds))
           for n in range(count)]
for t in threads: t.start()
for t in threads: t.join()
store.close()
print(json.dumps(out))
"""

#: The variants, each in its own database: what runs on a migrated store to make it.
VARIANTS = ("shards", "one_row", "no_trigger")


def _sample_waits(admin_url: str, stop: threading.Event, into: dict[str, list[int]]) -> None:
    import psycopg

    from memlane.store.pg_contention import lock_waits

    with psycopg.connect(admin_url, autocommit=True) as conn:
        while not stop.is_set():
            waits, queries = lock_waits(conn)
            into.setdefault("all", []).append(sum(waits.values()))
            into.setdefault("transactionid", []).append(waits.get("transactionid", 0))
            into.setdefault("advisory", []).append(waits.get("advisory", 0))
            for query in queries:
                into.setdefault("query:" + query, []).append(1)
            time.sleep(0.05)


def _deadlocks(admin_url: str, database: str) -> int:
    import psycopg

    from memlane.store.pg_contention import deadlocks

    with psycopg.connect(admin_url, autocommit=True) as conn:
        return deadlocks(conn, database)


def _round(url: str, admin_url: str, processes: int, appenders: int, deriveds: int,
           seconds: float) -> tuple[dict[str, list[Any]], dict[str, list[int]]]:
    waits: dict[str, list[int]] = {}
    stop = threading.Event()
    sampler = threading.Thread(target=_sample_waits, args=(admin_url, stop, waits))
    sampler.start()
    try:
        procs = [subprocess.Popen(
            [sys.executable, "-c", _WORKER, url, str(appenders), str(deriveds), str(seconds)],
            stdout=subprocess.PIPE, text=True) for _ in range(processes)]
        outs = [p.communicate()[0] for p in procs]
    finally:
        stop.set()
        sampler.join()
    if any(p.returncode for p in procs):
        raise RuntimeError("a writer process failed (its error is above)")
    timings: dict[str, list[Any]] = {"append": [], "derived": [], "errors": []}
    for out in outs:
        for kind, values in json.loads(out).items():
            timings[kind].extend(values)
    return timings, waits


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


@contextlib.contextmanager
def _server() -> Iterator[Any]:
    from memlane.store.pg_embedded import EmbeddedPostgres

    with EmbeddedPostgres(fsync=True) as server:
        yield server


def run_tenant_writes_bench(
    *, processes: int = 3, appenders: int = 2, deriveds: int = 2, seconds: float = 8.0, rounds: int = 2,
) -> dict[str, Any]:
    import os

    from memlane.store.pg_contention import prepare_database

    with _server() as server:
        admin_url = server.url_for("postgres")
        urls = {v: server.create_database(f"bench_{v}") for v in VARIANTS}
        for variant, url in urls.items():
            prepare_database(url, variant)
        before = {v: _deadlocks(admin_url, f"bench_{v}") for v in VARIANTS}
        totals: dict[str, dict[str, Any]] = {
            v: {"append": [], "derived": [], "errors": [], "waits": {}, "seconds": 0.0} for v in VARIANTS}
        for _ in range(rounds):
            for variant in VARIANTS:  # in turn, so a burst of load elsewhere hits all alike
                timings, waits = _round(urls[variant], admin_url, processes, appenders, deriveds, seconds)
                acc = totals[variant]
                acc["append"].extend(timings["append"])
                acc["derived"].extend(timings["derived"])
                acc["errors"].extend(timings["errors"])
                acc["seconds"] += seconds
                for kind, samples in waits.items():
                    acc["waits"].setdefault(kind, []).extend(samples)
        runs = {}
        for variant, acc in totals.items():
            runs[variant] = {
                "appends_per_s": round(len(acc["append"]) / acc["seconds"], 1),
                "derived_per_s": round(len(acc["derived"]) / acc["seconds"], 1),
                "append_ms_p50": round(_pct(acc["append"], 0.5), 2),
                "append_ms_p95": round(_pct(acc["append"], 0.95), 2),
                "derived_ms_p50": round(_pct(acc["derived"], 0.5), 2),
                "derived_ms_p95": round(_pct(acc["derived"], 0.95), 2),
                "lock_waiters_mean": {k: round(statistics.fmean(v), 2) for k, v in acc["waits"].items()
                                      if v and not k.startswith("query:")},
                # what the waiting backends were running (times seen), the most seen first
                "waiting_statements": dict(sorted(
                    ((k[len("query:"):], len(v)) for k, v in acc["waits"].items() if k.startswith("query:")),
                    key=lambda kv: -kv[1])[:5]),
                "deadlocks": _deadlocks(admin_url, f"bench_{variant}") - before[variant],
                "failed_writes": len(acc["errors"]),
            }
        return {
            "processes": processes, "append_threads": appenders, "derived_threads": deriveds,
            "seconds_per_variant": seconds * rounds, "load_average": round(os.getloadavg()[0], 1), "runs": runs,
        }


def format_table(r: dict[str, Any]) -> str:
    lines = [
        f"one tenant, {r['processes']} writer processes x ({r['append_threads']} appending + "
        f"{r['derived_threads']} derived-writing threads), {r['seconds_per_variant']:.0f} s per variant, "
        f"embedded PostgreSQL (fsync on); load average {r['load_average']}",
        f"  {'data version':<12} {'appends/s':>10} {'p50/p95 ms':>14} {'derived/s':>10} {'p50/p95 ms':>14}"
        f"  {'waiting on rows / events':>24} {'deadlocks':>9} {'failed':>6}",
    ]
    for variant, run in r["runs"].items():
        waits = run["lock_waiters_mean"]
        lines.append(
            f"  {variant:<12} {run['appends_per_s']:>10} "
            f"{run['append_ms_p50']:>6}/{run['append_ms_p95']:<7} {run['derived_per_s']:>10} "
            f"{run['derived_ms_p50']:>6}/{run['derived_ms_p95']:<7}"
            f"  {waits.get('transactionid', 0):>11} / {waits.get('advisory', 0):<10} {run['deadlocks']:>9}"
            f" {run['failed_writes']:>6}")
    lines.append("  (waiting: mean backends waiting for a row lock / the change-event lock, sampled every 50 ms;"
                 " failed: writes that failed after the store's retries)")
    return "\n".join(lines)
