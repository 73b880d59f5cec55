"""Memory commands in the conversation: recognition (EN/DE), Anchor-only changes, the audit log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memlane import Memory
from memlane.rooms.commands import parse_command

ANCHOR = "@jan:matrix.org"
MARIA = "@maria:matrix.org"


@pytest.mark.parametrize(
    ("text", "action", "lang", "argument"),
    [
        ("forget this conversation", "forget_conversation", "en", None),
        ("Please forget this conversation.", "forget_conversation", "en", None),
        ("@bot: forget this conversation!", "forget_conversation", "en", None),
        ("Can you forget our chat please", "forget_conversation", "en", None),
        ("vergiss dieses Gespräch", "forget_conversation", "de", None),
        ("Bitte vergiss dieses Gespräch!", "forget_conversation", "de", None),
        ("Vergiss alles, was wir hier besprochen haben", "forget_conversation", "de", None),
        ("remember this", "remember", "en", None),
        ("Remember this important point: the launch is on May 3rd", "remember", "en", "the launch is on May 3rd"),
        ("remember that I hate meetings on Mondays", "remember", "en", "I hate meetings on Mondays"),
        ("merk dir das", "remember", "de", None),
        ("Merk dir: der Code ist 4711", "remember", "de", "der Code ist 4711"),
        ("merk dir, dass ich Tee mag", "remember", "de", "ich Tee mag"),
        ("mark this as important", "mark_important", "en", None),
        ("This is important!", "mark_important", "en", None),
        ("markiere das als wichtig", "mark_important", "de", None),
        ("what do you remember about quantum computing?", "recall", "en", "quantum computing"),
        ("What do you know about me?", "recall", "en", "me"),
        ("search the archive for budget", "recall", "en", "budget"),
        ("was weißt du über Kaffee?", "recall", "de", "Kaffee"),
        ("Woran erinnerst du dich zu Hamburg?", "recall", "de", "Hamburg"),
        ("forget about coffee", "forget_about", "en", "coffee"),
        ("vergiss, was ich über Kaffee gesagt habe", "forget_about", "de", "Kaffee"),
        ("archive this conversation", "archive", "en", None),
        ("archiviere dieses Gespräch", "archive", "de", None),
    ],
)
def test_commands_are_recognised(text: str, action: str, lang: str, argument: str | None) -> None:
    cmd = parse_command(text)
    assert cmd is not None
    assert (cmd.action, cmd.lang, cmd.argument, cmd.text) == (action, lang, argument, text)


@pytest.mark.parametrize(
    "text",
    [
        "I'll never forget this conversation",
        "remember that movie?",
        "I remember that",
        "What is quantum computing?",
        "I like to remember things",
        "remember",
        "We should archive old files",
        "Das Gespräch gestern war gut.",
        "",
    ],
)
def test_ordinary_chat_is_not_a_command(text: str) -> None:
    assert parse_command(text) is None


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    m = Memory(tmp_path / "cmd.db", embedder="hashing", anchor_id=ANCHOR, anchor_name="JanHein")
    yield m
    m.close()


def test_ordinary_messages_are_not_audited(mem: Memory) -> None:
    mem.add("room", "hello", author_id=MARIA)
    res = mem.handle_command("room", "hello there", MARIA)
    assert not res.recognized and res.action is None
    assert mem.parts.notes.store.list_audit() == []


def test_mark_important_pins_the_whole_exchange_and_writes_a_note(mem: Memory) -> None:
    mem.store_interaction("Our launch date is May 3rd.", "Got it, May 3rd.", session_id="room",
                          author_id=ANCHOR, author_name="JanHein")
    cmd = mem.add("room", "mark this as important", author_id=ANCHOR)
    res = mem.handle_command("room", cmd.content, ANCHOR, message_id=cmd.id)
    assert res.allowed and res.changed
    # "this" is the Anchor's own point, not the bot's acknowledgement of it.
    assert res.message == "Marked as important: Our launch date is May 3rd."
    pinned = [(m.role, m.importance) for m in mem.load_session("room") if m.pinned]
    assert pinned == [("user", 1.0), ("assistant", 1.0)]
    assert [n.text for n in res.notes] == ["JanHein: Our launch date is May 3rd."]
    assert res.notes[0].kind == "important" and res.notes[0].user_id == ANCHOR
    # Nothing to mark in an empty room: a clear message, no change.
    mem.create_session(session_id="empty")
    empty = mem.handle_command("empty", "merk dir das", ANCHOR)
    assert empty.allowed and not empty.changed and "keine frühere Nachricht" in empty.message
    assert mem.parts.notes.store.list_audit(session_id="empty")[0].result == "no_change"


def test_remember_with_a_statement_makes_a_structured_note_that_supersedes(mem: Memory) -> None:
    mem.add("room", "I love coffee.", author_id=ANCHOR)
    mem.flush()
    res = mem.handle_command("room", "remember that I don't like coffee any more", ANCHOR, author_name="JanHein")
    assert [n.text for n in res.notes] == ["JanHein does not like coffee."]
    assert res.notes[0].importance >= 0.9 and res.notes[0].origin == "command"
    assert [n.text for n in mem.notes()] == ["JanHein does not like coffee."]
    free = mem.handle_command("room", "Merk dir: der Türcode ist 4711", ANCHOR, author_name="JanHein")
    assert free.message == "Ich merke mir: der Türcode ist 4711"
    assert [n.text for n in free.notes] == ["JanHein asked me to remember: der Türcode ist 4711."]


def test_forget_about_deletes_matching_notes_for_the_anchor_only(mem: Memory) -> None:
    mem.add("room", "I love coffee. I work at CERN.", author_id=ANCHOR)
    mem.flush()
    refused = mem.handle_command("room", "forget about coffee", MARIA)
    assert not refused.allowed and len(mem.notes()) == 2
    done = mem.handle_command("room", "forget about coffee", ANCHOR)
    assert done.allowed and done.detail["notes"] == 1
    assert [n.text for n in mem.notes()] == ["JanHein works at CERN."]


def test_archive_command_and_a_room_that_speaks_again_comes_back(mem: Memory) -> None:
    mem.add("room", "hello", author_id=ANCHOR)
    assert not mem.handle_command("room", "archive this conversation", MARIA).allowed
    res = mem.handle_command("room", "archive this conversation", ANCHOR)
    assert res.changed and mem.get_session("room").status == "archived"
    # Archived conversations stay searchable by command.
    mem.ensure_session("cli")
    found = mem.handle_command("cli", "search the archive for hello", ANCHOR)
    assert [h.message.content for h in found.hits] == ["hello"]
    mem.add("room", "I'm back", author_id=MARIA)
    assert mem.get_session("room").status == "active"


def test_a_command_that_changes_nothing_is_audited_as_no_change(mem: Memory) -> None:
    mem.add("room", "hello", author_id=ANCHOR)
    mem.archive_session("room")
    res = mem.handle_command("room", "archive this conversation", ANCHOR)
    assert res.allowed and not res.changed
    entry = mem.parts.notes.store.list_audit()[0]
    assert (entry.action, entry.allowed, entry.result, entry.id) == ("archive", True, "no_change", res.audit_id)


def test_say_and_audit_commands(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"),
           "MEMLANE_EMBEDDER": "none", "MATRIX_USER_ID": ANCHOR}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "memlane.cli.main", "--store", str(db), *args],
                              capture_output=True, text=True, env=env, timeout=300)

    with Memory(db, embedder="none", anchor_id=ANCHOR) as mem:
        mem.add("!room:x", "I work at CERN.", author_id=ANCHOR)
    out = run("say", "forget this conversation", "--session", "!room:x", "--as", MARIA)
    assert out.returncode == 6 and "Nothing was changed" in out.stderr
    out = run("say", "what do you know about CERN?", "--session", "!room:x")
    assert out.returncode == 0 and "jan works at CERN." in out.stdout
    out = run("say", "hello")
    assert out.returncode == 2 and "not a memory command" in out.stderr
    out = run("audit", "--json")
    entries = json.loads(out.stdout)
    assert [(e["action"], e["actor_id"], e["result"]) for e in entries] == [
        ("recall", ANCHOR, "ok"), ("forget_conversation", MARIA, "refused"),
    ]
    out = run("notes", "list", "--json")
    assert [n["text"] for n in json.loads(out.stdout)] == ["jan works at CERN."]


def _file_bytes(path: Path) -> bytes:
    """The database file and its WAL, as they are on disk right now."""
    wal = path.with_name(path.name + "-wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def test_an_anchor_forget_leaves_no_trace_of_the_words_in_the_file(tmp_path: Path) -> None:
    db = tmp_path / "scrub.db"
    mem = Memory(db, embedder="hashing", anchor_id=ANCHOR, anchor_name="JanHein", promote_every=1)
    try:
        # Another room keeps its own words, so the index is not simply empty afterwards.
        mem.add("other", "I love hiking in the Alps.", author_id=ANCHOR)
        for i in range(12):  # several FTS segments, so tokens would survive until a merge
            mem.add("room", f"I work at Quorblix number {i}.", author_id=ANCHOR)
            mem.add("room", f"Noted, Quorblix {i}.", role="assistant")
        mem.flush()
        conn = mem.store.connection  # type: ignore[attr-defined]
        assert any("Quorblix" in n.text for n in mem.notes())
        assert b"quorblix" in _file_bytes(db).lower()

        res = mem.handle_command("room", "forget this conversation", ANCHOR)
        assert res.allowed and res.changed
        mem.flush()
        # The FTS5 shadow tables hold no segment with the word, and no byte of the files does.
        data = b"".join(bytes(r[0]) for t in ("messages_fts_data", "notes_fts_data")
                        for r in conn.execute(f"SELECT block FROM {t}") if r[0] is not None)
        assert b"quorblix" not in data.lower() and b"hike" in data  # porter-stemmed tokens
        assert b"quorblix" not in _file_bytes(db).lower()
        assert mem.search("hiking")  # the index still works for what is left
    finally:
        mem.close()


def test_forget_about_also_scrubs_the_note_index(mem: Memory, tmp_path: Path) -> None:
    mem.add("room", "hello", author_id=ANCHOR)
    mem.add_note("JanHein's locker code is Zentrofax.", user_id=ANCHOR, session_id="room")
    assert b"zentrofax" in _file_bytes(tmp_path / "cmd.db").lower()
    res = mem.handle_command("room", "forget about Zentrofax", ANCHOR)
    assert res.changed
    # The audit log keeps the command's words (who asked what); the note index keeps none.
    conn = mem.store.connection  # type: ignore[attr-defined]
    data = b"".join(bytes(r[0]) for r in conn.execute("SELECT block FROM notes_fts_data") if r[0] is not None)
    assert b"zentrofax" not in data.lower()
    assert conn.execute("SELECT COUNT(*) FROM notes WHERE text LIKE '%Zentrofax%'").fetchone()[0] == 0
