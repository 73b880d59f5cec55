"""Rooms and people: the Anchor's configuration, speaker labels, rooms, lifecycle limits, stats."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from memlane import Memory, SessionNotFoundError, load_settings
from memlane.models import Message, utcnow
from memlane.rooms import anchor_id, ensure_room, label_messages, render_transcript
from memlane.rooms.lifecycle import MaintenanceTimer, maintain

ANCHOR = "@jan:matrix.org"


def test_the_anchor_comes_from_memlane_then_matrix_then_the_cli_default() -> None:
    assert anchor_id(load_settings(env={})) == "cli-user"
    assert anchor_id(load_settings(env={"MATRIX_USER_ID": "@m:x"})) == "@m:x"
    assert anchor_id(load_settings(env={"MATRIX_USER_ID": "@m:x", "MEMLANE_ANCHOR_ID": "@a:x"})) == "@a:x"
    assert anchor_id(load_settings(env={"MEMLANE_ANCHOR_ID": "  "})) == "cli-user"


def test_speaker_labels_tools_and_labelled_messages() -> None:
    msgs = [
        Message(role="system", content="Be brief."),
        Message(role="user", content="What is quantum computing?", author_id=ANCHOR, author_name="JanHein"),
        Message(role="assistant", content="", tool_calls=[
            {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q": "qubits"}'}}]),
        Message(role="tool", content="qubits are ...", tool_call_id="c1", name="search"),
        Message(role="assistant", content="Quantum computing uses qubits."),
        Message(role="user", content="How does that differ?", author_id="@maria:matrix.org"),
        Message(role="user", content="anonymous"),
    ]
    assert render_transcript(msgs, ANCHOR).splitlines() == [
        "System: Be brief.",
        "Anchor (JanHein): What is quantum computing?",
        'Assistant: [calls search({"q": "qubits"})]',
        "Tool (search): qubits are ...",
        "Assistant: Quantum computing uses qubits.",
        "maria: How does that differ?",
        "User: anonymous",
    ]
    assert render_transcript(msgs, ANCHOR, include_tools=False, assistant_name="Brain").splitlines()[2] == (
        "Brain: Quantum computing uses qubits."
    )
    labelled = label_messages(msgs, ANCHOR)
    assert [m.content for m in labelled if m.role == "user"] == [
        "Anchor (JanHein): What is quantum computing?", "maria: How does that differ?", "anonymous",
    ]
    assert msgs[1].content == "What is quantum computing?"  # the originals are untouched


def test_a_room_is_keyed_by_its_id_even_without_auto_create(tmp_path: Path) -> None:
    with Memory(tmp_path / "r.db", embedder="none", auto_create_sessions=False) as mem:
        with pytest.raises(SessionNotFoundError):
            mem.add("!r:x", "hi")
        room = ensure_room(mem, "!r:x", name="Lab")
        assert (room.id, room.title, room.metadata) == ("!r:x", "Lab", {"kind": "room", "room_id": "!r:x", "room_name": "Lab"})
        assert ensure_room(mem, "!r:x").created_at == room.created_at
        mem.add("!r:x", "hi", author_id="@a:x", author_name="A")
        mem.add("!r:x", "hello", author_id="@b:x", author_name="B")
        assert {m.author_name for m in mem.load_session("!r:x")} == {"A", "B"}


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    m = Memory(tmp_path / "life.db", embedder="none", anchor_id=ANCHOR, archive_after_days=30)
    yield m
    m.close()


def _old_session(mem: Memory, sid: str, days: int, turns: int = 1) -> None:
    when = utcnow() - timedelta(days=days)
    for i in range(turns):
        mem.add(sid, f"{sid} turn {i}: I love {sid}-topic{i}.", author_id=ANCHOR, created_at=when + timedelta(seconds=i))
        mem.add(sid, f"{sid} reply {i}", role="assistant", created_at=when + timedelta(seconds=i, milliseconds=1))
    # Imported history: the conversation was last active when its messages were said.
    mem.update_session(sid, last_active_at=when + timedelta(seconds=turns))


def test_maintain_archives_inactive_conversations_which_stay_searchable(mem: Memory) -> None:
    _old_session(mem, "old", days=45)
    _old_session(mem, "fresh", days=1)
    dry = maintain(mem, dry_run=True)
    assert dry.archived == ["old"] and mem.get_session("old").status == "active"
    report = mem.maintain()
    assert report.archived == ["old"] and report.promoted_sessions == 2
    assert mem.get_session("old").status == "archived"
    assert mem.maintain().archived == []  # once is enough
    assert [h.message.session_id for h in mem.search("old turn")][:1] == ["old"]
    assert mem.parts.notes.store.archived_sessions()[0][0] == "old"
    assert mem.unarchive_session("old") and mem.get_session("old").status == "active"
    assert not mem.unarchive_session("old")


def test_maintain_prunes_by_age_and_count_and_keeps_the_notes(tmp_path: Path) -> None:
    with Memory(tmp_path / "p.db", embedder="none", anchor_id=ANCHOR, auto_prune_days=60,
                max_sessions=2, archive_after_days=365) as mem:
        _old_session(mem, "ancient", days=90)
        _old_session(mem, "a", days=10)
        _old_session(mem, "b", days=5)
        _old_session(mem, "c", days=1)
        report = mem.maintain()
        assert report.pruned_inactive == ["ancient"]
        assert report.pruned_over_limit == ["a"]
        assert [s.id for s in mem.list_sessions()] == ["c", "b"]
        # Distilled knowledge outlives the pruned turns: promoted before, kept after.
        assert {"jan loves ancient-topic0.", "jan loves a-topic0."} <= {n.text for n in mem.notes()}


def test_maintain_trims_long_conversations_keeping_pinned_messages(tmp_path: Path) -> None:
    with Memory(tmp_path / "t.db", embedder="none", anchor_id=ANCHOR, max_turns_per_session=3) as mem:
        _old_session(mem, "long", days=1, turns=6)
        first = mem.load_session("long")[0]
        mem.mark_important(first.id or 0)
        report = mem.maintain()
        assert report.trimmed_messages == {"long": 5}
        left = mem.load_session("long")
        assert [m.content for m in left][:2] == ["long turn 0: I love long-topic0.", "long turn 3: I love long-topic3."]
        assert sum(1 for m in left if m.role == "user") == 4
        assert len(mem.notes()) == 6  # every turn's note was promoted before trimming


def test_maintenance_runs_on_a_schedule(mem: Memory) -> None:
    _old_session(mem, "old", days=45)
    timer = MaintenanceTimer(mem, minutes=0.002)
    try:
        deadline = time.monotonic() + 20
        while mem.get_session("old").status != "archived":
            assert time.monotonic() < deadline, "the scheduled maintain never ran"
            time.sleep(0.05)
    finally:
        timer.close()


def test_stats_report_notes_tokens_and_summary_savings(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with Memory(db, embedder="none", anchor_id=ANCHOR, summarize_every=2, keep_raw_turns=1) as mem:
        for i in range(8):
            mem.store_interaction(f"I love hobby number {i}, it is a long story about many things.",
                                  f"Tell me more about hobby {i}, please, in detail.", session_id="s",
                                  author_id=ANCHOR)
        mem.flush()
        stats = mem.stats()
    assert stats["messages"] == 16 and stats["tokens"] > 0 and stats["notes"] == 8
    assert {"notes_superseded", "facets", "archived_sessions", "audit_entries", "tokens_saved_by_summaries"} <= set(stats)
    assert stats["tokens_saved_by_summaries"] > 0
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"), "MEMLANE_EMBEDDER": "none"}
    out = subprocess.run([sys.executable, "-m", "memlane.cli.main", "--store", str(db), "stats", "--json"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["notes"] == 8 and data["tokens_saved_by_summaries"] == stats["tokens_saved_by_summaries"]
    out = subprocess.run([sys.executable, "-m", "memlane.cli.main", "--store", str(db), "maintain", "--json"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0 and json.loads(out.stdout)["dry_run"] is False


def test_an_archived_conversation_is_out_of_context_but_searchable(tmp_path: Path) -> None:
    with Memory(tmp_path / "a.db", embedder="hashing", anchor_id=ANCHOR) as mem:
        mem.add("old-room", "The zeppelin budget was approved at 42 million.", author_id=ANCHOR)
        mem.add("new-room", "Let's talk about the plan.", author_id=ANCHOR)
        mem.flush()

        def recalled() -> list[str]:
            packet = mem.context("new-room", "zeppelin budget", 2000)
            return [r.message.content for r in packet.recalled]

        assert recalled() == ["The zeppelin budget was approved at 42 million."]
        mem.archive_session("old-room")
        assert recalled() == []
        assert [h.message.session_id for h in mem.search("zeppelin budget")][:1] == ["old-room"]
        found = mem.handle_command("new-room", "search the archive for zeppelin", ANCHOR)
        assert [h.message.session_id for h in found.hits] == ["old-room"]
        mem.unarchive_session("old-room")
        assert recalled() == ["The zeppelin budget was approved at 42 million."]
