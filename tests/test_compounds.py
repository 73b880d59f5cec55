"""German compounds in keyword search (issue 17): a query's compound finds a memory that
names its parts, on SQLite and PostgreSQL; English words are never split."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest

from memlane.cli.main import main
from memlane.compounds import compound_parts
from memlane.models import Message, MessageFilter, Session
from memlane.ports import NoteFilter
from memlane.store import SQLiteStore
from memlane.store.base import Store
from memlane.store.postgres import PostgresStore
from memlane.text import keyword_terms
from tests.pg_fixture import migrate_below

if TYPE_CHECKING:
    from memlane.store.pg_embedded import EmbeddedPostgres

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


# A compound in a memory is found by its parts, and a part by the compound that holds it
# ("Datenbank" by "Bank"), the same messages on both stores (PostgreSQL keeps the parts in
# a column its generated tsvector reads, migration 19; SQLite in the FTS5 row, migration 16).
STORED = [
    "Die Datenbanksicherung läuft jede Nacht um drei.",
    "Meine Festplatte ist schon wieder voll.",
    "Die Bank hat angerufen wegen des Kredits.",
    "Ich habe den Apfelkuchen für Sonntag gebacken.",
    "The database backup runs every night.",
]
QUERIES = {
    "Wann läuft die Sicherung der Datenbank?": STORED[0],
    "Platte voll?": STORED[1],
    "Was war mit der Bankverbindung?": STORED[2],
    "Welchen Kuchen gibt es?": STORED[3],
}


def _found_by_queries(store: Store) -> dict[str, list[str]]:
    store.create_session(Session(id="c", user_id="u"))
    store.append("c", [Message(role="user", content=c) for c in STORED])
    store.index_pending_keywords()
    return {q: [h.message.content for h in store.keyword_search(q, MessageFilter(user_id="u"), limit=5)]
            for q in QUERIES}


def test_german_compounds_are_found_by_their_parts_alike_on_both_stores(
    store: SQLiteStore, fresh_pg_store: PostgresStore
) -> None:
    on_sqlite = _found_by_queries(store)
    on_postgres = _found_by_queries(fresh_pg_store)
    for query, expected in QUERIES.items():
        assert on_sqlite[query][:1] == [expected], (query, on_sqlite[query])
    assert {q: set(f) for q, f in on_postgres.items()} == {q: set(f) for q, f in on_sqlite.items()}
    parts = fresh_pg_store.read("SELECT content, parts FROM messages ORDER BY id")
    assert parts[0] == (STORED[0], "datenbank sicherung")
    assert parts[4] == (STORED[4], None)  # English is never split


def test_forgetting_a_german_message_on_postgres_takes_its_parts(fresh_pg_store: PostgresStore) -> None:
    _found_by_queries(fresh_pg_store)
    ids = [r[0] for r in fresh_pg_store.read("SELECT id FROM messages WHERE content = %s", (STORED[0],))]
    assert fresh_pg_store.delete_messages(ids) == 1
    flt = MessageFilter(user_id="u")
    assert fresh_pg_store.keyword_search("Sicherung", flt, limit=5) == []
    assert fresh_pg_store.read("SELECT count(*) FROM messages WHERE parts LIKE %s", ("%sicherung%",)) == [(0,)]
    # the rest is still found by its parts
    assert [h.message.content for h in fresh_pg_store.keyword_search("Platte", flt, limit=5)] == [STORED[1]]


@pytest.mark.postgres
def test_postgres_rows_written_before_migration_19_get_their_parts_on_upgrade(pg_server: EmbeddedPostgres) -> None:
    """A database at schema 18 with German messages and notes: opening it splits their
    compounds (migration 19) and the parts find them; `memlane reindex` splits rows
    whose parts went missing."""
    from memlane.store.postgres_schema import MIGRATIONS as PG_MIGRATIONS

    name = f"compounds_pre19_{uuid.uuid4().hex[:8]}"
    url = pg_server.create_database(name)
    try:
        migrate_below(url, 19)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("INSERT INTO sessions (id, user_id, created_at, updated_at, last_active_at) "
                         "VALUES ('c', 'u', now(), now(), now())")
            for text in STORED:
                lang = "en" if text.startswith("The") else "de"
                conn.execute("INSERT INTO messages (tenant_id, session_id, role, content, created_at, lang) "
                             "VALUES ('default', 'c', 'user', %s, now(), %s)", (text, lang))
            conn.execute("INSERT INTO notes (user_id, kind, text, valid_from, created_at, updated_at, lang) "
                         "VALUES ('u', 'fact', 'Die Datenbanksicherung läuft nachts.', now(), now(), now(), 'de')")
        store = PostgresStore(url)  # upgrades
        try:
            assert store.schema_versions() == sorted(PG_MIGRATIONS)
            flt = MessageFilter(user_id="u")
            assert [h.message.content for h in store.keyword_search("Sicherung der Datenbank", flt, limit=1)] \
                == [STORED[0]]
            found = store.note_repository().search_notes("Sicherung", NoteFilter(user_id="u"), limit=3)
            assert [n.text for n, _ in found] == ["Die Datenbanksicherung läuft nachts."]
            # parts lost later (raw SQL) come back with `memlane reindex`
            store.write(lambda c: c.execute("UPDATE messages SET parts = NULL"))
            assert store.keyword_search("Sicherung", flt, limit=1) == []
        finally:
            store.close()
        main(["reindex", "--store", url, "--embedder", "none"])
        again = PostgresStore(url)
        try:
            assert [h.message.content for h in again.keyword_search("Sicherung", flt, limit=1)] == [STORED[0]]
        finally:
            again.close()
    finally:
        pg_server.drop_database(name)


def test_word_frequencies_by_bisection_equal_the_dictionary() -> None:
    # the shipped file is searched in place for a process's first words, then as a dictionary
    from importlib import resources

    from memlane.compounds import WORDS_DE, WordFrequencies

    data = resources.files("memlane").joinpath("data", WORDS_DE).read_bytes()
    in_place, as_dict = WordFrequencies(data, dict_after=10**9), WordFrequencies(data, dict_after=0)
    table = as_dict.as_dict()
    assert len(table) > 90_000
    words = [*list(table)[::37], "aaa", "aaaa", "zzzzzz", "", "#", "die\tx", "datenbankx", "škoda"]
    assert [in_place.get(w) for w in words] == [table.get(w, 0.0) for w in words]
    assert in_place.get("datenbank") > 3 and in_place.get("xyzzyqq") == 0.0


def test_an_english_query_never_looks_up_german_word_frequencies() -> None:
    from memlane.compounds import word_frequencies

    word_frequencies.cache_clear()
    compound_parts.cache_clear()
    assert "paint" in keyword_terms("what did Caroline say about the understanding of paintings")
    # none read: after 20,000 lookups they become a ~23 MB dictionary English users never need
    assert word_frequencies.cache_info().currsize == 0
    assert {"strom", "rechnung"} <= set(keyword_terms("Wie hoch war die Stromrechnung?"))
    assert word_frequencies.cache_info().currsize == 1
