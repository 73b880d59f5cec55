"""Word forms meet in German as in English (issue 17): keyphrases, summaries' terms and
note slots group words by the language layer's Snowball stem for the text's language."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memlane import Memory
from memlane.cli.main import main
from memlane.context.keyphrases import extract_keyphrases, normalize_term
from memlane.errors import InvalidInputError
from memlane.eval.terms import run_terms_eval
from memlane.models import Message, utcnow
from memlane.notes.extract import ExtractionContext, RuleExtractor, object_key, slot_key
from memlane.notes.gate import PromotionGate
from tests.pg_fixture import fresh_pg_memory


def test_german_plurals_meet_their_singular_like_english_ones() -> None:
    assert normalize_term("Datenbanken", "de") == normalize_term("Datenbank", "de")
    assert normalize_term("Fahrräder", "de") == normalize_term("Fahrrad", "de")
    assert normalize_term("databases", "en") == normalize_term("database", "en")
    assert normalize_term("Caroline's", "en") == normalize_term("Caroline", "en")
    assert normalize_term("Katzen", "de") != normalize_term("Kasse", "de")


def test_a_german_topic_is_shown_once_whatever_its_forms() -> None:
    texts = ["Wir brauchen ein neues Zelt für Norwegen.", "Die alten Zelte sind kaputt.",
             "Das Zelt muss dicht sein, in Norwegen regnet es oft."]
    phrases = [p.lower() for p in extract_keyphrases(texts, top_k=4)]
    assert sum(p in ("zelt", "zelte") for p in phrases) == 1, phrases


def test_german_statements_about_one_object_share_a_slot() -> None:
    assert slot_key("pref", "Katzen", "de") == slot_key("pref", "eine Katze", "de")
    assert slot_key("pref", "Katzen", "de") != slot_key("pref", "Hunde", "de")
    # across languages the gate's object key meets: "Kaffee" is "coffee"
    assert object_key("Kaffee", "de") == object_key("coffee", "en")
    ctx = ExtractionContext(session_id="s", anchor_id="@a")
    slots = [c.slot for text in ("Ich mag Tomaten.", "Ich mag keine Tomate.")
             for c in RuleExtractor().extract([Message(role="user", content=text, id=1)], ctx)]
    assert len(slots) == 2 and slots[0] == slots[1]


def test_a_german_change_of_mind_supersedes_the_plural_note(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="none", anchor_id="@jan", anchor_name="Jan") as mem:
        gate = PromotionGate(mem.parts.notes.store, min_importance=0.1)
        ctx = ExtractionContext(session_id="room", anchor_id="@jan", anchor_name="Jan")
        outcomes = []
        for text in ("Ich mag Erdbeeren.", "Ich mag keine Erdbeere mehr."):
            msg = mem.add("room", text)
            for cand in RuleExtractor().extract([msg], ctx):
                cand.valid_from = utcnow()
                outcomes.append(gate.write_if_worthy(cand).action)
        assert outcomes == ["created", "superseded"], outcomes


_FIXTURE = [
    {"task": "keyphrases", "language": "de", "split": "dev",
     "texts": ["Die Datenbank ist voll.", "Beide Datenbanken brauchen mehr Platz.", "Lösch die alten Datenbanken."],
     "topics": [["datenbank", "datenbanken"], ["platz"]]},
    {"task": "slots", "language": "de", "split": "dev", "a": "Ich mag Katzen.", "b": "Ich mag keine Katze.", "same": True},
    {"task": "slots", "language": "de", "split": "dev", "a": "Ich mag Katzen.", "b": "Ich mag Hunde.", "same": False},
    {"task": "slots", "language": "en", "split": "dev", "a": "I like cats.", "b": "I don't like cats.", "same": True},
]


def test_terms_eval_on_a_fixture_through_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "terms.jsonl"
    path.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in _FIXTURE), encoding="utf-8")
    main(["eval", "terms", str(path), "--json"])
    figures = json.loads(capsys.readouterr().out)["figures"]
    assert figures["keyphrases de"]["duplicates"] == 0 and figures["keyphrases de"]["recall"] == 1.0
    assert figures["slots de"] == {"cases": 2, "recall": 1.0, "precision": 1.0, "duplicates": None}
    assert figures["slots en"]["recall"] == 1.0
    main(["eval", "terms", str(path), "--misses"])
    assert "slots de" in capsys.readouterr().out


def test_the_shipped_set_has_both_languages_and_tasks() -> None:
    figures = run_terms_eval()["figures"]
    for group in ("keyphrases de", "keyphrases en", "slots de", "slots en"):
        assert figures[group]["cases"] == 16
    assert figures["slots de"]["recall"] == figures["slots en"]["recall"]


def test_bad_terms_files_say_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="no such file"):
        run_terms_eval(str(tmp_path / "none.jsonl"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task": "slots", "language": "de", "a": "x"}\n')
    with pytest.raises(InvalidInputError, match="task 'slots' with a, b and same"):
        run_terms_eval(str(bad))


def _upgrade_keeps_old_slots_working(open_memory: Any, schema_version: int) -> None:
    """A note extracted when slots were English plural stripping ("fav:movie") is rewritten
    in its words' stems when the store upgrades, so a new statement supersedes it; a note
    given its slot through the API keeps it."""
    ctx = ExtractionContext(session_id="room", anchor_id="@jan", anchor_name="Jan")

    def say(mem: Memory, text: str) -> list[str]:
        gate = PromotionGate(mem.parts.notes.store, min_importance=0.1)
        out = []
        for cand in RuleExtractor().extract([mem.add("room", text)], ctx):
            cand.valid_from = utcnow()
            out.append(gate.write_if_worthy(cand).action)
        return out

    with open_memory() as mem:
        assert say(mem, "My favourite movie is Alien.") == ["created"]
        store = mem.store
        store.write(lambda c: c.execute("UPDATE notes SET slot = 'fav:movie'"))
        store.write(lambda c: c.execute(f"DELETE FROM schema_migrations WHERE version = {schema_version}"))
    with open_memory() as mem:  # upgrades
        slots = [r[0] for r in mem.store.read("SELECT slot FROM notes ORDER BY id")]
        assert slots == ["fav:movi"], slots
        assert say(mem, "My favourite movie is Heat.") == ["superseded"]
        assert [n.text for n in mem.notes()] == ["Jan's favourite movie is Heat."]


def test_sqlite_upgrade_rewrites_old_note_slots(tmp_path: Path) -> None:
    from memlane.store.sqlite_schema import SLOT_STEMS

    _upgrade_keeps_old_slots_working(
        lambda: Memory(tmp_path / "m.db", embedder="none", anchor_id="@jan", anchor_name="Jan"), SLOT_STEMS)


def test_postgres_upgrade_rewrites_old_note_slots(pg_url: str) -> None:
    from memlane.store.postgres_schema import SLOT_STEMS

    with fresh_pg_memory(pg_url, embedder="none"):
        pass  # empties the module's database
    _upgrade_keeps_old_slots_working(
        lambda: Memory(pg_url, embedder="none", anchor_id="@jan", anchor_name="Jan"), SLOT_STEMS)
