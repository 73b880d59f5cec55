"""The PostgreSQL notes repository, re-exported from :mod:`memlane.store.pg_notes`."""

from memlane.store.pg_notes import PostgresNoteStore

__all__ = ["PostgresNoteStore"]
