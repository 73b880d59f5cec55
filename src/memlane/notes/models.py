"""Records of the long-term notes lane: notes, candidates, facets and audit entries.

Plain dataclasses like :mod:`memlane.models`; the store turns rows into these.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from memlane.models import JSON, utcnow

#: What a note is about. ``important`` is what someone asked to keep ("remember this").
NOTE_KINDS: frozenset[str] = frozenset(
    {"preference", "fact", "decision", "commitment", "link", "important", "person"}
)
#: Where a note came from: the rule-based gate, an LLM extractor, a chat command, the API.
NOTE_ORIGINS: frozenset[str] = frozenset({"extracted", "llm", "command", "api"})
FACET_KINDS: frozenset[str] = frozenset({"entity", "link", "action", "time"})


def _plain(value: object) -> object:
    return value.isoformat() if isinstance(value, datetime) else value


@dataclass(slots=True)
class Note:
    """One version of a long-term note.

    ``user_id`` is whose note it is (usually who said it). A note whose ``user_id`` is the
    Anchor is shared by every conversation of the tenant; any other note belongs to the
    conversation it was learned in (``session_id``). Whether a user is the Anchor is decided
    when notes are read, never stored, so changing the setting changes it everywhere.

    ``slot`` names what single thing the note states ("pref:coffee", "attr:city", "work")
    so a newer statement about the same slot can supersede it; ``valid_to`` is set then and
    the old version stays in the lineage (``mem.note_history``).
    """

    text: str
    kind: str = "fact"
    id: int | None = None
    lineage_id: int | None = None
    tenant_id: str = "default"
    user_id: str | None = None
    session_id: str | None = None
    slot: str | None = None
    value: str | None = None
    polarity: int = 1
    author_id: str | None = None
    author_name: str | None = None
    importance: float = 0.5
    confidence: float = 1.0
    entities: list[str] = field(default_factory=list)
    metadata: JSON = field(default_factory=dict)
    origin: str = "extracted"
    valid_from: datetime = field(default_factory=utcnow)
    valid_to: datetime | None = None
    supersedes: int | None = None
    superseded_by: int | None = None
    seen_count: int = 1
    source_ids: list[int] = field(default_factory=list)
    created_at: datetime = field(default_factory=utcnow)
    updated_at: datetime = field(default_factory=utcnow)

    @property
    def current(self) -> bool:
        """True while nothing has superseded or expired the note."""
        return self.valid_to is None

    def to_dict(self) -> JSON:
        out: JSON = {f.name: _plain(getattr(self, f.name)) for f in fields(self)}
        out["entities"] = list(self.entities)
        out["source_ids"] = list(self.source_ids)
        out["current"] = self.current
        return out


@dataclass(slots=True)
class NoteCandidate:
    """What an extractor proposes; the gate scores it and decides whether to write it.

    ``negates`` lists slots whose current *positive* notes this statement contradicts
    without sharing their slot ("I prefer tea over coffee" negates ``pref:coffee``).
    """

    text: str
    kind: str
    user_id: str | None
    source_ids: list[int]
    session_id: str
    author_id: str | None = None
    author_name: str | None = None
    slot: str | None = None
    value: str | None = None
    polarity: int = 1
    importance: float = 0.5
    confidence: float = 1.0
    entities: list[str] = field(default_factory=list)
    negates: list[str] = field(default_factory=list)
    valid_from: datetime = field(default_factory=utcnow)
    origin: str = "extracted"
    metadata: JSON = field(default_factory=dict)


@dataclass(slots=True)
class Facet:
    """An entity, link, date or system action found in one message."""

    message_id: int
    session_id: str
    kind: str
    value: str
    at: datetime = field(default_factory=utcnow)

    def to_dict(self) -> JSON:
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}


@dataclass(slots=True)
class AuditEntry:
    """One memory command: who asked what, when, and what came of it."""

    action: str
    actor_id: str | None
    is_anchor: bool
    allowed: bool
    result: str
    session_id: str | None = None
    actor_name: str | None = None
    command: str | None = None
    tenant_id: str = "default"
    detail: JSON = field(default_factory=dict)
    at: datetime = field(default_factory=utcnow)
    id: int | None = None

    def to_dict(self) -> JSON:
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}


@dataclass(slots=True)
class WriteOutcome:
    """What ``write_if_worthy`` did with one candidate."""

    action: str  # "created" | "merged" | "superseded" | "historical" | "rejected"
    note: Note | None = None
    superseded: list[Note] = field(default_factory=list)
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "note": self.note.to_dict() if self.note else None,
            "superseded": [n.to_dict() for n in self.superseded],
            "reason": self.reason,
        }
