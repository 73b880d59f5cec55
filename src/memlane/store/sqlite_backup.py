"""``memlane backup`` and ``memlane restore`` for the SQLite store.

The backup uses SQLite's online backup API in one step: it reads one consistent snapshot
(a read transaction in WAL mode) while other processes keep appending, so every message
acknowledged before the backup started is in it and the copy is never torn. The copy is
written to a temporary file, switched to a self-contained rollback journal, checked with
``PRAGMA integrity_check``, fsynced and only then renamed into place.

Restore checks the backup first (integrity, a memlane schema this version understands),
then copies it into the target with the same API, under the target's write lock, so
processes that have the target open see either the old or the restored database.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from memlane.errors import InvalidInputError, StorageError
from memlane.store.sqlite_schema import MIGRATIONS

__all__ = ["BackupReport", "backup_database", "check_database", "restore_database"]


@dataclass(slots=True)
class BackupReport:
    path: str
    bytes: int
    sessions: int
    messages: int
    schema_version: int
    integrity: str
    seconds: float

    def to_dict(self) -> dict[str, object]:
        return {
            "path": self.path, "bytes": self.bytes, "sessions": self.sessions,
            "messages": self.messages, "schema_version": self.schema_version,
            "integrity": self.integrity, "seconds": round(self.seconds, 3),
        }


def _connect(path: str | Path, timeout: float = 30.0) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), timeout=timeout, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
    return conn


def _describe(conn: sqlite3.Connection, path: str) -> tuple[int, int, int, str]:
    """(sessions, messages, schema version, integrity) of a memlane database."""
    try:
        integrity = str(conn.execute("PRAGMA integrity_check").fetchone()[0])
        version = int(conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0] or 0)
        sessions = int(conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0])
        messages = int(conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0])
    except sqlite3.DatabaseError as exc:
        raise StorageError(f"{path} is not a readable memlane database: {exc}") from exc
    return sessions, messages, version, integrity


def check_database(path: str | Path) -> BackupReport:
    """Integrity and counts of a memlane SQLite file (a backup, or a live database)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise InvalidInputError(f"{p} does not exist or is not a file")
    start = time.monotonic()
    conn = _connect(p)
    try:
        sessions, messages, version, integrity = _describe(conn, str(p))
    finally:
        conn.close()
    return BackupReport(str(p), p.stat().st_size, sessions, messages, version, integrity,
                        time.monotonic() - start)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):  # directories cannot be fsynced everywhere
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def backup_database(
    source: str | Path | sqlite3.Connection,
    dest: str | Path,
    *,
    overwrite: bool = False,
) -> BackupReport:
    """Copy a live memlane database to ``dest`` (one consistent snapshot, checked)."""
    target = Path(dest).expanduser()
    if target.exists() and not overwrite:
        raise InvalidInputError(f"{target} exists; choose another file or pass overwrite=True (--force)")
    if target.is_dir():
        raise InvalidInputError(f"{target} is a directory; give a file name for the backup")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    start = time.monotonic()
    own = not isinstance(source, sqlite3.Connection)
    if isinstance(source, sqlite3.Connection):
        src = source
    else:
        src_path = Path(source).expanduser()
        if not src_path.is_file():
            raise InvalidInputError(f"{src_path} does not exist; nothing to back up")
        src = _connect(src_path)
    try:
        dst = _connect(tmp)
        try:
            # pages=-1: the whole database in one step, i.e. from one read snapshot.
            src.backup(dst, pages=-1)
            # The copy is a file on its own: no -wal/-shm beside it.
            dst.execute("PRAGMA journal_mode = DELETE")
            sessions, messages, version, integrity = _describe(dst, str(target))
        finally:
            dst.close()
    except sqlite3.Error as exc:
        tmp.unlink(missing_ok=True)
        raise StorageError(f"backup to {target} failed: {exc}") from exc
    finally:
        if own:
            src.close()
    if integrity != "ok":
        tmp.unlink(missing_ok=True)
        raise StorageError(f"the backup failed its integrity check: {integrity}")
    _fsync(tmp)
    os.replace(tmp, target)
    return BackupReport(str(target), target.stat().st_size, sessions, messages, version, integrity,
                        time.monotonic() - start)


def restore_database(backup: str | Path, target: str | Path) -> BackupReport:
    """Replace the database at ``target`` with ``backup`` (checked first)."""
    src_path = Path(backup).expanduser()
    report = check_database(src_path)
    if report.integrity != "ok":
        raise StorageError(f"{src_path} failed its integrity check ({report.integrity}); not restored")
    if report.schema_version > max(MIGRATIONS):
        raise StorageError(
            f"{src_path} has schema version {report.schema_version}, newer than this memlane "
            f"({max(MIGRATIONS)}); upgrade memlane to restore it"
        )
    dest = Path(target).expanduser()
    dest.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    src = _connect(src_path)
    try:
        dst = _connect(dest)
        try:
            if dest.stat().st_size > 0:
                # A live WAL database: fold the log in first so the copy replaces everything.
                with contextlib.suppress(sqlite3.Error):
                    dst.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            src.backup(dst, pages=-1)
            dst.execute("PRAGMA journal_mode = WAL")
            sessions, messages, version, integrity = _describe(dst, str(dest))
        finally:
            dst.close()
    except sqlite3.Error as exc:
        raise StorageError(f"restore into {dest} failed: {exc}") from exc
    finally:
        src.close()
    if integrity != "ok":
        raise StorageError(f"the restored database failed its integrity check: {integrity}")
    return BackupReport(str(dest), dest.stat().st_size, sessions, messages, version, integrity,
                        time.monotonic() - start)
