"""Records: opaque bytes under (namespace, key), the same SQL on SQLite and PostgreSQL.

What integrations keep that is not conversation: LangGraph checkpoints and pending
writes, the values of a LangGraph ``BaseStore``. memlane never reads them; a key
orders them (byte order on both backends: the PostgreSQL column is ``COLLATE "C"``),
and a namespace is deleted whole (a thread, a store namespace).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

from memlane.errors import InvalidInputError
from memlane.store import filters

T = TypeVar("T")


def _check(namespace: str, key: str | None = None) -> None:
    if not isinstance(namespace, str) or not namespace:
        raise InvalidInputError("a record namespace must be a non-empty string")
    if key is not None and not isinstance(key, str):
        raise InvalidInputError("a record key must be a string")
    if "\x00" in namespace or (key is not None and "\x00" in key):
        # PostgreSQL text cannot hold NUL and SQLite's text functions stop at it.
        raise InvalidInputError("record namespaces and keys may not contain NUL characters; use another separator")


class SqlRecords:
    """Mixed into both stores; each provides ``_dialect``, ``read`` and ``write``."""

    _dialect: ClassVar[filters.Dialect]

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        raise NotImplementedError

    def _write_records(self, fn: Callable[[Any], T]) -> T:
        raise NotImplementedError  # each store's one-transaction write

    def _after_delete(self) -> None:
        """Called after records were deleted: the SQLite store folds in and truncates its
        WAL, which still holds their old page images (freed bytes are zeroed already)."""

    def put_records(self, namespace: str, items: Sequence[tuple[str, bytes]]) -> None:
        """Write (or replace) several records of one namespace in one transaction."""
        _check(namespace)
        for key, value in items:
            _check(namespace, key)
            if not isinstance(value, bytes | bytearray | memoryview):
                raise InvalidInputError(f"record {key!r}: value must be bytes, got {type(value).__name__}")
        m = self._dialect.mark
        now = time.time()
        rows = [(namespace, key, bytes(value), now) for key, value in items]

        def run(conn: Any) -> None:
            for row in rows:
                conn.execute(
                    f"INSERT INTO records (namespace, key, value, updated_at) VALUES ({m}, {m}, {m}, {m}) "
                    "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, "
                    "updated_at = excluded.updated_at",
                    row,
                )

        if rows:
            self._write_records(run)

    def get_record(self, namespace: str, key: str) -> bytes | None:
        _check(namespace, key)
        m = self._dialect.mark
        rows = self.read(f"SELECT value FROM records WHERE namespace = {m} AND key = {m}", (namespace, key))
        return bytes(rows[0][0]) if rows else None

    def list_records(
        self, namespace: str, *, prefix: str = "", descending: bool = False
    ) -> list[tuple[str, bytes]]:
        """The namespace's records whose key starts with ``prefix``, ordered by key."""
        _check(namespace, prefix)
        m = self._dialect.mark
        order = "DESC" if descending else "ASC"
        rows = self.read(
            f"SELECT key, value FROM records WHERE namespace = {m} AND substr(key, 1, {m}) = {m} "
            f"ORDER BY key {order}",
            (namespace, len(prefix), prefix),
        )
        return [(str(r[0]), bytes(r[1])) for r in rows]

    def record_namespaces(self, prefix: str = "") -> list[str]:
        """Every namespace that holds a record, starting with ``prefix``, sorted."""
        m = self._dialect.mark
        rows = self.read(
            f"SELECT DISTINCT namespace FROM records WHERE substr(namespace, 1, {m}) = {m} ORDER BY namespace",
            (len(prefix), prefix),
        )
        return [str(r[0]) for r in rows]

    def delete_records(self, namespace: str, keys: Sequence[str] | None = None, *, prefix: str = "") -> int:
        """Delete the given keys of a namespace, or every key starting with ``prefix``."""
        _check(namespace, prefix)
        m = self._dialect.mark

        def run(conn: Any) -> int:
            if keys is None:
                return int(
                    conn.execute(
                        f"DELETE FROM records WHERE namespace = {m} AND substr(key, 1, {m}) = {m}",
                        (namespace, len(prefix), prefix),
                    ).rowcount
                )
            return sum(
                int(conn.execute(f"DELETE FROM records WHERE namespace = {m} AND key = {m}", (namespace, k)).rowcount)
                for k in keys
            )

        deleted = self._write_records(run)
        if deleted:
            self._after_delete()
        return deleted
