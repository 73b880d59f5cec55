"""Which SQLite library a store talks to: Python's ``sqlite3``, or SQLCipher for encryption at rest.

SQLCipher (through the maintained ``sqlcipher3`` binding, the ``encryption`` extra)
encrypts every page of the database file and of its WAL with AES-256; it has the same
DB-API as ``sqlite3`` but its own exception classes, so the store catches the classes
listed here instead of ``sqlite3``'s alone.
"""

from __future__ import annotations

import importlib
import sqlite3
from types import ModuleType
from typing import Any, cast

from memlane.errors import MissingExtraError
from memlane.language import detect_language, keyword_text

__all__ = ["DATABASE_ERRORS", "ERRORS", "INTEGRITY_ERRORS", "OPERATIONAL_ERRORS", "connect", "sqlcipher"]

ERRORS: tuple[type[Exception], ...] = (sqlite3.Error,)
OPERATIONAL_ERRORS: tuple[type[Exception], ...] = (sqlite3.OperationalError,)
DATABASE_ERRORS: tuple[type[Exception], ...] = (sqlite3.DatabaseError,)
INTEGRITY_ERRORS: tuple[type[Exception], ...] = (sqlite3.IntegrityError,)
_cipher: ModuleType | None = None


def sqlcipher() -> ModuleType:
    """The SQLCipher DB-API module; its exception classes join the ones the store catches."""
    global _cipher, ERRORS, OPERATIONAL_ERRORS, DATABASE_ERRORS, INTEGRITY_ERRORS
    if _cipher is None:
        try:
            module = importlib.import_module("sqlcipher3")
        except ImportError as exc:
            raise MissingExtraError("encryption at rest (SQLCipher)", "encryption") from exc
        ERRORS += (module.Error,)
        OPERATIONAL_ERRORS += (module.OperationalError,)
        DATABASE_ERRORS += (module.DatabaseError,)
        INTEGRITY_ERRORS += (module.IntegrityError,)
        _cipher = module
    return _cipher


def quote_key(key: str) -> str:
    """``key`` as an SQL string literal for ``PRAGMA key`` (it takes no parameters)."""
    return "'" + key.replace("'", "''") + "'"


def connect(path: str, key: str | None, *, cipher: bool = False, **options: Any) -> sqlite3.Connection:
    """A connection to ``path``; with ``key`` (or ``cipher``) through SQLCipher, keyed first.

    The key is checked by the caller's first read: SQLCipher only finds out whether it
    is right when it decrypts the first page. ``cipher`` without a key opens a plain file
    through SQLCipher (for ``sqlcipher_export`` into an encrypted copy).
    """
    if key is None and not cipher:
        return with_functions(cast(sqlite3.Connection, sqlite3.connect(path, **options)))
    module = sqlcipher()
    conn = cast(sqlite3.Connection, module.connect(path, **options))
    # A wrong key is our EncryptionKeyError; SQLCipher's own stderr log of it is noise.
    conn.execute("PRAGMA cipher_log_level = NONE")
    if key is not None:
        conn.execute(f"PRAGMA key = {quote_key(key)}")
    return with_functions(conn)


def _language(text: str | None) -> str:
    return detect_language(text or "")


def _stems(text: str | None, language: str | None) -> str:
    return keyword_text(text or "", language)


def with_functions(conn: sqlite3.Connection) -> sqlite3.Connection:
    """``conn`` with the SQL functions memlane's schema calls (every connection needs them).

    The keyword index holds each message's words stemmed in its language (migration 10):
    ``memlane_language(content)`` is the language a message is stored with,
    ``memlane_stems(content, lang)`` the text its index triggers and view hand to FTS5.
    Python functions because SQLite's FTS5 has no German stemmer; other programs that
    write to the messages table must register the same two.
    """
    conn.create_function("memlane_language", 1, _language, deterministic=True)
    conn.create_function("memlane_stems", 2, _stems, deterministic=True)
    return conn
