"""A small thread-safe least-recently-used map: the one bound for per-key caches.

Caches keyed by session, query or term live as long as the process; in a server that
sees millions of sessions an unbounded dict is a slow memory leak. Everything here is
derived data, so dropping the least recently used entry only costs a recomputation.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

__all__ = ["LRUCache"]


class LRUCache(Generic[K, V]):
    """At most ``max_size`` entries; reading or writing an entry makes it the newest."""

    def __init__(self, max_size: int) -> None:
        if max_size < 1:
            raise ValueError(f"max_size must be at least 1, got {max_size}")
        self.max_size = max_size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.max_size:
                self._items.popitem(last=False)

    def pop(self, key: K) -> V | None:
        with self._lock:
            return self._items.pop(key, None)

    def snapshot_keys(self) -> list[K]:
        """The keys, least recently used first (a copy: safe to change the cache meanwhile)."""
        with self._lock:
            return list(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items
