"""Session state: what the conversation is about and what is still open.

The tracker watches every durable append (``Memory.add_observer``) and folds the
new messages into a :class:`SessionState`: active topics (keyphrases, decayed
so old topics fade), open loops (user questions not yet answered, things the
assistant promised to do), pending clarifications (the assistant asked the
user something), active job refs, resolved entities, last intent (the caller's,
else a coarse one from ``language.infer_intent``), last response type and turn
count. It is cheap, deterministic and offline: word lists and regular
expressions (``state/language.py``), no model.

The state is derived data: it lives in the store's ``derived`` area under the
kind ``"state"`` and can always be rebuilt from the log (:func:`rebuild_state`).
Because the update is a pure fold over the messages in log order, replaying
the log gives exactly the state the live tracker built. Each saved state
remembers the last message it has seen, so :func:`get_state` catches up on
messages it missed (a crash between the append and the observer, another
process writing without a tracker) instead of trusting a stale copy.

The state and its JSON form are in ``state/session_state.py``, the fold in
``state/fold.py``; this module keeps them current and stored.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from memlane.errors import CorruptRecordError, InvalidInputError, MemlaneError, SessionNotFoundError
from memlane.models import SESSION_STATUSES, Message, Session, Turn, utcnow
from memlane.state.fold import FoldContext, classify_response, compute_topics, fold_message, update_topics
from memlane.state.language import extract_job_refs
from memlane.state.session_state import STATE_STATUSES, STATE_VERSION, OpenLoop, SessionState

if TYPE_CHECKING:
    from memlane.context.summaries import SummaryRecord
    from memlane.ports import Essentials, SessionStore

__all__ = [
    "STATE_KIND",
    "STATE_STATUSES",
    "OpenLoop",
    "SessionState",
    "StateTracker",
    "classify_response",
    "compute_topics",
    "extract_job_refs",
    "get_state",
    "rebuild_state",
    "save_state",
]


log = logging.getLogger(__name__)


#: The ``derived`` kind the state is stored under.
STATE_KIND = "state"


class StateTracker:
    """Keeps each session's state current; one per Memory (``mem.parts.state``)."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._lock = threading.RLock()
        # Forgetting is announced before the messages are deleted, and other threads may
        # read the state in between: remember the ids so no rebuild folds them back in,
        # and count forgets so a copy taken before one is never saved over the rebuild.
        self._forgotten: dict[str, set[int]] = {}
        self._generation: dict[str, int] = {}

    # observer: runs after every durable append
    def on_append(self, session: Session, stored: list[Message]) -> None:
        if not any(m.id is not None for m in stored):
            return  # held in fail-open mode, not stored yet
        self.advance(session.id)

    def on_forget(self, session_id: str, message_ids: Iterable[int] | None) -> None:
        """Forget hook: drop the state; the next read rebuilds it without those messages."""
        with self._lock:
            self._generation[session_id] = self._generation.get(session_id, 0) + 1
            if message_ids is None:
                self._forgotten.pop(session_id, None)
            else:
                self._forgotten.setdefault(session_id, set()).update(message_ids)
            self.store.delete_derived(session_id, STATE_KIND)

    def generation(self, session_id: str) -> int:
        return self._generation.get(session_id, 0)

    def load(self, session_id: str) -> SessionState | None:
        try:
            raw = self.store.get_derived(session_id, STATE_KIND)
        except CorruptRecordError:
            log.warning("session state of %s is corrupt; rebuilding it from the log", session_id)
            return None
        if raw is None:
            return None
        try:
            state = SessionState.from_dict(raw)
        except (InvalidInputError, TypeError, ValueError):
            log.warning("session state of %s is unreadable; rebuilding it from the log", session_id)
            return None
        if state.version != STATE_VERSION:
            return None
        state.generation = self.generation(session_id)
        return state

    def _fresh(self, session_id: str) -> SessionState:
        if self.store.get_session(session_id) is None:
            raise SessionNotFoundError(session_id)
        return SessionState(session_id=session_id, generation=self.generation(session_id))

    def advance(self, session_id: str) -> SessionState:
        """The stored state with every message it has not seen folded in, saved."""
        # The store's lock makes the read-fold-save atomic across processes too.
        with self._lock, self.store.session_lock(session_id, STATE_KIND):
            state = self.load(session_id) or self._fresh(session_id)
            if self._catch_up(state):
                self.save(state)
            return state

    def _catch_up(self, state: SessionState) -> bool:
        store = self.store
        gone = self._forgotten.get(state.session_id, set())
        new = [
            m for m in store.iter_messages(
                state.session_id, after_id=state.last_message_id, include_hidden=False
            )
            if m.id not in gone
        ]
        if not new:
            return False
        turn_ids = {m.turn_id for m in new if m.turn_id}
        turns: dict[str, Turn] = {}
        if turn_ids:
            limit = len(turn_ids) + 4 if state.last_message_id else 1_000_000
            found = store.list_turns(state.session_id, limit=limit)
            if not turn_ids <= {t.turn_id for t in found}:
                found = store.list_turns(state.session_id, limit=1_000_000)
            turns = {t.turn_id: t for t in found if t.turn_id in turn_ids}
        ctx = FoldContext(self.store, state.session_id, preload=state.last_message_id == 0)
        ctx.before(new[0])  # topics need the window before the new messages
        for msg in new:
            if msg.id not in gone:
                fold_message(state, msg, turns.get(msg.turn_id or ""), ctx)
        update_topics(state, [m for m in ctx.window() if m.id not in gone])
        return True

    def rebuild(self, session_id: str, *, keep_from: SessionState | None = None) -> SessionState:
        """A state from the log alone; the rolling summary (not ours to derive) is kept."""
        with self._lock, self.store.session_lock(session_id, STATE_KIND):
            state = self._fresh(session_id)
            previous = keep_from or self.load(session_id)
            if previous is not None:
                state.rolling_summary = previous.rolling_summary
            self._catch_up(state)
            self.save(state)
            return state

    def save(self, state: SessionState) -> None:
        state.updated_at = utcnow()
        self.store.put_derived(state.session_id, STATE_KIND, state.to_dict())

    def save_external(self, state: SessionState) -> SessionState:
        """Store a state someone changed (status, rolling summary), brought up to date."""
        with self._lock, self.store.session_lock(state.session_id, STATE_KIND):
            if state.generation < self.generation(state.session_id):
                # Taken before messages were forgotten: rebuild, keep only what they set.
                fresh = self.rebuild(state.session_id, keep_from=state)
                fresh.status = state.status
                self.save(fresh)
                return fresh
            self._catch_up(state)
            self.save(state)
            return state


def _tracker(source: StateTracker | Essentials) -> StateTracker:
    """The tracker given, or one on the store given (a Memory's parts hand theirs in:
    it knows which messages are being forgotten right now)."""
    return source if isinstance(source, StateTracker) else StateTracker(source.store)


def get_state(source: StateTracker | Essentials, session_id: str) -> SessionState:
    """The session's current state (rebuilt from the log when missing, stale or corrupt)."""
    return _tracker(source).advance(session_id)


def save_state(source: StateTracker | Essentials, state: SessionState) -> None:
    """Store ``state`` after changing it (status ``resuming``/``shutdown_clean``, a summary).

    Messages the copy has not seen yet are folded in first, so saving an old copy never
    loses a turn; a message after a status change makes the session active again.
    """
    if not isinstance(state, SessionState):
        raise InvalidInputError("save_state needs a SessionState")
    if state.status not in SESSION_STATUSES:
        raise InvalidInputError(
            f"status must be one of {sorted(SESSION_STATUSES)}, got {state.status!r}"
        )
    _tracker(source).save_external(state)


def rebuild_state(source: StateTracker | Essentials, session_id: str) -> SessionState:
    """Recompute the state from the log alone, store it and return it."""
    return _tracker(source).rebuild(session_id)


def share_summary(tracker: StateTracker, record: SummaryRecord) -> None:
    """Put a session's rolling summary into its state (``rolling_summary``); the summaries
    part calls this after each update (wired in components.py)."""
    try:
        state = tracker.advance(record.session_id)
        if (state.rolling_summary or "") != record.text:
            state.rolling_summary = record.text or None
            # Saving a copy that missed a message is safe: the tracker replays
            # from the copy's last_message_id on its next read.
            tracker.save_external(state)
    except MemlaneError as exc:
        log.debug("could not share the rolling summary of %s: %s", record.session_id, exc)
