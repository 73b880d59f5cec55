"""The int8 pre-ranking of a large vector matrix returns the exact float32 top k."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memlane.models import Message, MessageFilter, Session
from memlane.search import matrix
from memlane.search.matrix import QUANTIZED_ABOVE
from memlane.search.vectors import ModelInfo, SQLiteVectorIndex
from memlane.store import SQLiteStore

pytestmark = pytest.mark.skipif(matrix._simsimd is None, reason="simsimd is not installed")


def _clustered(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    # Chat logs repeat themselves: many near-duplicates whose similarities differ by less
    # than the quantization error would be the hard case for a pre-ranking.
    centres = rng.standard_normal((n // 50, dim)).astype(np.float32)
    x = centres[rng.integers(0, len(centres), n)] + 0.05 * rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _segment(data: np.ndarray) -> matrix.Segment:
    n = len(data)
    return matrix.Segment.of(np.arange(1, n + 1, dtype=np.int64), np.arange(1, n + 1, dtype=np.int64),
                             np.zeros(n, dtype=np.int32), data)


def test_large_matrix_top_k_is_exact() -> None:
    rng = np.random.default_rng(3)
    n, dim = QUANTIZED_ABOVE + 5_000, 64
    data = _clustered(rng, n, dim)
    seg = _segment(data)
    for _ in range(20):
        q = data[rng.integers(0, n)] + 0.1 * rng.standard_normal(dim).astype(np.float32)
        q /= np.linalg.norm(q)
        got = matrix.best([matrix.score(seg, q, None, None, quantized=True)], q, 100, quantized=True)
        exact = [int(i) + 1 for i in np.argsort(-(data @ q), kind="stable")[:100]]
        assert [i for i, _ in got] == exact
        # the similarities are the float32 ones, not the int8 estimates
        assert got[0][1] == pytest.approx(float(data[got[0][0] - 1] @ q), abs=1e-6)


def test_slices_score_only_their_rows() -> None:
    rng = np.random.default_rng(6)
    data = _clustered(rng, 5_000, 16)
    seg = _segment(data)
    q = data[10]
    got = matrix.best([matrix.score(seg, q, [(100, 200), (4_000, 4_100)], None, quantized=False)], q, 300,
                      quantized=False)
    assert len(got) == 200 and {i - 1 for i, _ in got} == set(range(100, 200)) | set(range(4_000, 4_100))


def test_replaced_rows_are_requantized(tmp_path: Path) -> None:
    # A message re-embedded after the base was built: its new vector (in the tail) is found,
    # its old row in the base is not.
    rng = np.random.default_rng(4)
    store = SQLiteStore(tmp_path / "r.db", durability="normal")
    try:
        store.create_session(Session(id="a", user_id="ana"))
        n, dim = QUANTIZED_ABOVE + 1_000, 32
        msgs = store.append("a", [Message(role="user", content=f"m{i}") for i in range(n)])
        ids = [m.id for m in msgs if m.id is not None]
        data = _clustered(rng, n, dim)
        index = SQLiteVectorIndex(store)
        index.set_model_info(ModelInfo("test", dim))
        index.upsert(ids, data)
        q = rng.standard_normal(dim).astype(np.float32)
        q /= np.linalg.norm(q)
        assert index.search(q, 1)[0][1] < 0.99  # builds the base
        target = ids[int(np.argsort(data @ q)[0])]  # the row least like q ...
        index.upsert([target], q[None, :])  # ... becomes q: its stale int8 codes would not shortlist it
        assert index.search(q, 1)[0] == (target, pytest.approx(1.0, abs=1e-6))
        old = -q
        assert all(mid != target for mid, _ in index.search(old, 5))
    finally:
        store.close()


def test_index_search_uses_it_with_filters(tmp_path: Path) -> None:
    # Through the index and a loose filter, on a matrix big enough to be quantized.
    rng = np.random.default_rng(5)
    store = SQLiteStore(tmp_path / "q.db", durability="normal")
    try:
        store.create_session(Session(id="a", user_id="ana"))
        store.create_session(Session(id="b", user_id="ben"))
        n = QUANTIZED_ABOVE + 500
        msgs = store.append("a", [Message(role="user", content=f"m{i}") for i in range(n - 50)])
        msgs += store.append("b", [Message(role="user", content=f"b{i}") for i in range(50)])
        ids = [m.id for m in msgs if m.id is not None]
        dim = 32
        data = _clustered(rng, n, dim)
        index = SQLiteVectorIndex(store)
        index.set_model_info(ModelInfo("test", dim))
        index.upsert(ids, data)
        q = data[-1]
        sims = data @ q
        ana = [ids[i] for i in np.argsort(-sims, kind="stable") if i < n - 50][:10]
        assert [mid for mid, _ in index.search(q, 10, MessageFilter(user_id="ana"))] == ana
        assert index.search(q, 1)[0][0] == ids[-1]
    finally:
        store.close()
