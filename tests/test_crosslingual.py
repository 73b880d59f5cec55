"""Cross-lingual recall: a German query finds the English memory and the reverse (issue 17)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from memlane import Memory
from memlane.bilingual import translations
from memlane.cli.main import main
from memlane.errors import InvalidInputError
from memlane.eval.crosslingual import run_crosslingual_eval
from memlane.search.crosslingual import expand_query

MEMORIES = [
    "My sister lives in Hamburg with her two kids.",
    "Meine Eltern wohnen in München.",
    "The meeting about the budget is on Tuesday.",
    "Ich fahre jeden Morgen mit dem Fahrrad.",
    "Our printer in the office is broken again.",
    "Der Urlaub in Italien war wunderschön.",
]


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory(str(tmp_path / "m.db"), embedder="minilm") as m:
        for text in MEMORIES:
            sid = m.create_session(user_id="u")
            m.add_messages(sid, [{"role": "user", "content": text}])
        m.flush(timeout=None)
        yield m


def test_the_lexicon_translates_both_ways() -> None:
    assert "sister" in translations("Schwester", "de")
    assert "eltern" in translations("parents", "en")
    assert translations("xyzzy", "en") == ()


def test_expansion_keeps_an_english_query_vector_as_it_was() -> None:
    en = expand_query("Where do my parents live?")
    assert en.language == "en" and "eltern" in en.added
    assert en.vector_query == "Where do my parents live?"  # MiniLM cannot read German words
    assert "eltern" in en.keyword_query.split()
    de = expand_query("Wo wohnt meine Schwester?")
    assert de.language == "de" and "sister" in de.added and "sister" in de.vector_query.split()


def test_a_german_compound_the_lexicon_lacks_is_translated_by_its_parts() -> None:
    assert translations("Lieblingsfarbe", "de") == ()
    de = expand_query("Was ist meine Lieblingsfarbe?")
    assert {"favorite", "color"} <= set(de.added) and "color" in de.vector_query.split()
    # an English word is never split by German frequencies
    assert expand_query("What is my understanding?").added == expand_query("understanding").added


def test_a_german_query_finds_the_english_memory_and_the_reverse(mem: Memory) -> None:
    hits = mem.search("Wo wohnt meine Schwester?", user_id="u", top_k=3)
    assert hits[0].message.content == MEMORIES[0]
    # English -> German has only the keyword side (MiniLM cannot read the German memory),
    # so an English memory about living may rank above it; it is found, not first.
    hits = mem.search("Where do my parents live?", user_id="u", top_k=3)
    assert MEMORIES[1] in [h.message.content for h in hits]


def test_the_memory_command_recalls_across_languages(mem: Memory) -> None:
    sid = mem.create_session(user_id="u")
    mem.add_messages(sid, [{"role": "user", "content": MEMORIES[0]}])
    mem.flush(timeout=None)
    found = mem.handle_command(sid, "Was weißt du über meine Schwester?", None)
    assert found.action == "recall"
    assert [h.message.content for h in found.hits] == [MEMORIES[0]]


def test_fixture_run_through_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pairs = [
        {"id": "a", "memory": MEMORIES[0], "memory_language": "en", "query": "Wo wohnt meine Schwester?",
         "query_language": "de"},
        {"id": "b", "memory": MEMORIES[1], "memory_language": "de", "query": "Where do my parents live?",
         "query_language": "en", "split": "held"},
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs), encoding="utf-8")
    main(["eval", "crosslingual", str(path), "--json"])
    result = json.loads(capsys.readouterr().out)
    assert result["pairs"] == 2 and set(result["runs"]) == {"minilm", "minilm + expansion"}
    expanded = result["runs"]["minilm + expansion"]["figures"]
    assert expanded["de->en"]["recall@1"] == 1.0 and expanded["en->de"]["pairs"] == 1
    assert expanded["split:held"]["pairs"] == 1
    main(["eval", "crosslingual", str(path)])
    assert "minilm + expansion" in capsys.readouterr().out


def test_bad_pairs_say_what_is_wrong(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"memory": "x", "query": "y", "memory_language": "en", "query_language": "en"}\n')
    with pytest.raises(InvalidInputError, match="memory_language/query_language de and en"):
        run_crosslingual_eval(bad)
