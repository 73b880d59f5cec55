"""The notes lane, memory commands and the archive tier on a real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from memlane import Memory
from memlane.models import utcnow
from memlane.notes.pg import PostgresNoteStore
from memlane.rooms import ensure_room
from tests.pg_fixture import fresh_pg_memory

pytestmark = pytest.mark.postgres

ANCHOR = "@jan:matrix.org"
MARIA = "@maria:matrix.org"


@pytest.fixture
def mem(pg_url: str) -> Iterator[Memory]:
    with fresh_pg_memory(pg_url, embedder="hashing", anchor_id=ANCHOR, anchor_name="JanHein", promote_every=2) as m:
        yield m


def test_notes_supersede_history_and_visibility_on_postgres(mem: Memory) -> None:
    assert isinstance(mem.parts.notes.store, PostgresNoteStore)
    ensure_room(mem, "!a:x", name="A")
    mem.add("!a:x", "I love coffee in the morning.", author_id=ANCHOR, author_name="JanHein")
    mem.add("!a:x", "I work at CERN.", author_id=MARIA, author_name="Maria")
    mem.add("cli", "Actually I don't like coffee anymore, I prefer tea now.", author_id=ANCHOR)
    mem.flush()
    provider = mem.parts.notes
    texts = [n.text for n in provider("cli", "coffee or tea?", 500)]
    assert "JanHein does not like coffee." in texts and "JanHein prefers tea." in texts
    assert "JanHein loves coffee in the morning." not in texts and "Maria works at CERN." not in texts
    assert "Maria works at CERN." in [n.text for n in provider("!a:x", "CERN", 500)]
    old = next(n for n in mem.notes(include_history=True) if n.text.startswith("JanHein loves coffee"))
    history = mem.note_history(old.id or 0)
    assert [(n.polarity, n.current) for n in history] == [(1, False), (-1, True)]
    assert history[0].valid_to == history[1].valid_from
    facets = mem.parts.notes.store.list_facets(session_id="!a:x")
    assert ("entity", "CERN") in {(f.kind, f.value) for f in facets}


def test_commands_forget_and_archive_on_postgres(mem: Memory) -> None:
    mem.add("!a:x", "I work at CERN.", author_id=MARIA, author_name="Maria")
    mem.add("!a:x", "We decided to meet on Friday.", author_id=ANCHOR)
    mem.add("cli", "I moved to Hamburg.", author_id=ANCHOR)
    mem.flush()
    refused = mem.handle_command("!a:x", "vergiss dieses Gespräch", MARIA)
    assert not refused.allowed and len(mem.notes()) == 3
    done = mem.handle_command("!a:x", "forget this conversation", ANCHOR)
    assert done.allowed and done.detail["messages"] == 2 and done.detail["notes"] == 2
    assert [n.text for n in mem.notes(include_history=True)] == ["JanHein moved to Hamburg."]
    assert mem.search("CERN Friday") == []
    assert mem.parts.notes.store.list_facets(session_id="!a:x") == []
    audit = mem.parts.notes.store.list_audit()
    assert [(e.actor_id, e.result, e.command) for e in audit] == [
        (ANCHOR, "ok", "forget this conversation"), (MARIA, "refused", "[forgotten]"),
    ]
    # archive tier + maintain
    when = utcnow() - timedelta(days=200)
    mem.add("old", "ancient words", created_at=when)
    mem.update_session("old", last_active_at=when)
    assert mem.maintain().archived == ["old"]
    assert mem.get_session("old").status == "archived"
    assert mem.unarchive_session("old") and mem.get_session("old").status == "active"
    stats = mem.stats()
    assert stats["notes"] == 1 and stats["audit_entries"] == 2
    remember = mem.handle_command("cli", "Merk dir: der Türcode ist 4711", ANCHOR)
    assert remember.notes and mem.notes("Türcode")[0].text.endswith("der Türcode ist 4711.")
