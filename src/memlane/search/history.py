"""Seed 004's ``search_history``: search hits as conversation entries (one per turn).

One definition for :class:`~memlane.Memory` and :class:`~memlane.client.MemoryClient`;
each gives the hits and a way to read a session's turns (the store, or the REST API).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from memlane.models import SearchHit, Turn

__all__ = ["history_entries"]


def history_entries(
    hits: Sequence[SearchHit], turns_of: Callable[[str], Sequence[Turn]], limit: int
) -> list[dict[str, Any]]:
    """At most ``limit`` entries, best first. Each is the turn's dict (``query``,
    ``response``, ``model_used``, ``confidence_score``, ``processing_time``,
    ``resolved_query``, ``context_used``, ``metadata``...) plus ``id`` (the turn id),
    ``timestamp``, the hit's calibrated ``score``, its ``scores`` and ``snippet``. A turn
    found by its query and its response is one entry; a message stored outside any turn is
    an entry with only its side."""
    turns: dict[str, dict[str, Turn]] = {}
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for hit in hits:
        msg = hit.message
        sid = msg.session_id
        if msg.turn_id and sid not in turns:
            turns[sid] = {t.turn_id: t for t in turns_of(sid)}
        turn = turns.get(sid, {}).get(msg.turn_id or "")
        key = turn.turn_id if turn is not None else f"message:{msg.id}"
        if key in seen:
            continue
        seen.add(key)
        if turn is not None:
            entry = turn.to_dict()
        else:
            entry = {
                "turn_id": None, "session_id": sid,
                "query": msg.content if msg.role == "user" else None,
                "response": msg.content if msg.role != "user" else None,
                "metadata": dict(msg.metadata), "created_at": msg.created_at.isoformat(),
            }
        entry.update(id=key, timestamp=entry["created_at"], score=hit.score, scores=dict(hit.scores),
                     snippet=hit.snippet, matched_role=msg.role)
        out.append(entry)
        if len(out) >= limit:
            break
    return out
