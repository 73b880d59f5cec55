"""How the SQLite store encodes rows and filters: its dialect (``?`` placeholders, epoch
seconds for times, 0/1 booleans, JSON text) and row decoding.

Kept apart from ``sqlite.py`` so the other SQLite repositories (vectors, notes, keys)
share one definition of the filter semantics without importing the store class.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memlane.errors import CorruptRecordError
from memlane.models import Message, MessageFilter, from_epoch, to_epoch
from memlane.store import filters
from memlane.store.rows import decode_message

__all__ = ["DIALECT", "row_to_message"]


def _loads(text: str | None, table: str, row_id: object, column: str) -> Any:
    if text is None:
        return None
    if text == "{}":
        # Most rows carry no metadata: skipping the JSON parser for them is a third of
        # what decoding a window of messages costs.
        return {}
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        raise CorruptRecordError(table, row_id, f"column {column} is not valid JSON") from exc


def _dumps(value: object) -> str:
    if value == {}:
        return "{}"  # most rows carry no metadata: the write path skips the encoder
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def row_to_message(row: Sequence[Any]) -> Message:
    return decode_message(row, _loads, from_epoch)


def _in_list(column: str, values: Sequence[Any]) -> filters.Clause:
    return f"{column} IN ({','.join('?' * len(values))})", list(values)


def _metadata_equals(key: str, value: Any) -> filters.Clause:
    # json_extract's path: dots address nested objects
    return "json_extract(metadata, ?) = ?", [f"$.{key}", value]


# SQLite keeps times as epoch seconds and booleans as 0/1; messages have no tenant column
DIALECT = filters.Dialect(
    mark="?",
    time=to_epoch,
    in_list=_in_list,
    metadata_equals=_metadata_equals,
    is_false="{} = 0",
    message_tenant="s.tenant_id",
    load_json=_loads,
    from_time=from_epoch,
    json_int="CASE WHEN json_valid({column}) THEN CAST(json_extract({column}, '$.{field}') AS INTEGER) END",
    day_number="CAST(({}) / 86400 AS INTEGER)",  # epoch seconds; created_at is never negative
)


def _message_where(flt: MessageFilter) -> tuple[str, list[Any]]:
    """Extra AND-clauses on messages m joined with sessions s."""
    return filters.message_where(DIALECT, flt)
