"""PostgreSQL's LISTEN/NOTIFY as the doorbell of the change-event outbox.

Migration 9's trigger sends ``NOTIFY memlane_events`` with every event it writes, and
NOTIFY is delivered at COMMIT, so a ring means "committed, go and look". The listener
holds one connection of its own (outside the pool, which hands connections out per
call) and rings the bell at each notification. NOTIFY is not durable: one sent while
the connection was down is gone. So after every (re)connect the listener rings once,
and followers read the outbox after the last id they saw: the outbox makes the
catch-up complete and ordered, NOTIFY only makes it prompt.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import psycopg
from tenacity import Retrying, retry_if_exception_type, stop_when_event_set, wait_exponential

from memlane.bus.bell import Doorbell

log = logging.getLogger(__name__)

CHANNEL = "memlane_events"
#: How long one wait for a notification blocks before the thread checks for close().
_WAIT_SECONDS = 0.5


class PgListener:
    """A thread that LISTENs on ``memlane_events`` and rings ``bell``; reconnects by itself."""

    def __init__(self, conninfo: str, bell: Doorbell, *, application_name: str = "memlane-listen") -> None:
        self._conninfo = conninfo
        self._bell = bell
        self._app = application_name
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._conn: psycopg.Connection[Any] | None = None
        self._thread = threading.Thread(target=self._run, name="memlane-pg-listen", daemon=True)
        self.connects = 0
        self.notifications = 0

    def start(self, timeout: float = 10.0) -> None:
        """Start listening; returns once the first LISTEN is in place (or ``timeout`` passed)."""
        if not self._thread.is_alive() and not self._stop.is_set():
            self._thread.start()
        self._ready.wait(timeout)

    @property
    def listening(self) -> bool:
        return self._ready.is_set()

    def backend_pid(self) -> int | None:
        """The server process of the LISTEN connection (operators and tests terminate it)."""
        conn = self._conn
        return None if conn is None or conn.closed else int(conn.info.backend_pid)

    def stats(self) -> dict[str, Any]:
        return {"kind": "postgres-notify", "connects": self.connects, "notifications": self.notifications}

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _connect(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self._conninfo, autocommit=True, application_name=self._app)
        conn.execute(f"LISTEN {CHANNEL}")
        return conn

    def _run(self) -> None:
        retry = Retrying(
            retry=retry_if_exception_type(psycopg.OperationalError),
            wait=wait_exponential(multiplier=0.05, max=2.0),
            stop=stop_when_event_set(self._stop),
            before_sleep=lambda state: log.warning(
                "LISTEN %s: connection failed, retrying (%s)", CHANNEL,
                state.outcome.exception() if state.outcome else "?"),
            reraise=True,
        )
        while not self._stop.is_set():
            try:
                self._conn = retry(self._connect)
            except psycopg.OperationalError:
                return  # only when closing: the retry stops on close()
            self.connects += 1
            self._ready.set()
            self._bell.ring()  # whatever was written while we were away: catch up now
            try:
                while not self._stop.is_set():
                    for _ in self._conn.notifies(timeout=_WAIT_SECONDS):
                        self.notifications += 1
                        self._bell.ring()
            except psycopg.OperationalError as exc:
                log.warning("LISTEN %s: connection lost (%s); reconnecting", CHANNEL, exc)
            finally:
                conn, self._conn = self._conn, None
                conn.close()
