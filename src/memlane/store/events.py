"""Change events: the outbox every store writes in the same transaction as the change.

Triggers (SQLite and PostgreSQL migration 9) append one row per state change: a session
created, updated (title, prompt, metadata, status, user, agent), archived or forgotten; a
message appended or forgotten; a note added, superseded or removed. A row holds ids, the
kind, the time and the tenant, never content. Ids grow in commit order, so "everything
after id N" is a complete catch-up for a reader that stopped at N.

Following: catch up from an id, then poll the outbox for new ones. Every process on one
database sees every other's changes this way (SQLite file or PostgreSQL): the outbox is
the bus. Polling an empty outbox is one indexed lookup (``memlane bench events``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from memlane.errors import InvalidInputError
from memlane.store import filters

EVENT_KINDS = (
    "session.created", "session.updated", "session.archived", "session.forgotten",
    "message.appended", "message.forgotten", "note.added", "note.superseded", "note.removed",
)


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    id: int
    at: float  # epoch seconds when the change was written
    tenant_id: str | None
    kind: str
    session_id: str | None
    subject_id: int | None  # the message or note id, for message.* and note.* events

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class EventReads:
    """``events_after`` for both stores (they provide ``read`` and ``_dialect``)."""

    _dialect: ClassVar[filters.Dialect]

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        raise NotImplementedError

    def events_after(
        self, after_id: int = 0, *, tenant_id: str | None = None, limit: int = 500
    ) -> list[ChangeEvent]:
        """Events with id > ``after_id``, oldest first; only ``tenant_id``'s when given."""
        mark = self._dialect.mark
        where = f"id > {mark}"
        params: list[object] = [int(after_id)]
        if tenant_id is not None:
            where += f" AND tenant_id = {mark}"
            params.append(tenant_id)
        rows = self.read(
            f"SELECT id, at, tenant_id, kind, session_id, subject_id FROM change_events "
            f"WHERE {where} ORDER BY id LIMIT {mark}",
            (*params, int(limit)),
        )
        return [
            ChangeEvent(int(r[0]), float(r[1]), r[2], str(r[3]), r[4], None if r[5] is None else int(r[5]))
            for r in rows
        ]

    def last_event_id(self) -> int:
        """The newest event's id (0: none yet): where a reader that wants only new events starts."""
        return int(self.read("SELECT COALESCE(MAX(id), 0) FROM change_events")[0][0])


@runtime_checkable
class EventSource(Protocol):
    """The narrow port readers of change events need (both stores provide it)."""

    def events_after(
        self, after_id: int = 0, *, tenant_id: str | None = None, limit: int = 500
    ) -> list[ChangeEvent]: ...
    def last_event_id(self) -> int: ...


#: How often a follower looks for new events when the last look found none.
DEFAULT_POLL_SECONDS = 0.05


def follow(
    source: object,
    since: int | None = None,
    *,
    tenant_id: str | None = None,
    wait: bool = False,
    poll_seconds: float = DEFAULT_POLL_SECONDS,
    stop: threading.Event | None = None,
    batch: int = 500,
) -> Iterator[ChangeEvent]:
    """Events after id ``since`` (None: only events from now on), oldest first.

    ``wait=False`` ends when caught up; ``wait=True`` keeps waiting for new ones until
    ``stop`` is set (or the caller stops iterating).
    """
    if not isinstance(source, EventSource):
        raise InvalidInputError("this store keeps no change events")
    if since is not None and since < 0:
        raise InvalidInputError(f"since must be an event id >= 0, got {since}")
    if poll_seconds <= 0:
        raise InvalidInputError("poll_seconds must be > 0")
    after = source.last_event_id() if since is None else int(since)
    while stop is None or not stop.is_set():
        found = source.events_after(after, tenant_id=tenant_id, limit=batch)
        yield from found
        if found:
            after = found[-1].id
            if len(found) == batch:
                continue  # more waiting: no pause while catching up
        if not wait:
            return
        if stop is not None:
            stop.wait(poll_seconds)
        else:
            time.sleep(poll_seconds)
