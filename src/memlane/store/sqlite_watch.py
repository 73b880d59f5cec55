"""SQLite's doorbell for the change-event outbox: ``PRAGMA data_version`` on a connection of its own.

SQLite has no NOTIFY. ``data_version`` changes on a connection whenever another
connection (of this process or any other on the same file) committed since its last
look; it costs no table read, only the shared-memory WAL index. One watcher thread per
store looks every ``interval`` seconds and rings the bell when it changed, so however
many followers a process has, an idle one costs one pragma per interval instead of one
outbox query per follower (``memlane bench events`` measures both).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

from memlane.bus.bell import Doorbell
from memlane.store import sqlite_driver

#: Seconds between two looks; the latency an event from another process can take.
DEFAULT_INTERVAL = 0.02


class DataVersionWatcher:
    """A thread that rings ``bell`` whenever ``data_version`` of the file changes."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], bell: Doorbell,
                 *, interval: float = DEFAULT_INTERVAL) -> None:
        self._connect = connect
        self._bell = bell
        self._interval = interval
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memlane-sqlite-watch", daemon=True)
        self.looks = 0
        self.changes = 0

    def start(self, timeout: float = 10.0) -> None:
        if not self._thread.is_alive() and not self._stop.is_set():
            self._thread.start()
        self._ready.wait(timeout)

    def stats(self) -> dict[str, Any]:
        return {"kind": "sqlite-data-version", "interval_ms": self._interval * 1000,
                "looks": self.looks, "changes": self.changes}

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        conn = self._connect()
        try:
            conn.execute("PRAGMA query_only = ON")
            version = data_version(conn)
            self._ready.set()
            self._bell.ring()
            while not self._stop.wait(self._interval):
                self.looks += 1
                try:
                    now = data_version(conn)
                except sqlite_driver.OPERATIONAL_ERRORS:
                    continue  # busy for a moment (a checkpoint): look again next time
                if now != version:
                    version = now
                    self.changes += 1
                    self._bell.ring()
        finally:
            with contextlib.suppress(*sqlite_driver.ERRORS):
                conn.close()


def data_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA data_version").fetchone()[0])
