"""WHERE clauses for session and message filters, shared by the SQLite and PostgreSQL stores.

One builder per filter, so a filter means the same thing on every backend and every
search path (keyword, vector, listing). A :class:`Dialect` carries only what really
differs between the two SQL dialects: the placeholder, how a timestamp is bound, how
"column in this list" and "metadata key equals value" are written, how a boolean
column is tested for false, and how stored JSON and timestamps are read back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memlane.models import Message, MessageFilter, SessionFilter
from memlane.store.rows import MESSAGE_COLS, LoadJson, ToTime

Clause = tuple[str, list[Any]]


@dataclass(frozen=True)
class Dialect:
    mark: str
    """The driver's placeholder: ``?`` (sqlite3) or ``%s`` (psycopg)."""
    time: Callable[[datetime], Any]
    """A datetime as the value bound for a timestamp column."""
    in_list: Callable[[str, Sequence[Any]], Clause]
    """``column`` is one of ``values`` (a non-empty list)."""
    metadata_equals: Callable[[str, Any], Clause]
    """The session metadata at dotted ``key`` equals ``value``."""
    is_false: str
    """A format string testing a boolean column (``{}``) for false."""
    message_tenant: str
    """Where a message's tenant is read: not every schema keeps it on messages."""
    load_json: LoadJson
    """A JSON column's stored value, decoded (see rows.py)."""
    from_time: ToTime
    """A timestamp column's stored value as an aware UTC datetime."""
    json_int: str
    """A format string reading the integer field ``{field}`` of JSON column ``{column}``
    (NULL when the value is not JSON)."""
    day_number: str
    """A format string for the UTC day (days since 1970-01-01, an integer) of time column ``{}``."""


def equal_fields(d: Dialect, flt: object, fields: Sequence[str], prefix: str = "") -> tuple[list[str], list[Any]]:
    """``prefix.field = value`` for each of ``fields`` the filter sets (None means any)."""
    clauses: list[str] = []
    params: list[Any] = []
    for name in fields:
        value = getattr(flt, name)
        if value is not None:
            clauses.append(f"{prefix}{name} = {d.mark}")
            params.append(value)
    return clauses, params


def session_where(d: Dialect, flt: SessionFilter) -> Clause:
    """A ``WHERE ...`` clause (or "") on sessions, and its parameters."""
    clauses, params = equal_fields(d, flt, ("user_id", "agent_id", "tenant_id", "status"))
    for key, value in flt.metadata.items():
        clause, values = d.metadata_equals(key, value)
        clauses.append(clause)
        params.extend(values)
    if flt.active_since is not None:
        clauses.append(f"last_active_at >= {d.mark}")
        params.append(d.time(flt.active_since))
    if flt.inactive_before is not None:
        clauses.append(f"last_active_at < {d.mark}")
        params.append(d.time(flt.inactive_before))
    return ("WHERE " + " AND ".join(clauses) if clauses else ""), params


def owner_sessions(d: Dialect, flt: MessageFilter) -> Clause:
    """A ``SELECT`` of the ids of the sessions the filter's owners allow (its session, tenant,
    user, agent; unowned), as :func:`message_where` reads them, and its parameters; ("", [])
    when it names none (a keyword search then ranks among every session's rows)."""
    clauses, params = equal_fields(d, flt, ("tenant_id", "user_id", "agent_id"), "o.")
    if flt.session_id is not None:
        clauses.append(f"o.id = {d.mark}")
        params.append(flt.session_id)
    if flt.unowned:
        clauses.append("o.user_id IS NULL")
    if not clauses:
        return "", []
    return "SELECT o.id FROM sessions o WHERE " + " AND ".join(clauses), params


def message_where(d: Dialect, flt: MessageFilter) -> Clause:
    """Extra ``AND ...`` clauses (or "") on messages m joined with sessions s, and their parameters."""
    clauses: list[str] = []
    params: list[Any] = []
    if flt.session_id is not None:
        clauses.append(f"m.session_id = {d.mark}")
        params.append(flt.session_id)
    if flt.tenant_id is not None:
        clauses.append(f"{d.message_tenant} = {d.mark}")
        params.append(flt.tenant_id)
    owners, owner_params = equal_fields(d, flt, ("user_id", "agent_id"), "s.")
    clauses += owners
    params += owner_params
    if flt.unowned:
        clauses.append("s.user_id IS NULL")
    if flt.roles:
        clause, values = d.in_list("m.role", list(flt.roles))
        clauses.append(clause)
        params.extend(values)
    if flt.authors:
        by_id, id_values = d.in_list("m.author_id", list(flt.authors))
        by_name, name_values = d.in_list("m.author_name", list(flt.authors))
        clauses.append(f"({by_id} OR {by_name})")
        params.extend([*id_values, *name_values])
    if flt.since is not None:
        clauses.append(f"m.created_at >= {d.mark}")
        params.append(d.time(flt.since))
    if flt.until is not None:
        clauses.append(f"m.created_at <= {d.mark}")
        params.append(d.time(flt.until))
    if not flt.include_hidden:
        clauses.append(d.is_false.format("m.hidden"))
    return ("AND " + " AND ".join(clauses) if clauses else ""), params


def recent_messages_query(
    d: Dialect, session_id: str, limit: int, *, before_id: int | None, include_hidden: bool
) -> Clause:
    """The newest ``limit`` messages of a session (newest first), optionally before an id."""
    query = f"SELECT {MESSAGE_COLS} FROM messages WHERE session_id = {d.mark}"
    params: list[Any] = [session_id]
    if before_id is not None:
        query += f" AND id < {d.mark}"
        params.append(before_id)
    if not include_hidden:
        query += " AND " + d.is_false.format("hidden")
    query += f" ORDER BY id DESC LIMIT {d.mark}"
    params.append(int(limit))
    return query, params


def iter_messages(
    d: Dialect,
    read: Callable[[str, list[Any]], list[Any]],
    decode: Callable[[Sequence[Any]], Message],
    session_id: str | None,
    *,
    after_id: int,
    batch: int,
    include_hidden: bool,
) -> Iterator[Message]:
    """Messages in id order, read ``batch`` at a time by keyset paging (never OFFSET,
    so a long export stays fast and sees messages appended while it runs)."""
    last = after_id
    while True:
        query = f"SELECT {MESSAGE_COLS} FROM messages WHERE id > {d.mark}"
        params: list[Any] = [last]
        if session_id is not None:
            query += f" AND session_id = {d.mark}"
            params.append(session_id)
        if not include_hidden:
            query += " AND " + d.is_false.format("hidden")
        query += f" ORDER BY id LIMIT {d.mark}"
        params.append(batch)
        rows = read(query, params)
        if not rows:
            return
        for row in rows:
            yield decode(row)
        last = rows[-1][0]
