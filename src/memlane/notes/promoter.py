"""Running the promotion gate off the hot path.

``add`` only pays for a counter increment: the observer counts user turns per session
and, every ``settings.promote_every`` turns, hands the session id to one background
thread (started on demand, gone after a while idle). The thread reads the session's log from its
watermark (``promotion_progress``), extracts candidates, passes each through the gate and
records facets, then moves the watermark — so a crash between "message stored" and "notes
written" only means the next run (a context read, ``flush``, ``memlane maintain``) picks
the messages up again. Reading notes for a context catches the session up synchronously,
so a packet never misses what was said a turn ago.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from memlane.errors import LockTimeoutError
from memlane.models import Message, Session
from memlane.notes.extract import ExtractionContext, Extractor, annotate
from memlane.notes.gate import PromotionGate
from memlane.notes.models import WriteOutcome
from memlane.notes.store import NoteStore

if TYPE_CHECKING:
    from memlane.config import Settings
    from memlane.store import Store

__all__ = ["Promoter"]

log = logging.getLogger(__name__)

_BATCH = 500
#: How long the promoting thread waits for more sessions before it ends.
_IDLE_SECONDS = 30.0


class Promoter:
    """Promotes each session's new messages to notes; one per Memory. Takes the ports it
    uses (the store, a settings getter, the notes repository), not the Memory."""

    def __init__(
        self,
        store: Store,
        settings: Callable[[], Settings],
        notes: NoteStore,
        gate: PromotionGate,
        extractor: Extractor,
        *,
        anchor: Callable[[], str],
        is_command: Callable[[str], bool],
    ) -> None:
        self.store = store
        self.settings = settings  # read at each use: settings may be replaced at run time
        self.notes = notes
        self.gate = gate
        self.extractor = extractor
        self.anchor = anchor
        self.is_command = is_command
        self._counts: dict[str, int] = {}
        self._queue: list[str] = []
        self._cond = threading.Condition()
        self._busy = 0
        self._thread: threading.Thread | None = None
        self._closed = False
        # One session at a time: the watermark read and write must not interleave.
        self._run_lock = threading.RLock()

    # ------------------------------------------------------------ observer (hot path)

    def observe(self, session: Session, stored: list[Message]) -> None:
        turns = sum(1 for m in stored if m.role == "user" and m.id is not None)
        if not turns:
            return
        with self._cond:
            count = self._counts.get(session.id, 0) + turns
            if count < self.settings().promote_every:
                self._counts[session.id] = count
                return
            self._counts[session.id] = 0
            if session.id not in self._queue:
                self._queue.append(session.id)
            self._ensure_thread()
            self._cond.notify_all()

    def _ensure_thread(self) -> None:
        if self._closed or (self._thread is not None and self._thread.is_alive()):
            return
        self._thread = threading.Thread(target=self._work, name="memlane-notes", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while True:
            with self._cond:
                # Linger a while before exiting: starting a thread is the caller's cost
                # (observe runs on its thread), so an agent's steady turns reuse this one.
                self._cond.wait_for(lambda: self._queue or self._closed, _IDLE_SECONDS)
                if not self._queue or self._closed:
                    self._thread = None
                    self._cond.notify_all()
                    return
                sid = self._queue.pop(0)
                self._busy += 1
            try:
                self.catch_up(sid)
            except Exception:  # derived work: log, keep the thread alive for the next one
                log.exception("promoting notes of session %s failed", sid)
            finally:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()

    # ------------------------------------------------------------ the work

    def catch_up(self, session_id: str, *, timeout: float | None = None) -> list[WriteOutcome]:
        """Promote every message of the session not yet read; returns what the gate did.

        With ``timeout``, give up (doing nothing) when the background thread holds the
        gate longer than that: a context read should not wait for a large backlog.
        """
        outcomes: list[WriteOutcome] = []
        if not self._run_lock.acquire(timeout=-1 if timeout is None else timeout):
            log.debug("notes of %s are being promoted in the background; not waiting", session_id)
            return outcomes
        try:
            # Other processes promote this session too: the watermark read, the gate's
            # read-then-supersede and the watermark write must not interleave with theirs.
            with self.store.session_lock(session_id, "notes", timeout=timeout):
                return self._catch_up(session_id, outcomes)
        except LockTimeoutError:
            log.debug("notes of %s are being promoted by another process; not waiting", session_id)
            return outcomes
        finally:
            self._run_lock.release()

    def _catch_up(self, session_id: str, outcomes: list[WriteOutcome]) -> list[WriteOutcome]:
        session = self.store.get_session(session_id)
        if session is None:
            return outcomes
        ctx = ExtractionContext(
            session_id=session.id,
            anchor_id=self.anchor(),
            anchor_name=self.settings().anchor_name,
            session_user_id=session.user_id,
            is_command=self.is_command,
        )
        after = self.notes.progress(session.id)
        while True:
            batch: list[Message] = []
            for msg in self.store.iter_messages(session.id, after_id=after, include_hidden=False):
                batch.append(msg)
                if len(batch) >= _BATCH:
                    break
            if not batch:
                return outcomes
            for cand in self.extractor.extract(batch, ctx):
                outcomes.append(self.gate.write_if_worthy(cand, tenant_id=session.tenant_id))
            self.notes.add_facets(annotate(batch))
            after = max(m.id or 0 for m in batch)
            self.notes.set_progress(session.id, after)
            if len(batch) < _BATCH:
                return outcomes

    def catch_up_all(self) -> int:
        """Promote the backlog of every session (``memlane maintain``); returns sessions done."""
        done = 0
        for sid in self.notes.sessions_behind():
            self.catch_up(sid)
            done += 1
        return done

    def forget(self, session_id: str) -> None:
        with self._cond:
            self._counts.pop(session_id, None)
            if session_id in self._queue:
                self._queue.remove(session_id)

    def catch_up_pending(self) -> int:
        """Promote the turns this process saw that have not reached ``promote_every`` yet."""
        with self._cond:
            pending = [sid for sid, n in self._counts.items() if n > 0]
            for sid in pending:
                self._counts[sid] = 0
        for sid in pending:
            self.catch_up(sid)
        return len(pending)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until queued sessions are promoted, then promote what is still below the
        threshold; False if ``timeout`` ran out first."""
        with self._cond:
            done = self._cond.wait_for(lambda: not self._queue and not self._busy, timeout)
        if done and not self._closed:
            self.catch_up_pending()
        return done

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._queue.clear()
            thread = self._thread
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)
