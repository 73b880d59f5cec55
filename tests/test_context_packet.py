"""The ContextPacket: PRD fields, sections, strategies, recall, notes, JSON and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlane import Memory
from memlane.context.packet import ContextPacket
from memlane.context.strategies import STRATEGIES, archived_blocks
from memlane.errors import InvalidInputError, NotFoundError, SessionNotFoundError
from memlane.tokens import get_counter
from tests.context_scripts import DE, EN, tool_groups_intact, write_locomo, write_script

SYSTEM = "You are a careful Linux admin assistant."


def system_text(packet: ContextPacket) -> str:
    first = packet.to_messages()[0]
    assert first["role"] == "system"
    return str(first["content"])


def test_prd_fields_after_an_english_agent_session(mem: Memory) -> None:
    sid = mem.create_session(system_prompt=SYSTEM, session_id="ops-en", user_id="ops")
    write_script(mem, sid, EN)
    mem.flush()
    before = datetime.now(UTC)
    packet = mem.context(sid, max_tokens=1500)
    assert packet.conversation_id == "ops-en"
    assert packet.session_status == "active"
    assert packet.strategy == "hybrid"  # the configured default
    assert packet.turn_count == len(EN) == 14
    assert packet.active_job_refs == ["job-4712"]  # job-4711 finished in turn 10
    # "I will report back when it finishes" was kept: turn 10 reports "job-4711 finished"
    # (the tracker compares them by stems, "finishes"/"finished"), as the German script's
    # "Ich melde mich, wenn er fertig ist" is kept by "job-815 ist fertig"
    assert "I will report back when it finishes." not in packet.open_loops
    assert packet.last_response_type
    assert packet.active_topics and "rsync" in " ".join(packet.active_topics)
    assert before - timedelta(seconds=5) <= packet.context_compiled_at <= datetime.now(UTC)
    # 14 turns: one block of 10 summarized (3 kept raw, the newest never), incrementally.
    assert packet.summary_covered_turns == 10
    assert "job-4711" in packet.rolling_session_summary
    # Recent turns are the stored messages, verbatim, tool groups whole.
    stored = {m.id: m for m in mem.load_session(sid)}
    assert packet.recent_turns
    for m in packet.recent_turns:
        assert m.id is not None and stored[m.id].content == m.content
    assert packet.recent_turns[-1].content == EN[-1][2]
    msgs = packet.to_messages()
    assert msgs[0] == {"role": "system", "content": msgs[0]["content"]}
    assert msgs[0]["content"].startswith(SYSTEM)
    assert "## Session state" in msgs[0]["content"] and "job-4712" in msgs[0]["content"]
    assert tool_groups_intact(msgs)
    assert get_counter(None).count_messages(packet.render().messages) <= 1500
    # JSON for other runtimes: the same messages and budget, every PRD field present.
    data = json.loads(packet.to_json())
    for key in (
        "conversation_id", "session_status", "recent_turns", "recent_turn_summaries",
        "rolling_session_summary", "active_topics", "active_job_refs", "pending_clarifications",
        "open_loops", "resolved_entities_map", "last_response_type", "context_compiled_at",
        "recalled", "notes", "budget", "messages",
    ):
        assert key in data, key
    assert data["messages"] == msgs
    assert data["budget"]["used"] == sum(data["budget"]["sections"].values())


def test_german_session_pending_clarification_and_turn_summaries(mem: Memory) -> None:
    sid = mem.create_session(system_prompt="Du bist ein sorgfältiger Admin-Assistent.", session_id="ops-de")
    write_script(mem, sid, DE[:9])  # ends with the assistant asking which certificates
    mem.flush()
    packet = mem.context(sid, max_tokens=2000)
    assert packet.session_status == "awaiting_clarification"
    assert packet.pending_clarifications == [
        "Soll ich nur das Zertifikat für mail-01 erneuern oder alle Zertifikate?"
    ]
    text = system_text(packet)
    assert "Waiting for the user to clarify:" in text and "Zertifikat für mail-01" in text
    assert any("Zertifikat" in t for t in packet.active_topics)
    # 9 turns: no block yet; hybrid sends 10 turns verbatim, so all 9 are verbatim.
    assert packet.rolling_session_summary == ""
    assert packet.meta["reached_start"] is True
    assert len([m for m in packet.recent_turns if m.role == "user"]) == 9
    # A tight budget pushes old turns out: they come back as one-line turn summaries.
    tight = mem.context(sid, max_tokens=450)
    assert tight.recent_turn_summaries
    assert tight.recent_turn_summaries[0].startswith("User: Kannst du prüfen, wie voll die Festplatte")
    assert "Recent turns in brief:" in system_text(tight)
    covered = {m.id for m in tight.recent_turns}
    first_user = mem.load_session(sid)[0]
    assert first_user.id not in covered


def test_summaries_present_after_ten_turns_every_strategy(mem: Memory) -> None:
    sid = mem.create_session(session_id="long")
    write_script(mem, sid, EN, repeat=3)  # 42 turns
    mem.flush()
    record = mem.parts.summaries.load(sid)
    assert record is not None and record.covered_turns == 30 and len(record.blocks) == 3
    for name in ("summary", "hybrid"):
        packet = mem.context(sid, max_tokens=1200, strategy=name)
        assert packet.rolling_session_summary == record.text
        assert "## Earlier in this conversation" in system_text(packet)
    tiered = mem.context(sid, max_tokens=1200, strategy="tiered")
    assert tiered.topic_summaries
    assert "Earlier topics:" in system_text(tiered)
    simple = mem.context(sid, max_tokens=1200, strategy="simple")
    assert all(m["role"] != "system" for m in simple.to_messages())  # the window only


def test_simple_strategy_is_the_window(mem: Memory) -> None:
    sid = mem.create_session(system_prompt=SYSTEM, session_id="w")
    write_script(mem, sid, EN)
    for budget in (120, 400, 900, 5000):
        packet = mem.context(sid, max_tokens=budget, strategy="simple")
        window = mem.window(sid, budget)
        got = [(m.id, m.content) for m in packet.render().messages[1:]]
        want = [(m.id, m.content) for m in window.messages[1:]]
        # Same newest messages; the packet keeps whole turns, so it may start a little later.
        assert got and set(got) <= set(want) and got[-1] == want[-1]
        assert packet.render().messages[0].content == SYSTEM


def test_recall_across_sessions_of_the_same_user_only(mem: Memory) -> None:
    old = mem.create_session(session_id="old", user_id="ops", title="Backups in March")
    write_script(mem, old, EN)
    other = mem.create_session(session_id="other-user", user_id="eve")
    mem.add(other, "Our rsync compression secret is hunter2.")
    new = mem.create_session(session_id="new", user_id="ops")
    mem.add(new, "Hi again, I need to change the backup setup.")
    mem.flush()
    packet = mem.context(new, query="rsync compression", max_tokens=1500)
    assert packet.recalled
    assert {r.session_id for r in packet.recalled} == {"old"}
    assert any("compression" in r.message.content for r in packet.recalled)
    text = system_text(packet)
    assert "## Relevant earlier messages" in text and "in Backups in March" in text
    assert "hunter2" not in json.dumps(packet.to_dict())
    # Without a query nothing is recalled.
    assert mem.context(new, max_tokens=1500).recalled == []


def test_recalled_message_not_repeated_when_verbatim(mem: Memory) -> None:
    sid = mem.create_session(session_id="dup")
    write_script(mem, sid, EN[:5])
    packet = mem.context(sid, query="weekly snapshots biggest", max_tokens=4000)
    msgs = packet.render().messages
    verbatim = {m.content for m in msgs[1:]}
    assert "The weekly ones." in verbatim
    assert "## Relevant earlier messages" not in (msgs[0].content if msgs[0].role == "system" else "")


@dataclass
class _Note:
    text: str


def test_long_term_notes_extension(mem: Memory) -> None:
    sid = mem.create_session(session_id="n")
    write_script(mem, sid, EN[:4])
    calls: list[tuple[str, str | None, int]] = []

    def notes(session_id: str, query: str | None, max_tokens: int) -> list[_Note]:
        calls.append((session_id, query, max_tokens))
        return [_Note("The user prefers zstd compression."), _Note("Backups go to nas:/volume1.")]

    mem.parts.notes = notes
    packet = mem.context(sid, max_tokens=1000)
    assert packet.notes == ["The user prefers zstd compression.", "Backups go to nas:/volume1."]
    assert calls == [("n", "The weekly ones.", 100)]  # no query: the newest user message
    assert "## Long-term notes\n- The user prefers zstd compression." in system_text(packet)
    packet = mem.context(sid, query="compression", max_tokens=1000)
    assert calls[-1][1] == "compression"

    def broken(session_id: str, query: str | None, max_tokens: int) -> list[_Note]:
        raise NotFoundError("notes store unavailable")

    mem.parts.notes = broken
    assert mem.context(sid, max_tokens=1000).notes == []  # skipped, no crash
    mem.parts.notes = object()
    assert mem.context(sid, max_tokens=1000).notes == []


def test_tiered_on_a_long_locomo_dialogue(tmp_path: Path, locomo_files: list[Path]) -> None:
    # Blocks of 4 turns: the 8-session fixture then spans more blocks than the summarized tier
    # holds (real LoCoMo conversations reach that with the default 10).
    with Memory(tmp_path / "memory.db", embedder="hashing", summarize_every=4) as mem:
        sid = mem.create_session(session_id="locomo")
        n = write_locomo(mem, locomo_files[0], sid)
        assert n > 180
        packet = mem.context(sid, max_tokens=3000, strategy="tiered")
        assert packet.archived, "very old blocks are archived"
        assert packet.topic_summaries
        first = packet.topic_summaries[0]
        assert first.first_turn > packet.archived[-1].last_turn
        assert first.topics and first.text
        text = system_text(packet)
        assert "Earlier topics:" in text
        # Archived turns are not in the context...
        archived_ids = {packet.archived[0].first_message_id, packet.archived[0].last_message_id}
        assert not archived_ids & {m.id for m in packet.render().messages}
        assert packet.archived[0].text not in text
        # ...but retrievable by command.
        blocks = archived_blocks(mem, sid)
        assert [b.first_turn for b in blocks] == [b.first_turn for b in packet.archived]
        assert all(b.text for b in blocks)
        assert get_counter(None).count_messages(packet.render().messages) <= 3000


def test_strategy_selection_and_errors(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="hashing", strategy="summary") as mem:
        sid = mem.create_session(session_id="s")
        mem.add(sid, "hello")
        assert mem.context(sid).strategy == "summary"
        assert mem.context(sid).max_tokens == mem.settings.max_history_tokens
        assert mem.context(sid, strategy="summarization").strategy == "summary"
        with pytest.raises(InvalidInputError, match="unknown context strategy"):
            mem.context(sid, strategy="magic")
        with pytest.raises(InvalidInputError, match="max_tokens"):
            mem.context(sid, max_tokens=0)
        with pytest.raises(InvalidInputError, match="query"):
            mem.context(sid, query=42)  # type: ignore[arg-type]
        with pytest.raises(SessionNotFoundError):
            mem.context("nope")
        assert set(STRATEGIES) >= {"simple", "summary", "hybrid", "tiered"}


def test_empty_session_and_tiny_budget(mem: Memory) -> None:
    sid = mem.create_session(system_prompt=SYSTEM, session_id="empty")
    packet = mem.context(sid, max_tokens=50)
    assert packet.recent_turns == [] and packet.turn_count == 0
    assert packet.to_messages() == [{"role": "system", "content": SYSTEM}]
    assert mem.context(sid, max_tokens=2).to_messages() == []


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"),
           "MEMLANE_EMBEDDER": "hashing"}
    return subprocess.run(
        [sys.executable, "-m", "memlane.cli.main", *args],
        capture_output=True, text=True, env=env, timeout=120,
    )


def test_cli_context(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    with Memory(db, embedder="hashing") as mem:
        sid = mem.create_session(system_prompt=SYSTEM, session_id="cli-s")
        write_script(mem, sid, EN)
    out = _cli("--store", str(db), "context", "cli-s", "--max-tokens", "600", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["conversation_id"] == "cli-s" and data["budget"]["used"] <= 600
    assert data["turn_count"] == 14
    shown = _cli("--store", str(db), "context", "cli-s", "-t", "500", "-q", "rsync", "-s", "summary")
    assert shown.returncode == 0, shown.stderr
    assert "strategy=summary" in shown.stdout and "tokens" in shown.stdout and "recent" in shown.stdout
    bad = _cli("--store", str(db), "context", "cli-s", "--strategy", "magic")
    assert bad.returncode != 0 and "unknown context strategy" in bad.stderr
    arch = _cli("--store", str(db), "context", "cli-s", "--archived", "--json")
    assert arch.returncode == 0 and json.loads(arch.stdout) == []


def test_room_messages_carry_the_speaker(tmp_path: Path) -> None:
    """Seed 003: in a room everybody is "user"; the packet says who spoke, the Anchor marked."""
    from memlane.rooms.anchor import ensure_room

    with Memory(tmp_path / "r.db", embedder="hashing", anchor_id="@jan:example.org",
                anchor_name="JanHein") as mem:
        room = ensure_room(mem, "!room:example.org", name="Physics").id
        mem.add(room, "What is quantum computing?", author_id="@jan:example.org", author_name="JanHein")
        mem.add(room, "Quantum computing uses qubits.", role="assistant")
        mem.add(room, "How does that differ from classical computing?", author_id="@maria:example.org",
                author_name="Maria")
        packet = mem.context(room, max_tokens=300)
        users = [m["content"] for m in packet.to_messages() if m["role"] == "user"]
        assert users == [
            "Anchor (JanHein): What is quantum computing?",
            "Maria: How does that differ from classical computing?",
        ]
        assert packet.budget is not None
        assert packet.budget.used == get_counter(None).count_messages(packet.render().messages)
        # The stored messages are untouched.
        assert mem.load_session(room)[0].content == "What is quantum computing?"


def test_summary_strategy_sends_a_short_history_whole(mem: Memory) -> None:
    sid = mem.create_session(session_id="short")
    for i in range(25):  # 25 short turns: over 20, but well within the budget
        mem.store_interaction(f"ping {i}", f"pong {i}", session_id=sid)
    mem.flush()
    whole = mem.context(sid, max_tokens=4000, strategy="summary")
    assert whole.meta["reached_start"] and len(whole.recent_turns) == 50
    assert "## Earlier in this conversation" not in json.dumps(whole.to_messages())
    tight = mem.context(sid, max_tokens=300, strategy="summary")
    assert not tight.meta["reached_start"] and tight.meta["candidate_turns"] <= 20
