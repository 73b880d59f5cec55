"""The PostgreSQL store on a real server: the conformance suite plus what only PG has."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from memlane import Memory
from memlane.errors import InvalidInputError, SessionNotFoundError, StorageError
from memlane.models import Message, MessageFilter, Session
from memlane.store import SQLiteStore, open_store
from memlane.store.pg_embedded import EmbeddedPostgres
from memlane.store.pg_search import every_config_tsvector
from memlane.store.postgres import PostgresStore, fts5_idf
from memlane.store.postgres_schema import MIGRATIONS, TEXT_CONFIGS
from tests.rendezvous import WORKER_RENDEZVOUS
from tests.store_conformance import StoreConformance

pytestmark = pytest.mark.postgres


class TestPostgresStore(StoreConformance):
    @pytest.fixture
    def store(self, fresh_pg_store: PostgresStore) -> Iterator[PostgresStore]:
        yield fresh_pg_store


def test_migrations_recorded_once(pg_url: str) -> None:
    PostgresStore(pg_url).close()
    s = PostgresStore(pg_url)  # reopening applies nothing twice
    assert s.schema_versions() == sorted(MIGRATIONS)
    s.close()


def test_concurrent_first_start_migrates_once(pg_server: EmbeddedPostgres) -> None:
    url = pg_server.create_database("race_migrate")
    errors: list[BaseException] = []
    stores: list[PostgresStore] = []

    def opener() -> None:
        try:
            stores.append(PostgresStore(url))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert stores[0].schema_versions() == sorted(MIGRATIONS)
    for s in stores:
        s.close()
    pg_server.drop_database("race_migrate")


def test_newer_schema_is_refused(pg_server: EmbeddedPostgres) -> None:
    url = pg_server.create_database("future_schema")
    s = PostgresStore(url)
    s.write(lambda c: c.execute("INSERT INTO schema_migrations (version, name) VALUES (999, 'future')"))
    s.close()
    with pytest.raises(StorageError, match="newer"):
        PostgresStore(url)
    pg_server.drop_database("future_schema")


def test_unreachable_server_is_a_storage_error() -> None:
    with pytest.raises(StorageError, match="cannot connect"):
        PostgresStore("postgresql://postgres@127.0.0.1:1/none", timeout=1)


def test_open_store_and_memory_from_url(pg_url: str, fresh_pg_store: PostgresStore) -> None:
    store = open_store(pg_url)
    assert isinstance(store, PostgresStore)
    store.close()
    with Memory.from_url(pg_url) as mem:
        sid = mem.create_session(user_id="ana", system_prompt="Be brief.")
        mem.add(sid, "I adopted a puppy named Oscar last spring")
        turn = mem.store_interaction("where is Oscar now?", "at the park", {"intent": "ask"}, session_id=sid)
        window = mem.get_recent_messages(sid, 1000)
        assert [m.content for m in window][-2:] == ["where is Oscar now?", "at the park"]
        # Wait for the background indexer: before it, only the keyword side can answer; after
        # it, the vector side adds the other two messages (below the puppy, which both find).
        mem.flush()
        hits = mem.search("puppies")
        assert [h.message.content for h in hits] == [
            "I adopted a puppy named Oscar last spring", "where is Oscar now?", "at the park"
        ]
        assert hits[0].score > hits[1].score
        assert mem.get_conversation_context(sid)[0]["turn_id"] == turn
        assert mem.get_session(sid).message_count == 3


def test_tenant_is_on_every_row(fresh_pg_store: PostgresStore) -> None:
    from memlane.store.base import TurnRecord

    s = fresh_pg_store
    s.create_session(Session(id="t", tenant_id="acme"))
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    s.append("t", [Message(role="user", content="q", turn_id="x"),
                   Message(role="assistant", content="", tool_calls=[call], turn_id="x")],
             TurnRecord(turn_id="x"))
    s.put_derived("t", "summary", {"text": "s"})
    for table in ("sessions", "messages", "turns", "tool_call_ids", "derived"):
        assert s.read(f"SELECT DISTINCT tenant_id FROM {table}") == [("acme",)], table
    assert len(s.keyword_search("q", MessageFilter(tenant_id="acme"), limit=5)) <= 1
    assert s.keyword_search("q", MessageFilter(tenant_id="other")) == []


def test_nul_characters_are_refused_loudly(fresh_pg_store: PostgresStore) -> None:
    fresh_pg_store.create_session(Session(id="s"))
    with pytest.raises(InvalidInputError, match="NUL"):
        fresh_pg_store.append("s", [Message(role="user", content="a\x00b")])
    assert fresh_pg_store.count_messages("s") == 0


def test_update_derived_is_atomic_across_threads(fresh_pg_store: PostgresStore) -> None:
    s = fresh_pg_store
    s.create_session(Session(id="s"))

    def bump(value: dict[str, int] | None) -> dict[str, int]:
        return {"n": (value or {}).get("n", 0) + 1}

    def worker() -> None:
        for _ in range(20):
            s.update_derived("s", "counter", bump)  # type: ignore[arg-type]

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert s.get_derived("s", "counter") == {"n": 80}
    with pytest.raises(SessionNotFoundError):
        s.update_derived("ghost", "x", lambda _v: {"a": 1})


def test_metadata_filter_nested_and_typed(fresh_pg_store: PostgresStore) -> None:
    from memlane.models import SessionFilter

    s = fresh_pg_store
    s.create_session(Session(id="a", metadata={"room": {"id": "!x"}, "n": 3}))
    s.create_session(Session(id="b", metadata={"room": {"id": "!y"}, "n": 4}))
    assert [x.id for x in s.list_sessions(SessionFilter(metadata={"room.id": "!y"}))] == ["b"]
    assert [x.id for x in s.list_sessions(SessionFilter(metadata={"n": 3}))] == ["a"]


def test_keyword_ranking_agrees_with_sqlite(fresh_pg_store: PostgresStore, tmp_path: object) -> None:
    """Same corpus, same query: the PostgreSQL BM25 orders hits like SQLite FTS5."""
    corpus = [
        "We went hiking in the mountains near Sintra on Saturday",
        "The weather in Lisbon was sunny and warm all week",
        "My sister adopted a rescue dog from the shelter",
        "Hiking boots are expensive but worth it for mountains",
        "I read a book about the history of Lisbon and its trams",
        "The dog loves long walks and hiking trips",
        "Mountains mountains mountains: I cannot get enough of the mountains",
        "We had pastel de nata in Belem after the museum",
    ] * 3
    lite = SQLiteStore(f"{tmp_path}/rank.db")
    # the same database through the path for large logs (cached statistics)
    cached = PostgresStore(fresh_pg_store.url, exact_stats_below=0)
    for st in (lite, fresh_pg_store):
        st.create_session(Session(id="s"))
        st.append("s", [Message(role="user", content=c) for c in corpus])
    try:
        for query in ("hiking in the mountains", "Lisbon trams history", "dog shelter"):
            a = [h.message.content for h in lite.keyword_search(query, MessageFilter(), limit=6)]
            pg_hits = fresh_pg_store.keyword_search(query, MessageFilter(), limit=6)
            b = [h.message.content for h in pg_hits]
            assert a[:3] == b[:3], query
            assert set(a) == set(b), query
            # counted by the statement the first time, from the cache the second
            for _ in range(2):
                again = cached.keyword_search(query, MessageFilter(), limit=6)
                assert [(h.message.id, round(h.score, 9)) for h in again] == [
                    (h.message.id, round(h.score, 9)) for h in pg_hits
                ], query
        assert cached.keyword_search("the and of", MessageFilter()) == []  # stopwords only
    finally:
        lite.close()
        cached.close()



def test_keyword_scores_are_bm25_of_the_stored_vectors(fresh_pg_store: PostgresStore) -> None:
    """Each hit's score is FTS5's BM25 over its tsvector: term frequency = positions of the
    lexeme, length = lexemes, on both the small-log and the large-log statement. Capital
    letters, repeated words (one matching lexeme: the fast path) and several matching
    lexemes (the sub-select) are all here."""
    corpus = [
        "AAA Batteries Are Amazing, A+ AAA batteries",
        "batteries batteries batteries",
        "Alpha battery and a charger ALPHA",
        "the charger charges AA and AAA batteries: Charger",
        "nothing about it",
    ] * 2
    fresh_pg_store.create_session(Session(id="s"))
    fresh_pg_store.append("s", [Message(role="user", content=c) for c in corpus])
    large = PostgresStore(fresh_pg_store.url, exact_stats_below=0)
    queries = ("batteries", "AAA batteries charger", "alpha charger")
    try:
        for query in queries:
            # the query's words are looked up by their stems in every language's configuration
            lexemes = sorted({r[0] for r in fresh_pg_store.read(
                f"SELECT unnest(tsvector_to_array({every_config_tsvector('%s')}))", [query] * len(TEXT_CONFIGS))})
            n, avgdl = fresh_pg_store.read("SELECT count(*), avg(length(tsv))::float8 FROM messages")[0]
            df = {lex: int(fresh_pg_store.read("SELECT count(*) FROM messages WHERE tsv @@ %s::tsquery",
                                                (f"'{lex}'",))[0][0]) for lex in lexemes}
            tfs = fresh_pg_store.read(
                "SELECT m.id, length(m.tsv), u.lexeme, array_length(u.positions, 1) "
                "FROM messages m CROSS JOIN LATERAL unnest(m.tsv) u WHERE u.lexeme = ANY(%s)", (lexemes,))
            expected: dict[int, float] = {}
            for mid, dl, lex, tf in tfs:
                idf = fts5_idf(int(n), df[lex])
                expected[mid] = expected.get(mid, 0.0) + idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / avgdl))
            for store in (fresh_pg_store, large):
                hits = store.keyword_search(query, MessageFilter(), limit=20)
                assert {h.message.id: round(h.score, 9) for h in hits} == {
                    mid: round(score, 9) for mid, score in expected.items()}, query
        # the queries at once (one pipeline) score as each alone; stopwords alone find nothing
        for store in (fresh_pg_store, large):
            batched = store.keyword_searches([*queries, "the and of"], MessageFilter(), limit=20)
            alone = [store.keyword_search(q, MessageFilter(), limit=20) for q in queries]
            assert [[(h.message.id, round(h.score, 9)) for h in hits] for hits in batched] == [
                [(h.message.id, round(h.score, 9)) for h in hits] for hits in alone] + [[]]
    finally:
        large.close()


def test_keyword_hits_carry_their_session_and_its_adjacent_turns(fresh_pg_store: PostgresStore) -> None:
    """The search engine's coverage part reads the turns around each hit and labels each hit
    with its session: PostgreSQL returns both with the hit (no round trips of their own),
    never a turn of another session, and they are what the engine would have fetched."""
    from memlane.search.engine import RecallEngine

    s = fresh_pg_store
    s.create_session(Session(id="a"))
    s.create_session(Session(id="b"))
    s.append("a", [Message(role="user", content="We talked about rivers"),
                   Message(role="assistant", content="Kayaks are fun on rivers"),
                   Message(role="user", content="See you Sunday")])
    s.append("b", [Message(role="user", content="Kayaks in session b")])
    s.append("a", [Message(role="assistant", content="Kayaks again, later")])
    by_text = {h.message.content: h.adjacent for h in s.keyword_search("kayaks", MessageFilter())}
    assert by_text == {
        "Kayaks are fun on rivers": ("We talked about rivers", "See you Sunday"),
        "Kayaks in session b": (),  # its neighbours by id belong to session a
        "Kayaks again, later": (),
    }
    s.update_session("b", title="Boats", metadata={"k": 1})
    hits = s.keyword_search("kayaks", MessageFilter())
    assert {h.message.session_id for h in hits} == {"a", "b"}
    assert all(h.session is not None and h.session == s.get_session(h.message.session_id) for h in hits)
    engine = RecallEngine(s)
    found = engine.search("kayaks", MessageFilter(), top_k=5)
    assert [h.session for h in found] == [s.get_session(h.message.session_id) for h in found]
    folded = engine.candidates("kayaks rivers", MessageFilter(), mode="keyword")
    assert folded and all(c.context is not None for c in folded)
    fetched = [replace(c, context=None) for c in folded]
    engine._attach_context(fetched)
    assert [c.context for c in fetched] == [c.context for c in folded]


def test_large_log_drops_the_most_frequent_terms_on_postgres(fresh_pg_store: PostgresStore) -> None:
    # As on SQLite (tests/test_search_keyword.py): past the row budget the most frequent
    # OR-ed lexemes are left out; a lone lexeme is always kept.
    fresh_pg_store.create_session(Session(id="s"))
    fresh_pg_store.append("s", [
        Message(role="user", content=f"a common remark number {i}" + (" about a zebra" if i % 40 == 0 else ""))
        for i in range(200)
    ])
    large = PostgresStore(fresh_pg_store.url, exact_stats_below=0)
    large._keywords.row_budget = 50  # this log counts as large for this budget
    try:
        hits = large.keyword_search("common zebra", MessageFilter(), limit=500)
        assert sorted(h.message.content for h in hits) == sorted(
            f"a common remark number {i} about a zebra" for i in range(0, 200, 40)
        )
        assert len(large.keyword_search("common", MessageFilter(), limit=500)) == 200
        # Under the default budget the same log keeps both terms.
        assert len(fresh_pg_store.keyword_search("common zebra", MessageFilter(), limit=500)) == 200
    finally:
        large.close()


# ---------------------------------------------------------------- several OS processes

_WORKER = WORKER_RENDEZVOUS + r"""
import sys, time
from pathlib import Path
from memlane import Memory
url, name, n, barrier = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
other = "p2" if name == "p1" else "p1"

with Memory.from_url(url, embedder="none") as mem:
    mem.ensure_session("shared")
    (barrier.parent / f"ready-{name}").touch()
    wait_for(barrier)  # both start writing when the test opens the barrier
    started = time.time()
    for i in range(n):
        mem.add("shared", f"{name} shared note {i} about the lighthouse")
        mem.add(f"own-{name}", f"{name} own note {i}")
        if i % 10 == 0:
            assert mem.search("lighthouse", session_id="shared"), "search saw nothing"
        if i == 0:
            meet(barrier.parent, "wrote", name, other)  # overlapping windows, for sure
    ended = time.time()
print(f"ok {started} {ended}")
"""


def test_two_processes_append_and_search_concurrently(
    pg_url: str, fresh_pg_store: PostgresStore, tmp_path: Path
) -> None:
    import subprocess
    import sys
    import time

    n = 60
    barrier = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, pg_url, name, str(n), str(barrier)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for name in ("p1", "p2")
    ]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"ready-{name}").exists() for name in ("p1", "p2")):
        assert time.monotonic() < deadline, "the workers never got ready"
        assert all(p.poll() is None for p in procs), procs[0].stderr.read() if procs[0].stderr else ""
        time.sleep(0.01)
    barrier.touch()
    windows: list[tuple[float, float]] = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        word, started, ended = out.split()
        assert word == "ok"
        windows.append((float(started), float(ended)))
    # They ran at the same time: each started before the other finished.
    assert max(w[0] for w in windows) < min(w[1] for w in windows), windows
    s = fresh_pg_store
    assert s.count_messages("shared") == 2 * n
    session = s.get_session("shared")
    assert session is not None and session.message_count == 2 * n
    for name in ("p1", "p2"):
        own = [m.content for m in s.iter_messages(f"own-{name}")]
        assert own == [f"{name} own note {i}" for i in range(n)]  # nothing lost, in order
        shared = [m.content for m in s.iter_messages("shared") if m.content.startswith(name)]
        assert shared == [f"{name} shared note {i} about the lighthouse" for i in range(n)]
    assert len(s.keyword_search("lighthouse", MessageFilter(), limit=500)) == 2 * n


# ---------------------------------------------------------------- server crash

_CRASH_WRITER = r"""
import sys, time
from pathlib import Path
from memlane.errors import StorageError
from memlane.models import Message, Session
from memlane.store.postgres import PostgresStore, fts5_idf
from memlane.errors import ConflictError

url, acks, stop = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
store = PostgresStore(url, timeout=2, retry_seconds=0)  # surface every failure
try:
    store.create_session(Session(id="crash"))
except ConflictError:
    pass
i = failures = 0
with acks.open("a") as out:
    while not stop.exists():
        text = f"acknowledged write {i}"
        try:
            (stored,) = store.append("crash", [Message(role="user", content=text)])
        except StorageError:
            failures += 1  # server down or commit outcome unknown: not acknowledged
            time.sleep(0.05)
            continue
        out.write(f"{stored.id}\t{text}\n")
        out.flush()
        i += 1
store.close()
print(failures)
"""


def test_sigkill_of_the_server_loses_no_acknowledged_write(tmp_path: object) -> None:
    """Kill PostgreSQL (postmaster and backends) mid-write, twice; every ack survives."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    base = Path(str(tmp_path))
    acks, stop = base / "acks.tsv", base / "stop"
    server = EmbeddedPostgres(fsync=True)  # a server of its own: the shared one must not die
    bin_dir = server.bin
    try:
        server.start()
        url = server.create_database("crash")
        PostgresStore(url).close()
        writer = subprocess.Popen(
            [sys.executable, "-c", _CRASH_WRITER, url, str(acks), str(stop)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )

        def acked() -> int:
            return len(acks.read_text().splitlines()) if acks.exists() else 0

        def wait_for(count: int) -> None:
            deadline = time.monotonic() + 60
            while acked() < count:
                assert writer.poll() is None, writer.communicate()[1]
                assert time.monotonic() < deadline, "the writer made no progress"
                time.sleep(0.01)

        for _round in range(2):
            wait_for(acked() + 40)
            server.kill()  # SIGKILL while the writer is mid-transaction
            time.sleep(0.3)
            server.start()  # crash recovery replays the WAL
        wait_for(acked() + 40)  # the writer's pool reconnected by itself
        stop.touch()
        out, err = writer.communicate(timeout=60)
        assert writer.returncode == 0, err
        assert int(out) >= 1, "the kills never hit a write in flight"
        store = PostgresStore(url)
        try:
            lines = [line.split("\t") for line in acks.read_text().splitlines()]
            by_id = {m.id: m.content for m in store.get_messages([int(i) for i, _ in lines])}
            missing = [(i, t) for i, t in lines if by_id.get(int(i)) != t]
            assert missing == [], f"{len(missing)} acknowledged writes lost"
            session = store.get_session("crash")
            assert session is not None and session.message_count == store.count_messages("crash")
            assert store.count_messages("crash") >= len(lines)
        finally:
            store.close()
    finally:
        server.cleanup()
    # Nothing is left behind: the data, and as root the server account's copy of the binaries.
    assert not server.base.exists()
    assert bin_dir.is_dir() == (os.geteuid() != 0), bin_dir


def test_api_keys_live_in_postgres(fresh_pg_store: PostgresStore) -> None:
    from memlane.server.auth import KeyStore, key_store_for

    keys = key_store_for(fresh_pg_store)
    assert isinstance(keys, KeyStore) and not keys.has_active_keys()
    record, plaintext = keys.create_key("acme", "ci")
    assert keys.has_active_keys() and record.tenant_id == "acme"
    found = keys.verify(plaintext)
    assert found is not None and found.id == record.id
    assert keys.verify(plaintext[:-2] + "xx") is None and keys.verify("garbage") is None
    assert [k.id for k in keys.list_keys()] == [record.id]
    assert keys.revoke_key(record.id) and not keys.revoke_key(record.id)
    assert keys.verify(plaintext) is None and keys.list_keys() == []
    assert len(keys.list_keys(include_revoked=True)) == 1
    assert fresh_pg_store.read("SELECT count(*) FROM api_keys WHERE key_hash LIKE %s", (f"%{plaintext}%",)) == [(0,)]


def test_lost_connections_are_retried(pg_url: str) -> None:
    """Backends killed behind the pool's back: the next write is retried on a fresh
    connection (tenacity) and lands exactly once."""
    store = PostgresStore(pg_url, min_size=2, max_size=2, retry_seconds=10)
    admin = PostgresStore(pg_url, min_size=1, max_size=1)

    def kill_all_but_admin() -> int:
        rows = admin.read(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND application_name = 'memlane'"
        )
        return int(rows[0][0])

    try:
        store.create_session(Session(id="retry"))
        assert kill_all_but_admin() >= 2  # the store's two pooled connections
        stored = store.append("retry", [Message(role="user", content="after the kill")])
        assert [m.content for m in store.iter_messages("retry")] == ["after the kill"]
        assert stored[0].id is not None
    finally:
        for s in (store, admin):
            s.close()


def test_keyword_indexes_have_no_pending_list(pg_url: str) -> None:
    # A GIN pending list is scanned by every search until VACUUM merges it (migration 16).
    store = PostgresStore(pg_url)
    try:
        rows = store.read(
            "SELECT c.relname, c.reloptions FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_am a ON a.oid = c.relam WHERE a.amname = 'gin' AND c.relname = ANY(%s)",
            (["messages_tsv_by_tenant", "messages_tsv", "notes_tsv"],),
        )
        assert {name for name, _ in rows} >= {"notes_tsv"} and len(rows) == 2
        assert all("fastupdate=off" in (options or []) for _, options in rows), rows
    finally:
        store.close()
