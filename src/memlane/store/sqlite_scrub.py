"""Forgetting on SQLite: deleted text must be gone from the files, not only from the rows.

FTS5 keeps a deleted row's tokens in its segment b-trees (``*_fts_data``) until segments
merge, and freed pages keep their old bytes. So a forget deletes with ``PRAGMA
secure_delete`` on, then merges the full-text indexes (``'optimize'``) and checkpoints the
WAL (``SQLiteStore.secure_delete()`` / ``scrub_deleted_text()``; rooms/forget.py uses them).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memlane.store.sqlite import SQLiteStore

log = logging.getLogger(__name__)


#: Full-text indexes whose segments may still hold the tokens of deleted rows.
_FTS_TABLES = ("messages_fts", "notes_fts")


@contextlib.contextmanager
def secure_delete(store: SQLiteStore) -> Iterator[None]:
    """Deletes inside overwrite the freed bytes with zeros (SQLite; elsewhere a no-op).

    The pragma is per connection, and the store writes through one connection, so it is
    switched on only around the forget: ordinary writes do not pay for the extra I/O. The
    store lock is held only to flip it, not across the forget, whose hooks may wait for
    background workers that write too (a write of theirs in between is merely zeroed too).
    """
    conn = store.connection
    with store.lock:
        previous = int(conn.execute("PRAGMA secure_delete").fetchone()[0])
        conn.execute("PRAGMA secure_delete = ON")
    try:
        yield
    finally:
        with store.lock:
            conn.execute(f"PRAGMA secure_delete = {previous}")


def scrub_deleted_text(store: SQLiteStore) -> None:
    """Drop the tokens of deleted rows from the FTS5 indexes and flush the WAL (SQLite).

    Best effort by design: a store without these tables, or a WAL checkpoint held back by
    a reader, must not turn a completed forget into an error; the next forget or merge
    finishes the job.
    """
    conn = store.connection

    def optimize(c: sqlite3.Connection) -> None:
        names = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for table in _FTS_TABLES:
            if table in names:
                # 'optimize' rewrites every segment into one, leaving deleted rows out.
                c.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")

    with secure_delete(store):
        try:
            store.write(optimize)
        except Exception as exc:
            log.warning("could not merge the full-text indexes after a forget: %s", exc)
            return
    with store.lock:
        try:
            # The WAL still holds the old page images until it is checkpointed and truncated.
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.Error as exc:
            log.warning("could not checkpoint the WAL after a forget: %s", exc)
