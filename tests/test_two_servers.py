"""Load balancing: two `memlane serve` processes on one (embedded) PostgreSQL.

A client writes to A and reads from B at the same time, and one SSE subscriber on B
receives the events of writes made through both servers, each once and in order.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx
import pytest

from tests.server_support import serve_subprocess

pytestmark = pytest.mark.postgres


class SseReader(threading.Thread):
    """Follows GET /v1/events on one server and keeps every event's data, in order."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.events: list[dict[str, object]] = []
        self.connected = threading.Event()
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def run(self) -> None:
        try:
            with httpx.Client(timeout=httpx.Timeout(30, read=None)) as client, \
                    client.stream("GET", f"{self.url}/v1/events", params={"since": 0}) as reply:
                self.connected.set()
                for line in reply.iter_lines():
                    if line.startswith("data: "):
                        with self.lock:
                            self.events.append(json.loads(line[6:]))
                    if self.stop.is_set():
                        return
        except httpx.HTTPError:
            if not self.stop.is_set():
                raise  # the server went away before the test was done with it

    def appended(self, session: str) -> list[int]:
        with self.lock:
            return [int(e["subject_id"]) for e in self.events  # type: ignore[call-overload]
                    if e["kind"] == "message.appended" and e["session_id"] == session]


def _wait(check: object, what: str, timeout: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_write_to_a_read_from_b_and_one_subscriber_hears_both(pg_url: str, tmp_path: Path) -> None:
    args = ["serve", "--store", pg_url, "--port", "0", "--no-auth", "--no-mcp"]
    with serve_subprocess(args, tmp_path / "a") as (a, _), serve_subprocess(args, tmp_path / "b") as (b, _):
        sse = SseReader(b)
        sse.start()
        assert sse.connected.wait(30)
        n = 25
        mismatches: list[str] = []

        def client(write_to: str, read_from: str, session: str) -> None:
            with httpx.Client(timeout=30) as http:
                http.post(f"{write_to}/v1/sessions", json={"session_id": session}).raise_for_status()
                for i in range(n):
                    reply = http.post(f"{write_to}/v1/sessions/{session}/messages",
                                      json={"role": "user", "content": f"{session} line {i}"})
                    reply.raise_for_status()
                    mid = reply.json()["id"]
                    # acknowledged by one server = committed: the other serves it at once
                    seen = http.get(f"{read_from}/v1/sessions/{session}/messages").json()["messages"]
                    if mid not in [m["id"] for m in seen]:
                        mismatches.append(f"{session}: message {mid} acked by {write_to} not read from {read_from}")

        writers = [threading.Thread(target=client, args=(a, b, "via-a")),
                   threading.Thread(target=client, args=(b, a, "via-b"))]
        for t in writers:
            t.start()
        for t in writers:
            t.join(120)
        assert mismatches == []
        _wait(lambda: len(sse.appended("via-a")) == n and len(sse.appended("via-b")) == n,
              "both servers' events on B's stream")
        sse.stop.set()
        with sse.lock:
            ids = [int(e["id"]) for e in sse.events]  # type: ignore[call-overload]
        assert ids == sorted(ids) and len(ids) == len(set(ids)), "each event once, in commit order"
        for session in ("via-a", "via-b"):
            got = sse.appended(session)
            assert got == sorted(got) and len(set(got)) == n


def test_bench_serve_with_two_servers_reads_back_from_the_other(pg_url: str, tmp_path: Path) -> None:
    from tests.server_support import run_cli

    r = run_cli(["bench", "serve", "--servers", "2", "--store", pg_url, "--duration", "3", "--clients", "4",
                 "--search-every", "3", "--min-requests", "3", "--embedder", "hashing", "--json"], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert result["ok"] and result["servers"] == 2 and result["errors"] == 0
    assert result["verified"]["acknowledged"] == result["append"]["count"] > 0
    assert result["verified"]["missing"] == 0
