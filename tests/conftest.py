"""Shared fixtures. Real SQLite files under tmp_path; no mocks of memlane's parts."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from memlane import Memory
from tests.pg_fixture import fresh_pg_store, pg_server, pg_url  # noqa: F401  (real PostgreSQL fixtures)

REPO = Path(__file__).resolve().parents[1]
LOCOMO_DIR = Path(os.environ.get("MEMLANE_LOCOMO_DIR", REPO.parent / "shared" / "data" / "locomo"))


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never read or write the developer's ~/.memlane during tests."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for key in list(os.environ):
        if key.startswith("MEMLANE_") and key != "MEMLANE_LOCOMO_DIR":
            monkeypatch.delenv(key, raising=False)
    monkeypatch.delenv("MATRIX_USER_ID", raising=False)


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    m = Memory(tmp_path / "memory.db", embedder="hashing")
    yield m
    m.close()


@pytest.fixture
def locomo_files() -> list[Path]:
    files = sorted(LOCOMO_DIR.glob("*.json"))
    if not files:
        pytest.skip(f"LoCoMo data not found in {LOCOMO_DIR} (set MEMLANE_LOCOMO_DIR)")
    return files


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    """A Memory on each store: a SQLite file, then the embedded PostgreSQL."""
    target = str(tmp_path / "memory.db") if request.param == "sqlite" else request.getfixturevalue("pg_url")
    m = Memory(target, embedder="hashing", checkpoint_dir=str(tmp_path / "cp"))
    yield m
    m.close()
