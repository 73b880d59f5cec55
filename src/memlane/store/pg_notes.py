"""Notes on PostgreSQL: the shared repository (``notes.py``) with PostgreSQL's dialect
(row locks, ``RETURNING``, jsonb), and keyword search through the notes' ``tsvector``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from psycopg.types.json import Jsonb

from memlane.notes.models import Note
from memlane.ports import NoteFilter
from memlane.store.notes import N_COLS, NotesDialect, SqlNoteRepository
from memlane.store.pg_rows import DIALECT
from memlane.store.pg_search import every_config_tsvector, tsquery_literal
from memlane.store.postgres_schema import TEXT_CONFIGS
from memlane.text import compound_words, content_words

if TYPE_CHECKING:
    from memlane.store.postgres import PostgresStore

__all__ = ["NOTES_DIALECT", "PostgresNoteStore"]


def _insert_id(conn: Any, query: str, params: Sequence[Any]) -> int:
    return int(conn.execute(query + " RETURNING id", params).fetchone()[0])


NOTES_DIALECT = NotesDialect(
    base=DIALECT,
    dump_json=Jsonb,
    insert_id=_insert_id,
    null_safe_equals="IS NOT DISTINCT FROM",
    greatest="GREATEST",
    true="true",
    for_update=" FOR UPDATE",
    # a concurrent forget waits for the note (then deletes it) or runs first (no note)
    for_key_share=" FOR KEY SHARE",
    compound_parts=True,  # migration 19: the generated tsv reads them from the row
)


class PostgresNoteStore(SqlNoteRepository):
    """Notes in the PostgreSQL log's database, on its pool and transactions."""

    def __init__(self, store: PostgresStore) -> None:
        super().__init__(store, NOTES_DIALECT)

    def search_notes(self, query: str, flt: NoteFilter, *, limit: int = 20) -> list[tuple[Note, float]]:
        found = content_words(query)
        words = found + compound_words(found, query)
        if not words:
            return []
        where, params = self._where(flt)
        # Words become lexemes in every language a note may be stemmed in (migration 15), OR-ed.
        text = " ".join(words)
        lexemes = [
            r[0] for r in self.store.read(
                f"SELECT DISTINCT unnest(tsvector_to_array({every_config_tsvector('%s')}))",
                tuple(text for _ in TEXT_CONFIGS),
            )
        ]
        if not lexemes:
            return []
        rows = self.store.read(
            f"SELECT {N_COLS}, ts_rank(n.tsv, q) AS rank FROM notes n, CAST(%s AS tsquery) q "
            f"WHERE n.tsv @@ q AND {where} ORDER BY rank DESC, n.id DESC LIMIT %s",
            (tsquery_literal(lexemes), *params, int(limit)),
        )
        return self._ranked(rows, lambda rank: rank * 10.0)
