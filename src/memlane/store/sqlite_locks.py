"""Cross-process session locks for the SQLite store (the file half of ``session_lock``).

Processes sharing one SQLite file serialise their *writes* through SQLite itself, but a
read-modify-write of a derived record (summary, state, note promotion) spans several
transactions, and holding SQLite's write lock for it would stall every append while a
summarizer thinks. So each (session, scope) key gets a POSIX byte-range lock on a
sidecar file ``<db>-locks``: one byte at an offset hashed from the key. Collisions only
serialise two unrelated keys, which is harmless.

POSIX record locks belong to the process, not to the thread or the file descriptor:
re-locking a range the process holds succeeds at once, and closing *any* descriptor of
the file drops all of the process's locks on it. Hence one descriptor per store, kept
open until the store closes, and the file lock is taken only by the outermost in-process
hold (``KeyedLocks`` queues this process's threads first).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from memlane.errors import LockTimeoutError

#: Offsets are spread over this many bytes; the file itself stays empty (locks may lie
#: beyond the end of a file).
_SLOTS = 1 << 20


def _offset(key: str) -> int:
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % _SLOTS


class FileRangeLocks:
    """Exclusive, cross-process locks by key on ``path`` (created on first use)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._guard = threading.Lock()

    def _descriptor(self) -> int:
        with self._guard:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            return self._fd

    @contextmanager
    def hold(self, key: str, timeout: float | None = None) -> Iterator[None]:
        fd = self._descriptor()
        offset = _offset(key)
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.001
        while True:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
                break
            except OSError as exc:
                if exc.errno not in (errno.EACCES, errno.EAGAIN):
                    raise
            if deadline is not None and time.monotonic() >= deadline:
                raise LockTimeoutError(f"lock {key!r} is held by another process on {self.path}")
            # Polling, not a blocking lockf: a blocking call could not honour the timeout.
            time.sleep(pause if deadline is None else min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 0.05)
        try:
            yield
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset)

    def close(self) -> None:
        with self._guard:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
