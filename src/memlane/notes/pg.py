"""The notes lane on PostgreSQL (migration 4 of ``store/postgres_schema.py``).

Same contract as :class:`~memlane.notes.store.SQLiteNoteStore`, on the
:class:`~memlane.store.postgres.PostgresStore`'s pool and transactions. Writes that must
see their source messages (a note, facets) check them in the same transaction after
locking those rows (``FOR KEY SHARE``), so a concurrent "forget" either runs first (and
the note is not written) or waits for the note and then deletes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from psycopg.types.json import Jsonb

from memlane.errors import NotFoundError, SessionNotFoundError
from memlane.notes.models import AuditEntry, Facet, Note
from memlane.notes.store import NoteFilter
from memlane.store.postgres import PostgresStore, tsquery_literal
from memlane.text import content_words

__all__ = ["PostgresNoteStore"]

_NOTE_COLS = (
    "id, lineage_id, tenant_id, user_id, session_id, kind, slot, value, polarity, text, "
    "author_id, author_name, importance, confidence, entities, metadata, origin, valid_from, "
    "valid_to, supersedes, superseded_by, seen_count, created_at, updated_at"
)
_AUDIT_COLS = (
    "id, at, tenant_id, session_id, actor_id, actor_name, is_anchor, action, command, "
    "allowed, result, detail"
)


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(ts: datetime) -> datetime:
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


def _row_to_note(row: Sequence[Any]) -> Note:
    return Note(
        id=int(row[0]), lineage_id=row[1], tenant_id=row[2], user_id=row[3], session_id=row[4],
        kind=row[5], slot=row[6], value=row[7], polarity=int(row[8]), text=row[9],
        author_id=row[10], author_name=row[11], importance=float(row[12]), confidence=float(row[13]),
        entities=[str(e) for e in (row[14] or [])], metadata=dict(row[15] or {}), origin=row[16],
        valid_from=row[17], valid_to=row[18], supersedes=row[19], superseded_by=row[20],
        seen_count=int(row[21]), created_at=row[22], updated_at=row[23],
    )


def _where(flt: NoteFilter, alias: str = "n") -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    for col in ("tenant_id", "user_id", "session_id", "kind"):
        value = getattr(flt, col)
        if value is not None:
            clauses.append(f"{alias}.{col} = %s")
            params.append(value)
    if flt.current_only:
        clauses.append(f"{alias}.valid_to IS NULL")
    if flt.visible_in is not None:
        if flt.anchor_id is not None:
            clauses.append(f"({alias}.session_id = %s OR {alias}.user_id = %s)")
            params.extend([flt.visible_in, flt.anchor_id])
        else:
            clauses.append(f"{alias}.session_id = %s")
            params.append(flt.visible_in)
    if flt.min_importance is not None:
        clauses.append(f"{alias}.importance >= %s")
        params.append(flt.min_importance)
    return (" AND ".join(clauses) if clauses else "true"), params


class PostgresNoteStore:
    """Notes in the PostgreSQL log's database."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    # ------------------------------------------------------------ notes

    def _attach_sources(self, notes: list[Note]) -> list[Note]:
        ids = [n.id for n in notes if n.id is not None]
        if not ids:
            return notes
        found: dict[int, list[int]] = {}
        rows = self.store.read(
            "SELECT note_id, message_id FROM note_sources WHERE note_id = ANY(%s) ORDER BY message_id", (ids,)
        )
        for note_id, message_id in rows:
            found.setdefault(int(note_id), []).append(int(message_id))
        for note in notes:
            note.source_ids = found.get(note.id or 0, [])
        return notes

    @staticmethod
    def _sources_exist(conn: Any, ids: Sequence[int]) -> bool:
        wanted = sorted({int(i) for i in ids})
        rows = conn.execute(
            "SELECT id FROM messages WHERE id = ANY(%s) FOR KEY SHARE", (wanted,)
        ).fetchall()
        return len(rows) == len(wanted)

    def _get(self, conn: Any, note_id: int) -> Note | None:
        row = conn.execute(f"SELECT {_NOTE_COLS} FROM notes WHERE id = %s", (note_id,)).fetchone()
        if row is None:
            return None
        note = _row_to_note(row)
        note.source_ids = [int(r[0]) for r in conn.execute(
            "SELECT message_id FROM note_sources WHERE note_id = %s ORDER BY message_id", (note_id,)
        ).fetchall()]
        return note

    def add_note(self, note: Note, *, supersede: Sequence[int] = ()) -> Note | None:
        start = _aware(note.valid_from)

        def run(conn: Any) -> Note | None:
            if note.source_ids and not self._sources_exist(conn, note.source_ids):
                return None
            lineage = note.lineage_id
            previous: int | None = None
            for old_id in supersede:
                row = conn.execute("SELECT lineage_id FROM notes WHERE id = %s", (old_id,)).fetchone()
                if row is None:
                    continue
                lineage = lineage or row[0] or old_id
                previous = old_id
            now = _now()
            new_id = conn.execute(
                "INSERT INTO notes (lineage_id, tenant_id, user_id, session_id, kind, slot, value, polarity, "
                "text, author_id, author_name, importance, confidence, entities, metadata, origin, valid_from, "
                "valid_to, supersedes, seen_count, created_at, updated_at) VALUES "
                "(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING id",
                (
                    lineage, note.tenant_id, note.user_id, note.session_id, note.kind, note.slot,
                    note.value, note.polarity, note.text, note.author_id, note.author_name,
                    note.importance, note.confidence, Jsonb(note.entities), Jsonb(note.metadata),
                    note.origin, start, None if note.valid_to is None else _aware(note.valid_to),
                    previous, note.seen_count, now, now,
                ),
            ).fetchone()[0]
            if lineage is None:
                conn.execute("UPDATE notes SET lineage_id = id WHERE id = %s", (new_id,))
            for old_id in supersede:
                conn.execute(
                    "UPDATE notes SET valid_to = %s, superseded_by = %s, updated_at = %s "
                    "WHERE id = %s AND valid_to IS NULL",
                    (start, new_id, now, old_id),
                )
            for mid in note.source_ids:
                conn.execute(
                    "INSERT INTO note_sources VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                    (new_id, mid, note.session_id or ""),
                )
            return self._get(conn, new_id)

        result: Note | None = self.store.write(run)
        return result

    def merge_note(self, note_id: int, source_ids: Sequence[int], session_id: str,
                   importance: float) -> Note | None:
        def run(conn: Any) -> Note | None:
            if source_ids and not self._sources_exist(conn, source_ids):
                return None
            cur = conn.execute(
                "UPDATE notes SET seen_count = seen_count + 1, importance = GREATEST(importance, %s), "
                "updated_at = %s WHERE id = %s",
                (importance, _now(), note_id),
            )
            if cur.rowcount == 0:
                return None
            for mid in source_ids:
                conn.execute(
                    "INSERT INTO note_sources VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                    (note_id, mid, session_id),
                )
            return self._get(conn, note_id)

        result: Note | None = self.store.write(run)
        return result

    def get_note(self, note_id: int) -> Note | None:
        rows = self.store.read(f"SELECT {_NOTE_COLS} FROM notes WHERE id = %s", (note_id,))
        return self._attach_sources([_row_to_note(rows[0])])[0] if rows else None

    def list_notes(self, flt: NoteFilter, *, limit: int = 100, offset: int = 0) -> list[Note]:
        where, params = _where(flt)
        rows = self.store.read(
            f"SELECT {_NOTE_COLS} FROM notes n WHERE {where} "
            "ORDER BY n.importance DESC, n.valid_from DESC, n.id DESC LIMIT %s OFFSET %s",
            (*params, int(limit), int(offset)),
        )
        return self._attach_sources([_row_to_note(r) for r in rows])

    def search_notes(self, query: str, flt: NoteFilter, *, limit: int = 20) -> list[tuple[Note, float]]:
        words = content_words(query)
        if not words:
            return []
        where, params = _where(flt)
        cols = ", ".join("n." + c.strip() for c in _NOTE_COLS.split(","))
        # Words become lexemes with the column's own configuration, OR-ed.
        lexemes = [
            r[0] for r in self.store.read(
                "SELECT DISTINCT unnest(tsvector_to_array(to_tsvector('english', %s)))", (" ".join(words),)
            )
        ]
        if not lexemes:
            return []
        rows = self.store.read(
            f"SELECT {cols}, ts_rank(n.tsv, q) AS rank FROM notes n, to_tsquery('english', %s) q "
            f"WHERE n.tsv @@ q AND {where} ORDER BY rank DESC, n.id DESC LIMIT %s",
            (tsquery_literal(lexemes), *params, int(limit)),
        )
        notes = self._attach_sources([_row_to_note(r[:-1]) for r in rows])
        return [(n, float(r[-1]) * 10.0) for n, r in zip(notes, rows, strict=True)]

    def current_in_slot(self, tenant_id: str, user_id: str | None, slots: Sequence[str]) -> list[Note]:
        if not slots:
            return []
        rows = self.store.read(
            f"SELECT {_NOTE_COLS} FROM notes WHERE tenant_id = %s AND user_id IS NOT DISTINCT FROM %s "
            "AND slot = ANY(%s) AND valid_to IS NULL ORDER BY valid_from, id",
            (tenant_id, user_id, list(slots)),
        )
        return self._attach_sources([_row_to_note(r) for r in rows])

    def history(self, note_id: int) -> list[Note]:
        rows = self.store.read("SELECT lineage_id FROM notes WHERE id = %s", (note_id,))
        if not rows:
            raise NotFoundError(f"note {note_id} does not exist")
        lineage = rows[0][0] or note_id
        found = self.store.read(
            f"SELECT {_NOTE_COLS} FROM notes WHERE lineage_id = %s OR id = %s ORDER BY valid_from, id",
            (lineage, note_id),
        )
        return self._attach_sources([_row_to_note(r) for r in found])

    def expire_note(self, note_id: int, at: datetime) -> Note:
        self.store.write(lambda conn: conn.execute(
            "UPDATE notes SET valid_to = %s, updated_at = %s WHERE id = %s AND valid_to IS NULL",
            (_aware(at), _now(), note_id),
        ))
        found = self.get_note(note_id)
        if found is None:
            raise NotFoundError(f"note {note_id} does not exist")
        return found

    def reopen_note(self, note_id: int) -> bool:
        def run(conn: Any) -> bool:
            row = conn.execute(
                "SELECT tenant_id, user_id, slot FROM notes WHERE id = %s AND valid_to IS NOT NULL "
                "AND superseded_by IS NULL", (note_id,),
            ).fetchone()
            if row is None:
                return False
            if row[2] is not None and conn.execute(
                "SELECT 1 FROM notes WHERE tenant_id = %s AND user_id IS NOT DISTINCT FROM %s "
                "AND slot = %s AND valid_to IS NULL", row,
            ).fetchone():
                return False
            conn.execute("UPDATE notes SET valid_to = NULL, updated_at = %s WHERE id = %s", (_now(), note_id))
            return True

        result: bool = self.store.write(run)
        return result

    def delete_notes(self, note_ids: Sequence[int]) -> int:
        ids = sorted({int(i) for i in note_ids})
        if not ids:
            return 0
        result: int = self.store.write(
            lambda conn: conn.execute("DELETE FROM notes WHERE id = ANY(%s)", (ids,)).rowcount
        )
        return result

    def notes_from(self, *, message_ids: Sequence[int] | None = None,
                   session_id: str | None = None) -> list[int]:
        out: set[int] = set()
        if session_id is not None:
            rows = self.store.read(
                "SELECT note_id FROM note_sources WHERE session_id = %s "
                "UNION SELECT id FROM notes WHERE session_id = %s",
                (session_id, session_id),
            )
            out.update(int(r[0]) for r in rows)
        ids = [int(i) for i in message_ids or ()]
        if ids:
            rows = self.store.read("SELECT note_id FROM note_sources WHERE message_id = ANY(%s)", (ids,))
            out.update(int(r[0]) for r in rows)
        return sorted(out)

    # ------------------------------------------------------------ facets

    def add_facets(self, facets: Sequence[Facet]) -> int:
        if not facets:
            return 0

        def run(conn: Any) -> int:
            if not self._sources_exist(conn, [f.message_id for f in facets]):
                return 0
            n = 0
            for f in facets:
                n += conn.execute(
                    "INSERT INTO message_facets VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (f.message_id, f.session_id, f.kind, f.value, _aware(f.at)),
                ).rowcount
            return n

        result: int = self.store.write(run)
        return result

    def list_facets(self, *, session_id: str | None = None, kind: str | None = None,
                    value: str | None = None, limit: int = 200) -> list[Facet]:
        clauses, params = ["true"], []
        for col, v in (("session_id", session_id), ("kind", kind), ("value", value)):
            if v is not None:
                clauses.append(f"{col} = %s")
                params.append(v)
        rows = self.store.read(
            f"SELECT message_id, session_id, kind, value, at FROM message_facets "
            f"WHERE {' AND '.join(clauses)} ORDER BY at, message_id LIMIT %s",
            (*params, int(limit)),
        )
        return [Facet(int(r[0]), r[1], r[2], r[3], r[4]) for r in rows]

    # ------------------------------------------------------------ promotion progress

    def progress(self, session_id: str) -> int:
        rows = self.store.read(
            "SELECT last_message_id FROM promotion_progress WHERE session_id = %s", (session_id,)
        )
        return int(rows[0][0]) if rows else 0

    def set_progress(self, session_id: str, last_message_id: int) -> None:
        def run(conn: Any) -> None:
            if conn.execute("SELECT 1 FROM sessions WHERE id = %s", (session_id,)).fetchone() is None:
                return
            conn.execute(
                "INSERT INTO promotion_progress VALUES (%s, %s, %s) ON CONFLICT (session_id) DO UPDATE "
                "SET last_message_id = GREATEST(promotion_progress.last_message_id, excluded.last_message_id), "
                "updated_at = excluded.updated_at",
                (session_id, int(last_message_id), _now()),
            )

        self.store.write(run)

    def sessions_behind(self, *, limit: int = 1000) -> list[str]:
        rows = self.store.read(
            "SELECT s.id FROM sessions s LEFT JOIN promotion_progress p ON p.session_id = s.id "
            "WHERE EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id "
            "AND m.id > COALESCE(p.last_message_id, 0)) ORDER BY s.last_active_at DESC LIMIT %s",
            (int(limit),),
        )
        return [r[0] for r in rows]

    # ------------------------------------------------------------ archive tier

    def archive_session(self, session_id: str, reason: str | None = None) -> bool:
        def run(conn: Any) -> bool:
            row = conn.execute("SELECT status FROM sessions WHERE id = %s FOR UPDATE", (session_id,)).fetchone()
            if row is None:
                raise SessionNotFoundError(session_id)
            if row[0] == "archived":
                return False
            now = _now()
            conn.execute(
                "INSERT INTO session_archive VALUES (%s, %s, %s, %s) ON CONFLICT (session_id) DO UPDATE "
                "SET archived_at = excluded.archived_at, previous_status = excluded.previous_status, "
                "reason = excluded.reason",
                (session_id, now, row[0], reason),
            )
            conn.execute("UPDATE sessions SET status = 'archived', updated_at = %s WHERE id = %s", (now, session_id))
            return True

        result: bool = self.store.write(run)
        return result

    def unarchive_session(self, session_id: str) -> bool:
        def run(conn: Any) -> bool:
            row = conn.execute("SELECT status FROM sessions WHERE id = %s FOR UPDATE", (session_id,)).fetchone()
            if row is None:
                raise SessionNotFoundError(session_id)
            prev = conn.execute(
                "DELETE FROM session_archive WHERE session_id = %s RETURNING previous_status", (session_id,)
            ).fetchone()
            if row[0] != "archived":
                return False
            status = prev[0] if prev and prev[0] != "archived" else "active"
            conn.execute("UPDATE sessions SET status = %s, updated_at = %s WHERE id = %s",
                         (status, _now(), session_id))
            return True

        result: bool = self.store.write(run)
        return result

    def archived_sessions(self, *, limit: int = 1000) -> list[tuple[str, datetime, str | None]]:
        rows = self.store.read(
            "SELECT s.id, COALESCE(a.archived_at, s.updated_at), a.reason FROM sessions s "
            "LEFT JOIN session_archive a ON a.session_id = s.id WHERE s.status = 'archived' "
            "ORDER BY 2 DESC LIMIT %s",
            (int(limit),),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    # ------------------------------------------------------------ audit log

    def append_audit(self, entry: AuditEntry) -> AuditEntry:
        def run(conn: Any) -> int:
            row = conn.execute(
                "INSERT INTO audit_log (at, tenant_id, session_id, actor_id, actor_name, is_anchor, action, "
                "command, allowed, result, detail) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING id",
                (
                    _aware(entry.at), entry.tenant_id, entry.session_id, entry.actor_id, entry.actor_name,
                    entry.is_anchor, entry.action, entry.command, entry.allowed, entry.result, Jsonb(entry.detail),
                ),
            ).fetchone()
            return int(row[0])

        entry.id = self.store.write(run)
        return entry

    def list_audit(self, *, session_id: str | None = None, limit: int = 100) -> list[AuditEntry]:
        where, params = ("WHERE session_id = %s", [session_id]) if session_id is not None else ("", [])
        rows = self.store.read(
            f"SELECT {_AUDIT_COLS} FROM audit_log {where} ORDER BY id DESC LIMIT %s", (*params, int(limit))
        )
        return [
            AuditEntry(id=int(r[0]), at=r[1], tenant_id=r[2], session_id=r[3], actor_id=r[4], actor_name=r[5],
                       is_anchor=bool(r[6]), action=r[7], command=r[8], allowed=bool(r[9]), result=r[10],
                       detail=dict(r[11] or {}))
            for r in rows
        ]

    def redact_audit(self, session_id: str) -> int:
        result: int = self.store.write(lambda conn: conn.execute(
            "UPDATE audit_log SET command = '[forgotten]' WHERE session_id = %s "
            "AND command IS NOT NULL AND command <> '[forgotten]'",
            (session_id,),
        ).rowcount)
        return result

    def stats(self) -> dict[str, Any]:
        row = self.store.read(
            "SELECT (SELECT COUNT(*) FROM notes WHERE valid_to IS NULL), "
            "(SELECT COUNT(*) FROM notes WHERE valid_to IS NOT NULL), "
            "(SELECT COUNT(*) FROM message_facets), "
            "(SELECT COUNT(*) FROM sessions WHERE status = 'archived'), "
            "(SELECT COUNT(*) FROM audit_log)"
        )[0]
        return {
            "notes": int(row[0]), "notes_superseded": int(row[1]), "facets": int(row[2]),
            "archived_sessions": int(row[3]), "audit_entries": int(row[4]),
        }
