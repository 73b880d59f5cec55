"""Seed 003 (Matrix room brain): one conversation per room, speakers attributed, one Anchor.

Written from the seed's text: the Anchor is MATRIX_USER_ID in every interface ("cli-user"
in the CLI without it), prompts read "Anchor (JanHein): ..." / "Maria: ...", only the
Anchor may run memory commands ("forget this conversation", "remember this important
point"), older turns are condensed into topic summaries, and contradictions are resolved
when a statement changes over time.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlane import Memory
from memlane.config import load_settings
from memlane.rooms import ensure_room, render_transcript

ANCHOR = "@janhein:matrix.org"
MARIA = "@maria:matrix.org"
GARDEN = "!garden:matrix.org"
HOME = "!home:matrix.org"


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    settings = load_settings(env={"MATRIX_USER_ID": ANCHOR}, storage_path=str(tmp_path / "brain.db"))
    with Memory(settings=settings, embedder="hashing", anchor_name="JanHein", promote_every=1,
                summarize_every=2, keep_raw_turns=1) as m:
        ensure_room(m, GARDEN, name="Garten")
        ensure_room(m, HOME, name="Zuhause")
        yield m


def _say(mem: Memory, room: str, who: str | None, name: str | None, text: str, at: datetime | None = None) -> None:
    fields = {"author_id": who, "author_name": name} if who else {}
    mem.add(room, text, role="user" if who else "assistant", created_at=at, **fields)


def test_the_anchor_is_matrix_user_id_and_cli_user_without_it(tmp_path: Path) -> None:
    assert load_settings(env={"MATRIX_USER_ID": ANCHOR}).anchor_id == ANCHOR
    bare = load_settings(env={}, storage_path=str(tmp_path / "cli.db"))
    with Memory(settings=bare, embedder="none") as m:
        assert m.anchor_id == "cli-user" and m.is_anchor("cli-user")


def test_prompts_attribute_every_speaker_and_mark_the_anchor(mem: Memory) -> None:
    _say(mem, GARDEN, ANCHOR, "JanHein", "What is quantum computing?")
    _say(mem, GARDEN, None, None, "Quantum computing uses qubits that can exist in multiple states.")
    _say(mem, GARDEN, MARIA, "Maria", "How does that differ from classical computing?")
    assert render_transcript(mem.load_session(GARDEN), mem.anchor_id).splitlines() == [
        "Anchor (JanHein): What is quantum computing?",
        "Assistant: Quantum computing uses qubits that can exist in multiple states.",
        "Maria: How does that differ from classical computing?",
    ]
    sent = [m["content"] for m in mem.context(GARDEN, max_tokens=500).to_messages() if m["role"] == "user"]
    assert sent == ["Anchor (JanHein): What is quantum computing?", "Maria: How does that differ from classical computing?"]


def test_only_the_anchor_changes_memory_and_remember_this_keeps_their_point(mem: Memory) -> None:
    _say(mem, GARDEN, ANCHOR, "JanHein", "The garden key is in the blue box by the gate.")
    _say(mem, GARDEN, None, None, "Good to know, the blue box by the gate.")
    refused = mem.handle_command(GARDEN, "forget this conversation", MARIA, author_name="Maria")
    assert refused.recognized and not refused.allowed and len(mem.load_session(GARDEN)) == 2
    done = mem.handle_command(GARDEN, "remember this important point", ANCHOR, author_name="JanHein")
    assert done.allowed and done.changed
    # The Anchor's point, not the bot's acknowledgement of it.
    assert [n.text for n in done.notes] == ["JanHein: The garden key is in the blue box by the gate."]
    gone = mem.handle_command(GARDEN, "vergiss dieses Gespräch", ANCHOR, author_name="JanHein")
    assert gone.allowed and mem.load_session(GARDEN, include_hidden=True) == []


def test_a_changed_statement_is_not_recalled_as_current(mem: Memory) -> None:
    _say(mem, HOME, ANCHOR, "JanHein", "I love coffee, a flat white every morning.")
    _say(mem, HOME, None, None, "A flat white it is.")
    mem.flush()
    _say(mem, GARDEN, ANCHOR, "JanHein", "Actually I don't like coffee anymore, I prefer tea now.")
    _say(mem, GARDEN, None, None, "Tea it is.")
    mem.flush()
    packet = mem.context(GARDEN, "what does JanHein drink in the morning, coffee?", max_tokens=800)
    text = packet.to_messages()[0]["content"]
    assert "JanHein prefers tea." in text
    # Neither the superseded statement nor the reply that acknowledged it comes back.
    assert "I love coffee" not in text and "flat white" not in text
    recalled = mem.get_relevant_context("coffee flat white in the morning", max_tokens=800)
    assert not any("I love coffee" in m.content or "flat white" in m.content for m in recalled)


def test_topic_summaries_read_as_prose(mem: Memory) -> None:
    start = datetime(2025, 5, 3, 1, 31, tzinfo=UTC)
    lines = [
        (MARIA, "Maria", "The basil on my balcony keeps wilting in the afternoon."),
        (None, None, "Basil wilts in hot afternoon sun: water it in the morning and give it shade."),
        (ANCHOR, "JanHein", "Our tomatoes need deeper pots, at least 20 litres."),
        (None, None, "Tomatoes want deep pots with drainage holes."),
        (MARIA, "Maria", "I repotted the basil into a bigger pot yesterday."),
        (None, None, "Good, a bigger pot keeps the soil moist longer."),
        (ANCHOR, "JanHein", "The community garden meets every Saturday at 10."),
        (None, None, "Saturday at 10, got it."),
    ] * 4
    for i, (who, name, text) in enumerate(lines):
        _say(mem, GARDEN, who, name, text, at=start + timedelta(minutes=i))
    mem.flush()
    packet = mem.context(GARDEN, max_tokens=450, strategy="tiered")
    assert packet.topic_summaries
    text = packet.to_messages()[0]["content"]
    section = text.split("## Earlier in this conversation", 1)[1]
    assert "Maria: Maria:" not in section and "talked on" not in section
    assert "The user" not in section  # people are named
    assert text.count("## Earlier in this conversation") == 1
