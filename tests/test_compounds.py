"""German compounds in keyword search (issue 17): a query's compound finds a memory that
names its parts, on SQLite and PostgreSQL; English words are never split."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memlane.compounds import compound_parts
from memlane.models import Message, MessageFilter, Session
from memlane.store import SQLiteStore
from memlane.store.base import Store
from memlane.store.postgres import PostgresStore
from memlane.text import keyword_terms

MEMORIES = [
    "Die Rechnungen für den Strom kommen immer am Monatsanfang.",
    "Der Apfel liegt auf dem Tisch, der Kuchen im Ofen.",
    "Im Keller steht das Fahrrad meiner Schwester.",
]


def test_compounds_split_at_parts_more_frequent_than_the_whole() -> None:
    assert compound_parts("Stromrechnung") == ("strom", "rechnung")
    assert compound_parts("Apfelkuchen") == ("apfel", "kuchen")
    assert compound_parts("Lieblingsfarbe") == ("lieblings", "farbe")
    # not compounds: too short, a function-word part, or a whole more frequent than its parts
    assert compound_parts("Haus") == ()
    assert compound_parts("Beispiel") == ()
    assert compound_parts("Entwicklung") == ()
    assert compound_parts("Druckern") == ()  # not "druck" + the ending "ern"


def test_only_german_queries_look_up_compound_parts() -> None:
    assert {"strom", "rechnung"} <= set(keyword_terms("Wann kommt die Stromrechnung?"))
    assert compound_parts("password") == ("pass", "word")  # German text borrows English words
    assert "word" not in keyword_terms("I forgot my password again")


def _assert_compound_found(store: Store) -> None:
    store.create_session(Session(id="s", user_id="u"))
    store.append("s", [Message(role="user", content=c) for c in MEMORIES])
    hits = store.keyword_search("Wann kommt die Stromrechnung?", MessageFilter(user_id="u"), limit=5)
    assert [h.message.content for h in hits][:1] == [MEMORIES[0]]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "kw.db", durability="normal")
    yield s
    s.close()


def test_sqlite_finds_the_parts_of_a_query_compound(store: SQLiteStore) -> None:
    _assert_compound_found(store)


def test_postgres_finds_the_parts_of_a_query_compound(fresh_pg_store: PostgresStore) -> None:
    _assert_compound_found(fresh_pg_store)
