"""Reference resolution (seed 004), English and German. Work in progress."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from memlane.models import Message


@dataclass(slots=True)
class Reference:
    text: str
    kind: str
    start: int = 0
    end: int = 0
    target: str | None = None
    message_id: int | None = None
    message_text: str | None = None
    confidence: float = 0.0


@dataclass(slots=True)
class Resolution:
    query: str
    resolved_query: str
    references: list[Reference] = field(default_factory=list)
    confidence: float = 1.0
    language: str = "en"
    clarification: str | None = None


def has_reference_cues(text: str) -> bool:
    return False


def resolve(
    query: str,
    history: Sequence[Message],
    *,
    job_refs: Sequence[str] = (),
    language: str | None = None,
) -> Resolution:
    return Resolution(query, query)
