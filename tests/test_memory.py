from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from memlane import Memory, Message
from memlane.errors import (
    ConflictError,
    CorruptRecordError,
    InvalidInputError,
    SessionNotFoundError,
    StorageError,
)
from memlane.store import sqlite_driver
from memlane.store.sqlite import SQLiteStore
from memlane.tokens import get_counter


def test_readme_flow_survives_restart(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with Memory(path) as mem:
        sid = mem.create_session(system_prompt="You are helpful.", metadata={"user": "ana"}, user_id="ana")
        mem.save_message(sid, {"role": "user", "content": "hi"})
        turn = mem.store_interaction(
            "wie geht's?", "gut!", session_id=sid,
            metadata={"intent": "smalltalk", "model_used": "llama3.2:3b", "topic": "greeting"},
        )
    with Memory(path) as mem:
        msgs = mem.get_recent_messages(sid, max_tokens=4096)
        assert [(m.role, m.content) for m in msgs] == [
            ("system", "You are helpful."), ("user", "hi"), ("user", "wie geht's?"), ("assistant", "gut!"),
        ]
        (ctx,) = mem.get_conversation_context(sid, limit=5)
        assert ctx["turn_id"] == turn and ctx["query"] == "wie geht's?" and ctx["response"] == "gut!"
        assert ctx["intent"] == "smalltalk" and ctx["model_used"] == "llama3.2:3b"
        assert ctx["metadata"] == {"topic": "greeting"}
        session = mem.get_session(sid)
        assert session.user_id == "ana" and session.metadata == {"user": "ana"}
        assert session.message_count == 3


def test_window_is_token_exact_and_newest_first(mem: Memory) -> None:
    sid = mem.create_session(system_prompt="sys")
    for i in range(50):
        mem.add(sid, f"message number {i} with some words", role="user" if i % 2 == 0 else "assistant")
    counter = get_counter(None)
    for budget in (20, 37, 64, 100, 333, 1000):
        win = mem.window(sid, budget)
        assert counter.count_messages(win.messages) <= budget
        assert win.tokens == counter.count_messages(win.messages)
        contents = [m.content for m in win.messages[1:]]
        if contents:
            assert contents[-1] == "message number 49 with some words"
            numbers = [int(c.split()[2]) for c in contents]
            assert numbers == sorted(numbers) and numbers == list(range(numbers[0], 50))
        # one more message would not have fit
        if contents and numbers[0] > 0:
            older = mem.load_session(sid)[numbers[0] - 1]
            assert counter.count_messages([*win.messages, older]) > budget
    assert mem.window(sid, 10_000).exhausted


def test_window_uses_model_encoding(mem: Memory) -> None:
    sid = mem.create_session()
    mem.add(sid, "Grüße aus München! 🚀 " * 20)
    a = mem.window(sid, 4096, model="gpt-4o")
    b = mem.window(sid, 4096, model="gpt-4")
    assert a.tokens == get_counter("gpt-4o").count_messages(a.messages)
    assert b.tokens == get_counter("gpt-4").count_messages(b.messages)
    assert a.tokens != b.tokens


def test_tool_groups_are_never_split(mem: Memory) -> None:
    sid = mem.create_session()
    mem.add(sid, "what's the weather in Lisbon and Porto?")
    call = lambda i: {"id": f"call_{i}", "type": "function",  # noqa: E731
                      "function": {"name": "weather", "arguments": json.dumps({"i": i})}}
    mem.save_message(sid, {"role": "assistant", "content": None, "tool_calls": [call(1), call(2)]})
    mem.save_message(sid, {"role": "tool", "tool_call_id": "call_1", "content": "Lisbon: sunny 24C " * 5})
    mem.save_message(sid, {"role": "tool", "tool_call_id": "call_2", "content": "Porto: cloudy 19C " * 5})
    mem.add(sid, "Lisbon is sunny, Porto cloudy.", role="assistant")
    counter = get_counter(None)
    for budget in range(10, 260, 3):
        msgs = mem.get_recent_messages(sid, budget)
        roles = [m.role for m in msgs]
        if "tool" in roles:
            first_tool = roles.index("tool")
            assert first_tool > 0 and msgs[first_tool - 1].tool_calls, f"orphan at budget {budget}"
            assert roles.count("tool") == 2
        assert counter.count_messages(msgs) <= budget


def test_oversized_newest_message_is_truncated_and_flagged(mem: Memory) -> None:
    sid = mem.create_session()
    mem.add(sid, "short")
    mem.add(sid, "word " * 5000)
    win = mem.window(sid, 100)
    assert win.truncated
    assert len(win.messages) == 1
    assert win.messages[0].metadata["truncated"] is True
    assert get_counter(None).count_messages(win.messages) <= 100
    assert win.messages[0].content.startswith("word word")


def test_clear_hides_but_keeps(mem: Memory) -> None:
    sid = mem.create_session()
    mem.add(sid, "old secret")
    assert mem.clear_session(sid) == 1
    mem.add(sid, "fresh start")
    assert [m.content for m in mem.get_recent_messages(sid, 1000)] == ["fresh start"]
    assert len(mem.load_session(sid, include_hidden=True)) == 2
    assert all(h.message.content != "old secret" for h in mem.search("secret"))  # hidden from recall too


def test_unknown_session_policy(tmp_path: Path) -> None:
    with Memory(tmp_path / "a.db") as mem:
        mem.save_message("room-42", {"role": "user", "content": "auto"})
        assert mem.get_session("room-42").message_count == 1
    with Memory(tmp_path / "b.db", auto_create_sessions=False) as mem:
        with pytest.raises(SessionNotFoundError):
            mem.save_message("room-42", {"role": "user", "content": "x"})
        with pytest.raises(SessionNotFoundError):
            mem.get_recent_messages("room-42")


def test_store_interaction_without_session_uses_users_active_session(mem: Memory) -> None:
    first = mem.store_interaction("q1", "a1", user_id="u1")
    second = mem.store_interaction("q2", "a2", user_id="u1")
    other = mem.store_interaction("q3", "a3", user_id="u2")
    sessions = {s.user_id: s for s in mem.list_sessions(limit=10)}
    assert set(sessions) == {"u1", "u2"}
    assert sessions["u1"].message_count == 4
    assert len({first, second, other}) == 3


def test_list_end_delete_prune(mem: Memory) -> None:
    a = mem.create_session(user_id="ana", title="A")
    b = mem.create_session(user_id="ben", title="B")
    assert {s.id for s in mem.list_sessions(user_id="ana")} == {a}
    assert mem.end_session(a) and mem.get_session(a).status == "ended"
    assert not mem.end_session("nope")
    mem.add(b, "hello")
    assert mem.delete_session(b)
    assert not mem.delete_session(b)
    assert mem.prune_old_sessions(days=0) == 1  # a is older than "now"
    with pytest.raises(InvalidInputError):
        mem.list_sessions(limit=5, colour="red")
    with pytest.raises(ConflictError):
        mem.create_session(session_id=mem.create_session(session_id="dup"))


@pytest.mark.parametrize(
    ("message", "needle"),
    [
        ({"role": "wizard", "content": "x"}, "role must be one of"),
        ({"role": "user"}, "needs 'content'"),
        ({"role": "user", "content": 42}, "content must be a string"),
        ({"role": "tool", "content": "x"}, "tool_call_id"),
        ({"role": "tool", "content": "x", "tool_call_id": "call_nope"}, "no matching call"),
        ({"role": "user", "content": "x", "metadata": {"f": {1, 2}}}, "not JSON-serialisable"),
        ({"role": "user", "content": "x", "metadata": "nope"}, "must be a JSON object"),
        ({"role": "user", "content": "x", "metadata": {"n": float("nan")}}, "not JSON-serialisable"),
        ({"role": "user", "content": "bad \ud800 surrogate"}, "lone surrogate"),
        ({"role": "user", "content": "x", "colour": "red"}, "unknown message field"),
        ({"role": "user", "content": "x", "importance": 7}, "importance"),
        ("just a string", "must be a dict"),
    ],
)
def test_bad_input_is_refused_and_nothing_changes(mem: Memory, message: object, needle: str) -> None:
    sid = mem.create_session()
    mem.add(sid, "before")
    with pytest.raises(InvalidInputError, match=needle):
        mem.save_message(sid, message)  # type: ignore[arg-type]
    assert [m.content for m in mem.load_session(sid)] == ["before"]
    assert mem.store.integrity_check() == "ok"  # type: ignore[attr-defined]


def test_ten_megabyte_message_is_refused_clearly(mem: Memory) -> None:
    sid = mem.create_session()
    with pytest.raises(InvalidInputError, match="limit is 1,000,000"):
        mem.add(sid, "x" * 10_000_000)
    assert mem.load_session(sid) == []


def test_ten_megabyte_message_allowed_when_configured(tmp_path: Path) -> None:
    with Memory(tmp_path / "big.db", max_message_chars=20_000_000, embedder="none") as mem:
        sid = mem.create_session()
        stored = mem.add(sid, "y" * 10_000_000)
        assert mem.get_message(stored.id or 0).content == "y" * 10_000_000
        win = mem.window(sid, 500)
        assert win.truncated and get_counter(None).count_messages(win.messages) <= 500


def test_batch_add_is_all_or_nothing(mem: Memory) -> None:
    sid = mem.create_session()
    with pytest.raises(InvalidInputError):
        mem.add_messages(sid, [{"role": "user", "content": "ok"}, {"role": "nope", "content": "x"}])
    assert mem.load_session(sid) == []
    stored = mem.add_messages(sid, [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
                                                              "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ])
    assert [m.role for m in stored] == ["assistant", "tool"]


def test_message_objects_are_accepted(mem: Memory) -> None:
    sid = mem.create_session()
    first = mem.add(sid, "hello")
    assert mem.window(sid).messages == [first]  # counted it: the vocabulary is loaded now ...
    stored = mem.save_message(sid, Message(role="user", content="as object", author_id="u", author_name="Ana"))
    assert stored.id is not None and stored.author_name == "Ana"
    assert stored.token_count == get_counter(None).count_message(stored)  # ... so writes cache counts


def test_export_import_roundtrip_exact(mem: Memory, tmp_path: Path) -> None:
    sid = mem.create_session(system_prompt="sys", title="Trip", user_id="ana", metadata={"k": [1]})
    mem.store_interaction("q1", "a1", session_id=sid, metadata={"intent": "x", "job_refs": ["j1"]})
    mem.save_message(sid, {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})
    mem.save_message(sid, {"role": "tool", "tool_call_id": "c1", "content": "r", "name": "f"})
    mem.add(sid, "Grüße 🚀", author_id="@m:x", author_name="Maria", metadata={"room": "!r"})
    for fmt in ("json", "jsonl"):
        text = mem.export_session(sid, fmt)
        with Memory(tmp_path / f"copy-{fmt}.db") as other:
            (new_id,) = other.import_sessions(text, fmt)
            assert new_id == sid
            assert other.export_session(sid, fmt) == text
            assert other.get_conversation_context(sid)[0]["job_refs"] == ["j1"]
    md = mem.export_session(sid, "markdown")
    assert "### user · Maria <@m:x>" in md
    with Memory(tmp_path / "md.db") as other:
        (md_id,) = other.import_sessions(md, "markdown")
        assert [m.content for m in other.load_session(md_id)] == [m.content for m in mem.load_session(sid)]
    with pytest.raises(ConflictError):
        mem.import_sessions(mem.export_session(sid))
    assert mem.import_sessions(mem.export_session(sid), on_conflict="skip") == []
    (copy,) = mem.import_sessions(mem.export_session(sid), on_conflict="new")
    assert copy != sid and len(mem.load_session(copy)) == len(mem.load_session(sid))
    assert mem.get_conversation_context(copy)[0]["turn_id"] != mem.get_conversation_context(sid)[0]["turn_id"]


def test_import_rejects_bad_documents_without_writing(mem: Memory) -> None:
    with pytest.raises(InvalidInputError, match="not valid JSON"):
        mem.import_sessions("{nope")
    doc = {"format": "memlane.session/1", "session": {"id": "x"},
           "messages": [{"role": "user", "content": "ok"}, {"role": "bad", "content": "x"}], "turns": []}
    with pytest.raises(InvalidInputError, match="message 1"):
        mem.import_sessions(json.dumps(doc))
    assert mem.list_sessions() == []


def test_corrupted_row_is_named_and_skipped_when_failing_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "c.db"
    with Memory(path, embedder="none") as mem:
        sid = mem.create_session()
        first = mem.add(sid, "fine before")
        bad = mem.add(sid, "will be damaged")
        last = mem.add(sid, "fine after")
        mem.store.write(  # type: ignore[attr-defined]
            lambda c: c.execute("UPDATE messages SET metadata = '{broken' WHERE id = ?", (bad.id,))
        )
        with pytest.raises(CorruptRecordError, match=rf"messages \(id={bad.id}\)"):
            mem.get_recent_messages(sid)
    with Memory(path, on_storage_error="log", embedder="none") as mem, caplog.at_level(logging.ERROR):
        win = mem.window(sid, 1000)  # the agent loop keeps going, with the good rows
        assert [m.id for m in win.messages] == [first.id, last.id]
        assert win.skipped_ids == [bad.id]
        assert any(str(bad.id) in n for n in win.notes)
        assert f"corrupted message {bad.id}" in caplog.text


def _locked_store(path: Path) -> SQLiteStore:
    # Short lock waits so a held lock becomes a StorageError within a fraction of a second.
    return SQLiteStore(path, busy_timeout_ms=20, lock_retry_seconds=0.2)


def test_fail_open_keeps_messages_and_retries(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "f.db"
    with Memory(_locked_store(path), on_storage_error="log", embedder="none") as mem:
        sid = mem.create_session()
        mem.add(sid, "before the outage")
        # Another connection holds the write lock: a real "database is locked" failure. It
        # uses the store's own SQLite library: two copies of SQLite in one process do not
        # see each other's locks (sqlite.org/howtocorrupt.html, 2.2.1).
        locker = sqlite_driver.connect(str(path), None, isolation_level=None)
        locker.execute("BEGIN EXCLUSIVE")
        with caplog.at_level(logging.ERROR):
            held = mem.add(sid, "kept while storage fails")
        assert held.id is None and mem.pending_writes == 1
        assert "storage failed" in caplog.text
        # Reads still work for the agent during the outage.
        assert [m.content for m in mem.get_recent_messages(sid, 1000)] == ["before the outage"]
        locker.execute("ROLLBACK")
        locker.close()
        mem.flush()  # documented: flush retries writes held in fail-open mode
        assert mem.pending_writes == 0
        mem.add(sid, "after recovery")
    with Memory(path, embedder="none") as mem:
        assert [m.content for m in mem.load_session(sid)] == [
            "before the outage", "kept while storage fails", "after recovery",
        ]
    with Memory(_locked_store(tmp_path / "g.db"), embedder="none") as strict:
        sid = strict.create_session()
        locker = sqlite_driver.connect(str(tmp_path / "g.db"), None, isolation_level=None)
        locker.execute("BEGIN EXCLUSIVE")
        try:
            with pytest.raises(StorageError):
                strict.add(sid, "x")
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        assert strict.pending_writes == 0 and strict.load_session(sid) == []


def test_budgets_hold_after_switching_models(tmp_path: Path) -> None:
    path = tmp_path / "switch.db"
    text = "Grüße aus München! 🚀 Καλημέρα κόσμε, привет мир. " * 3
    with Memory(path, token_model="gpt-4o", embedder="none") as mem:
        sid = mem.create_session(system_prompt="You are helpful.")
        for _ in range(40):
            mem.add(sid, text)
        msg = mem.load_session(sid)[0]
    o200k, cl100k = get_counter("gpt-4o"), get_counter("gpt-4")
    assert msg.token_count == o200k.count_message(msg) < cl100k.count_message(msg)  # too low for gpt-4
    with Memory(path, token_model="gpt-4", embedder="none") as mem:
        for budget in (100, 500, 1500):
            win = mem.window(sid, budget)
            assert win.tokens == cl100k.count_messages(win.messages) <= budget
        mem.add(sid, text)  # written by a gpt-4 process into a session counted with o200k
        for budget in (500, 1500):
            win = mem.window(sid, budget)
            assert win.tokens == cl100k.count_messages(win.messages) <= budget
    with Memory(path, token_model="gpt-4o", embedder="none") as mem:
        for budget in (100, 500, 1500):
            win = mem.window(sid, budget)
            assert win.tokens == o200k.count_messages(win.messages) <= budget
        # The context packet follows the same rule: rendered for gpt-4, counted with cl100k.
        packet = mem.context(sid, max_tokens=3000, model="gpt-4", strategy="simple")
        for budget in (300, 900):
            alloc = packet.render("gpt-4", max_tokens=budget)
            assert alloc.report.used == cl100k.count_messages(alloc.messages) <= budget


def test_unknown_count_encoding_is_recounted(tmp_path: Path) -> None:
    # Sessions written before the encoding was recorded: no cached count is trusted.
    path = tmp_path / "legacy.db"
    with Memory(path, token_model="gpt-4o", embedder="none") as mem:
        sid = mem.create_session()
        for _ in range(30):
            mem.add(sid, "Grüße aus München! 🚀 " * 5)
        mem.store.delete_derived(sid, "token_encoding")
    with Memory(path, token_model="gpt-4", embedder="none") as mem:
        win = mem.window(sid, 300)
        assert win.tokens == get_counter("gpt-4").count_messages(win.messages) <= 300


def _call(i: str) -> dict[str, object]:
    return {"id": i, "type": "function", "function": {"name": "weather", "arguments": "{}"}}


def test_tool_call_without_every_result_is_left_out(mem: Memory) -> None:
    sid = mem.create_session()
    mem.add(sid, "weather in Lisbon and Porto?")
    call = mem.save_message(sid, {"role": "assistant", "content": None,
                                  "tool_calls": [_call("call_1"), _call("call_2")]})
    mem.save_message(sid, {"role": "tool", "tool_call_id": "call_1", "content": "Lisbon: sunny"})
    mem.add(sid, "never mind, thanks")
    win = mem.window(sid, 1000)
    assert [m.content for m in win.messages] == ["weather in Lisbon and Porto?", "never mind, thanks"]
    assert any(str(call.id) in n and "not every tool call" in n for n in win.notes)


def test_tool_result_away_from_its_call_is_left_out(mem: Memory) -> None:
    sid = mem.create_session()
    mem.save_message(sid, {"role": "assistant", "content": None, "tool_calls": [_call("call_x")]})
    mem.add(sid, "an interruption")
    orphan = mem.save_message(sid, {"role": "tool", "tool_call_id": "call_x", "content": "late"})
    mem.add(sid, "and on we go", role="assistant")
    win = mem.window(sid, 1000)
    assert [m.content for m in win.messages] == ["an interruption", "and on we go"]
    assert any(str(orphan.id) in n and "without their call" in n for n in win.notes)
    assert len(win.notes) == 2  # the orphaned result, and the call left without it


def test_tool_group_across_a_page_boundary_is_kept_whole(mem: Memory) -> None:
    sid = mem.create_session()
    mem.save_message(sid, {"role": "assistant", "content": None,
                           "tool_calls": [_call("a"), _call("b"), _call("c")]})
    for i in "abc":
        mem.save_message(sid, {"role": "tool", "tool_call_id": i, "content": f"result {i}"})
    mem.add_messages(sid, [{"role": "user", "content": f"m{i}"} for i in range(62)])
    win = mem.window(sid, 100_000)
    assert [m.role for m in win.messages[:4]] == ["assistant", "tool", "tool", "tool"]
    assert len(win.messages) == 66 and win.notes == []


def test_disabled_memory_stores_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "off.db"
    with caplog.at_level(logging.WARNING), Memory(path, enabled=False) as mem:
        assert "disabled" in caplog.text and "enabled: true" in caplog.text
        sid = mem.create_session(system_prompt="sys")
        msg = mem.add(sid, "hello")
        assert msg.id is None and msg.content == "hello"
        assert mem.store_interaction("q", "a", session_id=sid)
        assert mem.add_messages(sid, [{"role": "user", "content": "x"}])[0].id is None
        with pytest.raises(InvalidInputError):  # bad input is still reported
            mem.add(sid, {"role": "wizard", "content": "x"})
        assert mem.get_recent_messages(sid, 1000) == []
        assert mem.load_session(sid) == []
        assert mem.get_conversation_context(sid) == []
        assert mem.search("hello") == [] and mem.list_sessions() == []
    assert caplog.text.count("disabled") == 1
    assert not path.exists()
