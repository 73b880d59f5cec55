"""Memory: the one object an agent talks to.

It validates input once, appends to the store in one transaction per call,
and tells observers (the embedder queue, the state tracker, the summarizer)
about new messages *after* the write is durable, so derived work can never
lose or block an acknowledged message. Method names follow the seed projects
(see docs/api-mapping.md).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import queue
import threading
import time
import uuid
import warnings
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memlane import transfer
from memlane.config import Settings, load_settings
from memlane.context.window import Window, recent_window
from memlane.errors import (
    ConflictError,
    CorruptRecordError,
    InvalidInputError,
    MemlaneError,
    NotFoundError,
    SessionNotFoundError,
    StorageError,
)
from memlane.lru import LRUCache
from memlane.models import (
    TURN_FIELDS,
    Message,
    MessageFilter,
    SearchHit,
    Session,
    SessionFilter,
    Turn,
    check_json,
    message_from_input,
    utcnow,
)
from memlane.parts import Extensions, Parts
from memlane.scoping import public_session_id, session_key, tenant_of_key
from memlane.store import Store, TurnRecord, open_store
from memlane.store.erase import EraseCounts, EraseRequest
from memlane.store.events import LOST as LOST_EVENTS
from memlane.store.events import ChangeEvent, EventSource, TenantVersions
from memlane.text import snippet
from memlane.tokens import TokenCounter, counts_cheaply, get_counter
from memlane.validation import check_identifier, check_max_tokens, check_metadata_filter

if TYPE_CHECKING:
    from memlane.bus.hub import EventBus, Subscription
    from memlane.bus.shared_cache import HotCache, RedisCache
    from memlane.cache_sync import CacheSync
    from memlane.context.answers import CacheHit, ResponseCache
    from memlane.context.packet import ContextPacket
    from memlane.hot_packets import PacketSlot
    from memlane.notes.models import AuditEntry, Facet, Note
    from memlane.notes.service import NotesService
    from memlane.ports import CachedResponse
    from memlane.rooms.handler import CommandResult
    from memlane.rooms.lifecycle import MaintainReport
    from memlane.sealing import Sealer
    from memlane.state.references import Resolution
    from memlane.state.sessions import SessionManager
    from memlane.state.tracker import SessionState

log = logging.getLogger(__name__)

MessageInput = Message | Mapping[str, Any]
#: Called after messages are durably stored: (session as the append left it, stored messages).
Observer = Callable[[Session, list[Message]], None]



@dataclass(frozen=True, slots=True)
class _Target:
    """A session a write goes to, as the writer knows it (see Memory._target)."""

    session_id: str
    created_at: datetime
    counter: TokenCounter


class _StaleTarget(Exception):
    """The session under a target's id is gone or was created again: nothing was written."""


#: How often auto_prune_days is applied again while a memory stays open.
_PRUNE_EVERY_S = 86_400.0
#: Longer messages are not token-counted when written (see _cached_count).
_COUNT_AT_WRITE_BELOW = 1_000_000

#: Derived record naming the encoding that made a session's cached token counts.
TOKEN_ENCODING_KIND = "token_encoding"

# Memories not yet closed. A script that ends without close() would otherwise exit
# while the embedder's native (onnxruntime) threads still run, which can abort the
# interpreter ("terminate called without an active exception", exit code 134).
# Weak references, so this set never keeps a Memory alive.
_OPEN: weakref.WeakSet[Memory] = weakref.WeakSet()


@atexit.register
def _close_open_memories() -> None:
    for mem in list(_OPEN):
        try:
            mem._close(at_exit=True)
        except Exception:  # one failing close must not stop the others at exit
            log.exception("error while closing memlane memory at exit")


class Memory:
    """Conversation memory on a store (SQLite by default).

    With the setting ``enabled: false`` (config file, ``MEMLANE_ENABLED=false`` or
    ``Memory(enabled=False)``) memory is switched off, as in the seed projects: the
    object still constructs so an agent needs no special case, but nothing is opened
    on disk, writes are validated and returned without an id and not stored, and
    reads (windows, history, search, turns) are empty.

    A Memory that is not closed is closed when the interpreter exits.
    """

    def __init__(
        self,
        path: str | Path | Store | None = None,
        *,
        settings: Settings | None = None,
        key: str | None = None,
        **overrides: Any,
    ) -> None:
        self.settings = settings or load_settings(**overrides)
        if settings is not None and overrides:
            self.settings = self.settings.model_copy(update=overrides)
        self.enabled = self.settings.enabled
        if not self.enabled:
            # An empty throwaway store that is never written: reads find nothing and the
            # configured storage path is not touched.
            log.warning(
                "memlane memory is disabled (enabled: false): nothing will be stored or "
                "recalled. To enable it set 'enabled: true' in ~/.memlane/config.yaml, "
                "MEMLANE_ENABLED=true, or pass enabled=True."
            )
            path = "memory://"
        if path is None:
            path = self.settings.storage_url()
        options: dict[str, Any] = {}
        if isinstance(path, str | Path):
            text = str(path)
            if not text.startswith(("postgres", "memory://")) and text != ":memory:":
                options["durability"] = self.settings.durability
                # Encryption at rest (SQLCipher): the key given, else the environment
                # variable the settings name (MEMLANE_KEY unless key_env says otherwise).
                options["key"] = key or os.environ.get(self.settings.key_env) or None
            elif key:
                raise InvalidInputError(
                    "key= encrypts SQLite files (SQLCipher); on PostgreSQL use the server's "
                    "disk or tablespace encryption"
                )
            self.store: Store = open_store(path, **options)
        else:
            self.store = path
        if hasattr(self.store, "event_retention_seconds"):
            self.store.event_retention_seconds = self.settings.event_retention_days * 86_400.0
        #: Seals files written beside an encrypted store (checkpoints); None when not encrypted.
        self.sealer: Sealer | None = None
        if options.get("key") and getattr(self.store, "encrypted", False):
            from memlane.sealing import Sealer

            self.sealer = Sealer(options["key"])
        self.counter: TokenCounter = get_counter(self.settings.token_model)
        self._observers: list[Observer] = []
        self._background_observers: list[Observer] = []
        # Observers that keep derived data (state, summaries, notes, vectors) and the
        # appends they have not seen yet: see start_background_work().
        self._derived_observers: list[Observer] = []
        self._on_start: list[Callable[[], None]] = []
        self._background_started = False
        self._deferred: deque[tuple[Session, list[Message]]] = deque()
        self._deferred_messages = 0
        self._dispatcher: threading.Thread | None = None
        # (closer, what to run instead at interpreter exit or None for the same)
        self._closers: list[tuple[Callable[[], None], Callable[[], None] | None]] = []
        self._bus: EventBus | None = None
        self._hot_cache: RedisCache | None = None
        #: Windows served from (hits) or not found in (misses) the shared hot cache.
        self.hot_window_counts = {"hits": 0, "misses": 0}
        self.hot_packet_counts = {"hits": 0, "misses": 0, "kept": 0}
        self._bus_lock = threading.Lock()
        self._pending: deque[tuple[str, list[Message], TurnRecord | None]] = deque()
        self._pending_lock = threading.Lock()
        #: The optional parts, typed (search, state, summaries, notes, ...; None when absent).
        self.parts = Parts()
        # session id -> (created_at, encoding of its cached token counts or None if unknown)
        # Bounded: a server sees sessions without end; a dropped entry is one derived-row read.
        self._count_encodings: LRUCache[str, tuple[datetime, str | None]] = LRUCache(65_536)
        self._closed = False
        self._pruned_at: float | None = None
        #: Reads the outbox before reads that use this process's caches (cache_sync.py).
        self.cache_sync: CacheSync | None = None
        _OPEN.add(self)
        if not self.enabled:
            return  # no indexing, state or summaries for a memory that stores nothing
        if self.settings.redis_url:
            _ = self.bus  # an instance that only writes still announces its commits on Redis
        from memlane.components import attach_all

        attach_all(self)  # the parts are made on first use (see components.py)
        self._auto_prune()

    def _auto_prune(self) -> None:
        """Apply ``auto_prune_days`` without a scheduler: when memory opens, then at most once
        a day while it stays open (checked on writes). The query is one indexed range scan."""
        days = self.settings.auto_prune_days
        if days is None:
            return
        now = time.monotonic()
        if self._pruned_at is not None and now - self._pruned_at < _PRUNE_EVERY_S:
            return
        self._pruned_at = now
        try:
            deleted = self.prune_old_sessions(days)
        except StorageError:  # a locked or read-only database: try again on a later write
            log.warning("auto_prune_days: pruning failed; will retry later", exc_info=True)
            self._pruned_at = None
            return
        if deleted:
            log.info("auto_prune_days=%d: deleted %d inactive session(s)", days, deleted)

    # ------------------------------------------------------------ construction

    @classmethod
    def from_url(cls, url: str, **overrides: Any) -> Memory:
        """Open memory on ``sqlite:///path``, ``memory://`` or ``postgresql://...``."""
        return cls(url, **overrides)

    @classmethod
    def in_memory(cls, **overrides: Any) -> Memory:
        """A throwaway memory for development and tests."""
        return cls("memory://", **overrides)

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._close(at_exit=False)

    def _close(self, *, at_exit: bool) -> None:
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        self._drain_dispatcher(timeout=30.0)
        if self._dispatcher is not None:
            self._dispatch_queue.put(None)
            self._dispatcher.join(timeout=5.0)
        for closer, exit_closer in reversed(self._closers):
            run = exit_closer if at_exit and exit_closer is not None else closer
            try:
                run()
            except Exception:  # one failing component must not keep the store open
                log.exception("error while closing a memlane component")
        self.store.close()

    def add_observer(
        self,
        observer: Observer,
        *,
        on_close: Callable[[], None] | None = None,
        background: bool = False,
        derived: bool = False,
        on_start: Callable[[], None] | None = None,
    ) -> None:
        """Subscribe to durable appends (used by indexing, state and summaries).

        Inline observers run in the caller's thread and must be cheap (enqueue work).
        ``background=True`` observers run in order on one worker thread, so work
        such as state tracking never adds to the latency of ``add``;
        ``flush()`` waits for them.

        ``derived=True`` marks an observer that keeps data derived from the log and
        catches up from the log by itself (state, summaries, notes, vectors): it runs
        only once background work has started (:meth:`start_background_work`), and then
        first sees the appends made before. ``on_start`` runs at that moment.
        Background observers are always derived.
        """
        if background:
            self._background_observers.append(observer)
        elif derived:
            self._derived_observers.append(observer)
        else:
            self._observers.append(observer)
        if on_start is not None:
            self._on_start.append(on_start)
            if self._background_started:  # a part made after background work started
                on_start()
        if on_close is not None:
            self._closers.append((on_close, None))

    #: Messages remembered for derived observers before background work starts; older ones
    #: are dropped (the observers catch up from the log when next asked), so a process that
    #: only writes holds at most this many.
    MAX_DEFERRED = 1_000

    @property
    def extensions(self) -> Extensions:
        """Deprecated: the parts by their old string keys; use :attr:`parts` (typed)."""
        warnings.warn(
            "mem.extensions is deprecated and will be removed; use the typed mem.parts "
            "(mem.extensions['notes'] is mem.parts.notes)", DeprecationWarning, stacklevel=2,
        )
        return Extensions(self.parts)

    @property
    def background_work_started(self) -> bool:
        return self._background_started

    def start_background_work(self) -> None:
        """Keep derived data current from now on, on background threads: session state,
        rolling summaries and checkpoints, long-term notes, vectors (the embedding model).

        It starts by itself when this process first reads derived data (search, context,
        hydrate, state, notes, flush) and when a server starts. A process that only writes
        and reads windows never starts it, so it never loads the embedding model or the
        language model: the next process that reads derived data catches up from the log.
        Long-running writers (workers, bots) may call it at start.
        """
        self._start_background(build_parts=True)

    def _start_background(self, *, build_parts: bool) -> None:
        """``build_parts=False`` (a search): make the other parts (state, summaries, notes:
        ~0.1-0.2 s of imports) only when first used or before the first derived
        notification, not on the first search's path; they catch up from the log."""
        if self._background_started or not self.enabled:
            return
        if build_parts:
            self.parts.build_all()  # their observers must be registered before the replay
        else:
            self.parts.build("recall")  # the search's own part: its worker starts the model now
        with self._pending_lock:
            if self._background_started:
                return
            self._background_started = True
            self._start_cache_sync()  # before any derived read fills a cache
            deferred, self._deferred = self._deferred, deque()
            self._deferred_messages = 0
        for start in self._on_start:
            try:
                start()
            except Exception:  # derived work must never break the caller
                log.exception("memlane background start %r failed", start)
        for session, stored in deferred:
            self._notify_derived(session, stored)

    def _start_cache_sync(self) -> None:
        from memlane.cache_sync import CacheSync

        if self.cache_sync is None and isinstance(self.store, EventSource):
            sync = CacheSync(self.store)
            sync.on_change(self._drop_cached)
            self.cache_sync = sync

    def sync_caches(self) -> int:
        """Drop what this process caches of anything forgotten or superseded since the last
        look, by any process on this database; reads that use caches call it first.
        Returns how many such changes were handled."""
        return self.cache_sync.sync() if self.cache_sync is not None else 0

    def _drop_cached(self, event: ChangeEvent) -> None:
        # Only parts already made hold anything: a part is never made just to empty it.
        parts, sid = self.parts, event.session_id
        if event.kind == LOST_EVENTS:  # what was missed is unknown: every cached copy goes
            self._count_encodings.clear()
            if parts.built("recall") and parts.recall is not None:
                parts.recall.drop_cached()
            if parts.built("notes") and parts.notes is not None:
                parts.notes.drop_note_vectors(None)
            if parts.built("summaries") and parts.summaries is not None:
                parts.summaries.drop_cached(None)
            if parts.built("checkpoints") and parts.checkpoints is not None:
                parts.checkpoints.drop_cached(None)
            return
        if event.kind.startswith("note."):
            if parts.built("notes") and parts.notes is not None and event.subject_id is not None:
                parts.notes.drop_note_vectors([event.subject_id])
            return
        if parts.built("recall") and parts.recall is not None:
            parts.recall.drop_cached()
        if sid is None:
            return
        if event.kind != "message.appended":  # an append moves the window's key; others may not
            self._drop_hot([sid])
        if parts.built("summaries") and parts.summaries is not None:
            parts.summaries.drop_cached(sid)
        if event.kind == "session.forgotten":
            self._count_encodings.pop(sid)
            if parts.built("checkpoints") and parts.checkpoints is not None:
                parts.checkpoints.drop_cached(sid)

    def _start_dispatcher(self) -> None:
        with self._pending_lock:  # writers on several threads may be the first at once
            if self._dispatcher is None:
                self._launch_dispatcher()

    def _launch_dispatcher(self) -> None:
        self._dispatch_queue: queue.Queue[tuple[Session, list[Message]] | None] = queue.Queue()

        def run() -> None:
            while True:
                item = self._dispatch_queue.get()
                try:
                    if item is None:
                        return
                    for observer in self._background_observers:
                        try:
                            observer(*item)
                        except Exception:  # derived work must never break the worker
                            log.exception("memlane background observer %r failed", observer)
                finally:
                    self._dispatch_queue.task_done()

        self._dispatcher = threading.Thread(target=run, name="memlane-observers", daemon=True)
        self._dispatcher.start()

    def _drain_dispatcher(self, timeout: float | None) -> None:
        if self._dispatcher is None:
            return
        # Queue.join has no timeout: poll its counter instead.
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._dispatch_queue.unfinished_tasks:
            if deadline is not None and time.monotonic() > deadline:
                log.warning("background observers did not finish within %.1fs", timeout)
                return
            time.sleep(0.002)

    def add_closer(self, closer: Callable[[], None], *, at_exit: Callable[[], None] | None = None) -> None:
        """Run ``closer`` on close(); ``at_exit`` instead when the interpreter exits without
        close() (e.g. stop background work at once rather than finish it: what is derived
        from the log is picked up again by the next process)."""
        self._closers.append((closer, at_exit))

    # ------------------------------------------------------------ sessions

    def create_session(
        self,
        system_prompt: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        title: str | None = None,
        session_id: str | None = None,
        tenant_id: str = "default",
    ) -> str:
        """Create a session and return its id (a UUID unless you pass your own key).

        Ids are per tenant (memlane.scoping): in a tenant other than "default" the id
        returned is the session's key, ``session_key(tenant_id, session_id)``, which the
        other methods take; two tenants may use the same ``session_id``.
        """
        if session_id is not None:
            check_identifier(session_id)
        check_identifier(tenant_id, "tenant_id")
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise InvalidInputError("system_prompt must be a string")
        session = Session(
            id=session_key(tenant_id, session_id or str(uuid.uuid4())),
            user_id=user_id,
            agent_id=agent_id,
            tenant_id=tenant_id,
            title=title,
            system_prompt=system_prompt,
            metadata=check_json(metadata, "metadata"),
        )
        if not self.enabled:
            return session.id
        created = self.store.create_session(session)
        # Record which encoding makes this session's cached token counts before any
        # message exists, so every later writer (any process, any token_model) counts
        # for the cache with it and a reader can tell whether the cache fits its model.
        self.store.put_derived(session.id, TOKEN_ENCODING_KIND, {"encoding": self.counter.name})
        self._count_encodings.put(session.id, (created.created_at, self.counter.name))
        return session.id

    def token_encoding_of(self, session: Session) -> str | None:
        """The encoding that made the token counts cached on this session's messages,
        or None when unknown (sessions written before this was recorded, imports):
        then no cached count may be trusted and messages are counted again."""
        known = self._count_encodings.get(session.id)
        if known is not None and known[0] == session.created_at:
            return known[1]
        raw = self.store.get_derived(session.id, TOKEN_ENCODING_KIND) if self.enabled else None
        name = raw.get("encoding") if raw else None
        encoding = name if isinstance(name, str) else None
        # Keyed by created_at too: a session deleted and created again under the same id
        # (possibly by another process, with another model) is looked up afresh.
        self._count_encodings.put(session.id, (session.created_at, encoding))
        return encoding

    def get_session(self, session_id: str) -> Session:
        session = self.store.get_session(session_id)
        if session is None:
            raise SessionNotFoundError(session_id)
        return session

    def ensure_session(self, session_id: str, **fields: Any) -> Session:
        """The session, created on first use when auto_create_sessions is on (the seeds' policy)."""
        session = self.store.get_session(session_id)
        if session is not None:
            return session
        if not self.settings.auto_create_sessions:
            raise SessionNotFoundError(session_id)
        if "tenant_id" not in fields:  # a key names its tenant (memlane.scoping)
            fields["tenant_id"] = tenant_of_key(session_id)
        with contextlib.suppress(ConflictError):  # another process created it first
            self.create_session(session_id=public_session_id(session_id), **fields)
        return self.get_session(session_id)

    def load_session(self, session_id: str, *, include_hidden: bool = False) -> list[Message]:
        """The whole visible history of a session, oldest first."""
        if not self.enabled:
            return []
        self.get_session(session_id)
        return list(self.store.iter_messages(session_id, include_hidden=include_hidden))

    def list_sessions(self, limit: int = 10, offset: int = 0, **filters: Any) -> list[Session]:
        """Most recently active first. Filters: user_id, agent_id, tenant_id, status, metadata."""
        if limit < 1:
            raise InvalidInputError("limit must be at least 1")
        if filters.get("metadata") is not None:
            filters["metadata"] = check_metadata_filter(filters["metadata"], "metadata")
        try:
            flt = SessionFilter(**filters)
        except TypeError as exc:
            raise InvalidInputError(
                f"unknown session filter: {exc}; use user_id, agent_id, tenant_id, status, "
                "metadata, active_since, inactive_before"
            ) from exc
        return self.store.list_sessions(flt, limit=limit, offset=offset)

    def update_session(self, session_id: str, **changes: Any) -> Session:
        if "metadata" in changes:
            changes["metadata"] = check_json(changes["metadata"], "metadata")
        return self.store.update_session(session_id, **changes)

    def end_session(self, session_id: str) -> bool:
        """Mark a session ended; its history stays searchable."""
        if self.store.get_session(session_id) is None:
            return False
        self.store.update_session(session_id, status="ended")
        return True

    def delete_session(self, session_id: str) -> bool:
        """Delete a session and everything derived from it (see :meth:`erase`)."""
        return self.erase(session_ids=[session_id]).sessions > 0

    def erase(
        self,
        *,
        session_ids: Sequence[str] = (),
        message_ids: Sequence[int] = (),
        note_ids: Sequence[int] = (),
        keep_notes: bool = False,
    ) -> EraseCounts:
        """The one erase routine every deletion path uses (sessions, messages, notes).

        Background work, when it runs, is drained first, so none of it writes derived data
        of the rows after they are gone (when it does not run, it is not started for this);
        the forget hooks drop in-process copies (queues, caches,
        checkpoint files); then the store erases rows, keyword-index entries, vectors,
        summaries, state and the notes learned from them in one transaction, scrubs the
        bytes from its files and logs the ids (see store/erase.py). ``keep_notes`` is
        for retention: pruning raw turns keeps the distilled notes.
        """
        request = EraseRequest(
            session_ids=tuple(session_ids), message_ids=tuple(int(i) for i in message_ids),
            note_ids=tuple(int(i) for i in note_ids), with_notes=not keep_notes,
        )
        if request.empty:
            return EraseCounts()
        self._settle_before_erase(set(request.session_ids), set(request.message_ids))
        for sid in request.session_ids:
            self._count_encodings.pop(sid)
            self._notify_forget(sid, None)
        touched = set(request.session_ids)
        if request.message_ids:
            msgs = self.store.get_messages(request.message_ids)
            for sid in sorted({m.session_id for m in msgs} - set(request.session_ids)):
                self._notify_forget(sid, [m.id for m in msgs if m.session_id == sid and m.id])
            touched |= {m.session_id for m in msgs}
        # The tenants whose packets may quote what goes: a session key names its tenant (no
        # read); a note names its tenant only in its row, so erasing notes drops every packet.
        tenants: set[str | None] = {None} if request.note_ids else {tenant_of_key(sid) for sid in touched}
        counts = self.store.erase(request)
        self._drop_hot(touched, tenants)  # after the rows went: nothing can refill from them
        return counts

    def _drop_hot(self, session_ids: Iterable[str], tenants: Iterable[str | None] = ()) -> None:
        """Drop the shared hot cache's entries of these sessions (windows) and every packet
        of these tenants (a packet may quote another session through recall; None: of every
        tenant), everywhere."""
        hot = self.hot_cache if self.settings.redis_url else None
        if hot is not None:
            from memlane.hot_packets import packets_tag
            from memlane.hot_windows import session_tag

            hot.invalidate(*(session_tag(sid) for sid in sorted(session_ids)),
                           *sorted({packets_tag(t) for t in tenants}))

    def _settle_before_erase(self, session_ids: set[str], message_ids: set[int]) -> None:
        """Make sure no background work writes derived data of rows about to be erased."""
        if self._background_started:
            with contextlib.suppress(MemlaneError, TimeoutError):
                self.flush(30.0)
            return
        # Nothing runs that could write for these rows: starting background work here would
        # only load the embedding model and catch up on the whole log before deleting.
        # Appends remembered for it (see start_background_work) must not bring them back.
        self._retry_pending()
        with self._pending_lock:
            kept: deque[tuple[Session, list[Message]]] = deque()
            for session, stored in self._deferred:
                left = [] if session.id in session_ids else [m for m in stored if m.id not in message_ids]
                if left:
                    kept.append((session, left))
            self._deferred = kept
            self._deferred_messages = sum(len(stored) for _, stored in kept)

    def clear_session(self, session_id: str) -> int:
        """Hide the history from context (the seeds' /clear); it stays in the database."""
        self.get_session(session_id)
        return self.store.hide_messages(session_id)

    def inactive_sessions(self, days: int = 30) -> list[str]:
        """Ids of the sessions inactive for more than ``days``: what ``prune_old_sessions`` would delete."""
        if days < 0:
            raise InvalidInputError("days must be >= 0")
        return self.store.sessions_inactive_before(utcnow() - timedelta(days=days))

    def prune_old_sessions(self, days: int = 30) -> int:
        """Delete sessions inactive for more than ``days`` (one erase); returns how many."""
        return self.erase(session_ids=self.inactive_sessions(days)).sessions

    # ------------------------------------------------------------ writing

    def _target(self, session_id: str, *, fresh: bool = False, **fields: Any) -> _Target:
        """Where a write goes: the session's id, when it was created, and the counter of
        its cached token counts. A session this memory created or wrote to before is known
        without a read (the append checks, in its own transaction, that it is still that
        session); otherwise, or when ``fresh``, it is read (and created on first use)."""
        known = None if fresh else self._count_encodings.get(session_id)
        if known is not None:
            created, encoding = known
        else:
            session = self.ensure_session(session_id, **fields)
            created, encoding = session.created_at, self.token_encoding_of(session)
        counter = self.counter if encoding is None or encoding == self.counter.name else get_counter(encoding)
        return _Target(session_id, created, counter)

    def _prepare(self, target: _Target, raw: MessageInput, **defaults: Any) -> Message:
        session_id = target.session_id
        msg = message_from_input(raw, max_chars=self.settings.max_message_chars)
        for key, value in defaults.items():
            if value is not None and getattr(msg, key) in (None, "", {}):
                setattr(msg, key, value)
        if msg.role == "tool" and msg.tool_call_id and not self.store.find_tool_call(
            session_id, msg.tool_call_id
        ):
            raise InvalidInputError(
                f"tool result {msg.tool_call_id!r} has no matching call: save the assistant "
                "message whose tool_calls contain this id first"
            )
        msg.session_id = session_id
        msg.token_count = self._cached_count(target, msg)
        return msg

    @staticmethod
    def _cached_count(target: _Target, msg: Message) -> int | None:
        """The token count to cache with a new message, or None (readers count it then)
        when the vocabulary is not loaded yet: a write never waits for it to load."""
        counter = target.counter
        # Nor for a message of megabytes: its exact count can take seconds (one long run
        # of letters is superlinear to encode), and a window sizes it by a bound instead.
        cheap = counts_cheaply(counter) and len(msg.content) <= _COUNT_AT_WRITE_BELOW
        return counter.count_message(msg) if cheap else None

    def _append(
        self, target: _Target, messages: list[Message], turn: TurnRecord | None
    ) -> list[Message]:
        """Store ``messages`` in one transaction, then tell the observers.

        Raises _StaleTarget (nothing written) when the session under that id is no longer
        the one ``target`` knew: the caller prepares the messages again for the new one."""
        self._retry_pending()
        if self._pruned_at is not None:
            self._auto_prune()
        try:
            session, stored = self.store.append_to(
                target.session_id, messages, turn, created_at=target.created_at
            )
        except SessionNotFoundError:
            self._count_encodings.pop(target.session_id)
            raise _StaleTarget from None
        except StorageError:
            if self.settings.on_storage_error != "log":
                raise
            log.exception(
                "storage failed; keeping %d message(s) in memory and retrying later",
                len(messages),
            )
            with self._pending_lock:
                self._pending.append((target.session_id, messages, turn))
            return messages
        self._notify(session, stored)
        return stored

    def _retry_pending(self) -> None:
        while self._pending:
            with self._pending_lock:
                if not self._pending:
                    return
                sid, msgs, turn = self._pending[0]
            try:
                stored = self.store.append(sid, msgs, turn)
            except StorageError:
                return  # still failing; keep them for the next write
            with self._pending_lock:
                self._pending.popleft()
            session = self.store.get_session(sid)
            if session is not None:
                self._notify(session, stored)

    @property
    def pending_writes(self) -> int:
        """Messages accepted while storage was failing (fail-open mode), not yet stored."""
        return sum(len(m) for _, m, _ in self._pending)

    def _notify(self, session: Session, stored: list[Message]) -> None:
        for observer in self._observers:
            try:
                observer(session, stored)
            except Exception:  # derived work must never fail an acknowledged write
                log.exception("memlane observer %r failed", observer)
        if not self._background_started:
            with self._pending_lock:
                if not self._background_started:
                    self._deferred.append((session, stored))
                    self._deferred_messages += len(stored)
                    while self._deferred_messages > self.MAX_DEFERRED and len(self._deferred) > 1:
                        self._deferred_messages -= len(self._deferred.popleft()[1])
                    return
        self._notify_derived(session, stored)

    def _notify_derived(self, session: Session, stored: list[Message]) -> None:
        self.parts.build_all()  # every part sees every append after the start (no-op once made)
        if self._background_observers:
            self._start_dispatcher()
            self._dispatch_queue.put((session, stored))
        for observer in self._derived_observers:
            try:
                observer(session, stored)
            except Exception:  # derived work must never fail an acknowledged write
                log.exception("memlane observer %r failed", observer)

    def _notify_forget(self, session_id: str, message_ids: Sequence[int] | None) -> None:
        # Parts keep derived copies outside the rows being deleted (state, checkpoint files,
        # notes): each must drop its own, made or not yet made in this process.
        self.parts.build_all()
        for hook in self.parts.forget_hooks:
            try:
                hook(session_id, message_ids)
            except Exception:
                log.exception("forget hook %r failed", hook)

    def _unstored(self, session_id: str, raw: MessageInput) -> Message:
        """A message checked like a stored one but not written (memory disabled)."""
        msg = message_from_input(raw, max_chars=self.settings.max_message_chars)
        msg.session_id = session_id
        return msg

    def save_message(self, session_id: str, message: MessageInput) -> Message:
        """Append one message (an OpenAI chat dict or a Message); returns it with its id.

        The seeds' name (docs/api.md): the same as ``add(session_id, message)``."""
        if not self.enabled:  # validated, not stored
            return self._unstored(session_id, message)
        for fresh in (False, True):
            target = self._target(session_id, fresh=fresh)
            msg = self._prepare(target, message)
            with contextlib.suppress(_StaleTarget):
                return self._append(target, [msg], None)[0]
        raise SessionNotFoundError(session_id)  # deleted again while being written to

    def add(
        self,
        session_id: str,
        content: str | MessageInput,
        role: str = "user",
        **fields: Any,
    ) -> Message:
        """Shorthand: ``mem.add(sid, "hello")`` or ``mem.add(sid, {...})``."""
        if isinstance(content, str):
            return self.save_message(session_id, {"role": role, "content": content, **fields})
        return self.save_message(session_id, content)

    def add_messages(self, session_id: str, messages: Iterable[MessageInput]) -> list[Message]:
        """Append several messages in one transaction (all or nothing)."""
        if not self.enabled:
            return [self._unstored(session_id, m) for m in messages]
        given = [message_from_input(m, max_chars=self.settings.max_message_chars) for m in messages]
        for fresh in (False, True):
            target = self._target(session_id, fresh=fresh)
            prepared: list[Message] = []
            known_calls: set[str] = set()
            for msg in given:
                if msg.role == "tool" and msg.tool_call_id not in known_calls:
                    msg = self._prepare(target, msg)
                else:
                    msg.session_id = target.session_id
                    msg.token_count = self._cached_count(target, msg)
                known_calls.update(c["id"] for c in msg.tool_calls or ())
                prepared.append(msg)
            if not prepared:
                return []
            with contextlib.suppress(_StaleTarget):
                return self._append(target, prepared, None)
        raise SessionNotFoundError(session_id)  # deleted again while being written to

    def store_interaction(
        self,
        query: str,
        response: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        author_id: str | None = None,
        author_name: str | None = None,
        created_at: datetime | None = None,
        resolve: bool = False,
    ) -> str:
        """Store a user query and the assistant's response as one turn; returns the turn id.

        Per-turn fields (intent, action_name, job_refs, model_used, confidence_score,
        processing_time, resolved_query, context_used) may be given in ``metadata``; they
        are kept in their own columns, the rest stays in the turn's metadata. With
        ``resolve`` the query's references are resolved against the session first and the
        resolved query is kept beside the original (unless metadata already has one).
        """
        meta = check_json(metadata, "metadata")
        if not self.enabled:
            self._unstored(session_id or "", {"role": "user", "content": query})
            self._unstored(session_id or "", {"role": "assistant", "content": response})
            return str(uuid.uuid4())
        if session_id is None:
            session_id = self.active_session_for(user_id, query)
        target = self._target(session_id, user_id=user_id)
        if resolve and "resolved_query" not in meta and isinstance(query, str) and query.strip():
            for key, value in self.resolve_references(query, session_id).to_metadata().items():
                meta.setdefault(key, value)
        turn_id = str(uuid.uuid4())
        fields = {k: meta.pop(k) for k in TURN_FIELDS if k in meta}
        job_refs = fields.get("job_refs") or []
        if not isinstance(job_refs, list) or not all(isinstance(j, str) for j in job_refs):
            raise InvalidInputError("job_refs must be a list of strings")
        for key in ("confidence_score", "processing_time"):
            value = fields.get(key)
            if value is not None and not isinstance(value, int | float):
                raise InvalidInputError(f"{key} must be a number")
        when = created_at or utcnow()
        record = TurnRecord(
            turn_id=turn_id,
            intent=fields.get("intent"),
            action_name=fields.get("action_name"),
            job_refs=tuple(job_refs),
            model_used=fields.get("model_used"),
            confidence_score=fields.get("confidence_score"),
            processing_time=fields.get("processing_time"),
            resolved_query=fields.get("resolved_query"),
            context_used=fields.get("context_used"),
            metadata=meta,
        )
        for fresh in (False, True):
            if fresh:
                target = self._target(session_id, fresh=True, user_id=user_id)
            user = self._prepare(
                target,
                {"role": "user", "content": query, "author_id": author_id or user_id,
                 "author_name": author_name, "turn_id": turn_id, "created_at": when},
            )
            assistant = self._prepare(
                target,
                {"role": "assistant", "content": response, "turn_id": turn_id, "created_at": when},
            )
            try:
                self._append(target, [user, assistant], record)
            except _StaleTarget:
                continue
            for hook in self.parts.turn_hooks:
                hook(session_id)  # the per-turn checkpoint (settings.checkpoint_per_turn)
            return turn_id
        raise SessionNotFoundError(session_id)  # deleted again while being written to

    def active_session_for(self, user_id: str | None, query: str | None = None) -> str:
        """The user's most recently active open session, or a new one (auto-create)."""
        self.start_background_work()
        manager = self.parts.sessions
        if manager is not None:  # expiry, per-user cap, topic changes (memlane.state.sessions)
            return str(manager.active_session_for(user_id, query))
        found = self.store.list_sessions(SessionFilter(user_id=user_id, status="active"), limit=1)
        if found:
            return found[0].id
        return self.create_session(user_id=user_id)

    def mark_important(
        self, message_id: int, *, importance: float = 1.0, pinned: bool | None = True
    ) -> Message:
        return self.store.update_message(message_id, importance=importance, pinned=pinned)

    def forget_messages(self, message_ids: Sequence[int]) -> int:
        """Delete messages and everything derived from them (see :meth:`erase`)."""
        return self.erase(message_ids=message_ids).messages

    # ------------------------------------------------------------ items (framework sessions)

    def items(self, session_id: str, limit: int | None = None) -> list[Message]:
        """The newest ``limit`` visible messages (every one when None), oldest first.

        What a framework's session reads back: ``m.to_item()`` gives each exactly as it
        was given (a Responses item, content parts, a chat message). Reads only the
        rows it returns.
        """
        if limit is not None and limit < 0:
            raise InvalidInputError("limit must be >= 0 (or None for every item)")
        self.get_session(session_id)
        if limit is None:
            return list(self.store.iter_messages(session_id, include_hidden=False))
        return self.store.recent_messages(session_id, limit)[::-1] if limit else []

    def pop(self, session_id: str) -> Message | None:
        """Remove the newest visible message and return it (None when there is none)."""
        self.get_session(session_id)
        newest = self.store.recent_messages(session_id, 1)
        if not newest or newest[0].id is None:
            return None
        self.forget_messages([newest[0].id])
        return newest[0]

    def forget_at(self, session_id: str, index: int) -> Message | None:
        """Remove the visible message at ``index`` (0 = oldest, -1 = newest); None when
        the index is out of range. Only that row is read."""
        self.get_session(session_id)
        if index < 0:
            found = self.store.recent_messages(session_id, -index)
            target = found[-1] if len(found) == -index else None
        else:
            ids = self.store.message_ids(session_id, offset=index, limit=1)
            got = self.store.get_messages(ids) if ids else []
            target = got[0] if got else None
        if target is None or target.id is None:
            return None
        self.forget_messages([target.id])
        return target

    def forget_history(self, session_id: str) -> int:
        """Delete every message of a session (hidden ones too) and all derived from them;
        the session itself stays. Unlike :meth:`clear_session`, nothing is left on disk."""
        self.get_session(session_id)
        ids = self.store.message_ids(session_id, include_hidden=True)
        if not ids:
            return 0
        # The ids are known to be this session's: no need to read the messages themselves.
        self._notify_forget(session_id, ids)
        return self.store.delete_messages(ids)

    def replace_history(self, session_id: str, messages: Iterable[MessageInput]) -> list[Message]:
        """Replace a session's whole history: the new messages are checked first, so bad
        input leaves the old history untouched."""
        session = self.ensure_session(session_id)
        checked = [message_from_input(m, max_chars=self.settings.max_message_chars) for m in messages]
        self.forget_history(session.id)
        return self.add_messages(session.id, checked)

    # ------------------------------------------------------------ session state

    @property
    def sessions(self) -> SessionManager:
        """Session lifecycle: expiry, per-user cap, topic-change detection."""
        self.start_background_work()
        manager = self.parts.sessions
        if manager is None:  # no parts (memory disabled): the rules still answer
            from memlane.components import session_manager

            manager = self.parts.sessions = session_manager(self)
        return manager

    def get_state(self, session_id: str) -> SessionState:
        """The session's live state: topics, open loops, pending clarifications, job refs."""
        self.start_background_work()
        return self._state_of(session_id)

    def resolve_references(self, query: str, session_id: str) -> Resolution:
        """Resolve "it", "deinen Vorschlag", "yes" ... in ``query`` against the session."""
        self.start_background_work()
        from memlane.state.references import resolve_in_session

        return resolve_in_session(self.store, self._state_of, query, session_id)

    def get_active_session(self, user_id: str | None = None) -> Session:
        """The user's active session, created when there is none (idle ones expire first).

        The seeds' name (docs/api.md) for ``get_session(active_session_for(user_id))``."""
        return self.sessions.get_active_session(user_id)

    def auto_expire_sessions(self) -> list[str]:
        """Expire sessions idle longer than ``mem.sessions.idle_timeout``; returns their ids."""
        return self.sessions.auto_expire_sessions()

    def detect_topic_change(self, query: str, session_id: str) -> bool:
        """Whether ``query`` leaves the topics of the session's recent messages."""
        return self.sessions.detect_topic_change(query, session_id)

    # ------------------------------------------------------------ context

    def context(
        self,
        session_id: str,
        query: str | None = None,
        max_tokens: int | None = None,
        *,
        strategy: str | None = None,
        model: str | None = None,
        priorities: Sequence[str] | str | None = None,
    ) -> ContextPacket:
        """The context packet for the next LLM call; ``packet.to_messages()`` fits ``max_tokens``."""
        self.start_background_work()
        self.sync_caches()
        from memlane.context.packet import PacketSources, build_packet

        if priorities is None:  # the configured order (settings.context_priorities), if any
            priorities = self.settings.context_priorities
        if max_tokens is not None:
            max_tokens = check_max_tokens(max_tokens)
        slot = self._packet_slot(session_id, query, max_tokens, strategy, model, priorities)
        if slot is not None:
            cached = slot.get()
            if cached is not None:
                self.hot_packet_counts["hits"] += 1
                return cached
            self.hot_packet_counts["misses"] += 1
        parts = self.parts
        sources = PacketSources(
            store=self.store, settings=self.settings, search=self.search,
            encoding_of=self.token_encoding_of, state_of=self._state_of,
            summaries=parts.summaries, notes=parts.notes, label_messages=parts.label_messages,
        )
        packet = build_packet(
            sources, session_id, query=query, max_tokens=max_tokens, strategy=strategy,
            model=model, priorities=priorities,
        )
        if slot is not None and slot.keep(packet, self.store.get_session(slot.session.id)):
            self.hot_packet_counts["kept"] += 1
        return packet

    def _packet_slot(
        self, session_id: str, query: str | None, max_tokens: int | None, strategy: str | None,
        model: str | None, priorities: Sequence[str] | str | None,
    ) -> PacketSlot | None:
        """Where this packet lives in the shared hot cache (None without one; see hot_packets.py)."""
        hot = self.hot_cache if self.settings.redis_url else None
        if hot is None or not isinstance(self.store, TenantVersions):
            return None
        from memlane.hot_packets import PacketSlot

        return PacketSlot.find(hot, self.store, self.get_session(session_id), self.settings, query=query,
                               max_tokens=max_tokens, strategy=strategy, model=model, priorities=priorities)

    def _state_of(self, session_id: str) -> SessionState:
        """The state part's state of a session (one made on the store without the part)."""
        from memlane.state.tracker import get_state

        return get_state(self.parts.state or self, session_id)

    def _responses(self) -> ResponseCache:
        """The response cache on this store (built on first use)."""
        from memlane.context.answers import ResponseCache

        found = self.parts.responses
        if found is None:
            repository = self.store.response_cache()
            if repository is None:
                raise InvalidInputError(f"store {self.store.url} keeps no response cache")
            recall = self.parts.recall
            found = ResponseCache(
                repository, self.store, embedder=recall.semantic_embedder if recall is not None else None
            )
            self.parts.responses = found
        return found

    def _packet_for(
        self, session_id: str, query: str, context: ContextPacket | None,
        max_tokens: int | None, strategy: str | None,
    ) -> ContextPacket:
        if context is not None:
            if context.conversation_id != session_id:
                raise InvalidInputError(
                    f"the context packet is of session {context.conversation_id!r}, not {session_id!r}"
                )
            return context
        return self.context(session_id, query, max_tokens, strategy=strategy)

    def cached_response(
        self,
        query: str,
        session_id: str,
        *,
        model: str,
        context: ContextPacket | None = None,
        semantic: bool = True,
        max_tokens: int | None = None,
        strategy: str | None = None,
    ) -> CacheHit | None:
        """The answer cached for ``query`` (resolved: references replaced) from ``model`` in
        this context, or None. ``context`` is the packet the model would get (built with
        ``max_tokens``/``strategy`` when not given); ``semantic`` also takes a paraphrase.
        Scoped to the session's tenant and user; see memlane/context/answers.py."""
        self.start_background_work()
        session = self.get_session(session_id)
        packet = self._packet_for(session_id, query, context, max_tokens, strategy)
        return self._responses().lookup(query, session, model, packet, semantic=semantic)

    def cache_response(
        self,
        query: str,
        response: str,
        session_id: str,
        *,
        model: str,
        context: ContextPacket | None = None,
        ttl: float | None = None,
        cost_seconds: float | None = None,
        cost_tokens: int | None = None,
        message_ids: Sequence[int] = (),
        max_tokens: int | None = None,
        strategy: str | None = None,
    ) -> CachedResponse:
        """Keep ``response`` as ``model``'s answer to ``query`` given ``context`` (the packet it
        was sent with). It expires after ``ttl`` seconds (default: the setting
        response_cache_ttl_seconds) and goes at once when a message or note of that context
        is forgotten or superseded. ``cost_seconds``/``cost_tokens``: what the answer cost,
        counted as saved by each hit; ``message_ids``: the stored turn, also a source."""
        self.start_background_work()
        session = self.get_session(session_id)
        packet = self._packet_for(session_id, query, context, max_tokens, strategy)
        return self._responses().store(
            query, response, session, model, packet,
            ttl=ttl if ttl is not None else self.settings.response_cache_ttl_seconds,
            cost_seconds=cost_seconds, cost_tokens=cost_tokens, message_ids=message_ids,
        )

    def hydrate(
        self, session_id: str, query: str | None = None, max_tokens: int | None = None
    ) -> ContextPacket:
        """Startup hydration (PRD §5): checkpoint or log -> packet; marks the session resuming."""
        self.start_background_work()
        self.sync_caches()
        from memlane.resume import hydrate

        if max_tokens is not None:
            max_tokens = check_max_tokens(max_tokens)
        return hydrate(self, session_id, query=query, max_tokens=max_tokens)

    def shutdown(self, session_id: str | None = None, *, close: bool = False) -> dict[str, Any]:
        """Clean shutdown (PRD §6): final summary, state, checkpoint; marks shutdown_clean."""
        self.start_background_work()
        from memlane.resume import shutdown

        return shutdown(self, session_id, close=close)

    # ------------------------------------------------------------ rooms, the Anchor, notes

    @property
    def anchor_id(self) -> str:
        """The Anchor's id, from the settings at this moment (never stored)."""
        from memlane.rooms.anchor import anchor_id

        return anchor_id(self.settings)

    def is_anchor(self, author_id: str | None) -> bool:
        return bool(author_id) and author_id == self.anchor_id

    def _notes(self) -> NotesService:
        from memlane.notes.service import NotesService

        self.start_background_work()
        self.sync_caches()

        service = self.parts.notes
        if not isinstance(service, NotesService):
            raise InvalidInputError(f"store {self.store.url} keeps no long-term notes")
        return service

    def handle_command(
        self, session_id: str, text: str, author_id: str | None = None, *,
        author_name: str | None = None, message_id: int | None = None,
    ) -> CommandResult:
        """Run a memory command said in the conversation ("forget this conversation",
        "merk dir das", ...). Only the Anchor may change memory; every command is audited."""
        from memlane.rooms.handler import handle_command

        return handle_command(self, self._notes(), session_id, text, author_id,
                              author_name=author_name, message_id=message_id)

    def notes(self, query: str | None = None, **filters: Any) -> list[Note]:
        """Long-term notes true now (``include_history=True`` for all versions). Filters:
        session_id (what that conversation sees), user_id, kind, tenant_id, limit."""
        return self._notes().list_notes(query, **filters)

    def add_note(self, text: str, **fields: Any) -> Note:
        """Write a note yourself; a note with the same ``slot`` is merged or superseded."""
        note = self._notes().add(text, **fields).note
        assert note is not None
        return note

    def note_history(self, note_id: int) -> list[Note]:
        """Every version of a note, oldest first: how it changed and when."""
        return self._notes().history(note_id)

    def correct_note(self, note_id: int, text: str, *, value: str | None = None, reason: str | None = None,
                     corrected_by: str | None = None) -> Note:
        """Correct a current note: a new version says ``text`` and supersedes it (the old one
        stays in ``note_history``, which says why: ``reason``, by ``corrected_by``)."""
        return self._notes().correct(note_id, text, value=value, reason=reason, corrected_by=corrected_by)

    def forget_note(self, note_id: int) -> int:
        """Delete a note with every version of it; how many versions went."""
        return self._notes().forget_note(note_id)

    def audit(self, entry: AuditEntry) -> AuditEntry:
        """Write one entry to the audit log (who changed memory, what, and the result)."""
        return self._notes().store.append_audit(entry)

    def audit_log(self, *, session_id: str | None = None, tenant_id: str | None = None,
                  limit: int = 100) -> list[AuditEntry]:
        """The audit log (of one tenant when ``tenant_id`` is given), newest first."""
        return self._notes().store.list_audit(session_id=session_id, tenant_id=tenant_id, limit=limit)

    def facets(
        self, session_id: str | None = None, kind: str | None = None, *,
        value: str | None = None, limit: int = 200,
    ) -> list[Facet]:
        """What was tracked beside the dialogue, oldest first: named entities, links, dates
        and system actions (tool calls). ``kind``: entity, link, time or action."""
        return self._notes().facets(session_id=session_id, kind=kind, value=value, limit=limit)

    def archive_session(self, session_id: str, reason: str | None = None) -> bool:
        """Move a conversation to the archive tier (out of context, still searchable)."""
        return self._notes().store.archive_session(session_id, reason)

    def unarchive_session(self, session_id: str) -> bool:
        return self._notes().store.unarchive_session(session_id)

    def maintain(self, *, dry_run: bool = False) -> MaintainReport:
        """Apply the lifecycle limits once: archive, prune, trim (see rooms/lifecycle.py)."""
        self.start_background_work()
        from memlane.rooms.lifecycle import maintain

        return maintain(self, dry_run=dry_run)

    # ------------------------------------------------------------ reading

    def window(
        self,
        session_id: str,
        max_tokens: int | None = None,
        *,
        model: str | None = None,
        include_system_prompt: bool = True,
    ) -> Window:
        """The newest messages that fit ``max_tokens``, with the system prompt first."""
        budget = check_max_tokens(max_tokens if max_tokens is not None else self.settings.max_history_tokens)
        if not self.enabled:
            return Window()
        hot = self.hot_cache
        if hot is not None:
            self.sync_caches()  # events of other instances drop what they made stale first
        session = self.get_session(session_id)
        counter = get_counter(model) if model else self.counter
        key = None
        if hot is not None:
            from memlane.hot_windows import decode_window, window_key

            key = window_key(session, budget, counter.name, include_system_prompt=include_system_prompt)
            raw = hot.get(key)
            if raw is not None:
                self.hot_window_counts["hits"] += 1
                return decode_window(raw)
            self.hot_window_counts["misses"] += 1
        win, whole = self._read_window(session, budget, counter, include_system_prompt=include_system_prompt)
        if hot is not None and key is not None and whole:  # a read that lost rows is not kept
            from memlane.hot_windows import WINDOW_TTL_SECONDS, encode_window, session_tag

            hot.set(key, encode_window(win), ttl_seconds=WINDOW_TTL_SECONDS, tags=[session_tag(session.id)])
            # A forget that finished while this window was read has dropped the tag already;
            # take back the entry this read just made of the rows it erased.
            now = self.store.get_session(session.id)
            if now is None or now.version != session.version:
                hot.delete(key)
        return win

    def _read_window(
        self, session: Session, budget: int, counter: TokenCounter, *, include_system_prompt: bool
    ) -> tuple[Window, bool]:
        """The window read from the store (what :meth:`window` caches), and whether every
        row could be read (fail-open reads that skipped some are not cached)."""
        system: Message | None = None
        reserved = 0
        if include_system_prompt and session.system_prompt:
            system = Message(role="system", content=session.system_prompt, session_id=session.id)
            reserved = counter.count_message(system)
            if reserved >= budget:
                system = system.with_(content=counter.truncate(session.system_prompt, budget // 2))
                reserved = counter.count_message(system)
        fail_open = self.settings.on_storage_error == "log"
        try:
            win = recent_window(
                self.store, session.id, budget, counter, reserved=reserved,
                # A cached count is only good for the encoding that made it.
                use_cache=counter.name == self.token_encoding_of(session),
                skip_corrupt=fail_open,  # fail-open: lose only the bad rows, named in the log
            )
        except CorruptRecordError:
            if not fail_open:
                raise
            # Only when the bad row cannot be located (not a messages row with an id).
            log.exception("corrupted history in session %s; continuing without it", session.id)
            win = Window(notes=["history could not be read (corrupted); sent without it"])
            whole = False
        else:
            whole = not win.skipped_ids
        if system is not None:
            win.messages.insert(0, system)
        return win, whole

    def get_recent_messages(
        self, session_id: str, max_tokens: int | None = None, *, model: str | None = None
    ) -> list[Message]:
        """Newest messages that fit ``max_tokens`` (token-exact), oldest first.

        The seeds' name (docs/api.md) for ``window(session_id, max_tokens).messages``."""
        return self.window(session_id, max_tokens, model=model).messages

    def get_conversation_context(self, session_id: str, limit: int = 5) -> list[dict[str, Any]]:
        """The last ``limit`` turns as dicts (seed 004's shape: query, response, fields).

        The seeds' name (docs/api.md) for ``list_turns(session_id, limit)`` as plain dicts."""
        if not self.enabled:
            return []
        self.get_session(session_id)
        return [t.to_dict() for t in self.store.list_turns(session_id, limit=limit)]

    def list_turns(self, session_id: str, limit: int = 50) -> list[Turn]:
        return self.store.list_turns(session_id, limit=limit)

    def get_message(self, message_id: int) -> Message:
        found = self.store.get_messages([message_id])
        if not found:
            raise NotFoundError(f"message {message_id} does not exist")
        return found[0]

    # ------------------------------------------------------------ search

    def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        tenant_id: str | None = None,
        top_k: int = 10,
        roles: Sequence[str] | None = None,
        authors: Sequence[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        min_score: float | None = None,
        unowned: bool = False,
    ) -> list[SearchHit]:
        """Search all past conversations. Keyword (BM25) unless a recall engine is attached.

        ``min_score`` is a floor on the calibrated relevance ``hit.score`` (0-1);
        ``unowned=True`` keeps to sessions that belong to no user."""
        self._start_background(build_parts=False)  # a process that searches keeps derived data current
        self.sync_caches()
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("query must be a non-empty string")
        if top_k < 1:
            raise InvalidInputError("top_k must be at least 1")
        flt = MessageFilter(
            session_id=session_id, user_id=user_id, agent_id=agent_id, tenant_id=tenant_id,
            roles=tuple(roles) if roles else None, authors=tuple(authors) if authors else None,
            since=since, until=until, unowned=unowned,
        )
        engine = self.parts.search
        if engine is not None:
            hits: list[SearchHit] = engine(query, flt, top_k)
        else:
            hits = [
                SearchHit(h.message, h.score, {"keyword": h.score}, snippet(h.message.content, query))
                for h in self.store.keyword_search(query, flt, limit=top_k)
            ]
        if min_score is not None:
            hits = [h for h in hits if h.score >= min_score]
        return hits

    def search_history(
        self, query: str, session_id: str | None = None, limit: int = 10, *,
        user_id: str | None = None, min_score: float | None = None,
    ) -> list[dict[str, Any]]:
        """Seed 004's search: conversation entries (one per turn, best first); the seeds'
        name (docs/api.md) for ``search(...)`` grouped by turn, as plain dicts.

        Each entry is the turn's dict (``query``, ``response``, ``model_used``,
        ``confidence_score``, ``processing_time``, ``resolved_query``, ``context_used``,
        ``metadata``, ``created_at``...) plus ``id`` (the turn id), ``timestamp``, the hit's
        calibrated ``score`` and ``snippet``. A turn found by both its query and its response
        is listed once; a message stored outside any turn is an entry with only its side.
        """
        from memlane.search.history import history_entries

        hits = self.search(query, session_id=session_id, user_id=user_id, top_k=limit * 2,
                           min_score=min_score)
        return history_entries(hits, lambda sid: self.store.list_turns(sid, limit=1_000_000), limit)

    def get_relevant_context(
        self,
        query: str,
        max_tokens: int = 2048,
        session_id: str | None = None,
        user_id: str | None = None,
        **options: Any,
    ) -> list[Message]:
        """Best past messages for ``query`` that fit ``max_tokens`` (token-exact), each
        prefixed with its date and speaker, de-duplicated. See memlane.search.recall."""
        from memlane.search.recall import relevant_context

        if options.get("min_score") is None:
            options["min_score"] = self.settings.rag_min_score
        superseded = getattr(self.parts.notes, "superseded_messages", None)
        return relevant_context(
            self.search, self.counter, query, max_tokens, session_id=session_id, user_id=user_id,
            superseded=superseded if callable(superseded) else None, **options,
        )

    # ------------------------------------------------------------ export / import

    def export_session(self, session_id: str, fmt: str = "json") -> str:
        session = self.get_session(session_id)
        messages = list(self.store.iter_messages(session_id))
        turns = self.store.list_turns(session_id, limit=1_000_000)
        return transfer.export_session(session, messages, turns, fmt)

    def import_sessions(self, text: str, fmt: str = "json", *, on_conflict: str = "error") -> list[str]:
        """Import sessions exported by export_session; returns their ids."""
        return transfer.import_sessions(self, text, fmt, on_conflict=on_conflict)

    def flush(self, timeout: float | None = None) -> None:
        """Start background work (see start_background_work), wait for it (indexing, state,
        summaries, notes) and retry writes held in fail-open mode."""
        self.start_background_work()
        self._retry_pending()
        if self.enabled:
            self.store.index_pending_keywords()  # every stored message searchable by keyword
        self.parts.build_all()  # a part not made yet catches up now, and flush waits for it
        self._drain_dispatcher(timeout)
        self.parts.flush(timeout)

    def events(
        self,
        since: int | None = 0,
        *,
        tenant_id: str | None = None,
        wait: bool = False,
        poll_seconds: float | None = None,
        stop: threading.Event | None = None,
    ) -> Iterator[ChangeEvent]:
        """Change events (ids, kind, time, tenant; never content) after event id ``since``.

        ``since=0`` replays everything kept, ``since=None`` starts at now; resume with the
        last event's ``id``. ``wait=True`` follows new changes, from any process on the
        same database, until ``stop`` is set; it wakes on PostgreSQL's NOTIFY, SQLite's
        ``data_version`` or Redis (``redis_url``), and reads the outbox after each wake-up,
        so nothing is missed or repeated. ``tenant_id`` keeps one tenant's events.
        ``poll_seconds`` is ignored (kept for callers written before the doorbells).
        """
        return self.bus.follow(since, tenant_id=tenant_id, wait=wait, stop=stop)

    def subscribe(
        self, callback: Callable[[ChangeEvent], object], *, since: int | None = None,
        tenant_id: str | None = None,
    ) -> Subscription:
        """Call ``callback(event)`` for every change event after ``since`` (None: from now
        on), in order, on a thread of its own, until ``.close()`` or this Memory closes.
        For per-instance caches: drop what an event names (see docs/scaling.md)."""
        return self.bus.subscribe(callback, since=since, tenant_id=tenant_id)

    @property
    def hot_cache(self) -> HotCache | None:
        """The cache every instance shares (Redis/Valkey at ``redis_url``), or None without one.
        Entries are bytes with a TTL and tags; ``invalidate(tag)`` drops them everywhere."""
        with self._bus_lock:
            if self._hot_cache is None and self.settings.redis_url:
                from memlane.bus.shared_cache import RedisCache

                self._hot_cache = RedisCache(self.settings.redis_url, prefix=self.settings.redis_prefix)
                self._closers.append((self._hot_cache.close, None))
            return self._hot_cache

    @property
    def bus(self) -> EventBus:
        """This Memory's event bus (made at first use; see :mod:`memlane.bus.hub`)."""
        with self._bus_lock:
            if self._bus is None:
                from memlane.bus.hub import EventBus

                self._bus = EventBus(self.store, redis_url=self.settings.redis_url,
                                     channel_prefix=self.settings.redis_prefix)
                self._closers.append((self._bus.close, None))
            return self._bus

    def backlog(self) -> dict[str, int]:
        """Derived work a write left to the background, by kind: messages not in the keyword
        index yet ("keywords") and messages whose vector ("vectors") is not made yet. It shrinks while background work runs
        (:meth:`start_background_work`) and is 0 after :meth:`flush`."""
        count = self.parts.backlog if self.enabled else None
        return count() if count is not None else {}

    def stats(self) -> dict[str, Any]:
        out = self.store.stats()
        out["pending_writes"] = self.pending_writes
        self.parts.build_all()
        if self.cache_sync is not None:
            out["cache_sync"] = self.cache_sync.to_dict()
        if self.enabled and isinstance(self.store, EventSource):
            out["bus"] = self.bus.figures()  # kind, published, outbox head, followers' lag
        if self._hot_cache is not None:
            out["hot_cache"] = {"window_hits": self.hot_window_counts["hits"],
                                "window_misses": self.hot_window_counts["misses"]}
            out["hot_packets"] = dict(self.hot_packet_counts)  # hits, misses, kept (see hot_packets.py)
        if self.enabled and self.store.response_cache() is not None:
            out["response_cache"] = self._responses().stats()
        for hook in self.parts.stats_hooks:
            out.update(hook())
        return out
