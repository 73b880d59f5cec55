"""What a store can tell about its own health: page integrity, keyword indexes, orphans, size.

The store only gathers facts (all SQL stays here, in store/); ``memlane.doctor`` judges
them and says what to do. Every probe is read-only except FTS5's 'integrity-check',
which SQLite spells as an INSERT but which changes nothing.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Derived or dependent rows and the row they cannot exist without:
#: (table, column, parent table, parent column). Foreign keys normally prevent these;
#: they appear after a write with foreign keys off, a manual repair or a partial restore.
ORPHAN_CHECKS: tuple[tuple[str, str, str, str], ...] = (
    ("messages", "session_id", "sessions", "id"),
    ("turns", "session_id", "sessions", "id"),
    ("derived", "session_id", "sessions", "id"),
    ("tool_call_ids", "message_id", "messages", "id"),
    ("message_vectors", "message_id", "messages", "id"),
    ("message_facets", "message_id", "messages", "id"),
    ("note_sources", "note_id", "notes", "id"),
    ("promotion_progress", "session_id", "sessions", "id"),
    ("session_archive", "session_id", "sessions", "id"),
)

#: memlane's tables in the PostgreSQL schema it uses.
PG_TABLES = (
    "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.relkind = 'r' AND n.nspname = current_schema()"
)
#: SQLite's tables.
SQLITE_TABLES = "SELECT name FROM sqlite_master WHERE type = 'table'"

#: FTS5 indexes kept by triggers beside their content table (SQLite only).
FTS_TABLES = ("messages_fts", "notes_fts")


@dataclass(slots=True)
class StoreHealth:
    """Facts about one store, as its backend sees them."""

    backend: str
    integrity_checked: bool = False
    integrity_problems: list[str] = field(default_factory=list)
    fts_problems: dict[str, str] = field(default_factory=dict)  # index -> what its check said
    orphans: dict[str, int] = field(default_factory=dict)  # "table.column" -> rows without parent
    database_bytes: int = 0
    wal_bytes: int | None = None
    free_disk_bytes: int | None = None
    notes: list[str] = field(default_factory=list)  # what could not be checked, and why
    # PostgreSQL only (postgres_health):
    without_language: dict[str, int] = field(default_factory=dict)  # table -> rows indexed as English unjudged
    invalid_indexes: list[str] = field(default_factory=list)  # left by a failed CREATE/REINDEX CONCURRENTLY
    missing_indexes: list[str] = field(default_factory=list)  # what search needs and is not there
    skipped_extensions: dict[str, str] = field(default_factory=dict)  # extension -> what is missing without it
    dead_rows: dict[str, tuple[int, int]] = field(default_factory=dict)  # table -> (dead, live), when bloated


def orphan_query(table: str, column: str, parent: str, parent_column: str) -> str:
    # Names come from ORPHAN_CHECKS above, never from input.
    return (
        f"SELECT count(*) FROM {table} c WHERE c.{column} IS NOT NULL AND NOT EXISTS "
        f"(SELECT 1 FROM {parent} p WHERE p.{parent_column} = c.{column})"
    )


def delete_orphans_sql(tables: set[str]) -> list[tuple[str, str]]:
    """(label, DELETE statement) for each orphan check whose tables exist."""
    out = []
    for table, column, parent, parent_column in ORPHAN_CHECKS:
        if table in tables and parent in tables:
            out.append((
                f"{table}.{column}",
                f"DELETE FROM {table} WHERE {column} IS NOT NULL AND NOT EXISTS "
                f"(SELECT 1 FROM {parent} p WHERE p.{parent_column} = {table}.{column})",
            ))
    return out


def count_orphans(read: Callable[[str], list[Any]], tables: set[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for table, column, parent, parent_column in ORPHAN_CHECKS:
        if table not in tables or parent not in tables:
            continue
        n = int(read(orphan_query(table, column, parent, parent_column))[0][0])
        if n:
            out[f"{table}.{column}"] = n
    return out


def sqlite_health(
    path: str,
    read: Callable[[str], list[Any]],
    write: Callable[[Callable[[sqlite3.Connection], None]], None],
) -> StoreHealth:
    """Facts about a SQLite store; ``read``/``write`` are the store's own connections."""
    health = StoreHealth(backend="sqlite")
    try:
        rows = read("PRAGMA integrity_check(100)")
        health.integrity_checked = True
        health.integrity_problems = [str(r[0]) for r in rows if str(r[0]) != "ok"]
    except Exception as exc:  # a damaged file fails the check itself: that is the finding
        health.integrity_checked = True
        health.integrity_problems = [str(exc.__cause__ or exc)]
    try:
        tables = {str(r[0]) for r in read(SQLITE_TABLES)}
    except Exception as exc:
        health.notes.append(f"cannot list tables: {exc.__cause__ or exc}")
        return health
    for fts in FTS_TABLES:
        if fts not in tables:
            continue
        try:
            write(lambda conn, fts=fts: conn.execute(  # type: ignore[misc]
                f"INSERT INTO {fts}({fts}, rank) VALUES ('integrity-check', 1)"
            ))
        except Exception as exc:
            health.fts_problems[fts] = str(exc.__cause__ or exc)
    try:
        health.orphans = count_orphans(read, tables)
    except Exception as exc:
        health.notes.append(f"orphan check failed: {exc.__cause__ or exc}")
    if path != ":memory:":
        db = Path(path)
        health.database_bytes = db.stat().st_size if db.exists() else 0
        wal = Path(path + "-wal")
        health.wal_bytes = wal.stat().st_size if wal.exists() else 0
        health.free_disk_bytes = shutil.disk_usage(db.parent).free
    return health


def postgres_health(read: Callable[[str], list[Any]]) -> StoreHealth:
    """Facts about a PostgreSQL store: orphans and sizes; page checks need amcheck."""
    health = StoreHealth(backend="postgres")
    tables = {str(r[0]) for r in read(PG_TABLES)}
    health.orphans = count_orphans(read, tables)
    health.database_bytes = int(read(
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relkind = 'r' AND n.nspname = current_schema()"
    )[0][0])
    if read("SELECT 1 FROM pg_extension WHERE extname = 'amcheck'"):
        health.integrity_checked = True
        rows = read(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_am a ON a.oid = c.relam "
            "WHERE a.amname = 'btree' AND n.nspname = current_schema()"
        )
        for (name,) in rows:
            try:
                read(f"SELECT bt_index_check('{name}'::regclass)")
            except Exception as exc:
                health.integrity_problems.append(f"index {name}: {exc.__cause__ or exc}")
    else:
        health.notes.append(
            "page integrity not checked: install the amcheck extension "
            "(CREATE EXTENSION amcheck) for a B-tree check; PostgreSQL data checksums cover pages"
        )
    try:
        health.wal_bytes = int(read("SELECT coalesce(sum(size), 0) FROM pg_ls_waldir()")[0][0])
    except Exception:
        health.notes.append("WAL size not checked: needs superuser or the pg_monitor role")
    _postgres_search_facts(read, tables, health)
    return health


#: Optional migrations (postgres_schema.OPTIONAL) and what a store without them lacks.
PG_EXTENSION_ROLES = {
    "vector": "pgvector: no vectors are stored, search is keyword-only",
    "btree_gin": "btree_gin: the keyword index has no tenant column, so a tenant's search reads other tenants' matches",
}
#: Dead row versions beyond this share of the live ones (and this many) mean VACUUM is behind.
DEAD_ROW_SHARE = 0.2
DEAD_ROW_MIN = 10_000


def _postgres_search_facts(read: Callable[[str], list[Any]], tables: set[str], health: StoreHealth) -> None:
    """What keeps PostgreSQL search right and fast: rows stemmed in their language, valid
    indexes, the extensions the optional migrations wanted, and VACUUM keeping up."""
    for table in ("messages", "notes"):
        if table in tables:
            count = int(read(f"SELECT count(*) FROM {table} WHERE lang IS NULL")[0][0])
            if count:
                health.without_language[table] = count
    health.invalid_indexes = [str(r[0]) for r in read(
        "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND NOT (i.indisvalid AND i.indisready)"
    )]
    indexes = {str(r[0]) for r in read(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relkind = 'i' AND n.nspname = current_schema()"
    )}
    if "messages" in tables and not indexes & {"messages_tsv_by_tenant", "messages_tsv"}:
        health.missing_indexes.append("messages_tsv (keyword search reads every message)")
    if "message_vectors" in tables and "message_vectors_hnsw" not in indexes and read(
        "SELECT 1 FROM message_vectors LIMIT 1"
    ):
        health.missing_indexes.append("message_vectors_hnsw (vector search compares every vector)")
    installed = {str(r[0]) for r in read("SELECT extname FROM pg_extension")}
    for extension, role in PG_EXTENSION_ROLES.items():
        if extension not in installed:
            health.skipped_extensions[extension] = role
    for table, dead, live in read(
        "SELECT relname, n_dead_tup, n_live_tup FROM pg_stat_user_tables WHERE schemaname = current_schema()"
    ):
        if dead >= DEAD_ROW_MIN and dead > DEAD_ROW_SHARE * max(live, 1):
            health.dead_rows[str(table)] = (int(dead), int(live))
