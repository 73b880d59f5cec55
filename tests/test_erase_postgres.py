"""The one erase routine on a real PostgreSQL: rows and derived rows gone in one transaction."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from memlane import Memory
from tests.pg_fixture import fresh_pg_memory

pytestmark = pytest.mark.postgres

ANCHOR = "@jan:matrix.org"
# every table that can hold words of a conversation, and the column to look in
_TEXT = {"messages": "content", "notes": "text", "derived": "value::text", "turns": "resolved_query",
         "message_facets": "value", "audit_log": "coalesce(command, '') || detail::text"}


@pytest.fixture
def mem(pg_url: str) -> Iterator[Memory]:
    with fresh_pg_memory(pg_url, embedder="hashing", anchor_id=ANCHOR, anchor_name="JanHein", promote_every=1) as m:
        yield m


def _rows_with(mem: Memory, token: str) -> dict[str, int]:
    read = mem.store.read  # type: ignore[attr-defined]
    found = {t: int(read(f"SELECT COUNT(*) FROM {t} WHERE {c} ILIKE %s", (f"%{token}%",))[0][0])
             for t, c in _TEXT.items()}
    return {t: n for t, n in found.items() if n}


def test_erase_on_postgres_removes_rows_derived_rows_and_notes(mem: Memory) -> None:
    token = "zq" + uuid.uuid4().hex[:12]
    mem.add("other", "I love hiking in the Alps.", author_id=ANCHOR)
    first = mem.add("room", f"I work at {token}.", author_id=ANCHOR)
    for i in range(4):
        mem.add("room", f"The code word {i} is {token}.", author_id=ANCHOR)
    mem.handle_command("room", f"remember that the door code is {token}", ANCHOR)
    mem.flush(60)
    assert set(_rows_with(mem, token)) >= {"messages", "notes", "audit_log"}

    # a single message: its notes go, and the session's derived rows (they may quote it)
    mem.forget_messages([first.id or 0])
    assert not any(token in n.text.lower() and "work" in n.text.lower() for n in mem.notes())
    assert "derived" not in _rows_with(mem, token)

    report = mem.handle_command("room", "forget this conversation", ANCHOR)
    assert report.changed
    assert _rows_with(mem, token) == {}
    assert mem.search("hiking")
