"""REST routes under /v1. Each is a thin call into :class:`TenantView`.

Routes are plain ``def`` on purpose: Memory is synchronous (SQLite behind a
lock), so FastAPI runs them in its thread pool and the event loop stays free
for MCP streams and health checks.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.encoders import jsonable_encoder
from pydantic import AfterValidator

from memlane.models import Session
from memlane.server import schemas as s
from memlane.server.errors import ApiError
from memlane.server.tenancy import Caller, TenantView, features

router = APIRouter(prefix="/v1")


async def view(request: Request) -> TenantView:  # async: no I/O, so no thread-pool hop
    caller = getattr(request.state, "caller", None)
    if not isinstance(caller, Caller):
        raise ApiError(401, "unauthorized", "this server requires an API key")
    return TenantView(request.app.state.mem, caller)


View = Annotated[TenantView, Depends(view)]
SessionId = Annotated[str, Path(min_length=1, max_length=s.MAX_ID), AfterValidator(s._session_ident)]
MessageId = Annotated[int, Path(ge=1, le=2**62)]
OptIdent = Annotated[str | None, Query(min_length=1, max_length=s.MAX_ID), AfterValidator(
    lambda v: None if v is None else s._ident(v))]

_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"description": "Unknown session (or one of another tenant)"},
    422: {"description": "Invalid input; the message says what to fix"},
}


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        to_dict = getattr(value, "to_dict", None)
        return jsonable_encoder(to_dict() if callable(to_dict) else dataclasses.asdict(value))
    return jsonable_encoder(value)


# ---------------------------------------------------------------- who am I


@router.get("/whoami", response_model=s.WhoAmI, tags=["meta"])
def whoami(request: Request, v: View) -> dict[str, Any]:
    """Which tenant this key sees, and which optional features this server has."""
    return {
        "auth": bool(request.app.state.require_auth),
        "tenant": v.caller.tenant,
        "key_id": v.caller.key_id,
        "features": features(v.mem),
        "anchor_id": v.mem.anchor_id,
    }


# ---------------------------------------------------------------- sessions


@router.post("/sessions", status_code=201, response_model=s.SessionOut, tags=["sessions"],
             responses={409: {"description": "session_id already taken"}, 422: _ERRORS[422]})
def create_session(body: s.SessionCreate, v: View) -> dict[str, Any]:
    return v.create_session(**body.model_dump(exclude_none=True)).to_dict()


@router.get("/sessions", response_model=s.SessionList, tags=["sessions"])
def list_sessions(
    v: View,
    limit: Annotated[int, Query(ge=1, le=s.MAX_LIST)] = 50,
    offset: Annotated[int, Query(ge=0, le=s.MAX_OFFSET)] = 0,
    user_id: OptIdent = None,
    agent_id: OptIdent = None,
    status: s.Status | None = None,
    tenant_id: OptIdent = None,
    active_since: datetime | None = None,
    inactive_before: datetime | None = None,
    metadata: Annotated[str | None, Query(
        max_length=s.MAX_SHORT, description='Sessions whose metadata has these values, e.g. {"room": "!abc:matrix.org"}',
    )] = None,
) -> dict[str, Any]:
    """Most recently active first. ``tenant_id`` is honoured only without API keys."""
    filters: dict[str, Any] = {
        "user_id": user_id, "agent_id": agent_id, "status": status, "tenant_id": tenant_id,
        "active_since": active_since, "inactive_before": inactive_before,
        "metadata": s.metadata_filter(metadata) if metadata is not None else None,
    }
    found = v.list_sessions(limit=limit, offset=offset, **{k: x for k, x in filters.items() if x is not None})
    return {"sessions": _sessions_out(v, found)}


def _sessions_out(v: TenantView, sessions: list[Session]) -> list[dict[str, Any]]:
    titles = v.display_titles(sessions)
    return [{**x.to_dict(), "display_title": titles[x.id]} for x in sessions]


@router.get("/sessions/{session_id}", response_model=s.SessionOut, tags=["sessions"], responses=_ERRORS)
def get_session(session_id: SessionId, v: View) -> dict[str, Any]:
    return _sessions_out(v, [v.session(session_id)])[0]


@router.patch("/sessions/{session_id}", response_model=s.SessionOut, tags=["sessions"], responses=_ERRORS)
def update_session(session_id: SessionId, body: s.SessionUpdate, v: View) -> dict[str, Any]:
    changes = body.model_dump(exclude_none=True)
    if not changes:
        return v.session(session_id).to_dict()
    return v.update_session(session_id, **changes).to_dict()


@router.post("/sessions/{session_id}/end", response_model=s.Done, tags=["sessions"], responses=_ERRORS)
def end_session(session_id: SessionId, v: View) -> dict[str, Any]:
    """Mark the session ended; its history stays searchable."""
    return {"ok": v.end_session(session_id)}


@router.delete("/sessions/{session_id}", response_model=s.Done, tags=["sessions"], responses=_ERRORS)
def delete_session(session_id: SessionId, v: View) -> dict[str, Any]:
    """Forget the session and everything derived from it."""
    return {"ok": v.delete_session(session_id)}


@router.get(
    "/sessions/{session_id}/export", tags=["import/export"], responses={
        200: {"content": {"application/json": {}, "application/x-ndjson": {}, "text/markdown": {}},
              "description": "The export document"},
        **_ERRORS,
    },
)
def export_session(session_id: SessionId, v: View, format: s.ExportFormat = "json") -> Response:
    text = v.export_session(session_id, format)
    media = {"json": "application/json", "jsonl": "application/x-ndjson"}.get(format, "text/markdown")
    return Response(text, media_type=f"{media}; charset=utf-8")


@router.post("/import", status_code=201, response_model=s.ImportOut, tags=["import/export"],
             responses={409: {"description": "A session id already exists"}, 422: _ERRORS[422]})
def import_sessions(body: s.ImportIn, v: View) -> dict[str, Any]:
    """Import sessions from an export; with an API key they land in the key's tenant."""
    return {"session_ids": v.import_sessions(body.data, body.format, on_conflict=body.on_conflict)}


# ---------------------------------------------------------------- messages and turns


@router.get("/sessions/{session_id}/messages", response_model=s.MessageList, tags=["messages"],
            responses=_ERRORS)
def list_messages(
    session_id: SessionId,
    v: View,
    include_hidden: bool = False,
    max_tokens: Annotated[s.TokenBudget | None, Query()] = None,
) -> dict[str, Any]:
    """The transcript, oldest first; with ``max_tokens`` only the newest messages that fit."""
    msgs, tokens = v.messages(session_id, include_hidden=include_hidden, max_tokens=max_tokens)
    return {"messages": [m.to_dict() for m in msgs], "tokens": tokens}


@router.post("/sessions/{session_id}/messages", status_code=201, response_model=s.MessageOut,
             tags=["messages"], responses=_ERRORS)
def append_message(session_id: SessionId, body: s.MessageIn, v: View) -> dict[str, Any]:
    """Append one message (the session is created on first use unless auto-create is off)."""
    return v.save_message(session_id, body.to_input()).to_dict()


@router.post("/sessions/{session_id}/messages/batch", status_code=201, response_model=s.MessageList,
             tags=["messages"], responses=_ERRORS)
def append_messages(session_id: SessionId, body: s.MessagesIn, v: View) -> dict[str, Any]:
    """Append several messages in one transaction: all or nothing."""
    stored = v.add_messages(session_id, [m.to_input() for m in body.messages])
    return {"messages": [m.to_dict() for m in stored], "tokens": None}


@router.delete("/sessions/{session_id}/messages", response_model=s.Count, tags=["messages"],
               responses=_ERRORS)
def clear_messages(session_id: SessionId, v: View) -> dict[str, Any]:
    """Hide the history from context (the seeds' /clear); it stays stored and exportable."""
    return {"count": v.clear_session(session_id)}


@router.get("/sessions/{session_id}/items", response_model=s.MessageList, tags=["items"], responses=_ERRORS)
def list_items(
    session_id: SessionId, v: View, limit: Annotated[int | None, Query(ge=0, le=2**31)] = None,
) -> dict[str, Any]:
    """The newest ``limit`` visible messages (all without it), oldest first; ``item`` holds each
    framework item exactly as it was given."""
    return {"messages": [m.to_dict() for m in v.items(session_id, limit)], "tokens": None}


@router.post("/sessions/{session_id}/items", status_code=201, response_model=s.MessageList, tags=["items"],
             responses=_ERRORS)
def append_items(session_id: SessionId, body: s.ItemsIn, v: View) -> dict[str, Any]:
    """Append framework items (Responses items, content parts, Anthropic blocks) in one transaction."""
    stored = v.add_messages(session_id, body.items)
    return {"messages": [m.to_dict() for m in stored], "tokens": None}


@router.put("/sessions/{session_id}/items", response_model=s.MessageList, tags=["items"], responses=_ERRORS)
def replace_items(session_id: SessionId, body: s.ItemsIn, v: View) -> dict[str, Any]:
    """Replace the whole history; the new items are checked before the old ones are deleted."""
    stored = v.replace_history(session_id, body.items)
    return {"messages": [m.to_dict() for m in stored], "tokens": None}


@router.delete("/sessions/{session_id}/items", response_model=s.Count, tags=["items"], responses=_ERRORS)
def forget_items(session_id: SessionId, v: View) -> dict[str, Any]:
    """Delete every message of the session from disk (the session stays)."""
    return {"count": v.forget_history(session_id)}


@router.post("/sessions/{session_id}/items/pop", response_model=s.PoppedOut, tags=["items"], responses=_ERRORS)
def pop_item(session_id: SessionId, v: View) -> dict[str, Any]:
    """Remove the newest visible message and return it (null when there is none)."""
    popped = v.pop(session_id)
    return {"message": popped.to_dict() if popped is not None else None}


@router.delete("/sessions/{session_id}/items/{index}", response_model=s.PoppedOut, tags=["items"],
               responses=_ERRORS)
def forget_item_at(session_id: SessionId, index: Annotated[int, Path(ge=-(2**31), le=2**31)], v: View) -> dict[str, Any]:
    """Remove the visible message at ``index`` (0 oldest, -1 newest); null when out of range."""
    gone = v.forget_at(session_id, index)
    return {"message": gone.to_dict() if gone is not None else None}


@router.get("/sessions/{session_id}/turns", response_model=s.TurnList, tags=["messages"], responses=_ERRORS)
def list_turns(
    session_id: SessionId, v: View, limit: Annotated[int, Query(ge=1, le=s.MAX_LIST)] = 50
) -> dict[str, Any]:
    return {"turns": [t.to_dict() for t in v.turns(session_id, limit)]}


@router.post("/sessions/{session_id}/turns", status_code=201, response_model=s.TurnCreated,
             tags=["messages"], responses=_ERRORS)
def store_turn(session_id: SessionId, body: s.TurnIn, v: View) -> dict[str, Any]:
    """Store a user query and the assistant's response as one turn, in one transaction."""
    turn_id, sid = v.store_interaction(
        body.query, body.response, body.metadata, session_id=session_id, user_id=body.user_id,
        author_id=body.author_id, author_name=body.author_name, created_at=body.created_at,
    )
    return {"turn_id": turn_id, "session_id": sid}


@router.post("/turns", status_code=201, response_model=s.TurnCreated, tags=["messages"],
             responses={422: _ERRORS[422]})
def store_interaction(body: s.TurnWithSessionIn, v: View) -> dict[str, Any]:
    """Seed 004's store_interaction: without session_id, the user's active session is used."""
    turn_id, sid = v.store_interaction(
        body.query, body.response, body.metadata, session_id=body.session_id, user_id=body.user_id,
        author_id=body.author_id, author_name=body.author_name, created_at=body.created_at,
    )
    return {"turn_id": turn_id, "session_id": sid}


@router.get("/messages/{message_id}", response_model=s.MessageOut, tags=["messages"],
            responses={404: {"description": "Unknown message"}})
def get_message(message_id: MessageId, v: View) -> dict[str, Any]:
    return v.message(message_id).to_dict()


@router.patch("/messages/{message_id}", response_model=s.MessageOut, tags=["messages"],
              responses={404: {"description": "Unknown message"}})
def update_message(message_id: MessageId, body: s.MessagePatch, v: View) -> dict[str, Any]:
    """Mark a message important or pinned (kept in context, promoted to notes)."""
    return v.update_message(message_id, importance=body.importance, pinned=body.pinned).to_dict()


@router.delete("/messages/{message_id}", response_model=s.Count, tags=["messages"],
               responses={404: {"description": "Unknown message"}})
def forget_message(message_id: MessageId, v: View) -> dict[str, Any]:
    """Delete one message and everything derived from it."""
    return {"count": v.forget_message(message_id)}


# ---------------------------------------------------------------- recall and context


@router.post("/search", response_model=s.SearchOut, tags=["recall"], responses={422: _ERRORS[422]})
def search(body: s.SearchIn, v: View) -> dict[str, Any]:
    """Search past conversations; each hit carries its score parts (keyword, vector, recency...)."""
    hits = v.search(
        body.query, session_id=body.session_id, tenant_id=body.tenant_id, user_id=body.user_id,
        agent_id=body.agent_id, top_k=body.top_k, roles=body.roles, authors=body.authors,
        since=body.since, until=body.until, min_score=body.min_score,
    )
    out = [h.to_dict() for h in hits]
    untitled: dict[str, Session | None] = {}  # the keyword-only path leaves hit.session unset
    for h in hits:
        if not (h.session and h.session.title) and h.message.session_id not in untitled:
            untitled[h.message.session_id] = h.session or v.mem.store.get_session(h.message.session_id)
    titles = v.display_titles([x for x in untitled.values() if x is not None])
    for item in out:
        if item.get("session_title") is None:
            item["session_title"] = titles.get(item["session_id"])
    return {"hits": out}


@router.post("/sessions/{session_id}/context", tags=["recall"],
             responses={**_ERRORS, 501: {"description": "No context engine in this build"}})
def context(session_id: SessionId, body: s.ContextIn, v: View, request: Request) -> dict[str, Any]:
    """The context packet for the next LLM call: sections, per-section token spend, messages,
    and its ``fingerprint`` (send it with the response-cache calls of this turn)."""
    from memlane.context.packet import ContextPacket
    from memlane.server.served_packets import served_packets

    packet = v.context(session_id, body.query, body.max_tokens, body.strategy)
    out = packet_body(packet)
    if isinstance(packet, ContextPacket):
        out["fingerprint"] = served_packets(request).keep(packet, v.session(session_id).tenant_id)
    return out


def packet_body(packet: Any) -> dict[str, Any]:
    """A context packet as the JSON body of a reply: sections, budget and messages."""
    out = _jsonable(packet)
    if not isinstance(out, dict):
        out = {"packet": out}
    if "budget" not in out and hasattr(packet, "budget"):
        out["budget"] = _jsonable(packet.budget)
    to_messages = getattr(packet, "to_messages", None)
    if "messages" not in out and callable(to_messages):
        out["messages"] = _jsonable(to_messages())
    return out


@router.get("/sessions/{session_id}/state", tags=["recall"],
            responses={**_ERRORS, 501: {"description": "No state tracker in this build"}})
def state(session_id: SessionId, v: View) -> Any:
    """The session's live state: topics, open loops, pending clarifications, references."""
    return _jsonable(v.state(session_id))


@router.post("/relevant-context", response_model=s.MessageList, tags=["recall"],
             responses={422: _ERRORS[422], 501: {"description": "No recall engine in this build"}})
def relevant_context(body: s.RelevantIn, v: View) -> dict[str, Any]:
    """The best past messages for a query that fit max_tokens together, each prefixed with
    its date and speaker (for RAG-style prompts)."""
    msgs = v.relevant_context(body.query, body.max_tokens, session_id=body.session_id, user_id=body.user_id)
    return {"messages": [m.to_dict() for m in msgs], "tokens": None}


@router.get("/notes", response_model=s.NoteList, tags=["notes"],
            responses={**_ERRORS, 501: {"description": "No long-term notes in this build"}})
def list_notes(
    v: View,
    query: Annotated[str | None, Query(max_length=s.MAX_SHORT), AfterValidator(
        lambda x: None if x is None else s._storable(x))] = None,
    session_id: OptIdent = None,
    user_id: OptIdent = None,
    kind: OptIdent = None,
    include_history: bool = False,
    limit: Annotated[int, Query(ge=1, le=s.MAX_LIST)] = 50,
) -> dict[str, Any]:
    """Long-term notes true now (all versions with include_history); with session_id, what
    that conversation sees; with query, the most relevant first."""
    filters: dict[str, Any] = {"user_id": user_id, "kind": kind, "include_history": include_history, "limit": limit}
    found = v.notes(query, session_id=session_id, **{k: x for k, x in filters.items() if x is not None})
    return {"notes": [_jsonable(n) for n in found]}


NoteId = Annotated[int, Path(ge=1, le=2**62)]


@router.delete("/notes/{note_id}", response_model=s.Count, tags=["notes"],
               responses={404: {"description": "Unknown note (or one of another tenant)"}})
def forget_note(note_id: NoteId, v: View) -> dict[str, Any]:
    """Delete a note with every version of it (audited)."""
    return {"count": v.forget_note(note_id)}


@router.get("/audit", response_model=s.AuditList, tags=["notes"], responses=_ERRORS)
def audit_log(
    v: View, session_id: OptIdent = None, limit: Annotated[int, Query(ge=1, le=s.MAX_LIST)] = 100,
) -> dict[str, Any]:
    """Who changed memory (commands said in a conversation, and actions through this API), newest first."""
    return {"entries": [e.to_dict() for e in v.audit_log(session_id=session_id, limit=limit)]}


@router.get("/sessions/{session_id}/facets", response_model=s.FacetList, tags=["notes"],
            responses={**_ERRORS, 501: {"description": "No long-term notes in this build"}})
def list_facets(
    session_id: SessionId,
    v: View,
    kind: Annotated[Literal["entity", "link", "time", "action"] | None, Query()] = None,
    value: Annotated[str | None, Query(min_length=1, max_length=s.MAX_SHORT)] = None,
    limit: Annotated[int, Query(ge=1, le=s.MAX_LIST)] = 200,
) -> dict[str, Any]:
    """What was tracked beside the dialogue of a conversation: named entities, links, dates
    and system actions (tool calls), oldest first."""
    v.session(session_id)  # another tenant's conversation is "not found"
    return {"facets": [f.to_dict() for f in v.mem.facets(v.key(session_id), kind, value=value, limit=limit)]}


@router.post("/sessions/{session_id}/commands", response_model=s.CommandOut, tags=["notes"],
             responses={**_ERRORS, 501: {"description": "No long-term notes in this build"}})
def run_command(session_id: SessionId, body: s.CommandIn, v: View) -> dict[str, Any]:
    """Check what someone said in the conversation for a memory command ("forget this
    conversation", "remember this", "merk dir das", ...) and run it. Only the Anchor may
    change memory: anyone else gets a refusal and nothing changes. Every command is audited.
    ``recognized: false`` means it was no command: send the text to the model as usual."""
    v.session(session_id)  # another tenant's conversation is "not found"
    result = v.mem.handle_command(v.key(session_id), body.text, body.author_id, author_name=body.author_name)
    return _jsonable(result.to_dict())  # type: ignore[no-any-return]


@router.post("/notes", status_code=201, tags=["notes"],
             responses={**_ERRORS, 501: {"description": "No long-term notes in this build"}})
def add_note(body: s.NoteIn, v: View) -> Any:
    """Write a long-term note yourself (merged with, or superseding, one about the same thing)."""
    fields = body.model_dump(exclude_none=True, exclude={"text", "session_id"})
    return _jsonable(v.add_note(body.text, session_id=body.session_id, **fields))


# ---------------------------------------------------------------- health


@router.get("/health/details", tags=["meta"], responses={403: {"description": "Not an admin"}})
def health_details(v: View) -> dict[str, Any]:
    """`memlane doctor` over HTTP: integrity, orphans, vector lag, embedder, disk (admins only).

    An admin is the local user of a server without keys; a tenant's key sees only its
    tenant, and the store's health spans every tenant.
    """
    if v.caller.tenant is not None:
        raise ApiError(403, "permission_denied", "health details are for the server's admin (no key, loopback)")
    from memlane.doctor import diagnose

    return diagnose(v.mem.store, v.mem.settings.embedder).to_dict()
