"""Session management (seed 004): auto-create, idle expiry, a per-user cap, topic changes.

* A query without a session goes to the user's active session, created on first use.
* A session idle for longer than ``idle_timeout`` (1 h) expires: its status becomes
  ``expire_status`` ("paused"), so the next query starts a new session. Writing to a
  paused session by its id wakes it up again; an "ended" one (``end_session``) stays ended.
* A user has at most ``max_active_per_user`` (10) active sessions; the least recently
  active ones are paused when a new one starts.
* Optionally (``split_on_topic_change``) a query whose embedding is far from everything
  recent in the active session starts a new session (``detect_topic_change``).

The manager lives on the Memory as ``mem.sessions``; its knobs are plain attributes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from memlane.errors import InvalidInputError, SessionNotFoundError
from memlane.models import Message, Session, SessionFilter, utcnow
from memlane.state import language as lang
from memlane.state.topic_shift import DEFAULT_THRESHOLD, is_topic_change
from memlane.state.tracker import get_state, save_state

if TYPE_CHECKING:
    from memlane.ports import Embedder, Essentials
    from memlane.state.tracker import StateTracker

log = logging.getLogger(__name__)

__all__ = ["OPEN_STATUSES", "SessionManager"]

#: Store statuses that count as an active session.
OPEN_STATUSES: tuple[str, ...] = ("active", "resuming", "awaiting_clarification")


class SessionManager:
    """Session lifecycle rules on top of a store.

    ``create_session`` makes a session the way ``Memory.create_session`` does (it records
    the session's token encoding too) and returns its id; ``tracker`` is the state part
    (a paused session says so in its state); ``indexer_embedder`` gives the search part's
    embedder when there is one, so topic changes use the same model.
    """

    def __init__(
        self,
        essentials: Essentials,
        *,
        create_session: Callable[..., str],
        tracker: StateTracker | None = None,
        indexer_embedder: Callable[[], Embedder | None] | None = None,
        idle_timeout: timedelta = timedelta(hours=1),
        max_active_per_user: int = 10,
        split_on_topic_change: bool = False,
        topic_change_threshold: float = DEFAULT_THRESHOLD,
        topic_window: int = 6,
        expire_status: str = "paused",
        embedder: Embedder | None = None,
    ) -> None:
        self.essentials = essentials
        self._create_session = create_session
        self.tracker = tracker
        self._indexer_embedder = indexer_embedder
        self.idle_timeout = idle_timeout
        self.max_active_per_user = max_active_per_user
        self.split_on_topic_change = split_on_topic_change
        #: Below this cosine to every recent message (and with no shared stem), a query is a new topic.
        self.topic_change_threshold = topic_change_threshold
        self.topic_window = topic_window
        self.expire_status = expire_status
        self._embedder = embedder
        self._lock = threading.RLock()

    # ------------------------------------------------------------ lifecycle

    def create_session(self, user_id: str | None = None, **fields: Any) -> Session:
        """A new active session for ``user_id``; the user's oldest sessions beyond the cap pause."""
        with self._lock:
            sid = self._create_session(user_id=user_id, **fields)
            self.enforce_limit(user_id, keep=sid)
            return self._session(sid)

    def find_active_session(self, user_id: str | None = None) -> Session | None:
        """The user's most recently active open session, after idle ones expired; or None."""
        with self._lock:
            self.auto_expire_sessions(user_id=user_id)
            found = self._open_sessions(user_id, limit=1)
            return found[0] if found else None

    def get_active_session(self, user_id: str | None = None) -> Session:
        """The user's active session; a new one when there is none (seed 004: auto-create)."""
        with self._lock:
            return self.find_active_session(user_id) or self.create_session(user_id)

    def active_session_for(self, user_id: str | None, query: str | None = None) -> str:
        """The session a query without a session id goes to (seed 004: auto-create)."""
        with self._lock:
            session = self.find_active_session(user_id)
            if (
                session is not None
                and query
                and self.split_on_topic_change
                and self.detect_topic_change(query, session.id)
            ):
                log.info("topic change in session %s; starting a new session", session.id)
                self._set_status(session.id, "paused")
                return self.create_session(
                    user_id, metadata={"previous_session_id": session.id}
                ).id
            if session is not None:
                return session.id
            return self.create_session(user_id).id

    def auto_expire_sessions(
        self, *, now: datetime | None = None, user_id: str | None = None
    ) -> list[str]:
        """Expire sessions idle for longer than ``idle_timeout``; returns their ids.

        With ``user_id`` only that user's sessions are checked.
        """
        cutoff = (now or utcnow()) - self.idle_timeout
        expired: list[str] = []
        with self._lock:
            for status in OPEN_STATUSES:
                while True:
                    batch = self.essentials.store.list_sessions(
                        SessionFilter(user_id=user_id, status=status, inactive_before=cutoff),
                        limit=200,
                    )
                    batch = [s for s in batch if s.id not in expired]
                    if not batch:
                        break
                    for session in batch:
                        self._set_status(session.id, self.expire_status)
                        expired.append(session.id)
        if expired:
            log.info("expired %d idle session(s)", len(expired))
        return expired

    def enforce_limit(self, user_id: str | None, *, keep: str | None = None) -> list[str]:
        """Pause the user's least recently active sessions beyond ``max_active_per_user``.

        ``keep`` (the session just started or written to) always stays active. Sessions
        without a user are not capped: there is no one to count them against.
        """
        if user_id is None:
            return []
        with self._lock:
            open_sessions = self._open_sessions(user_id, limit=self.max_active_per_user + 100)
            ordered = [s for s in open_sessions if s.id == keep] + [
                s for s in open_sessions if s.id != keep
            ]
            paused = [s.id for s in ordered[self.max_active_per_user:]]
            for sid in paused:
                self._set_status(sid, "paused")
        return paused

    def resume_session(self, session_id: str) -> Session:
        """Make a paused session active again (within the user's cap)."""
        with self._lock:
            session = self._session(session_id)
            if session.status not in OPEN_STATUSES:
                self._set_status(session_id, "active")
            self.enforce_limit(session.user_id, keep=session_id)
            return self._session(session_id)

    # ------------------------------------------------------------ topic change

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            found = self._indexer_embedder() if self._indexer_embedder is not None else None
            if found is None:
                from memlane.search.embedders import get_embedder

                spec = self.essentials.settings.embedder
                try:
                    found = get_embedder(spec) if spec else get_embedder("hashing")
                except Exception:  # no model installed: word overlap still beats nothing
                    log.warning("embedder %r unavailable; topic changes use hashing", spec)
                    found = get_embedder("hashing")
            self._embedder = found
        return self._embedder

    @embedder.setter
    def embedder(self, value: Embedder) -> None:
        self._embedder = value

    def detect_topic_change(self, query: str, session_id: str) -> bool:
        """Whether ``query`` moves away from everything recent in the session.

        The query is compared with the last ``topic_window`` messages
        (``state/topic_shift.py``): no shared content stem and a best cosine below
        ``topic_change_threshold`` (German compared through its English gloss) make a change. A short reply or one that refers
        back ("yes", "mach das nochmal") never is. ``memlane eval topics`` measures it.
        """
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("query must be a non-empty string")
        if self.essentials.store.get_session(session_id) is None:
            raise SessionNotFoundError(session_id)
        recent: list[Message] = [
            m for m in self.essentials.store.recent_messages(session_id, self.topic_window)
            if m.role in ("user", "assistant") and m.content.strip()
        ]
        texts = [m.content for m in reversed(recent)]
        if not texts or len(lang.words(query)) < 3:
            return False  # before the embedder loads: nothing to compare with
        return is_topic_change(query, texts, self.embedder, self.topic_change_threshold)

    # ------------------------------------------------------------ observer

    def on_append(self, session: Session, stored: list[Message]) -> None:
        """A write wakes a paused session; a session's first write applies the user's cap."""
        if session.status == "paused":
            self._set_status(session.id, "active", state=False)
            self.enforce_limit(session.user_id, keep=session.id)
        elif session.message_count == len(stored) and session.status in OPEN_STATUSES:
            # The session as the append left it: these are its first messages.
            self.enforce_limit(session.user_id, keep=session.id)

    # ------------------------------------------------------------ helpers

    def _session(self, session_id: str) -> Session:
        found = self.essentials.store.get_session(session_id)
        if found is None:
            raise SessionNotFoundError(session_id)
        return found

    def _open_sessions(self, user_id: str | None, *, limit: int) -> list[Session]:
        found: list[Session] = []
        for status in OPEN_STATUSES:
            found.extend(
                self.essentials.store.list_sessions(SessionFilter(user_id=user_id, status=status), limit=limit)
            )
        found.sort(key=lambda s: (s.last_active_at, s.created_at), reverse=True)
        return found[:limit]

    def _set_status(self, session_id: str, status: str, *, state: bool = True) -> None:
        self.essentials.store.update_session(session_id, status=status)
        if state and status == "paused":
            # The session state says so too, so a packet built later shows it.
            source = self.tracker or self.essentials
            current = get_state(source, session_id)
            current.status = "paused"
            save_state(source, current)
