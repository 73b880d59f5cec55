"""memlane migrate: SQLite -> PostgreSQL, everything copied, verified, resumable."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from memlane import Memory
from memlane.migrate import migrate
from memlane.models import Message, Session, SessionFilter
from memlane.search.recall import vector_index_for
from memlane.store import SQLiteStore
from memlane.store.postgres import PostgresStore

pytestmark = pytest.mark.postgres


def _source(path: Path, sessions: int = 4) -> None:
    """A small but complete log: turns, tool calls, hidden history, derived state, vectors."""
    with Memory(path, embedder="hashing") as mem:
        for s in range(sessions):
            sid = mem.create_session(
                # the default tenant: its session ids are the keys (memlane.scoping)
                session_id=f"room-{s}", user_id=f"u{s % 2}", title=f"Room {s}",
                system_prompt="Be kind.", metadata={"lang": "de", "n": s},
            )
            mem.add(sid, f"we talked about kayaks and rivers in session {s}", author_name="Ana")
            mem.store_interaction(
                f"what did I say about kayaks {s}?", "you like the river trips",
                {"intent": "recall", "job_refs": ["j1"]}, session_id=sid,
            )
            call = {"id": f"call-{s}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            mem.save_message(sid, {"role": "assistant", "content": None, "tool_calls": [call]})
            mem.save_message(sid, {"role": "tool", "content": "42", "tool_call_id": f"call-{s}"})
            if s == 0:
                mem.clear_session(sid)  # hidden history travels too
                mem.add(sid, "after the clear")
            mem.store.put_derived(sid, "summary", {"text": f"summary {s}"})
        mem.flush()


def _other_parts(path: Path) -> str:
    """Rows in the other parts' tables (notes with a superseded version, facets, archive,
    audit, an API key); returns the key's plaintext."""
    store = SQLiteStore(path)
    try:
        first = min(m.id or 0 for m in store.iter_messages("room-1"))

        def run(conn: object) -> None:
            c = conn  # sqlite3.Connection
            c.execute(  # type: ignore[attr-defined]
                "INSERT INTO notes (id, lineage_id, tenant_id, user_id, session_id, kind, slot, value, "
                "text, entities, metadata, valid_from, valid_to, created_at, updated_at) VALUES "
                "(1, 1, 'acme', 'u1', 'room-1', 'fact', 'city', 'Porto', 'Ana lives in Porto', '[\"Ana\"]', "
                "'{\"k\": 1}', 1700000000.5, 1700000100.25, 1700000000.5, 1700000000.5), "
                "(2, 1, 'acme', 'u1', 'room-1', 'fact', 'city', 'Lisbon', 'Ana lives in Lisbon', '[]', '{}', "
                "1700000100.25, NULL, 1700000100.25, 1700000100.25)"
            )
            c.execute("UPDATE notes SET superseded_by = 2 WHERE id = 1")  # type: ignore[attr-defined]
            c.execute("UPDATE notes SET supersedes = 1 WHERE id = 2")  # type: ignore[attr-defined]
            c.execute(  # type: ignore[attr-defined]
                "INSERT INTO note_sources (note_id, message_id, session_id) VALUES (1, ?, 'room-1'), (2, ?, 'room-1')",
                (first, first),
            )
            c.execute(  # type: ignore[attr-defined]
                "INSERT OR IGNORE INTO message_facets (message_id, session_id, kind, value, at) "
                "VALUES (?, 'room-1', 'place', 'porto', 1700000000)", (first,)
            )
            c.execute(  # type: ignore[attr-defined]
                "INSERT INTO session_archive (session_id, archived_at, previous_status, reason) "
                "VALUES ('room-3', 1700000000, 'active', 'idle')"
            )
            c.execute(  # type: ignore[attr-defined]
                "INSERT INTO audit_log (at, tenant_id, session_id, actor_name, is_anchor, action, allowed, "
                "result, detail) VALUES (1700000000, 'acme', 'room-1', 'Ana', 1, 'forget', 1, 'ok', '{\"n\": 2}')"
            )

        store.write(run)
        _, plaintext = store.key_store().create_key("acme", "migrated key")
        return plaintext
    finally:
        store.close()


def _snapshot(store: SQLiteStore | PostgresStore, sid: str) -> dict[str, object]:
    session = store.get_session(sid)
    assert session is not None
    msgs = [m.to_dict() for m in store.iter_messages(sid)]
    turns = [t.to_dict() for t in store.list_turns(sid, limit=100)]
    return {
        "session": session.to_dict(),
        "messages": msgs,
        "turns": turns,
        "summary": store.get_derived(sid, "summary"),
        "tool": store.find_tool_call(sid, f"call-{sid.split('-')[1]}"),
    }


def test_everything_is_copied_with_ids_and_vectors(tmp_path: Path, fresh_pg_store: PostgresStore) -> None:
    path = tmp_path / "src.db"
    _source(path)
    plaintext = _other_parts(path)
    source = SQLiteStore(path)
    target = fresh_pg_store
    try:
        phases: set[str] = set()
        report = migrate(source, target, progress=lambda phase, _d, _t: phases.add(phase))
        assert report.ok, report.problems
        assert (report.copied, report.skipped) == (4, 0)
        assert {"sessions", "vectors", "verify"} <= phases
        assert report.counts["messages"] == (source.count_messages(), target.count_messages())
        for sid in (f"room-{s}" for s in range(4)):
            assert _snapshot(source, sid) == _snapshot(target, sid), sid
        # vectors came along as they were (ids kept), and search with them agrees
        src_index, dst_index = vector_index_for(source), vector_index_for(target)
        assert src_index is not None and dst_index is not None
        assert dst_index.count() == src_index.count() == report.vectors > 0
        assert dst_index.model_info() == src_index.model_info()
        probe = np.asarray(
            source.read("SELECT embedding FROM message_vectors ORDER BY message_id LIMIT 1")[0][0]
        )
        q = np.frombuffer(probe, dtype="<f4")
        assert [i for i, _ in dst_index.search(q, 3)] == [i for i, _ in src_index.search(q, 3)]
        # the other parts' tables came along, typed for PostgreSQL
        for table in ("notes", "note_sources", "message_facets", "session_archive", "audit_log", "api_keys"):
            assert report.tables.get(table, 0) > 0 and table not in report.not_copied, table
            a, b = report.counts[table]
            assert a == b > 0, table
        notes = target.read("SELECT id, superseded_by, supersedes, valid_to, entities, metadata FROM notes ORDER BY id")
        assert [(n[0], n[1], n[2]) for n in notes[:2]] == [(1, 2, None), (2, None, 1)]
        assert notes[0][3].timestamp() == 1700000100.25 and notes[0][4] == ["Ana"] and notes[0][5] == {"k": 1}
        assert target.read("SELECT is_anchor, detail FROM audit_log") == [(True, {"n": 2})]
        from memlane.server.auth import key_store_for

        assert key_store_for(target).verify(plaintext) is not None  # the same key works there
        nxt = target.write(lambda c: c.execute(
            "INSERT INTO notes (kind, text, valid_from, created_at, updated_at) "
            "VALUES ('fact', 'x', now(), now(), now()) RETURNING id").fetchone())
        assert nxt[0] > max(n[0] for n in notes)  # the id sequence moved past the copied notes
        again = migrate(source, target)  # rerun: nothing doubles
        assert again.ok and again.copied == 0 and all(v == 0 for v in again.tables.values())
    finally:
        source.close()
    # the copy is a working memlane: search, and new messages get ids after the copied ones
    highest = max(m.id or 0 for m in target.iter_messages())
    with Memory.from_url(target.url, embedder="hashing") as mem:
        assert mem.search("kayaks", session_id="room-2")
        new = mem.add("room-2", "a brand new message")
        assert (new.id or 0) > highest
        assert mem.get_session("room-2").message_count == 6


def test_interrupted_migration_resumes_without_duplicates(tmp_path: Path, fresh_pg_store: PostgresStore) -> None:
    path = tmp_path / "src.db"
    _source(path, sessions=6)
    source = SQLiteStore(path)
    try:
        def stop_after_three(phase: str, done: int, _total: int) -> None:
            if phase == "sessions" and done == 3:
                raise KeyboardInterrupt  # Ctrl-C between two sessions

        with pytest.raises(KeyboardInterrupt):
            migrate(source, fresh_pg_store, progress=stop_after_three)
        partial = fresh_pg_store.list_sessions(SessionFilter())
        assert len(partial) == 3
        for s in partial:  # only whole sessions, never half of one
            src = source.get_session(s.id)
            assert src is not None and s.message_count == src.message_count
            assert fresh_pg_store.count_messages(s.id) == src.message_count
        report = migrate(source, fresh_pg_store)
        assert report.ok, report.problems
        assert (report.skipped, report.copied) == (3, 3)
        assert fresh_pg_store.count_messages() == source.count_messages()
        again = migrate(source, fresh_pg_store)  # a third run has nothing left to do
        assert (again.skipped, again.copied, again.ok) == (6, 0, True)
    finally:
        source.close()


def test_a_different_session_in_the_target_is_reported_not_overwritten(
    tmp_path: Path, fresh_pg_store: PostgresStore
) -> None:
    path = tmp_path / "src.db"
    _source(path, sessions=2)
    fresh_pg_store.create_session(Session(id="room-1"))  # same id, other content
    source = SQLiteStore(path)
    try:
        report = migrate(source, fresh_pg_store, vectors=False)
    finally:
        source.close()
    assert not report.ok
    assert any("room-1" in p and "left untouched" in p for p in report.problems)
    assert fresh_pg_store.count_messages("room-1") == 0


def test_cli_migrate_survives_sigkill_and_resumes(tmp_path: Path, fresh_pg_store: PostgresStore) -> None:
    path = tmp_path / "big.db"
    source = SQLiteStore(path)
    for s in range(300):
        source.create_session(Session(id=f"s{s:03d}"))
        source.append(f"s{s:03d}", [Message(role="user", content=f"message {i} of {s}") for i in range(20)])
    source.close()
    cmd = [sys.executable, "-m", "memlane.cli.main", "migrate", "--from", f"sqlite:///{path}",
           "--to", fresh_pg_store.url, "--json"]
    env = {**os.environ, "MEMLANE_EMBEDDER": "none"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 60
    while fresh_pg_store.read("SELECT count(*) FROM sessions")[0][0] < 20:
        assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    copied = fresh_pg_store.read("SELECT count(*) FROM sessions")[0][0]
    assert 20 <= copied < 300, "the kill came too late to test anything"
    done = subprocess.run(cmd, capture_output=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    report = json.loads(done.stdout)
    assert report["ok"] and report["skipped"] == copied and report["skipped"] + report["copied"] == 300
    assert report["counts"]["messages"] == {"source": 6000, "target": 6000}
    assert fresh_pg_store.count_messages() == 6000
