"""The response cache's rows (migration 14 on either backend): answers, their sources, counts.

One implementation for SQLite and PostgreSQL; the SQL differs only by the dialect's
placeholder. Invalidation is the database's: triggers delete an answer when a message or
note it was built from is deleted or the note superseded (``response_cache_sources``),
and the answer goes with the session it was answered in (``ON DELETE CASCADE``), so every
deletion path, the erase routine included, takes cached answers with it, and on SQLite
their bytes too (``secure_delete``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from memlane.ports import CachedResponse
from memlane.store.filters import Dialect

__all__ = ["SqlResponseCache"]

_COLS = (
    "tenant_id, scope, model, fingerprint, query_key, query, response, created_at, expires_at, "
    "session_id, language, vector, vector_model, cost_seconds, cost_tokens, hits, id"
)
_COUNTS = ("lookups", "hits", "saved_seconds", "saved_tokens")


class _SqlStore(Protocol):
    def read(self, query: str, params: Any = ()) -> list[Any]: ...
    def write(self, fn: Any) -> Any: ...


def _entry(row: Sequence[Any]) -> CachedResponse:
    return CachedResponse(
        tenant_id=row[0], scope=row[1], model=row[2], fingerprint=row[3], query_key=row[4],
        query=row[5], response=row[6], created_at=float(row[7]),
        expires_at=None if row[8] is None else float(row[8]), session_id=row[9], language=row[10],
        vector=None if row[11] is None else bytes(row[11]), vector_model=row[12],
        cost_seconds=None if row[13] is None else float(row[13]),
        cost_tokens=None if row[14] is None else int(row[14]), hits=int(row[15]), id=int(row[16]),
    )


class SqlResponseCache:
    """Cached answers in the ``response_cache`` tables of a SQLite or PostgreSQL store."""

    def __init__(self, store: _SqlStore, dialect: Dialect) -> None:
        self._store = store
        self._d = dialect

    def put_response(
        self, entry: CachedResponse, message_ids: Sequence[int], note_ids: Sequence[int]
    ) -> CachedResponse:
        m = self._d.mark
        cols = _COLS.rsplit(", ", 1)[0]  # all but id
        values = (
            entry.tenant_id, entry.scope, entry.model, entry.fingerprint, entry.query_key, entry.query,
            entry.response, entry.created_at, entry.expires_at, entry.session_id, entry.language,
            entry.vector, entry.vector_model, entry.cost_seconds, entry.cost_tokens, entry.hits,
        )

        def run(conn: Any) -> int:
            # The same question under the same key is answered once: the newer answer wins.
            conn.execute(
                f"DELETE FROM response_cache WHERE tenant_id = {m} AND scope = {m} AND model = {m} "
                f"AND fingerprint = {m} AND query_key = {m}",
                (entry.tenant_id, entry.scope, entry.model, entry.fingerprint, entry.query_key),
            )
            row = conn.execute(
                f"INSERT INTO response_cache ({cols}) VALUES ({', '.join([m] * len(values))}) RETURNING id",
                values,
            ).fetchone()
            new_id = int(row[0])
            sources: list[tuple[int, int | None, int | None]] = [
                (new_id, int(i), None) for i in sorted(set(message_ids))
            ]
            sources += [(new_id, None, int(i)) for i in sorted(set(note_ids))]
            for source in sources:
                conn.execute(
                    f"INSERT INTO response_cache_sources (entry_id, message_id, note_id) VALUES ({m}, {m}, {m})",
                    source,
                )
            return new_id

        entry.id = self._store.write(run)
        return entry

    def response_candidates(
        self, tenant_id: str, scope: str, model: str, fingerprint: str, now: float, *, limit: int = 200
    ) -> list[CachedResponse]:
        m = self._d.mark
        rows = self._store.read(
            f"SELECT {_COLS} FROM response_cache WHERE tenant_id = {m} AND scope = {m} AND model = {m} "
            f"AND fingerprint = {m} AND (expires_at IS NULL OR expires_at > {m}) ORDER BY id DESC LIMIT {m}",
            (tenant_id, scope, model, fingerprint, now, int(limit)),
        )
        return [_entry(r) for r in rows]

    def record_lookup(self, tenant_id: str, hit: CachedResponse | None, now: float) -> None:
        m = self._d.mark
        saved = (hit.cost_seconds or 0.0, hit.cost_tokens or 0) if hit is not None else (0.0, 0)
        counts = (1, int(hit is not None), *saved)

        def run(conn: Any) -> None:
            conn.execute(
                f"INSERT INTO response_cache_counts (tenant_id, {', '.join(_COUNTS)}) "
                f"VALUES ({m}, {m}, {m}, {m}, {m}) ON CONFLICT (tenant_id) DO UPDATE SET "
                + ", ".join(f"{c} = response_cache_counts.{c} + excluded.{c}" for c in _COUNTS),
                (tenant_id, *counts),
            )
            if hit is not None and hit.id is not None:
                conn.execute(
                    f"UPDATE response_cache SET hits = hits + 1, last_hit_at = {m} WHERE id = {m}", (now, hit.id)
                )

        self._store.write(run)

    def response_cache_counts(self, tenant_id: str | None = None) -> dict[str, float]:
        m = self._d.mark
        where, params = ("WHERE tenant_id = " + m, (tenant_id,)) if tenant_id is not None else ("", ())
        sums = ", ".join(f"COALESCE(SUM({c}), 0)" for c in _COUNTS)
        row = self._store.read(f"SELECT {sums} FROM response_cache_counts {where}", params)[0]
        entries = self._store.read(f"SELECT COUNT(*) FROM response_cache {where}", params)[0][0]
        out: dict[str, float] = {"entries": int(entries)}
        out.update({c: (float(v) if c == "saved_seconds" else int(v)) for c, v in zip(_COUNTS, row, strict=True)})
        return out

    def delete_responses(
        self, *, tenant_id: str | None = None, scope: str | None = None, expired_at: float | None = None
    ) -> int:
        m = self._d.mark
        clauses: list[str] = []
        params: list[Any] = []
        for column, value in (("tenant_id", tenant_id), ("scope", scope)):
            if value is not None:
                clauses.append(f"{column} = {m}")
                params.append(value)
        if expired_at is not None:
            clauses.append(f"expires_at IS NOT NULL AND expires_at <= {m}")
            params.append(expired_at)
        where = " WHERE " + " AND ".join(clauses) if clauses else ""
        return int(self._store.write(
            lambda conn: conn.execute(f"DELETE FROM response_cache{where}", params).rowcount
        ))
