"""The public surface a newcomer learns, by task (docs/api.md), and the seed projects' names.

``Memory`` and ``MemoryClient`` (and their async twins) offer every name in
:data:`SURFACE` and :data:`ALIASES`; ``tests/test_surface.py`` checks both, and that every
public member of ``Memory`` is listed here or in :data:`IN_PROCESS`, so a new method is
placed in the surface on purpose.
"""

from __future__ import annotations

#: One obvious way per task. Names a newcomer needs, grouped as docs/api.md explains them.
SURFACE: dict[str, tuple[str, ...]] = {
    "sessions": (
        "create_session", "get_session", "ensure_session", "list_sessions", "update_session",
        "end_session", "delete_session", "clear_session", "archive_session", "unarchive_session",
        "active_session_for", "detect_topic_change", "auto_expire_sessions",
    ),
    "write": ("add", "add_messages", "store_interaction", "mark_important", "forget_messages"),
    "read": ("window", "load_session", "list_turns", "get_message"),
    # framework sessions (memlane.integrations): a session's items, exactly as the framework
    # stored them
    "items": ("items", "pop", "forget_at", "forget_history", "replace_history"),
    "search": ("search", "get_relevant_context"),
    "context": ("context", "get_state", "resolve_references", "hydrate", "shutdown", "cached_response",
                "cache_response"),
    "notes": ("notes", "add_note", "note_history", "facets", "handle_command", "anchor_id", "is_anchor",
              "forget_note", "correct_note"),
    "admin": (
        "flush", "stats", "maintain", "prune_old_sessions", "export_session", "import_sessions",
        "pending_writes", "from_url", "close", "audit_log",
    ),
}

#: The seed projects' names (docs/api-mapping.md), kept as thin documented aliases:
#: alias -> what it is in the surface above.
ALIASES: dict[str, str] = {
    "save_message": "add(session_id, message): one message dict or Message (seeds 000/001)",
    "get_recent_messages": "window(session_id, max_tokens).messages (seeds 000/001)",
    "search_history": "search(...) as plain dicts (seeds 000/001)",
    "get_conversation_context": "list_turns(session_id, limit) as plain dicts (seed 004)",
    "get_active_session": "get_session(active_session_for(user_id)) (seed 004)",
}

#: Members of Memory that only make sense in the process that owns the store (wiring,
#: framework-session plumbing for memlane.integrations, caches): not part of the surface.
IN_PROCESS: dict[str, str] = {
    "add_observer": "derived-work callbacks on durable appends",
    "add_closer": "callbacks when the Memory closes",
    "in_memory": "a throwaway Memory for tests",
    "sessions": "the SessionManager behind active_session_for & co.",
    "token_encoding_of": "the token-count cache of a session",
    "MAX_DEFERRED": "how much background work may wait before it starts",
    "background_work_started": "whether derived work (state, summaries, notes, vectors) runs",
    "start_background_work": "start derived work now (a server does at start)",
    "inactive_sessions": "sessions idle past a cutoff, every tenant (what prune_old_sessions deletes)",
    "audit": "the server writes audit entries itself, for every change made through it",
    "erase": "the one erase routine behind every deletion (delete_session, forget_messages, prune, ...)",
    "events": "change events from the database's outbox (over HTTP: GET /v1/events, SSE)",
    "sync_caches": "drop this process's cached copies of what any process forgot (reads do it first)",
    "subscribe": "a callback per change event, on a thread of this process (over HTTP: GET /v1/events)",
    "bus": "the event bus between instances (doorbells: NOTIFY, data_version, Redis)",
    "hot_cache": "the cache instances share through Redis/Valkey (redis_url), or None",
    "backlog": "derived work this store still owes, by kind (over HTTP: backlog_vectors in stats and /metrics)",
    "extensions": "deprecated string-keyed view of mem.parts (warns; use mem.parts)",
}


def surface_names() -> set[str]:
    """Every name Memory and MemoryClient both offer: the surface and the aliases."""
    return {name for names in SURFACE.values() for name in names} | set(ALIASES)
