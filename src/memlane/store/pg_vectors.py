"""Message vectors in PostgreSQL with pgvector: the VectorIndex of the PostgreSQL store.

Same contract as the SQLite index (``memlane.search.vectors``):
- ``message_vectors.message_id`` references ``messages(id) ON DELETE CASCADE``, so a vector
  goes with its message whoever deletes it;
- vectors are unit length; similarity is ``1 - cosine distance`` (pgvector's ``<=>``);
- ``search`` applies the MessageFilter inside the query, so filtered recall is not
  "top k, then filter".

Why an HNSW index with iterative scans: an unfiltered or loosely filtered query walks the
graph and keeps going (``hnsw.iterative_scan``) until ``k`` rows pass the filter, instead of
returning fewer rows than asked. A narrow filter (one session) makes the planner pick the
session index and compute exact distances for those rows instead, which is both exact and
fast. ``ef_search`` is raised to at least ``k`` per query: below that the graph cannot
return ``k`` neighbours.

The column is created without a dimension (migration 2) and typed ``vector(d)`` when an
embedder claims the empty index (:meth:`set_model_info`); the HNSW index is built then.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from memlane.errors import InvalidInputError
from memlane.models import MessageFilter
from memlane.ports import EMBEDDED_ROLES, ModelInfo, Vectors
from memlane.store.pg_rows import DIALECT, _message_where, sessions_join  # one definition of the filters
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
    from memlane.store.postgres import Conn, PostgresStore

#: HNSW build parameters (pgvector defaults are m=16, ef_construction=64).
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
#: ef_search of every session (set by PostgresStore); raised to k for a larger k.
EF_SEARCH = 100


def vector_literal(row: Any) -> str:
    """pgvector's text form. str() of a float32 widened to float64 round-trips exactly."""
    return "[" + ",".join(map(str, np.asarray(row, dtype=np.float32).astype(np.float64).tolist())) + "]"


class PgVectorIndex:
    """The ``message_vectors`` table of a PostgresStore (schema migration 2)."""

    def __init__(self, store: PostgresStore, *, info_ttl: float = 5.0) -> None:
        self._store = store
        self._info_ttl = info_ttl
        self._info: tuple[float, ModelInfo] | None = None
        self._lock = threading.Lock()

    # ----------------------------------------------------------- model info

    def model_info(self) -> ModelInfo | None:
        return model_info_of(self._store.read(*meta_select(DIALECT)))

    def _current_info(self) -> ModelInfo | None:
        """model_info() for the hot search path, re-read every few seconds.

        Searching costs one round trip instead of two; a reindex by another process is
        noticed within ``info_ttl`` seconds (and a width change fails loudly before that).
        """
        now = time.monotonic()
        with self._lock:
            if self._info is not None and now - self._info[0] < self._info_ttl:
                return self._info[1]
        info = self.model_info()
        with self._lock:
            self._info = (now, info) if info is not None else None
        return info

    def _forget_info(self) -> None:
        with self._lock:
            self._info = None

    def set_model_info(self, info: ModelInfo) -> None:
        def run(conn: Conn) -> None:
            # one claimer at a time; others see its result after COMMIT
            conn.execute("LOCK TABLE vector_meta IN SHARE ROW EXCLUSIVE MODE")
            has_vectors = check_claim(conn, DIALECT, info)
            typmod = conn.execute(
                "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'message_vectors'::regclass "
                "AND attname = 'embedding'"
            ).fetchone()
            if typmod is None or int(typmod[0]) != info.dimension:
                if has_vectors:  # vectors without model info: left from an interrupted claim
                    conn.execute("TRUNCATE message_vectors")
                conn.execute("DROP INDEX IF EXISTS message_vectors_hnsw")
                conn.execute(
                    f"ALTER TABLE message_vectors ALTER COLUMN embedding TYPE vector({int(info.dimension)})"
                )
                conn.execute(
                    "CREATE INDEX message_vectors_hnsw ON message_vectors USING hnsw "
                    f"(embedding vector_cosine_ops) WITH (m = {HNSW_M}, "
                    f"ef_construction = {HNSW_EF_CONSTRUCTION})"
                )
            write_model_info(conn, DIALECT, info)

        self._store.write(run)
        self._forget_info()

    def has_graph(self) -> bool:
        """Is the HNSW index there (it is missing only after an interrupted bulk load)?"""
        return self._store.read("SELECT to_regclass('message_vectors_hnsw') IS NOT NULL")[0][0] is True

    @contextmanager
    def bulk_load(self) -> Iterator[None]:
        """Load many vectors without the HNSW index, then build it once.

        Inserting into an HNSW graph costs a graph search per row; building the index
        over a filled table is many times faster (``memlane migrate`` copies vectors so).
        Searches during the load scan the table exactly, so they stay correct, only slower.
        """
        info = self.model_info()
        if info is None:
            raise InvalidInputError("claim the index for a model (set_model_info) before a bulk load")
        self._store.write(lambda conn: conn.execute("DROP INDEX IF EXISTS message_vectors_hnsw"))
        try:
            yield
        finally:

            def build(conn: Conn) -> None:
                conn.execute("SELECT set_config('maintenance_work_mem', '256MB', true)")
                conn.execute(
                    "CREATE INDEX IF NOT EXISTS message_vectors_hnsw ON message_vectors USING hnsw "
                    f"(embedding vector_cosine_ops) WITH (m = {HNSW_M}, "
                    f"ef_construction = {HNSW_EF_CONSTRUCTION})"
                )

            self._store.write(build)

    # ----------------------------------------------------------- writes

    def upsert(self, ids: Sequence[int], vectors: Vectors) -> int:
        id_list, matrix = checked_rows(ids, vectors, self.model_info())
        if not id_list:
            return 0
        literals = [vector_literal(row) for row in matrix]

        def run(conn: Conn) -> int:
            # The message may have been forgotten while it waited in the queue: the join
            # inserts nothing then, instead of failing the foreign key.
            cur = conn.execute(
                "INSERT INTO message_vectors (message_id, tenant_id, session_id, embedding) "
                "SELECT m.id, m.tenant_id, m.session_id, v.embedding::vector "
                "FROM unnest(%s::bigint[], %s::text[]) AS v(id, embedding) "
                "JOIN messages m ON m.id = v.id "
                "ON CONFLICT (message_id) DO UPDATE SET embedding = excluded.embedding",
                (id_list, literals),
            )
            return cur.rowcount

        return self._store.write(run)

    def delete(self, ids: Sequence[int]) -> int:
        id_list = [int(i) for i in ids]
        if not id_list:
            return 0

        def run(conn: Conn) -> int:
            return conn.execute(
                "DELETE FROM message_vectors WHERE message_id = ANY(%s)", (id_list,)
            ).rowcount

        return self._store.write(run)

    def clear(self) -> None:
        def run(conn: Conn) -> None:
            conn.execute("TRUNCATE message_vectors")
            clause, params = DIALECT.in_list("key", META_KEYS)
            conn.execute(f"DELETE FROM vector_meta WHERE {clause}", params)

        self._store.write(run)
        self._forget_info()

    # ----------------------------------------------------------- reads

    def count(self) -> int:
        return int(self._store.read("SELECT count(*) FROM message_vectors")[0][0])

    def missing_ids(self, limit: int, *, after_id: int = 0) -> list[int]:
        rows = self._store.read(
            "SELECT m.id FROM messages m WHERE m.id > %s AND m.role = ANY(%s) "
            "AND m.content <> '' AND NOT EXISTS "
            "(SELECT 1 FROM message_vectors v WHERE v.message_id = m.id) ORDER BY m.id LIMIT %s",
            (after_id, list(EMBEDDED_ROLES), int(limit)),
        )
        return [int(r[0]) for r in rows]

    def _query(self, query: Vectors) -> tuple[str, int] | None:
        info = self._current_info()
        if info is None:
            return None
        return vector_literal(checked_query(query, info.dimension)), info.dimension

    def similarities(self, query: Vectors, ids: Sequence[int]) -> dict[int, float]:
        id_list = [int(i) for i in ids]
        prepared = self._query(query)
        if prepared is None or not id_list:
            return {}
        rows = self._store.read(
            "SELECT message_id, 1 - (embedding <=> %s::vector) FROM message_vectors "
            "WHERE message_id = ANY(%s)",
            (prepared[0], id_list),
        )
        return {int(r[0]): float(r[1]) for r in rows}

    def graph_recall(self, queries: Sequence[Vectors], k: int = 10) -> float:
        """Share of the exact top ``k`` of each query that the HNSW graph returns (1.0: the
        graph misses nothing); ``memlane bench store`` reports it."""
        found = wanted = 0
        for query in queries:
            exact = [mid for mid, _ in self.search(query, k, exact=True)]
            found += len({mid for mid, _ in self.search(query, k)}.intersection(exact))
            wanted += len(exact)
        return found / wanted if wanted else 1.0

    def search(
        self, query: Vectors, k: int, flt: MessageFilter | None = None, *, exact: bool = False
    ) -> list[tuple[int, float]]:
        """The ``k`` nearest messages passing ``flt``; ``exact`` compares every vector instead
        of walking the HNSW graph (what ``memlane bench store`` measures the graph's recall
        against)."""
        if k < 1:
            raise InvalidInputError("k must be at least 1")
        prepared = self._query(query)
        if prepared is None:
            return []
        literal, _dim = prepared
        flt = flt or MessageFilter()
        where, params = _message_where(flt)
        join = sessions_join(flt)

        query_sql = f"""
            SELECT message_id, 1 - distance FROM (
                SELECT v.message_id, v.embedding <=> %s::vector AS distance
                FROM message_vectors v JOIN messages m ON m.id = v.message_id {join}
                WHERE true {where}
                ORDER BY distance LIMIT %s
            ) best ORDER BY distance, message_id
            """
        args = (literal, *params, int(k))
        if exact:

            def scan(conn: Conn) -> list[Any]:
                # SET LOCAL lasts until the end of this transaction only
                conn.execute("SET LOCAL enable_indexscan = off")
                return conn.execute(query_sql, args).fetchall()

            rows = self._store.write(scan)
        elif k <= EF_SEARCH:
            # the session already has ef_search = EF_SEARCH and iterative scans (PostgresStore)
            rows = self._store.read(query_sql, args)
        else:

            def run(conn: Conn) -> list[Any]:
                # set_config(..., true) lasts until the end of this transaction only
                conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(k),))
                return conn.execute(query_sql, args).fetchall()

            rows = self._store.write(run)
        return [(int(r[0]), float(r[1])) for r in rows]
