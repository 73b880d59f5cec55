"""`memlane bench serve`: N concurrent clients appending and searching against a real server.

Without ``--url`` a fresh ``memlane serve`` runs in a subprocess on a temporary
SQLite file (the default durability: every acknowledged append is fsynced), so
server and clients do not share one interpreter lock. At the end every
message the server acknowledged is read back and compared: the run fails if
one is missing or different.
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from memlane.processes import stop_process

_SENTENCES = (
    "I'm planning a trip to Lisbon in May and I'm vegetarian.",
    "Can you remind me to book the train to Sintra on Friday?",
    "My sister Lena moved to Graz last year and works as a nurse.",
    "The deployment failed again because the disk on db-2 is full.",
    "Let's use PostgreSQL for the new service and keep SQLite for tests.",
    "Ich brauche einen neuen Benutzer für den Backup-Dienst.",
    "What was the name of the bakery near the river we liked?",
    "Please summarise yesterday's meeting about the Q3 roadmap.",
)
_QUERIES = ("vegetarian Lisbon", "Sintra train", "sister Graz", "disk full", "PostgreSQL", "Benutzer Backup")


@dataclass
class _ClientResult:
    session_id: str
    acked: dict[int, str] = field(default_factory=dict)
    append_latencies: list[float] = field(default_factory=list)
    search_latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def _latency(values: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    return {
        "count": len(ms),
        "p50_ms": round(_percentile(ms, 50), 2),
        "p95_ms": round(_percentile(ms, 95), 2),
        "p99_ms": round(_percentile(ms, 99), 2),
        "mean_ms": round(statistics.fmean(ms), 2) if ms else 0.0,
    }


def _client(url: str, headers: dict[str, str], deadline: float, search_every: int, seed: int,
            result: _ClientResult, min_requests: int = 0) -> None:
    rng = random.Random(seed)
    with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
        n = 0
        # min_requests: a short run on a busy machine still does the work it is asked to check
        while time.monotonic() < deadline or n < min_requests:
            n += 1
            try:
                if search_every and n % search_every == 0:
                    started = time.perf_counter()
                    r = http.post("/v1/search", json={"query": rng.choice(_QUERIES), "top_k": 5})
                    if r.status_code != 200:
                        result.errors.append(f"search {r.status_code}: {r.text[:200]}")
                        continue
                    result.search_latencies.append(time.perf_counter() - started)
                else:
                    content = f"{rng.choice(_SENTENCES)} (#{n})"
                    role = "user" if n % 2 else "assistant"
                    started = time.perf_counter()
                    r = http.post(f"/v1/sessions/{result.session_id}/messages", json={"role": role, "content": content})
                    if r.status_code != 201:
                        result.errors.append(f"append {r.status_code}: {r.text[:200]}")
                        continue
                    result.append_latencies.append(time.perf_counter() - started)
                    result.acked[int(r.json()["id"])] = content
            except httpx.HTTPError as exc:
                result.errors.append(f"{type(exc).__name__}: {exc}")


@contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """Turn SIGTERM into SystemExit while the bench's server runs.

    Python's default SIGTERM action ends the process without running ``finally`` blocks,
    which left the `memlane serve` subprocess running after `kill <bench pid>` or a CI
    timeout. As SystemExit the stack unwinds and _local_servers stops its servers.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return

    def unwind(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, unwind)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _serve(store: str, embedder: str | None) -> Iterator[str]:
    """A `memlane serve` subprocess on ``store``; yields its URL once it listens."""
    env = dict(os.environ)
    if embedder:
        env["MEMLANE_EMBEDDER"] = embedder
    cmd = [sys.executable, "-m", "memlane.cli.main", "--store", store, "serve", "--port", "0", "--no-mcp"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        url = ""
        assert proc.stdout is not None
        for line in proc.stdout:
            if "inspector" in line and "http://" in line:
                url = line.split()[-1].rstrip("/")
            if line.startswith("Press Ctrl-C"):
                break
        if not url:
            raise RuntimeError(f"the bench server did not start (exit {proc.poll()})")
        threading.Thread(target=lambda: [None for _ in proc.stdout or ()], daemon=True).start()
        yield url
    finally:
        stop_process(proc, grace=15.0)


@contextmanager
def _local_servers(embedder: str | None, servers: int, store: str | None,
                   postgres: bool = False) -> Iterator[tuple[list[str], str]]:
    """``servers`` `memlane serve` subprocesses on one fresh database: a SQLite file for one,
    an embedded PostgreSQL for more or with ``postgres`` (unless ``store`` names one);
    yields (URLs, what runs)."""
    with _sigterm_unwinds(), ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="memlane-bench-"))
        if store is None and (servers > 1 or postgres):
            from memlane.store.pg_embedded import EmbeddedPostgres

            pg = stack.enter_context(EmbeddedPostgres(fsync=True))
            store = pg.create_database("bench_serve")
            what = (f"{servers} memlane serve processes" if servers > 1 else "memlane serve") + \
                " (subprocess, embedded PostgreSQL, fsync on)"
        elif store is None:
            store = str(Path(tmp) / "bench.db")
            what = "memlane serve (subprocess, fresh SQLite, durability full)"
        else:
            what = f"{servers} memlane serve process(es) on {store.split('@')[-1]}"
        urls = [stack.enter_context(_serve(store, embedder)) for _ in range(servers)]
        yield urls, what


def _verify(urls: list[str], headers: dict[str, str], results: list[_ClientResult]) -> dict[str, int]:
    """Read every acknowledged message back, client i's from the server after the one it wrote to."""
    acked = missing = different = 0
    clients = [httpx.Client(base_url=u, headers=headers, timeout=120) for u in urls]
    try:
        for i, res in enumerate(results):
            http = clients[(i + 1) % len(clients)]
            r = http.get(f"/v1/sessions/{res.session_id}/messages", params={"include_hidden": "true"})
            if r.status_code == 404 and not res.acked:
                continue
            r.raise_for_status()
            stored = {int(m["id"]): m["content"] for m in r.json()["messages"]}
            for mid, content in res.acked.items():
                acked += 1
                if mid not in stored:
                    missing += 1
                elif stored[mid] != content:
                    different += 1
    finally:
        for http in clients:
            http.close()
    return {"acknowledged": acked, "missing": missing, "different": different}


def run_serve_bench(
    *,
    url: str | None = None,
    api_key: str | None = None,
    clients: int = 8,
    duration: float = 60.0,
    search_every: int = 5,
    min_requests: int = 0,
    embedder: str | None = None,
    servers: int = 1,
    store: str | None = None,
    postgres: bool = False,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """``servers`` > 1 starts that many servers on one database (an embedded PostgreSQL
    unless ``store`` names one); client i appends to server i mod n, and every message is
    read back from another server than the one that acknowledged it."""
    say = progress or (lambda _msg: None)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def run(bases: list[str], what: str) -> dict[str, Any]:
        results = [_ClientResult(session_id=f"bench-{i}-{uuid.uuid4().hex[:8]}") for i in range(clients)]
        say(f"{clients} clients for {duration:g}s against {', '.join(bases)}")
        deadline = time.monotonic() + duration
        started = time.perf_counter()
        threads = [
            threading.Thread(target=_client, args=(bases[i % len(bases)], headers, deadline, search_every, i, res, min_requests),
                             daemon=True)
            for i, res in enumerate(results)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started
        say("verifying every acknowledged message")
        verified = _verify(bases, headers, results)
        appends = [v for r in results for v in r.append_latencies]
        searches = [v for r in results for v in r.search_latencies]
        errors = [e for r in results for e in r.errors]
        return {
            "server": what,
            "servers": len(bases),
            "clients": clients,
            "duration_s": round(elapsed, 2),
            "requests": len(appends) + len(searches),
            "throughput_rps": round((len(appends) + len(searches)) / elapsed, 1),
            "appends_per_s": round(len(appends) / elapsed, 1),
            "append": _latency(appends),
            "search": _latency(searches),
            "errors": len(errors),
            "error_samples": errors[:5],
            "verified": verified,
            "ok": not errors and verified["missing"] == 0 and verified["different"] == 0,
        }

    if url:
        return run([url.rstrip("/")], url)
    say(f"starting {servers} memlane serve process(es) on a temporary database")
    with _local_servers(embedder, servers, store, postgres) as (bases, what):
        return run(bases, what)


def format_report(result: dict[str, Any]) -> str:
    """The figures of :func:`run_serve_bench` as plain text (``--json`` gives the dict)."""

    def latency(fig: dict[str, float]) -> str:
        if not fig["count"]:
            return "none"
        return (f"{fig['count']:,} requests, p50 {fig['p50_ms']} ms, p95 {fig['p95_ms']} ms, "
                f"p99 {fig['p99_ms']} ms")

    verified = result["verified"]
    lines = [
        f"server       {result['server']}",
        f"load         {result['clients']} clients for {result['duration_s']} s",
        f"throughput   {result['throughput_rps']} requests/s ({result['appends_per_s']} appends/s)",
        f"append       {latency(result['append'])}",
        f"search       {latency(result['search'])}",
        f"errors       {result['errors']}" + "".join(f"\n  {e}" for e in result["error_samples"]),
        f"stored       {verified['acknowledged']:,} acknowledged messages read back"
        + (" (each from another server than the one that took it)" if result.get("servers", 1) > 1 else "")
        + ": "
        f"{verified['missing']} missing, {verified['different']} different",
        "result       " + ("ok" if result["ok"] else "FAILED"),
    ]
    return "\n".join(lines)
