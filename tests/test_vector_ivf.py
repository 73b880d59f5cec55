"""Approximate search of large selections through the inverted lists (memlane.search.ivf):
agreement with exact search on a seeded set, exact search below the threshold, forgotten
vectors gone from every index file (centroids included), and a build killed half way."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memlane.models import Message, MessageFilter, Session
from memlane.search import ivf
from memlane.search.matrix import quantize
from memlane.search.vectors import ModelInfo, SQLiteVectorIndex
from memlane.store import SQLiteStore

DIM = 32
CENTRES = 60


def _clustered(rng: np.random.Generator, centres: np.ndarray, n: int) -> np.ndarray:
    """Unit vectors around a few centres, as chat repeats itself."""
    x = centres[rng.integers(0, len(centres), n)] + 0.35 * rng.standard_normal((n, DIM)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


class Seeded:
    """``sessions`` sessions of 25 messages; every 10th session is user "small"'s, the rest
    "big"'s; the vectors and their owners are kept for the brute-force answer."""

    def __init__(self, store: SQLiteStore, sessions: int, seed: int = 3) -> None:
        self.rng = np.random.default_rng(seed)
        self.centres = self.rng.standard_normal((CENTRES, DIM)).astype(np.float32)
        self.index = SQLiteVectorIndex(store)
        self.index.set_model_info(ModelInfo("test", DIM))
        self.vec: dict[int, np.ndarray] = {}
        self.user: dict[int, str] = {}
        self.session: dict[int, str] = {}
        for s in range(sessions):
            user = "small" if s % 10 == 0 else "big"
            sid = f"s{s}"
            store.create_session(Session(id=sid, user_id=user))
            msgs = store.append(sid, [Message(role="user", content=f"m{i}") for i in range(25)])
            ids = [m.id for m in msgs if m.id is not None]
            vecs = _clustered(self.rng, self.centres, len(ids))
            self.index.upsert(ids, vecs)
            for mid, v in zip(ids, vecs, strict=True):
                self.vec[mid], self.user[mid], self.session[mid] = v, user, sid

    def query(self) -> np.ndarray:
        return _clustered(self.rng, self.centres, 1)[0]

    def brute(self, q: np.ndarray, k: int, user: str | None = None) -> list[int]:
        ok = [m for m in self.vec if user is None or self.user[m] == user]
        return sorted(ok, key=lambda m: (-float(self.vec[m] @ q), m))[:k]


def _ids(hits: list[tuple[int, float]]) -> list[int]:
    return [m for m, _ in hits]


def _generation(db: Path) -> Path:
    files = Path(f"{db}-vectors")
    return max((p for p in files.glob("g*") if (p / "ivf_rows.npy").exists()), key=lambda p: int(p.name[1:]))


@pytest.fixture
def small_threshold(monkeypatch: pytest.MonkeyPatch) -> int:
    """Lists from 1,000 rows on, so a test needs thousands of rows, not 50,000."""
    monkeypatch.setattr(ivf, "ANN_ABOVE", 1_000)
    return 1_000


def test_approximate_search_agrees_with_exact_on_a_seeded_set(tmp_path: Path, small_threshold: int) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    try:
        c = Seeded(store, 200)  # 5,000 rows: 500 of user "small", 4,500 of "big"
        found10 = found50 = 0.0
        queries = 30
        for _ in range(queries):
            q = c.query()
            # below the threshold the search stays exact, to the last place
            assert _ids(c.index.search(q, 10, MessageFilter(user_id="small"))) == c.brute(q, 10, "small")
            hits = _ids(c.index.search(q, 50, MessageFilter(user_id="big")))
            assert all(c.user[m] == "big" for m in hits)  # never another user's rows
            exact = c.brute(q, 50, "big")
            assert _ids(c.index.exact_top(q, 50, MessageFilter(user_id="big"))) == exact
            found10 += len(set(hits[:10]) & set(exact[:10])) / 10
            found50 += len(set(hits) & set(exact)) / 50
            assert hits[0] == exact[0]
        assert _generation(tmp_path / "a.db")  # the lists are on disk
        assert found10 / queries >= 0.9
        assert found50 / queries >= 0.85
    finally:
        store.close()


def test_no_bytes_of_a_forgotten_vector_stay_in_the_lists_or_centroids(tmp_path: Path, small_threshold: int) -> None:
    db = tmp_path / "e.db"
    store = SQLiteStore(db)
    try:
        c = Seeded(store, 80)  # 2,000 rows
        c.index.search(c.query(), 5)  # builds the files and the lists
        gen = _generation(db)
        list_of = np.load(gen / "ivf_list_of.npy")
        rows_of = {int(m): r for r, m in enumerate(np.load(gen / "ids.npy").tolist())}
        # A whole list but two members, and a whole session: the list's centroid must go
        # (two rows' mean would be nearly one of them), the others are recomputed.
        target = int(np.bincount(list_of[list_of >= 0]).argmax())
        members = [m for m, r in rows_of.items() if list_of[r] == target]
        gone = set(members[:-2]) | {m for m in c.vec if c.session[m] == "s3"}
        store.delete_messages(sorted(gone))
        blobs = b"".join(p.read_bytes() for p in sorted(Path(f"{db}-vectors").rglob("*.npy")))
        for mid in gone:
            assert c.vec[mid].astype("<f4").tobytes() not in blobs
            codes, _ = quantize(c.vec[mid][None, :])
            assert codes.tobytes() not in blobs
        centroids = np.load(gen / "ivf_centroids.npy")
        assert not centroids[target].any()
        left = [m for m in c.vec if m not in gone]
        for lst in {int(list_of[rows_of[m]]) for m in gone} - {target}:
            live = np.array([c.vec[m] for m in left if list_of[rows_of[m]] == lst])
            mean = live.sum(axis=0)
            assert np.allclose(centroids[lst], mean / np.linalg.norm(mean), atol=1e-5)
        for mid in gone:
            del c.vec[mid]
        q = c.query()
        assert _ids(c.index.search(q, 20, MessageFilter(user_id="small"))) == c.brute(q, 20, "small")
        assert not set(_ids(c.index.search(q, 100))) & gone
    finally:
        store.close()


_BUILD = """
import sys, time
import numpy as np
from memlane.models import MessageFilter
from memlane.search import ivf
from memlane.search.vectors import SQLiteVectorIndex
from memlane.store import SQLiteStore
from memlane.store.vector_files import VectorFiles

def stop_here(*args, **kwargs):
    # The parent kills this process once it has said where it is: a kill at a known point of
    # the build, not after a guessed delay (a quiet machine finishes a build in 0.2 s).
    print("at " + sys.argv[3], flush=True)
    time.sleep(600)

if sys.argv[3] == "lists":
    ivf.build = stop_here          # rows written, inverted lists not yet
else:
    VectorFiles.publish = stop_here  # every file written, the generation not yet published
ivf.ANN_ABOVE = 1_000
store = SQLiteStore(sys.argv[1])
SQLiteVectorIndex(store).search(np.ones(int(sys.argv[2]), dtype=np.float32) / int(sys.argv[2]) ** 0.5, 5,
                                MessageFilter())
print("built", flush=True)
"""


def test_a_build_killed_half_way_leaves_a_searchable_index(tmp_path: Path, small_threshold: int) -> None:
    db = tmp_path / "k.db"
    store = SQLiteStore(db)
    try:
        c = Seeded(store, 400)  # 10,000 rows
    finally:
        store.close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for stage in ("lists", "publish"):
        proc = subprocess.Popen([sys.executable, "-c", _BUILD, str(db), str(DIM), stage], stdout=subprocess.PIPE,
                                text=True, env=env)
        assert proc.stdout is not None
        try:
            assert proc.stdout.readline().strip() == f"at {stage}"  # the build is part way
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=60)
        assert proc.returncode == -signal.SIGKILL
    store = SQLiteStore(db)
    try:
        index = SQLiteVectorIndex(store)
        for _ in range(5):
            q = c.query()
            assert _ids(index.search(q, 10, MessageFilter(user_id="small"))) == c.brute(q, 10, "small")
            hits = _ids(index.search(q, 10, MessageFilter(user_id="big")))
            assert hits[0] == c.brute(q, 1, "big")[0]
    finally:
        store.close()


def test_file_rows_read_without_the_mapping_match_the_table_and_erasure(tmp_path: Path) -> None:
    """Re-scoring reads scattered float32 rows with pread (Segment.rows_of), not through the
    mapping: the same vectors, and zeros once erased."""
    from memlane.store.vector_files import VectorFiles

    db = tmp_path / "r.db"
    store = SQLiteStore(db)
    try:
        c = Seeded(store, 8)
        c.index.search(c.query(), 5)  # builds the files
        gone = sorted(m for m in c.vec if c.session[m] == "s2")
        store.delete_messages(gone)
        base = VectorFiles(str(db)).open()
        assert base is not None and base.segment.reader is not None
        rows = np.arange(len(base.segment), dtype=np.int64)[::3]
        read = base.segment.rows_of(rows)
        assert np.array_equal(read, np.asarray(base.segment.data[rows]))
        for row, mid in zip(rows.tolist(), np.asarray(base.segment.ids[rows]).tolist(), strict=True):
            if mid == -1:
                assert not read[rows.tolist().index(row)].any()
            else:
                assert np.array_equal(read[rows.tolist().index(row)], c.vec[mid])
    finally:
        store.close()
