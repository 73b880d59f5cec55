"""What `memlane bench tenant-writes` asks PostgreSQL: the data-version variants it compares
(store/data_versions.py) and who waits for which lock meanwhile."""

from __future__ import annotations

from typing import Any

from memlane.store.data_versions import POSTGRES_SQL

__all__ = ["DROP_VERSIONS_SQL", "deadlocks", "lock_waits", "make_variant", "prepare_database"]

#: Removes the data versions (triggers, function, counter) from a store migrated past 24.
DROP_VERSIONS_SQL = """
DO $$ DECLARE tbl TEXT; BEGIN
    FOREACH tbl IN ARRAY ARRAY['sessions', 'notes', 'messages', 'derived', 'turns',
                               'session_archive', 'message_facets', 'message_vectors'] LOOP
        IF to_regclass(tbl) IS NOT NULL THEN
            EXECUTE format('DROP TRIGGER IF EXISTS data_version ON %I', tbl);
        END IF;
    END LOOP;
END $$;
DROP FUNCTION memlane_data_version();
DROP VIEW tenant_versions;
DROP TABLE tenant_version_shards;
DROP SEQUENCE tenant_version_shard_ids;
"""


def make_variant(conn: Any, variant: str) -> None:
    """On a migrated store: ``shards`` keeps it, ``one_row`` puts back migration 21's one row
    per tenant, ``no_trigger`` removes the data versions."""
    if variant == "shards":
        return
    if variant not in ("one_row", "no_trigger"):
        raise ValueError(f"unknown data-version variant {variant!r}: shards, one_row or no_trigger")
    conn.execute(DROP_VERSIONS_SQL.encode())
    if variant == "one_row":
        conn.execute(POSTGRES_SQL.encode())


def lock_waits(conn: Any) -> tuple[dict[str, int], list[str]]:
    """Backends waiting for a lock now, per lock type (a row lock is waited on as its holder's
    ``transactionid``; the change-event lock is ``advisory``), and what each waiter runs."""
    rows = conn.execute("SELECT locktype, count(*) FROM pg_locks WHERE NOT granted GROUP BY 1").fetchall()
    queries = conn.execute(
        "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 70) FROM pg_stat_activity "
        "WHERE wait_event_type = 'Lock'").fetchall()
    return {str(r[0]): int(r[1]) for r in rows}, [str(q[0]) for q in queries]


def deadlocks(conn: Any, database: str) -> int:
    """Deadlocks PostgreSQL detected (and broke) in ``database`` since its statistics began."""
    row = conn.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = %s", (database,)).fetchone()
    return int(row[0]) if row else 0


def prepare_database(url: str, variant: str) -> None:
    """Migrate the database at ``url`` as this memlane does, then make ``variant`` of it."""
    import psycopg

    from memlane.store.postgres import PostgresStore

    PostgresStore(url).close()
    with psycopg.connect(url, autocommit=True) as conn:
        make_variant(conn, variant)
