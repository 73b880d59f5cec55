"""REST routes of the response cache (memlane/context/answers.py), under /v1.

A body names the context the client's model was sent by its ``fingerprint`` (from
``POST /v1/sessions/{id}/context``): the server fingerprints that very packet
(server/served_packets.py). Without one, or when the server no longer knows it, the
server builds the packet itself from ``max_tokens``/``strategy`` as that route would.
Sessions are checked against the caller's tenant like every session route.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from memlane.errors import InvalidInputError
from memlane.server import schemas as s
from memlane.server.routes import _ERRORS, SessionId, View
from memlane.server.served_packets import served_packets

router = APIRouter(prefix="/v1")


@router.post("/sessions/{session_id}/response-cache/lookup", response_model=s.CacheLookupOut,
             tags=["recall"], responses=_ERRORS)
def cached_response(session_id: SessionId, body: s.CacheLookupIn, v: View, request: Request) -> dict[str, Any]:
    """The answer cached for this (resolved) question from this model in this context, or null."""
    v.session(session_id)
    hit = v.mem.cached_response(body.query, v.key(session_id), model=body.model, semantic=body.semantic,
                                context=sent_packet(request, v, session_id, body.fingerprint),
                                max_tokens=body.max_tokens, strategy=body.strategy)
    return {"hit": None if hit is None else hit.to_dict()}


def sent_packet(request: Request, v: Any, session_id: str, fingerprint: str | None) -> Any:
    """The packet the client got with ``fingerprint`` (None: the route builds it)."""
    if fingerprint is None:
        return None
    store = v.mem.store
    packet = served_packets(request).find(fingerprint, store, store.note_repository())
    if packet is not None and packet.conversation_id != v.key(session_id):
        raise InvalidInputError(
            f"fingerprint {fingerprint} names the context packet of another session; send the "
            f"fingerprint that POST /v1/sessions/{session_id}/context returned")
    return packet


@router.post("/sessions/{session_id}/response-cache", status_code=201, response_model=s.CachedOut,
             tags=["recall"], responses=_ERRORS)
def cache_response(session_id: SessionId, body: s.CacheStoreIn, v: View, request: Request) -> dict[str, Any]:
    """Keep the model's answer to the question in this context (until its TTL, or until a
    message or note of the context is forgotten or superseded)."""
    v.session(session_id)
    entry = v.mem.cache_response(
        body.query, body.response, v.key(session_id), model=body.model, ttl=body.ttl,
        cost_seconds=body.cost_seconds, cost_tokens=body.cost_tokens, message_ids=body.message_ids,
        context=sent_packet(request, v, session_id, body.fingerprint),
        max_tokens=body.max_tokens, strategy=body.strategy,
    )
    return {"entry_id": entry.id, "model": entry.model, "created_at": entry.created_at,
            "expires_at": entry.expires_at}
