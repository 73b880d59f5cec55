"""The vector index files beside a SQLite database: per-user search, sharing between
processes, catching up with the table, and erasing forgotten vectors from disk."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memlane import Memory
from memlane.models import Message, MessageFilter, Session
from memlane.search.vectors import ModelInfo, SQLiteVectorIndex
from memlane.store import SQLiteStore, sqlite_vectors

DIM = 16


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _files(db: Path) -> Path:
    return Path(str(db) + "-vectors")


def _generation(db: Path) -> int:
    return int(json.loads((_files(db) / "current.json").read_text())["generation"])


class Corpus:
    """Sessions of several users with random vectors, and the brute-force answer."""

    def __init__(self, store: SQLiteStore, seed: int = 1) -> None:
        self.store = store
        self.rng = np.random.default_rng(seed)
        self.index = SQLiteVectorIndex(store)
        self.index.set_model_info(ModelInfo("test", DIM))
        self.owner: dict[int, str] = {}  # message id -> session id
        self.vec: dict[int, np.ndarray] = {}
        self.users: dict[str, str] = {}  # session id -> user

    def add(self, sid: str, user: str, n: int) -> list[int]:
        if sid not in self.users:
            self.store.create_session(Session(id=sid, user_id=user))
            self.users[sid] = user
        msgs = self.store.append(sid, [Message(role="user", content=f"{sid} {i}") for i in range(n)])
        ids = [m.id for m in msgs if m.id is not None]
        vecs = _unit(self.rng, n)
        self.index.upsert(ids, vecs)
        for mid, v in zip(ids, vecs, strict=True):
            self.owner[mid], self.vec[mid] = sid, v
        return ids

    def brute(self, q: np.ndarray, k: int, *, user: str | None = None, session: str | None = None) -> list[int]:
        ok = [m for m in self.vec if (user is None or self.users[self.owner[m]] == user)
              and (session is None or self.owner[m] == session)]
        return sorted(ok, key=lambda m: -float(self.vec[m] @ q))[:k]


def _ids(hits: list[tuple[int, float]]) -> list[int]:
    return [m for m, _ in hits]


def test_a_users_search_sees_only_that_users_vectors_and_is_exact(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "u.db")
    try:
        c = Corpus(store)
        for s in range(30):
            c.add(f"s{s}", f"u{s % 7}", 12)
        for _ in range(5):
            q = _unit(c.rng, 1)[0]
            for user in ("u0", "u3", "nobody"):
                assert _ids(c.index.search(q, 10, MessageFilter(user_id=user))) == c.brute(q, 10, user=user)
            assert _ids(c.index.search(q, 5, MessageFilter(session_id="s4"))) == c.brute(q, 5, session="s4")
            assert _ids(c.index.search(q, 10)) == c.brute(q, 10)
        # Written after the base was built: found from the tail, with the same filters.
        c.add("s4", "u4", 5)
        c.add("late", "u0", 8)
        q = _unit(c.rng, 1)[0]
        assert _ids(c.index.search(q, 10, MessageFilter(user_id="u0"))) == c.brute(q, 10, user="u0")
        assert _ids(c.index.search(q, 20, MessageFilter(session_id="s4"))) == c.brute(q, 20, session="s4")
        # A session handed to another user moves with it (the owners trigger).
        store.update_session("s3", user_id="u0")
        c.users["s3"] = "u0"
        assert _ids(c.index.search(q, 15, MessageFilter(user_id="u0"))) == c.brute(q, 15, user="u0")
        assert _ids(c.index.search(q, 15, MessageFilter(user_id="u3"))) == c.brute(q, 15, user="u3")
    finally:
        store.close()


def test_files_are_built_once_and_opened_by_other_processes(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    store = SQLiteStore(db)
    other = SQLiteStore(db)  # another process's connection to the same file
    try:
        c = Corpus(store)
        for s in range(6):
            c.add(f"s{s}", f"u{s % 2}", 10)
        q = _unit(c.rng, 1)[0]
        assert not _files(db).exists()
        assert _ids(c.index.search(q, 5)) == c.brute(q, 5)
        assert (_files(db) / "current.json").exists()
        generation = _generation(db)
        reader = SQLiteVectorIndex(other)
        assert _ids(reader.search(q, 5, MessageFilter(user_id="u1"))) == c.brute(q, 5, user="u1")
        assert _generation(db) == generation  # opened, not rebuilt
        c.add("s9", "u1", 4)  # the other process catches up from the table
        assert _ids(reader.search(q, 50, MessageFilter(user_id="u1"))) == c.brute(q, 50, user="u1")
    finally:
        other.close()
        store.close()


def test_a_growing_tail_is_folded_into_a_new_generation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_vectors, "TAIL_ROWS", 20)
    db = tmp_path / "g.db"
    store = SQLiteStore(db)
    try:
        c = Corpus(store)
        c.add("a", "ann", 30)
        q = _unit(c.rng, 1)[0]
        c.index.search(q, 3)
        first = _generation(db)
        for s in range(4):
            c.add(f"b{s}", "ben", 8)
            assert _ids(c.index.search(q, 10, MessageFilter(user_id="ben"))) == c.brute(q, 10, user="ben")
        assert _generation(db) > first
        assert _ids(c.index.search(q, 10)) == c.brute(q, 10)
    finally:
        store.close()


def test_damaged_or_missing_files_are_rebuilt_from_the_table(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    store = SQLiteStore(db)
    try:
        c = Corpus(store)
        c.add("a", "ann", 20)
        q = _unit(c.rng, 1)[0]
        c.index.search(q, 3)
        generation = _files(db) / f"g{_generation(db)}"
        (generation / "data.npy").write_bytes(b"not numpy")
        fresh = SQLiteVectorIndex(store)
        assert _ids(fresh.search(q, 5)) == c.brute(q, 5)
        for path in _files(db).rglob("*.npy"):
            path.unlink()
        assert _ids(SQLiteVectorIndex(store).search(q, 5)) == c.brute(q, 5)
    finally:
        store.close()


def _file_bytes(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(_files(db).rglob("*")) if p.is_file())


def test_forgotten_vectors_are_gone_from_the_index_files(tmp_path: Path) -> None:
    db = tmp_path / "f.db"
    store = SQLiteStore(db)
    other = SQLiteStore(db)
    try:
        c = Corpus(store)
        kept = c.add("keep", "ann", 10)
        gone_session = c.add("gone", "ann", 10)
        q = _unit(c.rng, 1)[0]
        reader = SQLiteVectorIndex(other)
        reader.search(q, 3)  # files built, and mapped by another "process"
        some = kept[:2]
        for mid in [*gone_session, *some]:
            assert c.vec[mid].astype("<f4").tobytes() in _file_bytes(db)
        store.delete_session("gone")
        store.delete_messages(some)
        # gone from the files right away, before any search
        data = _file_bytes(db)
        for mid in [*gone_session, *some]:
            assert c.vec[mid].astype("<f4").tobytes() not in data
        assert c.vec[kept[5]].astype("<f4").tobytes() in data
        assert store.read("SELECT COUNT(*) FROM vector_deletions")[0][0] == 0  # the log is trimmed
        for gone in (gone_session, some):
            for mid in gone:
                del c.vec[mid]
        assert _ids(reader.search(q, 30)) == c.brute(q, 30)
        assert _ids(c.index.search(q, 30, MessageFilter(user_id="ann"))) == c.brute(q, 30)
    finally:
        other.close()
        store.close()


def test_a_search_after_its_tail_rows_were_deleted_sees_the_new_tail(tmp_path: Path) -> None:
    """A session's search remembers which tail rows are its own; deleting every tail row
    (nothing written since) must not leave it pointing at rows that are gone."""
    store = SQLiteStore(tmp_path / "t.db")
    try:
        c = Corpus(store)
        c.add("base", "ann", 10)
        q = _unit(c.rng, 1)[0]
        c.index.search(q, 3)  # the files are built from the rows so far
        late = c.add("late", "bob", 4)  # these stay in the tail
        assert _ids(c.index.search(q, 10, MessageFilter(session_id="late"))) == c.brute(q, 10, session="late")
        store.delete_messages(late)  # the whole tail
        for mid in late:
            del c.vec[mid]
        assert c.index.search(q, 10, MessageFilter(session_id="late")) == []
        assert c.index.search(q, 10, MessageFilter(user_id="bob")) == []
        assert _ids(c.index.search(q, 10, MessageFilter(user_id="ann"))) == c.brute(q, 10, user="ann")
    finally:
        store.close()


def test_memory_forget_erases_vectors_from_the_files(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with Memory(db, embedder="hashing") as mem:
        keep = mem.add("a", "the kayak trip on the river")
        gone = mem.add("b", "my secret kayak has a leak")
        mem.flush()
        assert mem.search("kayak")  # builds the files
        assert _files(db).exists()
        mem.forget_messages([gone.id])
        hits = mem.search("kayak")
        assert [h.message.id for h in hits] == [keep.id]
    store = SQLiteStore(db)
    try:
        rows = store.read("SELECT embedding FROM message_vectors")
        assert len(rows) == 1 and rows[0][0] in _file_bytes(db)
    finally:
        store.close()


def test_in_memory_database_keeps_no_files(tmp_path: Path) -> None:
    store = SQLiteStore(":memory:")
    try:
        c = Corpus(store)
        c.add("a", "ann", 12)
        c.add("b", "ben", 12)
        q = _unit(c.rng, 1)[0]
        assert _ids(c.index.search(q, 5, MessageFilter(user_id="ben"))) == c.brute(q, 5, user="ben")
        store.delete_session("b")
        del_ids = [m for m, s in c.owner.items() if s == "b"]
        for mid in del_ids:
            del c.vec[mid]
        assert _ids(c.index.search(q, 30)) == c.brute(q, 30)
    finally:
        store.close()
    assert not list(tmp_path.iterdir())
