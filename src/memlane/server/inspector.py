"""What the inspector's pictures show: a session's timeline, memory-wide figures, and
the language facets (which languages the messages are in, per session and per message).

Both are read from what memlane already keeps: per-day counts from the log (one grouped
query, store/activity.py), the summary record (which messages its blocks cover), the
session's checkpoint file, and the vector index's backlog. Nothing here writes.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from datetime import date
from typing import Any

from memlane.errors import InvalidInputError
from memlane.models import MessageFilter, Session, SessionFilter
from memlane.server.tenancy import TenantView
from memlane.store.activity import Activity

#: The backlog is counted up to this many messages (then shown as "at least").
BACKLOG_CAP = 10_000
#: Notes counted for a tenant (the whole-store counts come from stats for the admin).
NOTES_CAP = 1000


def _activity(v: TenantView) -> Activity:
    store = v.mem.store
    if not isinstance(store, Activity):
        raise InvalidInputError("this store keeps no per-day counts")
    return store


def _days(rows: list[tuple[date, str, int]]) -> list[dict[str, Any]]:
    """Per-day counts by role, oldest first: user, assistant and the rest (system, tool)."""
    days: dict[date, dict[str, int]] = defaultdict(lambda: {"user": 0, "assistant": 0, "other": 0})
    for day, role, n in rows:
        days[day][role if role in ("user", "assistant") else "other"] += n
    return [{"day": d.isoformat(), "messages": sum(c.values()), **c} for d, c in sorted(days.items())]


def session_timeline(v: TenantView, session: Session) -> dict[str, Any]:
    """Messages per day, which messages each summary block covers, and the checkpoint."""
    mem = v.mem
    rows = _activity(v).messages_per_day(MessageFilter(session_id=session.id, include_hidden=True))
    ids = mem.store.message_ids(session.id, include_hidden=True)  # oldest first, ids only
    blocks: list[dict[str, Any]] = []
    summarized = 0
    summaries = mem.parts.summaries
    record = summaries.current(session.id, catch_up=False) if summaries is not None else None
    if record is not None:
        for b in record.blocks:
            # positions in the log (0-based), so a picture can place the block on the transcript
            first, last = bisect_left(ids, b.first_message_id), bisect_right(ids, b.last_message_id) - 1
            blocks.append({
                "index": b.index, "first_message_id": b.first_message_id, "last_message_id": b.last_message_id,
                "first_position": first, "last_position": last, "first_turn": b.first_turn, "turns": b.turns,
                "topics": list(b.topics), "tokens": b.tokens, "source_tokens": b.source_tokens,
                "started_at": b.started_at or None, "ended_at": b.ended_at or None,
            })
        summarized = bisect_right(ids, record.last_message_id) if record.blocks else 0
    checkpoint: dict[str, Any] = {"state": "disabled"}
    manager = mem.parts.checkpoints
    if manager is not None:
        state, snap = manager.check(session.id)
        checkpoint = {"state": state}
        if snap is not None:
            checkpoint.update({
                "written_at": snap.written_at, "reason": snap.reason, "last_message_id": snap.last_message_id,
                "position": bisect_right(ids, snap.last_message_id) - 1, "turn_count": snap.turn_count,
            })
    return {
        "session_id": session.id, "messages": len(ids), "days": _days(rows),
        "summary": {
            "blocks": blocks, "summarized_messages": summarized,
            "covered_turns": record.covered_turns if record is not None else 0,
            "tokens_saved": record.tokens_saved if record is not None else 0,
        },
        "checkpoint": checkpoint,
    }


def overview(v: TenantView) -> dict[str, Any]:
    """The caller's memory in figures and per-day series. Figures that span every tenant
    (database size, the embedding backlog) are the admin's only (no key, loopback)."""
    tenant = v.caller.tenant
    store = _activity(v)
    messages = store.messages_per_day(MessageFilter(tenant_id=tenant, include_hidden=True))
    sessions = store.sessions_per_day(SessionFilter(tenant_id=tenant))
    figures: dict[str, Any] = {
        "sessions": sum(n for _, n in sessions), "messages": sum(n for _, _, n in messages),
        "notes": None, "notes_superseded": None, "index_backlog": None, "database_bytes": None,
    }
    if tenant is None:
        stats = v.stats()
        figures.update(notes=stats.get("notes"), notes_superseded=stats.get("notes_superseded"),
                       database_bytes=stats.get("bytes"))
        indexer = v.mem.parts.indexer
        if indexer is not None:
            figures["index_backlog"] = len(indexer.index.missing_ids(BACKLOG_CAP))
    elif v.mem.parts.notes is not None:
        current = v.notes(None, session_id=None, limit=NOTES_CAP)
        every = v.notes(None, session_id=None, include_history=True, limit=NOTES_CAP)
        figures.update(notes=len(current), notes_superseded=len(every) - len(current))
    return {
        "tenant_id": tenant, "figures": figures, "backlog_cap": BACKLOG_CAP,
        "messages_per_day": _days(messages),
        "sessions_per_day": [{"day": d.isoformat(), "sessions": n} for d, n in sessions],
    }


def _lang_counts(rows: list[tuple[str, str | None, int]]) -> list[dict[str, Any]]:
    """Per language (None: never judged): messages and sessions, most messages first."""
    messages: dict[str | None, int] = defaultdict(int)
    sessions: dict[str | None, set[str]] = defaultdict(set)
    for sid, lang, n in rows:
        messages[lang] += n
        sessions[lang].add(sid)
    return [{"lang": lang, "messages": n, "sessions": len(sessions[lang])}
            for lang, n in sorted(messages.items(), key=lambda kv: (-kv[1], kv[0] or ""))]


def languages(v: TenantView, *, user_id: str | None = None) -> dict[str, Any]:
    """The languages of the caller's messages (optionally one person's): overall and per session."""
    rows = _activity(v).messages_per_language(
        MessageFilter(tenant_id=v.caller.tenant, user_id=user_id, include_hidden=True)
    )
    per_session: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for sid, lang, n in rows:
        per_session[sid].append({"lang": lang, "messages": n})
    return {
        "user_id": user_id, "languages": _lang_counts(rows),
        "sessions": [{"session_id": sid, "languages": sorted(langs, key=lambda x: -int(x["messages"]))}
                     for sid, langs in sorted(per_session.items())],
    }


def session_languages(v: TenantView, session: Session) -> dict[str, Any]:
    """One session's languages, and each message's (for the transcript's language facet)."""
    store = _activity(v)
    rows = store.messages_per_language(MessageFilter(session_id=session.id, include_hidden=True))
    return {
        "session_id": session.id,
        "languages": [{"lang": x["lang"], "messages": x["messages"]} for x in _lang_counts(rows)],
        "messages": [{"id": mid, "lang": lang} for mid, lang in store.message_languages(session.id)],
    }
