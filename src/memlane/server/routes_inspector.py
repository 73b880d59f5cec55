"""REST routes the web inspector's pictures and note editing use, under /v1.

Thin calls into :class:`TenantView` (tenancy, audit) and :mod:`memlane.server.inspector`
(what the charts show); every one honours the caller's tenant like the rest of the API.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from memlane.server import schemas as s
from memlane.server.inspector import languages, overview, session_languages, session_timeline
from memlane.server.people import person_summary
from memlane.server.routes import _ERRORS, SessionId, View, _jsonable

router = APIRouter(prefix="/v1")

NoteId = Annotated[int, Path(ge=1, le=2**62)]


@router.patch("/notes/{note_id}", tags=["notes"],
              responses={404: {"description": "Unknown note (or one of another tenant)"},
                         409: {"description": "The note was already superseded (before this request or by a "
                                     "simultaneous correction): error type note_superseded, with "
                                     "note_id and superseded_by; correct the current version"},
                         422: _ERRORS[422]})
def correct_note(note_id: NoteId, body: s.NoteCorrectionIn, v: View) -> Any:
    """Correct a current note: a new version supersedes it (audited; the history says why)."""
    return _jsonable(v.correct_note(note_id, body.text, value=body.value, reason=body.reason))


@router.get("/sessions/{session_id}/timeline", response_model=s.TimelineOut, tags=["inspector"],
            responses=_ERRORS)
def timeline(session_id: SessionId, v: View) -> dict[str, Any]:
    """A session over time: messages per UTC day, which messages each summary block covers,
    and its checkpoint (for the inspector's timeline)."""
    return session_timeline(v, v.session(session_id))


@router.get("/overview", response_model=s.OverviewOut, tags=["inspector"])
def memory_overview(v: View) -> dict[str, Any]:
    """The caller's memory in figures (sessions, messages, notes; for the admin also the
    embedding backlog and database size) and per-day series."""
    return overview(v)


@router.get("/languages", response_model=s.LanguagesOut, tags=["inspector"])
def message_languages(
    v: View,
    user_id: Annotated[str | None, Query(max_length=200, description="Only this person's sessions.")] = None,
) -> dict[str, Any]:
    """Which languages the caller's messages are in (as judged when each was keyword-indexed,
    which a read does first for a backlog of new messages):
    messages and sessions per language, and each session's languages (the language facets)."""
    return languages(v, user_id=user_id)


@router.get("/sessions/{session_id}/languages", response_model=s.SessionLanguagesOut, tags=["inspector"],
            responses=_ERRORS)
def session_message_languages(session_id: SessionId, v: View) -> dict[str, Any]:
    """A session's languages with their message counts, and each message's language."""
    return session_languages(v, v.session(session_id))


@router.get("/people/{user_id}", response_model=s.PersonOut, tags=["inspector"])
def person(
    user_id: Annotated[str, Path(min_length=1, max_length=s.MAX_ID)], v: View,
) -> dict[str, Any]:
    """One person across their sessions: the session state (topics, open loops, pending
    clarifications) and facets summed, each item with the sessions it came from."""
    return person_summary(v, user_id)
