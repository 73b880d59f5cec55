"""Rows and filters of the PostgreSQL store: columns, decoding, WHERE clauses.

Shared by the store (postgres.py), its keyword search (pg_search.py) and its vector
index (pg_vectors.py), so a filter means the same thing on every path. The decoding
and the filters themselves are the SQLite store's too (rows.py, filters.py); this
module only says how PostgreSQL differs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from psycopg.types.json import Jsonb

from memlane.models import Message, MessageFilter, Session
from memlane.store import filters
from memlane.store.rows import M_COLS as _M_COLS
from memlane.store.rows import MESSAGE_COL_NAMES as _MESSAGE_COL_NAMES
from memlane.store.rows import MESSAGE_COLS as _MESSAGE_COLS
from memlane.store.rows import SESSION_COLS as _SESSION_COLS
from memlane.store.rows import SESSION_INSERT_COLS as _SESSION_INSERT_COLS
from memlane.store.rows import decode_message, decode_session

__all__ = [
    "DIALECT", "_MESSAGE_COLS", "_MESSAGE_COL_NAMES", "_M_COLS", "_SESSION_COLS", "_SESSION_INSERT_COLS", "_aware",
    "_json", "_message_where", "_utc", "load_jsonb", "row_to_message", "row_to_session", "sessions_join",
]


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def load_jsonb(data: str | bytes) -> Any:
    """psycopg's jsonb loader for memlane's connections: most rows carry no metadata, and
    skipping the JSON parser for them is a fifth of the client's time in a search that
    fetches a few hundred rows (as SQLite's loader does, sqlite_rows.py)."""
    if data in (b"{}", "{}"):
        return {}
    if data in (b"[]", "[]"):
        return []
    return json.loads(data)


def _json(value: Any, table: str, row_id: object, column: str) -> Any:
    """psycopg has already decoded jsonb columns: nothing left to parse."""
    return value


def row_to_session(row: Sequence[Any]) -> Session:
    return decode_session(row, _json, _utc)


def row_to_message(row: Sequence[Any]) -> Message:
    return decode_message(row, _json, _utc)


def _in_list(column: str, values: Sequence[Any]) -> filters.Clause:
    # one array parameter, whatever the list's length (one prepared plan for all)
    return f"{column} = ANY(%s)", [list(values)]


def _metadata_equals(key: str, value: Any) -> filters.Clause:
    # like SQLite's json_extract(metadata, '$.a.b'): dots address nested objects;
    # containment (@>) can use the GIN index on metadata
    nested: Any = value
    for part in reversed(key.split(".")):
        nested = {part: nested}
    return "metadata @> %s", [Jsonb(nested)]


# timestamptz wants aware datetimes; messages carry their tenant (no join needed for it)
DIALECT = filters.Dialect(
    mark="%s",
    time=_aware,
    in_list=_in_list,
    metadata_equals=_metadata_equals,
    is_false="NOT {}",
    message_tenant="m.tenant_id",
    load_json=_json,
    from_time=_utc,
    json_int="({column}->>'{field}')::bigint",
    day_number="floor(extract(epoch FROM {}) / 86400)::bigint",
)


def _message_where(flt: MessageFilter) -> tuple[str, list[Any]]:
    """Extra AND-clauses on messages m (joined with sessions s for user/agent filters)."""
    return filters.message_where(DIALECT, flt)


def sessions_join(flt: MessageFilter) -> str:
    """The join :func:`_message_where` needs for ``flt``: messages carry their tenant here,
    so only owner filters read the session row (a join saved on most queries)."""
    needed = flt.user_id is not None or flt.agent_id is not None or flt.unowned
    return "JOIN sessions s ON s.id = m.session_id" if needed else ""
