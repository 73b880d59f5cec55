"""The Store contract. Every backend's test module subclasses StoreConformance
and provides a ``store`` fixture that yields a fresh, empty store.

Not collected on its own (the class name does not start with Test).
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from memlane.errors import ConflictError, InvalidInputError, NotFoundError, SessionNotFoundError
from memlane.models import Message, MessageFilter, Session, SessionFilter
from memlane.store.base import Store, TurnRecord
from tests.port_conformance import PortConformance


def _msg(content: str, role: str = "user", **kw: object) -> Message:
    return Message(role=role, content=content, **kw)  # type: ignore[arg-type]


class StoreConformance(PortConformance):
    def test_is_a_store(self, store: Store) -> None:
        assert isinstance(store, Store)

    def test_session_roundtrip(self, store: Store) -> None:
        created = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
        s = Session(
            id="room-1", user_id="ana", agent_id="bot", tenant_id="t1", title="Trip",
            system_prompt="Be kind.", metadata={"lang": "de", "n": 1},
            created_at=created, updated_at=created, last_active_at=created,
        )
        store.create_session(s)
        got = store.get_session("room-1")
        assert got is not None
        assert (got.user_id, got.agent_id, got.tenant_id, got.title) == ("ana", "bot", "t1", "Trip")
        assert got.system_prompt == "Be kind."
        assert got.metadata == {"lang": "de", "n": 1}
        assert got.created_at == created
        assert got.message_count == 0
        assert store.get_session("nope") is None

    def test_duplicate_session_conflicts(self, store: Store) -> None:
        store.create_session(Session(id="a"))
        with pytest.raises(ConflictError):
            store.create_session(Session(id="a"))

    def test_update_session(self, store: Store) -> None:
        store.create_session(Session(id="a"))
        updated = store.update_session("a", title="New", status="ended", metadata={"k": "v"})
        assert (updated.title, updated.status, updated.metadata) == ("New", "ended", {"k": "v"})
        with pytest.raises(SessionNotFoundError):
            store.update_session("missing", title="x")
        with pytest.raises(InvalidInputError):
            store.update_session("a", id="b")
        with pytest.raises(InvalidInputError):
            store.update_session("a", status="bogus")

    def test_append_assigns_increasing_ids_and_counts(self, store: Store) -> None:
        store.create_session(Session(id="s"))
        first = store.append("s", [_msg("one"), _msg("two", "assistant")])
        second = store.append("s", [_msg("three")])
        ids = [m.id for m in first + second]
        assert all(isinstance(i, int) for i in ids)
        assert ids == sorted(ids) and len(set(ids)) == 3
        assert store.count_messages("s") == 3
        session = store.get_session("s")
        assert session is not None and session.message_count == 3

    def test_append_to_missing_session(self, store: Store) -> None:
        with pytest.raises(SessionNotFoundError):
            store.append("ghost", [_msg("x")])

    def test_message_fields_roundtrip(self, store: Store) -> None:
        store.create_session(Session(id="s"))
        when = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
        call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        stored = store.append(
            "s",
            [
                _msg("", "assistant", tool_calls=[call], author_id="bot", created_at=when),
                _msg("result ü 🚀", "tool", tool_call_id="call_1", name="f",
                     metadata={"x": [1, 2]}, importance=0.5, pinned=True, token_count=7),
            ],
        )
        got = store.get_messages([m.id for m in stored if m.id is not None])
        assert got[0].tool_calls == [call] and got[0].created_at == when
        assert got[0].author_id == "bot"
        tool = got[1]
        assert (tool.role, tool.content, tool.tool_call_id, tool.name) == (
            "tool", "result ü 🚀", "call_1", "f"
        )
        assert tool.metadata == {"x": [1, 2]} and tool.importance == 0.5 and tool.pinned
        assert tool.token_count == 7
        assert store.find_tool_call("s", "call_1")
        assert not store.find_tool_call("s", "call_2")

    def test_recent_messages_newest_first_with_paging(self, store: Store) -> None:
        store.create_session(Session(id="s"))
        stored = store.append("s", [_msg(f"m{i}") for i in range(10)])
        page = store.recent_messages("s", 3)
        assert [m.content for m in page] == ["m9", "m8", "m7"]
        older = store.recent_messages("s", 3, before_id=page[-1].id)
        assert [m.content for m in older] == ["m6", "m5", "m4"]
        assert stored[0].id is not None

    def test_hide_messages(self, store: Store) -> None:
        store.create_session(Session(id="s"))
        store.append("s", [_msg("old1"), _msg("old2")])
        assert store.hide_messages("s") == 2
        store.append("s", [_msg("new")])
        assert [m.content for m in store.recent_messages("s", 10)] == ["new"]
        assert len(store.recent_messages("s", 10, include_hidden=True)) == 3
        assert store.count_messages("s") == 3

    def test_iter_messages_all_sessions(self, store: Store) -> None:
        for sid in ("a", "b"):
            store.create_session(Session(id=sid))
        store.append("a", [_msg("a1")])
        store.append("b", [_msg("b1")])
        store.append("a", [_msg("a2")])
        assert [m.content for m in store.iter_messages(batch=1)] == ["a1", "b1", "a2"]
        assert [m.content for m in store.iter_messages("a")] == ["a1", "a2"]

    def test_turns(self, store: Store) -> None:
        store.create_session(Session(id="s"))
        rec = TurnRecord(
            turn_id="t1", intent="smalltalk", job_refs=("job-9",), model_used="llama3.2:3b",
            confidence_score=0.69, processing_time=2.02, resolved_query="hi [ctx]",
            context_used=True, metadata={"topic": "x"},
        )
        store.append("s", [_msg("hi", turn_id="t1"), _msg("hello", "assistant", turn_id="t1")], rec)
        turns = store.list_turns("s")
        assert len(turns) == 1
        t = turns[0]
        assert (t.user_message.content, t.assistant_message.content) == ("hi", "hello")
        assert (t.intent, t.model_used, t.job_refs, t.context_used) == (
            "smalltalk", "llama3.2:3b", ["job-9"], True
        )
        assert t.confidence_score == pytest.approx(0.69)
        assert t.resolved_query == "hi [ctx]" and t.metadata == {"topic": "x"}

    def test_delete_session_cascades(self, store: Store) -> None:
        store.create_session(Session(id="s"))
        store.append("s", [_msg("secret pineapple")])
        store.put_derived("s", "summary", {"text": "pineapple"})
        assert store.delete_session("s")
        assert not store.delete_session("s")
        assert store.count_messages() == 0
        assert store.keyword_search("pineapple", MessageFilter()) == []
        assert store.get_derived("s", "summary") is None

    def test_delete_messages(self, store: Store) -> None:
        store.create_session(Session(id="s"))
        stored = store.append("s", [_msg("keep"), _msg("drop the pineapple")])
        assert store.delete_messages([stored[1].id or 0]) == 1
        assert [m.content for m in store.recent_messages("s", 10)] == ["keep"]
        assert store.keyword_search("pineapple", MessageFilter()) == []
        session = store.get_session("s")
        assert session is not None and session.message_count == 1

    def test_update_message(self, store: Store) -> None:
        store.create_session(Session(id="s"))
        (m,) = store.append("s", [_msg("x")])
        assert m.id is not None
        got = store.update_message(m.id, importance=0.9, pinned=True, metadata={"a": 1})
        assert (got.importance, got.pinned, got.metadata) == (0.9, True, {"a": 1})
        with pytest.raises(NotFoundError):
            store.update_message(10**9, pinned=True)

    def test_version_moves_with_what_a_window_shows(self, store: Store) -> None:
        """Every change of what a window shows moves the session's version (the shared hot
        cache keys windows by it); changes a window does not show leave it."""
        store.create_session(Session(id="s", system_prompt="Be brief."))
        store.create_session(Session(id="other"))

        def version(sid: str = "s") -> int:
            found = store.get_session(sid)
            assert found is not None
            return found.version

        seen = [version()]

        def moved() -> bool:
            seen.append(version())
            return seen[-1] > seen[-2]

        assert seen == [0]
        a, b, c = store.append("s", [_msg("a"), _msg("b"), _msg("c")])
        assert moved()
        assert store.hide_messages("s", up_to_id=a.id) == 1 and moved()
        assert store.hide_messages("s", up_to_id=a.id) == 0 and not moved()  # nothing hidden
        store.update_message(b.id or 0, pinned=True)
        assert moved()
        store.update_message(b.id or 0, importance=0.5)
        assert moved()
        store.update_message(b.id or 0, metadata={"edited": True})
        assert moved()
        assert store.delete_messages([c.id or 0]) == 1 and moved()
        store.update_session("s", system_prompt="Be thorough.")
        assert moved()
        store.update_session("s", title="no window change")
        assert not moved()
        assert version("other") == 0  # another session's changes leave it

    def test_keyword_search_and_filters(self, store: Store) -> None:
        store.create_session(Session(id="a", user_id="ana"))
        store.create_session(Session(id="b", user_id="ben"))
        t0 = datetime(2024, 1, 1, tzinfo=UTC)
        store.append("a", [_msg("I adopted a puppy named Oscar", author_id="ana", created_at=t0)])
        store.append("b", [_msg("my puppy loves the park", "assistant", created_at=t0 + timedelta(days=2))])
        store.append("b", [_msg("completely unrelated text")])
        hits = store.keyword_search("puppy", MessageFilter())
        assert {h.message.session_id for h in hits} == {"a", "b"}
        assert all(h.score > 0 for h in hits)
        assert [h.message.session_id for h in store.keyword_search("puppy", MessageFilter(user_id="ana"))] == ["a"]
        assert [h.message.role for h in store.keyword_search("puppy", MessageFilter(roles=("assistant",)))] == ["assistant"]
        assert len(store.keyword_search("puppy", MessageFilter(authors=("ana",)))) == 1
        assert len(store.keyword_search("puppy", MessageFilter(since=t0 + timedelta(days=1)))) == 1
        # stemming: "puppies" finds "puppy"; FTS syntax in user text is harmless
        assert store.keyword_search('puppies AND "NEAR(', MessageFilter())
        assert store.keyword_search("zebra", MessageFilter()) == []
        # several queries in one call: each as it alone, in order, under the same filter
        queries = ["puppy", "zebra", "park", "the"]
        for flt in (MessageFilter(), MessageFilter(user_id="ben")):
            assert store.keyword_searches(queries, flt, limit=5) == [
                store.keyword_search(q, flt, limit=5) for q in queries]
        assert isinstance(store.keyword_batching, bool)

    def test_get_messages_under_a_filter(self, store: Store) -> None:
        # The same filter keyword search applies, on messages read by id (the search
        # engine's replies to a question), on every backend.
        store.create_session(Session(id="a", user_id="ana", tenant_id="t1"))
        store.create_session(Session(id="b", user_id="ben", tenant_id="t2"))
        store.create_session(Session(id="c"))
        t0 = datetime(2024, 1, 1, tzinfo=UTC)
        a_old, = store.append("a", [_msg("hidden soon", created_at=t0)])
        store.hide_messages("a")
        a_user, a_bot = store.append("a", [
            _msg("a question?", author_id="ana", author_name="Ana", created_at=t0 + timedelta(days=1)),
            _msg("an answer", "assistant", created_at=t0 + timedelta(days=2)),
        ])
        b_user, = store.append("b", [_msg("ben asks", author_name="Ben", created_at=t0 + timedelta(days=3))])
        c_user, = store.append("c", [_msg("nobody's", created_at=t0 + timedelta(days=4))])
        every = [m.id or 0 for m in (c_user, b_user, a_bot, a_user, a_old)]

        def ids(**flt: object) -> list[int | None]:
            return [m.id for m in store.get_messages([*every, 10_000], MessageFilter(**flt))]  # type: ignore[arg-type]

        assert ids() == [c_user.id, b_user.id, a_bot.id, a_user.id]  # order kept, hidden and missing left out
        assert ids(include_hidden=True) == [*ids(), a_old.id]
        assert ids(session_id="a") == [a_bot.id, a_user.id]
        assert ids(user_id="ben") == [b_user.id]
        assert ids(tenant_id="t1") == [a_bot.id, a_user.id]
        assert ids(unowned=True) == [c_user.id]
        assert ids(roles=("assistant",)) == [a_bot.id]
        assert ids(authors=("ana",)) == ids(authors=("Ana",)) == [a_user.id]  # by id or by name
        assert ids(since=t0 + timedelta(days=2), until=t0 + timedelta(days=3)) == [b_user.id, a_bot.id]
        assert store.get_messages([], MessageFilter()) == []
        assert [m.id for m in store.get_messages(every)] == [m.id for m in store.get_messages(every, None)] \
            == [c_user.id, b_user.id, a_bot.id, a_user.id, a_old.id]  # no filter: every message, hidden too

    def test_list_sessions_filters_and_order(self, store: Store) -> None:
        base = datetime(2024, 1, 1, tzinfo=UTC)
        for i, (sid, user) in enumerate([("a", "ana"), ("b", "ben"), ("c", "ana")]):
            t = base + timedelta(hours=i)
            store.create_session(Session(id=sid, user_id=user, metadata={"k": sid},
                                         created_at=t, updated_at=t, last_active_at=t))
        assert [s.id for s in store.list_sessions(SessionFilter())] == ["c", "b", "a"]
        assert [s.id for s in store.list_sessions(SessionFilter(user_id="ana"))] == ["c", "a"]
        assert [s.id for s in store.list_sessions(SessionFilter(metadata={"k": "b"}))] == ["b"]
        assert [s.id for s in store.list_sessions(SessionFilter(), limit=1, offset=1)] == ["b"]
        cutoff = base + timedelta(minutes=90)
        assert store.sessions_inactive_before(cutoff) == ["a", "b"]

    def test_derived_state(self, store: Store) -> None:
        store.create_session(Session(id="s"))
        store.put_derived("s", "summary", {"text": "one"})
        store.put_derived("s", "summary", {"text": "two"})
        store.put_derived("s", "state", {"topics": ["x"]})
        assert store.get_derived("s", "summary") == {"text": "two"}
        assert store.delete_derived("s", "summary") == 1
        assert store.get_derived("s", "summary") is None
        assert store.delete_derived("s") == 1
        with pytest.raises(SessionNotFoundError):
            store.put_derived("ghost", "x", {})

    def test_restore_session_exact(self, store: Store) -> None:
        t = datetime(2023, 5, 8, tzinfo=UTC)
        s = Session(id="r", title="T", created_at=t, updated_at=t, last_active_at=t, status="ended")
        msgs = [_msg("q", turn_id="t1", created_at=t), _msg("a", "assistant", turn_id="t1", created_at=t)]
        store.restore_session(s, msgs, [(TurnRecord(turn_id="t1", intent="x"), 0, 1)])
        got = store.get_session("r")
        assert got is not None
        assert (got.updated_at, got.last_active_at, got.status, got.message_count) == (t, t, "ended", 2)
        assert store.list_turns("r")[0].intent == "x"
        with pytest.raises(ConflictError):
            store.restore_session(s, [], [])

    def test_rebuild_keyword_index(self, store: Store) -> None:
        store.create_session(Session(id="s"))
        store.append("s", [_msg("rebuild me please")])
        assert store.rebuild_keyword_index() == 1
        assert len(store.keyword_search("rebuild", MessageFilter())) == 1

    def test_concurrent_appends_from_threads(self, store: Store) -> None:
        store.create_session(Session(id="s"))
        errors: list[BaseException] = []

        def worker(n: int) -> None:
            try:
                for i in range(25):
                    store.append("s", [_msg(f"w{n}-{i}")])
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert store.count_messages("s") == 100

    def test_stats(self, store: Store) -> None:
        store.create_session(Session(id="s"))
        store.append("s", [_msg("x", token_count=5)])
        stats = store.stats()
        assert stats["sessions"] == 1 and stats["messages"] == 1 and stats["tokens"] == 5

    # ---------------------------------------------------------- items, records, positions

    def test_framework_item_is_kept_verbatim(self, store: Store) -> None:
        store.create_session(Session(id="a"))
        item = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA\u00e9==", "z": 1.5}
        (stored,) = store.append("a", [_msg("", role="assistant", item=item)])
        (got,) = store.get_messages([stored.id or 0])
        assert got.item == item and list(got.item) == list(item)  # same keys, same order
        assert store.recent_messages("a", 1)[0].item == item

    def test_message_ids_by_position(self, store: Store) -> None:
        store.create_session(Session(id="a"))
        stored = store.append("a", [_msg(f"m{i}") for i in range(5)])
        ids = [m.id for m in stored]
        assert store.message_ids("a") == ids
        assert store.message_ids("a", offset=3) == ids[3:]
        assert store.message_ids("a", offset=1, limit=2) == ids[1:3]
        store.hide_messages("a", up_to_id=ids[0])
        assert store.message_ids("a") == ids[1:]
        assert store.message_ids("a", include_hidden=True) == ids

    def test_records_roundtrip_order_and_delete(self, store: Store) -> None:
        store.put_records("ns", [("b\x1f2", b"\x00\xff two"), ("b\x1f1", b"one"), ("a", b"")])
        assert store.get_record("ns", "b\x1f1") == b"one"
        assert store.get_record("ns", "missing") is None
        assert [k for k, _ in store.list_records("ns")] == ["a", "b\x1f1", "b\x1f2"]
        assert store.list_records("ns", prefix="b\x1f", descending=True) == [("b\x1f2", b"\x00\xff two"), ("b\x1f1", b"one")]
        store.put_records("ns", [("a", b"new")])
        assert store.get_record("ns", "a") == b"new"
        store.put_records("ns2", [("x", b"1")])
        assert store.record_namespaces() == ["ns", "ns2"]
        assert store.record_namespaces("ns2") == ["ns2"]
        assert store.delete_records("ns", ["a"]) == 1
        assert store.delete_records("ns", prefix="b") == 2
        assert store.list_records("ns") == [] and store.get_record("ns2", "x") == b"1"
        with pytest.raises(InvalidInputError):
            store.put_records("ns", [("k", "not bytes")])  # type: ignore[list-item]
        with pytest.raises(InvalidInputError, match="NUL"):
            store.put_records("ns", [("a\x00b", b"")])
