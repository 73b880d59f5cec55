"""The pgvector index of the PostgreSQL store: same contract as the SQLite one."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memlane import EmbedderMismatchError, Memory
from memlane.models import Message, MessageFilter, Session
from memlane.search.recall import vector_index_for
from memlane.search.vectors import ModelInfo, VectorIndex, check_model
from memlane.store.pg_vectors import PgVectorIndex, vector_literal
from memlane.store.postgres import PostgresStore

pytestmark = pytest.mark.postgres


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _fill(store: PostgresStore, sessions: int = 4, per: int = 25) -> list[Message]:
    out: list[Message] = []
    start = datetime(2024, 1, 1, tzinfo=UTC)
    for s in range(sessions):
        store.create_session(Session(id=f"s{s}", user_id=f"u{s % 2}"))
        msgs = [
            Message(
                role="user" if i % 2 == 0 else "assistant",
                content=f"message {s}-{i}",
                author_name="Ann" if i % 2 == 0 else "Bob",
                created_at=start + timedelta(days=s, minutes=i),
            )
            for i in range(per)
        ]
        out.extend(store.append(f"s{s}", msgs))
    return out


def _index(store: PostgresStore) -> PgVectorIndex:
    index = store.vector_index()
    assert isinstance(index, PgVectorIndex)
    return index


def test_the_recall_engine_gets_the_pgvector_index(fresh_pg_store: PostgresStore) -> None:
    index = vector_index_for(fresh_pg_store)
    assert isinstance(index, PgVectorIndex) and isinstance(index, VectorIndex)


def test_search_matches_brute_force_with_and_without_filters(fresh_pg_store: PostgresStore) -> None:
    msgs = _fill(fresh_pg_store)
    index = _index(fresh_pg_store)
    check_model(index, ModelInfo("test", 16))
    rng = np.random.default_rng(1)
    vecs = _unit(rng, len(msgs), 16)
    assert index.upsert([m.id or 0 for m in msgs], vecs) == len(msgs)
    q = _unit(rng, 1, 16)[0]
    sims = vecs @ q
    by_id = {m.id: (m, float(s)) for m, s in zip(msgs, sims, strict=True)}

    def brute(pred: Callable[[Message], bool], k: int) -> list[int]:
        ok = [(mid, s) for mid, (m, s) in by_id.items() if pred(m)]
        return [int(mid or 0) for mid, _ in sorted(ok, key=lambda t: -t[1])[:k]]

    assert [i for i, _ in index.search(q, 10)] == brute(lambda m: True, 10)
    cases: list[tuple[MessageFilter, Callable[[Message], bool]]] = [
        (MessageFilter(session_id="s2"), lambda m: m.session_id == "s2"),
        (MessageFilter(user_id="u1"), lambda m: m.session_id in ("s1", "s3")),
        (MessageFilter(roles=("assistant",)), lambda m: m.role == "assistant"),
        (MessageFilter(authors=("Ann",)), lambda m: m.author_name == "Ann"),
        (
            MessageFilter(since=datetime(2024, 1, 2, tzinfo=UTC), until=datetime(2024, 1, 3, tzinfo=UTC)),
            lambda m: datetime(2024, 1, 2, tzinfo=UTC) <= m.created_at <= datetime(2024, 1, 3, tzinfo=UTC),
        ),
    ]
    for flt, pred in cases:
        got = index.search(q, 7, flt)
        assert [i for i, _ in got] == brute(pred, 7), flt
        assert all(abs(s - by_id[i][1]) < 1e-5 for i, s in got)
    sim = index.similarities(q, [msgs[0].id or 0, 10**9])
    assert list(sim) == [msgs[0].id] and abs(sim[msgs[0].id or 0] - by_id[msgs[0].id][1]) < 1e-5


def test_exact_search_compares_every_vector_and_measures_the_graph(fresh_pg_store: PostgresStore) -> None:
    """``exact=True`` is brute force (no graph); graph_recall is the share of it the HNSW
    graph returns, which ``memlane bench store`` reports."""
    msgs = _fill(fresh_pg_store, sessions=8, per=50)
    index = _index(fresh_pg_store)
    check_model(index, ModelInfo("test", 16))
    rng = np.random.default_rng(7)
    vecs = _unit(rng, len(msgs), 16)
    index.upsert([m.id or 0 for m in msgs], vecs)
    ids = np.array([m.id or 0 for m in msgs])
    queries = list(_unit(rng, 20, 16))
    for q in queries:
        assert [i for i, _ in index.search(q, 10, exact=True)] == [int(i) for i in ids[np.argsort(-(vecs @ q))[:10]]]
    plan = "\n".join(r[0] for r in fresh_pg_store.read(
        "EXPLAIN SELECT message_id FROM message_vectors ORDER BY embedding <=> %s::vector LIMIT 10",
        (vector_literal(queries[0]),)))
    assert "message_vectors_hnsw" in plan  # the graph is what search() walks
    assert 0.8 <= index.graph_recall(queries, 10) <= 1.0
    assert index.graph_recall([], 10) == 1.0


def test_filtered_search_returns_k_rows_through_the_hnsw_graph(fresh_pg_store: PostgresStore) -> None:
    """A filter most rows fail must still yield k rows (iterative index scan), not fewer."""
    store = fresh_pg_store
    store.create_session(Session(id="big", user_id="many"))
    store.create_session(Session(id="few", user_id="rare"))
    big = store.append("big", [Message(role="user", content=f"b{i}") for i in range(1500)])
    few = store.append("few", [Message(role="user", content=f"f{i}") for i in range(30)])
    index = _index(store)
    check_model(index, ModelInfo("test", 32))
    rng = np.random.default_rng(5)
    vecs = _unit(rng, len(big) + len(few), 32)
    index.upsert([m.id or 0 for m in big + few], vecs)
    store.write(lambda c: c.execute("ANALYZE"))
    got = index.search(vecs[0], 20, MessageFilter(user_id="rare"))
    assert len(got) == 20 and {i for i, _ in got} <= {m.id for m in few}


def test_hidden_messages_are_not_found_unless_asked(fresh_pg_store: PostgresStore) -> None:
    msgs = _fill(fresh_pg_store, sessions=1, per=4)
    index = _index(fresh_pg_store)
    check_model(index, ModelInfo("test", 4))
    index.upsert([m.id or 0 for m in msgs], np.eye(4, dtype=np.float32))
    fresh_pg_store.hide_messages("s0")
    q = np.array([1, 0, 0, 0], dtype=np.float32)
    assert index.search(q, 3) == []
    assert index.search(q, 1, MessageFilter(include_hidden=True))[0][0] == msgs[0].id


def test_vectors_cascade_and_other_connections_see_them(fresh_pg_store: PostgresStore, pg_url: str) -> None:
    msgs = _fill(fresh_pg_store, sessions=2, per=4)
    index = _index(fresh_pg_store)
    check_model(index, ModelInfo("test", 8))
    index.upsert([m.id or 0 for m in msgs], _unit(np.random.default_rng(2), len(msgs), 8))
    other_store = PostgresStore(pg_url)
    try:
        other = _index(other_store)
        q = _unit(np.random.default_rng(3), 1, 8)[0]
        assert len(other.search(q, 100)) == 8
        fresh_pg_store.delete_messages([msgs[0].id or 0])
        fresh_pg_store.delete_session("s1")
        assert index.count() == 3
        assert sorted(i for i, _ in other.search(q, 100)) == sorted(m.id or 0 for m in msgs[1:4])
        assert other.missing_ids(10) == []
    finally:
        other_store.close()


def test_upsert_skips_forgotten_messages_and_missing_ids_lists_backlog(fresh_pg_store: PostgresStore) -> None:
    msgs = _fill(fresh_pg_store, sessions=1, per=6)
    index = _index(fresh_pg_store)
    check_model(index, ModelInfo("test", 4))
    assert index.missing_ids(100) == [m.id for m in msgs]
    assert index.upsert([msgs[0].id or 0, 999_999], np.eye(4, dtype=np.float32)[:2]) == 1
    assert index.missing_ids(2) == [m.id for m in msgs[1:3]]
    assert index.missing_ids(100, after_id=msgs[4].id or 0) == [msgs[5].id]


def test_model_mismatch_is_refused_and_reindex_can_switch(fresh_pg_store: PostgresStore) -> None:
    msgs = _fill(fresh_pg_store, sessions=1, per=2)
    index = _index(fresh_pg_store)
    check_model(index, ModelInfo("model-a", 8, "r1"))
    check_model(index, ModelInfo("model-a", 8, "r1"))  # same model: fine
    index.upsert([msgs[0].id or 0], _unit(np.random.default_rng(4), 1, 8))
    for other in (ModelInfo("model-b", 8, "r1"), ModelInfo("model-a", 16, "r1"), ModelInfo("model-a", 8, "r2")):
        with pytest.raises(EmbedderMismatchError, match="memlane reindex"):
            check_model(index, other)
    with pytest.raises(EmbedderMismatchError):
        index.upsert([msgs[0].id or 0], np.zeros((1, 16), dtype=np.float32))
    index.clear()  # what reindex does before switching
    check_model(index, ModelInfo("model-b", 16))
    assert index.upsert([m.id or 0 for m in msgs], _unit(np.random.default_rng(5), 2, 16)) == 2
    assert len(index.search(np.ones(16, dtype=np.float32) / 4, 5)) == 2


def test_memory_on_postgres_does_hybrid_recall_and_forgets(pg_url: str, fresh_pg_store: PostgresStore) -> None:
    with Memory.from_url(pg_url, embedder="hashing") as mem:
        a = mem.add("a", "the kayak trip on the river")
        mem.add("a", "the garden is full of tomatoes")
        mem.add("b", "my kayak has a leak")
        mem.flush()
        index = mem.parts.recall.index
        assert isinstance(index, PgVectorIndex) and index.count() == 3
        hits = mem.search("kayak")
        assert hits[0].scores.get("semantic", 0) > 0
        mem.forget_messages([a.id])
        assert index.count() == 2
        assert mem.search("kayak")[0].message.content == "my kayak has a leak"
        mem.delete_session("b")
        assert index.count() == 1
        assert all("kayak" not in h.message.content for h in mem.search("kayak"))


def test_bulk_load_builds_the_graph_once(fresh_pg_store: PostgresStore) -> None:
    msgs = _fill(fresh_pg_store, sessions=2, per=30)
    index = _index(fresh_pg_store)
    check_model(index, ModelInfo("test", 8))
    vecs = _unit(np.random.default_rng(9), len(msgs), 8)
    with index.bulk_load():
        assert not index.has_graph()
        index.upsert([m.id or 0 for m in msgs], vecs)
        assert index.search(vecs[3], 1)[0][0] == msgs[3].id  # exact scan meanwhile
    assert index.has_graph()
    assert index.search(vecs[5], 1)[0][0] == msgs[5].id


def test_reindex_on_postgres_rebuilds_every_vector(fresh_pg_store: PostgresStore) -> None:
    from memlane.search.embedders import get_embedder
    from memlane.search.reindex import reindex

    msgs = _fill(fresh_pg_store, sessions=2, per=10)
    index = _index(fresh_pg_store)
    check_model(index, ModelInfo("old-model", 8))
    result = reindex(fresh_pg_store, index, get_embedder("hashing"), batch_size=7)
    assert result.messages == len(msgs) and result.embedded == len(msgs)
    assert index.count() == len(msgs) and index.has_graph()
    info = index.model_info()
    assert info is not None and info.model_id.startswith("hashing")
