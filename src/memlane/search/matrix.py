"""The in-process copy of a vector table: a float32 matrix, its int8 copy, exact top k.

numpy (and simsimd) live here, apart from :mod:`memlane.search.vectors`, so that opening a
Memory, which checks the vector index's model, does not import them: they load with the
first search or the first vectors stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from memlane.ports import Vectors

_simsimd: ModuleType | None
try:
    # SIMD int8 dot products: scoring 100k int8 rows reads a quarter of the memory the
    # float32 matrix product does, and that scan is memory-bound.
    import simsimd

    _simsimd = simsimd
except ImportError:  # a platform without a wheel: float32 only, still exact
    _simsimd = None

_T = TypeVar("_T", bound=np.generic)


def blob(vector: Vectors) -> bytes:
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


#: Rows above which a search first ranks the int8 copy and re-scores only the best rows in
#: float32 (below it the float32 product is already cheap).
QUANTIZED_ABOVE = 20_000


def _quantize(rows: Vectors) -> tuple[NDArray[np.int8], NDArray[np.float32]]:
    """Each row as int8 codes and its scale (row ~ codes * scale): a per-row scale keeps
    rows with an unusually large component from being clipped."""
    peak = np.abs(rows).max(axis=1)
    scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    codes = np.rint(rows / scale[:, None]).astype(np.int8)
    return codes, scale


class Matrix:
    """The in-process copy of message_vectors: rows of unit vectors and their message ids,
    plus an int8 copy of the rows (see :meth:`best`)."""

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self.data = np.zeros((0, dimension), dtype=np.float32)
        self.codes = np.zeros((0, dimension), dtype=np.int8)
        self.scales = np.zeros(0, dtype=np.float32)
        self.ids = np.zeros(0, dtype=np.int64)
        self.size = 0
        self.row: dict[int, int] = {}
        self.seq = 0
        self.deletions = -1
        self._sorted: tuple[NDArray[np.int64], NDArray[np.int64]] | None = None

    def put(self, ids: Sequence[int], rows: Vectors) -> None:
        self._sorted = None
        fresh = [i for i, mid in enumerate(ids) if mid not in self.row]
        codes, scales = _quantize(rows)
        for i, mid in enumerate(ids):
            pos = self.row.get(mid)
            if pos is not None:
                self.data[pos] = rows[i]
                self.codes[pos] = codes[i]
                self.scales[pos] = scales[i]
        if not fresh:
            return
        need = self.size + len(fresh)
        if need > len(self.data):
            # Doubling keeps appends amortised O(1) while the index grows message by message.
            n = max(need, 2 * len(self.data), 1024)
            self.data = _grown(self.data, n, self.size)
            self.codes = _grown(self.codes, n, self.size)
            self.scales = _grown(self.scales, n, self.size)
            self.ids = _grown(self.ids, n, self.size)
        at = np.arange(self.size, self.size + len(fresh))
        self.data[at] = rows[fresh]
        self.codes[at] = codes[fresh]
        self.scales[at] = scales[fresh]
        self.ids[at] = np.asarray(ids, dtype=np.int64)[fresh]
        for i in fresh:
            self.row[int(ids[i])] = self.size
            self.size += 1

    def best(self, q: Vectors, k: int) -> list[tuple[int, float]]:
        """The ``k`` rows most similar to ``q`` (exact similarities, best first).

        On a large matrix the int8 copy ranks every row first (a quarter of the memory
        traffic of the float32 product, which bounds this scan) and only its best
        ``2k + 200`` rows are re-scored in float32. Quantization moves a similarity by
        about 1e-3, far less than the gap between a top-k row and the one in place
        ``2k + 200``, so the result is the exact top k in practice (the tests check it).
        """
        n = self.size
        shortlist = 2 * k + 200
        if _simsimd is None or n <= max(QUANTIZED_ABOVE, shortlist):
            return top(self.ids[:n], self.data[:n] @ q, k)
        q_codes, _ = _quantize(q[None, :])
        approx = np.asarray(
            _simsimd.cdist(q_codes, self.codes[:n], metric="dot", out_dtype="float32")
        ).reshape(-1)
        np.multiply(approx, self.scales[:n], out=approx)
        rows = np.argpartition(approx, n - shortlist)[n - shortlist :]
        return top(self.ids[rows], self.data[rows] @ q, k)

    def rows_of(self, ids: Sequence[int]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """(message ids that are present, their rows)."""
        if self._sorted is None:
            order = np.argsort(self.ids[: self.size], kind="stable")
            self._sorted = (self.ids[: self.size][order], order.astype(np.int64))
        keys, order = self._sorted
        wanted = np.asarray(ids, dtype=np.int64)
        if not len(keys) or not len(wanted):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        pos = np.clip(np.searchsorted(keys, wanted), 0, len(keys) - 1)
        hit = keys[pos] == wanted
        return wanted[hit], order[pos[hit]]


def _grown(a: NDArray[_T], n: int, used: int) -> NDArray[_T]:
    out = np.zeros((n, *a.shape[1:]), dtype=a.dtype)
    out[:used] = a[:used]
    return out



def top(ids: NDArray[np.int64], sims: NDArray[np.float32], k: int) -> list[tuple[int, float]]:
    if len(sims) == 0:
        return []
    part = np.argpartition(-sims, k - 1)[:k] if k < len(sims) else np.arange(len(sims))
    order = part[np.argsort(-sims[part], kind="stable")]
    return [(int(ids[i]), float(sims[i])) for i in order]
