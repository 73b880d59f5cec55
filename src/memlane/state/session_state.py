"""The live state of one session (:class:`SessionState`, its open loops) and its JSON form:
what the tracker folds messages into and keeps in the store's ``derived`` area."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memlane.errors import InvalidInputError
from memlane.models import JSON, SESSION_STATUSES, utcnow

#: Bumped when the update rules change, so stored states are rebuilt with the new rules.
STATE_VERSION = 2


#: The PRD's statuses. The session lifecycle adds "ended" and "archived" (models.SESSION_STATUSES).
STATE_STATUSES: tuple[str, ...] = (
    "active", "paused", "resuming", "awaiting_clarification", "shutdown_clean"
)


@dataclass(slots=True)
class OpenLoop:
    """Something the conversation still owes: an unanswered question or a promise."""

    kind: str  # "question" (the user asked) | "promise" (the assistant said it would)
    text: str
    message_id: int | None = None
    turn: int = 0  # turn_count when it was opened

    def to_dict(self) -> JSON:
        return {"kind": self.kind, "text": self.text, "message_id": self.message_id, "turn": self.turn}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OpenLoop:
        kind, text = data.get("kind"), data.get("text")
        if kind not in ("question", "promise") or not isinstance(text, str):
            raise InvalidInputError(f"an open loop needs kind question|promise and text, got {data!r}")
        mid = data.get("message_id")
        return cls(kind, text, int(mid) if isinstance(mid, int) else None, int(data.get("turn") or 0))


def _str_list(data: Mapping[str, Any], key: str) -> list[str]:
    value = data.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidInputError(f"SessionState.{key} must be a list of strings")
    return list(value)


def _opt_str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidInputError(f"SessionState.{key} must be a string or null")
    return value


@dataclass(slots=True)
class SessionState:
    """The live state of one session (PRD-014 ``SessionState`` plus resolved entities)."""

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
    rolling_summary: str | None = None
    updated_at: datetime = field(default_factory=utcnow)
    # Bookkeeping that makes each update O(new messages): the structured loops behind
    # open_loops, the topic scores behind active_topics, the conversation's language
    # and the last message folded in.
    loops: list[OpenLoop] = field(default_factory=list)
    topic_scores: dict[str, float] = field(default_factory=dict)
    language: str = "en"
    last_message_id: int = 0
    last_assistant_message_id: int = 0
    message_count: int = 0
    version: int = STATE_VERSION
    #: Process-local: which forget this copy has seen (not stored, not compared).
    generation: int = field(default=0, compare=False, repr=False)

    def to_dict(self) -> JSON:
        return {
            "session_id": self.session_id,
            "status": self.status,
            "active_topics": list(self.active_topics),
            "pending_clarifications": list(self.pending_clarifications),
            "open_loops": list(self.open_loops),
            "active_job_refs": list(self.active_job_refs),
            "resolved_entities": dict(self.resolved_entities),
            "last_intent": self.last_intent,
            "last_response_type": self.last_response_type,
            "turn_count": self.turn_count,
            "rolling_summary": self.rolling_summary,
            "updated_at": self.updated_at.isoformat(),
            "loops": [loop.to_dict() for loop in self.loops],
            "topic_scores": dict(self.topic_scores),
            "language": self.language,
            "last_message_id": self.last_message_id,
            "last_assistant_message_id": self.last_assistant_message_id,
            "message_count": self.message_count,
            "version": self.version,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionState:
        """Inverse of :meth:`to_dict`; raises InvalidInputError naming a bad field."""
        if not isinstance(data, Mapping):
            raise InvalidInputError("SessionState.from_dict needs a mapping")
        sid = data.get("session_id")
        if not isinstance(sid, str) or not sid:
            raise InvalidInputError("SessionState.session_id must be a non-empty string")
        status = data.get("status", "active")
        if status not in SESSION_STATUSES:
            raise InvalidInputError(
                f"SessionState.status must be one of {sorted(SESSION_STATUSES)}, got {status!r}"
            )
        entities = data.get("resolved_entities") or {}
        if not isinstance(entities, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in entities.items()
        ):
            raise InvalidInputError("SessionState.resolved_entities must map strings to strings")
        updated = data.get("updated_at")
        try:
            when = datetime.fromisoformat(updated) if isinstance(updated, str) else utcnow()
        except ValueError as exc:
            raise InvalidInputError(f"SessionState.updated_at {updated!r} is not ISO-8601") from exc
        scores = data.get("topic_scores") or {}
        if not isinstance(scores, Mapping):
            raise InvalidInputError("SessionState.topic_scores must map topics to scores")
        loops_raw = data.get("loops") or []
        if not isinstance(loops_raw, list):
            raise InvalidInputError("SessionState.loops must be a list")

        def _int(key: str) -> int:
            value = data.get(key) or 0
            if not isinstance(value, int):
                raise InvalidInputError(f"SessionState.{key} must be an integer")
            return value

        state = cls(
            session_id=sid,
            status=str(status),
            active_topics=_str_list(data, "active_topics"),
            pending_clarifications=_str_list(data, "pending_clarifications"),
            open_loops=_str_list(data, "open_loops"),
            active_job_refs=_str_list(data, "active_job_refs"),
            resolved_entities=dict(entities),
            last_intent=_opt_str(data, "last_intent"),
            last_response_type=_opt_str(data, "last_response_type"),
            turn_count=_int("turn_count"),
            rolling_summary=_opt_str(data, "rolling_summary"),
            updated_at=when,
            loops=[OpenLoop.from_dict(x) for x in loops_raw],
            topic_scores={str(k): float(v) for k, v in scores.items()},
            language=str(data.get("language") or "en"),
            last_message_id=_int("last_message_id"),
            last_assistant_message_id=_int("last_assistant_message_id"),
            message_count=_int("message_count"),
            version=_int("version") or STATE_VERSION,
        )
        if "open_loops" in data and not loops_raw and state.open_loops:
            # A state written by another runtime may carry only the flat list.
            state.loops = [OpenLoop("question", text) for text in state.open_loops]
        return state
