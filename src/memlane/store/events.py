"""Change events: the outbox every store writes in the same transaction as the change.

Triggers (SQLite and PostgreSQL migration 9) append one row per state change: a session
created, updated (title, prompt, metadata, status, user, agent), archived or forgotten; a
message appended or forgotten; a note added, superseded or removed. A row holds ids, the
kind, the time and the tenant, never content. Ids grow in commit order, so "everything
after id N" is a complete catch-up for a reader that stopped at N.

Following: catch up from an id, then read the outbox again whenever a doorbell rings
(:mod:`memlane.bus.hub`: PostgreSQL NOTIFY, SQLite ``data_version``, Redis, or this
process's own commits). Every process on one database sees every other's changes this
way: the outbox is the log, the doorbells only make reading it prompt.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from memlane.store import filters

log = logging.getLogger(__name__)

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
    """``events_after`` and commit callbacks for both stores (they provide ``read`` and
    ``_dialect``, and call ``_committed()`` after each COMMIT of a write)."""

    _dialect: ClassVar[filters.Dialect]
    _commit_hooks: tuple[Callable[[], None], ...] = ()

    def on_commit(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` after every committed write of this store (the event bus
        rings its doorbell there); returns the function that stops it."""
        self._commit_hooks = (*self._commit_hooks, callback)

        def cancel() -> None:
            self._commit_hooks = tuple(h for h in self._commit_hooks if h is not callback)

        return cancel

    def _committed(self) -> None:
        for hook in self._commit_hooks:
            try:
                hook()
            except Exception:  # the write is committed: a doorbell's trouble must not undo that
                log.exception("change-event commit callback failed")

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
