"""REST routes of the response cache (memlane/context/answers.py), under /v1.

The server builds the context packet itself (``max_tokens``/``strategy`` as for
``POST /v1/sessions/{id}/context``), so a lookup and a store from a client fingerprint
the same context the client's model was sent. Sessions are checked against the caller's
tenant like every session route.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from memlane.server import schemas as s
from memlane.server.routes import _ERRORS, SessionId, View

router = APIRouter(prefix="/v1")


@router.post("/sessions/{session_id}/response-cache/lookup", response_model=s.CacheLookupOut,
             tags=["recall"], responses=_ERRORS)
def cached_response(session_id: SessionId, body: s.CacheLookupIn, v: View) -> dict[str, Any]:
    """The answer cached for this (resolved) question from this model in this context, or null."""
    v.session(session_id)
    hit = v.mem.cached_response(body.query, v.key(session_id), model=body.model, semantic=body.semantic,
                                max_tokens=body.max_tokens, strategy=body.strategy)
    return {"hit": None if hit is None else hit.to_dict()}


@router.post("/sessions/{session_id}/response-cache", status_code=201, response_model=s.CachedOut,
             tags=["recall"], responses=_ERRORS)
def cache_response(session_id: SessionId, body: s.CacheStoreIn, v: View) -> dict[str, Any]:
    """Keep the model's answer to the question in this context (until its TTL, or until a
    message or note of the context is forgotten or superseded)."""
    v.session(session_id)
    entry = v.mem.cache_response(
        body.query, body.response, v.key(session_id), model=body.model, ttl=body.ttl,
        cost_seconds=body.cost_seconds, cost_tokens=body.cost_tokens, message_ids=body.message_ids,
        max_tokens=body.max_tokens, strategy=body.strategy,
    )
    return {"entry_id": entry.id, "model": entry.model, "created_at": entry.created_at,
            "expires_at": entry.expires_at}
