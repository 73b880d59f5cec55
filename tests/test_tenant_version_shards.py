"""The per-tenant data version on PostgreSQL (store/data_versions.py, migration 24): writers of
one tenant neither wait for each other's version row nor deadlock on it against the
change-event lock, and the version still moves with every committed write, never back."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import psycopg
import pytest

from memlane.models import Session

pytestmark = pytest.mark.postgres

if TYPE_CHECKING:
    from memlane.store.postgres import PostgresStore


@pytest.fixture
def store(fresh_pg_store: PostgresStore) -> Iterator[PostgresStore]:
    for sid in ("s1", "s2"):
        fresh_pg_store.create_session(Session(id=sid, tenant_id="acme"))
    yield fresh_pg_store


def _put_derived(conn: psycopg.Connection[Any], session_id: str) -> None:
    conn.execute(
        "INSERT INTO derived (tenant_id, session_id, kind, value, updated_at) "
        "SELECT tenant_id, id, 'summary', '{}'::jsonb, now() FROM sessions WHERE id = %s", (session_id,))


def test_two_open_writes_of_one_tenant_do_not_wait_for_each_other(store: PostgresStore, pg_url: str) -> None:
    before = store.tenant_version("acme")
    with psycopg.connect(pg_url) as a, psycopg.connect(pg_url) as b:
        _put_derived(a, "s1")  # A's transaction stays open, holding what it bumped
        b.execute("SET lock_timeout = '5s'")  # with one row per tenant, B would wait for A's COMMIT
        _put_derived(b, "s2")
        b.commit()
        assert store.tenant_version("acme") == before + 1  # B's write counts, A's not yet
        a.commit()
    assert store.tenant_version("acme") == before + 2


def _waiting_or_done(admin: psycopg.Connection[Any], pid: int, thread: threading.Thread) -> None:
    """Wait (explicitly, not by sleeping a guess) until the thread's statement finished or blocks."""
    for _ in range(600):
        if not thread.is_alive():
            return
        row = admin.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
        if row is not None and row[0] == "Lock":
            return
        time.sleep(0.05)
    raise AssertionError("the statement neither finished nor waited within 30 s")


def test_an_append_and_an_event_writer_of_one_tenant_do_not_deadlock(store: PostgresStore, pg_url: str) -> None:
    """A bumps at an update that writes no event, then writes an event; B writes an event (taking
    the event lock) and then bumps. With one version row per tenant these two orders deadlock."""
    before = store.tenant_version("acme")
    errors: list[BaseException] = []

    def run(conn: psycopg.Connection[Any], statement: str) -> None:
        try:
            conn.execute(statement)
        except psycopg.Error as exc:
            errors.append(exc)
            conn.rollback()

    with (psycopg.connect(pg_url) as a, psycopg.connect(pg_url) as b,
          psycopg.connect(pg_url, autocommit=True) as admin):
        a.execute("UPDATE sessions SET updated_at = now() WHERE id = 's1'")  # bumps, no event
        b_step = threading.Thread(target=run, args=(b, "UPDATE sessions SET title = 'b' WHERE id = 's2'"))
        b_step.start()
        _waiting_or_done(admin, b.info.backend_pid, b_step)
        a_step = threading.Thread(target=run, args=(a, "UPDATE sessions SET title = 'a' WHERE id = 's1'"))
        a_step.start()  # needs the event lock B holds until its COMMIT
        _waiting_or_done(admin, a.info.backend_pid, a_step)
        b_step.join(timeout=30)
        b.commit()
        a_step.join(timeout=30)
        a.commit()
    assert errors == []
    assert store.tenant_version("acme") == before + 3
    titles = store.read("SELECT id, title FROM sessions WHERE id IN ('s1', 's2') ORDER BY id")
    assert [tuple(r) for r in titles] == [("s1", "a"), ("s2", "b")]


def test_concurrent_writers_never_lose_a_bump_and_the_version_never_goes_back(store: PostgresStore) -> None:
    threads, writes = 6, 40
    for n in range(threads):
        store.create_session(Session(id=f"w{n}", tenant_id="acme"))
    before = store.tenant_version("acme")
    seen: list[int] = []
    done = threading.Event()

    def writer(n: int) -> None:
        for i in range(writes):
            store.put_derived(f"w{n}", f"k{i}", {"i": i})  # one new derived row: one bump

    def reader() -> None:
        while not done.is_set():
            seen.append(store.tenant_version("acme"))

    watching = threading.Thread(target=reader)
    watching.start()
    workers = [threading.Thread(target=writer, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    done.set()
    watching.join()
    assert store.tenant_version("acme") == before + threads * writes
    assert seen == sorted(seen)  # what one reader sees never goes back
    # rows are added only when every existing one is held: about the writers at once, not per write
    rows = store.read("SELECT count(*) FROM tenant_version_shards WHERE tenant_id = 'acme'")[0][0]
    assert 1 <= rows <= threads + 2


def test_the_one_row_versions_of_migration_21_carry_over(pg_url: str) -> None:
    """A store migrated before the shards keeps its versions: none goes back, the next write moves it."""
    from memlane.store.pg_contention import make_variant
    from memlane.store.postgres import PostgresStore
    from memlane.store.postgres_schema import DATA_VERSION_SHARDS

    def as_before_shards(conn: Any) -> None:
        make_variant(conn, "one_row")  # migration 21's tables, function and triggers
        conn.execute("INSERT INTO tenant_versions VALUES ('old', 41), ('other', 7)")
        conn.execute("DELETE FROM schema_migrations WHERE version = %s", (DATA_VERSION_SHARDS,))

    store = PostgresStore(pg_url)
    store.write(as_before_shards)
    store.close()
    store = PostgresStore(pg_url)  # migration 24 runs now
    try:
        assert store.tenant_version("old") == 41 and store.tenant_version("other") == 7
        store.create_session(Session(id="after", tenant_id="old"))
        assert store.tenant_version("old") == 42 and store.tenant_version("other") == 7
    finally:
        store.close()


def test_bench_tenant_writes_runs_the_three_shapes_side_by_side() -> None:
    from memlane.bench_tenant_writes import VARIANTS, format_table, run_tenant_writes_bench

    result = run_tenant_writes_bench(processes=1, appenders=1, deriveds=1, seconds=1.0, rounds=1)
    assert set(result["runs"]) == set(VARIANTS)
    for variant, run in result["runs"].items():
        assert run["appends_per_s"] > 0 and run["derived_per_s"] > 0, variant
    shards = result["runs"]["shards"]
    assert shards["deadlocks"] == 0 and shards["failed_writes"] == 0
    table = format_table(result)
    assert all(v in table for v in VARIANTS) and "load average" in table
