"""The migration that makes session ids per tenant (memlane.scoping), for both stores.

Before it, ids were one namespace for every tenant. Each session of a tenant other than
"default" moves to its key, ``<tenant>\\x1f<id>``, with every row that names it (messages,
turns, derived data, notes and their sources, facets, promotion watermark, archive entry,
audit log, change events; PostgreSQL's vectors too): a copy of the session row under the new key, the
children pointed at it, then the old row removed, all in the migration's transaction.
The copy and removal would write session.created / session.forgotten events; they are
not changes anyone made, so they are dropped again. Default-tenant ids stay as they are.
"""

from __future__ import annotations

__all__ = ["scope_sessions_sql"]

_SESSION_COLUMNS = ("tenant_id, user_id, agent_id, title, system_prompt, metadata, status, "
                    "created_at, updated_at, last_active_at, message_count")
_CHILDREN = ("messages", "tool_call_ids", "turns", "derived", "notes", "note_sources", "message_facets",
             "promotion_progress", "session_archive", "audit_log", "change_events")


def scope_sessions_sql(*, separator: str, position: str, temp: str) -> str:
    """The migration's SQL. ``separator``: the dialect's expression for the unit separator
    (``char(31)`` / ``chr(31)``); ``position``: its substring-position function
    (``instr`` / ``strpos``); ``temp``: how to create a transaction's scratch table."""
    updates = "\n".join(
        f"UPDATE {table} SET session_id = (SELECT new_id FROM scoped_renames r WHERE r.old_id = {table}.session_id)"
        f" WHERE session_id IN (SELECT old_id FROM scoped_renames);"
        for table in _CHILDREN
    )
    return f"""
        {temp} scoped_mark AS SELECT COALESCE(MAX(id), 0) AS id FROM change_events;
        {temp} scoped_renames AS
            SELECT id AS old_id, tenant_id || {separator} || id AS new_id FROM sessions
            WHERE tenant_id <> 'default' AND {position}(id, {separator}) = 0;
        INSERT INTO sessions (id, {_SESSION_COLUMNS})
            SELECT r.new_id, {", ".join("s." + c.strip() for c in _SESSION_COLUMNS.split(","))}
            FROM sessions s JOIN scoped_renames r ON r.old_id = s.id;
        {updates}
        DELETE FROM sessions WHERE id IN (SELECT old_id FROM scoped_renames);
        DELETE FROM change_events WHERE id > (SELECT id FROM scoped_mark);
        DROP TABLE scoped_renames;
        DROP TABLE scoped_mark;
        """
