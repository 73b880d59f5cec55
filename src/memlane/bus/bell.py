"""A doorbell: "something new may be in the outbox", rung by whoever learns of it first.

The durable outbox (``change_events``) is the only source of events; a bell carries no
event, only the news that it is worth looking. Followers remember the last id they
handed out and read ``events_after`` it on every ring, so a lost, doubled or late ring
can delay an event but never lose, repeat or reorder one. Rings come from this
process's own commits, PostgreSQL's NOTIFY, SQLite's ``data_version`` or a Redis
channel (see :mod:`memlane.bus.hub`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["Doorbell"]

log = logging.getLogger(__name__)


class Doorbell:
    """A generation counter with a condition: ``wait(seen)`` returns once it moved past ``seen``."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._generation = 0
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._next_token = 0

    @property
    def generation(self) -> int:
        with self._cond:
            return self._generation

    def ring(self) -> None:
        with self._cond:
            self._generation += 1
            self._cond.notify_all()
            callbacks = list(self._callbacks.values())
        for callback in callbacks:  # outside the lock: a callback may ring or subscribe
            try:
                callback()
            except Exception:  # one broken listener must not silence the others or the ringer
                log.exception("a doorbell callback failed")

    def wait(self, seen: int, timeout: float) -> int:
        """Block until the generation differs from ``seen`` or ``timeout`` passes; the generation now."""
        with self._cond:
            self._cond.wait_for(lambda: self._generation != seen, timeout)
            return self._generation

    def on_ring(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (on the ringing thread, so keep it short) at every ring; returns
        the function that stops it. For asyncio: ``loop.call_soon_threadsafe(event.set)``."""
        with self._cond:
            token = self._next_token
            self._next_token += 1
            self._callbacks[token] = callback

        def cancel() -> None:
            with self._cond:
                self._callbacks.pop(token, None)

        return cancel
