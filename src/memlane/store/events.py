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

Retention: every writing process that runs for a while prunes the outbox every
:data:`PRUNE_EVERY_SECONDS` (after a commit, at most :data:`PRUNE_BATCH` rows at a time;
``memlane maintain`` prunes too): events older than
``event_retention_seconds`` go, and a forgotten session's ``session.forgotten`` marker,
the last row naming it (SQLite migration 12, PostgreSQL 11, removed the others when it went), goes after
:data:`FORGOTTEN_MARKER_SECONDS`. The highest id pruned is kept: a follower that
stopped before it has missed events, and is told so by one ``events.lost`` event (drop
every cache, then go on) instead of silently resuming.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

from memlane.store import filters

log = logging.getLogger(__name__)
T = TypeVar("T")

EVENT_KINDS = (
    "session.created", "session.updated", "session.archived", "session.forgotten",
    "message.appended", "message.forgotten", "note.added", "note.superseded", "note.removed",
)
#: Not in the outbox: what a follower gets when events it had not read were pruned.
LOST = "events.lost"

#: Default retention of events (``event_retention_days`` in the settings sets it).
DEFAULT_RETENTION_SECONDS = 7 * 86_400.0
#: How long a session.forgotten marker (a forgotten session's id) stays: long enough for
#: every running instance to drop what it cached, short enough that forget stays final.
FORGOTTEN_MARKER_SECONDS = 3_600.0
PRUNE_EVERY_SECONDS = 600.0
PRUNE_FIRST_SECONDS = 60.0
PRUNE_BATCH = 10_000


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
    event_retention_seconds: float = DEFAULT_RETENTION_SECONDS
    _prune_due = 0.0  # monotonic time of the next prune after a commit

    def on_commit(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` after every committed write of this store (the event bus
        rings its doorbell there); returns the function that stops it."""
        self._commit_hooks = (*self._commit_hooks, callback)

        def cancel() -> None:
            self._commit_hooks = tuple(h for h in self._commit_hooks if h is not callback)

        return cancel

    def _committed(self) -> None:
        now = time.monotonic()
        if not self._prune_due:
            # not at the first commit: a short-lived process (a CLI call, memlane doctor)
            # leaves the outbox as it found it; memlane maintain prunes on demand
            self._prune_due = now + PRUNE_FIRST_SECONDS
        elif now >= self._prune_due:
            self._prune_due = now + PRUNE_EVERY_SECONDS  # first: the prune commits too
            try:
                self.prune_events()
            except Exception:  # retention is housekeeping: the next round tries again
                log.warning("pruning the change-event outbox failed", exc_info=True)
        for hook in self._commit_hooks:
            try:
                hook()
            except Exception:  # the write is committed: a doorbell's trouble must not undo that
                log.exception("change-event commit callback failed")

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        raise NotImplementedError

    def _write_records(self, fn: Callable[[Any], T]) -> T:
        raise NotImplementedError  # each store's one-transaction write

    def prune_events(self, now: float | None = None, *, retention_seconds: float | None = None,
                     marker_seconds: float = FORGOTTEN_MARKER_SECONDS) -> int:
        """Delete events past retention and session.forgotten markers past theirs (at most
        PRUNE_BATCH); remember the highest id deleted. How many went."""
        m = self._dialect.mark
        now = time.time() if now is None else now
        keep = self.event_retention_seconds if retention_seconds is None else retention_seconds
        doomed = (f"SELECT id FROM change_events WHERE at < {m} OR (kind = 'session.forgotten' "
                  f"AND at < {m}) ORDER BY id LIMIT {int(PRUNE_BATCH)}")
        params = (now - keep, now - marker_seconds)

        def run(conn: Any) -> int:
            ids = [int(r[0]) for r in conn.execute(doomed, params).fetchall()]
            if not ids:
                return 0
            for start in range(0, len(ids), 500):
                clause, chunk = self._dialect.in_list("id", ids[start:start + 500])
                conn.execute(f"DELETE FROM change_events WHERE {clause}", chunk)
            top = max(ids)
            moved = conn.execute(
                f"UPDATE change_events_pruned SET through_id = {m} WHERE one = 1 AND through_id < {m}",
                (top, top)).rowcount
            if not moved and not conn.execute("SELECT 1 FROM change_events_pruned").fetchall():
                conn.execute(f"INSERT INTO change_events_pruned (one, through_id) VALUES (1, {m})", (top,))
            return len(ids)

        return self._write_records(run)

    def pruned_through(self) -> int:
        """The highest event id pruning removed (0: none): a follower behind it missed events."""
        rows = self.read("SELECT through_id FROM change_events_pruned WHERE one = 1")
        return int(rows[0][0]) if rows else 0

    def events_after(
        self, after_id: int = 0, *, tenant_id: str | None = None, limit: int = 500,
        kinds: Sequence[str] | None = None, until: int | None = None,
    ) -> list[ChangeEvent]:
        """Events with id > ``after_id``, oldest first; only ``tenant_id``'s when given, only
        of ``kinds`` when given, and none past id ``until`` when given."""
        mark = self._dialect.mark
        where = f"id > {mark}"
        params: list[object] = [int(after_id)]
        if tenant_id is not None:
            where += f" AND tenant_id = {mark}"
            params.append(tenant_id)
        if until is not None:
            where += f" AND id <= {mark}"
            params.append(int(until))
        if kinds:
            clause, values = self._dialect.in_list("kind", list(kinds))
            where += f" AND {clause}"
            params.extend(values)
        rows = self.read(
            f"SELECT id, at, tenant_id, kind, session_id, subject_id FROM change_events "
            f"WHERE {where} ORDER BY id LIMIT {mark}",
            (*params, int(limit)),
        )
        return [
            ChangeEvent(int(r[0]), float(r[1]), r[2], str(r[3]), r[4], None if r[5] is None else int(r[5]))
            for r in rows
        ]

    def tenant_version(self, tenant_id: str) -> int:
        """The tenant's data version (store/data_versions.py): it moves with every write a
        context packet may read, in that write's transaction; 0 before the first."""
        rows = self.read(f"SELECT version FROM tenant_versions WHERE tenant_id = {self._dialect.mark}",
                         (tenant_id,))
        return int(rows[0][0]) if rows else 0

    def last_event_id(self) -> int:
        """The newest event's id (0: none yet): where a reader that wants only new events starts."""
        # a pruned newest event still counts: "from now on" must not start behind it
        newest, pruned = self.read(
            "SELECT (SELECT COALESCE(MAX(id), 0) FROM change_events), "
            "(SELECT COALESCE(MAX(through_id), 0) FROM change_events_pruned)")[0]
        return max(int(newest), int(pruned))


@runtime_checkable
class EventSource(Protocol):
    """The narrow port readers of change events need (both stores provide it)."""

    def events_after(
        self, after_id: int = 0, *, tenant_id: str | None = None, limit: int = 500,
        kinds: Sequence[str] | None = None, until: int | None = None,
    ) -> list[ChangeEvent]: ...
    def last_event_id(self) -> int: ...
    def pruned_through(self) -> int: ...


@runtime_checkable
class TenantVersions(Protocol):
    """A store that versions each tenant's data (both SQL stores; store/data_versions.py)."""

    def tenant_version(self, tenant_id: str) -> int: ...


@runtime_checkable
class EventRetention(Protocol):
    """A store whose outbox can be pruned (both SQL stores)."""

    def prune_events(self, now: float | None = None, *, retention_seconds: float | None = None,
                     marker_seconds: float = FORGOTTEN_MARKER_SECONDS) -> int: ...


def lost_since(source: EventSource, after: int) -> ChangeEvent | None:
    """The ``events.lost`` event a follower resuming after id ``after`` must see first, or
    None when nothing it had not read was pruned. It carries ``after`` as its id (it is no
    row of the outbox), so resuming from it reads on from the same place."""
    through = source.pruned_through()
    if after >= through:
        return None
    return ChangeEvent(id=after, at=time.time(), tenant_id=None, kind=LOST, session_id=None, subject_id=None)

