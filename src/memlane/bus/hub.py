"""The event bus of one Memory: the durable outbox, woken by the quickest doorbell there is.

Events are always read from the outbox (``change_events``), in id order, after the last
id a follower handed out; that is what makes a catch-up after any disconnect complete,
ordered and free of repeats. What differs between deployments is only who rings:

- this process's own commits (always; the store calls back after each COMMIT);
- PostgreSQL: ``LISTEN memlane_events`` (the outbox trigger NOTIFYs at commit);
- SQLite file: a watcher of ``PRAGMA data_version`` (other processes' commits);
- Redis/Valkey (``redis_url`` in the settings): a pub/sub channel every instance
  publishes to after its commits, replacing LISTEN or the watcher.

A follower also looks every ``recheck_seconds`` without a ring, so a ring lost on the
way (Redis pub/sub is at-most-once) delays an event by that much at worst.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol, runtime_checkable

from memlane.bus.bell import Doorbell
from memlane.errors import InvalidInputError
from memlane.store.events import ChangeEvent, EventSource, lost_since

__all__ = ["EventBus", "Follower", "Subscription", "Waker"]

log = logging.getLogger(__name__)

#: Seconds a follower waits for a ring before it looks at the outbox anyway.
RECHECK_SECONDS = 1.0
#: Longest single wait, so a follower notices its stop event promptly.
_SLICE = 0.25


@runtime_checkable
class Waker(Protocol):
    """Something that rings the bell when another process may have written events."""

    def start(self, timeout: float = 10.0) -> None: ...
    def stats(self) -> dict[str, Any]: ...
    def close(self) -> None: ...


@runtime_checkable
class WakerSource(Protocol):
    """A store that can ring a bell on other processes' commits and on its own."""

    def event_waker(self, bell: Doorbell) -> Waker | None: ...
    def on_commit(self, callback: Callable[[], None]) -> Callable[[], None]: ...


class Follower:
    """Where one reader of the outbox is (the last event id it handed out), for the bus's
    figures: how far behind the outbox its followers are (:meth:`EventBus.figures`)."""

    __slots__ = ("position", "tenant_id")

    def __init__(self, position: int, tenant_id: str | None) -> None:
        self.position = position
        self.tenant_id = tenant_id


class Subscription:
    """A callback fed every event after ``since``, in order, on a thread of its own."""

    def __init__(self, bus: EventBus, callback: Callable[[ChangeEvent], object],
                 since: int | None, tenant_id: str | None) -> None:
        self._stop = threading.Event()
        self._events = bus.follow(since, tenant_id=tenant_id, wait=True, stop=self._stop)
        self._callback = callback
        self._bus = bus
        self.last_id = 0
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="memlane-subscription", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for event in self._events:
                self._callback(event)
                self.last_id = event.id
        except BaseException as exc:  # kept for the owner to see (.error); the thread ends
            self.error = exc
            log.exception("a change-event subscription stopped: its callback or the outbox read failed")

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._bus.bell.ring()
        self._thread.join(timeout)


class EventBus:
    """Follow and subscribe to a store's change events; ``redis_url`` adds Redis as the doorbell."""

    def __init__(self, store: object, *, redis_url: str | None = None, channel_prefix: str = "memlane",
                 recheck_seconds: float = RECHECK_SECONDS) -> None:
        if not isinstance(store, EventSource):
            raise InvalidInputError("this store keeps no change events")
        self.source: EventSource = store
        self.bell = Doorbell()
        self.recheck_seconds = recheck_seconds
        self._lock = threading.Lock()
        self._waker: Waker | None = None
        self._started = False
        self._closed = False
        self._subscriptions: list[Subscription] = []
        self._unhook: Callable[[], None] | None = None
        self._publish: Callable[[], None] | None = None
        self._followers: set[Follower] = set()
        #: Commits of this instance announced to its followers (and, on Redis, to the others).
        self.published = 0
        if redis_url:
            from memlane.bus.redis_bus import RedisWaker

            # made now, not at the first follower: an instance that only writes must
            # still announce its commits to the others
            redis = RedisWaker(redis_url, self.bell, prefix=channel_prefix)
            self._waker, self._publish = redis, redis.publish
        if isinstance(store, WakerSource):
            self._unhook = store.on_commit(self._committed)

    @property
    def kind(self) -> str:
        """Who rings: redis, postgres-notify, sqlite-data-version or local (this process only)."""
        waker = self._make_waker()
        return str(waker.stats()["kind"]) if waker is not None else "local"

    def _make_waker(self) -> Waker | None:
        """The store's doorbell of other processes' commits, made (not started) once."""
        with self._lock:
            if self._waker is None and not self._closed and isinstance(self.source, WakerSource):
                self._waker = self.source.event_waker(self.bell)
            return self._waker

    @property
    def waker(self) -> Waker | None:
        """What hears the other instances (None until a follower started it, or in RAM)."""
        return self._waker

    def _committed(self) -> None:
        self.published += 1
        self.bell.ring()
        if self._publish is not None:
            self._publish()

    def start(self) -> None:
        """Start the doorbell that hears other processes (done by the first follower)."""
        with self._lock:
            if self._started or self._closed:
                return
            self._started = True
        waker = self._make_waker()
        if waker is not None:
            waker.start()

    def follow(
        self,
        since: int | None = 0,
        *,
        tenant_id: str | None = None,
        wait: bool = False,
        stop: threading.Event | None = None,
        batch: int = 500,
    ) -> Iterator[ChangeEvent]:
        """Events after id ``since`` (None: only from now on), oldest first; ``wait=True``
        keeps following until ``stop`` is set or the caller stops iterating."""
        if since is not None and since < 0:
            raise InvalidInputError(f"since must be an event id >= 0, got {since}")
        if wait:
            self.start()
        # "now" is fixed here, not at the first next(): nothing written after this call is missed
        after = self.source.last_event_id() if since is None else int(since)
        return self._follow(after, tenant_id, wait, stop, batch)

    def _follow(self, after: int, tenant_id: str | None, wait: bool,
                stop: threading.Event | None, batch: int) -> Iterator[ChangeEvent]:
        with self.following(after, tenant_id) as me:
            lost = lost_since(self.source, after)
            if lost is not None:
                yield lost  # events it had not read were pruned: caches must drop everything
            while stop is None or not stop.is_set():
                seen = self.bell.generation  # before the read: a ring during it is not lost
                found = self.source.events_after(after, tenant_id=tenant_id, limit=batch)
                for event in found:
                    me.position = event.id  # handed out from here on
                    yield event
                if found:
                    after = found[-1].id
                    if len(found) == batch:
                        continue  # more waiting: no pause while catching up
                if not wait:
                    return
                self._wait(seen, stop)

    @contextlib.contextmanager
    def following(self, position: int, tenant_id: str | None = None) -> Iterator[Follower]:
        """Count a reader of the outbox in the figures while inside; it moves ``.position``
        as it hands events out (the SSE stream and :meth:`follow` do)."""
        me = Follower(position, tenant_id)
        with self._lock:
            self._followers.add(me)
        try:
            yield me
        finally:
            with self._lock:
                self._followers.discard(me)

    def figures(self) -> dict[str, Any]:
        """The bus at a glance: its kind, commits this instance published, the outbox's
        newest event id, the furthest id a follower handed out, and the slowest
        follower's lag (event ids behind, and the age of the oldest event it has not
        handed out yet; 0 when every follower is caught up)."""
        with self._lock:
            followers = list(self._followers)
        newest = self.source.last_event_id()
        lag_ids, lag_seconds = 0, 0.0
        slowest: dict[str | None, int] = {}  # one look per tenant followed
        for f in followers:
            slowest[f.tenant_id] = min(f.position, slowest.get(f.tenant_id, f.position))
        now = time.time()
        for tenant, position in slowest.items():
            waiting = self.source.events_after(position, tenant_id=tenant, limit=1)
            if waiting:
                lag_ids = max(lag_ids, newest - position)
                lag_seconds = max(lag_seconds, now - waiting[0].at)
        return {
            "kind": self.kind, "published": self.published, "rings": self.bell.generation,
            "followers": len(followers), "last_event_id": newest,
            "seen_event_id": max((f.position for f in followers), default=None),
            "lag_events": lag_ids, "lag_seconds": round(lag_seconds, 3),
        }

    def _wait(self, seen: int, stop: threading.Event | None) -> None:
        left = self.recheck_seconds
        while left > 0 and (stop is None or not stop.is_set()) and not self._closed:
            step = min(_SLICE, left)
            if self.bell.wait(seen, step) != seen:
                return
            left -= step

    def subscribe(self, callback: Callable[[ChangeEvent], object], *, since: int | None = None,
                  tenant_id: str | None = None) -> Subscription:
        """Call ``callback(event)`` for each event after ``since`` (None: from now on), in
        order, on a thread of the subscription's own; ``.close()`` stops it."""
        sub = Subscription(self, callback, since, tenant_id)
        with self._lock:
            self._subscriptions.append(sub)
        return sub

    def stats(self) -> dict[str, Any]:
        waker = self._waker.stats() if self._waker is not None else {"kind": "local"}
        return {"bus": waker, "bus_rings": self.bell.generation}

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            subscriptions, self._subscriptions = self._subscriptions, []
        for sub in subscriptions:
            sub.close()
        if self._unhook is not None:
            self._unhook()
        if self._waker is not None:
            self._waker.close()
        self.bell.ring()
