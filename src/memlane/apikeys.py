"""API keys that map callers to tenants: the record, the repository port, the key format.

A key looks like ``mlk_<id>_<secret>``. The id is public (it names the key in
``memlane keys list`` and in logs); the secret is 256 random bits and only its
SHA-256 is stored. A plain hash is enough here, unlike for passwords: the
secret is random, so there is nothing to guess, and a slow hash would add
latency to every request for no gain.

Core layer: each store keeps keys in its own database (``store.key_store()``,
``store/keys.py``); the server only talks to the :class:`KeyStore` port.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from memlane.errors import InvalidInputError

KEY_PREFIX = "mlk"
#: Writing last_used_at on every request would turn each read into a write; once a minute is plenty.
LAST_USED_EVERY = 60.0


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


def check_key_name(name: str | None) -> str | None:
    if name is not None and (len(name) > 200 or not name.isprintable()):
        raise InvalidInputError("key name must be at most 200 printable characters")
    return name
