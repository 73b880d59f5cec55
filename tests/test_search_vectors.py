"""The SQLite vector index: cascade, filters, model checks, several connections."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memlane import EmbedderMismatchError, Memory
from memlane.models import Message, MessageFilter, Session
from memlane.search.vectors import ModelInfo, SQLiteVectorIndex, VectorIndex, check_model
from memlane.store import SQLiteStore


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    s = SQLiteStore(tmp_path / "v.db")
    yield s
    s.close()


def _fill(store: SQLiteStore, sessions: int = 4, per: int = 25) -> list[Message]:
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


def test_is_a_vector_index(store: SQLiteStore) -> None:
    assert isinstance(SQLiteVectorIndex(store), VectorIndex)


def test_search_matches_brute_force_with_and_without_filters(store: SQLiteStore) -> None:
    msgs = _fill(store)
    index = SQLiteVectorIndex(store)
    check_model(index, ModelInfo("test", 16))
    rng = np.random.default_rng(1)
    vecs = _unit(rng, len(msgs), 16)
    assert index.upsert([m.id for m in msgs], vecs) == len(msgs)
    q = _unit(rng, 1, 16)[0]
    sims = vecs @ q
    by_id = {m.id: (m, float(s)) for m, s in zip(msgs, sims, strict=True)}

    def brute(pred: object, k: int) -> list[int]:
        ok = [(mid, s) for mid, (m, s) in by_id.items() if pred(m)]  # type: ignore[operator]
        return [mid for mid, _ in sorted(ok, key=lambda t: -t[1])[:k]]

    assert [i for i, _ in index.search(q, 10)] == brute(lambda m: True, 10)
    cases = [
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


def test_hidden_messages_are_not_found_unless_asked(store: SQLiteStore) -> None:
    msgs = _fill(store, sessions=1, per=4)
    index = SQLiteVectorIndex(store)
    check_model(index, ModelInfo("test", 4))
    index.upsert([m.id for m in msgs], np.eye(4, dtype=np.float32))
    store.hide_messages("s0")
    q = np.array([1, 0, 0, 0], dtype=np.float32)
    assert index.search(q, 3) == []
    assert index.search(q, 1, MessageFilter(include_hidden=True))[0][0] == msgs[0].id


def test_vectors_cascade_with_their_messages_and_other_connections_follow(
    store: SQLiteStore, tmp_path: Path
) -> None:
    msgs = _fill(store, sessions=2, per=4)
    index = SQLiteVectorIndex(store)
    check_model(index, ModelInfo("test", 8))
    index.upsert([m.id for m in msgs], _unit(np.random.default_rng(2), len(msgs), 8))
    other_store = SQLiteStore(tmp_path / "v.db")
    try:
        other = SQLiteVectorIndex(other_store)
        q = _unit(np.random.default_rng(3), 1, 8)[0]
        assert len(other.search(q, 100)) == 8  # loads the matrix in the second "process"
        store.delete_messages([msgs[0].id or 0])
        store.delete_session("s1")
        assert index.count() == 3
        assert sorted(i for i, _ in other.search(q, 100)) == sorted(m.id for m in msgs[1:4])
        assert other.missing_ids(10) == []
    finally:
        other_store.close()


def test_upsert_skips_forgotten_messages_and_missing_ids_lists_backlog(store: SQLiteStore) -> None:
    msgs = _fill(store, sessions=1, per=6)
    index = SQLiteVectorIndex(store)
    check_model(index, ModelInfo("test", 4))
    assert index.missing_ids(100) == [m.id for m in msgs]
    assert index.upsert([msgs[0].id or 0, 999_999], np.eye(4, dtype=np.float32)[:2]) == 1
    assert index.missing_ids(2) == [m.id for m in msgs[1:3]]
    assert index.missing_ids(100, after_id=msgs[4].id or 0) == [msgs[5].id]


def test_model_mismatch_is_refused_and_names_reindex(store: SQLiteStore) -> None:
    index = SQLiteVectorIndex(store)
    check_model(index, ModelInfo("model-a", 8, "r1"))
    check_model(index, ModelInfo("model-a", 8, "r1"))  # same model: fine
    for other in (ModelInfo("model-b", 8, "r1"), ModelInfo("model-a", 16, "r1"), ModelInfo("model-a", 8, "r2")):
        with pytest.raises(EmbedderMismatchError, match="memlane reindex"):
            check_model(index, other)
    with pytest.raises(EmbedderMismatchError):
        index.upsert([1], np.zeros((1, 16), dtype=np.float32))


def test_memory_refuses_a_database_made_with_another_embedder(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory(path, embedder="hashing") as mem:
        mem.add("s", "hello there")
        mem.flush()
    store = SQLiteStore(path)
    try:
        index = SQLiteVectorIndex(store)
        info = index.model_info()
        assert info is not None and info.model_id.startswith("hashing")
        store.write(lambda c: c.execute("UPDATE vector_meta SET value = 'other-model' WHERE key = 'model_id'"))
    finally:
        store.close()
    with pytest.raises(EmbedderMismatchError, match="memlane reindex"):
        Memory(path, embedder="hashing")
    # keyword-only memory does not care which vectors are stored
    with Memory(path, embedder="none") as mem:
        assert mem.search("hello")[0].message.content == "hello there"


def test_forget_and_delete_session_remove_vectors(tmp_path: Path) -> None:
    with Memory(tmp_path / "f.db", embedder="hashing") as mem:
        a = mem.add("a", "the kayak trip on the river")
        mem.add("a", "the garden is full of tomatoes")
        mem.add("b", "my kayak has a leak")
        mem.flush()
        index = mem.parts.recall.index
        assert index.count() == 3
        mem.forget_messages([a.id])
        assert index.count() == 2
        hits = mem.search("kayak")
        assert hits[0].message.content == "my kayak has a leak"
        assert a.id not in {h.message.id for h in hits}
        mem.delete_session("b")
        assert index.count() == 1
        assert all("kayak" not in h.message.content for h in mem.search("kayak"))
