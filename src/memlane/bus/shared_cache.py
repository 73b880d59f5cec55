"""The hot cache instances share through Redis/Valkey (``redis_url``): bytes by key, with a TTL
and tags, so whatever a change event names can be dropped everywhere at once.

Callers (the response cache, windows, packets) store bytes they can rebuild from the
durable log; nothing here is the only copy of anything. Tags say what an entry was made
from (a session id, a note id, a user): ``invalidate(tag)`` drops every entry carrying
it, on every instance, because they all read the same server.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from memlane.bus.redis_bus import redis_client
from memlane.errors import InvalidInputError

__all__ = ["HotCache", "RedisCache"]


@runtime_checkable
class HotCache(Protocol):
    """What a shared cache offers; values are bytes (serialise before, parse after)."""

    def get(self, key: str) -> bytes | None: ...
    def set(self, key: str, value: bytes, *, ttl_seconds: float | None = None,
            tags: Iterable[str] = ()) -> None: ...
    def delete(self, *keys: str) -> int: ...
    def invalidate(self, *tags: str) -> int: ...
    def stats(self) -> dict[str, Any]: ...


class RedisCache:
    """:class:`HotCache` on Redis/Valkey. Keys live under ``<prefix>:cache:``; a tag is a set
    of the keys that carry it (it expires with its longest-lived entry)."""

    def __init__(self, url: str, *, prefix: str = "memlane") -> None:
        self._client = redis_client(url)
        self._keys = f"{prefix}:cache:"
        self._tags = f"{prefix}:tag:"
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> bytes | None:
        value = self._client.get(self._keys + key)
        if value is None:
            self.misses += 1
            return None
        self.hits += 1
        return bytes(value)  # type: ignore[arg-type]

    def set(self, key: str, value: bytes, *, ttl_seconds: float | None = None,
            tags: Iterable[str] = ()) -> None:
        if ttl_seconds is not None and ttl_seconds <= 0:
            raise InvalidInputError(f"ttl_seconds must be > 0 (or None: no expiry), got {ttl_seconds}")
        ttl_ms = None if ttl_seconds is None else max(1, int(ttl_seconds * 1000))
        full = self._keys + key
        pipe = self._client.pipeline(transaction=True)  # entry and its tags together, or neither
        pipe.set(full, value, px=ttl_ms)
        for tag in tags:
            pipe.sadd(self._tags + tag, full)
            if ttl_ms is None:
                pipe.persist(self._tags + tag)
            else:
                pipe.pexpire(self._tags + tag, ttl_ms, gt=True)  # GT: never shorten a tag's life
                pipe.pexpire(self._tags + tag, ttl_ms, nx=True)  # NX: a new tag gets one
        pipe.execute()

    def delete(self, *keys: str) -> int:
        if not keys:
            return 0
        return int(self._client.unlink(*(self._keys + k for k in keys)))

    def invalidate(self, *tags: str) -> int:
        """Drop every entry tagged with any of ``tags``; how many entries went."""
        dropped = 0
        for tag in tags:
            name = self._tags + tag
            pipe = self._client.pipeline(transaction=True)
            pipe.smembers(name)
            pipe.unlink(name)
            members, _ = pipe.execute()
            if members:
                dropped += int(self._client.unlink(*members))
        return dropped

    def stats(self) -> dict[str, Any]:
        return {"kind": "redis", "hits": self.hits, "misses": self.misses}

    def close(self) -> None:
        self._client.close()
