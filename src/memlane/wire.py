"""Models back from the HTTP API's JSON: the one parser of the server's session, message,
turn, hit, facet, note and audit dicts.

The client (``MemoryClient``) reads every answer with these, and the hot caches read the
packets and windows they keep as JSON (hot_packets.py, hot_windows.py) with the same
``message_from_dict``, without importing the HTTP client itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from memlane.models import Message, SearchHit, Session, Turn
from memlane.notes.models import AuditEntry, Facet, Note

__all__ = [
    "audit_from_dict",
    "facet_from_dict",
    "hit_from_dict",
    "message_from_dict",
    "note_from_dict",
    "session_from_dict",
    "turn_from_dict",
]


def _time(value: Any) -> datetime:
    return datetime.fromisoformat(str(value))


def session_from_dict(d: Mapping[str, Any]) -> Session:
    return Session(
        id=d["id"], user_id=d.get("user_id"), agent_id=d.get("agent_id"),
        tenant_id=d.get("tenant_id") or "default", title=d.get("title"),
        system_prompt=d.get("system_prompt"), metadata=dict(d.get("metadata") or {}),
        status=d.get("status") or "active", created_at=_time(d["created_at"]),
        updated_at=_time(d["updated_at"]), last_active_at=_time(d["last_active_at"]),
        message_count=int(d.get("message_count") or 0), version=int(d.get("version") or 0),
    )


def message_from_dict(d: Mapping[str, Any]) -> Message:
    return Message(
        role=d["role"], content=d["content"], session_id=d.get("session_id") or "", id=d.get("id"),
        name=d.get("name"), tool_calls=d.get("tool_calls"), tool_call_id=d.get("tool_call_id"),
        author_id=d.get("author_id"), author_name=d.get("author_name"), turn_id=d.get("turn_id"),
        created_at=_time(d["created_at"]), metadata=dict(d.get("metadata") or {}),
        importance=float(d.get("importance") or 0.0), pinned=bool(d.get("pinned")),
        hidden=bool(d.get("hidden")), token_count=d.get("token_count"), item=d.get("item"),
    )


def turn_from_dict(d: Mapping[str, Any]) -> Turn:
    when = _time(d["created_at"])
    common = {"session_id": d["session_id"], "turn_id": d["turn_id"], "created_at": when}
    return Turn(
        turn_id=d["turn_id"], session_id=d["session_id"],
        user_message=Message(role="user", content=d["query"], id=d.get("user_message_id"), **common),
        assistant_message=Message(
            role="assistant", content=d["response"], id=d.get("assistant_message_id"), **common
        ),
        intent=d.get("intent"), action_name=d.get("action_name"), job_refs=list(d.get("job_refs") or []),
        model_used=d.get("model_used"), confidence_score=d.get("confidence_score"),
        processing_time=d.get("processing_time"), resolved_query=d.get("resolved_query"),
        context_used=d.get("context_used"), metadata=dict(d.get("metadata") or {}), created_at=when,
    )


def hit_from_dict(d: Mapping[str, Any]) -> SearchHit:
    return SearchHit(
        message=message_from_dict(d["message"]), score=float(d["score"]),
        scores={k: float(v) for k, v in (d.get("scores") or {}).items()}, snippet=d.get("snippet") or "",
    )


def facet_from_dict(d: Mapping[str, Any]) -> Facet:
    return Facet(message_id=int(d["message_id"]), session_id=str(d["session_id"]), kind=str(d["kind"]),
                 value=str(d["value"]), at=_time(d["at"]))


def note_from_dict(d: Mapping[str, Any]) -> Note:
    names = {f.name for f in dataclasses.fields(Note)}
    values: dict[str, Any] = {}
    for key, value in d.items():
        if key not in names:
            continue
        if key in ("valid_from", "valid_to", "created_at", "updated_at") and value is not None:
            value = _time(value)
        values[key] = value
    return Note(**values)


def audit_from_dict(d: Mapping[str, Any]) -> AuditEntry:
    names = {f.name for f in dataclasses.fields(AuditEntry)}
    values: dict[str, Any] = {k: v for k, v in d.items() if k in names}
    values["at"] = _time(values["at"])
    return AuditEntry(**values)
