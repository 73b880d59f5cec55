"""Read methods whose SQL is the same on SQLite and PostgreSQL but for the dialect.

Both stores inherit them, so a listing, a page of history or a turn means the same
on either backend; each store sets ``_dialect`` (filters.py) and provides ``read``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import date, datetime, timedelta
from typing import Any, ClassVar

from memlane.models import JSON, Message, MessageFilter, Session, SessionFilter, Turn
from memlane.store import filters
from memlane.store.rows import (
    SESSION_COLS,
    TURN_COLS,
    decode_message,
    decode_session,
    decode_turns,
    turn_message_ids,
)

#: Day 0 of the stores' day numbers (UTC days since the Unix epoch).
_EPOCH = date(1970, 1, 1)
#: Every character str.strip() removes: a message of only these has no text.
_WHITESPACE = "".join(c for c in map(chr, range(0x3001)) if c.isspace())

#: The distinct author names by a loose index scan over messages_by_author: each step seeks
#: the next name after the last, so a store with k names costs k index seeks, not a read of
#: every message (neither SQLite nor PostgreSQL skips through an index for DISTINCT itself).
AUTHOR_NAMES = """
WITH RECURSIVE names(name) AS (
    SELECT MIN(author_name) FROM messages WHERE author_name IS NOT NULL
    UNION ALL
    SELECT (SELECT MIN(author_name) FROM messages WHERE author_name IS NOT NULL AND author_name > names.name)
    FROM names WHERE names.name IS NOT NULL
)
SELECT name FROM names WHERE name IS NOT NULL
"""


class SqlReads:
    _dialect: ClassVar[filters.Dialect]
    # breaks ties between turns created in the same instant, in insertion order
    _turn_tiebreak: ClassVar[str]

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        raise NotImplementedError  # each store runs the query its own way

    def get_messages(self, ids: Sequence[int], flt: MessageFilter | None = None) -> list[Message]:
        raise NotImplementedError  # batching differs: IN (...) chunks vs one ANY(array)

    def _session(self, row: Sequence[Any]) -> Session:
        return decode_session(row, self._dialect.load_json, self._dialect.from_time)

    def _message(self, row: Sequence[Any]) -> Message:
        return decode_message(row, self._dialect.load_json, self._dialect.from_time)

    # ------------------------------------------------------------ sessions

    def get_session(self, session_id: str) -> Session | None:
        mark = self._dialect.mark
        rows = self.read(f"SELECT {SESSION_COLS} FROM sessions WHERE id = {mark}", (session_id,))
        return self._session(rows[0]) if rows else None

    def list_sessions(
        self, flt: SessionFilter, *, limit: int = 50, offset: int = 0
    ) -> list[Session]:
        mark = self._dialect.mark
        where, params = filters.session_where(self._dialect, flt)
        rows = self.read(
            f"SELECT {SESSION_COLS} FROM sessions {where} "
            f"ORDER BY last_active_at DESC, id LIMIT {mark} OFFSET {mark}",
            (*params, int(limit), int(offset)),
        )
        return [self._session(r) for r in rows]

    def sessions_inactive_before(self, cutoff: datetime, *, limit: int = 10_000) -> list[str]:
        mark = self._dialect.mark
        rows = self.read(
            f"SELECT id FROM sessions WHERE last_active_at < {mark} ORDER BY last_active_at LIMIT {mark}",
            (self._dialect.time(cutoff), limit),
        )
        return [r[0] for r in rows]

    def count_with_text(self, roles: Sequence[str]) -> int:
        """Messages with text in one of ``roles`` (what the vector index should hold)."""
        marks = ",".join([self._dialect.mark] * len(roles))
        rows = self.read(f"SELECT COUNT(*) FROM messages WHERE role IN ({marks}) AND content != ''", tuple(roles))
        return int(rows[0][0])

    # ------------------------------------------------------------ messages

    def recent_messages(
        self,
        session_id: str,
        limit: int,
        *,
        before_id: int | None = None,
        include_hidden: bool = False,
    ) -> list[Message]:
        query, params = filters.recent_messages_query(
            self._dialect, session_id, limit, before_id=before_id, include_hidden=include_hidden
        )
        return [self._message(r) for r in self.read(query, params)]

    def message_ids(
        self, session_id: str, *, offset: int = 0, limit: int | None = None, include_hidden: bool = False
    ) -> list[int]:
        """Ids of a session's messages, oldest first, from position ``offset``: the
        n-th message without reading the ones before it (the index walks ids only)."""
        m = self._dialect.mark
        hidden = "" if include_hidden else " AND " + self._dialect.is_false.format("hidden")
        rows = self.read(
            f"SELECT id FROM messages WHERE session_id = {m}{hidden} ORDER BY id LIMIT {m} OFFSET {m}",
            (session_id, 2**62 if limit is None else int(limit), int(offset)),
        )
        return [int(r[0]) for r in rows]

    def iter_messages(
        self,
        session_id: str | None = None,
        *,
        after_id: int = 0,
        batch: int = 500,
        include_hidden: bool = True,
    ) -> Iterator[Message]:
        return filters.iter_messages(
            self._dialect, self.read, self._message, session_id,
            after_id=after_id, batch=batch, include_hidden=include_hidden,
        )

    # ------------------------------------------------------------ per-day counts (activity.py)

    def messages_per_day(self, flt: MessageFilter) -> list[tuple[date, str, int]]:
        d = self._dialect
        where, params = filters.message_where(d, flt)
        day = d.day_number.format("m.created_at")
        rows = self.read(
            f"SELECT {day} AS day, m.role, count(*) FROM messages m JOIN sessions s ON s.id = m.session_id "
            f"WHERE 1 = 1 {where} GROUP BY {day}, m.role ORDER BY 1, 2",
            params,
        )
        return [(_EPOCH + timedelta(days=int(r[0])), str(r[1]), int(r[2])) for r in rows]

    def sessions_per_day(self, flt: SessionFilter) -> list[tuple[date, int]]:
        d = self._dialect
        where, params = filters.session_where(d, flt)
        day = d.day_number.format("created_at")
        rows = self.read(f"SELECT {day} AS day, count(*) FROM sessions {where} GROUP BY {day} ORDER BY 1", params)
        return [(_EPOCH + timedelta(days=int(r[0])), int(r[1])) for r in rows]

    # ------------------------------------------------------------ languages (activity.py)

    def messages_per_language(self, flt: MessageFilter) -> list[tuple[str, str | None, int]]:
        d = self._dialect
        where, params = filters.message_where(d, flt)
        rows = self.read(
            "SELECT m.session_id, m.lang, count(*) FROM messages m JOIN sessions s ON s.id = m.session_id "
            f"WHERE 1 = 1 {where} GROUP BY m.session_id, m.lang ORDER BY 1, 2",
            params,
        )
        return [(str(r[0]), None if r[1] is None else str(r[1]), int(r[2])) for r in rows]

    def message_languages(self, session_id: str) -> list[tuple[int, str | None]]:
        rows = self.read(
            f"SELECT id, lang FROM messages WHERE session_id = {self._dialect.mark} ORDER BY id", (session_id,)
        )
        return [(int(r[0]), None if r[1] is None else str(r[1])) for r in rows]

    def count_messages(self, session_id: str | None = None) -> int:
        if session_id is None:
            return int(self.read("SELECT count(*) FROM messages")[0][0])
        mark = self._dialect.mark
        return int(
            self.read(f"SELECT count(*) FROM messages WHERE session_id = {mark}", (session_id,))[0][0]
        )

    def find_tool_call(self, session_id: str, tool_call_id: str) -> bool:
        mark = self._dialect.mark
        rows = self.read(
            f"SELECT 1 FROM tool_call_ids WHERE session_id = {mark} AND call_id = {mark}",
            (session_id, tool_call_id),
        )
        return bool(rows)

    # ------------------------------------------------------------ turns

    def list_turns(self, session_id: str, *, limit: int = 50) -> list[Turn]:
        mark = self._dialect.mark
        rows = self.read(
            f"SELECT {TURN_COLS} FROM turns WHERE session_id = {mark} "
            f"ORDER BY created_at DESC, {self._turn_tiebreak} DESC LIMIT {mark}",
            (session_id, limit),
        )
        by_id = {m.id: m for m in self.get_messages(turn_message_ids(rows))}
        return decode_turns(rows, session_id, by_id, self._dialect.load_json, self._dialect.from_time)

    # ------------------------------------------------------------ derived

    def get_derived(self, session_id: str, kind: str) -> JSON | None:
        mark = self._dialect.mark
        rows = self.read(
            f"SELECT value FROM derived WHERE session_id = {mark} AND kind = {mark}", (session_id, kind)
        )
        if not rows:
            return None
        value = self._dialect.load_json(rows[0][0], "derived", f"{session_id}/{kind}", "value")
        return value if isinstance(value, dict) else None

    def list_derived(self, session_id: str) -> dict[str, JSON]:
        """Every derived record of a session by kind (for export and migration)."""
        rows = self.read(
            f"SELECT kind, value FROM derived WHERE session_id = {self._dialect.mark}", (session_id,)
        )
        values = {
            str(kind): self._dialect.load_json(value, "derived", f"{session_id}/{kind}", "value")
            for kind, value in rows
        }
        return {kind: value for kind, value in values.items() if isinstance(value, dict)}

    def derived_total(self, kind: str, field: str) -> int:
        if not field.isidentifier():
            raise ValueError(f"derived field must be an identifier, got {field!r}")
        value = self._dialect.json_int.format(column="value", field=field)
        rows = self.read(
            f"SELECT COALESCE(SUM({value}), 0) FROM derived WHERE kind = {self._dialect.mark}", (kind,)
        )
        return int(rows[0][0] or 0)

    # ------------------------------------------------------------ small log queries for features

    def first_user_texts(self, session_ids: Sequence[str]) -> dict[str, str]:
        """The first user message with any text of each session (hidden ones too), in one
        query per 500 sessions: what an untitled conversation is recognised by."""
        d = self._dialect
        out: dict[str, str] = {}
        for start in range(0, len(session_ids), 500):
            clause, params = d.in_list("session_id", list(session_ids[start : start + 500]))
            rows = self.read(
                "SELECT session_id, content FROM messages WHERE id IN (SELECT MIN(id) FROM messages "
                f"WHERE {clause} AND role = 'user' AND rtrim(content, {d.mark}) <> '' GROUP BY session_id)",
                (*params, _WHITESPACE),
            )
            out.update((str(r[0]), str(r[1])) for r in rows)
        return out

    def author_names(self) -> set[str]:
        """Every author name in the log (the search engine matches queries to speakers)."""
        rows = self.read(AUTHOR_NAMES)
        return {str(r[0]) for r in rows}

    def important_message_ids(
        self, session_id: str, *, before_id: int | None, min_importance: float
    ) -> list[int]:
        """Visible messages of the session older than ``before_id`` that are pinned, at least
        ``min_importance`` or system messages, oldest first. The flags are plain columns:
        no message is decoded."""
        d = self._dialect
        m = d.mark
        pinned = "NOT (" + d.is_false.format("pinned") + ")"
        rows = self.read(
            f"SELECT id FROM messages WHERE session_id = {m} AND id < {m} AND "
            f"{d.is_false.format('hidden')} AND ({pinned} OR importance >= {m} OR role = 'system') "
            "ORDER BY id",
            (session_id, before_id if before_id is not None else 2**62, min_importance),
        )
        return [int(r[0]) for r in rows]
