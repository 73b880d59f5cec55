"""A coarse quantiser (inverted lists, "IVF") over the base segment: approximate search
for selections too large to scan.

Scanning a selection's int8 codes is exact and cheap up to some tens of thousands of rows;
past :data:`ANN_ABOVE` (measured with ``memlane bench search --vectors-only``) a search
instead scores the query against the lists' centroids, and scans only the rows of the
``nprobe`` nearest lists that fall in the selection. The lists hold *row numbers* of the
base segment, sorted by (list, row), never vectors: the vectors stay in the segment's
files, where forgetting erases them in place. A centroid is the mean of its list's live
rows; :func:`refresh` recomputes it from what is left when a row of its list is erased, and
zeroes it when fewer than :data:`MIN_MEMBERS` rows are left, so nothing on disk is derived
from a forgotten vector.

The selection is a set of row slices (a user's sessions are one slice of the base, see
:mod:`memlane.search.matrix`), so one set of lists serves every filter: the rows of a probed
list are intersected with the slices, and a user's search never touches another user's rows
beyond the list's row numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from memlane.ports import Vectors
from memlane.search.matrix import ERASED, dots

__all__ = ["ANN_ABOVE", "MIN_MEMBERS", "Lists", "build", "refresh", "scan_target"]

#: Selections of more rows than this are searched through the lists; at or below it the
#: search is exact (an int8 scan of the selection, re-scored in float32). The scan of
#: 100,000 rows stays well within the search budget (``memlane bench search``: vector p50
#: 16 ms under load 12-15, 100% share), while 1,000,000 rows took 402 ms: the lists are for
#: the selections in between and beyond (``memlane bench search --vectors-only --messages
#: 1000000`` reports their recall against exact search per user share).
ANN_ABOVE = 200_000
#: A list needs this many live rows to keep a centroid: a mean of fewer would be (nearly)
#: one message's vector.
MIN_MEMBERS = 4
#: Rows per list the build aims at (lists = rows / this, at least 16).
_PER_LIST = 1_000
#: Share of the selection's rows a search aims to scan: the nearest lists are probed until
#: this many of the selection's rows (and at least the pool) are candidates.
SCAN_SHARE = 0.04
_TRAIN_ROUNDS = 8
_TRAIN_PER_LIST = 32
_CHUNK = 32_768

F32s = NDArray[np.float32]
I64s = NDArray[np.int64]


def scan_target(selected: int, k: int) -> int:
    """Rows a search of ``k`` over ``selected`` rows scans through the lists."""
    return max(10 * k, int(SCAN_SHARE * selected))


@dataclass
class Lists:
    """Centroids and the base rows of each list: ``rows[starts[l]:starts[l + 1]]``,
    ascending, are list ``l``'s; ``list_of[r]`` is row ``r``'s list (-1: in none)."""

    centroids: F32s
    rows: I64s
    starts: I64s
    list_of: NDArray[np.int32]

    def __len__(self) -> int:
        return len(self.centroids)

    def candidates(self, q: Vectors, slices: Sequence[tuple[int, int]] | None, want: int) -> I64s:
        """Rows (ascending) of the nearest lists that fall in ``slices`` (None: every
        row), probing lists nearest first until at least ``want`` rows are found."""
        sims = dots(np.asarray(self.centroids), q)
        order = np.argsort(-sims, kind="stable")
        lo = hi = None
        if slices is not None:
            if not slices:
                return np.zeros(0, np.int64)
            lo = np.fromiter((a for a, _ in slices), dtype=np.int64, count=len(slices))
            hi = np.fromiter((b for _, b in slices), dtype=np.int64, count=len(slices))
        found: list[I64s] = []
        total = 0
        step = 8  # lists per round: one numpy pass over several lists' rows
        for i in range(0, len(order), step):
            picked = order[i : i + step]
            rows = np.concatenate([self.rows[self.starts[lst] : self.starts[lst + 1]] for lst in picked.tolist()])
            if lo is not None and hi is not None:
                at = np.searchsorted(lo, rows, side="right") - 1
                keep = at >= 0
                keep[keep] &= rows[keep] < hi[at[keep]]
                rows = rows[keep]
            found.append(rows)
            total += len(rows)
            if total >= want:
                break
        if not found:
            return np.zeros(0, np.int64)
        return np.sort(np.concatenate(found))


def _normalised(x: F32s) -> F32s:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    out: F32s = np.where(norms > 0, x / np.maximum(norms, 1e-12), 0.0).astype(np.float32)
    return out


def _nearest(data: F32s, centroids: F32s) -> NDArray[np.int32]:
    """Each row's nearest centroid (largest dot product), chunk by chunk, single-threaded."""
    out = np.empty(len(data), dtype=np.int32)
    for start in range(0, len(data), _CHUNK):
        block = np.ascontiguousarray(data[start : start + _CHUNK], dtype=np.float32)
        out[start : start + len(block)] = np.argmax(_cdist(block, centroids), axis=1)
    return out


def _cdist(rows: F32s, centroids: F32s) -> F32s:
    from memlane.search.matrix import _simsimd

    if _simsimd is None:
        return np.asarray(rows @ centroids.T, dtype=np.float32)
    return np.asarray(_simsimd.cdist(rows, centroids, metric="dot", out_dtype="float32"))


def _sums(data: F32s, assign: NDArray[np.int32], n: int) -> F32s:
    """Per-list sums of rows (np.add.at is ~50x slower than sorting and reduceat)."""
    out = np.zeros((n, data.shape[1]), dtype=np.float32)
    if not len(assign):
        return out
    order = np.argsort(assign, kind="stable")
    lists, firsts = np.unique(assign[order], return_index=True)
    out[lists] = np.add.reduceat(np.asarray(data, dtype=np.float32)[order], firsts, axis=0)
    return out


def _means(data: F32s, assign: NDArray[np.int32], n: int) -> tuple[F32s, I64s]:
    counts = np.bincount(assign, minlength=n).astype(np.int64)
    return _normalised(_sums(data, assign, n)), counts


def build(data: F32s, ids: I64s, seed: int = 7) -> Lists | None:
    """Lists over the live rows of a segment (``data`` may be memory-mapped); None when
    there are too few rows for lists to help."""
    live = np.flatnonzero(np.asarray(ids) != ERASED).astype(np.int64)
    n_lists = max(16, len(live) // _PER_LIST)
    if len(live) < n_lists * MIN_MEMBERS:
        return None
    rng = np.random.default_rng(seed)
    sample_rows = np.sort(rng.choice(live, size=min(len(live), n_lists * _TRAIN_PER_LIST), replace=False))
    sample = np.ascontiguousarray(data[sample_rows], dtype=np.float32)
    centroids = np.ascontiguousarray(sample[rng.choice(len(sample), size=n_lists, replace=False)])
    for _ in range(_TRAIN_ROUNDS):  # spherical k-means on the sample
        assign = _nearest(sample, centroids)
        means, counts = _means(sample, assign, n_lists)
        empty = counts == 0
        means[empty] = sample[rng.choice(len(sample), size=int(empty.sum()), replace=False)]
        centroids = np.ascontiguousarray(means)
    assign_live = np.empty(len(live), dtype=np.int32)
    for start in range(0, len(live), _CHUNK):
        part = live[start : start + _CHUNK]
        assign_live[start : start + len(part)] = _nearest(np.asarray(data[part], dtype=np.float32), centroids)
    # Every centroid on disk is the mean of at least MIN_MEMBERS rows: smaller lists go,
    # their rows join the nearest list that stays.
    counts = np.bincount(assign_live, minlength=n_lists)
    small = counts < MIN_MEMBERS
    if small.any():
        kept = np.flatnonzero(~small)
        centroids = centroids[kept]
        renumber = np.full(n_lists, -1, dtype=np.int32)
        renumber[kept] = np.arange(len(kept), dtype=np.int32)
        moved = small[assign_live]
        assign_live = renumber[assign_live]
        if moved.any():
            assign_live[moved] = _nearest(np.asarray(data[live[moved]], dtype=np.float32), centroids)
        n_lists = len(kept)
    list_of = np.full(len(ids), -1, dtype=np.int32)
    list_of[live] = assign_live
    sums = np.zeros((n_lists, data.shape[1]), dtype=np.float32)
    for start in range(0, len(live), _CHUNK):
        part = live[start : start + _CHUNK]
        sums += _sums(np.asarray(data[part], dtype=np.float32), assign_live[start : start + len(part)], n_lists)
    centroids = _normalised(sums)
    order = np.lexsort((live, assign_live))
    rows = live[order]
    starts = np.zeros(n_lists + 1, dtype=np.int64)
    np.cumsum(np.bincount(assign_live, minlength=n_lists), out=starts[1:])
    return Lists(centroids, rows, starts, list_of)


def refresh(lists: Lists, erased: I64s, data: F32s, ids: I64s) -> None:
    """Recompute, in place, the centroids of the lists holding the ``erased`` rows from
    their other live rows; a list left with fewer than MIN_MEMBERS gets a zero centroid
    (probed last; its rows are still scanned once nearer lists run out). Call it before
    marking the rows erased in ``ids``, so a crash in between repeats it."""
    of = np.asarray(lists.list_of[erased])
    for lst in np.unique(of[of >= 0]).tolist():
        members = np.asarray(lists.rows[lists.starts[lst] : lists.starts[lst + 1]])
        members = members[(np.asarray(ids[members]) != ERASED) & ~np.isin(members, erased)]
        if len(members) < MIN_MEMBERS:
            lists.centroids[lst] = 0.0
            continue
        mean = np.asarray(data[members], dtype=np.float64).sum(axis=0).astype(np.float32)
        lists.centroids[lst] = _normalised(mean[None, :])[0]
