"""``memlane encrypt`` / ``memlane decrypt``: convert a SQLite store to or from SQLCipher.

The conversion writes a new file beside the database with ``sqlcipher_export`` (every
table, index, trigger and the full-text shadow tables), verifies it (integrity check and
the row count of every table against the source), fsyncs it and only then swaps it in
with one atomic rename. The source is untouched until that rename, so an interrupted
run leaves the old database working and running the command again starts over from it
(the half-written copy is discarded). After the swap the old file's bytes are
overwritten with zeros, so no plaintext copy stays behind in the directory.

Stop every process using the store first: the conversion replaces the file under them.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from memlane.errors import EncryptionKeyError, InvalidInputError, StorageError
from memlane.store import sqlite_driver
from memlane.store.sqlite import storage_error

__all__ = ["ConvertReport", "convert"]


@dataclass(slots=True)
class ConvertReport:
    path: str
    direction: str
    tables: int
    rows: int
    bytes: int
    seconds: float

    def to_dict(self) -> dict[str, object]:
        return {"path": self.path, "direction": self.direction, "tables": self.tables,
                "rows": self.rows, "bytes": self.bytes, "seconds": round(self.seconds, 3)}


def _counts(conn: sqlite3.Connection, schema: str = "main") -> dict[str, int]:
    names = [r[0] for r in conn.execute(
        f"SELECT name FROM {schema}.sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "AND sql NOT LIKE 'CREATE VIRTUAL%'"  # full-text indexes: their shadow tables are counted
    )]
    return {n: int(conn.execute(f'SELECT COUNT(*) FROM {schema}."{n}"').fetchone()[0]) for n in names}


def _zero_and_close(fd: int) -> None:
    """Overwrite the (already replaced) old file through its descriptor, then close it."""
    try:
        size = os.fstat(fd).st_size
        os.lseek(fd, 0, os.SEEK_SET)
        chunk = b"\0" * (1 << 20)
        left = size
        while left > 0:
            left -= os.write(fd, chunk[: min(left, len(chunk))])
        os.fsync(fd)
    finally:
        os.close(fd)


def convert(path: str | Path, key: str, *, encrypt: bool) -> ConvertReport:
    """Encrypt (``encrypt=True``) or decrypt the SQLite store at ``path`` with ``key``."""
    db = Path(path).expanduser()
    if not db.is_file():
        raise InvalidInputError(f"{db} does not exist or is not a file")
    if not key:
        raise InvalidInputError("a key is needed: set MEMLANE_KEY or pass --key-env NAME")
    start = time.monotonic()
    staged = db.with_name(f".{db.name}.{'encrypting' if encrypt else 'decrypting'}")
    for suffix in ("", "-journal", "-wal", "-shm"):
        Path(f"{staged}{suffix}").unlink(missing_ok=True)  # an interrupted earlier run
    source_key = None if encrypt else key
    try:
        src = sqlite_driver.connect(str(db), source_key, cipher=True, isolation_level=None)
    except sqlite_driver.ERRORS as exc:
        raise StorageError(f"cannot open {db}: {exc}") from exc
    try:
        try:
            before = _counts(src)
        except sqlite_driver.DATABASE_ERRORS as exc:
            raise storage_error(str(db), exc, key_given=source_key is not None) from exc
        src.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        target_key = sqlite_driver.quote_key(key if encrypt else "")
        src.execute(f"ATTACH DATABASE {sqlite_driver.quote_key(str(staged))} AS converted KEY {target_key}")
        src.execute("SELECT sqlcipher_export('converted')")
        after = _counts(src, "converted")
        src.execute("DETACH DATABASE converted")
    except sqlite_driver.ERRORS as exc:
        raise StorageError(f"converting {db} failed: {exc}; {db} is unchanged") from exc
    finally:
        src.close()
    if after != before:
        staged.unlink(missing_ok=True)
        raise StorageError(f"the converted copy of {db} does not match it ({after} vs {before}); {db} is unchanged")
    check = sqlite_driver.connect(str(staged), key if encrypt else None, cipher=True, isolation_level=None)
    try:
        integrity = str(check.execute("PRAGMA integrity_check").fetchone()[0])
        check.execute("PRAGMA journal_mode = WAL")
    except sqlite_driver.ERRORS as exc:
        raise EncryptionKeyError(f"the converted copy of {db} cannot be read back: {exc}") from exc
    finally:
        check.close()
    if integrity != "ok":
        raise StorageError(f"the converted copy of {db} failed its integrity check: {integrity}")
    with open(staged, "rb") as f:
        os.fsync(f.fileno())
    old = os.open(db, os.O_RDWR)
    try:
        os.replace(staged, db)
        for suffix in ("-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
    except BaseException:
        os.close(old)
        raise
    _zero_and_close(old)
    with contextlib.suppress(OSError):
        dfd = os.open(db.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    return ConvertReport(str(db), "encrypt" if encrypt else "decrypt", len(after), sum(after.values()),
                         db.stat().st_size, time.monotonic() - start)
