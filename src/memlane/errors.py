"""One exception tree for memlane.

Every error the library raises is a ``MemlaneError``. Errors caused by the
caller's input also subclass ``ValueError`` so generic handlers keep working.
The tree (``except`` a parent catches its children)::

    MemlaneError
    ├── InvalidInputError (ValueError)
    ├── NotFoundError (LookupError)
    │   └── SessionNotFoundError
    ├── ConflictError
    │   ├── SessionExistsError
    │   └── NoteSupersededError
    ├── CorruptRecordError
    ├── StorageError
    │   └── EmbedderError
    ├── LockTimeoutError (TimeoutError)
    ├── EmbedderMismatchError
    ├── ConfigError (ValueError)
    ├── MissingExtraError (ImportError)
    └── PermissionDeniedError

The CLI maps each class to an exit code and the server to an HTTP status, each
in one place (``cli/exit_codes.py``, ``server/errors.py``).
"""

from __future__ import annotations


class MemlaneError(Exception):
    """Base class of everything memlane raises on purpose."""


class InvalidInputError(MemlaneError, ValueError):
    """The caller passed something memlane cannot store or use; nothing was written."""


class NotFoundError(MemlaneError, LookupError):
    """A named record (session, message, note, key) does not exist."""


class SessionNotFoundError(NotFoundError):
    """A session id that does not exist (and auto-create is off)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {session_id!r} does not exist; create it with create_session() "
            "or enable auto_create_sessions"
        )
        self.session_id = session_id


class ConflictError(MemlaneError):
    """The request conflicts with stored data (e.g. a session id already taken)."""


class SessionExistsError(ConflictError):
    """An import met a session id that is already stored (and was told neither to skip nor replace)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {session_id!r} already exists; import with on_conflict='skip', 'replace' or 'new'"
        )
        self.session_id = session_id


class NoteSupersededError(ConflictError):
    """A correction (or other replacement) targeted a note version that is no longer current.

    Raised when the version was already replaced before the call, and also when another
    writer replaced it at the same moment: the store closes the old version only if it is
    still current, in the same transaction that writes the new one, so of two simultaneous
    corrections exactly one wins and the other gets this error (nothing is written for it).
    """

    def __init__(self, note_id: int, successor: int | None) -> None:
        by = f" by note {successor}" if successor else ""
        super().__init__(
            f"note {note_id} was already superseded{by}: correct the current version "
            f"(its history lists every version)"
        )
        self.note_id = note_id
        self.successor = successor


class CorruptRecordError(MemlaneError):
    """A stored row could not be decoded. Names the table and row so it can be repaired."""

    def __init__(self, table: str, row_id: object, reason: str) -> None:
        super().__init__(f"corrupted row in {table} (id={row_id!r}): {reason}")
        self.table = table
        self.row_id = row_id


class StorageError(MemlaneError):
    """The storage backend failed (disk full, locked for too long, connection lost)."""


class LockTimeoutError(MemlaneError, TimeoutError):
    """A session lock was held elsewhere until the caller's ``timeout`` ran out.

    Not a StorageError: the backend works, another writer simply holds the lock;
    retrying later is the remedy. Also a TimeoutError so generic handlers keep working.
    """


class CorruptDatabaseError(StorageError):
    """The database file is not a (readable) memlane database: truncated, damaged or not SQLite."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(
            f"{path} is not a readable SQLite database ({reason}): it may be truncated, damaged "
            "or another kind of file. Restore it from a backup (memlane restore BACKUP "
            f"--store {path}) or point --store at the right file; nothing was changed"
        )
        self.path = path


class EncryptionKeyError(StorageError):
    """An encrypted store was opened without its key or with a wrong one."""


class EmbedderError(StorageError):
    """The embedding backend failed (endpoint unreachable, bad reply, model file unusable).

    A StorageError so every handler of backend failures also covers embedding backends.
    """


class EmbedderMismatchError(MemlaneError):
    """The database's vectors were made by another embedding model or dimension."""


class ConfigError(MemlaneError, ValueError):
    """A setting in the config file or environment is invalid."""


class MissingExtraError(MemlaneError, ImportError):
    """An optional dependency is not installed; the message names the pip extra."""

    def __init__(self, feature: str, extra: str) -> None:
        super().__init__(
            f"{feature} needs an optional dependency: pip install 'memlane[{extra}]'"
        )
        self.extra = extra


class PermissionDeniedError(MemlaneError):
    """The actor may not do this (e.g. a non-Anchor issuing a memory command)."""
