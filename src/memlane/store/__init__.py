"""Storage backends behind one Protocol, chosen by URL."""

from __future__ import annotations

import importlib
from pathlib import Path

from memlane.errors import InvalidInputError, MissingExtraError
from memlane.store.base import KeywordHit, Store, TurnRecord
from memlane.store.sqlite import SQLiteStore


class InMemoryStore(SQLiteStore):
    """A throwaway store for development and tests: SQLite in RAM, same behaviour as on disk."""

    def __init__(self) -> None:
        super().__init__(":memory:")


def open_store(url: str | Path, **options: object) -> Store:
    """Open a store from a URL or path.

    ``sqlite:///abs/path.db``, ``sqlite:///:memory:`` or ``memory://``, a plain file path,
    or ``postgresql://user@host/db`` (needs the ``postgres`` extra).
    """
    text = str(url)
    if text in ("memory://", "sqlite://", "sqlite:///:memory:", ":memory:"):
        return InMemoryStore()
    if text.startswith(("postgresql://", "postgres://")):
        try:
            postgres = importlib.import_module("memlane.store.postgres")
        except ImportError as exc:  # psycopg not installed
            raise MissingExtraError("the PostgreSQL store", "postgres") from exc
        store: Store = postgres.PostgresStore(text, **options)
        return store
    if text.startswith("sqlite:///"):
        return SQLiteStore(text[len("sqlite:///"):], **options)  # type: ignore[arg-type]
    if "://" in text:
        raise InvalidInputError(
            f"unsupported store URL {text!r}; use sqlite:///path.db, memory:// or postgresql://..."
        )
    return SQLiteStore(text, **options)  # type: ignore[arg-type]


def local_file(url: str | Path) -> Path | None:
    """The SQLite file a store URL or path names; None for in-memory and server stores.

    Lets a caller tell whether a store exists before opening it (opening one creates it).
    """
    text = str(url)
    if text in ("memory://", "sqlite://", "sqlite:///:memory:", ":memory:"):
        return None
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///"):]
    elif "://" in text:
        return None
    return Path(text).expanduser()


__all__ = ["InMemoryStore", "KeywordHit", "SQLiteStore", "Store", "TurnRecord", "local_file", "open_store"]
