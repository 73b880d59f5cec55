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

Why the SQLite index is a plain table plus an in-process matrix and not a sqlite-vec
``vec0`` table: first, many Python builds (pyenv's default, this project's CI, macOS's
system Python) compile ``sqlite3`` without ``enable_load_extension``, so a store that needs
the extension would not open there at all; second, speed: ``memlane bench search`` runs
the same vectors through ``vec0`` KNN (via apsw, which can load extensions) beside this
index and reports the ratio.
The table keeps the vectors durable in the same file as the log (so they cannot drift into
another file, and cascade with their message without needing any extension loaded in the
deleting connection); the matrix is a cache that follows the table by a sequence number and
a deletion counter, so several processes sharing one file stay consistent.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memlane.errors import InvalidInputError
from memlane.models import MessageFilter
from memlane.ports import EMBEDDED_ROLES, ModelInfo
from memlane.store.sqlite_rows import DIALECT, _message_where  # one definition of the filters
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
    from memlane.ports import Vectors
    from memlane.search.matrix import Matrix
    from memlane.store.sqlite import SQLiteStore

__all__ = ["SQLiteVectorIndex"]


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
        self._matrix: Matrix | None = None

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

        return self._store.write(run)

    def clear(self) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM message_vectors")
            clause, params = DIALECT.in_list("key", META_KEYS)
            conn.execute(f"DELETE FROM vector_meta WHERE {clause}", params)

        self._store.write(run)
        with self._lock:
            self._matrix = None

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

    def _synced(self) -> Matrix | None:
        """The matrix, brought up to date with the table (cheap when nothing changed)."""
        import numpy as np

        from memlane.search.matrix import Matrix
        info = self.model_info()
        if info is None:
            return None
        head = self._store.read(
            "SELECT (SELECT COALESCE(MAX(seq), 0) FROM message_vectors), "
            "(SELECT value FROM vector_meta WHERE key = 'deletions')"
        )[0]
        max_seq, deletions = int(head[0]), int(head[1] or 0)
        with self._lock:
            matrix = self._matrix
            if matrix is None or matrix.dimension != info.dimension or matrix.deletions != deletions:
                # Something was deleted (or first use): rebuild. Deletions are rare
                # (forget, prune), appends are the common case handled below.
                matrix = Matrix(info.dimension)
                matrix.deletions = deletions
            if max_seq > matrix.seq:
                rows = self._store.read(
                    "SELECT message_id, seq, embedding FROM message_vectors WHERE seq > ? ORDER BY seq",
                    (matrix.seq,),
                )
                if rows:
                    blob = b"".join(r[2] for r in rows)
                    data = np.frombuffer(blob, dtype="<f4").reshape(len(rows), info.dimension)
                    matrix.put([int(r[0]) for r in rows], data.astype(np.float32))
                    matrix.seq = max(int(r[1]) for r in rows)
            self._matrix = matrix
            return matrix

    def similarities(self, query: Vectors, ids: Sequence[int]) -> dict[int, float]:
        matrix = self._synced()
        if matrix is None or not ids:
            return {}
        q = checked_query(query, matrix.dimension)
        present, rows = matrix.rows_of(ids)
        sims = matrix.data[rows] @ q
        return {int(m): float(s) for m, s in zip(present, sims, strict=True)}

    def search(
        self, query: Vectors, k: int, flt: MessageFilter | None = None
    ) -> list[tuple[int, float]]:
        from memlane.search.matrix import top

        if k < 1:
            raise InvalidInputError("k must be at least 1")
        matrix = self._synced()
        if matrix is None or matrix.size == 0:
            return []
        # Two exact strategies, picked by how selective the filter is likely to be:
        # a session is small, so score just its rows; anything else (a user, roles, a time
        # range, "not hidden") usually keeps most rows, so score the whole matrix (int8
        # pre-ranking, see Matrix.best) and keep the best rows that pass, falling back to
        # the candidate rows when too few of the best pass.
        q = checked_query(query, matrix.dimension)
        flt = flt or MessageFilter()
        where, params = _message_where(flt)
        if not where:
            return matrix.best(q, k)
        if flt.session_id is None:
            # Loose filters (a user who owns most messages, hidden=0): rank everything, then
            # keep the best rows that pass. Falls through to the exact path when too few do.
            pool = min(matrix.size, 2 * k + 50)
            ranked = matrix.best(q, pool)
            passing = self._passing([m for m, _ in ranked], where, params)
            kept = [(m, s) for m, s in ranked if m in passing]
            if len(kept) >= k or pool == matrix.size:
                return kept[:k]
        candidates = self._candidates(where, params)
        present, rows = matrix.rows_of(candidates)
        if not len(present):
            return []
        return top(present, matrix.data[rows] @ q, k)

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

    def _candidates(self, where: str, params: list[object]) -> list[int]:
        rows = self._store.read(
            f"SELECT m.id FROM messages m JOIN sessions s ON s.id = m.session_id WHERE 1 {where}",
            params,
        )
        return [int(r[0]) for r in rows]
