"""Rolling summaries kept beside the log: policy, incremental deltas, background work, rebuilds."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memlane import Memory
from memlane.context.summaries import (
    SUMMARY_KIND,
    SummaryManager,
    SummaryRecord,
    brief_turn,
    split_groups,
    split_turns,
)
from memlane.models import Message
from memlane.tiny_model import TinyModel  # the one stand-in chat model (examples, bench, tests)
from memlane.tokens import get_counter
from tests.context_scripts import DE, EN, write_locomo, write_script


def _msg(role: str, content: str = "x", i: int = 0, **kw: Any) -> Message:
    return Message(role=role, content=content, id=i, **kw)


def test_split_turns_and_groups() -> None:
    call = _msg("assistant", "", 3, tool_calls=[{"id": "c", "type": "function", "function": {"name": "f"}}])
    msgs = [
        _msg("system", "s", 1), _msg("user", "a", 2), call, _msg("tool", "r", 4, tool_call_id="c"),
        _msg("assistant", "done", 5), _msg("user", "b", 6), _msg("user", "b2", 7),
        _msg("assistant", "ok", 8), _msg("user", "c", 9),
    ]
    assert [[m.id for m in t] for t in split_turns(msgs)] == [[1, 2, 3, 4, 5], [6, 7, 8], [9]]
    groups = split_groups([_msg("tool", "orphan", 0, tool_call_id="zz"), *msgs[1:5]])
    assert [[m.id for m in g] for g in groups] == [[2], [3, 4], [5]]  # the orphan is dropped


def test_brief_turn_keeps_the_question() -> None:
    counter = get_counter(None)
    turn = [
        _msg("user", "Hi! Which snapshots are the biggest ones on backup-01?", 1),
        _msg("assistant", "", 2, tool_calls=[{"id": "c", "function": {"name": "list_snapshots"}}]),
        _msg("tool", "...", 3, tool_call_id="c"),
        _msg("assistant", "Great question. The biggest are weekly-2024-01 and weekly-2023-52.", 4),
    ]
    line = brief_turn(turn, counter)
    assert line == (
        "User: Which snapshots are the biggest ones on backup-01? / Assistant called list_snapshots"
        " / Assistant: The biggest are weekly-2024-01 and weekly-2023-52."
    )
    assert counter.count(brief_turn(turn, counter, max_tokens=12)) <= 12


def test_policy_every_ten_turns_keep_three_raw(mem: Memory) -> None:
    sid = mem.create_session(session_id="p")
    manager: SummaryManager = mem.parts.summaries
    seen: list[int] = []
    for i in range(1, 30):
        mem.store_interaction(f"Question {i} about the garden irrigation plan?",
                              f"Answer {i}: water the tomatoes every {i % 3 + 1} days.", session_id=sid)
        mem.flush()
        rec = manager.load(sid)
        seen.append(rec.covered_turns if rec else 0)
    # Block k is folded once 10k + 3 turns exist (3 raw turns kept, the newest one in flight).
    assert seen[11] == 0 and seen[12] == 10 and seen[21] == 10 and seen[22] == 20 and seen[-1] == 20
    rec = manager.load(sid)
    assert rec is not None and [b.first_turn for b in rec.blocks] == [0, 10]
    assert [b.turns for b in rec.blocks] == [10, 10]
    ids = [m.id for m in mem.load_session(sid)]
    assert rec.blocks[0].first_message_id == ids[0] and rec.blocks[1].last_message_id == ids[39]
    assert rec.last_message_id == ids[39]
    # Tokens saved: what the summarized messages cost minus what the summary costs.
    stored = mem.load_session(sid)[:40]
    assert rec.source_tokens == sum(m.token_count or 0 for m in stored)
    assert rec.tokens_saved == rec.source_tokens - rec.tokens > 0
    assert rec.tokens == get_counter(None).count(rec.text) <= manager.rolling_max_tokens
    # The same record, as stored (derived, JSON), for `memlane stats`.
    raw = mem.store.get_derived(sid, SUMMARY_KIND)
    assert raw is not None and raw["tokens_saved"] == rec.tokens_saved
    # Shared with the tracker's SessionState.
    assert mem.get_state(sid).rolling_summary == rec.text


def test_incremental_delta_per_block(mem: Memory, locomo_files: list[Path]) -> None:
    sid = mem.create_session(session_id="loc")
    write_locomo(mem, locomo_files[1], sid, sessions=4)
    mem.flush()
    manager: SummaryManager = mem.parts.summaries
    rec = manager.load(sid)
    assert rec is not None and len(rec.blocks) >= 3
    texts = [b.text for b in rec.blocks]
    assert len(set(texts)) == len(texts) and all(texts)
    assert all(b.topics for b in rec.blocks)
    # Each delta summarizes its own block only: its first words come from that range.
    for b in rec.blocks:
        assert b.tokens <= manager.block_max_tokens
        assert b.first_message_id <= b.last_message_id
    pairs = list(zip(rec.blocks, rec.blocks[1:], strict=False))
    assert all(a.last_message_id < b.first_message_id for a, b in pairs)
    # Rebuilding from the log from scratch gives the same record (derived, deterministic).
    mem.store.delete_derived(sid, SUMMARY_KIND)
    fresh = SummaryManager(mem).update(sid)
    assert fresh.text == rec.text and [b.text for b in fresh.blocks] == texts


def test_not_on_the_hot_path(tmp_path: Path) -> None:
    """Appends return before summarizing; flush() waits for the background thread."""
    with Memory(tmp_path / "m.db", embedder="hashing") as mem:
        manager: SummaryManager = mem.parts.summaries
        gate = threading.Event()
        original = manager.update
        timed_out: list[str] = []  # an update waited the whole minute: a write waited for it

        def slow_update(session_id: str, *, force: bool = False) -> SummaryRecord:
            if not gate.wait(60):
                timed_out.append(session_id)
            return original(session_id, force=force)

        manager.update = slow_update  # type: ignore[method-assign]
        sid = mem.create_session(session_id="hot")
        write_script(mem, sid, EN)
        assert not timed_out  # the writes returned while no summary could be made
        assert manager.load(sid) is None
        gate.set()
        mem.flush()
        rec = manager.load(sid)
        assert rec is not None and rec.covered_turns == 10


def test_flush_is_chained(tmp_path: Path) -> None:
    """mem.flush runs every part's flush hook in the order the parts were attached (the
    recall indexer's before the summaries'), none replacing another."""
    with Memory(tmp_path / "m.db", embedder="hashing") as mem:
        indexer, summaries = mem.parts.indexer, mem.parts.summaries
        assert indexer is not None and summaries is not None
        hooks = mem.parts.flush_hooks
        assert hooks.index(indexer.flush) < hooks.index(summaries.flush)
        marks: list[str] = []

        def earlier(timeout: float | None = None) -> None:
            marks.append(f"earlier {timeout}")

        def ours(timeout: float | None = None) -> None:
            marks.append(f"ours {timeout}")

        hooks[:] = [earlier]
        hooks.append(ours)
        mem.flush(2.5)
        assert marks == ["earlier 2.5", "ours 2.5"]
    with Memory(tmp_path / "m2.db", embedder="hashing") as mem:
        sid = mem.create_session(session_id="f")
        write_script(mem, sid, DE)
        mem.flush()
        assert mem.parts.summaries.worker.flush(0)  # nothing left queued


def test_forget_and_clear_rebuild_without_the_messages(mem: Memory) -> None:
    sid = mem.create_session(session_id="fg")
    write_script(mem, sid, EN)
    mem.flush()
    manager: SummaryManager = mem.parts.summaries
    rec = manager.load(sid)
    assert rec is not None and "job-4711" in rec.text
    secret = [m for m in mem.load_session(sid) if "job-4711" in m.content]
    mem.forget_messages([m.id for m in secret if m.id is not None])
    mem.flush()
    after = manager.current(sid)
    assert after is not None and "4711" not in after.text
    assert all("4711" not in b.text for b in after.blocks)
    # /clear hides the history from context: the summary of it goes too.
    mem.clear_session(sid)
    mem.add(sid, "A fresh start about printers.")
    packet = mem.context(sid, max_tokens=2000)
    assert packet.rolling_session_summary == ""
    assert "snapshot" not in json.dumps(packet.to_messages())


def test_malformed_record_is_rebuilt(mem: Memory) -> None:
    sid = mem.create_session(session_id="bad")
    write_script(mem, sid, EN)
    mem.flush()
    mem.store.put_derived(sid, SUMMARY_KIND, {"version": 1, "text": 5, "blocks": "nope"})
    packet = mem.context(sid, max_tokens=1500)
    assert packet.summary_covered_turns == 10 and packet.rolling_session_summary


@pytest.fixture
def chat_server() -> Iterator[TinyModel]:
    model: TinyModel
    with TinyModel(answer=lambda _messages: f"LLM summary #{len(model.requests)}.") as model:
        yield model


def test_llm_summarizer_when_configured(tmp_path: Path, chat_server: TinyModel) -> None:
    with Memory(tmp_path / "m.db", embedder="hashing", llm_base_url=chat_server.url, llm_model="tiny") as mem:
        sid = mem.create_session(session_id="llm")
        write_script(mem, sid, EN)
        mem.flush()
        rec = mem.parts.summaries.load(sid)
        assert rec is not None and rec.summarizer == "llm:tiny"
        assert rec.text.startswith("LLM summary") and rec.blocks[0].text.startswith("LLM summary")
        assert any("disk usage" in r["messages"][-1]["content"] for r in chat_server.requests)
    # Unreachable endpoint: the offline summary is used, nothing breaks.
    with Memory(tmp_path / "m2.db", embedder="hashing", llm_base_url="http://127.0.0.1:9/v1") as mem:
        manager: SummaryManager = mem.parts.summaries
        manager.summarizer.max_attempts = 1  # type: ignore[attr-defined]
        sid = mem.create_session(session_id="down")
        write_script(mem, sid, EN)
        mem.flush()
        rec = manager.load(sid)
        assert rec is not None and "job-4711" in rec.text
