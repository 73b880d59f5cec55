"""The write path: what an add reads and writes, and that it never writes to the wrong session."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlane import Memory
from memlane.errors import SessionNotFoundError
from memlane.tokens import get_counter

TEXT = "Grüße aus München! The train to Sintra leaves Rossio every 20 minutes. 🚀"


def test_a_session_created_again_elsewhere_gets_its_own_token_counts(tmp_path: Path) -> None:
    # This process knows the session (it created it, counting with cl100k); another process
    # deletes it and creates it again counting with o200k. The next add must go to the new
    # session with counts the new session's readers can trust, not the old encoding's.
    path = tmp_path / "m.db"
    o200k, cl100k = get_counter("gpt-4o"), get_counter("gpt-4")
    o200k.count("load"), cl100k.count("load")  # writers cache counts once a vocabulary is loaded
    with Memory(path, token_model="gpt-4", embedder="none") as writer:
        sid = writer.create_session()
        writer.add(sid, "first")
        with Memory(path, token_model="gpt-4o", embedder="none") as other:
            other.delete_session(sid)
            other.create_session(session_id=sid)
        stored = writer.add(sid, TEXT)
        assert stored.token_count == o200k.count_message(stored) != cl100k.count_message(stored)
        session = writer.get_session(sid)
        assert session.message_count == 1
        assert [m.content for m in writer.load_session(sid)] == [TEXT]


def test_a_session_deleted_elsewhere_is_created_again_or_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory(path, embedder="none") as writer:
        sid = writer.create_session()
        writer.add(sid, "first")
        with Memory(path, embedder="none") as other:
            other.delete_session(sid)
        writer.add(sid, "again")  # auto_create_sessions (the default) makes it anew
        assert [m.content for m in writer.load_session(sid)] == ["again"]
    with Memory(path, embedder="none", auto_create_sessions=False) as strict:
        sid = strict.create_session()
        strict.add(sid, "first")
        with Memory(path, embedder="none") as other:
            other.delete_session(sid)
        with pytest.raises(SessionNotFoundError):
            strict.add(sid, "again")
        with pytest.raises(SessionNotFoundError):
            strict.add_messages(sid, [{"role": "user", "content": "again"}])
        with pytest.raises(SessionNotFoundError):
            strict.store_interaction("q", "a", session_id=sid)


def test_observers_see_the_session_as_the_append_left_it(tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []
    with Memory(tmp_path / "m.db", embedder="none") as mem:
        mem.add_observer(lambda session, stored: seen.append((session.message_count, len(stored))))
        sid = mem.create_session()
        mem.add(sid, "one")
        mem.add_messages(sid, [{"role": "user", "content": "two"}, {"role": "assistant", "content": "three"}])
        mem.store_interaction("four", "five", session_id=sid)
    assert seen == [(1, 1), (3, 2), (5, 2)]

