"""A scripted multi-room scenario (seed 003), in English and German, on a real SQLite file.

Two Matrix rooms and the CLI share one Anchor (JanHein). The script checks that the
Anchor is recognised everywhere and that memory about the Anchor is shared, that a
non-Anchor cannot make memlane forget, that a changed preference supersedes the old note
(the packet shows only the new one, the history both), and that the Anchor's "forget this
conversation" leaves nothing behind: no message, index entry, vector, summary, state,
checkpoint, facet or note, in search, context or export.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memlane import Memory
from memlane.rooms import ensure_room, render_transcript

ANCHOR = "@janhein:matrix.org"
MARIA = "@maria:matrix.org"
OMA = "@oma:matrix.org"
PHYSICS = "!physics:matrix.org"
FAMILIE = "!familie:matrix.org"
CLI = "cli"


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    m = Memory(
        tmp_path / "rooms.db", embedder="hashing", anchor_id=ANCHOR, anchor_name="JanHein",
        promote_every=2, summarize_every=2, keep_raw_turns=1,
    )
    yield m
    m.close()


def _say(mem: Memory, room: str, who: str | None, name: str | None, text: str) -> int:
    role = "assistant" if who is None else "user"
    msg = mem.add(room, text, role=role, **({"author_id": who, "author_name": name} if who else {}))
    assert msg.id is not None
    return msg.id


def _script(mem: Memory) -> dict[str, list[int]]:
    ensure_room(mem, PHYSICS, name="Physik-Runde")
    ensure_room(mem, FAMILIE, name="Familie")
    mem.ensure_session(CLI)
    ids: dict[str, list[int]] = {PHYSICS: [], FAMILIE: [], CLI: []}
    for room, who, name, text in [
        (PHYSICS, ANCHOR, "JanHein", "What is quantum computing?"),
        (PHYSICS, None, None, "Quantum computing uses qubits that can exist in several states at once."),
        (PHYSICS, MARIA, "Maria", "How does that differ from classical computing? I work at CERN by the way."),
        (PHYSICS, None, None, "Classical computing uses bits that are either 0 or 1."),
        (PHYSICS, ANCHOR, "JanHein", "I love coffee in the morning, it keeps me thinking about qubits."),
        (PHYSICS, None, None, "Noted: coffee in the morning."),
        (FAMILIE, ANCHOR, "JanHein", "Hallo zusammen! Ich wohne jetzt in Hamburg."),
        (FAMILIE, None, None, "Schön, willkommen in Hamburg."),
        (FAMILIE, OMA, "Oma", "Ich mag Apfelkuchen. Wann kommst du uns besuchen?"),
        (FAMILIE, None, None, "JanHein plant einen Besuch im Sommer."),
        (CLI, ANCHOR, None, "Let's plan the week."),
        (CLI, None, None, "Sure, what is first?"),
    ]:
        ids[room].append(_say(mem, room, who, name, text))
    mem.flush()
    return ids


def test_the_anchor_is_recognised_in_two_rooms_and_the_cli(mem: Memory) -> None:
    _script(mem)
    physics = render_transcript(mem.load_session(PHYSICS), mem.anchor_id)
    assert physics.splitlines()[:3] == [
        "Anchor (JanHein): What is quantum computing?",
        "Assistant: Quantum computing uses qubits that can exist in several states at once.",
        "Maria: How does that differ from classical computing? I work at CERN by the way.",
    ]
    familie = render_transcript(mem.load_session(FAMILIE), mem.anchor_id)
    assert "Anchor (JanHein): Hallo zusammen! Ich wohne jetzt in Hamburg." in familie
    assert "Oma: Ich mag Apfelkuchen. Wann kommst du uns besuchen?" in familie
    cli = mem.load_session(CLI)
    assert mem.is_anchor(cli[0].author_id)
    # A CLI message carries only the id; the configured anchor_name names it.
    assert render_transcript(cli, mem.anchor_id).startswith("Anchor (janhein): Let's plan the week.")
    assert render_transcript(cli, mem.anchor_id, anchor_name="JanHein").startswith(
        "Anchor (JanHein): Let's plan the week.\nAssistant: Sure, what is first?"
    )
    # Bound to the Memory's Anchor (and its name) for the context engine:
    assert mem.parts.render_transcript(cli[:1]) == "Anchor (JanHein): Let's plan the week."

    # Memory about the Anchor is shared by every room and the CLI; Maria's stays in her room.
    provider = mem.parts.notes
    for room in (PHYSICS, FAMILIE, CLI):
        texts = [n.text for n in provider(room, "coffee Hamburg", 500)]
        assert "JanHein loves coffee in the morning." in texts, room
        assert "JanHein wohnt in Hamburg." in texts, room
    assert "Maria works at CERN." in [n.text for n in provider(PHYSICS, "Where does Maria work? CERN", 500)]
    assert "Maria works at CERN." not in [n.text for n in provider(FAMILIE, "CERN", 500)]
    assert "Oma mag Apfelkuchen." in [n.text for n in provider(FAMILIE, "Kuchen Apfelkuchen", 500)]
    assert "Oma mag Apfelkuchen." not in [n.text for n in provider(CLI, "Apfelkuchen", 500)]

    # Anchor status is computed, not stored: another Anchor changes it everywhere at once.
    mem.settings = mem.settings.model_copy(update={"anchor_id": MARIA})
    assert render_transcript(mem.load_session(PHYSICS), mem.anchor_id).splitlines()[0] == (
        "JanHein: What is quantum computing?"
    )
    assert "JanHein loves coffee in the morning." not in [n.text for n in provider(FAMILIE, "coffee", 500)]


def test_a_non_anchor_forget_is_refused_and_changes_nothing(mem: Memory) -> None:
    _script(mem)
    before = (mem.store.count_messages(PHYSICS), len(mem.notes(include_history=True)))
    refused = mem.handle_command(PHYSICS, "Please forget this conversation!", MARIA, author_name="Maria")
    assert refused.recognized and refused.action == "forget_conversation"
    assert not refused.allowed and not refused.changed
    assert refused.message == "Only JanHein can change what I remember. Nothing was changed."
    german = mem.handle_command(FAMILIE, "Vergiss dieses Gespräch", OMA, author_name="Oma")
    assert not german.allowed and "Es wurde nichts geändert" in german.message
    merk = mem.handle_command(FAMILIE, "Merk dir das", OMA, author_name="Oma")
    assert not merk.allowed
    assert (mem.store.count_messages(PHYSICS), len(mem.notes(include_history=True))) == before
    assert mem.store.count_messages(FAMILIE) == 4

    audit = mem.parts.notes.store.list_audit()
    assert [(e.actor_id, e.action, e.allowed, e.result) for e in audit] == [
        (OMA, "remember", False, "refused"),
        (OMA, "forget_conversation", False, "refused"),
        (MARIA, "forget_conversation", False, "refused"),
    ]
    assert audit[-1].command == "Please forget this conversation!" and not audit[-1].is_anchor


def test_a_changed_preference_supersedes_and_the_packet_shows_only_the_new_one(mem: Memory) -> None:
    _script(mem)
    old = next(n for n in mem.notes() if n.text == "JanHein loves coffee in the morning.")
    # Days later, in the CLI, the Anchor changed their mind (English), then says it in German.
    _say(mem, CLI, ANCHOR, None, "Actually I don't like coffee anymore, I prefer tea now.")
    _say(mem, CLI, None, None, "Tea it is.")
    mem.flush()

    provider = mem.parts.notes
    texts = [n.text for n in provider(FAMILIE, "What should JanHein drink, coffee or tea?", 500)]
    assert "JanHein does not like coffee." in texts
    assert "JanHein prefers tea." in texts
    assert "JanHein loves coffee in the morning." not in texts

    history = mem.note_history(old.id or 0)
    assert [(n.text, n.current) for n in history] == [
        ("JanHein loves coffee in the morning.", False),
        ("JanHein does not like coffee.", True),
    ]
    assert history[0].valid_to == history[1].valid_from
    assert history[1].supersedes == old.id

    # The context engine's packet carries the notes: only what is true now.
    packet = mem.context(FAMILIE, "Was soll ich trinken, Kaffee oder Tee? coffee tea", 2000)
    joined = "\n".join(packet.notes)
    assert "JanHein prefers tea." in joined and "JanHein does not like coffee." in joined
    assert "loves coffee" not in joined

    # The same change in German supersedes the German note too.
    _say(mem, FAMILIE, ANCHOR, "JanHein", "Mein Lieblingsgetränk ist Kaffee.")
    _say(mem, FAMILIE, ANCHOR, "JanHein", "Nein, mein Lieblingsgetränk ist jetzt Tee.")
    mem.flush()
    fav = [n for n in mem.notes(include_history=True) if n.slot == "fav:getrank"]
    assert [(n.value, n.current) for n in fav] == [("Tee", True), ("Kaffee", False)]


def _all_text(mem: Memory, session_id: str, query: str) -> str:
    packet = mem.context(session_id, query, 4000)
    parts = [str(m.get("content", "")) for m in packet.to_messages()]
    return "\n".join(parts + packet.notes)


def test_an_anchor_forget_removes_everything_derived(mem: Memory) -> None:
    ids = _script(mem)
    physics_ids = ids[PHYSICS]
    conn = mem.store.connection  # type: ignore[attr-defined]
    marks = ",".join("?" * len(physics_ids))
    # The checkpoint component is part of every build: a missing one must fail, not skip.
    checkpoints = mem.parts.checkpoints
    checkpoints.write(PHYSICS)
    path = checkpoints.path_for(PHYSICS)
    assert path is not None
    # Everything exists before: index entries, vectors, derived state, facets, notes.
    assert mem.store.keyword_search("qubits", _flt(PHYSICS))
    assert conn.execute(f"SELECT COUNT(*) FROM message_vectors WHERE message_id IN ({marks})", physics_ids).fetchone()[0] > 0
    assert conn.execute("SELECT COUNT(*) FROM message_facets WHERE session_id = ?", (PHYSICS,)).fetchone()[0] > 0
    assert conn.execute("SELECT COUNT(*) FROM derived WHERE session_id = ?", (PHYSICS,)).fetchone()[0] > 0
    assert any("CERN" in n.text for n in mem.notes())
    assert path.exists()
    # The Anchor marks something important first, then remembers a point: both audited.
    assert mem.handle_command(PHYSICS, "mark this as important", ANCHOR).changed
    assert mem.handle_command(PHYSICS, "Remember this important point: the qubit demo is on Friday", ANCHOR).changed

    result = mem.handle_command(PHYSICS, "forget this conversation", ANCHOR, author_name="JanHein")
    assert result.allowed and result.changed
    assert result.message.startswith("Done: I forgot this conversation (6 messages")
    mem.flush()

    # The room still exists (empty), so it keeps working.
    room = mem.get_session(PHYSICS)
    assert room.message_count == 0 and room.title == "Physik-Runde"
    # Messages, FTS entries, vectors, turns, derived records, facets, checkpoint: gone.
    assert mem.store.get_messages(physics_ids) == []
    assert conn.execute(f"SELECT COUNT(*) FROM messages_fts WHERE rowid IN ({marks})", physics_ids).fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH 'qubits OR CERN'").fetchone()[0] == 0
    assert conn.execute(f"SELECT COUNT(*) FROM message_vectors WHERE message_id IN ({marks})", physics_ids).fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM derived WHERE session_id = ?", (PHYSICS,)).fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM message_facets WHERE session_id = ?", (PHYSICS,)).fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM note_sources WHERE session_id = ?", (PHYSICS,)).fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM notes WHERE session_id = ?", (PHYSICS,)).fetchone()[0] == 0
    assert not path.exists()
    # Notes learned there are gone (Maria's job, the Anchor's coffee, the remembered point);
    # notes learned elsewhere stay.
    texts = [n.text for n in mem.notes(include_history=True)]
    assert not any(w in t for t in texts for w in ("CERN", "coffee", "qubit", "quantum"))
    assert "JanHein wohnt in Hamburg." in texts
    # No search, context or export returns any of it.
    for query in ("quantum computing qubits", "CERN", "coffee in the morning", "qubit demo Friday"):
        assert [h for h in mem.search(query, top_k=20) if h.message.session_id == PHYSICS] == []
        for session in (PHYSICS, FAMILIE, CLI):
            text = _all_text(mem, session, query)
            for word in ("qubit", "CERN", "coffee", "quantum"):
                assert word not in text, (session, query, word)
    exported = mem.export_session(PHYSICS)
    assert "qubit" not in exported and "CERN" not in exported
    recall = mem.handle_command(FAMILIE, "what do you remember about CERN?", ANCHOR)
    assert recall.notes == [] and recall.hits == []
    # The audit log keeps who/what/when of every command, not the forgotten words.
    audit = mem.parts.notes.store.list_audit(session_id=PHYSICS)
    assert [(e.action, e.result) for e in audit] == [
        ("forget_conversation", "ok"), ("remember", "ok"), ("mark_important", "ok"),
    ]
    assert audit[1].command == "[forgotten]" and audit[0].command == "forget this conversation"
    assert audit[0].detail["messages"] == 6


def _flt(session_id: str) -> object:
    from memlane.models import MessageFilter

    return MessageFilter(session_id=session_id)


def test_german_and_english_memory_commands_by_the_anchor(mem: Memory) -> None:
    _script(mem)
    res = mem.handle_command(FAMILIE, "merk dir das", ANCHOR)
    assert res.allowed and res.changed and res.lang == "de"
    assert res.message.startswith("Ich merke mir: JanHein plant einen Besuch im Sommer")
    pinned = [m for m in mem.load_session(FAMILIE) if m.pinned]
    assert [m.content for m in pinned] == ["JanHein plant einen Besuch im Sommer."]
    res = mem.handle_command(FAMILIE, "Merk dir: der Türcode ist 4711", ANCHOR)
    assert any("4711" in n.text for n in res.notes)
    # Notes of the Anchor are shared: the CLI and the physics room can recall it.
    found = mem.handle_command(CLI, "Was weißt du über den Türcode?", ANCHOR)
    assert found.allowed and any("4711" in n.text for n in found.notes)
    assert found.message.startswith("Was ich über den Türcode weiß:")
    # Maria may ask, but only hears what her room knows.
    maria = mem.handle_command(PHYSICS, "what do you remember about the Türcode?", MARIA)
    assert maria.allowed and maria.notes == [] and maria.hits == []
    me = mem.handle_command(CLI, "what do you know about me?", ANCHOR)
    assert any("Hamburg" in n.text for n in me.notes)
