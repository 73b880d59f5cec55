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


def _exact(m: matrix.Matrix, q: np.ndarray, k: int) -> list[int]:
    sims = m.data[: m.size] @ q
    return [int(m.ids[i]) for i in np.argsort(-sims, kind="stable")[:k]]


def test_large_matrix_top_k_is_exact() -> None:
    rng = np.random.default_rng(3)
    n, dim = QUANTIZED_ABOVE + 5_000, 64
    data = _clustered(rng, n, dim)
    m = matrix.Matrix(dim)
    ids = list(range(1, n + 1))
    for start in range(0, n, 7_000):  # grown in several appends, as the index is
        m.put(ids[start : start + 7_000], data[start : start + 7_000])
    for _ in range(20):
        q = data[rng.integers(0, n)] + 0.1 * rng.standard_normal(dim).astype(np.float32)
        q /= np.linalg.norm(q)
        got = m.best(q, 100)
        assert [i for i, _ in got] == _exact(m, q, 100)
        # the similarities are the float32 ones, not the int8 estimates
        assert got[0][1] == pytest.approx(float(m.data[got[0][0] - 1] @ q), abs=1e-6)


def test_replaced_rows_are_requantized() -> None:
    rng = np.random.default_rng(4)
    n, dim = QUANTIZED_ABOVE + 1_000, 32
    data = _clustered(rng, n, dim)
    m = matrix.Matrix(dim)
    m.put(list(range(n)), data)
    q = rng.standard_normal(dim).astype(np.float32)
    q /= np.linalg.norm(q)
    target = int(np.argsort(data @ q)[0])  # the row least like q ...
    m.put([target], q[None, :])  # ... becomes q: its stale int8 codes would not shortlist it
    assert m.best(q, 1)[0] == (target, pytest.approx(1.0, abs=1e-6))


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
