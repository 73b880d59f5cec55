"""Decoding stored rows into records, shared by the SQLite and PostgreSQL stores.

Both stores keep the same columns in the same order; they differ only in how a
JSON column and a timestamp come back from the driver (SQLite: JSON text and epoch
seconds; psycopg: already-decoded JSON and ``datetime``). Each store passes those
two conversions in, so what a row means — and what counts as a corrupt row — is
written once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from memlane.errors import CorruptRecordError
from memlane.models import JSON, Message, Session, Turn

# (value, table, row_id, column) -> decoded JSON; the location is for the error it raises
LoadJson = Callable[[Any, str, object, str], Any]
# a stored timestamp -> an aware UTC datetime
ToTime = Callable[[Any], datetime]

#: What a new session row is written with (``version`` starts at its default, 0).
SESSION_INSERT_COLS = (
    "id, tenant_id, user_id, agent_id, title, system_prompt, metadata, status, "
    "created_at, updated_at, last_active_at, message_count"
)
SESSION_COLS = SESSION_INSERT_COLS + ", version"
#: The SET clause that moves a session's ``version``: every change of what its window
#: shows (append, hide, pin or importance, metadata of a message, forget of a message,
#: system prompt) runs it in the change's own transaction, so a key made of the version
#: (memlane/hot_windows.py) never names two different windows.
BUMP_VERSION = "version = version + 1"
MESSAGE_COL_NAMES = (
    "id", "session_id", "role", "content", "name", "tool_calls", "tool_call_id", "author_id",
    "author_name", "turn_id", "created_at", "metadata", "importance", "pinned", "hidden",
    "token_count", "item",
)
MESSAGE_COLS = ", ".join(MESSAGE_COL_NAMES)
# the same columns on the alias ``m`` (queries that join messages m with sessions s)
M_COLS = ", ".join("m." + c for c in MESSAGE_COL_NAMES)
# what list_turns selects, in the order decode_turn reads it
TURN_COLS = (
    "turn_id, user_message_id, assistant_message_id, intent, action_name, "
    "job_refs, model_used, confidence_score, processing_time, resolved_query, "
    "context_used, metadata, created_at"
)


def _json_object(load: LoadJson, value: Any, table: str, row_id: object, column: str) -> dict[str, Any]:
    decoded = load(value, table, row_id, column)
    if not isinstance(decoded, dict):
        raise CorruptRecordError(table, row_id, f"column {column} is not a JSON object")
    return decoded


def decode_session(row: Sequence[Any], load: LoadJson, to_time: ToTime) -> Session:
    """A row of SESSION_COLS as a Session."""
    return Session(
        id=row[0],
        tenant_id=row[1],
        user_id=row[2],
        agent_id=row[3],
        title=row[4],
        system_prompt=row[5],
        metadata=_json_object(load, row[6], "sessions", row[0], "metadata"),
        status=row[7],
        created_at=to_time(row[8]),
        updated_at=to_time(row[9]),
        last_active_at=to_time(row[10]),
        message_count=int(row[11]),
        version=int(row[12]),
    )


def encode_item(item: JSON | None) -> str | None:
    """A message's framework item as stored: JSON text in both stores (not jsonb, which
    would reorder keys), so it comes back exactly as it was given."""
    return None if item is None else json.dumps(item, ensure_ascii=False, allow_nan=False)


def _item(value: Any, row_id: object) -> JSON | None:
    if value is None:
        return None
    try:
        decoded = json.loads(value)
    except (TypeError, ValueError) as exc:
        raise CorruptRecordError("messages", row_id, f"column item is not JSON: {exc}") from exc
    if not isinstance(decoded, dict):
        raise CorruptRecordError("messages", row_id, "column item is not a JSON object")
    return decoded


def decode_message(row: Sequence[Any], load: LoadJson, to_time: ToTime) -> Message:
    """A row of MESSAGE_COLS as a Message."""
    metadata = _json_object(load, row[11], "messages", row[0], "metadata")
    tool_calls = load(row[5], "messages", row[0], "tool_calls")
    if tool_calls is not None and not isinstance(tool_calls, list):
        raise CorruptRecordError("messages", row[0], "column tool_calls is not a JSON array")
    if not isinstance(row[3], str):
        raise CorruptRecordError("messages", row[0], "column content is not text")
    item = _item(row[16], row[0])
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
        created_at=to_time(row[10]),
        metadata=metadata,
        importance=float(row[12]),
        pinned=bool(row[13]),
        hidden=bool(row[14]),
        token_count=row[15],
        item=item,
    )


def decode_turns(
    rows: Sequence[Sequence[Any]],
    session_id: str,
    messages: Mapping[int | None, Message],
    load: LoadJson,
    to_time: ToTime,
) -> list[Turn]:
    """Rows of TURN_COLS (newest first) as Turns, oldest first.

    ``messages`` holds the turns' messages by id; a turn whose user or assistant
    message was forgotten is no longer whole and is left out.
    """
    turns: list[Turn] = []
    for r in reversed(rows):
        user, assistant = messages.get(r[1]), messages.get(r[2])
        if user is None or assistant is None:
            continue
        turns.append(
            Turn(
                turn_id=r[0],
                session_id=session_id,
                user_message=user,
                assistant_message=assistant,
                intent=r[3],
                action_name=r[4],
                job_refs=list(load(r[5], "turns", r[0], "job_refs") or []),
                model_used=r[6],
                confidence_score=r[7],
                processing_time=r[8],
                resolved_query=r[9],
                # SQLite stores 0/1, PostgreSQL a boolean
                context_used=None if r[10] is None else bool(r[10]),
                metadata=load(r[11], "turns", r[0], "metadata") or {},
                created_at=to_time(r[12]),
            )
        )
    return turns


def turn_message_ids(rows: Sequence[Sequence[Any]]) -> list[int]:
    """The user and assistant message ids that rows of TURN_COLS refer to."""
    return [i for r in rows for i in (r[1], r[2]) if i is not None]
