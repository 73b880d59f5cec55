"""The storage seam: one narrow Protocol every backend implements.

The conversation log (sessions, messages, turns) is the source of truth. The
keyword index lives in the same transaction as the log. ``derived`` is a small
per-session key/value area for state that can always be rebuilt from the log
(summaries, session state); it is deleted with its session.

The conformance suite in ``tests/store_conformance.py`` is the contract: a new
backend is done when it passes it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from memlane.errors import LockTimeoutError
from memlane.models import JSON, Message, MessageFilter, Session, SessionFilter, Turn


@dataclass(slots=True)
class TurnRecord:
    """Per-turn fields stored beside the two messages of a store_interaction call."""

    turn_id: str
    intent: str | None = None
    action_name: str | None = None
    job_refs: tuple[str, ...] = ()
    model_used: str | None = None
    confidence_score: float | None = None
    processing_time: float | None = None
    resolved_query: str | None = None
    context_used: bool | None = None
    metadata: JSON | None = None


@dataclass(slots=True)
class KeywordHit:
    message: Message
    score: float  # larger is better (negated BM25)


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
class Store(Protocol):
    """Durable conversation log. Every write is one transaction."""

    url: str

    # sessions
    def create_session(self, session: Session) -> Session: ...
    def get_session(self, session_id: str) -> Session | None: ...
    def update_session(self, session_id: str, **changes: Any) -> Session: ...
    def list_sessions(
        self, flt: SessionFilter, *, limit: int = 50, offset: int = 0
    ) -> list[Session]: ...
    def delete_session(self, session_id: str) -> bool: ...
    def sessions_inactive_before(self, cutoff: datetime, *, limit: int = 10_000) -> list[str]: ...

    # messages
    def append(
        self, session_id: str, messages: Sequence[Message], turn: TurnRecord | None = None
    ) -> list[Message]: ...
    def recent_messages(
        self,
        session_id: str,
        limit: int,
        *,
        before_id: int | None = None,
        include_hidden: bool = False,
    ) -> list[Message]:
        """Newest first, at most ``limit``, strictly older than ``before_id`` if given."""
        ...

    def iter_messages(
        self, session_id: str | None = None, *, after_id: int = 0, batch: int = 500,
        include_hidden: bool = True,
    ) -> Iterator[Message]:
        """Oldest first; all sessions when session_id is None (for reindex and export)."""
        ...

    def get_messages(self, ids: Sequence[int]) -> list[Message]: ...
    def update_message(
        self,
        message_id: int,
        *,
        importance: float | None = None,
        pinned: bool | None = None,
        metadata: JSON | None = None,
    ) -> Message: ...
    def restore_session(
        self,
        session: Session,
        messages: Sequence[Message],
        turns: Sequence[tuple[TurnRecord, int, int]],
    ) -> None:
        """Write a whole session exactly as given (import, migrate): one transaction.

        ``turns`` pairs each record with the positions of its user and assistant
        message in ``messages``.
        """
        ...

    def hide_messages(self, session_id: str, *, up_to_id: int | None = None) -> int: ...
    def delete_messages(self, ids: Sequence[int]) -> int: ...
    def count_messages(self, session_id: str | None = None) -> int: ...
    def find_tool_call(self, session_id: str, tool_call_id: str) -> bool: ...
    def message_ids(
        self, session_id: str, *, offset: int = 0, limit: int | None = None, include_hidden: bool = False
    ) -> list[int]:
        """Ids of a session's messages, oldest first, from position ``offset``."""
        ...

    # turns
    def list_turns(self, session_id: str, *, limit: int = 50) -> list[Turn]:
        """The newest ``limit`` turns, oldest first."""
        ...

    # keyword index
    def keyword_search(
        self, query: str, flt: MessageFilter, *, limit: int = 50
    ) -> list[KeywordHit]: ...

    # derived, rebuildable state
    def put_derived(self, session_id: str, kind: str, value: JSON) -> None: ...
    def get_derived(self, session_id: str, kind: str) -> JSON | None: ...
    def delete_derived(self, session_id: str, kind: str | None = None) -> int: ...
    def session_lock(
        self, session_id: str, scope: str, *, timeout: float | None = None
    ) -> AbstractContextManager[None]:
        """Hold an exclusive lock on (session, scope) for the ``with`` block.

        For read-modify-write of a session's derived records (summary, state, note
        promotion): read, compute and write inside the block and no other holder of
        the same (session, scope) interleaves. Re-entrant within a thread; appends to
        the session never wait for it. PostgreSQL: a transaction-scoped advisory lock,
        so it spans every process and host on the database. SQLite: an in-process lock,
        then a byte-range lock on ``<db>-locks`` for other processes on the file. Raises :class:`~memlane.errors.LockTimeoutError` when ``timeout`` seconds pass first.
        """
        ...

    # records: opaque bytes by (namespace, key) for integrations (store/records.py)
    def put_records(self, namespace: str, items: Sequence[tuple[str, bytes]]) -> None: ...
    def get_record(self, namespace: str, key: str) -> bytes | None: ...
    def list_records(
        self, namespace: str, *, prefix: str = "", descending: bool = False
    ) -> list[tuple[str, bytes]]: ...
    def record_namespaces(self, prefix: str = "") -> list[str]: ...
    def delete_records(
        self, namespace: str, keys: Sequence[str] | None = None, *, prefix: str = ""
    ) -> int: ...

    # housekeeping
    def stats(self) -> dict[str, Any]: ...
    def rebuild_keyword_index(self) -> int: ...
    def close(self) -> None: ...
