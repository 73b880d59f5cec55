"""Exit codes of the `memlane` command, one per error class, in one place."""

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
