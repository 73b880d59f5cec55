"""Long-term notes: extraction, the promotion gate, supersede/history, recall for the packet."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memlane import InvalidInputError, Memory, NotFoundError, SessionNotFoundError
from memlane.models import Message, utcnow
from memlane.notes.extract import ExtractionContext, LLMExtractor, RuleExtractor, annotate
from memlane.notes.gate import PromotionGate
from memlane.notes.models import NoteCandidate
from memlane.notes.store import SQLiteNoteStore
from memlane.tiny_model import TinyModel  # the one stand-in chat model (examples, bench, tests)

ANCHOR = "@jan:matrix.org"
CTX = ExtractionContext(session_id="room", anchor_id=ANCHOR, anchor_name="JanHein")


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    m = Memory(tmp_path / "notes.db", embedder="hashing", anchor_id=ANCHOR, anchor_name="JanHein")
    yield m
    m.close()


def _extract(text: str, author: str | None = ANCHOR, name: str | None = "JanHein") -> list[tuple[Any, ...]]:
    msg = Message(role="user", content=text, id=1, author_id=author, author_name=name)
    return [(c.kind, c.slot, c.value, c.polarity, c.text) for c in RuleExtractor().extract([msg], CTX)
            if c.importance >= 0.5]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I love coffee in the morning.",
         [("preference", "pref:coffe", "coffee in the morning", 1, "JanHein loves coffee in the morning.")]),
        ("Actually I don't like coffee anymore, I prefer tea now.",
         [("preference", "pref:coffe", "coffee", -1, "JanHein does not like coffee."),
          ("preference", "pref:tea", "tea", 1, "JanHein prefers tea.")]),
        ("I prefer tea over coffee.", [("preference", "pref:tea", "tea", 1, "JanHein prefers tea over coffee.")]),
        ("My favourite drink is espresso.",
         [("preference", "fav:drink", "espresso", 1, "JanHein's favourite drink is espresso.")]),
        ("My email is jan@example.org", [("fact", "attr:email", "jan@example.org", 1, "JanHein's email is jan@example.org.")]),
        ("I work at CERN.", [("fact", "work", "CERN", 1, "JanHein works at CERN.")]),
        ("I just moved to Berlin last month!", [("fact", "home", "Berlin", 1, "JanHein moved to Berlin.")]),
        ("We decided to use PostgreSQL for the backend.",
         [("decision", "decision:use postgresql for backend", "use PostgreSQL for the backend", 1,
           "Decision (JanHein): use PostgreSQL for the backend.")]),
        ("I'll send the report on Friday.",
         [("commitment", "commit:send report on friday", "send the report on Friday", 1,
           "JanHein will send the report on Friday.")]),
        ("Docs are at https://example.org/guide, have a look.",
         [("link", "link:https://example.org/guide", "https://example.org/guide", 1,
           "JanHein shared a link: https://example.org/guide")]),
        ("Ich mag keinen Kaffee mehr.", [("preference", "pref:kaffe", "Kaffee", -1, "JanHein mag Kaffee nicht.")]),
        ("Mein Lieblingsgetränk ist Tee.",
         [("preference", "fav:getrank", "Tee", 1, "JanHeins Lieblingsgetränk ist Tee.")]),
        ("Ich wohne jetzt in Hamburg.", [("fact", "home", "Hamburg", 1, "JanHein wohnt in Hamburg.")]),
        ("Ich arbeite bei Siemens.", [("fact", "work", "Siemens", 1, "JanHein arbeitet bei Siemens.")]),
        ("Wir haben beschlossen, dass wir Python nehmen.",
         [("decision", "decision:wir python nehm", "wir Python nehmen", 1, "Beschluss (JanHein): wir Python nehmen.")]),
        # Not worth a note: questions, hedges, pronoun objects, wishes, opinions about "my point".
        ("Do you like tea?", []),
        ("Maybe I like jazz.", []),
        ("I like it.", []),
        ("I would love to visit Rome.", []),
        ("My point is that we should wait.", []),
        ("What is quantum computing?", []),
    ],
)
def test_rule_extractor(text: str, expected: list[tuple[Any, ...]]) -> None:
    assert _extract(text) == expected


def test_speakers_without_author_are_the_anchor_and_commands_are_skipped() -> None:
    ctx = ExtractionContext(session_id="s", anchor_id="cli-user", is_command=lambda t: t.startswith("remember"))
    msgs = [
        Message(role="user", content="I work at ACME.", id=1),
        Message(role="user", content="remember this: I work at Globex.", id=2),
        Message(role="assistant", content="I love helping.", id=3),
    ]
    found = RuleExtractor().extract(msgs, ctx)
    assert [(c.user_id, c.text) for c in found] == [("cli-user", "The user works at ACME.")]


def test_annotate_tracks_entities_links_dates_and_actions() -> None:
    msgs = [
        Message(role="user", content="Meet Maria Lopez in Berlin next Friday, see https://example.org/x.",
                id=1, session_id="s"),
        Message(role="assistant", content="", id=2, session_id="s", tool_calls=[
            {"id": "c1", "type": "function", "function": {"name": "web_search", "arguments": '{"q": "Berlin"}'}}]),
        Message(role="tool", content="{...}", id=3, session_id="s", tool_call_id="c1", name="web_search"),
    ]
    facets = {(f.message_id, f.kind, f.value) for f in annotate(msgs)}
    assert {(1, "entity", "Maria Lopez"), (1, "entity", "Berlin"), (1, "link", "https://example.org/x"),
            (1, "time", "next Friday"), (2, "action", 'web_search({"q": "Berlin"})'),
            (3, "action", "result of web_search")} <= facets


def _cand(slot: str, value: str, polarity: int, mid: int, *, minutes: int = 0, text: str | None = None) -> NoteCandidate:
    return NoteCandidate(
        text=text or f"{value} {polarity}", kind="preference", user_id=ANCHOR, source_ids=[mid],
        session_id="room", slot=slot, value=value, polarity=polarity, importance=0.7,
        valid_from=utcnow() + timedelta(minutes=minutes),
    )


def test_gate_merges_supersedes_files_history_and_rejects(mem: Memory) -> None:
    ids = [mem.add("room", f"message {i}").id or 0 for i in range(6)]
    store = SQLiteNoteStore(mem.store)  # type: ignore[arg-type]
    gate = PromotionGate(store, min_importance=0.5)
    created = gate.write_if_worthy(_cand("pref:coffee", "coffee", 1, ids[0]))
    assert created.action == "created"
    merged = gate.write_if_worthy(_cand("pref:coffee", "Coffee!", 1, ids[1], minutes=1))
    assert merged.action == "merged" and merged.note is not None
    assert (merged.note.id, merged.note.seen_count, merged.note.source_ids) == (created.note.id, 2, ids[:2])  # type: ignore[union-attr]
    flipped = gate.write_if_worthy(_cand("pref:coffee", "coffee", -1, ids[2], minutes=2))
    assert flipped.action == "superseded" and [n.id for n in flipped.superseded] == [created.note.id]  # type: ignore[union-attr]
    # An older statement processed late is filed as history; what is true now stays.
    late = gate.write_if_worthy(_cand("pref:coffee", "coffee", 1, ids[3], minutes=-10))
    assert late.action == "historical" and late.note is not None and late.note.valid_to is not None
    # "I prefer tea over coffee" closes a positive coffee note without sharing its slot.
    gate.write_if_worthy(_cand("pref:cake", "cake", 1, ids[4], minutes=3))
    over = _cand("pref:pie", "pie", 1, ids[5], minutes=4)
    over.negates = ["pref:cake"]
    assert gate.write_if_worthy(over).action == "superseded"
    low = _cand("pref:x", "x", 1, ids[5])
    low.importance = 0.2
    assert gate.write_if_worthy(low).action == "rejected"

    current = {(n.slot, n.value, n.polarity) for n in mem.notes()}
    assert current == {("pref:coffee", "coffee", -1), ("pref:pie", "pie", 1)}
    history = mem.note_history(created.note.id or 0)  # type: ignore[union-attr]
    assert [(n.polarity, n.current) for n in history] == [(1, False), (1, False), (-1, True)]
    assert history == mem.note_history(flipped.note.id or 0)  # type: ignore[union-attr]


def test_a_note_is_never_written_for_messages_forgotten_meanwhile(mem: Memory) -> None:
    msg = mem.add("room", "I love jazz.", author_id=ANCHOR)
    store = SQLiteNoteStore(mem.store)  # type: ignore[arg-type]
    gate = PromotionGate(store)
    cand = RuleExtractor().extract([msg], ExtractionContext("room", ANCHOR))[0]
    mem.forget_messages([msg.id or 0])
    outcome = gate.write_if_worthy(cand)
    assert outcome.action == "rejected" and "forgotten" in outcome.reason
    assert mem.notes(include_history=True) == []


def test_promotion_is_off_the_hot_path_and_every_n_turns(tmp_path: Path) -> None:
    with Memory(tmp_path / "p.db", embedder="none", anchor_id=ANCHOR, promote_every=3) as mem:
        service = mem.parts.notes
        mem.start_background_work()  # as a long-running bot does: promote while it writes
        mem.add("room", "I love jazz.", author_id=ANCHOR)
        mem.add("room", "Nice.", role="assistant")
        mem.add("room", "I work at CERN.", author_id=ANCHOR)
        # Below the threshold nothing ran: add() did no promotion work at all.
        assert service.store.progress("room") == 0
        assert service.store.list_notes(service_filter()) == []
        mem.add("room", "We decided to ship on Monday.", author_id=ANCHOR)  # third user turn
        assert service.promoter.flush()
        texts = {n.text for n in service.store.list_notes(service_filter())}
        assert texts == {"jan loves jazz.", "jan works at CERN.", "Decision (jan): ship on Monday."}
        assert service.store.progress("room") == 4
        # Turns below the threshold are promoted at flush (and at context time).
        mem.add("room", "I moved to Lisbon.", author_id=ANCHOR)
        mem.flush()
        assert "jan moved to Lisbon." in {n.text for n in mem.notes()}


def service_filter() -> Any:
    from memlane.notes.store import NoteFilter

    return NoteFilter()


def test_visibility_anchor_notes_are_shared_others_stay_in_their_room(mem: Memory) -> None:
    mem.add("roomA", "I love jazz.", author_id=ANCHOR, author_name="JanHein")
    mem.add("roomA", "I love techno.", author_id="@maria:x", author_name="Maria")
    mem.add("roomB", "Hi", author_id="@bob:x", author_name="Bob")
    t2 = mem.create_session(session_id="t2", tenant_id="acme")
    mem.add(t2, "I love opera.", author_id=ANCHOR)
    mem.flush()
    assert {n.text for n in mem.notes(session_id="roomA")} == {"JanHein loves jazz.", "Maria loves techno."}
    assert {n.text for n in mem.notes(session_id="roomB")} >= {"JanHein loves jazz."}
    assert "Maria loves techno." not in {n.text for n in mem.notes(session_id="roomB")}
    # Tenants never share notes, not even the Anchor's.
    assert {n.text for n in mem.notes(session_id=t2)} == {"JanHein loves opera."}


def test_notes_for_the_packet_are_relevant_first_and_within_budget(mem: Memory) -> None:
    for text in ["I love jazz.", "I work at CERN.", "My favourite drink is tea.", "I moved to Berlin.",
                 "I'm allergic to peanuts."]:
        mem.add("room", text, author_id=ANCHOR)
    provider = mem.parts.notes
    found = provider("room", "Which music should we play? jazz", 200)
    assert found[0].text == "JanHein loves jazz."
    assert len(found) == 5
    tight = provider("room", "jazz", 12)
    assert [n.text for n in tight] == ["JanHein loves jazz."]
    assert sum(mem.counter.count(n.text) + 3 for n in tight) <= 12
    assert provider("room", "jazz", 0) == [] and provider("no-such-room", "jazz", 100) == []


def test_add_note_api_merges_by_slot_and_validates(mem: Memory) -> None:
    sid = mem.create_session(session_id="s")
    a = mem.add_note("JanHein's car is a Volvo.", slot="attr:car", value="Volvo", session_id=sid)
    b = mem.add_note("JanHein's car is a Tesla.", slot="attr:car", value="Tesla", session_id=sid)
    assert a.user_id == ANCHOR and b.supersedes == a.id
    assert [n.value for n in mem.note_history(b.id or 0)] == ["Volvo", "Tesla"]
    with pytest.raises(InvalidInputError, match="kind"):
        mem.add_note("x", kind="gossip")
    with pytest.raises(InvalidInputError, match="non-empty"):
        mem.add_note("  ")
    with pytest.raises(NotFoundError):
        mem.add_note("x", source_ids=[999])
    with pytest.raises(NotFoundError):
        mem.note_history(12345)
    assert mem.notes("Tesla")[0].id == b.id


def test_forgetting_messages_forgets_their_notes_but_retention_keeps_them(mem: Memory) -> None:
    m1 = mem.add("room", "I love jazz.", author_id=ANCHOR)
    m2 = mem.add("room", "I work at CERN.", author_id=ANCHOR)
    mem.flush()
    assert len(mem.notes()) == 2
    mem.forget_messages([m1.id or 0])
    assert {n.text for n in mem.notes()} == {"JanHein works at CERN."}
    mem.erase(message_ids=[m2.id or 0], keep_notes=True)
    assert {n.text for n in mem.notes()} == {"JanHein works at CERN."}
    assert mem.store.count_messages("room") == 0


def test_a_forgotten_change_of_mind_reopens_what_was_true_before(mem: Memory) -> None:
    mem.add("cli", "I love coffee.", author_id=ANCHOR)
    mem.flush()
    mem.add("room", "I don't like coffee.", author_id=ANCHOR)
    mem.flush()
    assert [n.polarity for n in mem.notes()] == [-1]
    mem.delete_session("room")
    assert [(n.text, n.current) for n in mem.notes()] == [("JanHein loves coffee.", True)]


def test_llm_extractor_uses_the_endpoint_and_falls_back_to_rules() -> None:
    msg = Message(role="user", content="I work at CERN and love jazz.", id=7, author_id=ANCHOR, author_name="JanHein")
    reply = 'Sure: [{"message_id": 7, "kind": "fact", "text": "JanHein works at CERN.", ' \
            '"slot": "work", "value": "CERN", "importance": 0.8}, {"message_id": 99, "kind": "fact", "text": "x"}]'
    with TinyModel(answer=lambda _messages: reply) as model:
        ext = LLMExtractor(model.url.removesuffix("/v1"), "tiny")  # a base URL without /v1: it adds it
        found = ext.extract([msg], CTX)
        assert [(c.text, c.slot, c.origin, c.source_ids) for c in found] == [
            ("JanHein works at CERN.", "work", "llm", [7])
        ]
    (asked,) = model.requests
    assert asked["path"] == "/v1/chat/completions"
    assert asked["messages"][0]["content"].startswith("Extract long-term memory notes")
    dead = LLMExtractor("http://127.0.0.1:9", "tiny", timeout=2)
    assert {c.text for c in dead.extract([msg], CTX)} >= {"JanHein works at CERN."}


@pytest.mark.parametrize(
    ("before", "after", "now_true", "no_longer"),
    [
        ("I prefer tea over coffee.", "Actually I prefer coffee now, not tea.",
         "JanHein prefers coffee, not tea.", "JanHein prefers tea over coffee."),
        ("I prefer tea over coffee.", "Actually I prefer coffee now.",
         "JanHein prefers coffee.", "JanHein prefers tea over coffee."),
        ("My favourite drink is tea.", "I don't like tea anymore.",
         "JanHein does not like tea.", "JanHein's favourite drink is tea."),
        ("I don't like jazz.", "My favourite music is jazz.",
         "JanHein's favourite music is jazz.", "JanHein does not like jazz."),
        ("I love hiking in the Alps.", "I'm not into hiking anymore.",
         "JanHein is not into hiking.", "JanHein loves hiking in the Alps."),
        ("Mein Lieblingsgetränk ist Tee.", "Ich trinke keinen Tee mehr.",
         "JanHein mag Tee nicht.", "JanHeins Lieblingsgetränk ist Tee."),
        ("Ich mag Tee lieber als Kaffee.", "Ich trinke jetzt lieber Kaffee, nicht Tee.",
         "JanHein mag Kaffee lieber.", "JanHein mag Tee lieber."),
    ],
)
def test_a_changed_statement_about_the_same_object_supersedes(
    tmp_path: Path, before: str, after: str, now_true: str, no_longer: str
) -> None:
    with Memory(tmp_path / "c.db", embedder="hashing", anchor_id=ANCHOR, anchor_name="JanHein",
                promote_every=1) as mem:
        mem.add("room", before, author_id=ANCHOR)
        mem.flush()
        mem.add("room", after, author_id=ANCHOR)
        mem.flush()
        current = [n.text for n in mem.notes()]
        assert current == [now_true]
        packet = mem.context("room", before, 2000)  # a query about the same object
        assert now_true in packet.notes and no_longer not in packet.notes
        (new,) = mem.notes()
        history = mem.note_history(new.id or 0)
        assert [(n.text, n.current) for n in history] == [(no_longer, False), (now_true, True)]
        assert history[0].valid_to == new.valid_from


def test_the_same_liking_in_another_language_is_merged_not_duplicated(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="hashing", anchor_id=ANCHOR, anchor_name="JanHein",
                promote_every=1) as mem:
        for text in ("I prefer tea over coffee.", "Actually I prefer coffee now, not tea.",
                     "Ich trinke jetzt lieber Kaffee."):
            mem.add("room", text, author_id=ANCHOR)
            mem.flush()
        (note,) = mem.notes()
        assert note.text == "JanHein prefers coffee, not tea." and note.seen_count == 2
        assert len(note.source_ids) == 2


def test_facets_are_readable_from_the_api_the_cli_and_rest(tmp_path: Path) -> None:
    from tests.server_support import client_for, run_cli

    db = tmp_path / "facets.db"
    with Memory(db, embedder="hashing", anchor_id=ANCHOR) as mem:
        mem.add("trip", "Meet Maria Lopez in Berlin next Friday, see https://example.org/plan.", author_id=ANCHOR)
        mem.add("trip", "", role="assistant", tool_calls=[
            {"id": "c1", "type": "function", "function": {"name": "web_search", "arguments": '{"q": "Berlin"}'}}])
        mem.add("trip", "{}", role="tool", tool_call_id="c1", name="web_search")
        mem.add("other", "Lunch with Peter Schmidt tomorrow.", author_id=ANCHOR)
        # No flush: reading catches the promotion gate up, so nothing is missing.
        facets = mem.facets("trip")
        assert {("link", "https://example.org/plan"), ("entity", "Maria Lopez"), ("entity", "Berlin"),
                ("time", "next Friday"), ("action", 'web_search({"q": "Berlin"})'),
                ("action", "result of web_search")} <= {(f.kind, f.value) for f in facets}
        assert all(f.session_id == "trip" for f in facets)
        ids = [f.message_id for f in facets]
        assert ids == sorted(ids) and len(set(ids)) == 3  # oldest first, one row per finding
        entities = mem.facets(kind="entity")
        assert {"Maria Lopez", "Berlin", "Peter Schmidt"} <= {f.value for f in entities}
        assert {f.kind for f in entities} == {"entity"}
        assert [f.session_id for f in mem.facets(kind="entity", value="Peter Schmidt")] == ["other"]
        assert len(mem.facets(limit=2)) == 2
        with pytest.raises(InvalidInputError, match="facet kind must be one of"):
            mem.facets(kind="person")
        with pytest.raises(SessionNotFoundError):
            mem.facets("no-such-room")
        with client_for(mem) as api:
            r = api.get("/v1/sessions/trip/facets", params={"kind": "time"})
            assert r.status_code == 200, r.text
            assert [(f["kind"], f["value"]) for f in r.json()["facets"]] == [("time", "next Friday")]
            assert api.get("/v1/sessions/trip/facets", params={"kind": "person"}).status_code == 422
            assert api.get("/v1/sessions/nope/facets").status_code == 404

    r = run_cli(["--store", str(db), "notes", "facets", "--session", "other", "--json"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert {(f["kind"], f["value"]) for f in json.loads(r.stdout)} == {
        ("entity", "Peter Schmidt"), ("time", "tomorrow")}
    r = run_cli(["notes", "facets", "--help"], tmp_path)
    assert "tool calls" in r.stdout and "--kind" in r.stdout
