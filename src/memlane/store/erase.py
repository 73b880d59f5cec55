"""The one erase routine's SQL: rows and everything derived from them, in one transaction.

Every deletion path of memlane (a session, single messages, notes, an import that
replaces a session, prune, maintain, the Anchor's "forget", REST, MCP, CLI) ends here,
through :meth:`Store.erase`. Both stores run the same statements (only the placeholder
and list syntax differ, see :class:`~memlane.store.filters.Dialect`):

- messages go with their keyword-index entries (trigger), vectors, facets, turns and
  tool-call ids (foreign keys ``ON DELETE CASCADE``);
- a session goes with its derived rows (summaries, state), promotion watermark and
  archive entry; the derived rows of a session that loses single messages go too, since
  they may quote them and are rebuilt from the log on the next read;
- notes learned from the erased messages or sessions go (unless retention asked to keep
  them), and a version they superseded becomes current again;
- audit entries of an erased session keep ids, action, result and time, not the words.

What the SQLite store adds around this (zeroed pages, merged full-text segments, a
truncated WAL, the erasure log) lives in :mod:`memlane.store.sqlite`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from memlane.store.filters import Dialect
from memlane.store.rows import BUMP_VERSION

__all__ = ["EraseCounts", "EraseRequest", "ErasureLog", "erase_rows", "redact_audit", "reopen_note"]

_CHUNK = 500  # ids per statement: far below every driver's parameter limit


@dataclass(frozen=True, slots=True)
class EraseRequest:
    """What to erase. Ids that do not exist are ignored (erasing twice is harmless)."""

    session_ids: tuple[str, ...] = ()
    message_ids: tuple[int, ...] = ()
    note_ids: tuple[int, ...] = ()
    #: Notes learned from the erased messages/sessions go too (retention keeps them).
    with_notes: bool = True
    #: Leave rows made after this time alone: a replayed erasure (restore of an older
    #: backup) must not hit ids the database handed out again since.
    created_before: datetime | None = None

    @property
    def empty(self) -> bool:
        return not (self.session_ids or self.message_ids or self.note_ids)


@dataclass(slots=True)
class EraseCounts:
    sessions: int = 0
    messages: int = 0
    notes: int = 0
    note_ids: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, int]:
        return {"sessions": self.sessions, "messages": self.messages, "notes": self.notes}


class _Cursor(Protocol):
    rowcount: int

    def fetchall(self) -> list[Any]: ...


class _Conn(Protocol):
    def execute(self, sql: Any, params: Any = ..., /) -> Any: ...


def _chunks(values: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(values), _CHUNK):
        yield values[start : start + _CHUNK]


def _select(conn: _Conn, d: Dialect, sql: str, column: str, values: Sequence[Any],
            extra: tuple[str, list[Any]] = ("", [])) -> list[Any]:
    """Rows of ``sql`` (ending in WHERE) with ``column`` in ``values``, chunked."""
    out: list[Any] = []
    for chunk in _chunks(values):
        clause, params = d.in_list(column, chunk)
        out += conn.execute(f"{sql} {clause}{extra[0]}", [*params, *extra[1]]).fetchall()
    return out


def _execute(conn: _Conn, d: Dialect, sql: str, column: str, values: Sequence[Any]) -> int:
    total = 0
    for chunk in _chunks(values):
        clause, params = d.in_list(column, chunk)
        total += int(conn.execute(f"{sql} {clause}", params).rowcount)
    return total


def erase_rows(conn: _Conn, d: Dialect, req: EraseRequest, now: datetime) -> EraseCounts:
    """Run the erase inside the caller's transaction; returns what went."""
    m = d.mark
    age = ("", []) if req.created_before is None else (
        f" AND created_at <= {m}", [d.time(req.created_before)])
    sessions = sorted({str(r[0]) for r in _select(
        conn, d, "SELECT id FROM sessions WHERE", "id", sorted(set(req.session_ids)), age)})
    message_rows = _select(conn, d, "SELECT id, session_id FROM messages WHERE", "id",
                           sorted({int(i) for i in req.message_ids}), age)
    gone = set(sessions)
    messages = sorted(int(r[0]) for r in message_rows if r[1] not in gone)
    touched = sorted({str(r[1]) for r in message_rows if r[1] not in gone})

    notes = {int(r[0]) for r in _select(conn, d, "SELECT id FROM notes WHERE", "id",
                                        sorted({int(i) for i in req.note_ids}), age)}
    if req.with_notes:
        learned = [int(r[0]) for r in _select(
            conn, d, "SELECT note_id FROM note_sources WHERE", "session_id", sessions)]
        learned += [int(r[0]) for r in _select(
            conn, d, "SELECT note_id FROM note_sources WHERE", "message_id", messages)]
        learned += [int(r[0]) for r in _select(
            conn, d, "SELECT id FROM notes WHERE", "session_id", sessions)]
        notes |= {int(r[0]) for r in _select(
            conn, d, "SELECT id FROM notes WHERE", "id", sorted(set(learned)), age)}
    doomed = sorted(notes)
    # A forgotten change of mind must not leave the person with no opinion at all: the
    # version it superseded (learned elsewhere) is true again, as if it was never said.
    reopen = sorted({int(r[0]) for r in _select(
        conn, d, "SELECT supersedes FROM notes WHERE valid_to IS NULL AND supersedes IS NOT NULL AND",
        "id", doomed)} - notes)

    counts = EraseCounts(note_ids=doomed)
    counts.notes = _execute(conn, d, "DELETE FROM notes WHERE", "id", doomed)
    for chunk in _chunks(messages):
        clause, params = d.in_list("id", chunk)
        per_session = conn.execute(
            f"SELECT session_id, COUNT(*) FROM messages WHERE {clause} GROUP BY session_id", params
        ).fetchall()
        counts.messages += int(conn.execute(f"DELETE FROM messages WHERE {clause}", params).rowcount)
        for sid, n in sorted(per_session):  # one lock order everywhere: no deadlocks
            conn.execute(f"UPDATE sessions SET message_count = message_count - {m}, {BUMP_VERSION} WHERE id = {m}",
                         (int(n), sid))
    # Summaries and state may quote what went; they are rebuilt from the log.
    _execute(conn, d, "DELETE FROM derived WHERE", "session_id", touched)
    for chunk in _chunks(sessions):
        clause, params = d.in_list("session_id", chunk)
        counts.messages += int(conn.execute(
            f"SELECT COUNT(*) FROM messages WHERE {clause}", params).fetchall()[0][0])
    redact_audit(conn, d, sessions)
    counts.sessions = _execute(conn, d, "DELETE FROM sessions WHERE", "id", sessions)
    for nid in reopen:
        reopen_note(conn, d, nid, now)
    return counts


def redact_audit(conn: _Conn, d: Dialect, session_ids: Sequence[str]) -> int:
    """Who, what, when and the result of these sessions' audit entries stay; the words
    said do not. Returns how many entries were redacted (0 when done before)."""
    return _execute(
        conn, d,
        "UPDATE audit_log SET command = '[forgotten]', actor_name = NULL, detail = '{}' "
        "WHERE command IS NOT NULL AND command <> '[forgotten]' AND",
        "session_id", session_ids,
    )


def reopen_note(conn: _Conn, d: Dialect, note_id: int, now: datetime) -> bool:
    """Make a superseded version current again (its successor went); False when it is
    current already, still superseded, or something else is true in its slot now."""
    m = d.mark
    rows = conn.execute(
        f"SELECT tenant_id, user_id, slot FROM notes WHERE id = {m} AND valid_to IS NOT NULL "
        "AND superseded_by IS NULL", (note_id,),
    ).fetchall()
    if not rows:
        return False
    tenant, user, slot = rows[0]
    if slot is not None and conn.execute(
        f"SELECT 1 FROM notes WHERE tenant_id = {m} AND COALESCE(user_id, '') = {m} AND slot = {m} "
        "AND valid_to IS NULL", (tenant, user or "", slot),
    ).fetchall():
        return False  # something else is true in that slot now
    conn.execute(f"UPDATE notes SET valid_to = NULL, updated_at = {m} WHERE id = {m}",
                 (d.time(now), note_id))
    return True


@dataclass(frozen=True, slots=True)
class ErasureEntry:
    """One line of the erasure log: ids and time, never content."""

    at: float
    session_ids: list[str]
    message_ids: list[int]
    note_ids: list[int]
    with_notes: bool

    def request(self) -> EraseRequest:
        return EraseRequest(
            session_ids=tuple(self.session_ids), message_ids=tuple(self.message_ids),
            note_ids=tuple(self.note_ids), with_notes=self.with_notes,
            created_before=datetime.fromtimestamp(self.at, UTC),
        )


class ErasureLog:
    """``<db>-erasures``: what was erased and when, so a restored backup can be erased again.

    Append-only JSON lines, fsynced: a restore of a backup taken before an erasure
    replays it (:func:`memlane.rooms.backup.restore_database`), so restoring never brings
    back what was forgotten after the backup was taken.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def append(self, req: EraseRequest, counts: EraseCounts, at: datetime) -> None:
        entry = ErasureEntry(
            at=at.timestamp(), session_ids=sorted(set(req.session_ids)),
            message_ids=sorted({int(i) for i in req.message_ids}),
            note_ids=sorted(set(counts.note_ids) | {int(i) for i in req.note_ids}),
            with_notes=req.with_notes,
        )
        line = json.dumps(asdict(entry), separators=(",", ":")) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)

    def entries(self) -> list[ErasureEntry]:
        if not self.path.exists():
            return []
        out: list[ErasureEntry] = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                raw = json.loads(line)
                out.append(ErasureEntry(
                    at=float(raw["at"]), session_ids=[str(s) for s in raw["session_ids"]],
                    message_ids=[int(i) for i in raw["message_ids"]],
                    note_ids=[int(i) for i in raw["note_ids"]], with_notes=bool(raw["with_notes"]),
                ))
            except (ValueError, KeyError, TypeError):
                continue  # a line torn by a crash mid-append: the erase it logged had not returned
        return out
