"""REST routes for a session's lifecycle and for administration, under /v1.

Together with routes.py they give :class:`~memlane.client.MemoryClient` every member of
``Memory``'s public surface (docs/api.md). Session routes check the caller's tenant
through :class:`TenantView`; administration spans the whole database, so with API keys
it is refused (run it with the ``memlane`` command on the server instead).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from memlane.server import schemas as s
from memlane.server.routes import _ERRORS, MessageId, SessionId, View, _jsonable, packet_body

router = APIRouter(prefix="/v1")

_ADMIN: dict[int | str, dict[str, Any]] = {403: {"description": "With API keys: this spans every tenant (run it on the server)"}}


@router.post("/sessions/active", response_model=s.SessionIdOut, tags=["sessions"], responses={422: _ERRORS[422]})
def active_session(body: s.ActiveIn, v: View) -> dict[str, Any]:
    """The user's active session (idle ones expire, a topic change may start a new one),
    created when there is none."""
    return {"session_id": v.active_session_for(body.user_id, body.query)}


@router.post("/sessions/{session_id}/resolve", tags=["recall"], responses=_ERRORS)
def resolve_references(session_id: SessionId, body: s.QueryIn, v: View) -> Any:
    """Resolve "it", "deinen Vorschlag", "yes" ... in the query against the session."""
    return _jsonable(v.resolve_references(body.query, session_id))


@router.post("/sessions/{session_id}/topic-change", response_model=s.Changed, tags=["sessions"],
             responses=_ERRORS)
def topic_change(session_id: SessionId, body: s.QueryIn, v: View) -> dict[str, Any]:
    """Whether the query leaves the topics of the session's recent messages."""
    return {"changed": v.detect_topic_change(body.query, session_id)}


@router.post("/sessions/{session_id}/hydrate", tags=["recall"], responses=_ERRORS)
def hydrate(session_id: SessionId, body: s.ContextIn, v: View) -> dict[str, Any]:
    """Startup hydration: checkpoint or log -> context packet; marks the session resuming."""
    return packet_body(v.hydrate(session_id, body.query, body.max_tokens))


@router.post("/sessions/{session_id}/shutdown", tags=["sessions"], responses=_ERRORS)
def shutdown(session_id: SessionId, v: View) -> Any:
    """Clean shutdown of the session: final summary, state and checkpoint."""
    return _jsonable(v.shutdown(session_id))


@router.post("/sessions/{session_id}/archive", response_model=s.Done, tags=["sessions"], responses=_ERRORS)
def archive(session_id: SessionId, body: s.ArchiveIn, v: View) -> dict[str, Any]:
    """Move the conversation to the archive tier (out of context, still searchable)."""
    return {"ok": v.archive_session(session_id, body.reason)}


@router.post("/sessions/{session_id}/unarchive", response_model=s.Done, tags=["sessions"], responses=_ERRORS)
def unarchive(session_id: SessionId, v: View) -> dict[str, Any]:
    return {"ok": v.unarchive_session(session_id)}


@router.get("/notes/{note_id}/history", response_model=s.NoteList, tags=["notes"],
            responses={404: {"description": "Unknown note"}})
def note_history(note_id: MessageId, v: View) -> dict[str, Any]:
    """Every version of a note, oldest first; a superseded one says why (``superseded_why``)
    and what replaced it (``superseded_by``, ``superseded_by_text``)."""
    return {"notes": _jsonable(v.explained_history(note_id))}


@router.get("/stats", tags=["admin"], responses=_ADMIN)
def stats(v: View) -> Any:
    return _jsonable(v.stats())


@router.post("/maintain", tags=["admin"], responses=_ADMIN)
def maintain(body: s.MaintainIn, v: View) -> Any:
    """Apply the lifecycle limits once: archive, prune, trim (dry_run: only report)."""
    return _jsonable(v.maintain(dry_run=body.dry_run))


@router.post("/prune", response_model=s.Count, tags=["admin"], responses=_ADMIN)
def prune(body: s.PruneIn, v: View) -> dict[str, Any]:
    """Delete sessions inactive for more than ``days``."""
    return {"count": v.prune_old_sessions(body.days)}


@router.post("/sessions/expire", response_model=s.SessionIds, tags=["admin"], responses=_ADMIN)
def expire(v: View) -> dict[str, Any]:
    """Expire sessions idle longer than the configured timeout; their ids."""
    return {"session_ids": v.auto_expire_sessions()}
