"""Background embedding: the write path never waits for the model.

Memory tells the :class:`Indexer` about messages after they are durable; one worker thread
embeds them in batches and stores the vectors. Nothing here can lose a message: the log is
written first, and whatever was stored but not embedded (a crash, a full queue, a failing
embedding endpoint, a process that ended first) is found again by the backlog scan
(``VectorIndex.missing_ids``) when the indexer starts and after an embedding failure.

The worker starts on demand (:meth:`Indexer.start`: the first search, ``flush()``, a
server), not when Memory opens: a process that only writes and reads windows never loads
the model, and its messages are embedded by the next process that searches.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from memlane.models import Message, Session
from memlane.search.documents import documents_for
from memlane.search.embedders import Embedder
from memlane.search.vectors import EMBEDDED_ROLES, VectorIndex
from memlane.store import Store

log = logging.getLogger(__name__)

#: The worker takes everything queued up to this many messages at once. When writes come
#: faster than the model embeds, a deep backlog builds up; embedding it in one call lets
#: the embedder sort many texts by length and pad each model batch to near-equal lengths
#: (about 10% less model work on chat turns than 48 at a time). When writes are slow the
#: worker still takes whatever is there at once, so nothing waits for a batch to fill.
DEFAULT_BATCH = 256
#: Beyond this many queued messages new ones are left to the backlog scan instead, so a
#: burst of writes cannot grow memory without bound.
MAX_QUEUE = 100_000


class Indexer:
    """One worker thread that embeds queued messages and backlog in batches."""

    def __init__(
        self,
        store: Store,
        index: VectorIndex,
        embedder: Embedder,
        *,
        batch_size: int = DEFAULT_BATCH,
        retry_seconds: float = 5.0,
    ) -> None:
        self.store = store
        self.index = index
        self.embedder = embedder
        self.batch_size = batch_size
        self.retry_seconds = retry_seconds
        self._queue: deque[Message] = deque()
        self._queued: set[int] = set()  # ids in _queue, so a backlog scan can drop them
        self._cond = threading.Condition()
        self._busy = False
        self._backlog_due: float | None = 0.0  # monotonic time of the next scan; None = none due
        self._stop = False
        self._failures = 0
        self.embedded = 0
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the worker (once): it scans the backlog, then embeds what is queued."""
        with self._cond:
            if self._thread is not None or self._stop:
                return
            # numpy whole before the worker exists: the worker's model start and the caller's
            # search (the language identifier, the vectors) would otherwise import it at once
            # from two threads, and numpy's C core fails a second thread's import that way
            # ("cannot import name '__cpu_features__' from partially initialized module").
            import numpy  # noqa: F401
            self._thread = threading.Thread(target=self._run, name="memlane-indexer", daemon=True)
            self._thread.start()

    @property
    def started(self) -> bool:
        return self._thread is not None

    # ------------------------------------------------------------ producer side

    def observe(self, session: Session, messages: list[Message]) -> None:
        """Memory observer: queue the new messages (returns at once)."""
        del session
        wanted = [
            m for m in messages if m.id is not None and m.role in EMBEDDED_ROLES and m.content
        ]
        if not wanted:
            return
        with self._cond:
            if self._thread is None:  # not started: its backlog scan will find them in the log
                return
            if len(self._queue) + len(wanted) > MAX_QUEUE:
                if self._backlog_due is None:  # the log has them: the scan will find them
                    self._backlog_due = 0.0
            else:
                self._queue.extend(wanted)
                self._queued.update(m.id for m in wanted if m.id is not None)
            self._cond.notify_all()

    def forget(self, session_id: str, message_ids: Sequence[int] | None) -> None:
        """Forget hook: drop queued messages that are about to be deleted."""
        ids = set(message_ids) if message_ids is not None else None
        with self._cond:
            self._queue = deque(
                m
                for m in self._queue
                if not (m.session_id == session_id and (ids is None or m.id in ids))
            )
            self._queued = {m.id for m in self._queue if m.id is not None}

    def pending(self) -> int:
        with self._cond:
            return len(self._queue) + (1 if self._busy else 0)

    def flush(self, timeout: float | None = None, *, scan: bool = True) -> bool:
        """Start the worker, then wait until every queued message and the backlog are
        embedded; False on timeout. ``scan`` looks for the backlog again first: messages
        other processes wrote since the last scan are in no queue of this one."""
        self.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            if scan and self._backlog_due is None:
                self._backlog_due = 0.0
                self._cond.notify_all()
            while self._queue or self._busy or self._backlog_due == 0.0:
                if self._thread is None or not self._thread.is_alive():
                    return False
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left if left is not None else 0.5)
            return True

    def close(self, timeout: float = 10.0) -> None:
        """Embed what is queued (up to ``timeout`` seconds) when the worker runs, then stop it.

        What is left unembedded stays in the backlog for the next start.
        """
        if self.started:
            self.flush(timeout, scan=False)
        self.stop(max(1.0, timeout))

    def stop(self, timeout: float | None = 60.0) -> None:
        """Stop after the batch in hand, embedding nothing more (interpreter exit).

        Waits for that batch: a native embedding thread still running when the interpreter
        finalizes can abort it. Queued messages stay in the backlog for the next start.
        """
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=timeout)

    # ------------------------------------------------------------ worker side

    def _next_work(self) -> tuple[list[Message], bool] | None:
        """(messages, from_backlog) to embed next, or None to stop."""
        with self._cond:
            while True:
                if self._stop:
                    return None
                if self._queue:
                    take = min(self.batch_size, len(self._queue))
                    batch = [self._queue.popleft() for _ in range(take)]
                    self._queued.difference_update(m.id for m in batch)
                    self._busy = True
                    return batch, False
                due = self._backlog_due
                if due is not None and time.monotonic() >= due:
                    self._busy = True
                    return [], True
                wait = None if due is None else max(0.0, due - time.monotonic())
                self._cond.wait(wait if wait is not None else 1.0)

    def _load_model(self) -> None:
        # Background work starts on a process's first search (or context read, flush, a
        # server's start): the model's start (imports, ONNX session: ~0.25 s) then runs here
        # while that search reads keywords in SQLite, instead of after them on the caller's
        # thread; a process that only writes never starts this worker, so never loads it.
        load = getattr(self.embedder, "load", None)  # user embedders may predate load()
        if not callable(load):
            return
        try:
            load()
        except Exception:  # the first embed reports it (retried from the backlog) or the search raises it
            log.debug("memlane indexer: loading the embedder failed", exc_info=True)

    def _run(self) -> None:
        self._load_model()
        while True:
            work = self._next_work()
            if work is None:
                return
            batch, backlog = work
            try:
                if backlog:
                    self._scan_backlog()
                else:
                    self._embed(batch)
                self._failures = 0
                failed = False
            except Exception:  # the embedder or disk failed: retry later from the log
                with self._cond:
                    stopping = self._stop
                self._failures += 1
                if not stopping:  # when stopping (at exit) the next start's backlog scan resumes it
                    log.exception("memlane indexer: embedding failed; will retry from the backlog")
                failed = True
            with self._cond:
                self._busy = False
                if failed:
                    delay = min(300.0, self.retry_seconds * 2 ** min(self._failures - 1, 6))
                    self._backlog_due = time.monotonic() + delay
                elif backlog:
                    self._backlog_due = None
                self._cond.notify_all()

    def _embed(self, batch: list[Message]) -> None:
        texts = documents_for(self.store, batch)
        vectors = self.embedder.embed(texts)
        self.embedded += self.index.upsert([m.id for m in batch if m.id is not None], vectors)

    def _unqueue(self, ids: Sequence[int]) -> None:
        """Drop queued messages the backlog scan has just embedded.

        A scan finds every message without a vector, including those written while it runs
        and queued by observe(): without this each of them was embedded twice (once by the
        scan, once from the queue), which halved ingest whenever writes and a scan overlap -
        at start-up, after flush(), after a failure. Dropped only once their vectors are
        stored, so a failed batch still has them in the queue or the next scan.
        """
        with self._cond:
            done = self._queued.intersection(ids)
            if done:
                self._queue = deque(m for m in self._queue if m.id not in done)
                self._queued -= done

    def _scan_backlog(self, progress: Callable[[int], None] | None = None) -> int:
        done = 0
        after = 0
        while True:
            with self._cond:
                if self._stop:
                    return done
            ids = self.index.missing_ids(self.batch_size, after_id=after)
            if not ids:
                return done
            batch = self.store.get_messages(ids)
            if batch:
                self._embed(batch)
                self._unqueue(ids)
                done += len(batch)
                if progress is not None:
                    progress(len(batch))
            after = ids[-1]
