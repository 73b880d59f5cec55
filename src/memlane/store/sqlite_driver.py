"""Which SQLite library a store talks to: a recent SQLite, or SQLCipher for encryption at rest.

Plain stores use ``pysqlite3`` (the ``pysqlite3-binary`` wheel, a current SQLite with the
same DB-API as ``sqlite3``) where it is installed, else Python's own ``sqlite3``. What a
recent SQLite adds that memlane relies on: FTS5 ``secure-delete`` (3.44+), which erases a
row's full-text entries in place, so forgetting one conversation costs what it erases
instead of a rewrite of the whole index (store/sqlite.py, ``erase``). A store whose
full-text index has been switched to it cannot be read by an older SQLite: opening it
with one is a clear error (:func:`check_fts_format`), never a silent failure later.

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

from memlane.errors import MissingExtraError, StorageError
from memlane.language import detect_language, keyword_text

__all__ = ["DATABASE_ERRORS", "ERRORS", "INTEGRITY_ERRORS", "OPERATIONAL_ERRORS", "connect", "sqlcipher"]


def _plain_module() -> ModuleType:
    try:
        return importlib.import_module("pysqlite3.dbapi2")
    except ImportError:  # no wheel for this platform: Python's own SQLite
        return sqlite3


_plain = _plain_module()
ERRORS: tuple[type[Exception], ...] = tuple({sqlite3.Error, _plain.Error})
OPERATIONAL_ERRORS: tuple[type[Exception], ...] = tuple({sqlite3.OperationalError, _plain.OperationalError})
DATABASE_ERRORS: tuple[type[Exception], ...] = tuple({sqlite3.DatabaseError, _plain.DatabaseError})
INTEGRITY_ERRORS: tuple[type[Exception], ...] = tuple({sqlite3.IntegrityError, _plain.IntegrityError})
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


#: The first SQLite whose FTS5 deletes index entries in place (its fixes to 'secure-delete'
#: of 3.42/3.43 included).
SECURE_DELETE_SQLITE = (3, 44, 0)


def sqlite_version(conn: sqlite3.Connection | None = None) -> str:
    """The SQLite version of ``conn``, or of the library plain stores use."""
    if conn is not None:
        return str(conn.execute("SELECT sqlite_version()").fetchone()[0])
    return str(_plain.sqlite_version)


def fts_secure_delete(conn: sqlite3.Connection | None = None) -> bool:
    """Whether the SQLite of ``conn`` (or of plain stores) has FTS5 'secure-delete'."""
    version = tuple(int(p) for p in sqlite_version(conn).split(".")[:3])
    return version >= SECURE_DELETE_SQLITE


def check_fts_format(conn: sqlite3.Connection, path: str) -> None:
    """A clear error when the store's full-text index needs a newer SQLite than ``conn`` has.

    FTS5 records 'secure-delete' as index format 5, which SQLite before 3.44 refuses
    ("invalid fts5 file format") on the first search or write, long after the open.
    """
    if fts_secure_delete(conn):
        return
    try:
        rows = conn.execute("SELECT v FROM messages_fts_config WHERE k = 'version'").fetchall()
    except ERRORS:
        return  # a new database: no index yet
    if rows and int(rows[0][0]) > 4:
        raise StorageError(
            f"{path}: its full-text index was written by SQLite 3.44 or newer (in-place erase), "
            f"but this Python uses SQLite {sqlite_version(conn)}; install memlane with its "
            "dependencies (pip install pysqlite3-binary) or use a Python linked against SQLite 3.44+"
        )


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
        return with_functions(cast(sqlite3.Connection, _plain.connect(path, **options)))
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
