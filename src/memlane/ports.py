"""The seams features depend on: small Protocols in the core layer.

Every store implements them (SQLite, ``:memory:`` and PostgreSQL; the conformance suite
in ``tests/store_conformance.py`` checks each port on each backend). A feature asks for the
ports it uses (``log: MessageLog``, ``records: DerivedRecords``, ``locks: SessionLocks``),
never for ``Memory`` and never for a concrete store class, so a third backend needs no
change outside ``store/``. Records the ports carry are plain dataclasses (``models.py``,
``notes/models.py``) and live in the core layer too.

Ports here: :class:`MessageLog` (sessions, messages, turns), :class:`KeywordIndex`,
:class:`DerivedRecords` (rebuildable per-session key/value), :class:`SessionLocks`,
:class:`Records`, :class:`VectorIndex`, :class:`NoteRepository`, :class:`Embedder` and :data:`Clock`. The
API-key repository is :class:`memlane.apikeys.KeyStore`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memlane.errors import EmbedderMismatchError, InvalidInputError
from memlane.models import JSON, Message, MessageFilter, Session, SessionFilter, Turn
from memlane.notes.models import AuditEntry, Facet, Note

# numpy is imported where vectors are made, not here: every store imports this module, and
# a process that never embeds should not pay for numpy (cold start).
if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from memlane.config import Settings
    from memlane.store.base import Store
    from memlane.tokens import TokenCounter

    Vectors = NDArray[np.float32]


def __getattr__(name: str) -> Any:
    if name == "Vectors":  # the public alias, built on first use (it needs numpy)
        import numpy as np
        from numpy.typing import NDArray

        return NDArray[np.float32]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Roles whose messages get a vector. Tool results are often large JSON blobs that embed
#: poorly; they stay searchable by keyword.
EMBEDDED_ROLES: tuple[str, ...] = ("user", "assistant", "system")

#: The time source of a feature that stamps or expires things (``models.utcnow`` by default).
Clock = Callable[[], datetime]

__all__ = [
    "EMBEDDED_ROLES",
    "CachedResponse",
    "Clock",
    "DerivedRecords",
    "Embedder",
    "Essentials",
    "KeywordHit",
    "KeywordIndex",
    "MessageLog",
    "ModelInfo",
    "NoteFilter",
    "NoteRepository",
    "Records",
    "ResponseCacheRepository",
    "SessionLocks",
    "SessionStore",
    "TurnRecord",
    "VectorIndex",
    "Vectors",
    "check_model",
]


# ---------------------------------------------------------------------------- records

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
    #: the text of the adjacent turns of the same session (the one before, then the one
    #: after) when the store read them with the hit, which saves the search engine a
    #: round trip on PostgreSQL; None: not read (the engine fetches them itself)
    adjacent: tuple[str, ...] | None = None
    #: the hit's session when the store read it with the hit (PostgreSQL), as above
    session: Session | None = None


# ---------------------------------------------------------------------------- the log


@runtime_checkable
class MessageLog(Protocol):
    """The durable conversation log: sessions, messages and turns. Every write is one
    transaction; the log is the source of truth everything else is derived from."""

    # sessions
    def create_session(self, session: Session) -> Session: ...
    def get_session(self, session_id: str) -> Session | None: ...
    def update_session(self, session_id: str, **changes: Any) -> Session: ...
    def list_sessions(
        self, flt: SessionFilter, *, limit: int = 50, offset: int = 0
    ) -> list[Session]: ...
    def delete_session(self, session_id: str) -> bool: ...
    def sessions_inactive_before(self, cutoff: datetime, *, limit: int = 10_000) -> list[str]: ...
    def count_with_text(self, roles: Sequence[str]) -> int:
        """Messages with text in one of ``roles``."""
        ...

    # messages
    def append(
        self, session_id: str, messages: Sequence[Message], turn: TurnRecord | None = None
    ) -> list[Message]: ...
    def append_to(
        self, session_id: str, messages: Sequence[Message], turn: TurnRecord | None = None,
        *, created_at: datetime | None = None,
    ) -> tuple[Session, list[Message]]:
        """``append`` that also returns the session row as the append left it, read in the
        same transaction, so the write path needs no read of its own before it.

        SessionNotFoundError (nothing written) when there is no such session, or when
        ``created_at`` is given and the session under that id is not the one created
        then (it was deleted and created again)."""
        ...
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

    def get_messages(self, ids: Sequence[int], flt: MessageFilter | None = None) -> list[Message]:
        """The messages with these ids that exist, in the order of ``ids``; with ``flt``,
        only those that pass it (the same filter keyword and vector search apply)."""
        ...

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

    def author_names(self) -> set[str]:
        """Every author name in the log (the search engine matches queries to speakers)."""
        ...

    def first_user_texts(self, session_ids: Sequence[str]) -> dict[str, str]:
        """The content of each session's first user message that has any text (hidden
        ones too), by session id; sessions without one are left out."""
        ...

    def important_message_ids(
        self, session_id: str, *, before_id: int | None, min_importance: float
    ) -> list[int]:
        """Visible messages older than ``before_id`` that are pinned, at least
        ``min_importance`` or system messages; ids, oldest first."""
        ...

    # turns
    def list_turns(self, session_id: str, *, limit: int = 50) -> list[Turn]:
        """The newest ``limit`` turns, oldest first."""
        ...


@runtime_checkable
class KeywordIndex(Protocol):
    """Full-text (BM25) search over the log (written with the log, or just after it)."""

    #: True where :meth:`keyword_searches` costs less than one ``keyword_search`` per query
    #: (PostgreSQL: one round trip for all); SQLite's callers run them on threads at once.
    keyword_batching: bool

    def keyword_search(
        self, query: str, flt: MessageFilter, *, limit: int = 50
    ) -> list[KeywordHit]: ...

    def keyword_searches(
        self, queries: Sequence[str], flt: MessageFilter, *, limit: int = 50
    ) -> list[list[KeywordHit]]:
        """Each query's hits (as ``keyword_search`` gives them), from one call."""
        ...

    def rebuild_keyword_index(self) -> int: ...

    def keyword_backlog(self) -> int:
        """Messages stored but not yet searchable by keyword (SQLite indexes them after the
        write: ``index_pending_keywords``; PostgreSQL in the write's transaction: 0)."""
        ...

    def index_pending_keywords(self, limit: int | None = None) -> int:
        """Index what ``keyword_backlog`` counts (up to ``limit``); how many it indexed."""
        ...



@runtime_checkable
class DerivedRecords(Protocol):
    """A small per-session key/value area for state rebuildable from the log (summaries,
    session state, token encodings); deleted with its session."""

    def put_derived(self, session_id: str, kind: str, value: JSON) -> None: ...
    def get_derived(self, session_id: str, kind: str) -> JSON | None: ...
    def delete_derived(self, session_id: str, kind: str | None = None) -> int: ...


@runtime_checkable
class Records(Protocol):
    """Opaque bytes by (namespace, key) for integrations (their sessions, checkpoints);
    memlane never looks inside (store/records.py)."""

    def put_records(self, namespace: str, items: Sequence[tuple[str, bytes]]) -> None: ...
    def get_record(self, namespace: str, key: str) -> bytes | None: ...
    def list_records(
        self, namespace: str, *, prefix: str = "", descending: bool = False
    ) -> list[tuple[str, bytes]]: ...
    def record_namespaces(self, prefix: str = "") -> list[str]: ...
    def delete_records(
        self, namespace: str, keys: Sequence[str] | None = None, *, prefix: str = ""
    ) -> int: ...


@runtime_checkable
class SessionLocks(Protocol):
    """Exclusive (session, scope) locks for read-modify-write of derived records."""

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


class SessionStore(MessageLog, DerivedRecords, SessionLocks, Protocol):
    """The log with its per-session derived records and locks: what a part that keeps
    derived data of a session (state, summaries) reads and writes."""


# ---------------------------------------------------------------------------- essentials


class Essentials(Protocol):
    """What a feature part is made from: the store, the settings and the token counter.

    A ``Memory`` has them (``components.py`` hands it to each part as this, and nothing
    more of it is in reach). Read them at each use: settings may be replaced at run time.
    """

    @property
    def store(self) -> Store: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def counter(self) -> TokenCounter: ...


# ---------------------------------------------------------------------------- vectors

@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What made the stored vectors: the embedder and how a message became text."""

    model_id: str
    dimension: int
    recipe: str = ""

    def describe(self) -> str:
        recipe = f", text recipe {self.recipe}" if self.recipe else ""
        return f"{self.model_id} ({self.dimension} dimensions{recipe})"


@runtime_checkable
class VectorIndex(Protocol):
    """Message vectors of one store. Thread-safe; every write is one transaction."""

    def model_info(self) -> ModelInfo | None:
        """The model of the stored vectors, or None for a database without vectors yet."""
        ...

    def set_model_info(self, info: ModelInfo) -> None:
        """Record the model. Only valid while the index is empty or holds this model."""
        ...

    def upsert(self, ids: Sequence[int], vectors: Vectors) -> int:
        """Store one vector per message id (replacing an old one); ids of messages that no
        longer exist are skipped. Returns how many were stored."""
        ...

    def delete(self, ids: Sequence[int]) -> int:
        """Remove these messages' vectors (normally the store's cascade does this)."""
        ...

    def clear(self) -> None:
        """Remove every vector and the model info (reindex, switching embedders)."""
        ...

    def search(
        self, query: Vectors, k: int, flt: MessageFilter | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` most similar messages that pass ``flt``: (message_id, similarity)."""
        ...

    def similarities(self, query: Vectors, ids: Sequence[int]) -> dict[int, float]:
        """Similarity of ``query`` to each given message that has a vector."""
        ...

    def missing_ids(self, limit: int, *, after_id: int = 0) -> list[int]:
        """Ids (ascending, > after_id) of messages in EMBEDDED_ROLES with text and no vector."""
        ...

    def count(self) -> int: ...


def check_model(index: VectorIndex, wanted: ModelInfo) -> None:
    """Claim an empty index for ``wanted``, or raise if its vectors came from another model."""
    stored = index.model_info()
    if stored is None:
        index.set_model_info(wanted)
        return
    if stored != wanted:
        raise EmbedderMismatchError(
            f"this database's vectors were made by {stored.describe()}, but the configured "
            f"embedder is {wanted.describe()}; run `memlane reindex` to re-embed every message "
            "with the configured embedder (or configure the old one again)"
        )


# ---------------------------------------------------------------------------- notes

@dataclass(slots=True)
class NoteFilter:
    """Which notes to list; None means 'any'.

    ``visible_in`` + ``anchor_id`` select what one conversation may see: its own notes and
    the Anchor's notes from anywhere in the tenant.
    """

    tenant_id: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    kind: str | None = None
    current_only: bool = True
    visible_in: str | None = None
    anchor_id: str | None = None
    min_importance: float | None = None


@runtime_checkable
class NoteRepository(Protocol):
    """Durable notes and their companions. Every write is one transaction."""

    # notes
    def add_note(self, note: Note, *, supersede: Sequence[int] = (), only_current: bool = False) -> Note | None:
        """Insert ``note`` (closing the ``supersede`` versions at its valid_from, in its
        lineage); None when one of its source messages no longer exists. With
        ``only_current`` the whole write is refused (``NoteSupersededError``) when one of
        the ``supersede`` versions is no longer current, checked in the same transaction."""
        ...

    def merge_note(self, note_id: int, source_ids: Sequence[int], session_id: str,
                   importance: float) -> Note | None: ...
    def get_note(self, note_id: int) -> Note | None: ...
    def get_notes(self, note_ids: Sequence[int]) -> list[Note]:
        """The notes with these ids that exist, by id (one read per few hundred ids)."""
        ...

    def list_notes(self, flt: NoteFilter, *, limit: int = 100, offset: int = 0) -> list[Note]: ...
    def search_notes(self, query: str, flt: NoteFilter, *, limit: int = 20) -> list[tuple[Note, float]]: ...
    def current_in_slot(self, tenant_id: str, user_id: str | None, slots: Sequence[str]) -> list[Note]: ...
    def history(self, note_id: int) -> list[Note]: ...
    def expire_note(self, note_id: int, at: datetime) -> Note: ...
    def reopen_note(self, note_id: int) -> bool:
        """Make a superseded version current again (its successor was forgotten)."""
        ...

    def delete_notes(self, note_ids: Sequence[int]) -> int: ...
    def notes_from(self, *, message_ids: Sequence[int] | None = None,
                   session_id: str | None = None) -> list[int]: ...

    # facets
    def add_facets(self, facets: Sequence[Facet]) -> int: ...
    def list_facets(self, *, session_id: str | None = None, kind: str | None = None,
                    value: str | None = None, limit: int = 200) -> list[Facet]: ...

    # promotion progress
    def progress(self, session_id: str) -> int: ...
    def set_progress(self, session_id: str, last_message_id: int) -> None: ...
    def sessions_behind(self, *, limit: int = 1000) -> list[str]: ...

    # archive tier
    def archive_session(self, session_id: str, reason: str | None = None) -> bool: ...
    def unarchive_session(self, session_id: str) -> bool: ...
    def archived_sessions(self, *, limit: int = 1000) -> list[tuple[str, datetime, str | None]]: ...

    # audit log
    def append_audit(self, entry: AuditEntry) -> AuditEntry: ...
    def list_audit(self, *, session_id: str | None = None, tenant_id: str | None = None,
                   limit: int = 100) -> list[AuditEntry]: ...
    def redact_audit(self, session_id: str) -> int: ...

    def stats(self) -> dict[str, Any]: ...


# ---------------------------------------------------------------------------- embedders


class Embedder(Protocol):
    """What memlane needs from an embedding model.

    Implementations may subclass this protocol to inherit :meth:`embed_query`.

    Deliberately not ``@runtime_checkable``: on Python 3.11 ``isinstance()`` against a
    protocol evaluates every property, which for :class:`HttpEmbedder` means a network probe
    (that can raise). To tell a spec from an embedder, test ``isinstance(x, str)``.
    """

    @property
    def model_id(self) -> str:
        """Identifies the model (and variant) that made the vectors."""
        ...

    @property
    def dimension(self) -> int:
        """Length of every vector."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Float32 array of shape ``(len(texts), dimension)``, rows L2-normalised, in order."""
        ...

    def embed_query(self, text: str) -> Vectors:
        """One text's vector, 1-D of length ``dimension``."""
        if not isinstance(text, str):
            raise InvalidInputError(
                f"embed_query() takes one string, got {type(text).__name__}; use embed() for a list of texts"
            )
        import numpy as np

        return np.asarray(self.embed([text])[0], dtype=np.float32)

    def load(self) -> None:
        """Get ready to embed (load the model) now instead of on the first call.

        The indexer calls it when background work starts, so a search that follows does not
        wait for the whole model start. The default does nothing (nothing to load).
        """
        return None


# ---------------------------------------------------------------------------- response cache


@dataclass(slots=True)
class CachedResponse:
    """One answer kept by the response cache (store migration 14), scoped to a tenant and
    a user (``scope`` is ``user:<id>``, or ``session:<id>`` for a session without a user)."""

    tenant_id: str
    scope: str
    model: str
    fingerprint: str
    query_key: str
    query: str
    response: str
    created_at: float  # epoch seconds
    expires_at: float | None = None
    session_id: str | None = None  # where it was answered: forgetting that session drops it
    language: str | None = None
    vector: bytes | None = field(default=None, repr=False)  # the question's float32 vector
    vector_model: str | None = None
    cost_seconds: float | None = None  # what the model took to answer (saved by each hit)
    cost_tokens: int | None = None
    hits: int = 0
    id: int | None = None


@runtime_checkable
class ResponseCacheRepository(Protocol):
    """Cached answers and their sources in the store's own database. An answer goes, inside
    the database, when a message or note it was built from is deleted or a note superseded,
    and with the session it was answered in."""

    def put_response(
        self, entry: CachedResponse, message_ids: Sequence[int], note_ids: Sequence[int]
    ) -> CachedResponse: ...
    def response_candidates(
        self, tenant_id: str, scope: str, model: str, fingerprint: str, now: float, *, limit: int = 200
    ) -> list[CachedResponse]:
        """Unexpired entries of that key, newest first."""
        ...

    def record_lookup(
        self, tenant_id: str, hit: CachedResponse | None, now: float
    ) -> None:
        """Count a lookup (and a hit with what it saved) for ``memlane stats``."""
        ...

    def response_cache_counts(self, tenant_id: str | None = None) -> dict[str, float]:
        """entries, lookups, hits, saved_seconds, saved_tokens (all tenants when None)."""
        ...

    def delete_responses(
        self, *, tenant_id: str | None = None, scope: str | None = None, expired_at: float | None = None
    ) -> int:
        """Drop entries: of a tenant and/or scope, or those expired at ``expired_at``."""
        ...
