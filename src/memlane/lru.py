"""A small thread-safe least-recently-used map: the one bound for per-key caches.

Caches keyed by session, query or term live as long as the process; in a server that
sees millions of sessions an unbounded dict is a slow memory leak. Everything here is
derived data, so dropping the least recently used entry only costs a recomputation.

The eviction itself is cachetools' (``LRUCache``, or ``TTLCache`` when entries also
expire); cachetools' caches are not thread-safe, so this wrapper holds a lock around
every call - the caches here are shared by a server's worker threads.
"""

from __future__ import annotations

import threading
import time
from typing import Generic, TypeVar

import cachetools

K = TypeVar("K")
V = TypeVar("V")

__all__ = ["LRUCache"]


class LRUCache(Generic[K, V]):
    """At most ``max_size`` entries; reading or writing an entry makes it the newest. With
    ``ttl_seconds``, an entry is also gone that long after it was written (monotonic clock)."""

    def __init__(self, max_size: int, *, ttl_seconds: float | None = None) -> None:
        if max_size < 1:
            raise ValueError(f"max_size must be at least 1, got {max_size}")
        self.max_size = max_size
        self._items: cachetools.Cache[K, V] = (
            cachetools.LRUCache(max_size) if ttl_seconds is None
            else cachetools.TTLCache(max_size, ttl_seconds, timer=time.monotonic)
        )
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            return self._items.get(key)

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._items[key] = value

    def pop(self, key: K) -> V | None:
        with self._lock:
            return self._items.pop(key, None)

    def snapshot_keys(self) -> list[K]:
        """The keys (a copy: safe to change the cache meanwhile)."""
        with self._lock:
            return list(self._items.keys())

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items
