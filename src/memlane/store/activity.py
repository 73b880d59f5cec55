"""Counts per UTC day for pictures of a memory over time (the inspector's charts), and
counts per language (``messages.lang``, judged when a message is written) for its facets.

Both SQL stores answer these with one grouped query each (``sql_reads.py``), so a chart
over a million messages reads a few hundred rows, never the messages themselves.
"""

from __future__ import annotations

from datetime import date
from typing import Protocol, runtime_checkable

from memlane.models import MessageFilter, SessionFilter


@runtime_checkable
class Activity(Protocol):
    """The narrow port the charts read (both stores provide it)."""

    def messages_per_day(self, flt: MessageFilter) -> list[tuple[date, str, int]]:
        """(UTC day, role, messages) for the messages ``flt`` selects, oldest day first."""
        ...

    def sessions_per_day(self, flt: SessionFilter) -> list[tuple[date, int]]:
        """(UTC day, sessions created) for the sessions ``flt`` selects, oldest day first."""
        ...

    def messages_per_language(self, flt: MessageFilter) -> list[tuple[str, str | None, int]]:
        """(session id, language or None when never judged, messages) for the messages
        ``flt`` selects, by session then language."""
        ...

    def message_languages(self, session_id: str) -> list[tuple[int, str | None]]:
        """(message id, language or None) of every message of a session, oldest first."""
        ...
