"""The server's API keys in the store's own database (migration 5 on either backend).

One implementation for SQLite and PostgreSQL: the SQL differs only by the store's
dialect (placeholders, how a timestamp is bound and read back). Only a SHA-256 of each
key's secret is stored; ``last_used_at`` is written at most once a minute per key.
"""

from __future__ import annotations

import hmac
import time
from typing import Any, Protocol

from memlane.apikeys import (
    LAST_USED_EVERY,
    ApiKey,
    check_key_name,
    check_tenant,
    hash_secret,
    new_key,
    split_key,
)
from memlane.models import utcnow
from memlane.store.filters import Dialect

_COLS = "id, tenant_id, name, created_at, revoked_at, last_used_at"


class _SqlStore(Protocol):
    def read(self, query: str, params: Any = ()) -> list[Any]: ...
    def write(self, fn: Any) -> Any: ...


class SqlKeyStore:
    """Keys in the ``api_keys`` table of a SQLite or PostgreSQL store."""

    def __init__(self, store: _SqlStore, dialect: Dialect) -> None:
        self._store = store
        self._d = dialect
        self._last_used: dict[str, float] = {}

    def _key(self, row: Any) -> ApiKey:
        when = self._d.from_time
        return ApiKey(
            id=row[0], tenant_id=row[1], name=row[2], created_at=when(row[3]),
            revoked_at=when(row[4]) if row[4] is not None else None,
            last_used_at=when(row[5]) if row[5] is not None else None,
        )

    def create_key(self, tenant_id: str, name: str | None = None) -> tuple[ApiKey, str]:
        tenant_id = check_tenant(tenant_id)
        name = check_key_name(name)
        key_id, secret, plaintext = new_key()
        now = self._d.time(utcnow())
        m = self._d.mark
        self._store.write(lambda conn: conn.execute(
            f"INSERT INTO api_keys (id, tenant_id, name, key_hash, created_at) VALUES ({m}, {m}, {m}, {m}, {m})",
            (key_id, tenant_id, name, hash_secret(secret), now),
        ))
        return self._key((key_id, tenant_id, name, now, None, None)), plaintext

    def list_keys(self, *, include_revoked: bool = False) -> list[ApiKey]:
        where = "" if include_revoked else "WHERE revoked_at IS NULL"
        rows = self._store.read(f"SELECT {_COLS} FROM api_keys {where} ORDER BY created_at, id")
        return [self._key(r) for r in rows]

    def revoke_key(self, key_id: str) -> bool:
        m = self._d.mark
        now = self._d.time(utcnow())
        return bool(self._store.write(lambda conn: conn.execute(
            f"UPDATE api_keys SET revoked_at = {m} WHERE id = {m} AND revoked_at IS NULL", (now, key_id)
        ).rowcount))

    def verify(self, presented: str) -> ApiKey | None:
        parts = split_key(presented)
        if parts is None:
            return None
        key_id, secret = parts
        rows = self._store.read(
            f"SELECT {_COLS}, key_hash FROM api_keys WHERE id = {self._d.mark} AND revoked_at IS NULL",
            (key_id,),
        )
        if not rows or not hmac.compare_digest(rows[0][6], hash_secret(secret)):
            return None
        self._touch(key_id)
        return self._key(rows[0])

    def has_active_keys(self) -> bool:
        return bool(self._store.read("SELECT 1 FROM api_keys WHERE revoked_at IS NULL LIMIT 1"))

    def _touch(self, key_id: str) -> None:
        now = time.monotonic()
        if now - self._last_used.get(key_id, -LAST_USED_EVERY) < LAST_USED_EVERY:
            return
        self._last_used[key_id] = now
        m = self._d.mark
        stamp = self._d.time(utcnow())
        self._store.write(lambda conn: conn.execute(
            f"UPDATE api_keys SET last_used_at = {m} WHERE id = {m}", (stamp, key_id)
        ))
