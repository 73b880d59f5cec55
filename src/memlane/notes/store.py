"""Where notes, facets, promotion progress, the archive tier and the audit log are kept.

:class:`NoteStore` is the seam (small on purpose, so a PostgreSQL implementation is a
day's work); :class:`SQLiteNoteStore` is the reference and lives in the conversation
log's own file and connection (migration 4), so one transaction can check that a note's
source messages still exist while it writes the note — a "forget" that races the
background promoter can never leave a note behind.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from memlane.errors import CorruptRecordError, NotFoundError, SessionNotFoundError
from memlane.models import from_epoch, to_epoch
from memlane.notes.models import AuditEntry, Facet, Note
from memlane.store.sqlite import SQLiteStore
from memlane.text import fts5_query

__all__ = ["NoteFilter", "NoteStore", "SQLiteNoteStore", "note_store_for"]


@dataclass(slots=True)
class NoteFilter:
    """Which notes to list; None means 'any'.

    ``visible_in`` + ``anchor_id`` select what one conversation may see: its own notes and
    the Anchor's notes from anywhere in the tenant.
    """

    tenant_id: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    kind: str | None = None
    current_only: bool = True
    visible_in: str | None = None
    anchor_id: str | None = None
    min_importance: float | None = None


@runtime_checkable
class NoteStore(Protocol):
    """Durable notes and their companions. Every write is one transaction."""

    # notes
    def add_note(self, note: Note, *, supersede: Sequence[int] = ()) -> Note | None:
        """Insert ``note`` (closing the ``supersede`` versions at its valid_from, in its
        lineage); None when one of its source messages no longer exists."""
        ...

    def merge_note(self, note_id: int, source_ids: Sequence[int], session_id: str,
                   importance: float) -> Note | None: ...
    def get_note(self, note_id: int) -> Note | None: ...
    def list_notes(self, flt: NoteFilter, *, limit: int = 100, offset: int = 0) -> list[Note]: ...
    def search_notes(self, query: str, flt: NoteFilter, *, limit: int = 20) -> list[tuple[Note, float]]: ...
    def current_in_slot(self, tenant_id: str, user_id: str | None, slots: Sequence[str]) -> list[Note]: ...
    def history(self, note_id: int) -> list[Note]: ...
    def expire_note(self, note_id: int, at: datetime) -> Note: ...
    def reopen_note(self, note_id: int) -> bool:
        """Make a superseded version current again (its successor was forgotten)."""
        ...

    def delete_notes(self, note_ids: Sequence[int]) -> int: ...
    def notes_from(self, *, message_ids: Sequence[int] | None = None,
                   session_id: str | None = None) -> list[int]: ...

    # facets
    def add_facets(self, facets: Sequence[Facet]) -> int: ...
    def list_facets(self, *, session_id: str | None = None, kind: str | None = None,
                    value: str | None = None, limit: int = 200) -> list[Facet]: ...

    # promotion progress
    def progress(self, session_id: str) -> int: ...
    def set_progress(self, session_id: str, last_message_id: int) -> None: ...
    def sessions_behind(self, *, limit: int = 1000) -> list[str]: ...

    # archive tier
    def archive_session(self, session_id: str, reason: str | None = None) -> bool: ...
    def unarchive_session(self, session_id: str) -> bool: ...
    def archived_sessions(self, *, limit: int = 1000) -> list[tuple[str, datetime, str | None]]: ...

    # audit log
    def append_audit(self, entry: AuditEntry) -> AuditEntry: ...
    def list_audit(self, *, session_id: str | None = None, limit: int = 100) -> list[AuditEntry]: ...
    def redact_audit(self, session_id: str) -> int: ...

    def stats(self) -> dict[str, Any]: ...


_NOTE_COLS = (
    "id, lineage_id, tenant_id, user_id, session_id, kind, slot, value, polarity, text, "
    "author_id, author_name, importance, confidence, entities, metadata, origin, valid_from, "
    "valid_to, supersedes, superseded_by, seen_count, created_at, updated_at"
)
_AUDIT_COLS = (
    "id, at, tenant_id, session_id, actor_id, actor_name, is_anchor, action, command, "
    "allowed, result, detail"
)


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _json(text: str, table: str, row_id: object, column: str, kind: type) -> Any:
    try:
        value = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise CorruptRecordError(table, row_id, f"column {column} is not valid JSON") from exc
    if not isinstance(value, kind):
        raise CorruptRecordError(table, row_id, f"column {column} has the wrong JSON type")
    return value


def _row_to_note(row: Sequence[Any]) -> Note:
    return Note(
        id=int(row[0]),
        lineage_id=row[1],
        tenant_id=row[2],
        user_id=row[3],
        session_id=row[4],
        kind=row[5],
        slot=row[6],
        value=row[7],
        polarity=int(row[8]),
        text=row[9],
        author_id=row[10],
        author_name=row[11],
        importance=float(row[12]),
        confidence=float(row[13]),
        entities=[str(e) for e in _json(row[14], "notes", row[0], "entities", list)],
        metadata=_json(row[15], "notes", row[0], "metadata", dict),
        origin=row[16],
        valid_from=from_epoch(row[17]),
        valid_to=None if row[18] is None else from_epoch(row[18]),
        supersedes=row[19],
        superseded_by=row[20],
        seen_count=int(row[21]),
        created_at=from_epoch(row[22]),
        updated_at=from_epoch(row[23]),
    )


def _row_to_audit(row: Sequence[Any]) -> AuditEntry:
    return AuditEntry(
        id=int(row[0]),
        at=from_epoch(row[1]),
        tenant_id=row[2],
        session_id=row[3],
        actor_id=row[4],
        actor_name=row[5],
        is_anchor=bool(row[6]),
        action=row[7],
        command=row[8],
        allowed=bool(row[9]),
        result=row[10],
        detail=_json(row[11], "audit_log", row[0], "detail", dict),
    )


def _where(flt: NoteFilter) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    for col in ("tenant_id", "user_id", "session_id", "kind"):
        value = getattr(flt, col)
        if value is not None:
            clauses.append(f"n.{col} = ?")
            params.append(value)
    if flt.current_only:
        clauses.append("n.valid_to IS NULL")
    if flt.visible_in is not None:
        if flt.anchor_id is not None:
            clauses.append("(n.session_id = ? OR n.user_id = ?)")
            params.extend([flt.visible_in, flt.anchor_id])
        else:
            clauses.append("n.session_id = ?")
            params.append(flt.visible_in)
    if flt.min_importance is not None:
        clauses.append("n.importance >= ?")
        params.append(flt.min_importance)
    return (" AND ".join(clauses) if clauses else "1"), params


class SQLiteNoteStore:
    """Notes in the SQLite log's own file, on its connection and lock."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store

    # ------------------------------------------------------------ notes

    def _attach_sources(self, notes: list[Note]) -> list[Note]:
        ids = [n.id for n in notes if n.id is not None]
        if not ids:
            return notes
        found: dict[int, list[int]] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows = self.store.read(
                f"SELECT note_id, message_id FROM note_sources WHERE note_id IN "
                f"({','.join('?' * len(chunk))}) ORDER BY message_id",
                chunk,
            )
            for note_id, message_id in rows:
                found.setdefault(int(note_id), []).append(int(message_id))
        for note in notes:
            note.source_ids = found.get(note.id or 0, [])
        return notes

    @staticmethod
    def _sources_exist(conn: sqlite3.Connection, ids: Sequence[int]) -> bool:
        wanted = sorted(set(ids))
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            n = conn.execute(f"SELECT COUNT(*) FROM messages WHERE id IN ({marks})", chunk).fetchone()[0]
            if int(n) != len(chunk):
                return False
        return True

    def add_note(self, note: Note, *, supersede: Sequence[int] = ()) -> Note | None:
        now = time.time()
        start = to_epoch(note.valid_from)

        def run(conn: sqlite3.Connection) -> Note | None:
            if note.source_ids and not self._sources_exist(conn, note.source_ids):
                return None  # forgotten while we were extracting: write nothing
            lineage = note.lineage_id
            previous: int | None = None
            for old_id in supersede:
                row = conn.execute(
                    "SELECT lineage_id, valid_to FROM notes WHERE id = ?", (old_id,)
                ).fetchone()
                if row is None:
                    continue
                lineage = lineage or row[0] or old_id
                previous = old_id
            cur = conn.execute(
                f"INSERT INTO notes ({_NOTE_COLS}) VALUES "
                "(NULL,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,NULL,?,?,?)",
                (
                    lineage, note.tenant_id, note.user_id, note.session_id, note.kind, note.slot,
                    note.value, note.polarity, note.text, note.author_id, note.author_name,
                    note.importance, note.confidence, _dumps(note.entities),
                    _dumps(note.metadata), note.origin, start,
                    None if note.valid_to is None else to_epoch(note.valid_to),
                    previous, note.seen_count, now, now,
                ),
            )
            new_id = cur.lastrowid
            assert new_id is not None
            if lineage is None:
                conn.execute("UPDATE notes SET lineage_id = id WHERE id = ?", (new_id,))
            for old_id in supersede:
                conn.execute(
                    "UPDATE notes SET valid_to = ?, superseded_by = ?, updated_at = ? "
                    "WHERE id = ? AND valid_to IS NULL",
                    (start, new_id, now, old_id),
                )
            session_of = note.session_id or ""
            for mid in note.source_ids:
                conn.execute(
                    "INSERT OR IGNORE INTO note_sources VALUES (?, ?, ?)", (new_id, mid, session_of)
                )
            return self._get(conn, new_id)

        return self.store.write(run)

    def _get(self, conn: sqlite3.Connection, note_id: int) -> Note | None:
        row = conn.execute(f"SELECT {_NOTE_COLS} FROM notes WHERE id = ?", (note_id,)).fetchone()
        if row is None:
            return None
        note = _row_to_note(row)
        note.source_ids = [
            int(r[0]) for r in conn.execute(
                "SELECT message_id FROM note_sources WHERE note_id = ? ORDER BY message_id", (note_id,)
            )
        ]
        return note

    def merge_note(
        self, note_id: int, source_ids: Sequence[int], session_id: str, importance: float
    ) -> Note | None:
        """Count one more sighting of a note: add its sources, keep the higher importance."""

        def run(conn: sqlite3.Connection) -> Note | None:
            if source_ids and not self._sources_exist(conn, source_ids):
                return None
            cur = conn.execute(
                "UPDATE notes SET seen_count = seen_count + 1, importance = MAX(importance, ?), "
                "updated_at = ? WHERE id = ?",
                (importance, time.time(), note_id),
            )
            if cur.rowcount == 0:
                return None
            for mid in source_ids:
                conn.execute(
                    "INSERT OR IGNORE INTO note_sources VALUES (?, ?, ?)", (note_id, mid, session_id)
                )
            return self._get(conn, note_id)

        return self.store.write(run)

    def get_note(self, note_id: int) -> Note | None:
        rows = self.store.read(f"SELECT {_NOTE_COLS} FROM notes WHERE id = ?", (note_id,))
        return self._attach_sources([_row_to_note(rows[0])])[0] if rows else None

    def list_notes(self, flt: NoteFilter, *, limit: int = 100, offset: int = 0) -> list[Note]:
        where, params = _where(flt)
        rows = self.store.read(
            f"SELECT {_NOTE_COLS} FROM notes n WHERE {where} "
            "ORDER BY n.importance DESC, n.valid_from DESC, n.id DESC LIMIT ? OFFSET ?",
            (*params, int(limit), int(offset)),
        )
        return self._attach_sources([_row_to_note(r) for r in rows])

    def search_notes(self, query: str, flt: NoteFilter, *, limit: int = 20) -> list[tuple[Note, float]]:
        match = fts5_query(query)
        if not match:
            return []
        where, params = _where(flt)
        cols = ", ".join("n." + c.strip() for c in _NOTE_COLS.split(","))
        rows = self.store.read(
            f"SELECT {cols}, bm25(notes_fts) AS rank FROM notes_fts "
            f"JOIN notes n ON n.id = notes_fts.rowid WHERE notes_fts MATCH ? AND {where} "
            "ORDER BY rank LIMIT ?",
            (match, *params, int(limit)),
        )
        notes = self._attach_sources([_row_to_note(r[:-1]) for r in rows])
        return [(n, -float(r[-1])) for n, r in zip(notes, rows, strict=True)]

    def current_in_slot(self, tenant_id: str, user_id: str | None, slots: Sequence[str]) -> list[Note]:
        if not slots:
            return []
        marks = ",".join("?" * len(slots))
        user_clause = "user_id IS ?" if user_id is None else "user_id = ?"
        rows = self.store.read(
            f"SELECT {_NOTE_COLS} FROM notes WHERE tenant_id = ? AND {user_clause} "
            f"AND slot IN ({marks}) AND valid_to IS NULL ORDER BY valid_from, id",
            (tenant_id, user_id, *slots),
        )
        return self._attach_sources([_row_to_note(r) for r in rows])

    def history(self, note_id: int) -> list[Note]:
        rows = self.store.read("SELECT lineage_id FROM notes WHERE id = ?", (note_id,))
        if not rows:
            raise NotFoundError(f"note {note_id} does not exist")
        lineage = rows[0][0] or note_id
        found = self.store.read(
            f"SELECT {_NOTE_COLS} FROM notes WHERE lineage_id = ? OR id = ? ORDER BY valid_from, id",
            (lineage, note_id),
        )
        return self._attach_sources([_row_to_note(r) for r in found])

    def expire_note(self, note_id: int, at: datetime) -> Note:
        def run(conn: sqlite3.Connection) -> int:
            return conn.execute(
                "UPDATE notes SET valid_to = ?, updated_at = ? WHERE id = ? AND valid_to IS NULL",
                (to_epoch(at), time.time(), note_id),
            ).rowcount

        self.store.write(run)
        found = self.get_note(note_id)
        if found is None:
            raise NotFoundError(f"note {note_id} does not exist")
        return found

    def reopen_note(self, note_id: int) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            row = conn.execute(
                "SELECT tenant_id, user_id, slot FROM notes WHERE id = ? AND valid_to IS NOT NULL "
                "AND superseded_by IS NULL", (note_id,),
            ).fetchone()
            if row is None:
                return False
            if row[2] is not None and conn.execute(
                "SELECT 1 FROM notes WHERE tenant_id = ? AND user_id IS ? AND slot = ? AND valid_to IS NULL",
                row,
            ).fetchone():
                return False  # something else is true in that slot now
            conn.execute(
                "UPDATE notes SET valid_to = NULL, updated_at = ? WHERE id = ?", (time.time(), note_id)
            )
            return True

        return self.store.write(run)

    def delete_notes(self, note_ids: Sequence[int]) -> int:
        ids = sorted({int(i) for i in note_ids})

        def run(conn: sqlite3.Connection) -> int:
            total = 0
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                total += conn.execute(
                    f"DELETE FROM notes WHERE id IN ({','.join('?' * len(chunk))})", chunk
                ).rowcount
            return total

        return self.store.write(run) if ids else 0

    def notes_from(
        self, *, message_ids: Sequence[int] | None = None, session_id: str | None = None
    ) -> list[int]:
        out: set[int] = set()
        if session_id is not None:
            rows = self.store.read(
                "SELECT note_id FROM note_sources WHERE session_id = ? "
                "UNION SELECT id FROM notes WHERE session_id = ?",
                (session_id, session_id),
            )
            out.update(int(r[0]) for r in rows)
        ids = [int(i) for i in message_ids or ()]
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows = self.store.read(
                f"SELECT note_id FROM note_sources WHERE message_id IN ({','.join('?' * len(chunk))})",
                chunk,
            )
            out.update(int(r[0]) for r in rows)
        return sorted(out)

    # ------------------------------------------------------------ facets

    def add_facets(self, facets: Sequence[Facet]) -> int:
        if not facets:
            return 0

        def run(conn: sqlite3.Connection) -> int:
            if not self._sources_exist(conn, [f.message_id for f in facets]):
                return 0
            n = 0
            for f in facets:
                n += conn.execute(
                    "INSERT OR IGNORE INTO message_facets VALUES (?, ?, ?, ?, ?)",
                    (f.message_id, f.session_id, f.kind, f.value, to_epoch(f.at)),
                ).rowcount
            return n

        return self.store.write(run)

    def list_facets(
        self, *, session_id: str | None = None, kind: str | None = None,
        value: str | None = None, limit: int = 200,
    ) -> list[Facet]:
        clauses, params = ["1"], []
        for col, v in (("session_id", session_id), ("kind", kind), ("value", value)):
            if v is not None:
                clauses.append(f"{col} = ?")
                params.append(v)
        rows = self.store.read(
            f"SELECT message_id, session_id, kind, value, at FROM message_facets "
            f"WHERE {' AND '.join(clauses)} ORDER BY at, message_id LIMIT ?",
            (*params, int(limit)),
        )
        return [Facet(int(r[0]), r[1], r[2], r[3], from_epoch(r[4])) for r in rows]

    # ------------------------------------------------------------ promotion progress

    def progress(self, session_id: str) -> int:
        rows = self.store.read(
            "SELECT last_message_id FROM promotion_progress WHERE session_id = ?", (session_id,)
        )
        return int(rows[0][0]) if rows else 0

    def set_progress(self, session_id: str, last_message_id: int) -> None:
        def run(conn: sqlite3.Connection) -> None:
            if not conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone():
                return  # forgotten meanwhile; nothing to remember about it
            conn.execute(
                "INSERT INTO promotion_progress VALUES (?, ?, ?) ON CONFLICT(session_id) DO UPDATE "
                "SET last_message_id = MAX(last_message_id, excluded.last_message_id), "
                "updated_at = excluded.updated_at",
                (session_id, int(last_message_id), time.time()),
            )

        self.store.write(run)

    def sessions_behind(self, *, limit: int = 1000) -> list[str]:
        rows = self.store.read(
            "SELECT s.id FROM sessions s LEFT JOIN promotion_progress p ON p.session_id = s.id "
            "WHERE EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id "
            "AND m.id > COALESCE(p.last_message_id, 0)) ORDER BY s.last_active_at DESC LIMIT ?",
            (int(limit),),
        )
        return [r[0] for r in rows]

    # ------------------------------------------------------------ archive tier

    def archive_session(self, session_id: str, reason: str | None = None) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            row = conn.execute("SELECT status FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                raise SessionNotFoundError(session_id)
            if row[0] == "archived":
                return False
            conn.execute(
                "INSERT OR REPLACE INTO session_archive VALUES (?, ?, ?, ?)",
                (session_id, time.time(), row[0], reason),
            )
            conn.execute(
                "UPDATE sessions SET status = 'archived', updated_at = ? WHERE id = ?",
                (time.time(), session_id),
            )
            return True

        return self.store.write(run)

    def unarchive_session(self, session_id: str) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            row = conn.execute("SELECT status FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                raise SessionNotFoundError(session_id)
            prev = conn.execute(
                "SELECT previous_status FROM session_archive WHERE session_id = ?", (session_id,)
            ).fetchone()
            conn.execute("DELETE FROM session_archive WHERE session_id = ?", (session_id,))
            if row[0] != "archived":
                return False
            status = prev[0] if prev and prev[0] != "archived" else "active"
            conn.execute(
                "UPDATE sessions SET status = ?, updated_at = ? WHERE id = ?",
                (status, time.time(), session_id),
            )
            return True

        return self.store.write(run)

    def archived_sessions(self, *, limit: int = 1000) -> list[tuple[str, datetime, str | None]]:
        rows = self.store.read(
            "SELECT s.id, COALESCE(a.archived_at, s.updated_at), a.reason FROM sessions s "
            "LEFT JOIN session_archive a ON a.session_id = s.id WHERE s.status = 'archived' "
            "ORDER BY 2 DESC LIMIT ?",
            (int(limit),),
        )
        return [(r[0], from_epoch(r[1]), r[2]) for r in rows]

    # ------------------------------------------------------------ audit log

    def append_audit(self, entry: AuditEntry) -> AuditEntry:
        def run(conn: sqlite3.Connection) -> int:
            cur = conn.execute(
                f"INSERT INTO audit_log ({_AUDIT_COLS}) VALUES (NULL,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    to_epoch(entry.at), entry.tenant_id, entry.session_id, entry.actor_id,
                    entry.actor_name, int(entry.is_anchor), entry.action, entry.command,
                    int(entry.allowed), entry.result, _dumps(entry.detail),
                ),
            )
            assert cur.lastrowid is not None
            return cur.lastrowid

        entry.id = self.store.write(run)
        return entry

    def list_audit(self, *, session_id: str | None = None, limit: int = 100) -> list[AuditEntry]:
        where, params = ("WHERE session_id = ?", [session_id]) if session_id is not None else ("", [])
        rows = self.store.read(
            f"SELECT {_AUDIT_COLS} FROM audit_log {where} ORDER BY id DESC LIMIT ?",
            (*params, int(limit)),
        )
        return [_row_to_audit(r) for r in rows]

    def redact_audit(self, session_id: str) -> int:
        """Drop the words of a forgotten conversation's commands; keep who, what, when, result."""

        def run(conn: sqlite3.Connection) -> int:
            return conn.execute(
                "UPDATE audit_log SET command = '[forgotten]' WHERE session_id = ? "
                "AND command IS NOT NULL AND command != '[forgotten]'",
                (session_id,),
            ).rowcount

        return self.store.write(run)

    # ------------------------------------------------------------ stats

    def stats(self) -> dict[str, Any]:
        row = self.store.read(
            "SELECT (SELECT COUNT(*) FROM notes WHERE valid_to IS NULL), "
            "(SELECT COUNT(*) FROM notes WHERE valid_to IS NOT NULL), "
            "(SELECT COUNT(*) FROM message_facets), "
            "(SELECT COUNT(*) FROM sessions WHERE status = 'archived'), "
            "(SELECT COUNT(*) FROM audit_log)"
        )[0]
        return {
            "notes": int(row[0]),
            "notes_superseded": int(row[1]),
            "facets": int(row[2]),
            "archived_sessions": int(row[3]),
            "audit_entries": int(row[4]),
        }


def note_store_for(store: object) -> NoteStore | None:
    """The note store that lives beside ``store``, or None when the backend has none yet."""
    if isinstance(store, SQLiteStore):
        return SQLiteNoteStore(store)
    if type(store).__name__ == "PostgresStore":  # psycopg is an extra: import only when used
        from memlane.notes.pg import PostgresNoteStore

        return PostgresNoteStore(store)  # type: ignore[arg-type]
    factory = getattr(store, "note_store", None)
    if callable(factory):
        found = factory()
        if isinstance(found, NoteStore):
            return found
    return None

