"""``memlane encrypt`` / ``memlane decrypt``: convert a SQLite store to or from SQLCipher.

The conversion writes a new file beside the database with ``sqlcipher_export`` (every
table, index, trigger and the full-text shadow tables), verifies it (integrity check and
the row count of every table against the source), fsyncs it and only then swaps it in
with one atomic rename. After the swap the old file's bytes are overwritten with zeros,
so no plaintext copy stays behind in the directory.

A run killed at any point loses nothing and leaves no plaintext for long: running the
command again picks up where the files say it stopped.

- killed while copying or verifying: the store is untouched; the half-written copy
  (``.<name>.encrypting`` / ``.decrypting``) is zeroed and removed, and the copy starts over;
- killed around the swap: a hard link ``.<name>.replaced`` to the old file is made before
  the rename, so the next run either finds it is still the store (no swap yet: it starts
  over) or finishes the job: zeroes the old file through the link and removes it;
- the store already in the wanted form (the run finished, or it was converted before):
  nothing to convert, the run only reports it.

Stop every process using the store first: the conversion replaces the file under them.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from memlane.errors import EncryptionKeyError, InvalidInputError, StorageError
from memlane.store import sqlite_driver
from memlane.store.sqlite import storage_error

__all__ = ["ConvertReport", "convert"]

#: (what, done, total): how far the conversion is ("copying" in bytes, "scrubbing" in bytes)
Progress = Callable[[str, int, int], None]

_SQLITE_MAGIC = b"SQLite format 3\x00"
_PROGRESS_STEPS = 20_000  # SQLite VM steps between two looks at the copy's size


@dataclass(slots=True)
class ConvertReport:
    path: str
    direction: str
    tables: int
    rows: int
    bytes: int
    seconds: float
    #: what the run found of an interrupted earlier one: "" (nothing), "restarted" (a
    #: half-written copy was discarded), "finished" (the swap had happened; the old file
    #: was scrubbed) or "already" (the store was already in the wanted form)
    resumed: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"path": self.path, "direction": self.direction, "tables": self.tables,
                "rows": self.rows, "bytes": self.bytes, "seconds": round(self.seconds, 3),
                "resumed": self.resumed}


def _counts(conn: sqlite3.Connection, schema: str = "main") -> dict[str, int]:
    names = [r[0] for r in conn.execute(
        f"SELECT name FROM {schema}.sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "AND sql NOT LIKE 'CREATE VIRTUAL%'"  # full-text indexes: their shadow tables are counted
    )]
    return {n: int(conn.execute(f'SELECT COUNT(*) FROM {schema}."{n}"').fetchone()[0]) for n in names}


def _zero_and_close(fd: int, progress: Progress | None = None) -> None:
    """Overwrite the (already replaced) old file through its descriptor, then close it."""
    try:
        size = os.fstat(fd).st_size
        os.lseek(fd, 0, os.SEEK_SET)
        chunk = b"\0" * (1 << 20)
        left = size
        while left > 0:
            left -= os.write(fd, chunk[: min(left, len(chunk))])
            if progress is not None:
                progress("scrubbing", size - left, size)
        os.fsync(fd)
    finally:
        os.close(fd)


def _scrub(path: Path, progress: Progress | None = None) -> bool:
    """Zero a leftover file's bytes, then remove it; False when there is none."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    _zero_and_close(fd, progress)
    path.unlink(missing_ok=True)
    return True


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def _is_plain(db: Path) -> bool:
    with open(db, "rb") as f:
        return f.read(16) == _SQLITE_MAGIC


def _opens_with(db: Path, key: str | None) -> bool:
    try:
        conn = sqlite_driver.connect(str(db), key, cipher=True, isolation_level=None)
    except sqlite_driver.ERRORS:
        return False
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return True
    except sqlite_driver.ERRORS:
        return False
    finally:
        conn.close()


def _recover(db: Path, staged: Path, replaced: Path, progress: Progress | None) -> str:
    """Deal with what an interrupted run left; returns what was found ("" for nothing)."""
    found = ""
    if replaced.exists():
        if replaced.stat().st_ino == db.stat().st_ino:
            replaced.unlink()  # killed before the rename: the link is the store itself
            found = "restarted"
        else:
            _scrub(replaced, progress)  # killed after the rename: the old file's bytes go now
            found = "finished"
        _fsync_dir(db.parent)
    for suffix in ("", "-journal", "-wal", "-shm"):
        # a half-written copy (plaintext when decrypting): zeroed, never trusted
        if _scrub(Path(f"{staged}{suffix}")) and not found:
            found = "restarted"
    return found


def _report(db: Path, key: str, encrypt: bool, start: float, resumed: str) -> ConvertReport:
    conn = sqlite_driver.connect(str(db), key if encrypt else None, cipher=True, isolation_level=None)
    try:
        counts = _counts(conn)
    finally:
        conn.close()
    return ConvertReport(str(db), "encrypt" if encrypt else "decrypt", len(counts), sum(counts.values()),
                         db.stat().st_size, time.monotonic() - start, resumed)


def convert(path: str | Path, key: str, *, encrypt: bool, progress: Progress | None = None) -> ConvertReport:
    """Encrypt (``encrypt=True``) or decrypt the SQLite store at ``path`` with ``key``.

    Safe to run again after an interruption (see the module's doc); ``progress`` is
    told how far the copy and the scrubbing of the old file are.
    """
    db = Path(path).expanduser()
    if not db.is_file():
        raise InvalidInputError(f"{db} does not exist or is not a file")
    if not key:
        raise InvalidInputError("a key is needed: set MEMLANE_KEY or pass --key-env NAME")
    start = time.monotonic()
    verb = "encrypting" if encrypt else "decrypting"
    staged = db.with_name(f".{db.name}.{verb}")
    replaced = db.with_name(f".{db.name}.replaced")
    resumed = _recover(db, staged, replaced, progress)
    if _is_plain(db) != encrypt:  # already in the wanted form
        if encrypt and not _opens_with(db, key):
            raise EncryptionKeyError(
                f"{db} is not a plain SQLite database: encrypted with another key, or damaged; nothing was changed")
        return _report(db, key, encrypt, start, resumed or "already")
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
        # a small page cache: the copy reaches the file as it goes, so its size is the progress
        src.execute("PRAGMA converted.cache_size = -4096")
        total = db.stat().st_size
        if progress is not None:
            def look() -> int:
                with contextlib.suppress(OSError):
                    progress("copying", min(staged.stat().st_size, total), total)
                return 0

            src.set_progress_handler(look, _PROGRESS_STEPS)
        src.execute("SELECT sqlcipher_export('converted')")
        src.set_progress_handler(None, 0)
        if progress is not None:
            progress("copying", total, total)
        after = _counts(src, "converted")
        src.execute("DETACH DATABASE converted")
    except sqlite_driver.ERRORS as exc:
        raise StorageError(f"converting {db} failed: {exc}; {db} is unchanged") from exc
    finally:
        src.close()
    if after != before:
        _scrub(staged)
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
    # The old file stays reachable through the link until it is zeroed: a run killed after
    # the rename finishes the scrub the next time (_recover).
    os.link(db, replaced)
    _fsync_dir(db.parent)
    os.replace(staged, db)
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)  # the source's: checkpointed and empty
    _fsync_dir(db.parent)
    _scrub(replaced, progress)
    _fsync_dir(db.parent)
    return ConvertReport(str(db), "encrypt" if encrypt else "decrypt", len(after), sum(after.values()),
                         db.stat().st_size, time.monotonic() - start, resumed)
