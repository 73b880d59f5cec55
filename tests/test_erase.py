"""Forget is final: every deletion path leaves 0 bytes of the forgotten words in the store's files.

Each test writes a unique token into a conversation (several turns, so the full-text index
has several segments; a statement the notes lane learns from; background vectors,
summaries, state and checkpoints), erases it through one path, closes the store, and
counts the token in every file of the store's directory (database, WAL, checkpoints,
lock and erasure-log files).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from memlane import Memory
from memlane.errors import StorageError
from memlane.rooms.backup import backup_database, restore_database
from memlane.store import sqlite_driver
from tests.server_support import MEMLANE, cli_env, client_for

ANCHOR = "@jan:matrix.org"


def traces(directory: Path, token: str) -> dict[str, int]:
    """How often ``token`` occurs in each file under ``directory`` (case-insensitive)."""
    needle = token.lower().encode()
    found: dict[str, int] = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            n = path.read_bytes().lower().count(needle)
            if n:
                found[str(path.relative_to(directory))] = n
    return found


def open_mem(db: Path, **overrides: Any) -> Memory:
    return Memory(db, embedder="hashing", anchor_id=ANCHOR, anchor_name="JanHein", promote_every=1,
                  **overrides)


def seed(db: Path, token: str, session: str = "room", **overrides: Any) -> dict[str, Any]:
    """A conversation full of ``token`` beside one that must survive; returns ids."""
    with open_mem(db, **overrides) as mem:
        mem.add("other", "I love hiking in the Alps.", author_id=ANCHOR)
        first = mem.add(session, f"I work at {token} in Vienna.", author_id=ANCHOR)
        ids = [first.id or 0]
        for i in range(12):
            ids.append(mem.add(session, f"The code word {i} is {token}.", author_id=ANCHOR).id or 0)
            ids.append(mem.add(session, f"Noted: {token} number {i}.", role="assistant").id or 0)
        mem.flush(60)
        notes = [n.id for n in mem.notes() if token in n.text.lower()]
    assert traces(db.parent, token), "the token should be on disk before the erase"
    return {"message_ids": ids, "note_ids": notes}


def run_cli(db: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memlane.cli.main", "--store", str(db), *args],
                          capture_output=True, text=True, env=cli_env(home), timeout=300)


@pytest.fixture
def token() -> str:
    return "zq" + uuid.uuid4().hex[:12]


def _library_paths() -> dict[str, Callable[[Memory, dict[str, Any]], object]]:
    return {
        "delete_session": lambda mem, ids: mem.delete_session("room"),
        "forget_messages": lambda mem, ids: mem.forget_messages(ids["message_ids"]),
        "prune": lambda mem, ids: mem.prune_old_sessions(days=0),
        "anchor_forget": lambda mem, ids: mem.handle_command("room", "forget this conversation", ANCHOR),
        "import_replace": lambda mem, ids: mem.import_sessions(
            _renamed_export(mem, "other", "room"), on_conflict="replace"),
        "erase": lambda mem, ids: mem.erase(session_ids=["room"]),
    }


def _renamed_export(mem: Memory, session_id: str, new_id: str) -> str:
    doc = json.loads(mem.export_session(session_id))
    doc["session"]["id"] = new_id
    return json.dumps(doc)


@pytest.mark.parametrize("path", sorted(_library_paths()))
def test_every_library_deletion_path_leaves_no_byte(tmp_path: Path, token: str, path: str) -> None:
    db = tmp_path / "store" / "mem.db"
    ids = seed(db, token)
    with open_mem(db) as mem:
        _library_paths()[path](mem, ids)
        if path != "prune":  # days=0 prunes every conversation
            assert mem.search("hiking"), "what was not erased must still be found"
    assert traces(db.parent, token) == {}


def test_forgetting_a_note_leaves_no_byte(tmp_path: Path, token: str) -> None:
    db = tmp_path / "store" / "mem.db"
    with open_mem(db) as mem:
        note = mem.add_note(f"JanHein's locker code is {token}.", user_id=ANCHOR)
        mem.add_note("JanHein likes the Alps.", user_id=ANCHOR)
    assert traces(db.parent, token)
    with open_mem(db) as mem:
        assert mem.parts.notes.forget_note(note.id or 0) == 1
        assert [n.text for n in mem.notes()] == ["JanHein likes the Alps."]
    assert traces(db.parent, token) == {}


def test_maintain_trims_and_prunes_without_leaving_bytes(tmp_path: Path, token: str) -> None:
    db = tmp_path / "store" / "mem.db"
    seed(db, token)
    with open_mem(db, max_turns_per_session=1) as mem:
        report = mem.maintain()
        assert report.trimmed_messages["room"] > 0
        kept = [m.content for m in mem.load_session("room")]
    # Retention keeps the notes learned from the trimmed turns (that is what promotion is
    # for); every other copy of the words is gone, and so is the trimmed text.
    left = traces(db.parent, token)
    assert sum(token in c for c in kept) == 2  # the newest exchange stays
    with open_mem(db) as mem:
        mem.add("other", "The newest conversation now.")
    with open_mem(db, max_sessions=1) as mem:
        assert mem.maintain().pruned_over_limit == ["room"]
        notes = [n.text for n in mem.notes() if token in n.text.lower()]
    assert left and notes
    # what remains on disk after pruning: exactly the notes retention keeps
    assert set(traces(db.parent, token)) <= {"mem.db", "mem.db-wal"}


def test_rest_deletes_leave_no_byte(tmp_path: Path, token: str) -> None:
    db = tmp_path / "store" / "mem.db"
    ids = seed(db, token)
    with open_mem(db) as mem, client_for(mem) as client:
        for mid in ids["message_ids"][:5]:
            assert client.delete(f"/v1/messages/{mid}").status_code == 200
        assert client.delete("/v1/sessions/room").status_code == 200
    assert traces(db.parent, token) == {}


def test_cli_delete_and_notes_forget_leave_no_byte(tmp_path: Path, token: str) -> None:
    db = tmp_path / "store" / "mem.db"
    seed(db, token)
    with open_mem(db) as mem:
        note = mem.add_note(f"The safe holds {token}.", user_id=ANCHOR, session_id="other")
    done = run_cli(db, tmp_path, "notes", "forget", str(note.id), "--yes")
    assert done.returncode == 0, done.stderr
    done = run_cli(db, tmp_path, "delete", "room", "--yes")
    assert done.returncode == 0, done.stderr
    assert traces(db.parent, token) == {}


def test_mcp_forget_session_leaves_no_byte(tmp_path: Path, token: str) -> None:
    db = tmp_path / "store" / "mem.db"
    seed(db, token)
    params = StdioServerParameters(command=MEMLANE, args=["--store", str(db), "mcp"], env=cli_env(tmp_path))

    async def main() -> Any:
        async with Client(params) as client:
            return await client.call_tool("forget_session", {"session_id": "room"})

    assert not anyio.run(main).is_error
    assert traces(db.parent, token) == {}


def test_restore_replays_the_erasure_log(tmp_path: Path, token: str) -> None:
    db = tmp_path / "store" / "mem.db"
    seed(db, token)
    backup = tmp_path / "backups" / "before.db"
    backup_database(db, backup)
    with open_mem(db) as mem:
        mem.delete_session("room")
        mem.add("other", "A message written after the erase.")
    log = (db.parent / "mem.db-erasures").read_text()
    assert "room" in log and token not in log  # ids and times, no content
    report = restore_database(backup, db)
    assert report.erasures_replayed == 1
    with open_mem(db) as mem:
        assert mem.store.get_session("room") is None  # the forgotten session stays forgotten
        assert mem.store.get_session("other") is not None
    assert traces(db.parent, token) == {}
    assert traces(backup.parent, token)  # the backup itself is the operator's to destroy


def test_replay_leaves_ids_handed_out_again_alone(tmp_path: Path) -> None:
    """A restored older backup hands out message ids again; a later replay keeps them."""
    db = tmp_path / "mem.db"
    with open_mem(db) as mem:
        mem.add("s", "first")
        backup_database(db, tmp_path / "b1.db")
        second = mem.add("s", "second, forgotten")
        mem.forget_messages([second.id or 0])
    restore_database(tmp_path / "b1.db", db)
    with open_mem(db) as mem:
        again = mem.add("s", "a new message that reuses the id")
        assert again.id == second.id
        backup_database(db, tmp_path / "b2.db")
    restore_database(tmp_path / "b2.db", db)
    with open_mem(db) as mem:
        assert [m.content for m in mem.load_session("s")] == ["first", "a new message that reuses the id"]


def test_deleted_records_leave_no_byte(tmp_path: Path, token: str) -> None:
    """The record area (LangGraph checkpoints, stores) is deleted with zeroed pages and a truncated WAL."""
    db = tmp_path / "store" / "mem.db"
    with Memory(db, embedder="none") as mem:
        store: Any = mem.store
        store.put_records("thread:t1", [(f"c{i}", f"state {token} {i}".encode() * 50) for i in range(40)])
        store.put_records("thread:t2", [("c0", b"kept")])
        assert traces(db.parent, token)
        assert store.delete_records("thread:t1") == 40
        assert traces(db.parent, token) == {}  # store still open: the WAL was truncated
        assert store.list_records("thread:t2") == [("c0", b"kept")]
    assert traces(db.parent, token) == {}


def test_erase_takes_full_text_entries_out_in_place(tmp_path: Path, token: str) -> None:
    """On SQLite 3.44+ the full-text index deletes entries in place (no rewrite of the whole
    index per erase): the index stays consistent, the rest stays searchable, 0 bytes left."""
    db = tmp_path / "store" / "mem.db"
    seed(db, token)
    with open_mem(db) as mem:
        mem.delete_session("room")
        conn: Any = mem.store.connection  # type: ignore[attr-defined]
        in_place = sqlite_driver.fts_secure_delete(conn)
        for table in ("messages_fts", "notes_fts"):
            conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
            mode = conn.execute(f"SELECT v FROM {table}_config WHERE k = 'secure-delete'").fetchall()
            assert mode == ([(1,)] if in_place else [])
        assert [h.message.session_id for h in mem.search("hiking")] == ["other"]
        assert mem.store.stats()["fts_secure_delete"] is sqlite_driver.fts_secure_delete()
    assert traces(db.parent, token) == {}


@pytest.mark.skipif(sqlite3.sqlite_version_info >= (3, 44, 0), reason="Python's own SQLite reads it")
def test_an_older_sqlite_is_told_clearly_what_the_store_needs(tmp_path: Path, token: str) -> None:
    db = tmp_path / "store" / "mem.db"
    seed(db, token)
    with open_mem(db) as mem:
        if not mem.store.stats()["fts_secure_delete"]:
            pytest.skip("this SQLite rewrites the index instead")
        mem.delete_session("room")
    old = sqlite3.connect(db)
    try:
        with pytest.raises(StorageError, match=r"SQLite 3\.44 or newer.*pysqlite3-binary"):
            sqlite_driver.check_fts_format(old, str(db))  # type: ignore[arg-type]
    finally:
        old.close()


def test_bench_erase_reports_both_store_sizes(tmp_path: Path) -> None:
    done = subprocess.run([MEMLANE, "bench", "erase", "--messages", "2000", "--erases", "2", "--json"],
                          capture_output=True, text=True, env=cli_env(tmp_path), timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["messages_small"], result["messages_large"], result["erases"]) == (200, 2000, 2)
    assert result["small"]["p50_ms"] > 0 and result["large"]["p50_ms"] > 0
    assert result["fts_secure_delete"] is sqlite_driver.fts_secure_delete()
