"""The notes repository, re-exported where features and tests have always found it.

The port (:class:`~memlane.ports.NoteRepository`, once named ``NoteStore``, and
:class:`~memlane.ports.NoteFilter`) lives in :mod:`memlane.ports`; each backend's
implementation in ``store/`` (``sqlite_notes.py``, ``pg_notes.py``). Ask a store for
its repository with ``store.note_repository()``.
"""

from __future__ import annotations

from memlane.ports import NoteFilter, NoteRepository
from memlane.store.sqlite_notes import SQLiteNoteStore

#: The old name of :class:`~memlane.ports.NoteRepository`.
NoteStore = NoteRepository

__all__ = ["NoteFilter", "NoteRepository", "NoteStore", "SQLiteNoteStore", "note_store_for"]


def note_store_for(store: object) -> NoteRepository | None:
    """The notes repository beside ``store`` (``store.note_repository()``), or None."""
    factory = getattr(store, "note_repository", None)
    found = factory() if callable(factory) else None
    return found if isinstance(found, NoteRepository) else None
