"""Change events: the outbox on SQLite and PostgreSQL, following across processes, SSE with resume."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from memlane import Memory
from memlane.server.auth import key_store_for
from memlane.store.events import ChangeEvent
from tests.server_support import auth, new_key, running_server

ENV_SRC = str(Path(__file__).resolve().parents[1] / "src")


def _kinds(events: list[ChangeEvent]) -> list[str]:
    return [e.kind for e in events]


def test_every_change_is_an_event_without_content(any_mem: Memory) -> None:
    mem = any_mem
    start = mem.store.last_event_id()  # type: ignore[attr-defined]
    sid = mem.create_session(session_id="ev1", user_id="ana", tenant_id="acme")
    mem.store_interaction("my secret tram route", "noted", session_id=sid)
    mem.update_session(sid, title="Trams")
    first = mem.add_note("Ana lives in Lisbon", user_id="ana", session_id=sid, slot="home", value="Lisbon")
    mem.add_note("Ana lives in Porto", user_id="ana", session_id=sid, slot="home", value="Porto")
    mem.archive_session(sid)
    ids = mem.store.message_ids(sid, include_hidden=True)
    mem.forget_messages(ids[:1])
    events = list(mem.events(since=start))
    kinds = _kinds(events)
    assert kinds[:3] == ["session.created", "message.appended", "message.appended"]
    for kind in ("session.updated", "note.added", "note.superseded", "session.archived", "message.forgotten"):
        assert kind in kinds, kind
    assert kinds.count("message.forgotten") == 1
    mem.delete_session(sid)
    # forget is final: the session's events go with it, but for the marker that tells
    # other instances (and the note events, without its id: notes may outlive it)
    events = list(mem.events(since=start))
    assert [e.kind for e in events if e.session_id == sid] == ["session.forgotten"]
    assert _kinds(events)[-1] == "session.forgotten"
    assert {e.kind for e in events} - {"session.forgotten"} <= {"note.added", "note.superseded", "note.removed"}
    assert all(e.tenant_id == "acme" for e in events)
    assert [e.id for e in events] == sorted(e.id for e in events)
    superseded = next(e for e in events if e.kind == "note.superseded")
    assert superseded.subject_id == first.id
    assert "secret" not in json.dumps([e.to_dict() for e in events])
    # resume: only what came after the given id; another tenant's filter sees nothing
    assert _kinds(list(mem.events(since=events[-2].id))) == ["session.forgotten"]
    assert list(mem.events(since=start, tenant_id="other")) == []
    assert list(mem.events(since=None)) == []  # "from now on": nothing new yet


_WRITER = """
import sys, time
from memlane import Memory
with Memory(sys.argv[1], embedder="none") as mem:
    sid = mem.create_session(session_id="w", user_id="bo")
    for i in range(int(sys.argv[2])):
        mem.add(sid, f"line {i}")
        time.sleep(0.01)
"""


def _writer(target: str, n: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _WRITER, target, str(n)], text=True,
        env={"PYTHONPATH": ENV_SRC, "PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
    )


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_another_process_sees_events_and_catches_up_after_a_disconnect(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    target = str(tmp_path / "m.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    with Memory(target, embedder="none") as mem:
        mem.delete_session("w")
        since = mem.store.last_event_id()  # type: ignore[attr-defined]
        writer = _writer(target, 40)
        stop = threading.Event()
        seen: list[ChangeEvent] = []
        for event in mem.events(since=since, wait=True, stop=stop):
            seen.append(event)
            if len(seen) == 11:  # disconnect: stop following part-way through
                break
        writer.wait(timeout=120)
        assert writer.returncode == 0
        rest = list(mem.events(since=seen[-1].id))  # reconnect from the last id seen
        every = seen + rest
        assert _kinds(every) == ["session.created"] + ["message.appended"] * 40
        assert [e.subject_id for e in every[1:]] == sorted(e.subject_id for e in every[1:])  # type: ignore[type-var]
        assert len({e.id for e in every}) == 41


def _sse(lines: list[str]) -> list[dict[str, str]]:
    frames, cur = [], {}
    for line in lines:
        if not line:
            if cur:
                frames.append(cur)
            cur = {}
        elif not line.startswith(":"):
            key, _, value = line.partition(": ")
            cur[key] = value
    return frames


def _read_frames(client: httpx.Client, url: str, n: int, headers: dict[str, str]) -> list[dict[str, str]]:
    lines: list[str] = []
    with client.stream("GET", url, headers=headers, timeout=30) as reply:
        assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/event-stream")
        for line in reply.iter_lines():
            lines.append(line)
            if len(_sse(lines)) >= n:
                break
    return _sse(lines)


def test_sse_stream_is_tenant_scoped_and_resumes_with_last_event_id(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder="none")
    try:
        key_a, key_b = new_key(mem, "acme"), new_key(mem, "beta")
        a = mem.create_session(session_id="a", tenant_id="acme")
        b = mem.create_session(session_id="b", tenant_id="beta")
        mem.add(a, "first")
        with running_server(mem, keys=key_store_for(mem.store), require_auth=True) as url, httpx.Client() as client:
            frames = _read_frames(client, f"{url}/v1/events?since=0", 2, auth(key_a))
            assert [f["event"] for f in frames] == ["session.created", "message.appended"]
            assert all(json.loads(f["data"])["tenant_id"] == "acme" for f in frames)
            done = threading.Event()

            def write_later() -> None:
                done.wait(0.3)
                mem.add(a, "second")
                mem.add(b, "other tenant")

            writer = threading.Thread(target=write_later)
            writer.start()
            resumed = _read_frames(client, f"{url}/v1/events", 1, {**auth(key_a), "Last-Event-ID": frames[-1]["id"]})
            assert [f["event"] for f in resumed] == ["message.appended"]
            assert int(resumed[0]["id"]) > int(frames[-1]["id"])
            writer.join()  # beta's message is written after acme's: wait for it, not for luck
            beta = client.get(f"{url}/v1/events?since=0&follow=false", headers=auth(key_b)).text
            assert [f["event"] for f in _sse(beta.splitlines())] == ["session.created", "message.appended"]
            bad = client.get(f"{url}/v1/events", headers={**auth(key_a), "Last-Event-ID": "x"})
            assert bad.status_code == 422 and "Last-Event-ID" in bad.text
            # Ids past the database's 64-bit integers name no event: refused, not a 500.
            huge = client.get(f"{url}/v1/events", headers={**auth(key_a), "Last-Event-ID": str(2**64)})
            assert huge.status_code == 422 and "Last-Event-ID" in huge.text
            huge = client.get(f"{url}/v1/events?since={2**64}&follow=false", headers=auth(key_a))
            assert huge.status_code == 422
    finally:
        mem.close()


def test_bench_events_measures_latency_and_polling(tmp_path: Path) -> None:
    from memlane.bench_events import format_table, run_events_bench

    result = run_events_bench(str(tmp_path / "b.db"), events=10, pace=0.0, polls=10)
    (run,) = result["runs"]
    assert run["events"] == 10 and run["bus"] == "sqlite-data-version" and result["backend"] == "sqlite"
    assert 0 <= run["latency_ms_p50"] <= run["latency_ms_p95"] <= run["latency_ms_max"]
    assert result["empty_poll_us"] > 0 and result["data_version_us"] > 0
    assert "p95" in format_table(result) and "data_version:" in format_table(result)
