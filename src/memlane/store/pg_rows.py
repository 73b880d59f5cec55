"""Rows and filters of the PostgreSQL store: columns, decoding, WHERE clauses.

Shared by the store (postgres.py), its keyword search (pg_search.py) and its vector
index (pg_vectors.py), so a filter means the same thing on every path.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from psycopg.types.json import Jsonb

from memlane.errors import CorruptRecordError
from memlane.models import JSON, Message, MessageFilter, Session, SessionFilter

_SESSION_COLS = (
    "id, tenant_id, user_id, agent_id, title, system_prompt, metadata, status, "
    "created_at, updated_at, last_active_at, message_count"
)
_MESSAGE_COL_NAMES = (
    "id", "session_id", "role", "content", "name", "tool_calls", "tool_call_id", "author_id",
    "author_name", "turn_id", "created_at", "metadata", "importance", "pinned", "hidden",
    "token_count",
)
_MESSAGE_COLS = ", ".join(_MESSAGE_COL_NAMES)
_M_COLS = ", ".join("m." + c for c in _MESSAGE_COL_NAMES)


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _json_object(value: Any, table: str, row_id: object, column: str) -> JSON:
    if not isinstance(value, dict):
        raise CorruptRecordError(table, row_id, f"column {column} is not a JSON object")
    return value


def row_to_session(row: Sequence[Any]) -> Session:
    return Session(
        id=row[0],
        tenant_id=row[1],
        user_id=row[2],
        agent_id=row[3],
        title=row[4],
        system_prompt=row[5],
        metadata=_json_object(row[6], "sessions", row[0], "metadata"),
        status=row[7],
        created_at=_utc(row[8]),
        updated_at=_utc(row[9]),
        last_active_at=_utc(row[10]),
        message_count=int(row[11]),
    )


def row_to_message(row: Sequence[Any]) -> Message:
    tool_calls = row[5]
    if tool_calls is not None and not isinstance(tool_calls, list):
        raise CorruptRecordError("messages", row[0], "tool_calls is not a JSON array")
    return Message(
        id=int(row[0]),
        session_id=row[1],
        role=row[2],
        content=row[3],
        name=row[4],
        tool_calls=tool_calls,
        tool_call_id=row[6],
        author_id=row[7],
        author_name=row[8],
        turn_id=row[9],
        created_at=_utc(row[10]),
        metadata=_json_object(row[11], "messages", row[0], "metadata"),
        importance=float(row[12]),
        pinned=bool(row[13]),
        hidden=bool(row[14]),
        token_count=row[15],
    )


def _session_where(flt: SessionFilter) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    for col in ("user_id", "agent_id", "tenant_id", "status"):
        value = getattr(flt, col)
        if value is not None:
            clauses.append(f"{col} = %s")
            params.append(value)
    for key, value in flt.metadata.items():
        # like SQLite's json_extract(metadata, '$.a.b'): dots address nested objects
        nested: Any = value
        for part in reversed(key.split(".")):
            nested = {part: nested}
        clauses.append("metadata @> %s")
        params.append(Jsonb(nested))
    if flt.active_since is not None:
        clauses.append("last_active_at >= %s")
        params.append(_aware(flt.active_since))
    if flt.inactive_before is not None:
        clauses.append("last_active_at < %s")
        params.append(_aware(flt.inactive_before))
    return ("WHERE " + " AND ".join(clauses) if clauses else ""), params


def _message_where(flt: MessageFilter) -> tuple[str, list[Any]]:
    """Extra AND-clauses on messages m (joined with sessions s for user/agent filters)."""
    clauses: list[str] = []
    params: list[Any] = []
    if flt.session_id is not None:
        clauses.append("m.session_id = %s")
        params.append(flt.session_id)
    if flt.tenant_id is not None:
        clauses.append("m.tenant_id = %s")
        params.append(flt.tenant_id)
    for col in ("user_id", "agent_id"):
        value = getattr(flt, col)
        if value is not None:
            clauses.append(f"s.{col} = %s")
            params.append(value)
    if flt.roles:
        clauses.append("m.role = ANY(%s)")
        params.append(list(flt.roles))
    if flt.authors:
        clauses.append("(m.author_id = ANY(%s) OR m.author_name = ANY(%s))")
        params.extend([list(flt.authors), list(flt.authors)])
    if flt.since is not None:
        clauses.append("m.created_at >= %s")
        params.append(_aware(flt.since))
    if flt.until is not None:
        clauses.append("m.created_at <= %s")
        params.append(_aware(flt.until))
    if not flt.include_hidden:
        clauses.append("NOT m.hidden")
    return ("AND " + " AND ".join(clauses) if clauses else ""), params
