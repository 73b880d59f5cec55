"""The contract of the ports a store hands to features (memlane.ports, memlane.apikeys).

Mixed into every backend's conformance class (tests/store_conformance.py), so SQLite,
``:memory:`` and PostgreSQL each pass it: the log's small feature queries, derived
records, session locks, the notes repository, the API-key store, the vector index and
forgetting. Not collected on its own (the class name does not start with Test).
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memlane.apikeys import KeyStore
from memlane.errors import LockTimeoutError, MemlaneError, NotFoundError
from memlane.models import Message, MessageFilter, Session
from memlane.notes.models import AuditEntry, Facet, Note
from memlane.ports import (
    DerivedRecords,
    KeywordIndex,
    MessageLog,
    ModelInfo,
    NoteFilter,
    NoteRepository,
    Records,
    SessionLocks,
    VectorIndex,
    check_model,
)
from memlane.store.base import Store


def _session_with(store: Store, sid: str, *contents: str, **fields: object) -> list[Message]:
    store.create_session(Session(id=sid, user_id="ana"))
    return store.append(sid, [Message(role="user", content=c, **fields) for c in contents])  # type: ignore[arg-type]


class PortConformance:
    def test_store_offers_every_port(self, store: Store) -> None:
        for port in (MessageLog, KeywordIndex, DerivedRecords, Records, SessionLocks):
            assert isinstance(store, port), port.__name__
        assert isinstance(store.note_repository(), NoteRepository)
        assert isinstance(store.key_store(), KeyStore)

    # ------------------------------------------------------------ log queries for features

    def test_author_names(self, store: Store) -> None:
        store.create_session(Session(id="room"))
        store.append("room", [
            Message(role="user", content="hi", author_name="Ann"),
            Message(role="user", content="ho", author_name="Bo"),
            Message(role="assistant", content="hey"),
            Message(role="user", content="again", author_name="Ann"),
            Message(role="user", content="me too", author_name="Ann Lee"),
            Message(role="user", content="lower", author_name="bo"),
        ])
        # Each name once, however often and in whatever order it was written (the store
        # skips through an index from one name to the next).
        assert store.author_names() == {"Ann", "Ann Lee", "Bo", "bo"}

    def test_first_user_texts(self, store: Store) -> None:
        store.create_session(Session(id="chat"))
        store.append("chat", [
            Message(role="system", content="rules"),
            Message(role="user", content=" \n\u3000 "),  # no text: not what names the chat
            Message(role="assistant", content="hello"),
            Message(role="user", content="  Lisbon trip\nplans"),
            Message(role="user", content="later"),
        ])
        store.hide_messages("chat")  # cleared history still names the conversation
        store.create_session(Session(id="quiet"))
        store.append("quiet", [Message(role="assistant", content="nobody spoke")])
        assert store.first_user_texts(["chat", "quiet", "missing"]) == {"chat": "  Lisbon trip\nplans"}
        assert store.first_user_texts([]) == {}

    def test_important_message_ids(self, store: Store) -> None:
        store.create_session(Session(id="s"))
        stored = store.append("s", [
            Message(role="system", content="rules"),
            Message(role="user", content="plain"),
            Message(role="user", content="pinned", pinned=True),
            Message(role="user", content="weighty", importance=0.9),
            Message(role="user", content="late pin", pinned=True),
        ])
        ids = [m.id for m in stored]
        assert store.important_message_ids("s", before_id=None, min_importance=0.5) == [
            ids[0], ids[2], ids[3], ids[4]
        ]
        assert store.important_message_ids("s", before_id=ids[4], min_importance=0.95) == [ids[0], ids[2]]
        store.hide_messages("s")  # hidden history is not important any more
        assert store.important_message_ids("s", before_id=None, min_importance=0.5) == []

    # ------------------------------------------------------------ derived records

    def test_derived_total(self, store: Store) -> None:
        for sid, saved in (("a", 120), ("b", 30)):
            store.create_session(Session(id=sid))
            store.put_derived(sid, "summary", {"tokens_saved": saved, "text": "..."})
        store.put_derived("a", "state", {"tokens_saved": 1000})  # another kind
        assert store.derived_total("summary", "tokens_saved") == 150
        assert store.derived_total("checkpoint", "tokens_saved") == 0
        store.delete_session("a")  # derived records go with their session
        assert store.derived_total("summary", "tokens_saved") == 30

    # ------------------------------------------------------------ locks

    def test_session_lock_excludes_and_times_out(self, store: Store) -> None:
        store.create_session(Session(id="s"))
        held = threading.Event()
        release = threading.Event()

        def holder() -> None:
            with store.session_lock("s", "summary"):
                held.set()
                release.wait(10)

        t = threading.Thread(target=holder)
        t.start()
        try:
            assert held.wait(10)
            with pytest.raises(LockTimeoutError) as caught, store.session_lock("s", "summary", timeout=0.1):
                pass
            assert isinstance(caught.value, MemlaneError)
            # another scope is free, and a lock is re-entrant in its thread
            with store.session_lock("s", "state", timeout=1.0), store.session_lock("s", "state", timeout=0.1):
                pass
        finally:
            release.set()
            t.join()
        with store.session_lock("s", "summary", timeout=1.0):  # free again
            pass

    # ------------------------------------------------------------ notes repository

    def test_notes_repository_roundtrip(self, store: Store) -> None:
        notes = store.note_repository()
        assert notes is not None
        msgs = _session_with(store, "room", "I live in Berlin", "now I live in Hamburg")
        first = notes.add_note(Note(text="lives in Berlin", user_id="ana", session_id="room",
                                    slot="home", value="Berlin", source_ids=[msgs[0].id or 0]))
        assert first is not None and first.id is not None
        assert notes.get_note(first.id) is not None
        second = notes.add_note(
            Note(text="lives in Hamburg", user_id="ana", session_id="room", slot="home",
                 value="Hamburg", source_ids=[msgs[1].id or 0]),
            supersede=[first.id],
        )
        assert second is not None and second.id is not None
        # by ids at once: by id, with their sources and validity, missing ids left out
        both = notes.get_notes([second.id, first.id, second.id, 10_000])
        assert [(n.id, n.source_ids, n.valid_to is None) for n in both] == [
            (first.id, [msgs[0].id], False), (second.id, [msgs[1].id], True)]
        assert notes.get_notes([]) == []
        current = notes.list_notes(NoteFilter(user_id="ana"))
        assert [n.text for n in current] == ["lives in Hamburg"]
        assert [n.text for n in notes.history(second.id)] == ["lives in Berlin", "lives in Hamburg"]
        assert [n.text for n in notes.current_in_slot("default", "ana", ["home"])] == ["lives in Hamburg"]
        found = notes.search_notes("Hamburg", NoteFilter(user_id="ana"))
        assert [n.text for n, _score in found] == ["lives in Hamburg"]
        assert sorted(notes.notes_from(session_id="room")) == sorted([first.id, second.id])
        assert not notes.reopen_note(first.id)  # its successor is still true
        assert notes.delete_notes([second.id]) == 1
        assert notes.get_note(second.id) is None
        assert notes.reopen_note(first.id)  # the successor was forgotten: the old one is true again
        assert [n.text for n in notes.list_notes(NoteFilter(user_id="ana"))] == ["lives in Berlin"]

    def test_note_needs_its_sources(self, store: Store) -> None:
        notes = store.note_repository()
        assert notes is not None
        msgs = _session_with(store, "room", "remember the blue door")
        store.delete_messages([msgs[0].id or 0])  # a forget raced the promoter
        assert notes.add_note(Note(text="blue door", session_id="room", source_ids=[msgs[0].id or 0])) is None

    def test_facets_progress_archive_audit(self, store: Store) -> None:
        notes = store.note_repository()
        assert notes is not None
        msgs = _session_with(store, "room", "see https://example.org")
        mid = msgs[0].id or 0
        assert notes.add_facets([Facet(message_id=mid, session_id="room", kind="link",
                                       value="https://example.org")]) == 1
        assert [f.value for f in notes.list_facets(session_id="room", kind="link")] == ["https://example.org"]
        assert notes.progress("room") == 0
        notes.set_progress("room", mid)
        assert notes.progress("room") == mid
        assert notes.archive_session("room", "quiet")
        assert [(sid, reason) for sid, _at, reason in notes.archived_sessions()] == [("room", "quiet")]
        assert notes.unarchive_session("room")
        assert notes.archived_sessions() == []
        entry = notes.append_audit(AuditEntry(action="forget", actor_id="@jan", is_anchor=True, allowed=True,
                                              result="ok", session_id="room", command="forget this"))
        assert entry.id is not None
        assert [e.command for e in notes.list_audit(session_id="room")] == ["forget this"]
        notes.append_audit(AuditEntry(action="forget", actor_id="@kim", is_anchor=True, allowed=True,
                                      result="ok", tenant_id="other", command="forget that"))
        assert [e.command for e in notes.list_audit(tenant_id="default", limit=1)] == ["forget this"]
        assert [e.command for e in notes.list_audit(tenant_id="other")] == ["forget that"]
        assert notes.redact_audit("room") == 1
        assert [e.command for e in notes.list_audit(session_id="room")] != ["forget this"]
        with pytest.raises(NotFoundError):
            notes.expire_note(10**9, datetime.now(UTC))

    # ------------------------------------------------------------ API keys

    def test_key_store(self, store: Store) -> None:
        keys = store.key_store()
        assert keys is not None
        assert not keys.has_active_keys()
        record, plaintext = keys.create_key("acme", "ci")
        assert (record.tenant_id, record.name, record.active) == ("acme", "ci", True)
        assert abs(record.created_at - datetime.now(UTC)) < timedelta(minutes=5)
        verified = keys.verify(plaintext)
        assert verified is not None and verified.id == record.id
        assert keys.verify(plaintext + "x") is None
        assert keys.verify("not a key") is None
        assert [k.id for k in keys.list_keys()] == [record.id]
        assert keys.revoke_key(record.id)
        assert not keys.revoke_key(record.id)  # already revoked
        assert keys.verify(plaintext) is None
        assert keys.list_keys() == [] and not keys.has_active_keys()
        assert [k.active for k in keys.list_keys(include_revoked=True)] == [False]

    # ------------------------------------------------------------ vectors

    def test_vector_index(self, store: Store) -> None:
        index = store.vector_index()
        assert isinstance(index, VectorIndex)
        msgs = _session_with(store, "s", "kayak", "pasta", "tent")
        ids = [m.id or 0 for m in msgs]
        check_model(index, ModelInfo("test-model", 3))
        vectors = np.eye(3, dtype=np.float32)
        assert index.upsert(ids, vectors) == 3
        best = index.search(np.array([0.0, 1.0, 0.0], dtype=np.float32), 1, MessageFilter(session_id="s"))
        assert [mid for mid, _sim in best] == [ids[1]]
        store.delete_messages([ids[1]])  # the vector goes with its message
        assert index.count() == 2

    # ------------------------------------------------------------ forgetting

    def test_forgotten_words_are_gone(self, store: Store) -> None:
        _session_with(store, "s", "the password is swordfish")
        store.delete_session("s")  # the erase routine zeroes, merges and truncates itself
        assert store.keyword_search("swordfish", MessageFilter(), limit=5) == []
