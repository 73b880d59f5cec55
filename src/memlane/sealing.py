"""Files memlane writes beside an encrypted store (checkpoints) are sealed with the same key.

AES-256-GCM from the maintained ``cryptography`` package (the ``encryption`` extra), with
a key derived from the store's passphrase by scrypt and a random salt. One salt per
process keeps sealing cheap (the derivation runs once); every file carries its salt, so
any process holding the passphrase can open it. A file that was changed or sealed with
another key fails to open instead of yielding garbage.
"""

from __future__ import annotations

import os
import threading
from importlib import import_module
from typing import Any

from memlane.errors import EncryptionKeyError, MissingExtraError

__all__ = ["MAGIC", "Sealer", "is_sealed"]

MAGIC = b"MLSEAL1\n"
_SALT = 16
_NONCE = 12


def is_sealed(data: bytes) -> bool:
    return data.startswith(MAGIC)


class Sealer:
    """Seal and open bytes with a passphrase."""

    def __init__(self, passphrase: str) -> None:
        try:
            self._aead: Any = import_module("cryptography.hazmat.primitives.ciphers.aead")
            self._kdf: Any = import_module("cryptography.hazmat.primitives.kdf.scrypt")
        except ImportError as exc:
            raise MissingExtraError("sealing files beside an encrypted store", "encryption") from exc
        self._passphrase = passphrase.encode("utf-8")
        self._salt = os.urandom(_SALT)
        self._keys: dict[bytes, bytes] = {}
        self._lock = threading.Lock()

    def _key(self, salt: bytes) -> bytes:
        with self._lock:
            found = self._keys.get(salt)
            if found is None:
                kdf = self._kdf.Scrypt(salt=salt, length=32, n=2**14, r=8, p=1)
                found = self._keys[salt] = bytes(kdf.derive(self._passphrase))
            return found

    def seal(self, data: bytes) -> bytes:
        nonce = os.urandom(_NONCE)
        box = self._aead.AESGCM(self._key(self._salt))
        return MAGIC + self._salt + nonce + bytes(box.encrypt(nonce, data, MAGIC))

    def open(self, data: bytes, what: str) -> bytes:
        if not is_sealed(data):
            raise EncryptionKeyError(f"{what} is not sealed; it was not written by an encrypted store")
        body = data[len(MAGIC):]
        salt, nonce, sealed = body[:_SALT], body[_SALT:_SALT + _NONCE], body[_SALT + _NONCE:]
        try:
            return bytes(self._aead.AESGCM(self._key(salt)).decrypt(nonce, sealed, MAGIC))
        except Exception as exc:  # cryptography's InvalidTag: wrong key or changed bytes
            raise EncryptionKeyError(f"{what} cannot be opened with this key (wrong key or damaged file)") from exc
