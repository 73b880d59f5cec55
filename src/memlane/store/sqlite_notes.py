"""Notes on SQLite: the shared repository (``notes.py``) with SQLite's dialect, and
keyword search through the ``notes_fts`` FTS5 table (migration 4; stemmed per language since 15)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memlane.notes.models import Note
from memlane.ports import NoteFilter
from memlane.store.notes import N_COLS, NotesDialect, SqlNoteRepository
from memlane.store.sqlite_rows import DIALECT, _dumps
from memlane.text import fts5_match, keyword_terms

if TYPE_CHECKING:
    from memlane.store.sqlite import SQLiteStore

__all__ = ["NOTES_DIALECT", "SQLiteNoteStore"]


def _insert_id(conn: Any, query: str, params: Sequence[Any]) -> int:
    row_id = conn.execute(query, params).lastrowid
    assert row_id is not None
    return int(row_id)


NOTES_DIALECT = NotesDialect(
    base=DIALECT,
    dump_json=_dumps,
    insert_id=_insert_id,
    null_safe_equals="IS",
    greatest="MAX",
    true="1",
)


class SQLiteNoteStore(SqlNoteRepository):
    """Notes in the SQLite log's own file, on its connection and lock."""

    def __init__(self, store: SQLiteStore) -> None:
        super().__init__(store, NOTES_DIALECT)

    def search_notes(self, query: str, flt: NoteFilter, *, limit: int = 20) -> list[tuple[Note, float]]:
        # stems in both languages, as for messages: notes_fts holds each note stemmed in its own (migration 15)
        terms = keyword_terms(query)
        if not terms:
            return []
        match = fts5_match(terms)
        where, params = self._where(flt)
        rows = self.store.read(
            f"SELECT {N_COLS}, bm25(notes_fts) AS rank FROM notes_fts "
            f"JOIN notes n ON n.id = notes_fts.rowid WHERE notes_fts MATCH ? AND {where} "
            "ORDER BY rank LIMIT ?",
            (match, *params, int(limit)),
        )
        return self._ranked(rows, lambda rank: -rank)
