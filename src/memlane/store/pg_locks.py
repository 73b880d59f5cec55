"""Session-scoped advisory locks of the PostgreSQL store (``PostgresStore.session_lock``).

Why it looks like this:
- The lock is ``pg_advisory_xact_lock`` inside a transaction opened for it, so it
  spans every process and host on the database and is released by COMMIT, by
  ROLLBACK, or by the server when the holder's connection dies (a crashed worker
  never leaves a session locked).
- The holder's connection comes from a pool of its own, not the store's: a block
  that holds the lock reads and writes through the store's pool, and waiters
  parked on the lock must not be able to drain that pool and starve the holder.
- Threads of one process queue on an in-process lock first, so per key at most one
  connection of each process waits on the server, and a nested hold in the same
  thread is free (re-entrant).
- The key lives in its own namespace: ``update_derived`` locks (session, kind)
  on the store's pool, and a block holding this lock may call it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool

from memlane.errors import LockTimeoutError, StorageError
from memlane.store.base import KeyedLocks, remaining

Conn = psycopg.Connection[TupleRow]


class PgSessionLocks:
    """Advisory locks by (session, scope); one per PostgresStore, opened on first use."""

    def __init__(self, conninfo: str, *, max_size: int, timeout: float, kwargs: dict[str, Any]) -> None:
        self._conninfo = conninfo
        self._max_size = max(1, max_size)
        # Waiting for a lock connection means waiting for other holders in this
        # process, which may be summarising with an LLM: be patient.
        self._timeout = max(timeout, 60.0)
        self._kwargs = kwargs
        self._inproc = KeyedLocks()
        self._pool: ConnectionPool[Conn] | None = None
        self._closed = False

    def _get_pool(self) -> ConnectionPool[Conn]:
        with self._inproc.hold("\x00pool"):
            if self._closed:
                raise StorageError("this PostgresStore is closed")
            if self._pool is None:
                pool: ConnectionPool[Conn] = ConnectionPool(
                    self._conninfo, min_size=0, max_size=self._max_size, timeout=self._timeout,
                    open=False, name="memlane-locks", kwargs=self._kwargs,
                )
                pool.open()
                self._pool = pool
            return self._pool

    @contextlib.contextmanager
    def hold(self, session_id: str, scope: str, timeout: float | None = None) -> Iterator[None]:
        # PostgreSQL text cannot hold NUL; the key is only hashed, so escaping is enough.
        key = f"memlane-session-lock\x1f{session_id}\x1f{scope}".replace("\x00", "\\0")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._inproc.hold(key, timeout) as outermost:
            if not outermost:
                yield
                return
            pool = self._get_pool()
            with pool.connection(timeout=remaining(deadline)) as conn:
                self._acquire(conn, key, remaining(deadline))
                try:
                    yield
                finally:
                    # Nothing was written on this connection: ROLLBACK just ends the
                    # transaction and frees the lock. A dead connection freed it already.
                    if not conn.broken:
                        with contextlib.suppress(psycopg.Error):
                            conn.execute("ROLLBACK")

    @staticmethod
    def _acquire(conn: Conn, key: str, timeout: float | None) -> None:
        try:
            conn.execute("BEGIN")
            if timeout is not None:
                # lock_timeout 0 means "wait forever": never send less than 1 ms
                conn.execute(
                    "SELECT set_config('lock_timeout', %s, true)", (f"{max(1, int(timeout * 1000))}ms",)
                )
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
        except psycopg.errors.LockNotAvailable as exc:
            conn.execute("ROLLBACK")
            raise LockTimeoutError(f"session lock {key.split(chr(31), 1)[1]!r} is held by another process") from exc
        except psycopg.Error as exc:
            if not conn.broken:
                with contextlib.suppress(psycopg.Error):
                    conn.execute("ROLLBACK")
            raise StorageError(f"cannot take a PostgreSQL advisory lock: {str(exc).strip()}") from exc

    def close(self) -> None:
        with self._inproc.hold("\x00pool"):
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
