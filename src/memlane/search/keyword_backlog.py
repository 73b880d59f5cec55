"""Keyword rows written after the message, on a background thread.

A SQLite store writes a message without judging its language (SQLite migration 18): the
language model (py3langid) and the Snowball stemmers would cost the writer ~0.3 ms a
message, and ~100 ms plus 45 MB for its first one. The keyword row follows from here once
background work has started (a search, flush(), a server, a worker that asks for it): one
thread judges what is pending in batches, each written in a short transaction. A read of
the keyword index indexes a small backlog itself first, and ``flush()`` all of it, so a
search never misses a message once flush() returns; a bulk import's backlog is counted in
``mem.backlog()["keywords"]`` (``memlane stats``, ``/metrics``) until this catches up.

Nothing is lost on a crash: a pending row is a message without a language, found again by
the next process that starts background work or searches.
"""

from __future__ import annotations

import logging
import threading

from memlane.models import Message, Session
from memlane.ports import KeywordIndex

log = logging.getLogger(__name__)

#: After a failure (disk full, locked beyond the retry window) wait this long before trying again.
RETRY_SECONDS = 5.0


class KeywordBacklog:
    """One daemon thread that indexes the keyword backlog whenever writes arrive."""

    def __init__(self, index: KeywordIndex) -> None:
        self.index = index
        self._cond = threading.Condition()
        self._due = True  # the first pass finds what earlier processes left
        self._stop = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        with self._cond:
            if self._thread is not None or self._stop:
                return
            self._thread = threading.Thread(target=self._run, name="memlane-keywords", daemon=True)
            self._thread.start()

    def observe(self, session: Session, messages: list[Message]) -> None:
        """Memory observer (derived): new messages are pending; wake the thread."""
        del session, messages
        with self._cond:
            self._due = True
            self._cond.notify_all()

    def stop(self, timeout: float | None = 10.0) -> None:
        """Stop after the batch in hand; what is left stays pending for the next process."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._due and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                self._due = False
            try:
                while not self._stopping() and self.index.index_pending_keywords(limit=2_000):
                    pass
            except Exception:
                if self._stopping():
                    return
                log.exception("memlane keyword index: indexing the backlog failed; will retry")
                with self._cond:
                    self._cond.wait(RETRY_SECONDS)
                    self._due = True

    def _stopping(self) -> bool:
        with self._cond:
            return self._stop
