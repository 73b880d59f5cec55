"""Message vectors in a SQLite store: the reference :class:`~memlane.ports.VectorIndex`.

Contract of the port (every backend, SQLite here, pgvector in the PostgreSQL
store, must keep it; ``tests/test_search_vectors.py`` checks the SQLite one):

* A vector belongs to one message (``messages.id``) and is derived from it: deleting the
  message deletes the vector *inside the store*, whoever deletes it (forget, delete_session,
  prune, a plain SQL ``DELETE``). SQLite does it with ``ON DELETE CASCADE``; PostgreSQL the
  same way.
* Vectors are unit length (the Embedder protocol guarantees it), so similarity is the dot
  product; ``search`` returns ``(message_id, similarity)`` pairs, best first.
* ``search`` honours a :class:`~memlane.models.MessageFilter` (session, user, agent, tenant,
  roles, authors, time range, hidden) so filtered recall is exact, not "top k then filter".
* ``model_info`` records which embedder (model id, dimension, text recipe) made the stored
  vectors. :func:`check_model` turns a difference into :class:`EmbedderMismatchError`, so a
  database is never searched with another model's queries.
* ``missing_ids`` lists messages that should have a vector and have none: the backlog a
  restart picks up after a crash between "message stored" and "vector stored".

Why a plain table plus an index derived from it, not a sqlite-vec ``vec0`` table: first,
many Python builds (pyenv's default, this project's CI, macOS's system Python) compile
``sqlite3`` without ``enable_load_extension``, so a store that needs the extension would
not open there at all; second, speed: ``memlane bench search`` runs the same vectors
through ``vec0`` KNN (via apsw, which can load extensions) beside this index.
The table keeps the vectors durable in the same file as the log (so they cannot drift into
another file, and cascade with their message without needing any extension loaded in the
deleting connection). Searching uses the *base* segment, memory-mapped files beside the
database (:mod:`memlane.store.vector_files`; in memory for an encrypted or in-memory
database, whose vectors must not land unencrypted on disk), plus a small in-process
*tail*: the rows written since the base was built, read by sequence number. The base is
rebuilt from the table when the tail grows past :data:`TAIL_ROWS`; deletions reach it
through the table's deletion log, so several processes sharing one file stay consistent.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memlane.errors import InvalidInputError
from memlane.models import MessageFilter
from memlane.ports import EMBEDDED_ROLES, ModelInfo
from memlane.store.sqlite_rows import DIALECT, _message_where  # one definition of the filters
from memlane.store.vector_paths import files_dir
from memlane.store.vector_rules import (
    META_KEYS,
    check_claim,
    checked_query,
    checked_rows,
    meta_select,
    model_info_of,
    write_model_info,
)

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from memlane.ports import Vectors
    from memlane.search.matrix import Scored, Segment, Sessions
    from memlane.store.sqlite import SQLiteStore
    from memlane.store.vector_files import Base, FileSink, MemorySink, VectorFiles

__all__ = ["TAIL_ROWS", "SQLiteVectorIndex"]


log = logging.getLogger(__name__)

#: Rows written since the base segment was built that a process keeps in memory before
#: the base is rebuilt with them (a quarter of the base when that is larger).
TAIL_ROWS = 20_000
#: Vectors read per statement while building the base.
_CHUNK = 900
#: Pool sizes above which a filter that the index cannot resolve (roles, authors, time,
#: hidden) is checked by listing its passing messages in SQL instead of pool by pool.
_LIST_ABOVE = 5_000

_HEAD = (
    "SELECT (SELECT COALESCE(MAX(seq), 0) FROM message_vectors), "
    "(SELECT value FROM vector_meta WHERE key = 'deletions'), "
    "(SELECT value FROM vector_meta WHERE key = 'owners')"
)
_ROWS = (
    "SELECT v.message_id, v.seq, v.embedding, m.session_id, s.user_id, s.agent_id, s.tenant_id "
    "FROM message_vectors v JOIN messages m ON m.id = v.message_id JOIN sessions s ON s.id = m.session_id "
)


@dataclass
class _View:
    """One process's view of the index: the base segment plus the tail."""

    model: ModelInfo
    base: Base
    tail: Segment
    tail_seq: int
    deletions: int
    owners: int
    stamp: int = 0
    #: message id -> tail row; base rows whose message has a newer vector in the tail
    tail_pos: dict[int, int] = field(default_factory=dict)
    superseded: set[int] = field(default_factory=set)
    selections: dict[tuple[Any, ...], tuple[int, Any]] = field(default_factory=dict)

    @property
    def sessions(self) -> Sessions:
        return self.base.sessions

    @property
    def size(self) -> int:
        return len(self.base.segment) + len(self.tail)


# ---------------------------------------------------------------------------- SQLite


class SQLiteVectorIndex:
    """Vectors in the ``message_vectors`` table of a SQLite store (schema migration 2).

    ``store`` is a :class:`~memlane.store.sqlite.SQLiteStore`; the index shares its
    connection, lock and transaction helper, so a vector write is serialised with log
    writes and never sees a half-written turn.
    """

    def __init__(self, store: SQLiteStore) -> None:
        # sqlite3 or SQLCipher (an encrypted store): both have the same DB-API connection
        if getattr(store, "connection", None) is None:
            raise InvalidInputError("SQLiteVectorIndex needs a SQLiteStore")
        self._store = store
        self._lock = threading.Lock()
        self._view: _View | None = None

    def _files_path(self) -> str | None:
        """The database file when the index keeps files beside it: not for an in-memory
        database, nor an encrypted one (its vectors must not land unencrypted on disk)."""
        path = str(getattr(self._store, "path", ":memory:"))
        return None if path == ":memory:" or getattr(self._store, "encrypted", False) else path

    def _files(self) -> VectorFiles | None:
        path = self._files_path()
        if path is None:
            return None
        from memlane.store.vector_files import VectorFiles

        return VectorFiles(path)

    # ----------------------------------------------------------- model info

    def model_info(self) -> ModelInfo | None:
        return model_info_of(self._store.read(*meta_select(DIALECT)))

    def set_model_info(self, info: ModelInfo) -> None:
        def run(conn: sqlite3.Connection) -> None:
            check_claim(conn, DIALECT, info)
            write_model_info(conn, DIALECT, info)

        self._store.write(run)

    # ----------------------------------------------------------- writes

    def upsert(self, ids: Sequence[int], vectors: Vectors) -> int:
        from memlane.search.matrix import blob

        id_list, matrix = checked_rows(ids, vectors, self.model_info())
        if not id_list:
            return 0

        def run(conn: sqlite3.Connection) -> int:
            seq = int(conn.execute("SELECT COALESCE(MAX(seq), 0) FROM message_vectors").fetchone()[0])
            stored = 0
            for mid, row in zip(id_list, matrix, strict=True):
                # The message may have been forgotten while it waited in the queue: the
                # SELECT inserts nothing then, instead of failing the foreign key.
                seq += 1
                cur = conn.execute(
                    "INSERT INTO message_vectors(message_id, seq, embedding) "
                    "SELECT id, ?, ? FROM messages WHERE id = ? "
                    "ON CONFLICT(message_id) DO UPDATE SET seq = excluded.seq, "
                    "embedding = excluded.embedding",
                    (seq, blob(row), mid),
                )
                stored += cur.rowcount
            return stored

        # Vectors are derived from the log (`memlane reindex` rebuilds them): no fsync.
        return self._store.write(run, durable=False)

    def delete(self, ids: Sequence[int]) -> int:
        id_list = [int(i) for i in ids]

        def run(conn: sqlite3.Connection) -> int:
            total = 0
            for start in range(0, len(id_list), 500):
                chunk = id_list[start : start + 500]
                marks = ",".join("?" * len(chunk))
                total += conn.execute(
                    f"DELETE FROM message_vectors WHERE message_id IN ({marks})", chunk
                ).rowcount
            return total

        total = self._store.write(run)
        self.purge()
        return total

    def drop_files(self) -> None:
        """Remove the index files beside the database (the table stays): the next search
        builds them anew. For a change that renames sessions under them (migration 13)."""
        path = self._files_path()
        # checked before importing the files' module (numpy, simsimd): every new store runs
        # migration 13, and a write-only process must not load the vector stack (cold start)
        if path is None or not os.path.isdir(files_dir(path)):
            return
        files = self._files()
        assert files is not None
        with files.lock():
            files.remove()

    def clear(self) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM message_vectors")
            clause, params = DIALECT.in_list("key", META_KEYS)
            conn.execute(f"DELETE FROM vector_meta WHERE {clause}", params)
            conn.execute("DELETE FROM vector_deletions")

        files = self._files()
        if files is not None:
            with files.lock():
                self._store.write(run)
                files.remove()
        else:
            self._store.write(run)
        with self._lock:
            self._view = None

    def purge(self) -> int:
        """Erase deleted vectors from the index files now (every deletion path calls this
        after its transaction: forgotten vectors must not outlive it on disk), and trim
        the deletion log. Returns how many rows were erased from the files."""
        path = self._files_path()
        if path is None or not os.path.isdir(files_dir(path)):  # numpy stays unloaded here
            self._trim_log(None)
            return 0
        files = self._files()
        assert files is not None
        with files.lock():
            meta = files.meta()
            applied = int(meta["applied"]) if meta else 0
            entries = [
                (int(r[0]), int(r[1]), int(r[2]))
                for r in self._store.read(
                    "SELECT seq, message_id, vector_seq FROM vector_deletions WHERE seq > ? ORDER BY seq",
                    (applied,),
                )
            ]
            erased = files.erase(entries) if meta is not None else 0
            after = files.meta()
            self._trim_log(int(after["applied"]) if after is not None else None)
        return erased

    def _trim_log(self, upto: int | None) -> None:
        """Drop deletion log entries the files have applied (all of them without files)."""
        def run(conn: sqlite3.Connection) -> None:
            if upto is None:
                conn.execute("DELETE FROM vector_deletions")
            else:
                conn.execute("DELETE FROM vector_deletions WHERE seq <= ?", (upto,))

        if self._store.read("SELECT 1 FROM vector_deletions LIMIT 1"):
            self._store.write(run, durable=False)

    # ----------------------------------------------------------- reads

    def count(self) -> int:
        return int(self._store.read("SELECT COUNT(*) FROM message_vectors")[0][0])

    def missing_ids(self, limit: int, *, after_id: int = 0) -> list[int]:
        marks = ",".join("?" * len(EMBEDDED_ROLES))
        rows = self._store.read(
            f"SELECT m.id FROM messages m WHERE m.id > ? AND m.role IN ({marks}) "
            "AND m.content != '' AND NOT EXISTS "
            "(SELECT 1 FROM message_vectors v WHERE v.message_id = m.id) ORDER BY m.id LIMIT ?",
            (after_id, *EMBEDDED_ROLES, int(limit)),
        )
        return [int(r[0]) for r in rows]

    # ----------------------------------------------------------- the view

    def _synced(self) -> _View | None:
        """This process's view, brought up to date with the table (cheap when nothing changed)."""
        info = self.model_info()
        if info is None:
            return None
        head = self._store.read(_HEAD)[0]
        max_seq, deletions, owners = int(head[0]), int(head[1] or 0), int(head[2] or 0)
        files = self._files()
        with self._lock:
            view = self._view
            if view is not None and view.model != info:
                view = None  # reindexed with another model
            if view is not None and files is not None and view.stamp != files.stamp():
                if _moved(files, view):
                    view = None  # another process published a new base: switch to it
                else:
                    view.stamp = files.stamp()
            if view is not None and view.deletions != deletions:
                if files is not None:
                    self.purge()
                    if _moved(files, view):
                        view = None
                    else:
                        self._reload_tail(view)
                else:
                    view = None  # in memory: rebuild (deletions are rare)
            if view is None:
                view = self._open(info, files)
            view.deletions = deletions
            if owners != view.owners:
                view.sessions.set_owners(self._owners())
                view.owners = owners
                view.selections.clear()
            if max_seq > view.tail_seq:
                self._extend_tail(view, view.tail_seq)
            if len(view.tail) > max(TAIL_ROWS, len(view.base.segment) // 4):
                view = self._build(info, files, owners)
            self._view = view
            return view

    def _owners(self) -> list[tuple[str, str | None, str | None, str | None]]:
        return [(str(r[0]), r[1], r[2], r[3]) for r in self._store.read(
            "SELECT id, user_id, agent_id, tenant_id FROM sessions")]

    def _open(self, info: ModelInfo, files: VectorFiles | None) -> _View:
        head = self._store.read(_HEAD)[0]
        owners = int(head[2] or 0)
        if files is not None:
            base = files.open()
            model = (info.model_id, info.dimension, info.recipe)
            if base is not None and base.model == model and self._matches(base):
                view = self._view_of(info, base, owners, files)
                self._extend_tail(view, base.seq)
                if base.owners != owners:
                    view.sessions.set_owners(self._owners())  # changed since the files were built
                return view
        return self._build(info, files, owners)

    def _matches(self, base: Base) -> bool:
        """Do the files describe this table (not a database restored or copied over it)?
        The newest row of the base must still be in the table under the same seq."""
        import numpy as np

        seqs = base.segment.seqs
        if not len(seqs):
            return True
        last = int(np.argmax(seqs))
        mid = int(base.segment.ids[last])
        if mid < 0:
            return True  # erased since: nothing to compare
        found = self._store.read("SELECT seq FROM message_vectors WHERE message_id = ?", (mid,))
        return bool(found) and int(found[0][0]) >= int(seqs[last])

    def _view_of(self, info: ModelInfo, base: Base, owners: int, files: VectorFiles | None) -> _View:
        from memlane.search.matrix import Segment

        return _View(info, base, Segment.empty(info.dimension), base.seq, 0, owners,
                     stamp=files.stamp() if files is not None else 0)

    def _build(self, info: ModelInfo, files: VectorFiles | None, owners: int) -> _View:
        """A new base segment from the table: in memory, or as a new generation of files."""
        if files is None:
            return self._view_of(info, self._read_base(info, None), owners, None)
        with files.lock():
            current = files.open()
            model = (info.model_id, info.dimension, info.recipe)
            head_seq = int(self._store.read("SELECT COALESCE(MAX(seq), 0) FROM message_vectors")[0][0])
            if current is not None and current.model == model and head_seq - current.seq <= TAIL_ROWS // 2:
                base = current  # another process built it while this one waited for the lock
            else:
                base = self._read_base(info, files)
        view = self._view_of(info, base, owners, files)
        self._extend_tail(view, base.seq)
        return view

    def _read_base(self, info: ModelInfo, files: VectorFiles | None) -> Base:
        """Read every vector into a base segment sorted by (owner, session), streaming."""
        import numpy as np

        from memlane.search.matrix import Sessions, owner_order
        from memlane.store.vector_files import FileSink, MemorySink

        # The log mark first, then the rows: a deletion after the mark is applied later
        # (applying one twice is harmless), never lost.
        applied = int(self._store.read("SELECT COALESCE(MAX(seq), 0) FROM vector_deletions")[0][0])
        owners_seen = int(self._store.read(_HEAD)[0][2] or 0)
        seq = int(self._store.read("SELECT COALESCE(MAX(seq), 0) FROM message_vectors")[0][0])
        keys = self._store.read(
            "SELECT v.message_id, m.session_id FROM message_vectors v JOIN messages m ON m.id = v.message_id "
            "WHERE v.seq <= ?", (seq,))
        ids = np.fromiter((int(r[0]) for r in keys), dtype=np.int64, count=len(keys))
        session_of: dict[str, int] = {}
        raw = np.fromiter((session_of.setdefault(str(r[1]), len(session_of)) for r in keys), dtype=np.int32,
                          count=len(keys))
        del keys
        owners = {sid: (u, a, t) for sid, u, a, t in self._owners() if sid in session_of}
        sids = list(session_of)
        users = [owners.get(sid, (None, None, None))[0] for sid in sids]
        agents = [owners.get(sid, (None, None, None))[1] for sid in sids]
        tenants = [owners.get(sid, (None, None, None))[2] for sid in sids]
        order = owner_order(users, agents, tenants, sids)
        ordinal = np.empty(len(sids), dtype=np.int32)
        ordinal[np.asarray(order, dtype=np.int64)] = np.arange(len(sids), dtype=np.int32)
        sess = ordinal[raw] if len(raw) else raw
        rows = np.lexsort((ids, sess))
        starts = np.zeros(len(sids) + 1, dtype=np.int64)
        np.cumsum(np.bincount(sess, minlength=len(sids)), out=starts[1:])
        sessions = Sessions([sids[i] for i in order], [users[i] for i in order], [agents[i] for i in order],
                            [tenants[i] for i in order], base=len(sids))
        sink: FileSink | MemorySink = (
            FileSink(files, files.next_generation(), len(ids), info.dimension) if files is not None
            else MemorySink(len(ids), info.dimension)
        )
        for start in range(0, len(rows), _CHUNK):
            picked = rows[start : start + _CHUNK]
            chunk_ids = ids[picked]
            found = self._vectors_of(chunk_ids.tolist(), seq, info.dimension)
            data = np.zeros((len(picked), info.dimension), dtype=np.float32)
            seqs = np.zeros(len(picked), dtype=np.int64)
            out_ids = chunk_ids.copy()
            for i, mid in enumerate(chunk_ids.tolist()):
                hit = found.get(mid)
                if hit is None:  # deleted while the base was read: an erased row
                    out_ids[i] = -1
                else:
                    seqs[i], data[i] = hit
            sink.add(out_ids, seqs, sess[picked], data)
        return sink.finish(starts, sessions, seq, applied, (info.model_id, info.dimension, info.recipe), owners_seen)

    def _vectors_of(self, ids: list[int], seq: int, dimension: int) -> dict[int, tuple[int, Any]]:
        import numpy as np

        marks = ",".join("?" * len(ids))
        rows = self._store.read(
            f"SELECT message_id, seq, embedding FROM message_vectors WHERE message_id IN ({marks}) AND seq <= ?",
            (*ids, seq),
        )
        return {int(r[0]): (int(r[1]), np.frombuffer(r[2], dtype="<f4", count=dimension)) for r in rows}

    def _extend_tail(self, view: _View, after: int) -> None:
        """Append the rows written after seq ``after`` to the view's tail."""
        import numpy as np

        from memlane.search.matrix import Segment

        rows = self._store.read(_ROWS + "WHERE v.seq > ? ORDER BY v.seq", (after,))
        if not rows:
            return
        dim = view.model.dimension
        ids = np.fromiter((int(r[0]) for r in rows), dtype=np.int64, count=len(rows))
        seqs = np.fromiter((int(r[1]) for r in rows), dtype=np.int64, count=len(rows))
        data = np.frombuffer(b"".join(r[2] for r in rows), dtype="<f4").reshape(len(rows), dim).astype(np.float32)
        sess = np.fromiter((view.sessions.add(str(r[3]), r[4], r[5], r[6]) for r in rows), dtype=np.int32,
                           count=len(rows))
        fresh = Segment.of(ids, seqs, sess, data)
        tail = view.tail
        keep = np.ones(len(tail), dtype=bool)
        for _i, mid in enumerate(ids.tolist()):  # a newer vector of a message replaces the older one
            old = view.tail_pos.get(mid)
            if old is not None:
                keep[old] = False
        if not keep.all():
            tail = _take(tail, np.flatnonzero(keep))
        view.tail = _concat(tail, fresh)
        view.tail_pos = {int(m): i for i, m in enumerate(view.tail.ids.tolist())}
        _, base_rows = view.base.row_of(ids)
        view.superseded.update(int(r) for r in base_rows)
        view.tail_seq = int(seqs.max())
        view.selections.clear()

    def _reload_tail(self, view: _View) -> None:
        from memlane.search.matrix import Segment

        view.tail = Segment.empty(view.model.dimension)
        view.tail_pos = {}
        view.superseded = set()
        # cached selections name rows of the old tail (_extend_tail clears them only when
        # rows were written since the base, so a delete of tail rows alone must clear here)
        view.selections.clear()
        view.tail_seq = view.base.seq
        self._extend_tail(view, view.base.seq)

    # ----------------------------------------------------------- search

    def similarities(self, query: Vectors, ids: Sequence[int]) -> dict[int, float]:
        view = self._synced()
        if view is None or not ids:
            return {}
        import numpy as np

        from memlane.search.matrix import dots

        q = checked_query(query, view.model.dimension)
        out: dict[int, float] = {}
        rest = []
        for mid in ids:
            pos = view.tail_pos.get(int(mid))
            if pos is not None:
                out[int(mid)] = float(dots(view.tail.data[pos : pos + 1], q)[0])
            else:
                rest.append(int(mid))
        _, rows = view.base.row_of(rest)
        if len(rows):
            rows = np.sort(rows)  # memory-mapped pages in file order
            sims = dots(view.base.segment.rows_of(rows), q)
            present = view.base.segment.ids[rows]
            out.update({int(m): float(s) for m, s in zip(present.tolist(), sims.tolist(), strict=True)})
        return out

    def _selection(self, view: _View, flt: MessageFilter) -> tuple[list[tuple[int, int]] | None, Any]:
        """(base slices, tail rows) of the sessions the filter's owners allow; None = all."""
        import numpy as np

        from memlane.search.matrix import ranges

        key = (flt.session_id, flt.user_id, flt.agent_id, flt.tenant_id, flt.unowned)
        cached = view.selections.get(key)
        if cached is not None and cached[0] == view.sessions.version:
            return cached[1]  # type: ignore[no-any-return]
        ordinals = view.sessions.select(session=flt.session_id, user=flt.user_id, agent=flt.agent_id,
                                        tenant=flt.tenant_id, unowned=flt.unowned)
        if ordinals is None:
            picked: tuple[list[tuple[int, int]] | None, Any] = (None, None)
        else:
            base_n = view.base.sessions.base
            slices = ranges(view.base.starts, ordinals[ordinals < base_n])
            tail_rows = np.flatnonzero(np.isin(view.tail.sess, ordinals)).astype(np.int64)
            picked = (slices, tail_rows)
        if len(view.selections) > 256:
            view.selections.clear()
        view.selections[key] = (view.sessions.version, picked)
        return picked

    def search(
        self, query: Vectors, k: int, flt: MessageFilter | None = None
    ) -> list[tuple[int, float]]:
        from memlane.search.matrix import best

        if k < 1:
            raise InvalidInputError("k must be at least 1")
        view = self._synced()
        if view is None or view.size == 0:
            return []
        q = checked_query(query, view.model.dimension)
        flt = flt or MessageFilter()
        where, params = _message_where(flt)
        approximate = True
        while True:
            scored, quantized, total, approximated = self._scored(view, q, flt, k, approximate)
            if not total:
                return []
            if not where:
                return best(scored, q, k, quantized)
            # What the index cannot tell (hidden, roles, authors, time; and the owners again, in
            # case they changed a moment ago) is checked in SQL on the best rows, with a pool
            # that grows until k pass or every candidate was seen.
            pool = min(total, 2 * k + 50)
            while True:
                ranked = best(scored, q, pool, quantized)
                if pool > _LIST_ABOVE:
                    passing = self._candidates(where, params)
                else:
                    passing = self._passing([m for m, _ in ranked], where, params)
                kept = [(m, s) for m, s in ranked if m in passing]
                if len(kept) >= k or pool >= total:
                    break
                pool = min(total, pool * 4)
            if len(kept) >= k or not approximated:
                return kept[:k]
            approximate = False  # the probed lists held too few that pass: scan them all

    def _scored(self, view: _View, q: Any, flt: MessageFilter, k: int, approximate: bool
                ) -> tuple[list[Scored], bool, int, bool]:
        """Scores of the rows the filter's owners allow: (per segment, int8 estimates?,
        rows scored, through the inverted lists?). The owners (session, user, agent,
        tenant) pick the rows: slices of the base, rows of the tail; nothing else is read.
        A selection of more than ANN_ABOVE base rows is searched through the base's
        inverted lists (memlane.search.ivf) unless ``approximate`` is False."""
        from memlane.search.ivf import ANN_ABOVE, scan_target
        from memlane.search.matrix import QUANTIZED_ABOVE, score

        slices, tail_rows = self._selection(view, flt)
        base_rows = len(view.base.segment) if slices is None else sum(b - a for a, b in slices)
        tail_n = len(view.tail) if tail_rows is None else len(tail_rows)
        lists = view.base.lists
        if approximate and lists is not None and base_rows > ANN_ABOVE:
            rows = lists.candidates(q, slices, scan_target(base_rows, k))
            scored = [score(view.base.segment, q, None, rows, True, view.superseded),
                      score(view.tail, q, None, tail_rows, True)]
            return scored, True, len(rows) + tail_n, True
        total = base_rows + tail_n
        quantized = total > QUANTIZED_ABOVE
        scored = [
            score(view.base.segment, q, slices, None, quantized, view.superseded),
            score(view.tail, q, None, tail_rows, quantized),
        ]
        return scored, quantized, total, False

    def exact_top(self, query: Vectors, k: int, flt: MessageFilter | None = None) -> list[tuple[int, float]]:
        """The float32 top ``k`` of the rows the filter's owners allow (every row without
        one), with neither the inverted lists nor the int8 pre-ranking: the answer
        ``memlane bench search`` measures :meth:`search`'s recall against."""
        from memlane.search.matrix import best, score

        view = self._synced()
        if view is None:
            return []
        q = checked_query(query, view.model.dimension)
        slices, tail_rows = self._selection(view, flt or MessageFilter())
        scored = [score(view.base.segment, q, slices, None, False, view.superseded),
                  score(view.tail, q, None, tail_rows, False)]
        return best(scored, q, k, False)

    def _passing(self, ids: list[int], where: str, params: list[object]) -> set[int]:
        out: set[int] = set()
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._store.read(
                "SELECT m.id FROM messages m JOIN sessions s ON s.id = m.session_id "
                f"WHERE m.id IN ({marks}) {where}",
                (*chunk, *params),
            )
            out.update(int(r[0]) for r in rows)
        return out

    def _candidates(self, where: str, params: list[object]) -> set[int]:
        rows = self._store.read(
            f"SELECT m.id FROM messages m JOIN sessions s ON s.id = m.session_id WHERE 1 {where}",
            params,
        )
        return {int(r[0]) for r in rows}


def _moved(files: VectorFiles, view: _View) -> bool:
    """Has another process published a new base generation since this view opened?"""
    meta = files.meta()
    return meta is None or meta.get("generation") != view.base.generation


def _take(seg: Segment, rows: NDArray[np.int64]) -> Segment:
    from memlane.search.matrix import Segment

    return Segment(seg.ids[rows], seg.seqs[rows], seg.sess[rows], seg.data[rows], seg.codes[rows], seg.scales[rows])


def _concat(a: Segment, b: Segment) -> Segment:
    import numpy as np

    from memlane.search.matrix import Segment

    ids, seqs, sess, data, codes, scales = (np.concatenate((getattr(a, n), getattr(b, n))) for n in
                                            ("ids", "seqs", "sess", "data", "codes", "scales"))
    return Segment(ids, seqs, sess, data, codes, scales)
