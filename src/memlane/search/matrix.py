"""Vector rows grouped by session and owner, and exact top k over just the rows a filter keeps.

numpy (and simsimd) live here, apart from :mod:`memlane.search.vectors`, so that opening a
Memory, which checks the vector index's model, does not import them: they load with the
first search or the first vectors stored.

A :class:`Segment` holds rows (message id, vector seq, session ordinal, float32 vector and
its int8 copy) in plain numpy arrays, in memory or memory-mapped from files
(:mod:`memlane.store.vector_files`). The *base* segment is sorted by session ordinal, and
ordinals follow (user, agent, tenant, session): the rows of one session, and of all the
sessions of one user, are one contiguous slice. :class:`Sessions` knows each ordinal's
owners, so a user's or a session's search resolves to a few slices and scores only those
rows: never another user's vectors, and nothing recomputed per query.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

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

__all__ = ["QUANTIZED_ABOVE", "Segment", "Sessions", "blob", "dots", "quantize", "top"]

#: Rows above which a search first ranks the int8 copy and re-scores only the best rows in
#: float32 (below it the float32 scan is already cheap). `memlane bench search --vectors-only`
#: on a busy 2-core machine: a 10,000-row user took 24 ms in float32.
QUANTIZED_ABOVE = 4_000

#: An erased row's message id: its vector bytes are zeros and it never matches.
ERASED = -1

Int64s = NDArray[np.int64]


def blob(vector: Vectors) -> bytes:
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def quantize(rows: Vectors) -> tuple[NDArray[np.int8], NDArray[np.float32]]:
    """Each row as int8 codes and its scale (row ~ codes * scale): a per-row scale keeps
    rows with an unusually large component from being clipped."""
    peak = np.abs(rows).max(axis=1) if len(rows) else np.zeros(0, dtype=np.float32)
    scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    codes = np.rint(rows / scale[:, None]).astype(np.int8)
    return codes, scale


def dots(rows: NDArray[np.float32], q: Vectors) -> NDArray[np.float32]:
    """``rows @ q``, single-threaded SIMD: a BLAS matrix-vector product spreads over every
    core and, on a busy 2-core machine, waits for them (40x slower measured under load)."""
    if not len(rows):
        return np.zeros(0, np.float32)
    if _simsimd is None:
        return np.asarray(rows @ q, dtype=np.float32)
    q32 = np.ascontiguousarray(q, dtype=np.float32)[None, :]
    return np.asarray(_simsimd.cdist(q32, np.ascontiguousarray(rows), metric="dot", out_dtype="float32")).reshape(-1)


def top(ids: Int64s, sims: NDArray[np.float32], k: int) -> list[tuple[int, float]]:
    if len(sims) == 0:
        return []
    part = np.argpartition(-sims, k - 1)[:k] if k < len(sims) else np.arange(len(sims))
    order = part[np.argsort(-sims[part], kind="stable")]
    return [(int(ids[i]), float(sims[i])) for i in order]


@dataclass
class Segment:
    """Rows of vectors: ``ids[i]`` (message id, ERASED once forgotten), ``seqs[i]`` (the
    row's write sequence in the table), ``sess[i]`` (session ordinal), ``data[i]`` (unit
    float32 vector), ``codes[i] * scales[i]`` (its int8 copy)."""

    ids: Int64s
    seqs: Int64s
    sess: NDArray[np.int32]
    data: NDArray[np.float32]
    codes: NDArray[np.int8]
    scales: NDArray[np.float32]
    #: reads scattered float32 rows without the mapping (a file segment): see rows_of
    reader: Callable[[Int64s], NDArray[np.float32]] | None = None

    def rows_of(self, rows: Int64s) -> NDArray[np.float32]:
        """The float32 vectors of ``rows``. A memory-mapped segment reads them with
        ``pread``: touching a few hundred scattered rows through the mapping makes the
        kernel map the cached pages around each one too (fault-around), and over a hundred
        searches the whole float32 file counted in the process's RSS (1.86 GB at 1M rows)."""
        if self.reader is not None:
            return self.reader(rows)
        return np.asarray(self.data[rows])

    @classmethod
    def empty(cls, dimension: int) -> Segment:
        return cls.of(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32),
                      np.zeros((0, dimension), np.float32))

    @classmethod
    def of(cls, ids: Int64s, seqs: Int64s, sess: NDArray[np.int32], data: NDArray[np.float32]) -> Segment:
        codes, scales = quantize(data)
        return cls(ids, seqs, sess, data, codes, scales)

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class Sessions:
    """Session ordinals and their owners. Ordinals below ``base`` are the base segment's
    (sorted by owner); later ones were first seen in the tail."""

    ids: list[str] = field(default_factory=list)
    users: list[str | None] = field(default_factory=list)
    agents: list[str | None] = field(default_factory=list)
    tenants: list[str | None] = field(default_factory=list)
    base: int = 0
    ordinal: dict[str, int] = field(default_factory=dict)
    #: bumped whenever ordinals or owners change, so cached selections are dropped
    version: int = 0
    _arrays: dict[str, NDArray[Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.ordinal:
            self.ordinal = {sid: i for i, sid in enumerate(self.ids)}

    def add(self, sid: str, user: str | None, agent: str | None, tenant: str | None) -> int:
        o = self.ordinal.get(sid)
        if o is None:
            o = self.ordinal[sid] = len(self.ids)
            self.ids.append(sid)
            self.users.append(user)
            self.agents.append(agent)
            self.tenants.append(tenant)
            self.changed()
        return o

    def set_owners(self, owners: Iterable[tuple[str, str | None, str | None, str | None]]) -> None:
        for sid, user, agent, tenant in owners:
            o = self.ordinal.get(sid)
            if o is not None:
                self.users[o], self.agents[o], self.tenants[o] = user, agent, tenant
        self.changed()

    def changed(self) -> None:
        self.version += 1
        self._arrays.clear()

    def _column(self, name: str) -> NDArray[Any]:
        col = self._arrays.get(name)
        if col is None:
            col = self._arrays[name] = np.array(getattr(self, name), dtype=object)
        return col

    def select(self, *, session: str | None = None, user: str | None = None, agent: str | None = None,
               tenant: str | None = None, unowned: bool = False) -> NDArray[np.int64] | None:
        """Ordinals (ascending) of the sessions that pass; None when nothing is filtered."""
        if session is not None:
            o = self.ordinal.get(session)
            return np.array([] if o is None else [o], dtype=np.int64)
        keep: NDArray[np.bool_] | None = None
        for name, value in (("users", user), ("agents", agent), ("tenants", tenant)):
            if value is not None:
                hit = self._column(name) == value
                keep = hit if keep is None else keep & hit
        if unowned:
            hit = np.array([u is None for u in self.users], dtype=bool)
            keep = hit if keep is None else keep & hit
        return None if keep is None else np.flatnonzero(keep).astype(np.int64)


def owner_order(users: Sequence[str | None], agents: Sequence[str | None], tenants: Sequence[str | None],
                ids: Sequence[str]) -> list[int]:
    """Session positions sorted by (user, agent, tenant, id): a user's sessions side by side."""
    return sorted(range(len(ids)), key=lambda i: (users[i] or "", agents[i] or "", tenants[i] or "", ids[i]))


def ranges(starts: Int64s, ordinals: NDArray[np.int64]) -> list[tuple[int, int]]:
    """The base rows of these (ascending) ordinals as merged ``[a, b)`` slices."""
    if not len(ordinals):
        return []
    a, b = starts[ordinals], starts[ordinals + 1]
    # a new slice starts wherever the previous ordinal's rows do not end where these begin
    breaks = np.flatnonzero(a[1:] != b[:-1]) + 1
    firsts = np.concatenate(([0], breaks))
    lasts = np.concatenate((breaks - 1, [len(ordinals) - 1]))
    return [(int(a[f]), int(b[e])) for f, e in zip(firsts, lasts, strict=True) if b[e] > a[f]]


@dataclass
class Scored:
    """Candidate rows of one segment with their (approximate) scores."""

    segment: Segment
    rows: Int64s
    scores: NDArray[np.float32]
    #: rows to leave out (a base row whose message has a newer vector in the tail)
    skip: set[int] | None = None


def score(segment: Segment, q: Vectors, slices: Sequence[tuple[int, int]] | None,
          rows: Int64s | None, quantized: bool, skip: set[int] | None = None) -> Scored:
    """Scores of the given rows (``slices`` of the segment, or ``rows``; all when both are
    None): int8 estimates when ``quantized``, else exact float32."""
    if rows is not None:
        picked = rows
        parts = [_scores(segment, rows, q, quantized)]
    else:
        cuts = slices if slices is not None else [(0, len(segment))]
        picked = np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in cuts]) if cuts else np.zeros(0, np.int64)
        parts = [_scores(segment, slice(a, b), q, quantized) for a, b in cuts]
    sims = np.concatenate(parts) if parts else np.zeros(0, np.float32)
    return Scored(segment, picked, sims.astype(np.float32, copy=False), skip)


def _scores(segment: Segment, rows: slice | Int64s, q: Vectors, quantized: bool) -> NDArray[np.float32]:
    # Only the arrays a mode reads are indexed: gathering rows of a memory-mapped float32
    # file that an int8 scan never needs would read (and keep resident) 4x the bytes.
    if not quantized or _simsimd is None:
        return dots(segment.data[rows], q)
    codes = segment.codes[rows]
    if not len(codes):
        return np.zeros(0, np.float32)
    q_codes, _ = quantize(q[None, :])
    approx = np.asarray(_simsimd.cdist(q_codes, codes, metric="dot", out_dtype="float32")).reshape(-1)
    np.multiply(approx, segment.scales[rows], out=approx)
    return approx


def best(scored: Sequence[Scored], q: Vectors, pool: int, quantized: bool) -> list[tuple[int, float]]:
    """The ``pool`` best rows of the candidates, re-scored exactly, best first; erased and
    skipped rows left out.

    With int8 estimates, the best ``pool + 200`` by estimate are re-scored in float32:
    quantization moves a similarity by about 1e-3, far less than the gap between a top row
    and the one 200 places further, so this is the exact top in practice (tests check it).
    """
    total = sum(len(s.rows) for s in scored)
    if not total:
        return []
    skipped = sum(len(s.skip or ()) for s in scored)
    short = min(total, (pool + 200 if quantized else pool) + skipped)
    allscores = np.concatenate([s.scores for s in scored])
    cut = np.argpartition(allscores, total - short)[total - short :] if short < total else np.arange(total)
    out: list[tuple[int, float]] = []
    offset = 0
    for s in scored:
        mine = cut[(cut >= offset) & (cut < offset + len(s.rows))] - offset
        offset += len(s.rows)
        if not len(mine):
            continue
        order = np.argsort(s.rows[mine], kind="stable")  # memory-mapped pages in file order
        rows = s.rows[mine][order]
        ids = s.segment.ids[rows]
        sims = dots(s.segment.rows_of(rows), q) if quantized else s.scores[mine][order]
        for row, mid, sim in zip(rows.tolist(), ids.tolist(), np.asarray(sims).tolist(), strict=True):
            if mid == ERASED or (s.skip and row in s.skip):
                continue
            out.append((mid, float(sim)))
    out.sort(key=lambda t: (-t[1], t[0]))  # equal similarity: the older message first
    return out[:pool]
