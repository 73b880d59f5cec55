"""``memlane backup`` and ``memlane restore`` for the SQLite store.

The backup uses SQLite's online backup API in one step: it reads one consistent snapshot
(a read transaction in WAL mode) while other processes keep appending, so every message
acknowledged before the backup started is in it and the copy is never torn. The copy is
written to a temporary file, switched to a self-contained rollback journal, checked with
``PRAGMA integrity_check``, fsynced and only then renamed into place.

Restore checks the backup first (integrity, a memlane schema this version understands),
replays the target's erasure log (``<db>-erasures``: ids and times of everything erased)
on a private copy, so nothing forgotten after the backup was taken comes back, then
copies it into the target with the same API, under the target's write lock, so
processes that have the target open see either the old or the restored database.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from memlane.errors import InvalidInputError, StorageError
from memlane.store import sqlite_driver
from memlane.store.sqlite import replay_erasures
from memlane.store.sqlite_schema import MIGRATIONS
from memlane.store.vector_paths import files_dir

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
    #: erasure-log entries replayed on a restored copy (restore only)
    erasures_replayed: int = 0

    def to_dict(self) -> dict[str, object]:
        return {
            "path": self.path, "bytes": self.bytes, "sessions": self.sessions,
            "messages": self.messages, "schema_version": self.schema_version,
            "integrity": self.integrity, "seconds": round(self.seconds, 3),
            "erasures_replayed": self.erasures_replayed,
        }


def _connect(path: str | Path, key: str | None = None, timeout: float = 30.0) -> sqlite3.Connection:
    # An encrypted store's backup is encrypted with the same key (SQLCipher copies pages).
    conn = sqlite_driver.connect(str(path), key, timeout=timeout, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
    return conn


def _describe(conn: sqlite3.Connection, path: str) -> tuple[int, int, int, str]:
    """(sessions, messages, schema version, integrity) of a memlane database."""
    try:
        integrity = str(conn.execute("PRAGMA integrity_check").fetchone()[0])
        version = int(conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0] or 0)
        sessions = int(conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0])
        messages = int(conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0])
    except sqlite_driver.DATABASE_ERRORS as exc:
        raise StorageError(f"{path} is not a readable memlane database: {exc}") from exc
    return sessions, messages, version, integrity


def check_database(path: str | Path, key: str | None = None) -> BackupReport:
    """Integrity and counts of a memlane SQLite file (a backup, or a live database)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise InvalidInputError(f"{p} does not exist or is not a file")
    start = time.monotonic()
    conn = _connect(p, key)
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
    key: str | None = None,
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
        src = _connect(src_path, key)
    try:
        dst = _connect(tmp, key)
        try:
            # pages=-1: the whole database in one step, i.e. from one read snapshot.
            src.backup(dst, pages=-1)
            # The copy is a file on its own: no -wal/-shm beside it.
            dst.execute("PRAGMA journal_mode = DELETE")
            sessions, messages, version, integrity = _describe(dst, str(target))
        finally:
            dst.close()
    except sqlite_driver.ERRORS as exc:
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


def restore_database(backup: str | Path, target: str | Path, key: str | None = None) -> BackupReport:
    """Replace the database at ``target`` with ``backup`` (checked first)."""
    src_path = Path(backup).expanduser()
    report = check_database(src_path, key)
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
    # What was erased after the backup was taken must stay erased: replay the target's
    # erasure log on a private copy first, so the restored database never shows it.
    staged = dest.with_name(f".{dest.name}.{os.getpid()}.restore")
    _remove_database(staged)
    try:
        shutil.copyfile(src_path, staged)
        replayed = replay_erasures(staged, f"{dest}-erasures", key)
        _restore_from(staged, dest, key)
        # The vector index files beside it describe the replaced database: rebuilt on the
        # next search from the restored one (store/vector_files.py).
        shutil.rmtree(files_dir(str(dest)), ignore_errors=True)
    finally:
        _remove_database(staged)
    sessions, messages, version, integrity = _checked(dest, key)
    return BackupReport(str(dest), dest.stat().st_size, sessions, messages, version, integrity,
                        time.monotonic() - start, replayed)


def _remove_database(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-locks", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _checked(dest: Path, key: str | None) -> tuple[int, int, int, str]:
    conn = _connect(dest, key)
    try:
        found = _describe(conn, str(dest))
    finally:
        conn.close()
    if found[3] != "ok":
        raise StorageError(f"the restored database failed its integrity check: {found[3]}")
    return found


def _restore_from(src_path: Path, dest: Path, key: str | None) -> None:
    src = _connect(src_path, key)
    try:
        dst = _connect(dest, key)
        try:
            if dest.stat().st_size > 0:
                # A live WAL database: fold the log in first so the copy replaces everything.
                with contextlib.suppress(*sqlite_driver.ERRORS):
                    dst.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            src.backup(dst, pages=-1)
            dst.execute("PRAGMA journal_mode = WAL")
        finally:
            dst.close()
    except sqlite_driver.ERRORS as exc:
        raise StorageError(f"restore into {dest} failed: {exc}") from exc
    finally:
        src.close()
