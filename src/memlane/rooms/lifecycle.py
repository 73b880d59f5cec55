"""Conversation lifecycle (seed 003): the archive tier and the configured limits.

``maintain`` enforces, in order:

1. promotion of any backlog (so nothing is pruned before its notes are distilled);
2. ``archive_after_days`` (0: never): conversations inactive that long move to the archive tier —
   status ``archived``, out of context, still searchable, restorable;
3. ``auto_prune_days``: conversations inactive that long are deleted;
4. ``max_sessions``: beyond that many conversations the least recently active are deleted;
5. ``max_turns_per_session``: a conversation keeps its newest N user turns (and what
   follows them); older messages are deleted, pinned ones kept.

Deleting for retention keeps the long-term notes learned from the deleted turns — keeping
distilled knowledge while raw turns age out is the point of promotion. Only "forget"
deletes notes too. ``settings.maintain_every_minutes`` runs this on a timer in the
process that owns the Memory.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from memlane.errors import InvalidInputError, SessionNotFoundError
from memlane.models import SessionFilter, utcnow
from memlane.store.events import EventRetention

if TYPE_CHECKING:
    from memlane.rooms.anchor import RoomMemory
    from memlane.store import Store

__all__ = ["MaintainReport", "MaintenanceTimer", "maintain"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class MaintainReport:
    dry_run: bool = False
    promoted_sessions: int = 0
    archived: list[str] = field(default_factory=list)
    pruned_inactive: list[str] = field(default_factory=list)
    pruned_over_limit: list[str] = field(default_factory=list)
    trimmed_messages: dict[str, int] = field(default_factory=dict)
    pruned_events: int = 0  # change events past retention, and forgotten sessions' markers

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "promoted_sessions": self.promoted_sessions,
            "archived": list(self.archived),
            "pruned_inactive": list(self.pruned_inactive),
            "pruned_over_limit": list(self.pruned_over_limit),
            "trimmed_messages": dict(self.trimmed_messages),
            "pruned_events": self.pruned_events,
        }


def _all_sessions(store: Store, flt: SessionFilter) -> list[Any]:
    out: list[Any] = []
    offset = 0
    while True:
        page = store.list_sessions(flt, limit=1000, offset=offset)
        out.extend(page)
        if len(page) < 1000:
            return out
        offset += 1000


def maintain(mem: RoomMemory, *, now: datetime | None = None, dry_run: bool = False) -> MaintainReport:
    """Apply the configured limits once; ``dry_run`` reports without changing anything."""
    settings = mem.settings
    now = now or utcnow()
    report = MaintainReport(dry_run=dry_run)
    service = mem.parts.notes
    if service is not None and not dry_run:
        report.promoted_sessions = service.promoter.catch_up_all()

    if settings.archive_after_days and service is not None:
        cutoff = now - timedelta(days=settings.archive_after_days)
        for s in _all_sessions(mem.store, SessionFilter(inactive_before=cutoff)):
            if s.status == "archived":
                continue
            if not dry_run:
                service.store.archive_session(s.id, f"inactive since {s.last_active_at:%Y-%m-%d}")
            report.archived.append(s.id)

    doomed: list[str] = []
    if settings.auto_prune_days is not None:
        cutoff = now - timedelta(days=settings.auto_prune_days)
        report.pruned_inactive = [s.id for s in _all_sessions(mem.store, SessionFilter(inactive_before=cutoff))]
        doomed.extend(report.pruned_inactive)

    if settings.max_sessions is not None:
        newest_first = _all_sessions(mem.store, SessionFilter())
        survivors = [s for s in newest_first if s.id not in set(doomed)]
        report.pruned_over_limit = [s.id for s in survivors[settings.max_sessions:]]
        doomed.extend(report.pruned_over_limit)

    if not dry_run and doomed:
        mem.erase(session_ids=doomed, keep_notes=True)

    if settings.max_turns_per_session is not None:
        limit = settings.max_turns_per_session
        for s in _all_sessions(mem.store, SessionFilter()):
            if s.id in doomed or s.message_count <= limit:
                continue
            ids = _trim_ids(mem.store, s.id, limit)
            if ids:
                report.trimmed_messages[s.id] = len(ids)
                if not dry_run:
                    mem.erase(message_ids=ids, keep_notes=True)
    if not dry_run and isinstance(mem.store, EventRetention):
        # after the erasures above: their markers are new and stay for the other instances
        while pruned := mem.store.prune_events():
            report.pruned_events += pruned
    return report


def _trim_ids(store: Store, session_id: str, max_turns: int) -> list[int]:
    """Ids older than the session's newest ``max_turns`` user messages, pinned ones kept."""
    messages = list(store.iter_messages(session_id))
    user_ids = [m.id for m in messages if m.role == "user" and m.id is not None]
    if len(user_ids) <= max_turns:
        return []
    cut = user_ids[-max_turns]
    return [m.id for m in messages if m.id is not None and m.id < cut and not m.pinned]


class Maintainable(Protocol):
    """Something that applies its lifecycle limits when asked (``Memory.maintain``)."""

    def maintain(self, *, dry_run: bool = False) -> MaintainReport: ...


class MaintenanceTimer:
    """Runs ``mem.maintain()`` every ``minutes`` in a daemon thread until closed."""

    def __init__(self, mem: Maintainable, minutes: float) -> None:
        if minutes <= 0:
            raise InvalidInputError("the maintenance interval must be positive")
        self.mem = mem
        self.interval = minutes * 60.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memlane-maintain", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                report = self.mem.maintain()
                log.info("memlane maintain: %s", report.to_dict())
            except SessionNotFoundError:
                continue  # a session vanished while we looked at it; next round
            except Exception:
                log.exception("scheduled memlane maintain failed")

    def close(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
