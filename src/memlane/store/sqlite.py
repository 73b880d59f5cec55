"""The reference store: one SQLite file in WAL mode.

Why these choices:
- WAL lets readers run while one writer appends; ``BEGIN IMMEDIATE`` takes the
  write lock up front so two processes never deadlock upgrading a read lock.
- ``busy_timeout`` waits for short locks inside SQLite; tenacity retries the
  whole transaction with exponential backoff when a lock outlasts it, so
  several processes appending to one file all succeed.
- ``synchronous=FULL`` by default: an acknowledged message survives power loss,
  not only a process crash. ``durability="normal"`` trades that for speed.
- One connection guarded by a lock: the background embedder and the caller's
  thread share it safely, and SQLite serialises writers anyway.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from memlane.errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    SessionNotFoundError,
    StorageError,
)
from memlane.models import (
    JSON,
    SESSION_STATUSES,
    Message,
    MessageFilter,
    Session,
    to_epoch,
)
from memlane.store.base import KeyedLocks, KeywordHit, TurnRecord, remaining
from memlane.store.health import SQLITE_TABLES, StoreHealth, delete_orphans_sql, sqlite_health
from memlane.store.records import SqlRecords
from memlane.store.rows import (
    M_COLS,
    encode_item,
)
from memlane.store.rows import MESSAGE_COLS as _MESSAGE_COLS
from memlane.store.rows import SESSION_COLS as _SESSION_COLS
from memlane.store.sql_reads import SqlReads
from memlane.store.sqlite_locks import FileRangeLocks
from memlane.store.sqlite_rows import (  # noqa: F401  (row_to_* re-exported for callers)
    DIALECT,
    _dumps,
    _message_where,
    _session_where,
    row_to_message,
    row_to_session,
)
from memlane.store.sqlite_schema import MIGRATIONS
from memlane.store.term_budget import TermBudget
from memlane.text import fts5_match, fts5_terms

if TYPE_CHECKING:
    from memlane.apikeys import KeyStore
    from memlane.ports import NoteRepository, VectorIndex

log = logging.getLogger(__name__)
T = TypeVar("T")

_UPDATABLE_SESSION_FIELDS = frozenset(
    {"title", "system_prompt", "metadata", "status", "user_id", "agent_id", "last_active_at"}
)


def _is_locked(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and (
        "locked" in str(exc) or "busy" in str(exc)
    )


class SQLiteStore(SqlReads, SqlRecords):
    """A Store on one SQLite file (or ``:memory:``)."""

    _dialect = DIALECT
    _turn_tiebreak = "rowid"

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        durability: str = "full",
        busy_timeout_ms: int = 5_000,
        lock_retry_seconds: float = 60.0,
    ) -> None:
        if durability not in ("full", "normal"):
            raise InvalidInputError("durability must be 'full' or 'normal'")
        self.path = str(path)
        if self.path != ":memory:":
            p = Path(self.path).expanduser()
            p.parent.mkdir(parents=True, exist_ok=True)
            self.path = str(p)
        self.url = "sqlite://" if self.path == ":memory:" else f"sqlite:///{self.path}"
        self._lock = threading.RLock()
        self._session_locks = KeyedLocks()
        # other processes on the same file: a byte-range lock per key on a sidecar file
        self._file_locks = None if self.path == ":memory:" else FileRangeLocks(self.path + "-locks")
        self._retry_seconds = lock_retry_seconds
        try:
            self._conn = sqlite3.connect(
                self.path,
                timeout=busy_timeout_ms / 1000,
                isolation_level=None,  # we issue BEGIN/COMMIT ourselves
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        self._conn.execute("PRAGMA foreign_keys = ON")
        if self.path != ":memory:":
            self._retrying(lambda: self._conn.execute("PRAGMA journal_mode = WAL").fetchone())
        self._durability = durability.upper()
        self._conn.execute(f"PRAGMA synchronous = {self._durability}")
        self._busy_timeout_ms = int(busy_timeout_ms)
        # Readers get a connection per thread (file databases only): in WAL mode they
        # read the last committed state without waiting for the writer's lock, so a
        # background write's fsync never stalls a caller's read.
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._term_budget = TermBudget()  # keyword queries on a large log: see term_budget.py
        self._migrate()

    # ------------------------------------------------------------ plumbing

    @property
    def connection(self) -> sqlite3.Connection:
        """The raw connection, for components that add their own tables (vectors, notes)."""
        return self._conn

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    def _retrying(self, fn: Callable[[], T]) -> T:
        try:
            return fn()  # the common case: no lock contention, no retry machinery
        except sqlite3.OperationalError as exc:
            if not _is_locked(exc):
                raise StorageError(f"SQLite {self.path!r}: {exc}") from exc
        # Imported on the first contended write, not with the store: most processes never need it.
        from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential_jitter

        retry = Retrying(
            retry=retry_if_exception(_is_locked),
            wait=wait_exponential_jitter(multiplier=0.01, max=1.0),
            stop=stop_after_delay(self._retry_seconds),
            reraise=True,
        )
        try:
            return retry(fn)
        except sqlite3.OperationalError as exc:
            raise StorageError(f"SQLite {self.path!r}: {exc}") from exc

    def _write_records(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return self.write(fn)

    def write(self, fn: Callable[[sqlite3.Connection], T], *, durable: bool = True) -> T:
        """Run ``fn`` in one IMMEDIATE transaction, retried while the file is locked.

        ``durable=False`` is for derived data (state, summaries, vectors) that can be
        rebuilt from the log: its commit skips the fsync, so background work does not
        double the disk flushes of the write path. The next durable commit flushes it.
        """

        def attempt() -> T:
            with self._lock:
                if not durable:
                    self._conn.execute("PRAGMA synchronous = OFF")
                try:
                    return in_transaction()
                finally:
                    if not durable:
                        self._conn.execute(f"PRAGMA synchronous = {self._durability}")

        def in_transaction() -> T:
            with self._lock:
                self._conn.execute("BEGIN IMMEDIATE")
                self._local.writing = True
                try:
                    result = fn(self._conn)
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                finally:
                    self._local.writing = False
                self._conn.execute("COMMIT")
                return result

        try:
            return self._retrying(attempt)
        except sqlite3.IntegrityError as exc:
            raise ConflictError(str(exc)) from exc
        except sqlite3.DatabaseError as exc:
            raise StorageError(f"SQLite {self.path!r}: {exc}") from exc

    def _reader(self) -> sqlite3.Connection | None:
        """This thread's read connection, or None when reads must use the writer's."""
        if self.path == ":memory:" or getattr(self._local, "writing", False):
            return None  # one shared in-RAM database; or read-your-own-uncommitted-writes
        conn: sqlite3.Connection | None = getattr(self._local, "reader", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path, timeout=self._busy_timeout_ms / 1000, isolation_level=None,
                check_same_thread=False,
            )
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
            conn.execute("PRAGMA query_only = ON")
            conn.execute("PRAGMA foreign_keys = ON")
            self._local.reader = conn
            with self._lock:
                self._readers.append(conn)
        return conn

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        def attempt() -> list[Any]:
            reader = self._reader()
            if reader is not None:
                return reader.execute(sql, params).fetchall()
            with self._lock:
                return self._conn.execute(sql, params).fetchall()

        try:
            return self._retrying(attempt)
        except sqlite3.DatabaseError as exc:
            raise StorageError(f"SQLite {self.path!r}: {exc}") from exc

    def _migrate(self) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
            )
            done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
            newest_known = max(MIGRATIONS)
            if done and max(done) > newest_known:
                raise StorageError(
                    f"database {self.path!r} has schema version {max(done)}, newer than this "
                    f"memlane ({newest_known}); upgrade memlane"
                )
            for version in sorted(MIGRATIONS):
                if version in done:
                    continue
                name, sql = MIGRATIONS[version]
                for statement in _split_sql(sql):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations VALUES (?, ?, ?)", (version, name, time.time())
                )

        self.write(run)

    def schema_versions(self) -> list[int]:
        return [r[0] for r in self.read("SELECT version FROM schema_migrations ORDER BY version")]

    # ------------------------------------------------------------ sessions

    def create_session(self, session: Session) -> Session:
        if session.status not in SESSION_STATUSES:
            raise InvalidInputError(f"status must be one of {sorted(SESSION_STATUSES)}")

        def run(conn: sqlite3.Connection) -> None:
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session.id,)).fetchone():
                raise ConflictError(f"session {session.id!r} already exists")
            conn.execute(
                f"INSERT INTO sessions ({_SESSION_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,0)",
                (
                    session.id, session.tenant_id, session.user_id, session.agent_id,
                    session.title, session.system_prompt, _dumps(session.metadata),
                    session.status, to_epoch(session.created_at), to_epoch(session.updated_at),
                    to_epoch(session.last_active_at),
                ),
            )

        self.write(run)
        session.message_count = 0
        return session

    def update_session(self, session_id: str, **changes: Any) -> Session:
        bad = set(changes) - _UPDATABLE_SESSION_FIELDS
        if bad:
            raise InvalidInputError(f"cannot update session field(s) {sorted(bad)}")
        if "status" in changes and changes["status"] not in SESSION_STATUSES:
            raise InvalidInputError(f"status must be one of {sorted(SESSION_STATUSES)}")
        sets, params = ["updated_at = ?"], [time.time()]
        for key, value in changes.items():
            sets.append(f"{key} = ?")
            if key == "metadata":
                value = _dumps(value)
            elif key == "last_active_at":
                value = to_epoch(value)
            params.append(value)

        def run(conn: sqlite3.Connection) -> None:
            cur = conn.execute(
                f"UPDATE sessions SET {', '.join(sets)} WHERE id = ?", (*params, session_id)
            )
            if cur.rowcount == 0:
                raise SessionNotFoundError(session_id)

        self.write(run)
        found = self.get_session(session_id)
        assert found is not None
        return found

    def delete_session(self, session_id: str) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            return conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount > 0

        return self.write(run)

    # ------------------------------------------------------------ messages

    def _insert_messages(
        self, conn: sqlite3.Connection, session_id: str, messages: Sequence[Message]
    ) -> list[Message]:
        stored: list[Message] = []
        for msg in messages:
            cur = conn.execute(
                f"INSERT INTO messages ({_MESSAGE_COLS}) "
                "VALUES (NULL,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    session_id, msg.role, msg.content, msg.name,
                    _dumps(msg.tool_calls) if msg.tool_calls else None,
                    msg.tool_call_id, msg.author_id, msg.author_name, msg.turn_id,
                    to_epoch(msg.created_at), _dumps(msg.metadata), msg.importance,
                    int(msg.pinned), int(msg.hidden), msg.token_count, encode_item(msg.item),
                ),
            )
            new_id = cur.lastrowid
            assert new_id is not None
            for call in msg.tool_calls or ():
                conn.execute(
                    "INSERT OR REPLACE INTO tool_call_ids VALUES (?, ?, ?)",
                    (session_id, call["id"], new_id),
                )
            stored.append(msg.with_(id=new_id, session_id=session_id))
        return stored

    @staticmethod
    def _insert_turn(
        conn: sqlite3.Connection, session_id: str, turn: TurnRecord, user: Message, bot: Message
    ) -> None:
        conn.execute(
            "INSERT INTO turns VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                turn.turn_id, session_id, user.id, bot.id, turn.intent,
                turn.action_name, _dumps(list(turn.job_refs)), turn.model_used,
                turn.confidence_score, turn.processing_time, turn.resolved_query,
                None if turn.context_used is None else int(turn.context_used),
                _dumps(turn.metadata or {}), to_epoch(user.created_at),
            ),
        )

    def append(
        self, session_id: str, messages: Sequence[Message], turn: TurnRecord | None = None
    ) -> list[Message]:
        now = time.time()

        def run(conn: sqlite3.Connection) -> list[Message]:
            if not conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone():
                raise SessionNotFoundError(session_id)
            stored = self._insert_messages(conn, session_id, messages)
            if turn is not None:
                self._insert_turn(conn, session_id, turn, stored[0], stored[-1])
            # Activity follows the messages' own time, so imported history ages correctly.
            last_at = max(to_epoch(m.created_at) for m in messages)
            conn.execute(
                "UPDATE sessions SET message_count = message_count + ?, updated_at = ?, "
                "last_active_at = MAX(last_active_at, ?) WHERE id = ?",
                (len(stored), now, last_at, session_id),
            )
            return stored

        return self.write(run)

    def restore_session(
        self,
        session: Session,
        messages: Sequence[Message],
        turns: Sequence[tuple[TurnRecord, int, int]],
    ) -> None:
        def run(conn: sqlite3.Connection) -> None:
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session.id,)).fetchone():
                raise ConflictError(f"session {session.id!r} already exists")
            conn.execute(
                f"INSERT INTO sessions ({_SESSION_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    session.id, session.tenant_id, session.user_id, session.agent_id,
                    session.title, session.system_prompt, _dumps(session.metadata),
                    session.status, to_epoch(session.created_at), to_epoch(session.updated_at),
                    to_epoch(session.last_active_at), len(messages),
                ),
            )
            stored = self._insert_messages(conn, session.id, messages)
            for record, ui, ai in turns:
                self._insert_turn(conn, session.id, record, stored[ui], stored[ai])

        self.write(run)

    def get_messages(self, ids: Sequence[int]) -> list[Message]:
        out: list[Message] = []
        id_list = [int(i) for i in ids]
        for start in range(0, len(id_list), 500):
            chunk = id_list[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.read(f"SELECT {_MESSAGE_COLS} FROM messages WHERE id IN ({marks})", chunk)
            out.extend(row_to_message(r) for r in rows)
        order = {mid: i for i, mid in enumerate(id_list)}
        out.sort(key=lambda m: order.get(m.id or 0, 0))
        return out

    def update_message(
        self,
        message_id: int,
        *,
        importance: float | None = None,
        pinned: bool | None = None,
        metadata: JSON | None = None,
    ) -> Message:
        sets: list[str] = []
        params: list[Any] = []
        if importance is not None:
            if not 0.0 <= importance <= 1.0:
                raise InvalidInputError("importance must be in 0..1")
            sets.append("importance = ?")
            params.append(float(importance))
        if pinned is not None:
            sets.append("pinned = ?")
            params.append(int(pinned))
        if metadata is not None:
            sets.append("metadata = ?")
            params.append(_dumps(metadata))
        if sets:
            def run(conn: sqlite3.Connection) -> int:
                return conn.execute(
                    f"UPDATE messages SET {', '.join(sets)} WHERE id = ?", (*params, message_id)
                ).rowcount

            if self.write(run) == 0:
                raise NotFoundError(f"message {message_id} does not exist")
        found = self.get_messages([message_id])
        if not found:
            raise NotFoundError(f"message {message_id} does not exist")
        return found[0]

    def hide_messages(self, session_id: str, *, up_to_id: int | None = None) -> int:
        def run(conn: sqlite3.Connection) -> int:
            sql = "UPDATE messages SET hidden = 1 WHERE session_id = ? AND hidden = 0"
            params: list[Any] = [session_id]
            if up_to_id is not None:
                sql += " AND id <= ?"
                params.append(up_to_id)
            return conn.execute(sql, params).rowcount

        return self.write(run)

    def delete_messages(self, ids: Sequence[int]) -> int:
        id_list = [int(i) for i in ids]

        def run(conn: sqlite3.Connection) -> int:
            total = 0
            for start in range(0, len(id_list), 500):
                chunk = id_list[start : start + 500]
                marks = ",".join("?" * len(chunk))
                counts = conn.execute(
                    f"SELECT session_id, COUNT(*) FROM messages WHERE id IN ({marks}) "
                    "GROUP BY session_id",
                    chunk,
                ).fetchall()
                total += conn.execute(
                    f"DELETE FROM messages WHERE id IN ({marks})", chunk
                ).rowcount
                for sid, n in counts:
                    conn.execute(
                        "UPDATE sessions SET message_count = message_count - ? WHERE id = ?",
                        (n, sid),
                    )
            return total

        return self.write(run)

    # ------------------------------------------------------------ turns

    # ------------------------------------------------------------ keyword index

    def keyword_search(
        self, query: str, flt: MessageFilter, *, limit: int = 50
    ) -> list[KeywordHit]:
        terms = self._term_budget.select(
            fts5_terms(query),
            lambda: int(self.read("SELECT COALESCE(MAX(id), 0) FROM messages")[0][0]),
            lambda t: int(self.read(
                "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?", (fts5_match([t]),)
            )[0][0]),
        )
        if not terms:
            return []
        match = fts5_match(terms)
        where, params = _message_where(flt)
        # First rank in the full-text index alone and join only its best rows: joining
        # every matching row to messages and sessions before sorting cost as much as the
        # ranking itself on long posting lists. Exact while at least `limit` of the best
        # `pool` pass the filter (any passing row further down ranks below all of them);
        # a selective filter falls back to filtering every matching row.
        pool = 2 * int(limit) + 50
        best = (
            f"SELECT {M_COLS}, x.rank FROM (SELECT rowid, bm25(messages_fts) AS rank "
            "FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rank LIMIT ?) x "
            "JOIN messages m ON m.id = x.rowid JOIN sessions s ON s.id = m.session_id "
            f"WHERE 1 {where} ORDER BY x.rank LIMIT ?"
        )
        rows = self.read(best, (match, pool, *params, int(limit)))
        if len(rows) < limit:
            every = (
                f"SELECT {M_COLS}, "
                "bm25(messages_fts) AS rank FROM messages_fts "
                "JOIN messages m ON m.id = messages_fts.rowid "
                "JOIN sessions s ON s.id = m.session_id "
                f"WHERE messages_fts MATCH ? {where} ORDER BY rank LIMIT ?"
            )
            rows = self.read(every, (match, *params, int(limit)))
        return [KeywordHit(row_to_message(r[:-1]), -float(r[-1])) for r in rows]

    def rebuild_keyword_index(self) -> int:
        def run(conn: sqlite3.Connection) -> int:
            conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')")
            return int(conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0])

        return self.write(run)

    # ------------------------------------------------------------ derived

    def put_derived(self, session_id: str, kind: str, value: JSON) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO derived VALUES (?, ?, ?, ?) ON CONFLICT(session_id, kind) "
                "DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                (session_id, kind, _dumps(value), time.time()),
            )

        try:
            self.write(run, durable=False)
        except ConflictError as exc:  # FK violation: the session is gone
            raise SessionNotFoundError(session_id) from exc

    @contextmanager
    def session_lock(
        self, session_id: str, scope: str, *, timeout: float | None = None
    ) -> Iterator[None]:
        """A per-(session, scope) lock across threads and processes (see Store.session_lock).

        Not the write lock: a summarizer holding this for an LLM call must not stall
        appends. Threads queue in-process first; the outermost holder then takes a
        byte-range lock on ``<db>-locks`` that other processes on the same file respect.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        key = f"{session_id}\x1f{scope}"
        with self._session_locks.hold(key, timeout) as outermost:
            if not outermost or self._file_locks is None:
                yield
                return
            with self._file_locks.hold(key, remaining(deadline)):
                yield

    def delete_derived(self, session_id: str, kind: str | None = None) -> int:
        def run(conn: sqlite3.Connection) -> int:
            if kind is None:
                return conn.execute(
                    "DELETE FROM derived WHERE session_id = ?", (session_id,)
                ).rowcount
            return conn.execute(
                "DELETE FROM derived WHERE session_id = ? AND kind = ?", (session_id, kind)
            ).rowcount

        return self.write(run)

    # ------------------------------------------------------------ housekeeping

    def stats(self) -> dict[str, Any]:
        row = self.read(
            "SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM messages), "
            "(SELECT COALESCE(SUM(token_count), 0) FROM messages), (SELECT COUNT(*) FROM turns)"
        )[0]
        size = 0
        if self.path != ":memory:":
            for suffix in ("", "-wal"):
                p = Path(self.path + suffix)
                if p.exists():
                    size += p.stat().st_size
        return {
            "backend": "sqlite",
            "url": self.url,
            "sessions": row[0],
            "messages": row[1],
            "tokens": row[2],
            "turns": row[3],
            "bytes": size,
            "schema_version": max(self.schema_versions()),
        }

    # ------------------------------------------------------------ the store's other ports

    def vector_index(self) -> VectorIndex:
        """Message vectors in this file (``message_vectors``, migration 2)."""
        from memlane.store.sqlite_vectors import SQLiteVectorIndex

        return SQLiteVectorIndex(self)

    def note_repository(self) -> NoteRepository:
        """Notes, facets, the archive tier and the audit log in this file (migration 4)."""
        from memlane.store.sqlite_notes import SQLiteNoteStore

        return SQLiteNoteStore(self)

    def key_store(self) -> KeyStore:
        """The server's API keys in this file (migration 5)."""
        from memlane.store.keys import SqlKeyStore

        return SqlKeyStore(self, DIALECT)

    def secure_delete(self) -> AbstractContextManager[None]:
        """Deletes inside the block overwrite the freed bytes (``PRAGMA secure_delete``)."""
        from memlane.store.sqlite_scrub import secure_delete

        return secure_delete(self)

    def scrub_deleted_text(self) -> None:
        """Merge the FTS5 indexes and checkpoint the WAL: deleted words leave the files."""
        from memlane.store.sqlite_scrub import scrub_deleted_text

        scrub_deleted_text(self)

    def integrity_check(self) -> str:
        return str(self.read("PRAGMA integrity_check")[0][0])

    def health(self) -> StoreHealth:
        """Integrity, keyword-index, orphan and size facts for ``memlane doctor``."""

        def write(fn: Callable[[sqlite3.Connection], None]) -> None:
            self.write(fn, durable=False)

        return sqlite_health(self.path, self.read, write)

    def delete_orphans(self) -> dict[str, int]:
        """Delete rows whose parent is gone (see store/health.py); counts per table.column."""
        tables = {str(r[0]) for r in self.read(SQLITE_TABLES)}

        def run(conn: sqlite3.Connection) -> dict[str, int]:
            done = {label: conn.execute(stmt).rowcount for label, stmt in delete_orphans_sql(tables)}
            return {label: n for label, n in done.items() if n}

        return self.write(run)

    def close(self) -> None:
        # closing twice or after a failure is harmless
        with self._lock:
            for conn in [*self._readers, self._conn]:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._readers.clear()
            if self._file_locks is not None:
                self._file_locks.close()


def _split_sql(script: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies whole."""
    out: list[str] = []
    buf = ""
    for line in script.splitlines(keepends=True):
        if line.strip().startswith("--"):
            continue
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out
