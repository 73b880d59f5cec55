"""Raw SQLite baselines for the benchmarks: the same row written or searched without memlane.

``memlane bench write`` times memlane's add beside a raw ``sqlite3`` insert of the same row
(into memlane's own schema, and into a bare table without the keyword-index trigger);
``memlane bench search`` times sqlite-vec's ``vec0`` KNN beside our vector index. Their SQL
lives here because SQL lives in ``store/``; the benches only time the callables.
"""

from __future__ import annotations

import importlib.util
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from memlane.store.sqlite import SQLiteStore

__all__ = ["Vec0Table", "memlane_schema_insert", "plain_table_insert"]

Insert = Callable[[], None]


def _insert_into(conn: sqlite3.Connection, session_id: str, text: str, *, keyword_row: bool = False) -> Insert:
    # With ``keyword_row`` the row names its language, so memlane's index trigger writes its
    # FTS5 row (stemmed) in the same transaction; memlane's own add leaves that row to the
    # keyword backlog (store migration 18), which this baseline does not get to skip.
    columns, values = ("lang, ", "'en', ") if keyword_row else ("", "")

    def insert() -> None:
        now = time.time()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            f"INSERT INTO messages ({columns}session_id, role, content, created_at, metadata, token_count) "
            f"VALUES ({values}?, 'user', ?, ?, '{{}}', 30)",
            (session_id, text, now),
        )
        conn.execute(
            "UPDATE sessions SET message_count = message_count + 1, updated_at = ?, "
            "last_active_at = ? WHERE id = ?",
            (now, now, session_id),
        )
        conn.execute("COMMIT")

    return insert


def memlane_schema_insert(path: Path, durability: str, text: str) -> tuple[Insert, Callable[[], None]]:
    """(insert one message row and its FTS5 row with raw SQL into memlane's schema, close)."""
    store = SQLiteStore(path, durability=durability)
    store.write(
        lambda c: c.execute(
            "INSERT INTO sessions (id, created_at, updated_at, last_active_at) VALUES ('raw', 0, 0, 0)"
        )
    )
    return _insert_into(store.connection, "raw", text, keyword_row=True), store.close


def plain_table_insert(path: Path, durability: str, text: str) -> tuple[Insert, Callable[[], None]]:
    """(insert the same row into a bare table without the keyword-index trigger, close):
    the bare cost of the row."""
    plain = sqlite3.connect(path, isolation_level=None)
    plain.execute("PRAGMA journal_mode = WAL")
    plain.execute(f"PRAGMA synchronous = {durability.upper()}")
    plain.execute(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, message_count INTEGER DEFAULT 0, "
        "updated_at REAL, last_active_at REAL)"
    )
    plain.execute(
        "CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, role TEXT, "
        "content TEXT, created_at REAL, metadata TEXT, token_count INTEGER)"
    )
    plain.execute("CREATE INDEX m_s ON messages(session_id, id)")
    plain.execute("INSERT INTO sessions (id) VALUES ('raw')")
    return _insert_into(plain, "raw", text), plain.close


def _vec0_connection(path: Path) -> Any:
    """A connection with the sqlite-vec extension loaded, or None.

    Python's own sqlite3 may be built without extension loading (this project's venv
    Python is); apsw (in the ``bench`` extra) brings its own SQLite that allows it."""
    import sqlite_vec

    conn: Any = sqlite3.connect(path)
    if hasattr(conn, "enable_load_extension"):
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
        return conn
    conn.close()
    if importlib.util.find_spec("apsw") is None:
        return None
    import apsw

    conn = apsw.Connection(str(path))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.enable_load_extension(False)
    return conn


class Vec0Table:
    """sqlite-vec's ``vec0`` table of the same vectors (cosine), for the search bench."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    @classmethod
    def open(cls, path: Path, dimension: int) -> Vec0Table | None:
        """A new table in ``path``, or None when no SQLite here can load extensions."""
        conn = _vec0_connection(path)
        if conn is None:
            return None
        conn.execute(
            f"CREATE VIRTUAL TABLE vecs USING vec0(embedding float[{int(dimension)}] "
            "distance_metric=cosine, user_id text)"
        )
        return cls(conn)

    def load(self, ids: list[int], vectors: np.ndarray[Any, np.dtype[np.float32]], user_id: str) -> None:
        rows = [(mid, vectors[j].tobytes(), user_id) for j, mid in enumerate(ids)]
        with self._conn:
            self._conn.executemany("INSERT INTO vecs(rowid, embedding, user_id) VALUES (?, ?, ?)", rows)

    def knn(self, vector: np.ndarray[Any, np.dtype[np.float32]], k: int, user_id: str | None = None) -> list[Any]:
        query = f"SELECT rowid, distance FROM vecs WHERE embedding MATCH ? AND k = {int(k)}"
        if user_id is None:
            return list(self._conn.execute(query, (vector.tobytes(),)).fetchall())
        return list(self._conn.execute(query + " AND user_id = ?", (vector.tobytes(), user_id)).fetchall())

    def version(self) -> str:
        return str(self._conn.execute("SELECT vec_version()").fetchall()[0][0])

    def close(self) -> None:
        self._conn.close()
