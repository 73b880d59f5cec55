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
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from memlane.errors import (
    ConflictError,
    CorruptDatabaseError,
    EncryptionKeyError,
    InvalidInputError,
    NotFoundError,
    SessionNotFoundError,
    StorageError,
)
from memlane.language import detect_language
from memlane.models import (
    JSON,
    SESSION_STATUSES,
    Message,
    MessageFilter,
    Session,
    to_epoch,
    utcnow,
)
from memlane.store import filters, sqlite_driver
from memlane.store.base import KeyedLocks, KeywordHit, TurnRecord, remaining
from memlane.store.erase import EraseCounts, EraseRequest, ErasureLog, erase_rows
from memlane.store.erasure_check import ErasureChecks
from memlane.store.health import SQLITE_TABLES, StoreHealth, delete_orphans_sql, sqlite_health
from memlane.store.notes import restem_note_slots
from memlane.store.records import SqlRecords
from memlane.store.rows import (
    BUMP_VERSION,
    M_COLS,
    encode_item,
)
from memlane.store.rows import MESSAGE_COLS as _MESSAGE_COLS
from memlane.store.rows import SESSION_COLS as _SESSION_COLS
from memlane.store.rows import SESSION_INSERT_COLS as _SESSION_INSERT_COLS
from memlane.store.sql_reads import SqlReads
from memlane.store.sqlite_locks import FileRangeLocks
from memlane.store.sqlite_rows import DIALECT, _dumps, _message_where, row_to_message
from memlane.store.sqlite_schema import MIGRATIONS, SLOT_STEMS
from memlane.store.sqlite_watch import DataVersionWatcher, data_version
from memlane.store.term_budget import OwnedRows, SelectiveFilters, TermBudget
from memlane.text import fts5_match, keyword_terms

if TYPE_CHECKING:
    from memlane.apikeys import KeyStore
    from memlane.bus.bell import Doorbell
    from memlane.ports import NoteRepository, ResponseCacheRepository
    from memlane.store.sqlite_vectors import SQLiteVectorIndex

log = logging.getLogger(__name__)
T = TypeVar("T")

#: The migration that moves sessions to tenant-scoped keys (store/session_scoping.py).
SCOPED_SESSIONS_MIGRATION = 13

#: Pending keyword rows judged per transaction (index_pending_keywords): ~0.3 ms each of
#: language id outside the lock, then one short write that holds the lock a few ms.
KEYWORD_BATCH = 500
#: A read of the keyword index first indexes up to this many pending rows itself (a few
#: writes since the last read: ~0.3 ms each); more than that is a bulk import's backlog,
#: which background work and flush() index, visible in mem.backlog() meanwhile.
SEARCH_CATCH_UP = 2_000

#: The full-text indexes (messages, notes) an erase must leave without a trace.
_FTS_TABLES = ("messages_fts", "notes_fts")

#: A keyword search ranks among the filter's own rows when its owners hold at most this
#: many rows per row its terms may match (OwnedRows; at 100K LoCoMo turns, ~4,400 matches
#: per query: a 10% user's 10,000 rows cost 6.0 ms that way, 7.5 ms through the join).
OWNED_PER_MATCH = 2

_UPDATABLE_SESSION_FIELDS = frozenset(
    {"title", "system_prompt", "metadata", "status", "user_id", "agent_id", "last_active_at"}
)


def _is_locked(exc: BaseException) -> bool:
    return isinstance(exc, sqlite_driver.OPERATIONAL_ERRORS) and (
        "locked" in str(exc) or "busy" in str(exc)
    )


class SQLiteStore(SqlReads, SqlRecords, ErasureChecks):
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
        key: str | None = None,
    ) -> None:
        """``key``: open (or create) the file encrypted with SQLCipher (the ``encryption``
        extra); a wrong or missing key is an EncryptionKeyError, never a new database."""
        if durability not in ("full", "normal"):
            raise InvalidInputError("durability must be 'full' or 'normal'")
        self.path = str(path)
        if self.path != ":memory:":
            p = Path(self.path).expanduser()
            p.parent.mkdir(parents=True, exist_ok=True)
            self.path = str(p)
        self.url = "sqlite://" if self.path == ":memory:" else f"sqlite:///{self.path}"
        self._lock = threading.RLock()
        self._keyword_lock = threading.Lock()  # one thread judges the keyword backlog at a time
        self._session_locks = KeyedLocks()
        # other processes on the same file: a byte-range lock per key on a sidecar file
        self._file_locks = None if self.path == ":memory:" else FileRangeLocks(self.path + "-locks")
        self.erasures = None if self.path == ":memory:" else ErasureLog(self.path + "-erasures")
        self._retry_seconds = lock_retry_seconds
        self._key = key if key and self.path != ":memory:" else None
        self.encrypted = self._key is not None
        try:
            self._conn = self._connect(busy_timeout_ms)
        except sqlite_driver.ERRORS as exc:
            raise StorageError(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        try:
            if self._key is not None:
                # SQLCipher learns whether the key is right when it decrypts page 1.
                self._conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            self._conn.execute("PRAGMA foreign_keys = ON")
            # Deleted rows are overwritten with zeros, not left in free space: forgotten
            # means gone from the file (see erase()).
            self._conn.execute("PRAGMA secure_delete = ON")
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
            self._selective = SelectiveFilters()
            self._owned = OwnedRows()
            self._migrate()
            self._fts_secure: bool | None = None  # known at the first erase
            sqlite_driver.check_fts_format(self._conn, self.path)
        except StorageError:
            self.close()
            raise
        except sqlite_driver.DATABASE_ERRORS as exc:  # not a database, truncated, damaged, wrong key
            self._conn.close()
            if self._file_locks is not None:
                self._file_locks.close()
            raise storage_error(self.path, exc, key_given=self._key is not None) from exc

    def _connect(self, busy_timeout_ms: int) -> sqlite3.Connection:
        return sqlite_driver.connect(
            self.path, self._key,
            timeout=busy_timeout_ms / 1000,
            isolation_level=None,  # we issue BEGIN/COMMIT ourselves
            check_same_thread=False,
        )

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
        except sqlite_driver.OPERATIONAL_ERRORS as exc:
            if not _is_locked(exc):
                raise storage_error(self.path, exc) from exc
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
        except sqlite_driver.OPERATIONAL_ERRORS as exc:
            raise storage_error(self.path, exc) from exc

    def data_version(self) -> int:
        """``PRAGMA data_version`` of this thread's reader: changes when another connection commits."""
        conn = self._reader()
        with self._lock if conn is None else contextlib.nullcontext():
            return data_version(conn or self._conn)

    def event_waker(self, bell: Doorbell) -> DataVersionWatcher | None:
        """A watcher that rings ``bell`` when any connection commits to this file (None in RAM,
        where only this process writes and its commits ring the bell themselves)."""
        if self.path == ":memory:":
            return None
        return DataVersionWatcher(lambda: self._connect(self._busy_timeout_ms), bell)

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
            result = self._retrying(attempt)
            self._committed()
            return result
        except sqlite_driver.INTEGRITY_ERRORS as exc:
            raise ConflictError(str(exc)) from exc
        except sqlite_driver.DATABASE_ERRORS as exc:
            raise storage_error(self.path, exc) from exc

    def _reader(self) -> sqlite3.Connection | None:
        """This thread's read connection, or None when reads must use the writer's."""
        if self.path == ":memory:" or getattr(self._local, "writing", False):
            return None  # one shared in-RAM database; or read-your-own-uncommitted-writes
        conn: sqlite3.Connection | None = getattr(self._local, "reader", None)
        if conn is None:
            conn = self._connect(self._busy_timeout_ms)
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
        except sqlite_driver.DATABASE_ERRORS as exc:
            raise storage_error(self.path, exc) from exc

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
                if version == SLOT_STEMS:
                    restem_note_slots(conn, "?")
                conn.execute(
                    "INSERT INTO schema_migrations VALUES (?, ?, ?)", (version, name, time.time())
                )
                applied.append(version)

        applied: list[int] = []
        self.write(run)
        if SCOPED_SESSIONS_MIGRATION in applied and self.path != ":memory:":
            # Sessions moved to new keys: the vector index files name the old ones. They
            # are derived data; the next search builds them anew from the table.
            self.vector_index().drop_files()

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
                f"INSERT INTO sessions ({_SESSION_INSERT_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,0)",
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
        if "system_prompt" in changes:  # the first thing a window shows
            sets.append(BUMP_VERSION)
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
        return self.erase(EraseRequest(session_ids=(session_id,))).sessions > 0

    def erase(self, request: EraseRequest, *, log: bool = True) -> EraseCounts:
        """Erase rows and everything derived from them; the bytes go from the files too.

        Deletes run with ``secure_delete`` on (set when the connection opens), which
        zeroes freed cells and pages. The full-text indexes keep a deleted row's tokens in
        older segments until they merge: on SQLite 3.44+ their ``secure-delete`` option
        takes the entries out of those segments in place, so the cost follows what is
        erased (``memlane bench erase``); an older SQLite merges every segment
        (``'optimize'``), a rewrite of the whole index. The WAL, which still holds the old
        page images, is then checkpointed and truncated. ``log`` appends the ids to the
        erasure log (a replay does not).
        """
        if request.empty:
            return EraseCounts()
        now = utcnow()

        def run(conn: sqlite3.Connection) -> EraseCounts:
            in_place = self._fts_in_place_deletes(conn)  # before the deletes: their triggers use it
            counts = erase_rows(conn, DIALECT, request, now)
            if not in_place and (counts.messages or counts.notes or counts.sessions):
                for table in _FTS_TABLES:
                    # 'optimize' rewrites every segment into one, leaving deleted rows out.
                    conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
            return counts

        counts = self.write(run)
        if counts.messages or counts.sessions:
            # The memory-mapped vector index beside the file holds copies of the vectors:
            # they go from its files now, not at the next search (store/vector_files.py).
            self.vector_index().purge()
        if log and self.erasures is not None:
            self.erasures.append(request, counts, now)
        self.truncate_wal()
        return counts

    def _fts_in_place_deletes(self, conn: sqlite3.Connection) -> bool:
        """Switch the full-text indexes to in-place deletes once, when this SQLite can.

        Only at the first erase: from then on the index needs SQLite 3.44+ to be read
        (sqlite_driver.check_fts_format), and a store never erased stays readable by older ones.
        """
        if self._fts_secure is None:
            self._fts_secure = sqlite_driver.fts_secure_delete(conn)
        if not self._fts_secure:
            return False
        for table in _FTS_TABLES:
            on = conn.execute(f"SELECT v FROM {table}_config WHERE k = 'secure-delete'").fetchall()
            if not on or int(on[0][0]) != 1:
                conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('secure-delete', 1)")
        return True

    def _after_delete(self) -> None:
        self.truncate_wal()

    def truncate_wal(self) -> None:
        """Fold the WAL into the database and truncate it (it keeps old page images).

        Retried while a reader's snapshot holds it back; a WAL still busy after that is
        logged, and the next erase (or the last connection's close) finishes the job.
        """
        if self.path == ":memory:":
            return
        for _ in range(50):
            with self._lock:
                busy = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            if not busy:
                return
            time.sleep(0.02)
        log.warning("SQLite %s: the WAL could not be truncated after an erase (a reader holds it)",
                    self.path)

    # ------------------------------------------------------------ messages

    def _insert_messages(
        self, conn: sqlite3.Connection, session_id: str, messages: Sequence[Message]
    ) -> list[Message]:
        """Insert ``messages`` (in the caller's transaction) with one statement per table.

        A bulk import is one executemany, so the ids are read back, not taken from each
        insert: under BEGIN IMMEDIATE no other connection writes, and AUTOINCREMENT gives
        the rows the ids after the table's high-water mark, in order (checked, not assumed).
        """
        rows = [
            (
                session_id, msg.role, msg.content, msg.name,
                _dumps(msg.tool_calls) if msg.tool_calls else None,
                msg.tool_call_id, msg.author_id, msg.author_name, msg.turn_id,
                to_epoch(msg.created_at), _dumps(msg.metadata), msg.importance,
                int(msg.pinned), int(msg.hidden), msg.token_count, encode_item(msg.item),
            )
            for msg in messages
        ]
        # lang NULL: judged and indexed after the write (index_pending_keywords; migration 18)
        insert = f"INSERT INTO messages ({_MESSAGE_COLS}) VALUES (NULL,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
        if len(rows) == 1:
            new_id = conn.execute(insert, rows[0]).lastrowid
            assert new_id is not None
            ids = [new_id]
        else:
            mark = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'messages'").fetchall()
            first = (int(mark[0][0]) if mark else 0) + 1
            conn.executemany(insert, rows)
            last = int(conn.execute("SELECT last_insert_rowid()").fetchone()[0])
            if last != first + len(rows) - 1:  # AUTOINCREMENT gave other ids: never silently
                raise StorageError(f"SQLite {self.path!r}: message ids {first}..{last} for {len(rows)} rows")
            ids = list(range(first, last + 1))
        calls = [
            (session_id, call["id"], new_id)
            for msg, new_id in zip(messages, ids, strict=True) for call in msg.tool_calls or ()
        ]
        if calls:
            conn.executemany("INSERT OR REPLACE INTO tool_call_ids VALUES (?, ?, ?)", calls)
        return [msg.stored_as(new_id, session_id) for msg, new_id in zip(messages, ids, strict=True)]

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
        return self.append_to(session_id, messages, turn)[1]

    def append_to(
        self, session_id: str, messages: Sequence[Message], turn: TurnRecord | None = None,
        *, created_at: datetime | None = None,
    ) -> tuple[Session, list[Message]]:
        now = time.time()
        # Activity follows the messages' own time, so imported history ages correctly.
        last_at = max((to_epoch(m.created_at) for m in messages), default=0.0)

        def run(conn: sqlite3.Connection) -> tuple[Session, list[Message]]:
            # The session row first: one statement both tells that it exists and returns
            # it as the append leaves it, so the write path reads no session beforehand.
            rows = conn.execute(
                f"UPDATE sessions SET message_count = message_count + ?, updated_at = ?, {BUMP_VERSION}, "
                f"last_active_at = MAX(last_active_at, ?) WHERE id = ? RETURNING {_SESSION_COLS}",
                (len(messages), now, last_at, session_id),
            ).fetchall()  # to the end: a RETURNING statement left open would block COMMIT
            session = self._session(rows[0]) if rows else None
            if session is None or (created_at is not None and session.created_at != created_at):
                raise SessionNotFoundError(session_id)  # rolled back: nothing written
            stored = self._insert_messages(conn, session_id, messages)
            if turn is not None:
                self._insert_turn(conn, session_id, turn, stored[0], stored[-1])
            return session, stored

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
                f"INSERT INTO sessions ({_SESSION_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    session.id, session.tenant_id, session.user_id, session.agent_id,
                    session.title, session.system_prompt, _dumps(session.metadata),
                    session.status, to_epoch(session.created_at), to_epoch(session.updated_at),
                    to_epoch(session.last_active_at), len(messages), session.version,
                ),
            )
            stored = self._insert_messages(conn, session.id, messages)
            for record, ui, ai in turns:
                self._insert_turn(conn, session.id, record, stored[ui], stored[ai])

        self.write(run)

    def get_messages(self, ids: Sequence[int], flt: MessageFilter | None = None) -> list[Message]:
        out: list[Message] = []
        id_list = [int(i) for i in ids]
        # Without a filter no session is needed; with one, its owner and tenant live there.
        where, params = _message_where(flt) if flt is not None else ("", [])
        source = "messages m JOIN sessions s ON s.id = m.session_id" if flt is not None else "messages m"
        for start in range(0, len(id_list), 500):
            chunk = id_list[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.read(f"SELECT {M_COLS} FROM {source} WHERE m.id IN ({marks}) {where}", (*chunk, *params))
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
                changed = conn.execute(
                    f"UPDATE messages SET {', '.join(sets)} WHERE id = ?", (*params, message_id)
                ).rowcount
                conn.execute(f"UPDATE sessions SET {BUMP_VERSION} WHERE id = "
                             "(SELECT session_id FROM messages WHERE id = ?)", (message_id,))
                return int(changed)

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
            hidden = int(conn.execute(sql, params).rowcount)
            if hidden:
                conn.execute(f"UPDATE sessions SET {BUMP_VERSION} WHERE id = ?", (session_id,))
            return hidden

        return self.write(run)

    def delete_messages(self, ids: Sequence[int]) -> int:
        return self.erase(EraseRequest(message_ids=tuple(int(i) for i in ids))).messages

    # ------------------------------------------------------------ turns

    # ------------------------------------------------------------ keyword index

    def keyword_backlog(self) -> int:
        """Messages stored but not yet in the keyword index (no language judged yet)."""
        return int(self.read("SELECT count(*) FROM messages WHERE lang IS NULL")[0][0])

    def index_pending_keywords(self, limit: int | None = None) -> int:
        """Judge the language of messages stored without one and write their keyword rows.

        The write path leaves both to this (SQLite migration 18): py3langid and Snowball cost the
        writer ~0.3 ms a message, and the first one ~100 ms and 45 MB of model. Languages
        are judged outside the write lock, a batch at a time; each batch is then one short
        transaction whose update trigger writes the stems. ``AND lang IS NULL`` makes a
        batch another process (or thread) judged first a no-op. Derived data, so its commit
        skips the fsync: a crash leaves rows pending, and the next call judges them again.
        Returns how many rows it indexed (stops after ``limit`` when given).
        """
        with self._keyword_lock:
            return self._index_pending_keywords(limit)

    def _index_pending_keywords(self, limit: int | None) -> int:
        done = 0
        while limit is None or done < limit:
            batch = KEYWORD_BATCH if limit is None else min(KEYWORD_BATCH, limit - done)
            rows = self.read(
                "SELECT id, content FROM messages WHERE lang IS NULL ORDER BY id LIMIT ?", (batch,)
            )
            if not rows:
                break
            judged = [(detect_language(content), int(mid)) for mid, content in rows]
            self.write(
                lambda conn, judged=judged: conn.executemany(  # type: ignore[misc]
                    "UPDATE messages SET lang = ? WHERE id = ? AND lang IS NULL", judged
                ),
                durable=False,
            )
            done += len(rows)
            if len(rows) < batch:
                break
        return done

    def _keywords_current(self) -> bool:
        """Index what is pending before a read of the keyword index or the languages, when it
        is little (a few writes since); a bulk import's backlog is the background's.
        Returns whether the keyword index is complete now (False while a backlog is left)."""
        rows = self.read(
            "SELECT count(*) FROM (SELECT 1 FROM messages WHERE lang IS NULL LIMIT ?)",
            (SEARCH_CATCH_UP + 1,),
        )
        pending = int(rows[0][0])
        if 0 < pending <= SEARCH_CATCH_UP:
            self.index_pending_keywords()
        return pending <= SEARCH_CATCH_UP

    def messages_per_language(self, flt: MessageFilter) -> list[tuple[str, str | None, int]]:
        self._keywords_current()
        return super().messages_per_language(flt)

    def message_languages(self, session_id: str) -> list[tuple[int, str | None]]:
        self._keywords_current()
        return super().message_languages(session_id)

    #: A query per call costs the same as several in one: the search engine runs the
    #: translations' query on a thread beside the original one instead.
    keyword_batching = False

    def keyword_searches(
        self, queries: Sequence[str], flt: MessageFilter, *, limit: int = 50
    ) -> list[list[KeywordHit]]:
        return [self.keyword_search(q, flt, limit=limit) for q in queries]

    def keyword_search(
        self, query: str, flt: MessageFilter, *, limit: int = 50
    ) -> list[KeywordHit]:
        settled = self._keywords_current()
        terms, matching = self._term_budget.select_counted(
            keyword_terms(query),
            lambda: int(self.read("SELECT COALESCE(MAX(id), 0) FROM messages")[0][0]),
            lambda t: int(self.read(
                "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?", (fts5_match([t]),)
            )[0][0]),
            settled=settled,
        )
        if not terms:
            return []
        match = fts5_match(terms)
        where, params = _message_where(flt)
        owners, owner_params = filters.owner_sessions(DIALECT, flt)
        if owners and self._owned.at_most(
            (owners, *owner_params), OWNED_PER_MATCH * matching,
            lambda n: int(self.read(
                f"SELECT count(*) FROM (SELECT 1 FROM messages m WHERE m.session_id IN ({owners}) LIMIT ?)",
                (*owner_params, n),
            )[0][0]),
        ):
            # The owners' rows are few against the matches (a user owning 1-10% of the log,
            # one session): test each match against the set of their ids, read once from
            # the messages_by_session index, before joining anything or running bm25().
            # '+rowid' keeps FTS5 from taking the IN list as rowid lookups, each of which
            # would run the whole MATCH again. LoCoMo turns, 100K messages, 100 users
            # (memlane bench search --users 100): a 1% user's keyword search 7 -> 1.8 ms CPU.
            owned = (
                f"SELECT {M_COLS}, bm25(messages_fts) AS rank FROM messages_fts "
                "JOIN messages m ON m.id = messages_fts.rowid JOIN sessions s ON s.id = m.session_id "
                f"WHERE messages_fts MATCH ? AND +messages_fts.rowid IN "
                f"(SELECT m.id FROM messages m WHERE m.session_id IN ({owners})) {where} "
                "ORDER BY rank LIMIT ?"
            )
            rows = self.read(owned, (match, *owner_params, *params, int(limit)))
            return [KeywordHit(row_to_message(r[:-1]), -float(r[-1])) for r in rows]
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
        # A filter whose pool came back short before goes straight to the second statement:
        # LoCoMo bench, 100K messages, users owning 1%/10% (memlane bench search --users 100).
        key = (where, *params)
        skipped = self._selective.known(key)
        rows = [] if skipped else self.read(best, (match, pool, *params, int(limit)))
        if len(rows) < limit:
            # bm25() runs only for the rows that pass the filter here
            every = (
                f"SELECT {M_COLS}, "
                "bm25(messages_fts) AS rank FROM messages_fts "
                "JOIN messages m ON m.id = messages_fts.rowid "
                "JOIN sessions s ON s.id = m.session_id "
                f"WHERE messages_fts MATCH ? {where} ORDER BY rank LIMIT ?"
            )
            more = self.read(every, (match, *params, int(limit)))
            if where and not skipped and len(more) > len(rows):  # short for the filter, not the query
                self._selective.note(key)
            rows = more
        return [KeywordHit(row_to_message(r[:-1]), -float(r[-1])) for r in rows]

    def rebuild_keyword_index(self) -> int:
        def run(conn: sqlite3.Connection) -> int:
            # rows written without a language (raw SQL) get one; the rest keep theirs
            conn.execute("UPDATE messages SET lang = memlane_language(content) WHERE lang IS NULL")
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
            "sqlite_version": sqlite_driver.sqlite_version(),
            "fts_secure_delete": sqlite_driver.fts_secure_delete(),
        }

    # ------------------------------------------------------------ the store's other ports

    def vector_index(self) -> SQLiteVectorIndex:
        """Message vectors in this file (``message_vectors``, migration 2)."""
        from memlane.store.sqlite_vectors import SQLiteVectorIndex

        return SQLiteVectorIndex(self)

    def note_repository(self) -> NoteRepository:
        """Notes, facets, the archive tier and the audit log in this file (migration 4)."""
        from memlane.store.sqlite_notes import SQLiteNoteStore

        return SQLiteNoteStore(self)

    def response_cache(self) -> ResponseCacheRepository:
        """Cached answers in this file (migration 14)."""
        from memlane.store.response_cache import SqlResponseCache

        return SqlResponseCache(self, DIALECT)

    def key_store(self) -> KeyStore:
        """The server's API keys in this file (migration 5)."""
        from memlane.store.keys import SqlKeyStore

        return SqlKeyStore(self, DIALECT)

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
                with contextlib.suppress(*sqlite_driver.ERRORS):
                    conn.close()
            self._readers.clear()
            if self._file_locks is not None:
                self._file_locks.close()


_SQLITE_MAGIC = b"SQLite format 3\x00"


def storage_error(path: str, exc: Exception, *, key_given: bool = False) -> StorageError:
    """The memlane error for a failed SQLite call; a damaged file gets the one that says what to do."""
    text = str(exc)
    if "file is not a database" in text:
        try:
            with open(path, "rb") as f:
                header = f.read(16)
        except OSError:
            header = b""
        if key_given:
            hint = ("the key is wrong, or the file is not encrypted (encrypt it with: memlane encrypt)"
                    if header != _SQLITE_MAGIC else
                    "the file is not encrypted: open it without a key, or encrypt it with: memlane encrypt")
            return EncryptionKeyError(f"cannot open {path} with the given key: {hint}; nothing was changed")
        # A SQLCipher file starts with 16 random bytes (its salt); text or a truncated
        # SQLite file does not look like that.
        if len(header) == 16 and header != _SQLITE_MAGIC and not header.isascii():
            return EncryptionKeyError(
                f"{path} is encrypted or not a SQLite database: open it with its key "
                "(Memory(path, key=...), MEMLANE_KEY, or memlane --key-env NAME); if it is not "
                f"encrypted it is damaged: memlane restore BACKUP --store {path}; nothing was changed"
            )
    if any(sign in text for sign in ("file is not a database", "malformed", "disk image")):
        return CorruptDatabaseError(path, text)
    return StorageError(f"SQLite {path!r}: {text}")


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


def replay_erasures(db_path: str | Path, erasure_log: str | Path, key: str | None = None) -> int:
    """Erase again, in the database at ``db_path``, what ``erasure_log`` says was erased.

    For ``memlane restore``: a backup taken before an erasure still holds what was
    erased; replaying the log on the copy (before it replaces the live database) keeps
    it forgotten. Each entry only touches rows made before it was logged, so ids handed
    out again since are left alone. Returns how many entries were replayed.
    """
    entries = ErasureLog(erasure_log).entries()
    if not entries:
        return 0
    store = SQLiteStore(db_path, key=key)
    try:
        for entry in entries:
            store.erase(entry.request(), log=False)
    finally:
        store.close()
    return len(entries)
