"""API keys that map callers to tenants.

A key looks like ``mlk_<id>_<secret>``. The id is public (it names the key in
``memlane keys list`` and in logs); the secret is 256 random bits and only its
SHA-256 is stored. A plain hash is enough here, unlike for passwords: the
secret is random, so there is nothing to guess, and a slow hash would add
latency to every request for no gain.

Keys live behind the small :class:`KeyStore` protocol so each storage backend
can keep them in its own database: a store may offer ``key_store()`` returning
one; SQLite stores get :class:`SQLiteKeyStore` (migration 5).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from memlane.errors import ConfigError, InvalidInputError
from memlane.models import from_epoch

KEY_PREFIX = "mlk"
#: Writing last_used_at on every request would turn each read into a write; once a minute is plenty.
_LAST_USED_EVERY = 60.0


@dataclass(slots=True, frozen=True)
class ApiKey:
    id: str
    tenant_id: str
    name: str | None
    created_at: datetime
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tenant_id": self.tenant_id,
            "name": self.name,
            "created_at": self.created_at.isoformat(),
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
            "last_used_at": self.last_used_at.isoformat() if self.last_used_at else None,
            "active": self.active,
        }


@runtime_checkable
class KeyStore(Protocol):
    """Where API keys live. Implementations store hashes, never the plaintext key."""

    def create_key(self, tenant_id: str, name: str | None = None) -> tuple[ApiKey, str]:
        """A new key for ``tenant_id``; returns its record and the plaintext (shown once)."""
        ...

    def list_keys(self, *, include_revoked: bool = False) -> list[ApiKey]: ...
    def revoke_key(self, key_id: str) -> bool: ...
    def verify(self, presented: str) -> ApiKey | None:
        """The active key matching ``presented``, or None."""
        ...

    def has_active_keys(self) -> bool: ...


def check_tenant(tenant_id: object) -> str:
    if not isinstance(tenant_id, str) or not tenant_id.strip():
        raise InvalidInputError("tenant must be a non-empty string, e.g. --tenant acme")
    if len(tenant_id) > 200 or not tenant_id.isprintable():
        raise InvalidInputError("tenant must be at most 200 printable characters")
    return tenant_id


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def new_key() -> tuple[str, str, str]:
    """(key id, secret, plaintext key)."""
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    return key_id, secret, f"{KEY_PREFIX}_{key_id}_{secret}"


def split_key(presented: str) -> tuple[str, str] | None:
    """(key id, secret) of a well-formed key, else None."""
    parts = presented.strip().split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_PREFIX or not parts[1] or not parts[2]:
        return None
    return parts[1], parts[2]


def _row_to_key(row: Any) -> ApiKey:
    return ApiKey(
        id=row[0],
        tenant_id=row[1],
        name=row[2],
        created_at=from_epoch(row[3]),
        revoked_at=from_epoch(row[4]) if row[4] is not None else None,
        last_used_at=from_epoch(row[5]) if row[5] is not None else None,
    )


_COLS = "id, tenant_id, name, created_at, revoked_at, last_used_at"


class SQLiteKeyStore:
    """Keys in the ``api_keys`` table of a SQLite store (created by migration 5)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._last_used: dict[str, float] = {}

    def create_key(self, tenant_id: str, name: str | None = None) -> tuple[ApiKey, str]:
        tenant_id = check_tenant(tenant_id)
        if name is not None and (len(name) > 200 or not name.isprintable()):
            raise InvalidInputError("key name must be at most 200 printable characters")
        key_id, secret, plaintext = new_key()
        now = time.time()

        def run(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO api_keys (id, tenant_id, name, key_hash, created_at) VALUES (?,?,?,?,?)",
                (key_id, tenant_id, name, hash_secret(secret), now),
            )

        self._store.write(run)
        return ApiKey(key_id, tenant_id, name, from_epoch(now)), plaintext

    def list_keys(self, *, include_revoked: bool = False) -> list[ApiKey]:
        where = "" if include_revoked else "WHERE revoked_at IS NULL"
        rows = self._store.read(f"SELECT {_COLS} FROM api_keys {where} ORDER BY created_at, id")
        return [_row_to_key(r) for r in rows]

    def revoke_key(self, key_id: str) -> bool:
        now = time.time()

        def run(conn: sqlite3.Connection) -> int:
            cur = conn.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (now, key_id)
            )
            return int(cur.rowcount)

        return bool(self._store.write(run))

    def verify(self, presented: str) -> ApiKey | None:
        parts = split_key(presented)
        if parts is None:
            return None
        key_id, secret = parts
        rows = self._store.read(
            f"SELECT {_COLS}, key_hash FROM api_keys WHERE id = ? AND revoked_at IS NULL", (key_id,)
        )
        if not rows or not hmac.compare_digest(rows[0][6], hash_secret(secret)):
            return None
        self._touch(key_id)
        return _row_to_key(rows[0])

    def has_active_keys(self) -> bool:
        return bool(self._store.read("SELECT 1 FROM api_keys WHERE revoked_at IS NULL LIMIT 1"))

    def _touch(self, key_id: str) -> None:
        now = time.time()
        if now - self._last_used.get(key_id, 0.0) < _LAST_USED_EVERY:
            return
        self._last_used[key_id] = now

        def run(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE api_keys SET last_used_at = ? WHERE id = ?", (now, key_id))

        self._store.write(run)


def key_store_for(store: Any) -> KeyStore:
    """The key store of a storage backend (``store.key_store()`` if it has one)."""
    factory = getattr(store, "key_store", None)
    if callable(factory):
        found = factory()
        if isinstance(found, KeyStore):
            return found
    from memlane.store.sqlite import SQLiteStore

    if isinstance(store, SQLiteStore):
        return SQLiteKeyStore(store)
    raise ConfigError(
        f"the store {getattr(store, 'url', store)!r} cannot keep API keys; run the server on "
        "SQLite, or add a key_store() to this backend (see memlane.server.auth.KeyStore)"
    )
