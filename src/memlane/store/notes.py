"""The notes repository, one implementation for SQLite and PostgreSQL.

Notes, facets, promotion progress, the archive tier and the audit log live in the
conversation log's own database (migration 4 of each backend), so one transaction can
check that a note's source messages still exist while it writes the note: a "forget"
that races the background promoter can never leave a note behind. On PostgreSQL those
rows are locked (``FOR KEY SHARE``) so a concurrent forget either runs first (and the
note is not written) or waits for it and then deletes it.

The SQL is the same on both backends but for what :class:`NotesDialect` names
(placeholders, time and JSON encoding, row locks, a few spellings); only keyword search
differs in substance (FTS5 vs ``tsvector``), so each backend's subclass
(``sqlite_notes.py``, ``pg_notes.py``) provides ``search_notes`` and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from memlane.errors import CorruptRecordError, NoteSupersededError, NotFoundError, SessionNotFoundError
from memlane.language import compound_text, detect_language, grouping_form
from memlane.models import utcnow
from memlane.notes.models import AuditEntry, Facet, Note
from memlane.ports import NoteFilter
from memlane.store.erase import redact_audit, reopen_note
from memlane.store.filters import Dialect, equal_fields

__all__ = ["NOTE_COLS", "N_COLS", "NotesDialect", "SqlNoteRepository", "restem_note_slots"]

NOTE_COLS = (
    "id, lineage_id, tenant_id, user_id, session_id, kind, slot, value, polarity, text, "
    "author_id, author_name, importance, confidence, entities, metadata, origin, valid_from, "
    "valid_to, supersedes, superseded_by, seen_count, created_at, updated_at"
)
#: NOTE_COLS qualified for a query that joins notes as ``n`` (each backend's keyword search).
N_COLS = ", ".join("n." + c.strip() for c in NOTE_COLS.split(","))
_INSERT_COLS = (
    "lineage_id, tenant_id, user_id, session_id, kind, slot, value, polarity, text, "
    "author_id, author_name, importance, confidence, entities, metadata, origin, valid_from, "
    "valid_to, supersedes, seen_count, created_at, updated_at, lang"
)
AUDIT_COLS = (
    "id, at, tenant_id, session_id, actor_id, actor_name, is_anchor, action, command, "
    "allowed, result, detail"
)
_AUDIT_INSERT_COLS = AUDIT_COLS.split(", ", 1)[1]
#: Ids per ``IN (...)`` list: SQLite limits a statement's parameters.
_CHUNK = 500


class _Store(Protocol):
    def read(self, query: str, params: Any = ()) -> list[Any]: ...
    def write(self, fn: Any) -> Any: ...


#: Slot prefixes whose words the rule extractor writes in their grouping form
#: (memlane.notes.extract.slot_key): "pref:katz", "fav:getrank", "decision:wir python nehm".
_GROUPED_SLOTS = frozenset({"pref", "fav", "attr", "allergy", "is", "decision", "commit"})


def restem_note_slots(conn: Any, mark: str) -> int:
    """Rewrite the slots of extracted notes written when slot words were English plural
    stripping ("pref:katzen", "fav:movie") in their grouping form now ("pref:katz",
    "fav:movi"), so a later statement about the same thing finds and supersedes them.
    Notes from the API or an LLM keep the slot they were given. How many were rewritten."""
    rows = conn.execute("SELECT id, slot, lang FROM notes WHERE slot IS NOT NULL AND origin = 'extracted'").fetchall()
    changed = []
    for row_id, slot, lang in rows:
        prefix, sep, words = slot.partition(":")
        if not sep or prefix not in _GROUPED_SLOTS:
            continue
        new = f"{prefix}:" + " ".join(grouping_form(w, "de" if lang == "de" else "en") for w in words.split())
        if new != slot:
            changed.append((new, row_id))
    if changed:
        conn.cursor().executemany(f"UPDATE notes SET slot = {mark} WHERE id = {mark}", changed)
    return len(changed)


@dataclass(frozen=True)
class NotesDialect:
    """What differs between the backends for the notes tables."""

    base: Dialect
    """The store's dialect: placeholders, times, JSON decoding, id lists."""
    dump_json: Callable[[Any], Any]
    """A JSON value as the parameter bound for a JSON column."""
    insert_id: Callable[[Any, str, Sequence[Any]], int]
    """Run an ``INSERT`` of one row on a connection; the new row's id."""
    null_safe_equals: str
    """``IS`` (SQLite) or ``IS NOT DISTINCT FROM`` (PostgreSQL): equal, NULL included."""
    greatest: str
    """The larger of two values: ``MAX`` (SQLite) or ``GREATEST`` (PostgreSQL)."""
    true: str
    """A condition that always holds."""
    for_update: str = ""
    """Row lock of a read that decides a write (nothing on SQLite: one writer at a time)."""
    for_key_share: str = ""
    """Lock that keeps read rows from being deleted until the transaction ends."""
    compound_parts: bool = False
    """Notes keep their German compounds' parts in a ``parts`` column (PostgreSQL: its
    tsvector is generated from the row; SQLite's index adds them itself)."""


class SqlNoteRepository:
    """Notes in the store's own database, on its connections and transactions."""

    def __init__(self, store: _Store, dialect: NotesDialect) -> None:
        self.store = store
        self._d = dialect
        self._m = dialect.base.mark

    # ------------------------------------------------------------ decoding

    def _json(self, value: Any, table: str, row_id: object, column: str, kind: type) -> Any:
        decoded = self._d.base.load_json(value, table, row_id, column)
        if decoded is None:
            return kind()
        if not isinstance(decoded, kind):
            raise CorruptRecordError(table, row_id, f"column {column} has the wrong JSON type")
        return decoded

    def _time(self, value: Any) -> datetime:
        return self._d.base.from_time(value)

    def _note(self, row: Sequence[Any]) -> Note:
        return Note(
            id=int(row[0]), lineage_id=row[1], tenant_id=row[2], user_id=row[3],
            session_id=row[4], kind=row[5], slot=row[6], value=row[7], polarity=int(row[8]),
            text=row[9], author_id=row[10], author_name=row[11], importance=float(row[12]),
            confidence=float(row[13]),
            entities=[str(e) for e in self._json(row[14], "notes", row[0], "entities", list)],
            metadata=self._json(row[15], "notes", row[0], "metadata", dict),
            origin=row[16], valid_from=self._time(row[17]),
            valid_to=None if row[18] is None else self._time(row[18]),
            supersedes=row[19], superseded_by=row[20], seen_count=int(row[21]),
            created_at=self._time(row[22]), updated_at=self._time(row[23]),
        )

    def _audit(self, row: Sequence[Any]) -> AuditEntry:
        return AuditEntry(
            id=int(row[0]), at=self._time(row[1]), tenant_id=row[2], session_id=row[3],
            actor_id=row[4], actor_name=row[5], is_anchor=bool(row[6]), action=row[7],
            command=row[8], allowed=bool(row[9]), result=row[10],
            detail=self._json(row[11], "audit_log", row[0], "detail", dict),
        )

    def _now(self) -> Any:
        return self._d.base.time(utcnow())

    def _where(self, flt: NoteFilter) -> tuple[str, list[Any]]:
        m = self._m
        clauses, params = equal_fields(self._d.base, flt, ("tenant_id", "user_id", "session_id", "kind"), "n.")
        if flt.current_only:
            clauses.append("n.valid_to IS NULL")
        if flt.visible_in is not None:
            if flt.anchor_id is not None:
                clauses.append(f"(n.session_id = {m} OR n.user_id = {m})")
                params.extend([flt.visible_in, flt.anchor_id])
            else:
                clauses.append(f"n.session_id = {m}")
                params.append(flt.visible_in)
        if flt.min_importance is not None:
            clauses.append(f"n.importance >= {m}")
            params.append(flt.min_importance)
        return (" AND ".join(clauses) if clauses else self._d.true), params

    def _chunks(self, ids: Sequence[int]) -> list[list[int]]:
        return [list(ids[i : i + _CHUNK]) for i in range(0, len(ids), _CHUNK)]

    # ------------------------------------------------------------ notes

    def _attach_sources(self, notes: list[Note]) -> list[Note]:
        ids = [n.id for n in notes if n.id is not None]
        found: dict[int, list[int]] = {}
        for chunk in self._chunks(ids):
            clause, params = self._d.base.in_list("note_id", chunk)
            rows = self.store.read(
                f"SELECT note_id, message_id FROM note_sources WHERE {clause} ORDER BY message_id", params
            )
            for note_id, message_id in rows:
                found.setdefault(int(note_id), []).append(int(message_id))
        for note in notes:
            note.source_ids = found.get(note.id or 0, [])
        return notes

    def _sources_exist(self, conn: Any, ids: Sequence[int]) -> bool:
        for chunk in self._chunks(sorted({int(i) for i in ids})):
            clause, params = self._d.base.in_list("id", chunk)
            rows = conn.execute(f"SELECT id FROM messages WHERE {clause}{self._d.for_key_share}", params).fetchall()
            if len(rows) != len(chunk):
                return False
        return True

    def _get(self, conn: Any, note_id: int) -> Note | None:
        m = self._m
        row = conn.execute(f"SELECT {NOTE_COLS} FROM notes WHERE id = {m}", (note_id,)).fetchone()
        if row is None:
            return None
        note = self._note(row)
        note.source_ids = [int(r[0]) for r in conn.execute(
            f"SELECT message_id FROM note_sources WHERE note_id = {m} ORDER BY message_id", (note_id,)
        ).fetchall()]
        return note

    def _add_sources(self, conn: Any, note_id: int, message_ids: Sequence[int], session_id: str) -> None:
        m = self._m
        for mid in message_ids:
            conn.execute(
                f"INSERT INTO note_sources VALUES ({m}, {m}, {m}) ON CONFLICT DO NOTHING",
                (note_id, mid, session_id),
            )

    def add_note(self, note: Note, *, supersede: Sequence[int] = (), only_current: bool = False) -> Note | None:
        m = self._m
        d = self._d
        start = d.base.time(note.valid_from)

        def run(conn: Any) -> Note | None:
            if note.source_ids and not self._sources_exist(conn, note.source_ids):
                return None  # forgotten while we were extracting: write nothing
            lineage = note.lineage_id
            previous: int | None = None
            for old_id in supersede:
                row = conn.execute(f"SELECT lineage_id FROM notes WHERE id = {m}", (old_id,)).fetchone()
                if row is None:
                    continue
                lineage = lineage or row[0] or old_id
                previous = old_id
            now = self._now()
            lang = detect_language(note.text)
            values: tuple[Any, ...] = (
                lineage, note.tenant_id, note.user_id, note.session_id, note.kind, note.slot,
                note.value, note.polarity, note.text, note.author_id, note.author_name,
                note.importance, note.confidence, d.dump_json(note.entities),
                d.dump_json(note.metadata), note.origin, start,
                None if note.valid_to is None else d.base.time(note.valid_to),
                previous, note.seen_count, now, now, lang,
            )
            columns = _INSERT_COLS
            if d.compound_parts:
                columns += ", parts"
                values += (compound_text(note.text, lang) or None,)
            new_id = d.insert_id(
                conn, f"INSERT INTO notes ({columns}) VALUES ({', '.join([m] * len(values))})", values,
            )
            if lineage is None:
                conn.execute(f"UPDATE notes SET lineage_id = id WHERE id = {m}", (new_id,))
            for old_id in supersede:
                # compare-and-set: closes the old version only while it is still current. On
                # PostgreSQL a second writer blocks on the row lock and then re-reads the row
                # (0 rows); SQLite runs writers one at a time. Raising rolls back the insert.
                closed = conn.execute(
                    f"UPDATE notes SET valid_to = {m}, superseded_by = {m}, updated_at = {m} "
                    f"WHERE id = {m} AND valid_to IS NULL",
                    (start, new_id, now, old_id),
                ).rowcount
                if only_current and closed == 0:
                    row = conn.execute(f"SELECT superseded_by FROM notes WHERE id = {m}", (old_id,)).fetchone()
                    raise NoteSupersededError(old_id, None if row is None or row[0] is None else int(row[0]))
            self._add_sources(conn, new_id, note.source_ids, note.session_id or "")
            return self._get(conn, new_id)

        result: Note | None = self.store.write(run)
        return result

    def merge_note(
        self, note_id: int, source_ids: Sequence[int], session_id: str, importance: float
    ) -> Note | None:
        """Count one more sighting of a note: add its sources, keep the higher importance."""
        m = self._m

        def run(conn: Any) -> Note | None:
            if source_ids and not self._sources_exist(conn, source_ids):
                return None
            cur = conn.execute(
                f"UPDATE notes SET seen_count = seen_count + 1, importance = {self._d.greatest}(importance, {m}), "
                f"updated_at = {m} WHERE id = {m}",
                (importance, self._now(), note_id),
            )
            if cur.rowcount == 0:
                return None
            self._add_sources(conn, note_id, source_ids, session_id)
            return self._get(conn, note_id)

        result: Note | None = self.store.write(run)
        return result

    def get_note(self, note_id: int) -> Note | None:
        rows = self.store.read(f"SELECT {NOTE_COLS} FROM notes WHERE id = {self._m}", (note_id,))
        return self._attach_sources([self._note(rows[0])])[0] if rows else None

    def get_notes(self, note_ids: Sequence[int]) -> list[Note]:
        rows: list[Any] = []
        for chunk in self._chunks(sorted({int(i) for i in note_ids})):
            clause, params = self._d.base.in_list("id", chunk)
            rows += self.store.read(f"SELECT {NOTE_COLS} FROM notes WHERE {clause} ORDER BY id", params)
        return self._attach_sources([self._note(r) for r in rows])

    def list_notes(self, flt: NoteFilter, *, limit: int = 100, offset: int = 0) -> list[Note]:
        where, params = self._where(flt)
        rows = self.store.read(
            f"SELECT {NOTE_COLS} FROM notes n WHERE {where} "
            f"ORDER BY n.importance DESC, n.valid_from DESC, n.id DESC LIMIT {self._m} OFFSET {self._m}",
            (*params, int(limit), int(offset)),
        )
        return self._attach_sources([self._note(r) for r in rows])

    def search_notes(self, query: str, flt: NoteFilter, *, limit: int = 20) -> list[tuple[Note, float]]:
        raise NotImplementedError  # full-text search is each backend's own (FTS5, tsvector)

    def _ranked(self, rows: list[Any], score: Callable[[float], float]) -> list[tuple[Note, float]]:
        """Notes of rows ending in a rank column, each with ``score(rank)``."""
        notes = self._attach_sources([self._note(r[:-1]) for r in rows])
        return [(n, score(float(r[-1]))) for n, r in zip(notes, rows, strict=True)]

    def current_in_slot(self, tenant_id: str, user_id: str | None, slots: Sequence[str]) -> list[Note]:
        if not slots:
            return []
        m = self._m
        clause, slot_params = self._d.base.in_list("slot", list(slots))
        rows = self.store.read(
            f"SELECT {NOTE_COLS} FROM notes WHERE tenant_id = {m} AND user_id {self._d.null_safe_equals} {m} "
            f"AND {clause} AND valid_to IS NULL ORDER BY valid_from, id",
            (tenant_id, user_id, *slot_params),
        )
        return self._attach_sources([self._note(r) for r in rows])

    def history(self, note_id: int) -> list[Note]:
        m = self._m
        rows = self.store.read(f"SELECT lineage_id FROM notes WHERE id = {m}", (note_id,))
        if not rows:
            raise NotFoundError(f"note {note_id} does not exist")
        lineage = rows[0][0] or note_id
        found = self.store.read(
            f"SELECT {NOTE_COLS} FROM notes WHERE lineage_id = {m} OR id = {m} ORDER BY valid_from, id",
            (lineage, note_id),
        )
        return self._attach_sources([self._note(r) for r in found])

    def expire_note(self, note_id: int, at: datetime) -> Note:
        m = self._m
        self.store.write(lambda conn: conn.execute(
            f"UPDATE notes SET valid_to = {m}, updated_at = {m} WHERE id = {m} AND valid_to IS NULL",
            (self._d.base.time(at), self._now(), note_id),
        ).rowcount)
        found = self.get_note(note_id)
        if found is None:
            raise NotFoundError(f"note {note_id} does not exist")
        return found

    def reopen_note(self, note_id: int) -> bool:
        # the erase routine's own step (a forgotten successor reopens its predecessor)
        result: bool = self.store.write(lambda conn: reopen_note(conn, self._d.base, note_id, utcnow()))
        return result

    def delete_notes(self, note_ids: Sequence[int]) -> int:
        ids = sorted({int(i) for i in note_ids})

        def run(conn: Any) -> int:
            total = 0
            for chunk in self._chunks(ids):
                clause, params = self._d.base.in_list("id", chunk)
                total += conn.execute(f"DELETE FROM notes WHERE {clause}", params).rowcount
            return total

        result: int = self.store.write(run) if ids else 0
        return result

    def notes_from(
        self, *, message_ids: Sequence[int] | None = None, session_id: str | None = None
    ) -> list[int]:
        m = self._m
        out: set[int] = set()
        if session_id is not None:
            rows = self.store.read(
                f"SELECT note_id FROM note_sources WHERE session_id = {m} "
                f"UNION SELECT id FROM notes WHERE session_id = {m}",
                (session_id, session_id),
            )
            out.update(int(r[0]) for r in rows)
        for chunk in self._chunks([int(i) for i in message_ids or ()]):
            clause, params = self._d.base.in_list("message_id", chunk)
            rows = self.store.read(f"SELECT note_id FROM note_sources WHERE {clause}", params)
            out.update(int(r[0]) for r in rows)
        return sorted(out)

    # ------------------------------------------------------------ facets

    def add_facets(self, facets: Sequence[Facet]) -> int:
        if not facets:
            return 0
        m = self._m

        def run(conn: Any) -> int:
            if not self._sources_exist(conn, [f.message_id for f in facets]):
                return 0
            n = 0
            for f in facets:
                n += conn.execute(
                    f"INSERT INTO message_facets VALUES ({m}, {m}, {m}, {m}, {m}) ON CONFLICT DO NOTHING",
                    (f.message_id, f.session_id, f.kind, f.value, self._d.base.time(f.at)),
                ).rowcount
            return n

        result: int = self.store.write(run)
        return result

    def list_facets(
        self, *, session_id: str | None = None, kind: str | None = None,
        value: str | None = None, limit: int = 200,
    ) -> list[Facet]:
        m = self._m
        clauses, params = [self._d.true], []
        for col, v in (("session_id", session_id), ("kind", kind), ("value", value)):
            if v is not None:
                clauses.append(f"{col} = {m}")
                params.append(v)
        rows = self.store.read(
            f"SELECT message_id, session_id, kind, value, at FROM message_facets "
            f"WHERE {' AND '.join(clauses)} ORDER BY at, message_id LIMIT {m}",
            (*params, int(limit)),
        )
        return [Facet(int(r[0]), r[1], r[2], r[3], self._time(r[4])) for r in rows]

    # ------------------------------------------------------------ promotion progress

    def progress(self, session_id: str) -> int:
        rows = self.store.read(
            f"SELECT last_message_id FROM promotion_progress WHERE session_id = {self._m}", (session_id,)
        )
        return int(rows[0][0]) if rows else 0

    def set_progress(self, session_id: str, last_message_id: int) -> None:
        m = self._m

        def run(conn: Any) -> None:
            if conn.execute(f"SELECT 1 FROM sessions WHERE id = {m}", (session_id,)).fetchone() is None:
                return  # forgotten meanwhile; nothing to remember about it
            conn.execute(
                f"INSERT INTO promotion_progress VALUES ({m}, {m}, {m}) ON CONFLICT (session_id) DO UPDATE "
                f"SET last_message_id = {self._d.greatest}(promotion_progress.last_message_id, "
                "excluded.last_message_id), updated_at = excluded.updated_at",
                (session_id, int(last_message_id), self._now()),
            )

        self.store.write(run)

    def sessions_behind(self, *, limit: int = 1000) -> list[str]:
        rows = self.store.read(
            "SELECT s.id FROM sessions s LEFT JOIN promotion_progress p ON p.session_id = s.id "
            "WHERE EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id "
            f"AND m.id > COALESCE(p.last_message_id, 0)) ORDER BY s.last_active_at DESC LIMIT {self._m}",
            (int(limit),),
        )
        return [r[0] for r in rows]

    # ------------------------------------------------------------ archive tier

    def _status(self, conn: Any, session_id: str) -> str:
        row = conn.execute(
            f"SELECT status FROM sessions WHERE id = {self._m}{self._d.for_update}", (session_id,)
        ).fetchone()
        if row is None:
            raise SessionNotFoundError(session_id)
        return str(row[0])

    def archive_session(self, session_id: str, reason: str | None = None) -> bool:
        m = self._m

        def run(conn: Any) -> bool:
            status = self._status(conn, session_id)
            if status == "archived":
                return False
            now = self._now()
            conn.execute(
                f"INSERT INTO session_archive VALUES ({m}, {m}, {m}, {m}) ON CONFLICT (session_id) DO UPDATE "
                "SET archived_at = excluded.archived_at, previous_status = excluded.previous_status, "
                "reason = excluded.reason",
                (session_id, now, status, reason),
            )
            conn.execute(f"UPDATE sessions SET status = 'archived', updated_at = {m} WHERE id = {m}", (now, session_id))
            return True

        result: bool = self.store.write(run)
        return result

    def unarchive_session(self, session_id: str) -> bool:
        m = self._m

        def run(conn: Any) -> bool:
            status = self._status(conn, session_id)
            prev = conn.execute(
                f"SELECT previous_status FROM session_archive WHERE session_id = {m}", (session_id,)
            ).fetchone()
            conn.execute(f"DELETE FROM session_archive WHERE session_id = {m}", (session_id,))
            if status != "archived":
                return False
            restored = prev[0] if prev and prev[0] != "archived" else "active"
            conn.execute(
                f"UPDATE sessions SET status = {m}, updated_at = {m} WHERE id = {m}",
                (restored, self._now(), session_id),
            )
            return True

        result: bool = self.store.write(run)
        return result

    def archived_sessions(self, *, limit: int = 1000) -> list[tuple[str, datetime, str | None]]:
        rows = self.store.read(
            "SELECT s.id, COALESCE(a.archived_at, s.updated_at), a.reason FROM sessions s "
            "LEFT JOIN session_archive a ON a.session_id = s.id WHERE s.status = 'archived' "
            f"ORDER BY 2 DESC LIMIT {self._m}",
            (int(limit),),
        )
        return [(r[0], self._time(r[1]), r[2]) for r in rows]

    # ------------------------------------------------------------ audit log

    def append_audit(self, entry: AuditEntry) -> AuditEntry:
        m = self._m
        d = self._d
        entry.id = self.store.write(lambda conn: d.insert_id(
            conn,
            f"INSERT INTO audit_log ({_AUDIT_INSERT_COLS}) VALUES ({', '.join([m] * 11)})",
            (
                d.base.time(entry.at), entry.tenant_id, entry.session_id, entry.actor_id,
                entry.actor_name, bool(entry.is_anchor), entry.action, entry.command,
                bool(entry.allowed), entry.result, d.dump_json(entry.detail),
            ),
        ))
        return entry

    def list_audit(self, *, session_id: str | None = None, tenant_id: str | None = None,
                   limit: int = 100) -> list[AuditEntry]:
        m = self._m
        # Filtered in the query, before the limit: a tenant gets its newest ``limit`` entries.
        wanted = {"session_id": session_id, "tenant_id": tenant_id}
        clauses = [f"{col} = {m}" for col, value in wanted.items() if value is not None]
        where = "WHERE " + " AND ".join(clauses) if clauses else ""
        params = [value for value in wanted.values() if value is not None]
        rows = self.store.read(
            f"SELECT {AUDIT_COLS} FROM audit_log {where} ORDER BY id DESC LIMIT {m}", (*params, int(limit))
        )
        return [self._audit(r) for r in rows]

    def redact_audit(self, session_id: str) -> int:
        """Drop the words of a forgotten conversation's commands; keep who, what, when, result
        (the same redaction the erase routine applies)."""
        result: int = self.store.write(lambda conn: redact_audit(conn, self._d.base, [session_id]))
        return result

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
            "notes": int(row[0]), "notes_superseded": int(row[1]), "facets": int(row[2]),
            "archived_sessions": int(row[3]), "audit_entries": int(row[4]),
        }
