"""How the `memlane` command reports errors: an exit code per error class, and the wording."""

from __future__ import annotations

from memlane import errors

EXIT_CODES: tuple[tuple[type[BaseException], int], ...] = (
    # most specific first: the first matching class wins
    (errors.NotFoundError, 4),
    (errors.ConflictError, 5),
    (errors.PermissionDeniedError, 6),
    (errors.ConfigError, 7),
    (errors.MissingExtraError, 8),
    (errors.EmbedderMismatchError, 9),
    (errors.CorruptRecordError, 10),
    (errors.CorruptDatabaseError, 10),
    (errors.EncryptionKeyError, 12),
    (errors.StorageError, 11),
    (errors.LockTimeoutError, 11),
    (errors.InvalidInputError, 2),
    (errors.MemlaneError, 1),
)


def exit_code_for(exc: BaseException) -> int:
    for cls, code in EXIT_CODES:
        if isinstance(exc, cls):
            return code
    return 1


def cli_message(exc: BaseException) -> str:
    """The error as a command-line user should read it: commands and flags, not Python calls.

    The library's messages name Python calls (``create_session()``); where one would, say
    what to run instead.
    """
    if isinstance(exc, errors.SessionNotFoundError):
        return f"session {exc.session_id!r} does not exist; memlane sessions lists the stored ones"
    return str(exc)
