"""The PostgreSQL store: the same log as SQLite, for many processes on many hosts.

Why these choices:
- psycopg 3 with a connection pool; pooled connections run in autocommit and
  every write is one explicit ``BEGIN ... COMMIT``, so reads cost one round trip.
- An append locks its session row first (``FOR NO KEY UPDATE``). Appends to one
  session therefore commit in id order — a reader paging by id never misses a
  message that commits late — and ``message_count`` is a safe increment.
  Appends to different sessions never wait for each other.
- Read-modify-write of derived state holds a transaction-scoped advisory lock:
  :meth:`session_lock` around a whole block (summaries, state, note promotion;
  pg_locks.py), :meth:`update_derived` around one record, so concurrent writers
  in different processes cannot lose each other's updates.
- A transaction that failed before ``COMMIT`` was sent (dead pooled connection
  after a server restart, deadlock, serialization failure) is retried; one that
  lost its connection *during* ``COMMIT`` is reported, never blindly replayed,
  because it may have committed.
- Keyword search ranks with BM25 over the generated ``tsvector`` (pg_search.py).
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow
from psycopg.types.json import Jsonb, set_json_loads
from psycopg_pool import ConnectionPool
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

from memlane.errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    SessionNotFoundError,
    StorageError,
)
from memlane.language import compound_text, detect_language
from memlane.models import (
    JSON,
    SESSION_STATUSES,
    Message,
    MessageFilter,
    Session,
    utcnow,
)
from memlane.store.base import KeywordHit, TurnRecord
from memlane.store.data_versions import POSTGRES_VECTORS_TRIGGER
from memlane.store.erase import EraseCounts, EraseRequest, erase_rows
from memlane.store.erasure_check import ErasureChecks
from memlane.store.health import PG_TABLES, StoreHealth, delete_orphans_sql, postgres_health
from memlane.store.notes import restem_note_slots
from memlane.store.pg_listen import PgListener
from memlane.store.pg_locks import PgSessionLocks
from memlane.store.pg_rows import (
    _M_COLS,
    _MESSAGE_COLS,
    _SESSION_COLS,
    _SESSION_INSERT_COLS,
    DIALECT,
    _aware,
    _message_where,
    load_jsonb,
    row_to_message,
    row_to_session,
    sessions_join,
)
from memlane.store.pg_search import EXACT_STATS_BELOW, Bm25Index, fts5_idf, tsquery_literal
from memlane.store.postgres_schema import (
    COMPOUND_PARTS,
    DATA_VERSIONS,
    KEYWORD_INDEXES,
    MIGRATIONS,
    NOTE_LANGUAGES,
    OPTIONAL,
    PARTS_MAX_CHARS,
    SLOT_STEMS,
    VECTORS,
)
from memlane.store.records import SqlRecords
from memlane.store.rows import BUMP_VERSION, encode_item
from memlane.store.sql_reads import SqlReads

if TYPE_CHECKING:
    from datetime import datetime

    from memlane.apikeys import KeyStore
    from memlane.bus.bell import Doorbell
    from memlane.ports import NoteRepository, ResponseCacheRepository
    from memlane.store.pg_vectors import PgVectorIndex

__all__ = ["PostgresStore", "fts5_idf", "tsquery_literal"]

log = logging.getLogger(__name__)
T = TypeVar("T")
Conn = psycopg.Connection[TupleRow]

_UPDATABLE_SESSION_FIELDS = frozenset(
    {"title", "system_prompt", "metadata", "status", "user_id", "agent_id", "last_active_at"}
)
_INSERT_MESSAGE = (
    "INSERT INTO messages (tenant_id, session_id, role, content, name, tool_calls, tool_call_id, "
    "author_id, author_name, turn_id, created_at, metadata, importance, pinned, hidden, token_count, item, lang, parts) "
    "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING id"
)
_INSERT_MESSAGE_WITH_ID = _INSERT_MESSAGE.replace("(tenant_id,", "(id, tenant_id,", 1).replace(
    "VALUES (%s,", "VALUES (%s,%s,", 1
)
_INSERT_TURN = (
    "INSERT INTO turns (turn_id, tenant_id, session_id, user_message_id, assistant_message_id, "
    "intent, action_name, job_refs, model_used, confidence_score, processing_time, resolved_query, "
    "context_used, metadata, created_at) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
)
# Deadlock and serialization failure: the transaction was rolled back, replaying it is safe.
_RETRY_SQLSTATES = frozenset({"40001", "40P01"})


class _FailedAttempt(Exception):
    """One failed try of a store operation, with whether it failed during COMMIT."""

    def __init__(self, error: psycopg.Error, committing: bool) -> None:
        super().__init__(str(error))
        self.error = error
        self.committing = committing

    @property
    def transient(self) -> bool:
        """Worth another try: a serialization failure or deadlock, or a lost connection
        before COMMIT was sent (after it the write may have happened)."""
        return self.error.sqlstate in _RETRY_SQLSTATES or (
            isinstance(self.error, psycopg.OperationalError) and not self.committing
        )
_MIGRATION_LOCK = 0x6D656D6C616E65  # "memlane": one advisory lock id for schema changes

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def _split_schema(url: str) -> tuple[str, str | None]:
    """Take memlane's own ``schema=`` query parameter out of a URL libpq would reject."""
    if "://" not in url or "?" not in url:
        return url, None
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), None)
    rest = urlencode([(k, v) for k, v in query if k != "schema"])
    return urlunsplit(parts._replace(query=rest)), schema


def _redact(url: str) -> str:
    conninfo, schema = _split_schema(url)
    try:
        info = psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        return "postgresql://?"
    host, db, user = info.get("host", ""), info.get("dbname", ""), info.get("user", "")
    port = f":{info['port']}" if info.get("port") else ""
    tail = f"?schema={schema}" if schema else ""
    return f"postgresql://{user}{'@' if user else ''}{host}{port}/{db}{tail}"


class PostgresStore(SqlReads, SqlRecords, ErasureChecks):
    """A Store on PostgreSQL (14+; tested on 18). ``url`` is any libpq URL or DSN."""

    _dialect = DIALECT
    _turn_tiebreak = "seq"

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 10.0,
        retry_seconds: float = 10.0,
        stats_ttl: float = 30.0,
        exact_stats_below: int = EXACT_STATS_BELOW,
        application_name: str = "memlane",
        durability: str = "full",
        schema: str | None = None,
        random_page_cost: float = 1.1,
    ) -> None:
        if durability not in ("full", "normal"):
            raise InvalidInputError("durability must be 'full' or 'normal'")
        self.url = url
        conninfo, url_schema = _split_schema(url)
        self._conninfo = conninfo
        self.schema = schema or url_schema
        if self.schema is not None and not _IDENT.fullmatch(self.schema):
            raise InvalidInputError(
                f"schema {self.schema!r} must be a plain identifier (letters, digits, underscores)"
            )
        # Session settings, applied with SET when the pool opens a connection (not as
        # startup options, which PgBouncer refuses).
        self._session_settings: dict[str, str] = {
            # timestamptz comes back in UTC whatever the server's default zone is
            "timezone": "UTC",
            # The default 4.0 models spinning disks; with it the planner reads 100k rows
            # sequentially rather than take the GIN index for a term in 5% of them (4x slower).
            "random_page_cost": str(random_page_cost),
        }
        if durability == "normal":
            # like SQLite's synchronous=NORMAL: a server crash may lose the last commits
            self._session_settings["synchronous_commit"] = "off"
        if self.schema is not None:
            self._session_settings["search_path"] = f"{self.schema}, public"
        self._retry_seconds = retry_seconds
        self._stats_lock = threading.Lock()
        self._keywords = Bm25Index(stats_ttl=stats_ttl, exact_below=exact_stats_below)
        self._closed = False
        self._vectors: PgVectorIndex | None = None
        self._pool: ConnectionPool[Conn] = ConnectionPool(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            open=False,
            name="memlane",
            kwargs={"autocommit": True, "application_name": application_name},
            configure=self._configure,
        )
        try:
            self._pool.open(wait=True, timeout=timeout)
        except psycopg.Error as exc:
            self._pool.close()
            raise StorageError(f"cannot connect to PostgreSQL {_redact(url)}: {exc}") from exc
        self._session_locks = PgSessionLocks(
            conninfo, max_size=max_size, timeout=timeout,
            kwargs={"autocommit": True, "application_name": application_name},
        )
        try:
            self._migrate()
        except BaseException:
            self._pool.close()
            raise

    # ------------------------------------------------------------ plumbing

    @property
    def pool(self) -> ConnectionPool[Conn]:
        """The connection pool, for components that keep their own tables (vectors, notes)."""
        return self._pool

    def _configure(self, conn: Conn) -> None:
        set_json_loads(load_jsonb, conn)
        names, values = zip(*self._session_settings.items(), strict=True)
        conn.execute(
            "SELECT set_config(name, value, false) FROM unnest(%s::text[], %s::text[]) AS s(name, value)",
            (list(names), list(values)),
        )
        # pgvector's search settings (placeholders until the library loads), so vector
        # search needs no SET of its own (see pg_vectors.py). pgvector before 0.8 has no
        # iterative scans and refuses the setting: search then returns what the graph gives.
        for name, value in (("hnsw.ef_search", "100"), ("hnsw.iterative_scan", "relaxed_order")):
            try:
                conn.execute("SELECT set_config(%s, %s, false)", (name, value))
            except psycopg.Error:
                log.debug("PostgreSQL refused %s=%s", name, value)

    def _translate(self, exc: psycopg.Error, committing: bool) -> Exception:
        where = _redact(self.url)
        if isinstance(exc, psycopg.errors.UniqueViolation):
            return ConflictError(str(exc).strip())
        if isinstance(exc, psycopg.errors.ForeignKeyViolation):
            return ConflictError(str(exc).strip())
        if isinstance(exc, psycopg.DataError | psycopg.errors.UntranslatableCharacter):
            return InvalidInputError(
                f"PostgreSQL cannot store this value: {str(exc).strip()} "
                "(text and JSON there may not contain NUL characters; remove them first)"
            )
        if committing and isinstance(exc, psycopg.OperationalError):
            return StorageError(
                f"PostgreSQL {where}: connection lost during COMMIT, the write may or may not "
                f"have been saved; check before retrying ({exc})"
            )
        return StorageError(f"PostgreSQL {where}: {str(exc).strip()}")

    def _attempt(self, fn: Callable[[Conn], T], write: bool) -> T:
        committing = False
        try:
            with self._pool.connection() as conn:
                if not write:
                    return fn(conn)
                conn.execute("BEGIN")
                try:
                    result = fn(conn)
                except BaseException:
                    if not conn.broken:
                        conn.execute("ROLLBACK")
                    raise
                committing = True
                conn.execute("COMMIT")
            self._committed()
            return result
        except psycopg.Error as exc:
            raise _FailedAttempt(exc, committing) from exc

    def _run(self, fn: Callable[[Conn], T], *, write: bool) -> T:
        """Run ``fn`` on a pooled connection; tenacity retries serialization failures,
        deadlocks and lost connections (never a COMMIT whose outcome is unknown)."""
        if self._closed:
            raise StorageError("this PostgresStore is closed")
        try:
            try:
                return self._attempt(fn, write)  # the common case: no retry machinery
            except _FailedAttempt as failed:
                if not failed.transient or self._retry_seconds <= 0:
                    raise
                self._after_failure(failed)
            retrying: Retrying = Retrying(
                retry=retry_if_exception(lambda e: isinstance(e, _FailedAttempt) and e.transient),
                wait=wait_exponential(multiplier=0.01, max=0.5),
                stop=stop_after_delay(self._retry_seconds),
                before_sleep=lambda state: self._after_failure(state.outcome.exception() if state.outcome else None),
                reraise=True,
            )
            result: T = retrying(self._attempt, fn, write)
            return result
        except _FailedAttempt as failed:
            raise self._translate(failed.error, failed.committing) from failed.error

    def _after_failure(self, failed: BaseException | None) -> None:
        if isinstance(failed, _FailedAttempt) and isinstance(failed.error, psycopg.OperationalError):
            self._pool.check()  # drop the other dead connections too

    def write(self, fn: Callable[[Conn], T]) -> T:
        """Run ``fn`` in one transaction (retried when that is safe)."""
        return self._run(fn, write=True)

    def event_waker(self, bell: Doorbell) -> PgListener:
        """A LISTEN connection that rings ``bell`` at each committed change event."""
        return PgListener(self._conninfo, bell)

    def _write_records(self, fn: Callable[[Conn], T]) -> T:
        return self.write(fn)

    def read(self, query: str | sql.Composable, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        def run(conn: Conn) -> list[Any]:
            return conn.execute(query, params).fetchall()  # type: ignore[arg-type]

        return self._run(run, write=False)

    def _migrate(self) -> None:
        def run(conn: Conn) -> None:
            # serialises concurrent first starts; released at COMMIT
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            if self.schema is not None:
                conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema)))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
                "name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations").fetchall()}
            newest_known = max(MIGRATIONS)
            if done and max(done) > newest_known:
                raise StorageError(
                    f"database {_redact(self.url)} has schema version {max(done)}, newer than this "
                    f"memlane ({newest_known}); upgrade memlane"
                )
            for version in sorted(MIGRATIONS):
                if version in done:
                    continue
                extension = OPTIONAL.get(version)
                if extension is not None and not _extension_usable(conn, extension):
                    log.warning(
                        "PostgreSQL %s: extension %r is not available; skipping migration %d (%s)",
                        _redact(self.url), extension, version, MIGRATIONS[version][0],
                    )
                    continue
                name, script = MIGRATIONS[version]
                conn.execute(script.encode())  # several statements: simple query protocol
                if version == VECTORS and DATA_VERSIONS in done:  # pgvector came after the versions
                    conn.execute(POSTGRES_VECTORS_TRIGGER.encode())
                if version == NOTE_LANGUAGES:
                    while _judge_languages(conn, "notes", "text"):
                        pass
                if version == SLOT_STEMS:
                    restem_note_slots(conn, "%s")
                if version == COMPOUND_PARTS:
                    for table, column in _KEYWORD_TEXTS:
                        after = 0
                        while (last := _split_compounds(conn, table, column, after)) is not None:
                            after = last
                conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, name)
                )

        self.write(run)

    def schema_versions(self) -> list[int]:
        return [r[0] for r in self.read("SELECT version FROM schema_migrations ORDER BY version")]

    def response_cache(self) -> ResponseCacheRepository:
        """Cached answers in this database (migration 14)."""
        from memlane.store.response_cache import SqlResponseCache

        return SqlResponseCache(self, DIALECT)

    def key_store(self) -> KeyStore:
        """The server's API keys in this database (``memlane serve`` asks for it)."""
        from memlane.store.keys import SqlKeyStore

        return SqlKeyStore(self, DIALECT)

    def note_repository(self) -> NoteRepository:
        """Notes, facets, the archive tier and the audit log in this database (migration 4)."""
        from memlane.store.pg_notes import PostgresNoteStore

        return PostgresNoteStore(self)

    def vector_index(self) -> PgVectorIndex | None:
        """The pgvector index of this database (the recall engine asks for it), or None
        when the server has no pgvector (search is then keyword-only)."""
        with self._stats_lock:
            if self._vectors is not None:
                return self._vectors
        if 2 not in self.schema_versions():
            return None
        from memlane.store.pg_vectors import PgVectorIndex

        with self._stats_lock:
            if self._vectors is None:
                self._vectors = PgVectorIndex(self)
            return self._vectors

    # ------------------------------------------------------------ sessions

    def create_session(self, session: Session) -> Session:
        if session.status not in SESSION_STATUSES:
            raise InvalidInputError(f"status must be one of {sorted(SESSION_STATUSES)}")

        def run(conn: Conn) -> None:
            cur = conn.execute(
                f"INSERT INTO sessions ({_SESSION_INSERT_COLS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,0) "
                "ON CONFLICT (id) DO NOTHING",
                (
                    session.id, session.tenant_id, session.user_id, session.agent_id,
                    session.title, session.system_prompt, Jsonb(session.metadata), session.status,
                    _aware(session.created_at), _aware(session.updated_at),
                    _aware(session.last_active_at),
                ),
            )
            if cur.rowcount == 0:
                raise ConflictError(f"session {session.id!r} already exists")

        self.write(run)
        session.message_count = 0
        return session

    def get_sessions(self, session_ids: Sequence[str]) -> dict[str, Session]:
        """Several sessions in one round trip (the recall engine labels its hits with them)."""
        ids = list(dict.fromkeys(session_ids))
        if not ids:
            return {}
        rows = self.read(f"SELECT {_SESSION_COLS} FROM sessions WHERE id = ANY(%s)", (ids,))
        return {r[0]: row_to_session(r) for r in rows}

    def update_session(self, session_id: str, **changes: Any) -> Session:
        bad = set(changes) - _UPDATABLE_SESSION_FIELDS
        if bad:
            raise InvalidInputError(f"cannot update session field(s) {sorted(bad)}")
        if "status" in changes and changes["status"] not in SESSION_STATUSES:
            raise InvalidInputError(f"status must be one of {sorted(SESSION_STATUSES)}")
        sets: list[sql.Composable] = [sql.SQL("updated_at = now()")]
        if "system_prompt" in changes:  # the first thing a window shows
            sets.append(sql.SQL(BUMP_VERSION))
        params: list[Any] = []
        for key, value in changes.items():
            sets.append(sql.SQL("{} = %s").format(sql.Identifier(key)))
            if key == "metadata":
                value = Jsonb(value)
            elif key == "last_active_at":
                value = _aware(value)
            params.append(value)
        stmt = sql.SQL("UPDATE sessions SET {} WHERE id = %s RETURNING {}").format(
            sql.SQL(", ").join(sets), sql.SQL(_SESSION_COLS)
        )

        def run(conn: Conn) -> Session:
            row = conn.execute(stmt, (*params, session_id)).fetchone()
            if row is None:
                raise SessionNotFoundError(session_id)
            return row_to_session(row)

        return self.write(run)

    def delete_session(self, session_id: str) -> bool:
        return self.erase(EraseRequest(session_ids=(session_id,))).sessions > 0

    def erase(self, request: EraseRequest, *, log: bool = True) -> EraseCounts:
        """Erase rows and everything derived from them in one transaction.

        PostgreSQL keeps the old row versions in the table and index files until VACUUM
        reclaims them (and their bytes until pages are reused); docs/privacy.md says how
        an operator scrubs them. ``log`` is accepted for the Store contract: restoring a
        PostgreSQL backup is done with PostgreSQL's tools, so no erasure log is kept here.
        """
        if request.empty:
            return EraseCounts()
        now = utcnow()
        counts: EraseCounts = self.write(lambda conn: erase_rows(conn, DIALECT, request, now))
        return counts

    # ------------------------------------------------------------ messages

    @staticmethod
    def _insert_messages(
        conn: Conn, tenant_id: str, session_id: str, messages: Sequence[Message],
        *, keep_ids: bool = False,
    ) -> list[Message]:
        params: list[tuple[Any, ...]] = [
            (
                tenant_id, session_id, m.role, m.content, m.name,
                Jsonb(m.tool_calls) if m.tool_calls else None, m.tool_call_id, m.author_id,
                m.author_name, m.turn_id, _aware(m.created_at), Jsonb(m.metadata), m.importance,
                m.pinned, m.hidden, m.token_count, encode_item(m.item),
                *keyword_columns(m.content),
            )
            for m in messages
        ]
        query = _INSERT_MESSAGE
        if keep_ids:
            if any(m.id is None for m in messages):
                raise InvalidInputError("keep_ids needs every message to carry its id")
            query = _INSERT_MESSAGE_WITH_ID
            params = [(m.id, *p) for m, p in zip(messages, params, strict=True)]
        cur = conn.cursor()
        # one round trip for all rows (pipelined); RETURNING keeps the input order
        cur.executemany(query, params, returning=True)
        ids: list[int] = []
        while True:
            row = cur.fetchone()
            assert row is not None
            ids.append(int(row[0]))
            if not cur.nextset():
                break
        calls = [
            (tenant_id, session_id, call["id"], new_id)
            for msg, new_id in zip(messages, ids, strict=True)
            for call in msg.tool_calls or ()
        ]
        if calls:
            cur.executemany(
                "INSERT INTO tool_call_ids (tenant_id, session_id, call_id, message_id) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (session_id, call_id) "
                "DO UPDATE SET message_id = excluded.message_id",
                calls,
            )
        return [m.with_(id=i, session_id=session_id) for m, i in zip(messages, ids, strict=True)]

    @staticmethod
    def _insert_turn(
        conn: Conn, tenant_id: str, session_id: str, turn: TurnRecord, user: Message, bot: Message
    ) -> None:
        conn.execute(
            _INSERT_TURN,
            (
                turn.turn_id, tenant_id, session_id, user.id, bot.id, turn.intent,
                turn.action_name, Jsonb(list(turn.job_refs)), turn.model_used,
                turn.confidence_score, turn.processing_time, turn.resolved_query,
                turn.context_used, Jsonb(turn.metadata or {}), _aware(user.created_at),
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
        if not messages:
            found = self.get_session(session_id)
            if found is None:
                raise SessionNotFoundError(session_id)
            return found, []
        # Activity follows the messages' own time, so imported history ages correctly.
        last_at = max(_aware(m.created_at) for m in messages)

        def run(conn: Conn) -> tuple[Session, list[Message]]:
            # The session row first: the UPDATE locks it for this transaction (no key
            # change: FOR NO KEY UPDATE), tells that it exists and returns it as the
            # append leaves it, so the write path reads no session beforehand.
            row = conn.execute(
                f"UPDATE sessions SET message_count = message_count + %s, updated_at = now(), {BUMP_VERSION}, "
                f"last_active_at = GREATEST(last_active_at, %s) WHERE id = %s RETURNING {_SESSION_COLS}",
                (len(messages), last_at, session_id),
            ).fetchone()
            session = row_to_session(row) if row is not None else None
            if session is None or (created_at is not None and session.created_at != created_at):
                raise SessionNotFoundError(session_id)  # rolled back: nothing written
            stored = self._insert_messages(conn, session.tenant_id, session_id, messages)
            if turn is not None:
                self._insert_turn(conn, session.tenant_id, session_id, turn, stored[0], stored[-1])
            return session, stored

        return self.write(run)

    def restore_session(
        self,
        session: Session,
        messages: Sequence[Message],
        turns: Sequence[tuple[TurnRecord, int, int]],
        *,
        derived: Mapping[str, JSON] | None = None,
        keep_ids: bool = False,
    ) -> None:
        """Write a whole session exactly as given, in one transaction.

        Two extensions of the Protocol, for ``memlane migrate``: ``derived`` restores
        derived state in the same transaction, so an interrupted migration leaves whole
        sessions only; ``keep_ids`` keeps the messages' ids (so references to them, and
        their vectors, stay valid) and moves the id sequence past them.
        """

        def run(conn: Conn) -> None:
            cur = conn.execute(
                f"INSERT INTO sessions ({_SESSION_COLS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) "
                "ON CONFLICT (id) DO NOTHING",
                (
                    session.id, session.tenant_id, session.user_id, session.agent_id,
                    session.title, session.system_prompt, Jsonb(session.metadata),
                    session.status, _aware(session.created_at), _aware(session.updated_at),
                    _aware(session.last_active_at), len(messages), session.version,
                ),
            )
            if cur.rowcount == 0:
                raise ConflictError(f"session {session.id!r} already exists")
            stored = (
                self._insert_messages(conn, session.tenant_id, session.id, messages, keep_ids=keep_ids)
                if messages else []
            )
            if keep_ids and stored:
                # explicit ids bypass the identity sequence: move it past them
                conn.execute(
                    "SELECT setval(seq, GREATEST(%s, coalesce(pg_sequence_last_value(seq), 0))) "
                    "FROM (SELECT pg_get_serial_sequence('messages', 'id')::regclass AS seq) s",
                    (max(m.id or 0 for m in stored),),
                )
            for record, ui, ai in turns:
                self._insert_turn(conn, session.tenant_id, session.id, record, stored[ui], stored[ai])
            for kind, value in (derived or {}).items():
                conn.execute(
                    "INSERT INTO derived (tenant_id, session_id, kind, value, updated_at) "
                    "VALUES (%s, %s, %s, %s, now())",
                    (session.tenant_id, session.id, kind, Jsonb(value)),
                )

        self.write(run)

    def get_messages(self, ids: Sequence[int], flt: MessageFilter | None = None) -> list[Message]:
        id_list = [int(i) for i in ids]
        if not id_list:
            return []
        where, params = _message_where(flt) if flt is not None else ("", [])
        join = sessions_join(flt) if flt is not None else ""
        rows = self.read(f"SELECT {_M_COLS} FROM messages m {join} WHERE m.id = ANY(%s) {where}", (id_list, *params))
        order = {mid: i for i, mid in enumerate(id_list)}
        out = [row_to_message(r) for r in rows]
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
            sets.append("importance = %s")
            params.append(float(importance))
        if pinned is not None:
            sets.append("pinned = %s")
            params.append(bool(pinned))
        if metadata is not None:
            sets.append("metadata = %s")
            params.append(Jsonb(metadata))
        if sets:
            def run(conn: Conn) -> Any:
                row = conn.execute(
                    f"UPDATE messages SET {', '.join(sets)} WHERE id = %s RETURNING {_MESSAGE_COLS}",
                    (*params, message_id),
                ).fetchone()
                if row is not None:
                    conn.execute(f"UPDATE sessions SET {BUMP_VERSION} WHERE id = %s", (row[1],))
                return row

            row = self.write(run)
            if row is None:
                raise NotFoundError(f"message {message_id} does not exist")
            return row_to_message(row)
        found = self.get_messages([message_id])
        if not found:
            raise NotFoundError(f"message {message_id} does not exist")
        return found[0]

    def hide_messages(self, session_id: str, *, up_to_id: int | None = None) -> int:
        def run(conn: Conn) -> int:
            query = "UPDATE messages SET hidden = true WHERE session_id = %s AND NOT hidden"
            params: list[Any] = [session_id]
            if up_to_id is not None:
                query += " AND id <= %s"
                params.append(up_to_id)
            hidden = int(conn.execute(query, params).rowcount)
            if hidden:
                conn.execute(f"UPDATE sessions SET {BUMP_VERSION} WHERE id = %s", (session_id,))
            return hidden

        return self.write(run)

    def delete_messages(self, ids: Sequence[int]) -> int:
        return self.erase(EraseRequest(message_ids=tuple(int(i) for i in ids))).messages

    # ------------------------------------------------------------ turns

    # ------------------------------------------------------------ keyword index

    #: Several keyword queries cost one round trip together (pg_search.py).
    keyword_batching = True

    def keyword_search(
        self, query: str, flt: MessageFilter, *, limit: int = 50
    ) -> list[KeywordHit]:
        return self._keywords.search(self, query, flt, limit)

    def keyword_searches(
        self, queries: Sequence[str], flt: MessageFilter, *, limit: int = 50
    ) -> list[list[KeywordHit]]:
        return self._keywords.search_many(self, queries, flt, limit)

    def keyword_backlog(self) -> int:
        return 0  # the tsvector is generated in the write's own transaction

    def index_pending_keywords(self, limit: int | None = None) -> int:
        return 0

    def rebuild_keyword_index(self) -> int:
        """Judge the language of rows written without one (messages before migration 10,
        notes before 15: their tsvector follows) and write the compound parts of German
        rows where they are missing or split differently now, then rebuild the GIN index
        itself (the tsvector is generated from the row, so it cannot drift)."""
        for table, column in _KEYWORD_TEXTS:
            # a batch per transaction: each update rewrites the row and its index entries
            while self.write(functools.partial(_judge_languages, table=table, column=column)):
                pass
            # rows just judged German, and any whose split has changed, get their parts
            after = 0
            while (last := self.write(functools.partial(_split_compounds, table=table, column=column,
                                                        after_id=after))) is not None:
                after = last

        def run(conn: Conn) -> int:
            found = conn.execute(
                "SELECT name FROM unnest(%s::text[]) WITH ORDINALITY AS i(name, n) "
                "WHERE to_regclass(name) IS NOT NULL ORDER BY n LIMIT 1", (list(KEYWORD_INDEXES),)
            ).fetchone()
            if found is not None:
                conn.execute(sql.SQL("REINDEX INDEX {}").format(sql.Identifier(found[0])))
            row = conn.execute("SELECT count(*) FROM messages").fetchone()
            assert row is not None
            return int(row[0])

        count = self.write(run)
        self._keywords.clear()
        return count

    # ------------------------------------------------------------ derived

    def put_derived(self, session_id: str, kind: str, value: JSON) -> None:
        def run(conn: Conn) -> int:
            return conn.execute(
                "INSERT INTO derived (tenant_id, session_id, kind, value, updated_at) "
                "SELECT tenant_id, id, %s, %s, now() FROM sessions WHERE id = %s "
                "ON CONFLICT (session_id, kind) "
                "DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                (kind, Jsonb(value), session_id),
            ).rowcount

        try:
            written = self.write(run)
        except ConflictError as exc:  # FK violation: the session went away meanwhile
            raise SessionNotFoundError(session_id) from exc
        if written == 0:
            raise SessionNotFoundError(session_id)

    def update_derived(
        self, session_id: str, kind: str, fn: Callable[[JSON | None], JSON | None]
    ) -> JSON | None:
        """Read-modify-write one derived record atomically across processes.

        ``fn`` gets the current value (or None) and returns the new one (None deletes).
        A transaction-scoped advisory lock on (session, kind) serialises writers
        without blocking appends to the session.
        """

        def run(conn: Conn) -> JSON | None:
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{session_id}\x1f{kind}",)
            )
            row = conn.execute(
                "SELECT value FROM derived WHERE session_id = %s AND kind = %s", (session_id, kind)
            ).fetchone()
            new = fn(row[0] if row is not None and isinstance(row[0], dict) else None)
            if new is None:
                conn.execute("DELETE FROM derived WHERE session_id = %s AND kind = %s", (session_id, kind))
                return None
            written = conn.execute(
                "INSERT INTO derived (tenant_id, session_id, kind, value, updated_at) "
                "SELECT tenant_id, id, %s, %s, now() FROM sessions WHERE id = %s "
                "ON CONFLICT (session_id, kind) "
                "DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                (kind, Jsonb(new), session_id),
            ).rowcount
            if written == 0:
                raise SessionNotFoundError(session_id)
            return new

        return self.write(run)

    def session_lock(
        self, session_id: str, scope: str, *, timeout: float | None = None
    ) -> AbstractContextManager[None]:
        """An advisory lock on (session, scope) across every process (see pg_locks.py)."""
        if self._closed:
            raise StorageError("this PostgresStore is closed")
        return self._session_locks.hold(session_id, scope, timeout)

    def delete_derived(self, session_id: str, kind: str | None = None) -> int:
        def run(conn: Conn) -> int:
            if kind is None:
                return conn.execute("DELETE FROM derived WHERE session_id = %s", (session_id,)).rowcount
            return conn.execute(
                "DELETE FROM derived WHERE session_id = %s AND kind = %s", (session_id, kind)
            ).rowcount

        return self.write(run)

    # ------------------------------------------------------------ housekeeping

    def stats(self) -> dict[str, Any]:
        row = self.read(
            "SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM messages), "
            "(SELECT coalesce(sum(token_count), 0) FROM messages), (SELECT count(*) FROM turns), "
            "(SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            " JOIN pg_namespace n ON n.oid = c.relnamespace "
            " WHERE c.relkind = 'r' AND n.nspname = current_schema()), "
            "(SELECT max(version) FROM schema_migrations)"
        )[0]
        return {
            "backend": "postgres",
            "url": _redact(self.url),
            "sessions": int(row[0]),
            "messages": int(row[1]),
            "tokens": int(row[2]),
            "turns": int(row[3]),
            "bytes": int(row[4]),
            "schema_version": int(row[5]),
        }

    def health(self) -> StoreHealth:
        """Orphan, size and (with amcheck) index facts for ``memlane doctor``."""
        return postgres_health(self.read)

    def delete_orphans(self) -> dict[str, int]:
        """Delete rows whose parent is gone (see store/health.py); counts per table.column."""
        tables = {str(r[0]) for r in self.read(PG_TABLES)}

        def run(conn: Conn) -> dict[str, int]:
            done = {label: conn.execute(stmt).rowcount for label, stmt in delete_orphans_sql(tables)}
            return {label: n for label, n in done.items() if n}

        return self.write(run)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._session_locks.close()
        self._pool.close()


#: The tables with a generated keyword tsvector, and the column it is made from.
_KEYWORD_TEXTS = (("messages", "content"), ("notes", "text"))


def keyword_columns(text: str) -> tuple[str, str | None]:
    """``lang`` and ``parts`` of a row with ``text``: the language the keyword index stems
    it in (migration 10) and its German compounds' parts (migration 19; None when none)."""
    lang = detect_language(text)
    return lang, compound_text(text[:PARTS_MAX_CHARS], lang) or None


def _split_compounds(conn: Conn, table: str, column: str, after_id: int, batch: int = 2000) -> int | None:
    """Write ``parts`` of the German rows of ``table`` after ``after_id`` (up to ``batch``
    of them) where it differs from what the splitter says now; the last id looked at, or
    None when no row was left."""
    ident = sql.Identifier(table)
    rows = conn.execute(
        sql.SQL("SELECT id, {}, parts FROM {} WHERE lang = 'de' AND id > %s ORDER BY id LIMIT %s").format(
            sql.Identifier(column), ident),
        (after_id, batch),
    ).fetchall()
    if not rows:
        return None
    changed = [(parts, int(row_id)) for row_id, text, old in rows
               if (parts := compound_text(text[:PARTS_MAX_CHARS], "de") or None) != old]
    if changed:
        conn.cursor().executemany(sql.SQL("UPDATE {} SET parts = %s WHERE id = %s").format(ident), changed)
    return int(rows[-1][0])


def _judge_languages(conn: Conn, table: str, column: str, batch: int = 2000) -> int:
    """Set ``lang`` of up to ``batch`` rows of ``table`` that have none; how many were set."""
    ident = sql.Identifier(table)
    rows = conn.execute(
        sql.SQL("SELECT id, {} FROM {} WHERE lang IS NULL ORDER BY id LIMIT %s").format(sql.Identifier(column), ident),
        (batch,),
    ).fetchall()
    if rows:
        conn.cursor().executemany(
            sql.SQL("UPDATE {} SET lang = %s WHERE id = %s").format(ident),
            [(detect_language(text), int(row_id)) for row_id, text in rows],
        )
    return len(rows)


def _extension_usable(conn: Conn, name: str) -> bool:
    """Is the extension installed, or can this role install it right now?"""
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = %s", (name,)).fetchone():
        return True
    if not conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = %s", (name,)).fetchone():
        return False
    # Installing may need privileges we lack: try inside a savepoint and undo it either way;
    # the migration itself installs it for real.
    conn.execute("SAVEPOINT probe_extension")
    try:
        conn.execute(sql.SQL("CREATE EXTENSION {}").format(sql.Identifier(name)))
        usable = True
    except psycopg.Error:  # no privilege, or the library is missing on the server
        usable = False
    conn.execute("ROLLBACK TO SAVEPOINT probe_extension")
    return usable


