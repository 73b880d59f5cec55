"""API keys at the server's edge: which key store a storage backend offers.

The key format, the :class:`~memlane.apikeys.ApiKey` record and the
:class:`~memlane.apikeys.KeyStore` port live in :mod:`memlane.apikeys` (re-exported
here); each store keeps the keys in its own database (``store.key_store()``).
"""

from __future__ import annotations

from typing import Any

from memlane.apikeys import (
    KEY_PREFIX,
    ApiKey,
    KeyStore,
    check_tenant,
    hash_secret,
    new_key,
    split_key,
)
from memlane.errors import ConfigError

__all__ = [
    "KEY_PREFIX",
    "ApiKey",
    "KeyStore",
    "check_tenant",
    "hash_secret",
    "key_store_for",
    "new_key",
    "split_key",
]


def key_store_for(store: Any) -> KeyStore:
    """The key store of a storage backend (``store.key_store()``)."""
    factory = getattr(store, "key_store", None)
    found = factory() if callable(factory) else None
    if isinstance(found, KeyStore):
        return found
    raise ConfigError(
        f"the store {getattr(store, 'url', store)!r} cannot keep API keys; run the server on "
        "SQLite or PostgreSQL, or give this backend a key_store() (see memlane.apikeys.KeyStore)"
    )
