"""Context packets kept in the shared hot cache (Redis/Valkey at ``redis_url``) for every instance.

A packet reads its session (window, pins, system prompt), the session's summaries and
state, the user's and tenant's notes, and recall over the keyword and vector indexes of
the user's other sessions. Its key names all of that by two counters the store moves in
the same transaction as each write: the session's ``version`` and the tenant's data
version (:mod:`memlane.store.data_versions`: triggers on every table a packet reads, so
background writers — summarizer, keyword backlog, embedder, note promoter — move it
too). With every argument of the call, the settings and the UTC day (a query's "yesterday"
is resolved when the packet is built), a key can only ever name one packet: a change on any
instance moves the key everywhere at once, without waiting for an event.

:class:`PacketSlot` reads the versions *before* building and again after: a packet built
while either moved (another writer, or the build's own summary catch-up) is not kept, so
what is kept was read entirely at the versions its key names. Entries are tagged with the
tenant (and all together), so an erase drops every packet that may quote what it erased:
forgotten data does not wait for the TTL in Valkey either.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any

from memlane.context.budget import Allocation, BudgetReport
from memlane.context.packet import ContextPacket, RecalledMessage
from memlane.context.strategies import ArchivedBlock, TopicSummary
from memlane.models import Message

if TYPE_CHECKING:
    from memlane.bus.shared_cache import HotCache
    from memlane.config import Settings
    from memlane.models import Session
    from memlane.store.events import TenantVersions

__all__ = ["PACKET_TTL_SECONDS", "PacketSlot", "decode_packet", "encode_packet", "packets_tag"]

#: The key moves with every change, so the TTL only bounds what Valkey keeps.
PACKET_TTL_SECONDS = 600.0
#: Bump when the stored shape or the key changes: old entries are then never read.
_FORMAT = 1


def packets_tag(tenant_id: str | None) -> str:
    """The tag of every packet of a tenant (None: of every tenant); an erase drops them."""
    return "packets" if tenant_id is None else f"packets:{tenant_id}"


@cache
def _code_version() -> str:
    """The installed memlane's version: instances of two versions never share packets."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memlane")
    except PackageNotFoundError:  # run from a source tree
        return "source"


def _settings_digest(settings: Settings) -> str:
    # repr names every field and its value (asdict's deep copy cost ~1.5 ms per packet)
    return hashlib.sha256(repr(settings).encode()).hexdigest()[:16]


@dataclass(slots=True)
class PacketSlot:
    """Where one ``Memory.context`` call's packet lives in the hot cache, and the versions
    it was looked up at (read before the build; :meth:`keep` checks them after)."""

    cache: HotCache
    versions: TenantVersions
    session: Session
    tenant_version: int
    key: str

    @classmethod
    def find(
        cls, cache: HotCache, versions: TenantVersions, session: Session, settings: Settings, *,
        query: str | None, max_tokens: int | None, strategy: str | None, model: str | None,
        priorities: Sequence[str] | str | None,
    ) -> PacketSlot:
        tenant_version = versions.tenant_version(session.tenant_id)
        state = [
            _FORMAT, _code_version(), session.tenant_id, session.created_at.isoformat(), session.version,
            tenant_version, query, max_tokens, strategy, model,
            priorities if priorities is None or isinstance(priorities, str) else list(priorities),
            _settings_digest(settings), datetime.now(UTC).date().isoformat(),
        ]
        digest = hashlib.sha256(json.dumps(state, default=str).encode()).hexdigest()[:32]
        return cls(cache, versions, session, tenant_version, f"packet:{session.id}:{digest}")

    def get(self) -> ContextPacket | None:
        raw = self.cache.get(self.key)
        return None if raw is None else decode_packet(raw)

    def keep(self, packet: ContextPacket, session_now: Session | None) -> bool:
        """Store ``packet`` when nothing it may have read moved while it was built."""
        if session_now is None or session_now.version != self.session.version:
            return False
        if self.versions.tenant_version(self.session.tenant_id) != self.tenant_version:
            return False
        self.cache.set(self.key, encode_packet(packet), ttl_seconds=PACKET_TTL_SECONDS,
                       tags=[packets_tag(self.session.tenant_id), packets_tag(None)])
        # An erase that committed after the check above has dropped the tags already, maybe
        # before this SET: take back the entry (every write of the tenant moves its version).
        if self.versions.tenant_version(self.session.tenant_id) != self.tenant_version:
            self.cache.delete(self.key)
            return False
        return True


# ------------------------------------------------------------------ bytes


def _messages(groups: list[list[Message]]) -> list[list[dict[str, Any]]]:
    return [[m.to_dict() for m in g] for g in groups]


def encode_packet(packet: ContextPacket) -> bytes:
    """The packet as it was built (before rendering): what :func:`decode_packet` needs to
    render it again for any model, budget or priorities."""
    p = packet
    body: dict[str, Any] = {
        "conversation_id": p.conversation_id, "session_status": p.session_status, "strategy": p.strategy,
        "max_tokens": p.max_tokens, "token_model": p.token_model, "query": p.query,
        "system_prompt": p.system_prompt, "rolling_session_summary": p.rolling_session_summary,
        "summary_covered_turns": p.summary_covered_turns,
        "topic_summaries": [t.to_dict() for t in p.topic_summaries],
        "archived": [a.to_dict() for a in p.archived],
        "active_topics": p.active_topics, "active_job_refs": p.active_job_refs,
        "pending_clarifications": p.pending_clarifications, "open_loops": p.open_loops,
        "resolved_entities_map": p.resolved_entities_map, "last_intent": p.last_intent,
        "last_response_type": p.last_response_type, "turn_count": p.turn_count,
        "recalled": [r.to_dict() for r in p.recalled], "notes": p.notes, "note_ids": p.note_ids,
        "context_compiled_at": p.context_compiled_at.isoformat(), "priorities": list(p.priorities),
        "meta": p.meta, "stored_encoding": p.stored_encoding,
        "turns": _messages(p._turns), "pinned": _messages(p._pinned), "gap_turns": _messages(p._gap_turns),
        "use_summary": p._use_summary, "summary_last_id": p._summary_last_id, "sections": sorted(p._sections),
        "briefs": [[k[0], k[1], v] for k, v in p._briefs.items()],
    }
    alloc = p._default
    if alloc is not None:  # the default rendering, so a hit need not render again
        report = alloc.report
        body["rendered"] = {
            "messages": [m.to_dict() for m in alloc.messages], "kept_ids": sorted(alloc.kept_ids),
            "placed": [[section, [m.to_dict() for m in group]] for section, group in alloc.placed],
            "report": [report.max_tokens, report.used, report.encoding, list(report.priorities),
                       report.sections, report.included, report.dropped, report.truncated],
            "recent_turns": [m.to_dict() for m in p.recent_turns],
            "recent_turn_summaries": p.recent_turn_summaries,
        }
    return json.dumps(body, ensure_ascii=False, default=str).encode()


def decode_packet(raw: bytes) -> ContextPacket:
    from memlane.wire import message_from_dict  # the API's own parser of message dicts

    b = json.loads(raw)

    def groups(name: str) -> list[list[Message]]:
        return [[message_from_dict(m) for m in g] for g in b[name]]

    pinned = groups("pinned")
    packet = ContextPacket(
        conversation_id=b["conversation_id"], session_status=b["session_status"], strategy=b["strategy"],
        max_tokens=int(b["max_tokens"]), token_model=b["token_model"], query=b["query"],
        system_prompt=b["system_prompt"], rolling_session_summary=b["rolling_session_summary"],
        summary_covered_turns=int(b["summary_covered_turns"]),
        topic_summaries=[TopicSummary(**t) for t in b["topic_summaries"]],
        archived=[ArchivedBlock(**a) for a in b["archived"]],
        pinned_messages=[m for g in pinned for m in g],
        active_topics=list(b["active_topics"]), active_job_refs=list(b["active_job_refs"]),
        pending_clarifications=list(b["pending_clarifications"]), open_loops=list(b["open_loops"]),
        resolved_entities_map=dict(b["resolved_entities_map"]), last_intent=b["last_intent"],
        last_response_type=b["last_response_type"], turn_count=int(b["turn_count"]),
        recalled=[RecalledMessage(message_from_dict(r["message"]), float(r["score"]), r["session_id"],
                                  r["session_title"], bool(r["same_session"])) for r in b["recalled"]],
        notes=list(b["notes"]), note_ids=[int(i) for i in b["note_ids"]],
        context_compiled_at=datetime.fromisoformat(b["context_compiled_at"]),
        priorities=tuple(b["priorities"]), meta=dict(b["meta"]), stored_encoding=b["stored_encoding"],
        _turns=groups("turns"), _pinned=pinned, _gap_turns=groups("gap_turns"),
        _use_summary=bool(b["use_summary"]), _summary_last_id=int(b["summary_last_id"]),
        _sections=frozenset(b["sections"]), _briefs={(k, int(i)): v for k, i, v in b["briefs"]},
    )
    rendered = b.get("rendered")
    if rendered is None:
        packet.render()  # as build_packet leaves it: recent turns, briefs and budget filled in
        return packet
    r = rendered["report"]
    report = BudgetReport(max_tokens=int(r[0]), used=int(r[1]), encoding=r[2], priorities=tuple(r[3]),
                          sections=dict(r[4]), included=dict(r[5]), dropped=dict(r[6]), truncated=list(r[7]))
    packet._default = Allocation(
        messages=[message_from_dict(m) for m in rendered["messages"]], report=report,
        kept_ids={int(i) for i in rendered["kept_ids"]},
        placed=[(section, [message_from_dict(m) for m in group]) for section, group in rendered["placed"]],
    )
    packet.budget = report
    packet.recent_turns = [message_from_dict(m) for m in rendered["recent_turns"]]
    packet.recent_turn_summaries = list(rendered["recent_turn_summaries"])
    return packet
