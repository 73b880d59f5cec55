"""Per-instance caches that never serve what another instance forgot.

Several processes may share one database (two ``memlane serve`` behind a load balancer, a
bot and a CLI on one SQLite file). Each keeps small caches of derived data: query vectors
and the speakers' names (search), note vectors (notes), the rolling summarizer's state
(summaries), the digest of the last checkpoint written (checkpoints), the token encoding
of each session (Memory). When another process forgets a session, a message or a note,
those copies must go before this process reads again.

Every change is in the store's outbox (``change_events``, written by triggers in the same
transaction as the change), so :class:`CacheSync` reads the outbox before a read that may
use a cache: when the newest event id is still the one it saw last, nothing happened
(one indexed lookup, the whole cost of a read in the common case: ``memlane bench
caches``); otherwise it reads the forget and supersede events since and hands each to
the handlers the parts registered. Reading rather than waiting for a push (LISTEN/NOTIFY,
Redis, ``data_version``) is what makes it exact: a push can arrive after the next read,
the outbox cannot.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from memlane.store.events import ChangeEvent, EventSource, lost_since

__all__ = ["INVALIDATING_KINDS", "CacheSync", "SyncStats"]

log = logging.getLogger(__name__)

#: The events after which a cached copy may hold what is gone or no longer true.
INVALIDATING_KINDS = ("session.forgotten", "message.forgotten", "note.superseded", "note.removed")

#: Called with each invalidating event another process (or this one) wrote.
Handler = Callable[[ChangeEvent], object]


@dataclass(slots=True)
class SyncStats:
    checks: int = 0  # reads that looked at the outbox
    changed: int = 0  # ... and found newer events
    handled: int = 0  # invalidating events handed to the handlers
    seconds: float = 0.0  # time spent looking and handling


class CacheSync:
    """Hands forget and supersede events to the caches' handlers before a read."""

    def __init__(self, source: EventSource) -> None:
        self.source = source
        self._handlers: list[Handler] = []
        self._lock = threading.Lock()
        # Caches start empty: only what happens from now on can make them stale.
        self._seen = source.last_event_id()
        self.stats = SyncStats()

    def on_change(self, handler: Handler) -> None:
        """Register a cache's handler (it must be quick and must not raise)."""
        self._handlers.append(handler)

    @property
    def seen(self) -> int:
        return self._seen

    def sync(self) -> int:
        """Bring every cache up to the outbox; returns how many events were handled."""
        started = time.perf_counter()
        with self._lock:  # one reader at a time hands out events, in order
            self.stats.checks += 1
            newest = self.source.last_event_id()
            handled = 0
            if newest > self._seen:
                self.stats.changed += 1
                lost = lost_since(self.source, self._seen)
                if lost is not None:  # events this process had not read were pruned: drop all
                    self._dispatch(lost)
                    handled += 1
            while newest > self._seen:
                found = self.source.events_after(self._seen, kinds=INVALIDATING_KINDS, until=newest)
                for event in found:
                    self._dispatch(event)
                handled += len(found)
                # Ids become visible in order (store/events.py), so nothing at or below
                # ``newest`` can appear later: the next look starts after it.
                self._seen = newest if len(found) < 500 else found[-1].id
            self.stats.handled += handled
            self.stats.seconds += time.perf_counter() - started
            return handled

    def _dispatch(self, event: ChangeEvent) -> None:
        for handler in self._handlers:
            try:
                handler(event)
            except Exception:  # a cache that cannot drop an entry must not fail the read
                log.exception("cache invalidation handler %r failed on %s", handler, event.kind)

    def to_dict(self) -> dict[str, float]:
        s = self.stats
        return {"checks": s.checks, "changed": s.changed, "handled": s.handled,
                "seconds": round(s.seconds, 6), "seen_event_id": self._seen}
