"""The session state as the context packet needs it: :class:`StateView`, read by name from the
tracker's ``SessionState`` (context does not import state), or a minimal one read from the log
when no tracker is attached (:func:`session_state`).

The checkpoints and the resume path read it too, without the packet's budget, strategies
and summaries.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, fields, is_dataclass
from typing import TYPE_CHECKING, Any

from memlane.context.summaries import split_turns
from memlane.errors import MemlaneError
from memlane.models import JSON, Session

if TYPE_CHECKING:
    from memlane.context.summaries import SummaryRecord
    from memlane.ports import MessageLog

__all__ = ["StateOf", "StateView", "session_state", "text_of"]

log = logging.getLogger(__name__)


def text_of(value: Any) -> str:
    """A state entry as text: a string, a dict's text-like field, or a record's."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in ("text", "question", "description", "summary", "value"):
            if isinstance(value.get(key), str):
                return str(value[key])
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    for attr in ("text", "question", "description"):
        found = getattr(value, attr, None)
        if isinstance(found, str):
            return found
    return str(value)


def _texts(value: Any) -> list[str]:
    if not value:
        return []
    if isinstance(value, str | dict):
        value = [value]
    return [t for t in (text_of(v).strip() for v in value) if t]


@dataclass(slots=True)
class StateView:
    """The session state as the packet needs it (the tracker's SessionState, read by name)."""

    session_id: str
    status: str = "active"
    active_topics: list[str] = field(default_factory=list)
    pending_clarifications: list[str] = field(default_factory=list)
    open_loops: list[str] = field(default_factory=list)
    active_job_refs: list[str] = field(default_factory=list)
    resolved_entities: dict[str, str] = field(default_factory=dict)
    last_intent: str | None = None
    last_response_type: str | None = None
    turn_count: int = 0
    rolling_summary: str = ""
    raw: JSON = field(default_factory=dict)  # the tracker's state as JSON, for checkpoints

    @classmethod
    def from_state(cls, state: Any, session_id: str) -> StateView:
        resolved = getattr(state, "resolved_entities", None) or {}
        raw: JSON = {}
        to_dict = getattr(state, "to_dict", None)
        if callable(to_dict):
            raw = dict(to_dict())
        elif is_dataclass(state) and not isinstance(state, type):
            raw = {f.name: getattr(state, f.name) for f in fields(state)}
        raw = json.loads(json.dumps(raw, default=str, ensure_ascii=False))
        return cls(
            session_id=str(getattr(state, "session_id", session_id) or session_id),
            status=str(getattr(state, "status", "active") or "active"),
            active_topics=_texts(getattr(state, "active_topics", None)),
            pending_clarifications=_texts(getattr(state, "pending_clarifications", None)),
            open_loops=_texts(getattr(state, "open_loops", None)),
            active_job_refs=_texts(getattr(state, "active_job_refs", None)),
            resolved_entities={str(k): text_of(v) for k, v in dict(resolved).items()},
            last_intent=getattr(state, "last_intent", None),
            last_response_type=getattr(state, "last_response_type", None),
            turn_count=int(getattr(state, "turn_count", 0) or 0),
            rolling_summary=str(getattr(state, "rolling_summary", "") or ""),
            raw=raw,
        )


#: The tracker's state of a session (``state/session_state.py``; context does not import state).
StateOf = Callable[[str], Any]


def _fallback_state(store: MessageLog, session: Session, record: SummaryRecord | None) -> StateView:
    """Turn count, intent and job refs straight from the log (no tracker attached)."""
    after = record.last_message_id if record is not None else 0
    tail = list(store.iter_messages(session.id, after_id=after, include_hidden=False))
    turns = (record.covered_turns if record is not None else 0) + len(split_turns(tail))
    recent = store.list_turns(session.id, limit=5)
    jobs = list(dict.fromkeys(j for t in recent for j in t.job_refs))
    return StateView(
        session_id=session.id,
        status=session.status,
        active_job_refs=jobs,
        last_intent=recent[-1].intent if recent else None,
        turn_count=turns,
        rolling_summary=record.text if record is not None else "",
    )


def session_state(
    store: MessageLog, state_of: StateOf | None, session: Session, record: SummaryRecord | None = None
) -> StateView:
    """The tracker's state for the session (``state_of``), or a minimal one read from the log."""
    if state_of is not None:
        try:
            return StateView.from_state(state_of(session.id), session.id)
        except MemlaneError:
            log.warning("session state of %s unavailable; using the log", session.id, exc_info=True)
    return _fallback_state(store, session, record)
