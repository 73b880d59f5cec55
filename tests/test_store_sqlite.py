from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memlane.errors import StorageError
from memlane.store import InMemoryStore, SQLiteStore, open_store
from memlane.store.sqlite_schema import MIGRATIONS
from tests.store_conformance import StoreConformance


class TestSQLiteStore(StoreConformance):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[SQLiteStore]:
        s = SQLiteStore(tmp_path / "conf.db")
        yield s
        s.close()


class TestInMemoryStore(StoreConformance):
    @pytest.fixture
    def store(self) -> Iterator[InMemoryStore]:
        s = InMemoryStore()
        yield s
        s.close()


def test_wal_and_pragmas(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "x.db")
    assert s.read("PRAGMA journal_mode")[0][0] == "wal"
    assert s.read("PRAGMA foreign_keys")[0][0] == 1
    assert s.read("PRAGMA synchronous")[0][0] == 2  # FULL
    s.close()


def test_migrations_recorded_once(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    SQLiteStore(path).close()
    s = SQLiteStore(path)  # reopening applies nothing twice
    assert s.schema_versions() == sorted(MIGRATIONS)
    s.close()


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    s = SQLiteStore(path)
    s.write(lambda c: c.execute("INSERT INTO schema_migrations VALUES (999, 'future', 0)"))
    s.close()
    with pytest.raises(StorageError, match="newer"):
        SQLiteStore(path)


def test_open_store_urls(tmp_path: Path) -> None:
    assert isinstance(open_store("memory://"), InMemoryStore)
    s = open_store(f"sqlite:///{tmp_path}/u.db")
    assert isinstance(s, SQLiteStore) and s.path == f"{tmp_path}/u.db"
    with pytest.raises(ValueError, match="unsupported store URL"):
        open_store("redis://localhost")
