"""One person across their sessions, for the inspector's People view: the session state
(topics, open loops, pending clarifications) and the facets (names, links, dates, tool
calls) of every session of theirs the caller may see, summed, each item saying which
sessions it came from.

Read from what each session already keeps (its state and facets); nothing here writes.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from memlane.notes.models import Facet
from memlane.scoping import public_session_id
from memlane.server.tenancy import MissingFeatureError, TenantView

#: The person's most recently active sessions that are summed (a person with more is
#: summed over these, and ``truncated`` says so).
MAX_SESSIONS = 200
#: Facets read per session.
FACETS_PER_SESSION = 1000


def _listed(items: dict[str, list[str]], key: str) -> list[dict[str, Any]]:
    """``{text: [session ids]}`` as rows, the ones in most sessions first."""
    return [{key: text, "session_ids": sids}
            for text, sids in sorted(items.items(), key=lambda kv: (-len(kv[1]), kv[0].lower()))]


def _facets(found: list[Facet]) -> list[dict[str, Any]]:
    """Each (kind, value) once: how often, in which sessions, and its first message."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for f in found:
        row = rows.setdefault((f.kind, f.value), {
            "kind": f.kind, "value": f.value, "count": 0, "session_ids": [],
            "first": {"session_id": f.session_id, "message_id": f.message_id},
        })
        row["count"] += 1
        if f.message_id < row["first"]["message_id"]:  # message ids grow with time
            row["first"] = {"session_id": f.session_id, "message_id": f.message_id}
        if f.session_id not in row["session_ids"]:
            row["session_ids"].append(f.session_id)
    return sorted(rows.values(), key=lambda r: (r["kind"], -r["count"], r["value"].lower()))


def person_summary(v: TenantView, user_id: str) -> dict[str, Any]:
    """What the caller's sessions of ``user_id`` hold together (see the module docstring)."""
    sessions = v.list_sessions(limit=MAX_SESSIONS + 1, user_id=user_id)
    truncated = len(sessions) > MAX_SESSIONS
    sessions = sessions[:MAX_SESSIONS]
    topics: dict[str, list[str]] = defaultdict(list)
    loops: dict[str, list[str]] = defaultdict(list)
    clarifications: dict[str, list[str]] = defaultdict(list)
    facets: list[Facet] = []
    has_state = has_facets = True
    for session in sessions:
        sid = session.id
        if has_state:
            try:
                st = v.state(public_session_id(sid) if v.caller.tenant else sid)
            except MissingFeatureError:
                has_state = False
            else:
                for bucket, values in ((topics, st.active_topics), (loops, st.open_loops),
                                       (clarifications, st.pending_clarifications)):
                    for text in values:
                        bucket[text].append(sid)
        if has_facets and v.mem.parts.notes is not None:
            facets.extend(v.mem.facets(sid, limit=FACETS_PER_SESSION))
        else:
            has_facets = False
    return {
        "user_id": user_id,
        "sessions": [{"session_id": s.id, "title": s.title, "status": s.status,
                      "message_count": s.message_count, "last_active_at": s.last_active_at} for s in sessions],
        "truncated": truncated,
        "state": None if not has_state else {
            "topics": _listed(topics, "topic"), "open_loops": _listed(loops, "text"),
            "pending_clarifications": _listed(clarifications, "text"),
        },
        "facets": _facets(facets) if has_facets else None,
    }
