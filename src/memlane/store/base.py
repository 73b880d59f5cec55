"""The storage seam: one narrow Protocol every backend implements.

The conversation log (sessions, messages, turns) is the source of truth. The
keyword index lives in the same transaction as the log. ``derived`` is a small
per-session key/value area for state that can always be rebuilt from the log
(summaries, session state); it is deleted with its session.

The ports themselves (one Protocol per seam) live in :mod:`memlane.ports`; ``Store``
composes them. The conformance suite in ``tests/store_conformance.py`` is the contract: a new
backend is done when it passes it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memlane.errors import LockTimeoutError
from memlane.ports import (
    DerivedRecords,
    KeywordHit,
    KeywordIndex,
    MessageLog,
    NoteRepository,
    Records,
    ResponseCacheRepository,
    SessionLocks,
    TurnRecord,
    VectorIndex,
)
from memlane.store.erase import EraseCounts, EraseRequest

if TYPE_CHECKING:
    from memlane.apikeys import KeyStore

__all__ = ["KeyedLocks", "KeywordHit", "LockTimeout", "Store", "TurnRecord", "remaining"]


#: :meth:`Store.session_lock` gave up waiting because its ``timeout`` ran out
#: (the old name of :class:`memlane.errors.LockTimeoutError`, kept for callers).
LockTimeout = LockTimeoutError


@dataclass(slots=True)
class _KeyedEntry:
    lock: threading.RLock = field(default_factory=threading.RLock)
    users: int = 0  # threads holding or waiting: the entry is dropped when none are left
    depth: int = 0  # re-entrant holds by the owning thread (only the owner changes it)


class KeyedLocks:
    """Re-entrant in-process locks by key, made on demand and dropped when unused.

    The in-process half of ``session_lock`` for both stores: threads of one process
    queue here, so at most one of them waits on the database's lock per key (a
    waiter there holds a connection).
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._entries: dict[str, _KeyedEntry] = {}

    @contextmanager
    def hold(self, key: str, timeout: float | None = None) -> Iterator[bool]:
        """Hold ``key``; yields True for the outermost hold of this thread."""
        with self._guard:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _KeyedEntry()
            entry.users += 1
        try:
            if not entry.lock.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
                raise LockTimeoutError(f"lock {key!r} is held elsewhere in this process")
            try:
                entry.depth += 1
                try:
                    yield entry.depth == 1
                finally:
                    entry.depth -= 1
            finally:
                entry.lock.release()
        finally:
            with self._guard:
                entry.users -= 1
                if entry.users == 0:
                    del self._entries[key]


def remaining(deadline: float | None) -> float | None:
    """Seconds left until a ``time.monotonic()`` deadline (None: no deadline)."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


@runtime_checkable
class Store(MessageLog, KeywordIndex, DerivedRecords, Records, SessionLocks, Protocol):
    """A storage backend: every port of :mod:`memlane.ports` on one database.

    The log, keyword index, derived records and locks are its own methods; the other
    ports are reached through it (each None when this backend cannot keep them), so a
    feature asks the store for a port, never for its type.
    """

    url: str

    # the store's other ports
    def vector_index(self) -> VectorIndex | None:
        """Message vectors in this database, or None (search is then keyword-only)."""
        ...

    def note_repository(self) -> NoteRepository | None:
        """Long-term notes, facets, the archive tier and the audit log, or None."""
        ...

    def response_cache(self) -> ResponseCacheRepository | None:
        """Cached answers (the response cache) in this database, or None."""
        ...

    def key_store(self) -> KeyStore | None:
        """The server's API keys in this database, or None."""
        ...

    def erase(self, request: EraseRequest, *, log: bool = True) -> EraseCounts:
        """Erase sessions, messages and notes with everything derived from them, in one
        transaction (see store/erase.py); ``log`` records the ids in the erasure log."""
        ...

    # aggregates over derived records
    def derived_total(self, kind: str, field: str) -> int:
        """Sum of the integer ``field`` of every derived record of ``kind`` (0 when none)."""
        ...

    # housekeeping
    def stats(self) -> dict[str, Any]: ...
    def close(self) -> None: ...
