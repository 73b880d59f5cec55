"""The server's API keys in PostgreSQL (migration 5): ``PostgresStore.key_store()``.

Same contract as :class:`memlane.server.auth.SQLiteKeyStore`: only a SHA-256 of each
key's secret is stored, ``last_used_at`` is written at most once a minute per key.
"""

from __future__ import annotations

import hmac
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memlane.errors import InvalidInputError
from memlane.server.auth import _LAST_USED_EVERY, ApiKey, check_tenant, hash_secret, new_key, split_key

if TYPE_CHECKING:
    from memlane.store.postgres import Conn, PostgresStore

_COLS = "id, tenant_id, name, created_at, revoked_at, last_used_at"


def _utc(value: datetime | None) -> datetime | None:
    return value.astimezone(UTC) if value is not None else None


def _row_to_key(row: Any) -> ApiKey:
    created = _utc(row[3])
    assert created is not None
    return ApiKey(id=row[0], tenant_id=row[1], name=row[2], created_at=created,
                  revoked_at=_utc(row[4]), last_used_at=_utc(row[5]))


class PgKeyStore:
    """Keys in the ``api_keys`` table of a PostgresStore."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self._last_used: dict[str, float] = {}

    def create_key(self, tenant_id: str, name: str | None = None) -> tuple[ApiKey, str]:
        tenant_id = check_tenant(tenant_id)
        if name is not None and (len(name) > 200 or not name.isprintable()):
            raise InvalidInputError("key name must be at most 200 printable characters")
        key_id, secret, plaintext = new_key()

        def run(conn: Conn) -> Any:
            return conn.execute(
                f"INSERT INTO api_keys (id, tenant_id, name, key_hash, created_at) "
                f"VALUES (%s, %s, %s, %s, now()) RETURNING {_COLS}",
                (key_id, tenant_id, name, hash_secret(secret)),
            ).fetchone()

        return _row_to_key(self._store.write(run)), plaintext

    def list_keys(self, *, include_revoked: bool = False) -> list[ApiKey]:
        where = "" if include_revoked else "WHERE revoked_at IS NULL"
        rows = self._store.read(f"SELECT {_COLS} FROM api_keys {where} ORDER BY created_at, id")
        return [_row_to_key(r) for r in rows]

    def revoke_key(self, key_id: str) -> bool:
        def run(conn: Conn) -> int:
            return conn.execute(
                "UPDATE api_keys SET revoked_at = now() WHERE id = %s AND revoked_at IS NULL", (key_id,)
            ).rowcount

        return bool(self._store.write(run))

    def verify(self, presented: str) -> ApiKey | None:
        parts = split_key(presented)
        if parts is None:
            return None
        key_id, secret = parts
        rows = self._store.read(
            f"SELECT {_COLS}, key_hash FROM api_keys WHERE id = %s AND revoked_at IS NULL", (key_id,)
        )
        if not rows or not hmac.compare_digest(rows[0][6], hash_secret(secret)):
            return None
        self._touch(key_id)
        return _row_to_key(rows[0])

    def has_active_keys(self) -> bool:
        return bool(self._store.read("SELECT 1 FROM api_keys WHERE revoked_at IS NULL LIMIT 1"))

    def _touch(self, key_id: str) -> None:
        now = time.monotonic()
        if now - self._last_used.get(key_id, -_LAST_USED_EVERY) < _LAST_USED_EVERY:
            return
        self._last_used[key_id] = now
        self._store.write(
            lambda conn: conn.execute("UPDATE api_keys SET last_used_at = now() WHERE id = %s", (key_id,))
        )
