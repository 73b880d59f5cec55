"""The keyword index stems each message in its own language (issue 17): a German question
finds the German message in another word form, on SQLite and PostgreSQL, for new
messages and for a store written before migration 10."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from memlane.cli.main import main
from memlane.eval.samelang import run_recall_eval
from memlane.language import index_parts, keyword_stems, keyword_text, stem
from memlane.models import Message, MessageFilter, Session
from memlane.store import SQLiteStore, sqlite_driver
from memlane.store.base import Store
from memlane.store.postgres import PostgresStore
from memlane.store.sqlite import _split_sql
from memlane.store.sqlite_schema import MIGRATIONS

GERMAN = [
    "Ich habe die Datenbanken gestern auf PostgreSQL migriert.",
    "Die Fahrräder stehen im Keller neben der Waschmaschine.",
    "Unsere Katzen schlafen am liebsten auf der Fensterbank.",
]
ENGLISH = [
    "My sisters painted the fences last summer.",
    "The printer in the office is broken again.",
]
# (query, the message it must find): other word forms than the message's own
QUERIES = [
    ("Welche Datenbank wurde migriert?", GERMAN[0]),
    ("Wo steht mein Fahrrad?", GERMAN[1]),
    ("Wo schläft die Katze?", GERMAN[2]),
    ("who was painting the fence", ENGLISH[0]),
    ("broken printers", ENGLISH[1]),
]


def _fill(store: Store) -> None:
    store.create_session(Session(id="s", user_id="u"))
    store.append("s", [Message(role="user", content=c) for c in GERMAN + ENGLISH])


def _found(store: Store, query: str) -> list[str]:
    return [h.message.content for h in store.keyword_search(query, MessageFilter(user_id="u"), limit=5)]


def _assert_stemmed_search(store: Store) -> None:
    for query, wanted in QUERIES:
        assert _found(store, query)[:1] == [wanted], query


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "kw.db", durability="normal")
    yield s
    s.close()


def test_index_text_is_stemmed_in_the_message_language() -> None:
    # a German compound is followed by its parts: "Datenbank|en" -> "daten", "bank"
    assert keyword_text("Die Datenbanken, die Größe", "de") == "die datenbank dat bank die gross"
    assert keyword_text("self-care, Caroline’s", "en") == "self care carolin s"  # FTS5's token parts
    assert keyword_text("painted fences", "en") == "paint fenc"
    assert keyword_text("painted fences", None) == "paint fenc"  # unknown: English
    # a query word is looked up by both languages' stems, once each
    assert keyword_stems("datenbanken") == ("datenbanken", "datenbank")
    assert keyword_stems("haus") == ("haus",)
    assert keyword_stems("caroline's")[0] == "carolin s"  # the possessive, as a phrase


def test_sqlite_finds_other_word_forms_in_both_languages(store: SQLiteStore) -> None:
    _fill(store)
    # stored without a language: judged and indexed after the write (SQLite migration 18)
    assert store.keyword_backlog() == len(GERMAN) + len(ENGLISH)
    assert store.index_pending_keywords() == len(GERMAN) + len(ENGLISH)
    assert store.keyword_backlog() == 0
    langs = [r[0] for r in store.read("SELECT lang FROM messages ORDER BY id")]
    assert langs == ["de"] * len(GERMAN) + ["en"] * len(ENGLISH)
    _assert_stemmed_search(store)


def test_sqlite_index_stays_whole_through_delete_and_rebuild(store: SQLiteStore) -> None:
    _fill(store)
    first = store.get_messages([1])[0]
    assert first.content == GERMAN[0]
    store.delete_messages([1])
    assert _found(store, "Datenbank") == []
    # FTS5 checks its index against the stemmed view: the delete took out exactly what went in
    store.write(lambda c: c.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)"))
    assert store.rebuild_keyword_index() == len(GERMAN) + len(ENGLISH) - 1
    assert _found(store, "Fahrrad") == [GERMAN[1]]


def test_a_program_without_the_functions_cannot_change_messages(store: SQLiteStore) -> None:
    """Another program (the sqlite3 shell) reads freely, but writing a message runs the
    index triggers, which call memlane's functions: it fails whole, nothing changes."""
    _fill(store)
    store.index_pending_keywords()  # the messages are in the keyword index
    plain = sqlite3.connect(store.path)
    try:
        assert plain.execute("SELECT count(*) FROM messages").fetchone()[0] == len(GERMAN) + len(ENGLISH)
        with pytest.raises(sqlite3.OperationalError, match="memlane_stems"):
            plain.execute("DELETE FROM messages WHERE id = 1")
        plain.rollback()
    finally:
        plain.close()
    assert _found(store, "Datenbank") == [GERMAN[0]]


def _store_before(path: Path, version: int, conn: sqlite3.Connection | None = None) -> sqlite3.Connection:
    """A store at ``path`` as memlane left it before migration ``version``, with session 's'."""
    conn = conn or sqlite_driver.connect(str(path), None, isolation_level=None)
    conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)")
    for v in sorted(v for v in MIGRATIONS if v < version):
        for statement in _split_sql(MIGRATIONS[v][1]):
            conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations VALUES (?, ?, 0)", (v, MIGRATIONS[v][0]))
    conn.execute("INSERT INTO sessions (id, user_id, created_at, updated_at, last_active_at) VALUES ('s', 'u', 0, 0, 0)")
    return conn


def test_a_store_written_before_migration_10_is_reindexed_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = _store_before(path, 10)
    for text in GERMAN + ENGLISH:
        conn.execute("INSERT INTO messages (session_id, role, content, created_at) VALUES ('s', 'user', ?, 0)", (text,))
    # the old porter index cannot match German word forms
    old = conn.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'datenbank'").fetchone()[0]
    assert old == 0
    conn.close()
    s = SQLiteStore(path)
    try:
        assert s.schema_versions() == sorted(MIGRATIONS)
        _assert_stemmed_search(s)
    finally:
        s.close()


def test_postgres_finds_other_word_forms_and_reindexes_old_rows(fresh_pg_store: PostgresStore) -> None:
    _fill(fresh_pg_store)
    langs = [r[0] for r in fresh_pg_store.read("SELECT lang FROM messages ORDER BY id")]
    assert langs == ["de"] * len(GERMAN) + ["en"] * len(ENGLISH)
    _assert_stemmed_search(fresh_pg_store)
    # rows written before migration 10 have no language and are indexed as English, as
    # before; `memlane reindex` (rebuild_keyword_index) judges them
    fresh_pg_store.write(lambda c: c.execute("UPDATE messages SET lang = NULL"))
    assert _found(fresh_pg_store, "Fahrrad") == []
    assert fresh_pg_store.rebuild_keyword_index() == len(GERMAN) + len(ENGLISH)
    _assert_stemmed_search(fresh_pg_store)


def test_recall_eval_runs_on_a_fixture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pairs = [
        {"id": f"p{i}", "memory": memory, "query": query, "language": "de" if memory in GERMAN else "en",
         "split": "held" if i % 2 else "dev"}
        for i, (query, memory) in enumerate(QUERIES)
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs), encoding="utf-8")
    result = run_recall_eval(path, embedder="none")
    for mode in ("keyword", "hybrid"):
        figures = result["runs"][mode]["figures"]
        assert figures["de"]["pairs"] == 3 and figures["en"]["pairs"] == 2
        assert figures["all"]["recall@1"] == 1.0, mode
    main(["eval", "recall", str(path), "--embedder", "none", "--json"])
    printed = json.loads(capsys.readouterr().out)
    assert printed["runs"]["keyword"]["figures"]["split:held"]["pairs"] == 2


def test_recall_eval_refuses_a_pair_without_language(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"id": "x", "memory": "a", "query": "b"}) + "\n", encoding="utf-8")
    from memlane.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="language"):
        run_recall_eval(path, embedder="none")


# ----------------------------------------------------------- German compounds in the index

COMPOUNDS = [
    "Die Datenbanksicherung läuft jede Nacht um drei Uhr.",
    "Unser Stromanbieter hat die Preise erhöht.",
    "The database backup runs every night.",
]


def test_the_index_holds_a_german_compounds_parts_beside_it() -> None:
    assert keyword_text("Datenbanksicherung", "de") == "datenbanksicher datenbank sicher"
    # English text is never split by German word frequencies ("under|standing")
    assert keyword_text("understanding", "en") == "understand"


def test_a_question_naming_the_parts_finds_the_stored_compound(store: SQLiteStore) -> None:
    store.create_session(Session(id="s", user_id="u"))
    store.append("s", [Message(role="user", content=c) for c in COMPOUNDS])
    assert _found(store, "Wann läuft die Sicherung der Datenbank?")[:1] == [COMPOUNDS[0]]
    assert _found(store, "Welcher Anbieter für Strom?")[:1] == [COMPOUNDS[1]]
    assert _found(store, "Datenbanksicherung") == [COMPOUNDS[0]]  # the whole word still matches
    store.delete_messages([1])
    assert _found(store, "Sicherung der Datenbank") == []
    store.write(lambda c: c.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)"))


def _stems_before_migration_16(text: str | None, language: str | None) -> str:
    """memlane_stems() as migration 15 left it: no compound parts."""
    lng = "de" if language == "de" else "en"
    return " ".join(stem(t, lng) for t in index_parts(text or ""))


def test_a_store_indexed_before_migration_16_is_reindexed_so_deletes_stay_exact(tmp_path: Path) -> None:
    """The delete trigger takes out what memlane_stems() gives now; a row indexed without
    its parts must be indexed again first, or FTS5's index no longer matches its text."""
    path = tmp_path / "old.db"
    conn = sqlite_driver.connect(str(path), None, isolation_level=None)
    conn.create_function("memlane_stems", 2, _stems_before_migration_16, deterministic=True)
    conn = _store_before(path, 16, conn)
    for text in COMPOUNDS:
        conn.execute("INSERT INTO messages (session_id, role, content, lang, created_at) VALUES ('s', 'user', ?, ?, 0)",
                     (text, "en" if text.startswith("The") else "de"))
    assert conn.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'sicher'").fetchone()[0] == 0
    conn.close()
    s = SQLiteStore(path)
    try:
        assert s.schema_versions() == sorted(MIGRATIONS)
        assert _found(s, "Sicherung der Datenbank")[:1] == [COMPOUNDS[0]]
        s.delete_messages([1])
        s.write(lambda c: c.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)"))
        assert _found(s, "Anbieter")[:1] == [COMPOUNDS[1]]
    finally:
        s.close()


def test_bench_stems_times_both_sides_on_the_same_messages() -> None:
    from memlane.bench_language import format_table, run_stems_bench

    result = run_stems_bench(messages=200)
    for side in ("cold", "warm"):
        assert result[side]["with_parts"]["p50_us"] > 0 and result[side]["without_parts"]["p50_us"] > 0
    assert "+" in format_table(result) and result["words_per_message"] > 3
    assert result["words_de_dict_ms"] > 0 and result["dict_after_lookups"] > 0
