"""The ContextPacket: what an agent gets at each turn (PRD-014's ConversationContextPacket).

:func:`build_packet` (``mem.context(...)``) gathers the session's live state,
its summaries, the recent turns a strategy picked, recalled past messages and
long-term notes. :meth:`ContextPacket.to_messages` fits them to a token
budget with :mod:`memlane.context.budget` and returns OpenAI chat messages;
:meth:`ContextPacket.to_dict` / :meth:`~ContextPacket.to_json` give the same
packet to other runtimes.

Every turn of the session is accounted for in a rendered packet: verbatim,
in a one-line turn summary, or inside the rolling (or topic) summary — turns
the budget pushes out of the verbatim window get a one-line summary in the
room that is left.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memlane.context.budget import (
    DEFAULT_CAPS,
    Allocation,
    Allocator,
    BudgetReport,
    Candidates,
    TextBlock,
    TextItem,
    TextPart,
    check_priorities,
)
from memlane.context.state_view import StateOf, StateView, session_state, text_of
from memlane.context.strategies import (
    ArchivedBlock,
    StrategyContext,
    TopicSummary,
    resolve_strategy,
)
from memlane.context.summaries import (
    SummaryManager,
    SummaryRecord,
    brief_turn,
    split_groups,
)
from memlane.context.summarizer import fit_to_budget
from memlane.errors import InvalidInputError, MemlaneError, SessionNotFoundError
from memlane.models import JSON, Message, Session, utcnow
from memlane.search.relevance import DEFAULT_FLOOR
from memlane.tokens import TokenCounter, get_counter

if TYPE_CHECKING:
    from memlane.config import Settings
    from memlane.models import SearchHit
    from memlane.store.base import Store

__all__ = [
    "ContextPacket",
    "RecalledMessage",
    "StateView",
    "build_packet",
    "session_state",
]

log = logging.getLogger(__name__)

RECALL_ITEM_TOKENS = 90
NOTES_SHARE = DEFAULT_CAPS["notes"]
#: How many of the newest turns recent_turn_summaries holds (PRD-014: "last N turns, compressed").
RECENT_BRIEFS = 5


@dataclass(slots=True)
class PacketSources:
    """What a packet is compiled from; ``Memory.context`` hands its own parts."""

    store: Store
    settings: Settings
    #: ``Memory.search``'s signature: (query, *, tenant_id, user_id, unowned, min_score, top_k)
    search: Callable[..., list[SearchHit]]
    #: The encoding that made a session's cached token counts (None: unknown).
    encoding_of: Callable[[Session], str | None]
    state_of: StateOf | None = None
    summaries: SummaryManager | None = None
    #: The notes part: called (session_id, query, max_tokens) -> notes, and asked
    #: ``superseded_messages(ids)``; None without notes.
    notes: Any = None
    #: Prefixes user messages with their speaker in a room (the rooms part).
    label_messages: Callable[..., Any] | None = None

    def session(self, session_id: str) -> Session:
        found = self.store.get_session(session_id)
        if found is None:
            raise SessionNotFoundError(session_id)
        return found


# -------------------------------------------------------------------- packet


@dataclass(slots=True)
class RecalledMessage:
    """A past message relevant to the query (from this or an earlier session)."""

    message: Message
    score: float
    session_id: str
    session_title: str | None = None
    same_session: bool = False

    def line(self, counter: TokenCounter) -> str:
        m = self.message
        when = m.created_at.strftime("%Y-%m-%d") if m.created_at.year > 1970 else ""
        who = m.author_name or m.name or m.role
        where = "" if self.same_session else f", in {self.session_title or 'an earlier conversation'}"
        head = ", ".join(p for p in (when, who) if p)
        text = fit_to_budget(" ".join(m.content.split()), RECALL_ITEM_TOKENS, counter)
        return f"[{head}{where}] {text}"

    def to_dict(self) -> JSON:
        return {
            "message": self.message.to_dict(),
            "score": self.score,
            "session_id": self.session_id,
            "session_title": self.session_title,
            "same_session": self.same_session,
        }


@dataclass(slots=True)
class ContextPacket:
    """PRD-014's ConversationContextPacket plus recall and notes. See the module docstring."""

    conversation_id: str
    session_status: str
    strategy: str
    max_tokens: int
    token_model: str | None = None
    query: str | None = None
    system_prompt: str | None = None
    #: Verbatim turns in the default rendering (after the budget), oldest first.
    recent_turns: list[Message] = field(default_factory=list)
    #: One line per turn that is neither verbatim nor inside the rolling summary.
    recent_turn_summaries: list[str] = field(default_factory=list)
    rolling_session_summary: str = ""
    summary_covered_turns: int = 0
    topic_summaries: list[TopicSummary] = field(default_factory=list)
    archived: list[ArchivedBlock] = field(default_factory=list)
    pinned_messages: list[Message] = field(default_factory=list)
    active_topics: list[str] = field(default_factory=list)
    active_job_refs: list[str] = field(default_factory=list)
    pending_clarifications: list[str] = field(default_factory=list)
    open_loops: list[str] = field(default_factory=list)
    resolved_entities_map: dict[str, str] = field(default_factory=dict)
    last_intent: str | None = None
    last_response_type: str | None = None
    turn_count: int = 0
    recalled: list[RecalledMessage] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Ids of the long-term notes in ``notes`` (what a cached answer built on them depends on).
    note_ids: list[int] = field(default_factory=list)
    context_compiled_at: datetime = field(default_factory=utcnow)
    priorities: tuple[str, ...] = ()
    #: How the last rendering spent its budget, per section (sums to ``budget.used``).
    budget: BudgetReport | None = None
    meta: JSON = field(default_factory=dict)
    #: Encoding of the token counts stored with the messages (the Memory's counter).
    stored_encoding: str | None = field(default=None, repr=False)
    # What the strategy selected; rendering reads these.
    _turns: list[list[Message]] = field(default_factory=list, repr=False)
    _pinned: list[list[Message]] = field(default_factory=list, repr=False)
    _gap_turns: list[list[Message]] = field(default_factory=list, repr=False)
    _use_summary: bool = field(default=False, repr=False)
    _summary_last_id: int = field(default=0, repr=False)
    _sections: frozenset[str] = field(default=frozenset(), repr=False)
    _briefs: dict[tuple[str, int], str] = field(default_factory=dict, repr=False)
    _default: Allocation | None = field(default=None, repr=False)

    # ------------------------------------------------------------ rendering

    def _counter(self, model: str | None) -> tuple[TokenCounter, bool]:
        counter = get_counter(model or self.token_model)
        # Counts cached on the messages are only good for the encoding that made them.
        return counter, counter.name == self.stored_encoding

    def _brief(self, key: tuple[str, int], turn: Sequence[Message], counter: TokenCounter) -> str:
        found = self._briefs.get(key)
        if found is None:
            found = self._briefs[key] = brief_turn(turn, counter)
        return found

    def _state_block(self) -> TextBlock | None:
        facts: list[TextItem] = []
        if self.active_job_refs:
            facts.append(TextItem(f"Active jobs: {', '.join(self.active_job_refs)}", 0, 1))
        if self.active_topics:
            facts.append(TextItem(f"Active topics: {', '.join(self.active_topics)}", 1, 2))
        if self.session_status not in ("active", ""):
            facts.append(TextItem(f"Session status: {self.session_status}", -1, -1))
        if self.last_response_type:
            facts.append(TextItem(f"Last reply type: {self.last_response_type}", 2, 5))
        parts = [TextPart("", facts)]
        if self.pending_clarifications:
            parts.append(TextPart(
                "Waiting for the user to clarify:",
                [TextItem(t, i, 0 + i * 0.01) for i, t in enumerate(self.pending_clarifications)],
            ))
        if self.open_loops:
            parts.append(TextPart(
                "Open loops:", [TextItem(t, i, 1 + i * 0.01) for i, t in enumerate(self.open_loops)]
            ))
        if self.resolved_entities_map:
            parts.append(TextPart(
                "References resolved earlier:",
                [
                    TextItem(f'"{k}" = {v}', i, 3 + i * 0.01)
                    for i, (k, v) in enumerate(self.resolved_entities_map.items())
                ],
            ))
        if not any(p.items for p in parts):
            return None
        return TextBlock("state", "## Session state", parts)

    def _summary_block(self) -> tuple[TextBlock, TextPart]:
        rolling = TextPart("", [], bullet="")
        if self._use_summary and self.rolling_session_summary:
            rolling.items.append(TextItem(self.rolling_session_summary, 0, 0, splittable=True))
        topics = TextPart("Earlier topics:", [])
        n = len(self.topic_summaries)
        for i, t in enumerate(self.topic_summaries):
            # Newest first: the closer a topic, the likelier it still matters.
            topics.items.append(TextItem(t.line(), i, 1 + (n - i) * 0.01, splittable=True))
        briefs = TextPart("Recent turns in brief:", [])
        block = TextBlock("summary", "## Earlier in this conversation", [rolling, topics, briefs])
        return block, briefs

    def _candidates(
        self, counter: TokenCounter
    ) -> tuple[Candidates, TextPart, list[tuple[TextItem, int | None]]]:
        turns = self._turns
        cand = Candidates(system_prompt=self.system_prompt, pinned=list(self._pinned))
        if turns:
            cand.latest = split_groups(turns[-1])
            cand.recent = [split_groups(t) for t in turns[:-1]]
        summary, briefs = self._summary_block()
        n = len(self._gap_turns)
        for i, turn in enumerate(self._gap_turns):
            text = self._brief(("gap", i), turn, counter)
            if text:
                briefs.items.append(TextItem(text, i, 2 + (n - i) * 0.01))
        if "summary" in self._sections:
            cand.blocks["summary"] = summary
        if "state" in self._sections:
            state = self._state_block()
            if state is not None:
                cand.blocks["state"] = state
        if "notes" in self._sections and self.notes:
            cand.blocks["notes"] = TextBlock(
                "notes", "## Long-term notes",
                [TextPart("", [TextItem(t, i, i) for i, t in enumerate(self.notes)])],
            )
        recalled: list[tuple[TextItem, int | None]] = []
        if "recalled" in self._sections and self.recalled:
            # Tried best first, shown in the order they were said.
            recalled = [
                (TextItem(r.line(counter), r.message.created_at.timestamp() + i * 1e-6, i), r.message.id)
                for i, r in enumerate(self.recalled)
            ]
            cand.blocks["recalled"] = TextBlock(
                "recalled", "## Relevant earlier messages", [TextPart("", [it for it, _ in recalled])]
            )
        return cand, briefs, recalled

    def _dropped_briefs(self, alloc: Allocation, counter: TokenCounter) -> list[tuple[int, str]]:
        """One line for each candidate turn the budget left out (unless summarized already)."""
        covered = self._summary_last_id if (self._use_summary or self.topic_summaries) else 0
        out: list[tuple[int, str]] = []
        for i, turn in enumerate(self._turns):
            ids = [m.id for m in turn if m.id is not None]
            if not ids or any(x in alloc.kept_ids for x in ids) or max(ids) <= covered:
                continue
            text = self._brief(("turn", ids[0]), turn, counter)
            if text:
                out.append((i, text))
        return out

    def render(
        self,
        model: str | None = None,
        max_tokens: int | None = None,
        priorities: Sequence[str] | str | None = None,
        caps: Mapping[str, float] | None = None,
    ) -> Allocation:
        """Fit the packet to ``max_tokens`` for ``model``'s encoding.

        ``priorities`` orders the sections (those left out are not sent);
        ``caps`` bounds each section's share of the budget (default
        :data:`~memlane.context.budget.DEFAULT_CAPS`). The report of the last
        rendering is kept as ``self.budget``.
        """
        default = model is None and max_tokens is None and priorities is None and caps is None
        if default and self._default is not None:
            self.budget = self._default.report
            return self._default
        counter, use_cache = self._counter(model)
        budget = self.max_tokens if max_tokens is None else max_tokens
        order = check_priorities(priorities if priorities is not None else self.priorities)
        cand, briefs, recalled = self._candidates(counter)
        alloc = Allocator(cand, counter, budget, priorities=order, caps=caps, use_cache=use_cache).run()
        first = alloc.finish()
        # A recalled message that also made it verbatim is said once, verbatim.
        for item, message_id in recalled:
            if message_id is not None and message_id in first.kept_ids:
                alloc.remove_text("recalled", item)
        spill = self._dropped_briefs(first, counter) if "summary" in cand.blocks else []
        if spill and "summary" in order:
            base = len(self._gap_turns)
            alloc.fill(
                "summary", briefs,
                [TextItem(text, base + i, 2 - (i + 1) * 1e-4) for i, text in spill],
            )
        result = alloc.finish()
        self.budget = result.report
        if default:
            self._default = result
            self.recent_turns = [m for s, g in result.placed if s in ("latest", "recent") for m in g]
            # PRD-014: the last N turns, compressed (whether or not they also went in raw),
            # after the briefs of older turns the budget left out, oldest first.
            shown = [it.text for it in sorted(briefs.items, key=lambda x: x.order)]
            last = [
                text for turn in self._turns[-RECENT_BRIEFS:]
                if (text := self._brief(("turn", next((m.id for m in turn if m.id is not None), -1)),
                                        turn, counter))
            ]
            self.recent_turn_summaries = list(dict.fromkeys([*shown, *last]))
        return result

    def to_messages(
        self,
        model: str | None = None,
        *,
        max_tokens: int | None = None,
        priorities: Sequence[str] | str | None = None,
        caps: Mapping[str, float] | None = None,
    ) -> list[JSON]:
        """OpenAI chat messages that fit the budget exactly (see :meth:`render`)."""
        return [m.to_openai() for m in self.render(model, max_tokens, priorities, caps).messages]

    # ------------------------------------------------------------ exporting

    def to_dict(self) -> JSON:
        alloc = self.render()
        return {
            "conversation_id": self.conversation_id,
            "session_status": self.session_status,
            "strategy": self.strategy,
            "query": self.query,
            "max_tokens": self.max_tokens,
            "token_model": self.token_model,
            "system_prompt": self.system_prompt,
            "recent_turns": [m.to_dict() for m in self.recent_turns],
            "recent_turn_summaries": list(self.recent_turn_summaries),
            "rolling_session_summary": self.rolling_session_summary,
            "summary_covered_turns": self.summary_covered_turns,
            "topic_summaries": [t.to_dict() for t in self.topic_summaries],
            "archived": [a.to_dict() for a in self.archived],
            "pinned_messages": [m.to_dict() for m in self.pinned_messages],
            "active_topics": list(self.active_topics),
            "active_job_refs": list(self.active_job_refs),
            "pending_clarifications": list(self.pending_clarifications),
            "open_loops": list(self.open_loops),
            "resolved_entities_map": dict(self.resolved_entities_map),
            "last_intent": self.last_intent,
            "last_response_type": self.last_response_type,
            "turn_count": self.turn_count,
            "recalled": [r.to_dict() for r in self.recalled],
            "notes": list(self.notes),
            "context_compiled_at": self.context_compiled_at.isoformat(),
            "priorities": list(self.priorities),
            "messages": [m.to_openai() for m in alloc.messages],
            "budget": alloc.report.to_dict(),
            "meta": dict(self.meta),
        }

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent, default=str)


# ------------------------------------------------------------------ building


def _recall(
    src: PacketSources, session: Session, query: str, exclude: set[int]
) -> list[RecalledMessage]:
    settings = src.settings
    if not settings.rag_enabled:
        return []
    top_k = settings.rag_top_k
    try:
        # Scoped: a user's session recalls that user's conversations; a session without a
        # user recalls only its tenant's sessions without a user, never another user's.
        hits = src.search(
            query, tenant_id=session.tenant_id, user_id=session.user_id,
            unowned=session.user_id is None,
            min_score=DEFAULT_FLOOR if settings.rag_min_score is None else settings.rag_min_score,
            top_k=top_k + len(exclude) if len(exclude) < 64 else top_k * 3,
        )
    except MemlaneError as exc:
        log.warning("recall for %r failed (%s); the packet goes without it", query, exc)
        return []
    titles: dict[str, str | None] = {}
    archived: set[str] = set()
    out: list[RecalledMessage] = []
    for hit in hits:
        msg = hit.message
        if msg.id in exclude or not msg.content.strip() or msg.role == "system":
            continue
        sid = msg.session_id
        if sid not in titles:
            other = hit.session or (src.store.get_session(sid) if sid else None)
            titles[sid] = other.title if other is not None else None
            if other is not None and other.status == "archived" and sid != session.id:
                archived.add(sid)
        if sid in archived:
            continue  # the archive tier stays out of context ("search the archive for X" finds it)
        out.append(RecalledMessage(msg, hit.score, sid, titles[sid], sid == session.id))
        if len(out) >= top_k:
            break
    return _still_true(src.notes, out)


def _still_true(notes: Any, recalled: list[RecalledMessage]) -> list[RecalledMessage]:
    """Without the messages whose facts a newer note superseded: recall says what is true
    now (the note that replaced them is in the notes section)."""
    check = getattr(notes, "superseded_messages", None)
    if not callable(check) or not recalled:
        return recalled
    try:
        stale: set[int] = check([r.message.id for r in recalled if r.message.id is not None])
    except MemlaneError as exc:
        log.warning("could not check recalled messages against notes (%s)", exc)
        return recalled
    return [r for r in recalled if r.message.id not in stale]


def _notes(provider: Any, session: Session, query: str | None, max_tokens: int) -> list[tuple[int | None, str]]:
    """(note id or None, text) of the notes for the packet."""
    if provider is None:
        return []
    if not callable(provider):
        log.debug("the notes part is not callable; skipping notes")
        return []
    try:
        found = provider(session.id, query, max(32, int(max_tokens * NOTES_SHARE)))
    except MemlaneError as exc:
        log.warning("long-term notes unavailable (%s); the packet goes without them", exc)
        return []
    out: list[tuple[int | None, str]] = []
    for n in found or ():
        text = text_of(n).strip()
        if text:
            note_id = getattr(n, "id", None)
            out.append((note_id if isinstance(note_id, int) else None, text))
    return out


def _labelled(
    label: Callable[..., Any] | None, session: Session, groups: list[list[Message]]
) -> list[list[Message]]:
    """User messages prefixed with their speaker in a room ("Anchor (JanHein): ...").

    Chat APIs have one "user" role for everybody, so in a multi-party room the
    speaker must be in the text (seed 003). Uses the rooms component's
    ``label_messages``; a one-person chat is left as it is.
    """
    if not callable(label) or not groups:
        return groups
    authors = {
        m.author_id or m.author_name for g in groups for m in g
        if m.role == "user" and (m.author_id or m.author_name)
    }
    if session.metadata.get("kind") != "room" and len(authors) < 2:
        return groups
    out: list[list[Message]] = []
    for group in groups:
        labelled = list(label(group))
        # A changed text needs a fresh token count.
        out.append([
            new if new.content == old.content else new.with_(token_count=None)
            for new, old in zip(labelled, group, strict=True)
        ])
    return out


def build_packet(
    src: PacketSources,
    session_id: str,
    *,
    query: str | None = None,
    max_tokens: int | None = None,
    strategy: str | None = None,
    model: str | None = None,
    priorities: Sequence[str] | str | None = None,
) -> ContextPacket:
    """Compile the context packet of a session; see :meth:`memlane.Memory.context`."""
    if query is not None and not isinstance(query, str):
        raise InvalidInputError(f"query must be a string or None, got {type(query).__name__}")
    query = query.strip() or None if query is not None else None
    budget = max_tokens if max_tokens is not None else src.settings.max_history_tokens
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise InvalidInputError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    order = check_priorities(priorities)
    session = src.session(session_id)
    name, strategy_fn = resolve_strategy(strategy, src.settings.strategy)
    token_model = model or src.settings.token_model
    counter = get_counter(token_model)
    manager = src.summaries
    record: SummaryRecord | None = None
    if manager is not None:
        record = manager.current(session.id, catch_up=name != "simple")
    ctx = StrategyContext(
        store=src.store, session=session, max_tokens=budget, counter=counter,
        use_cache=counter.name == src.encoding_of(session), summary=record,
    )
    sel = strategy_fn(ctx)
    sel.turns = _labelled(src.label_messages, session, sel.turns)
    sel.pinned = _labelled(src.label_messages, session, sel.pinned)
    state = session_state(src.store, src.state_of, session, record)
    # The session's lifecycle status (resuming, paused, ended...) wins; while it is
    # active, the tracker says more (awaiting_clarification).
    status = session.status if session.status != "active" else (state.status or "active")
    # The newest turn is always sent; anything else recalled is dropped at render
    # time only if it really went in verbatim.
    in_window = {m.id for m in (sel.turns[-1] if sel.turns else []) if m.id is not None}
    recalled = _recall(src, session, query, in_window) if query and "recalled" in sel.sections else []
    last_user = next(
        (m.content for t in reversed(sel.turns) for m in reversed(t) if m.role == "user"), None
    )
    found_notes = _notes(src.notes, session, query or last_user, budget) if "notes" in sel.sections else []
    packet = ContextPacket(
        conversation_id=session.id,
        session_status=status,
        strategy=name,
        max_tokens=budget,
        token_model=token_model,
        query=query,
        system_prompt=session.system_prompt,
        rolling_session_summary=record.text if record is not None else "",
        summary_covered_turns=record.covered_turns if record is not None else 0,
        topic_summaries=sel.topic_summaries,
        archived=sel.archived,
        pinned_messages=[m for g in sel.pinned for m in g],
        active_topics=state.active_topics,
        active_job_refs=state.active_job_refs,
        pending_clarifications=state.pending_clarifications,
        open_loops=state.open_loops,
        resolved_entities_map=state.resolved_entities,
        last_intent=state.last_intent,
        last_response_type=state.last_response_type,
        turn_count=state.turn_count,
        recalled=recalled,
        notes=[text for _, text in found_notes],
        note_ids=[nid for nid, _ in found_notes if nid is not None],
        priorities=order,
        stored_encoding=src.encoding_of(session),
        meta={
            "reached_start": sel.reached_start,
            "candidate_turns": len(sel.turns),
            "summarizer": record.summarizer if record is not None else None,
        },
        _turns=sel.turns,
        _pinned=sel.pinned,
        _gap_turns=sel.gap_turns,
        _use_summary=sel.use_summary,
        _summary_last_id=record.last_message_id if record is not None else 0,
        _sections=sel.sections,
    )
    packet.render()
    return packet
