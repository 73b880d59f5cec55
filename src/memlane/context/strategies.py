"""Context strategies: which turns go in verbatim, which as summaries.

A strategy reads the log and returns a :class:`Selection`; the packet then
fits it to the budget. They are registered by name in :data:`STRATEGIES`, so
adding one is one line: ``STRATEGIES["mine"] = my_strategy``.

* ``simple`` — seed 000's window: the newest turns that fit, nothing else.
* ``summary`` — the whole history when it fits; else older turns as the rolling
  summary and the recent 20 turns verbatim.
* ``hybrid`` — system messages always, pinned/important messages kept verbatim,
  routine exchanges in the rolling summary, the recent 10 turns verbatim.
* ``tiered`` — seed 003's tiers: *active* (the recent 10-20 turns verbatim),
  *summarized* (older turns as topic-based block summaries), *archived* (very
  old blocks: not in context, listed in the packet and retrievable with
  ``memlane context SESSION --archived`` or :func:`archived_blocks`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from memlane.context.keyphrases import normalize_term, tokenize_words
from memlane.context.summaries import SummaryBlock, SummaryRecord, split_turns
from memlane.context.window import message_tokens
from memlane.errors import InvalidInputError, SessionNotFoundError
from memlane.language import LANGUAGES
from memlane.models import JSON, Message, Session
from memlane.tokens import TokenCounter

if TYPE_CHECKING:
    from memlane.context.summaries import SummaryManager
    from memlane.ports import Essentials
    from memlane.store.base import Store

__all__ = [
    "IMPORTANT",
    "STRATEGIES",
    "ArchivedBlock",
    "Selection",
    "Strategy",
    "StrategyContext",
    "TopicSummary",
    "archived_blocks",
    "gap_turns",
    "pinned_groups",
    "resolve_strategy",
    "tail_turns",
    "topic_summaries",
]

log = logging.getLogger(__name__)

#: Messages with at least this importance are kept by ``hybrid`` like pinned ones.
IMPORTANT = 0.5
#: Verbatim turn limits per strategy (the budget may allow fewer).
RECENT_TURNS = {"summary": 20, "hybrid": 10, "tiered": 20}
#: ``tiered``: blocks (of ``summarize_every`` turns) in the summarized tier; older
#: blocks are archived.
SUMMARIZED_BLOCKS = 10
_PAGE = 64
_MAX_GAP_TURNS = 40


@dataclass(slots=True)
class StrategyContext:
    store: Store
    session: Session
    max_tokens: int
    counter: TokenCounter
    use_cache: bool
    summary: SummaryRecord | None


@dataclass(slots=True)
class TopicSummary:
    """Summarized tier: consecutive blocks about the same topics."""

    topics: list[str]
    first_turn: int
    last_turn: int
    text: str
    started_at: str = ""

    def to_dict(self) -> JSON:
        return asdict(self)

    def line(self) -> str:
        when = ""
        if self.started_at:
            try:
                when = datetime.fromisoformat(self.started_at).strftime("%d %b %Y") + ", "
            except ValueError:
                when = ""
        head = f"({when}turns {self.first_turn + 1}-{self.last_turn + 1}"
        head += f"; {', '.join(self.topics)})" if self.topics else ")"
        return f"{head} {self.text}".strip()


@dataclass(slots=True)
class ArchivedBlock:
    """Archived tier: a range of very old turns kept out of the context."""

    first_turn: int
    last_turn: int
    first_message_id: int
    last_message_id: int
    topics: list[str]
    started_at: str = ""
    ended_at: str = ""
    text: str = ""

    def to_dict(self) -> JSON:
        return asdict(self)


@dataclass(slots=True)
class Selection:
    """What a strategy chose, before the budget is applied."""

    turns: list[list[Message]]  # verbatim candidates, oldest first; the last is the newest turn
    reached_start: bool  # the candidates begin at the session's first visible message
    pinned: list[list[Message]] = field(default_factory=list)  # groups, in preference order
    use_summary: bool = False  # render the rolling summary
    topic_summaries: list[TopicSummary] = field(default_factory=list)
    archived: list[ArchivedBlock] = field(default_factory=list)
    gap_turns: list[list[Message]] = field(default_factory=list)  # after the summary, before `turns`
    sections: frozenset[str] = frozenset({"state", "summary", "notes", "recalled"})


Strategy = Callable[[StrategyContext], Selection]


# ------------------------------------------------------------------ reading


def tail_turns(
    store: Store,
    session_id: str,
    *,
    max_turns: int | None,
    max_tokens: int,
    counter: TokenCounter,
    use_cache: bool = True,
) -> tuple[list[list[Message]], bool]:
    """The newest whole turns (at most ``max_turns``, about ``max_tokens``), oldest first.

    Reads the log backwards a page at a time, so the cost follows the budget,
    not the history. Returns the turns and whether they reach the session start.
    """
    collected: list[Message] = []  # newest first
    tokens = 0
    before: int | None = None
    reached_start = False
    while True:
        page = store.recent_messages(session_id, _PAGE, before_id=before)
        collected.extend(page)
        tokens += sum(message_tokens(m, counter, use_cache=use_cache) for m in page)
        if len(page) < _PAGE:
            reached_start = True
            break
        before = page[-1].id
        turns = split_turns(collected[::-1])
        if tokens > max_tokens or (max_turns is not None and len(turns) > max_turns + 1):
            break
    turns = split_turns(collected[::-1])
    if not reached_start and len(turns) > 1:
        turns = turns[1:]  # the oldest one may be cut in half
    if max_turns is not None and len(turns) > max_turns:
        turns, reached_start = turns[-max_turns:], False
    # Keep about a budget's worth: more can never be sent anyway.
    total = sum(message_tokens(m, counter, use_cache=use_cache) for t in turns for m in t)
    while len(turns) > 1:
        first = sum(message_tokens(m, counter, use_cache=use_cache) for m in turns[0])
        if total - first < max_tokens:
            break
        total -= first
        turns, reached_start = turns[1:], False
    return turns, reached_start


def gap_turns(
    store: Store, session_id: str, summary: SummaryRecord | None, start_id: int | None
) -> list[list[Message]]:
    """Visible turns after the summary's coverage and before ``start_id``."""
    after = summary.last_message_id if summary is not None else 0
    msgs: list[Message] = []
    for msg in store.iter_messages(session_id, after_id=after, include_hidden=False):
        if start_id is not None and msg.id is not None and msg.id >= start_id:
            break
        msgs.append(msg)
    return split_turns(msgs)[-_MAX_GAP_TURNS:]


def _important_ids(store: Store, session_id: str, before_id: int | None) -> list[int]:
    return store.important_message_ids(session_id, before_id=before_id, min_importance=IMPORTANT)


def _tool_results(store: Store, session_id: str, call: Message) -> list[Message]:
    ids = {str(c.get("id")) for c in call.tool_calls or ()}
    out: list[Message] = []
    for msg in store.iter_messages(
        session_id, after_id=call.id or 0, batch=len(ids) + 4, include_hidden=False
    ):
        if msg.role != "tool" or msg.tool_call_id not in ids:
            break
        out.append(msg)
    return out


def pinned_groups(store: Store, session_id: str, before_id: int | None) -> list[list[Message]]:
    """System, pinned and important messages older than ``before_id``, as whole groups.

    Preference order: system messages first, then pinned, then by importance,
    newer before older.
    """
    found = store.get_messages(_important_ids(store, session_id, before_id))
    groups: dict[int, list[Message]] = {}
    for msg in found:
        owner: Message | None = msg
        if msg.role == "tool":
            owner = None
            for older in store.recent_messages(session_id, 32, before_id=msg.id):
                if older.role == "assistant" and older.tool_calls:
                    if msg.tool_call_id in {str(c.get("id")) for c in older.tool_calls}:
                        owner = older
                    break
                if older.role != "tool":
                    break
        if owner is None or owner.id is None or owner.id in groups:
            continue
        if owner.role == "assistant" and owner.tool_calls:
            groups[owner.id] = [owner, *_tool_results(store, session_id, owner)]
        else:
            groups[owner.id] = [owner]

    def rank(group: list[Message]) -> tuple[int, int, float, int]:
        system = any(m.role == "system" for m in group)
        pinned = any(m.pinned for m in group)
        importance = max(m.importance for m in group)
        first = group[0].id or 0
        return (0 if system else 1, 0 if pinned else 1, -importance, first if system else -first)

    return sorted(groups.values(), key=rank)


# --------------------------------------------------------------- strategies


def _turns(ctx: StrategyContext, max_turns: int | None) -> tuple[list[list[Message]], bool]:
    return tail_turns(
        ctx.store, ctx.session.id, max_turns=max_turns, max_tokens=ctx.max_tokens,
        counter=ctx.counter, use_cache=ctx.use_cache,
    )


def _start_id(turns: Sequence[Sequence[Message]]) -> int | None:
    for turn in turns:
        for msg in turn:
            if msg.id is not None:
                return msg.id
    return None


def simple(ctx: StrategyContext) -> Selection:
    turns, reached = _turns(ctx, None)
    return Selection(turns=turns, reached_start=reached, sections=frozenset())


def _after_summary(ctx: StrategyContext, turns: list[list[Message]]) -> list[list[Message]]:
    """The turns the rolling summary does not cover yet (at least the newest one).

    A packet never says a thing twice: with the summary in, a turn it covers is not also
    sent verbatim (PRD-014: rolling summary plus the last raw turns). The summary always
    leaves the newest ``keep_raw_turns`` turns uncovered, so those stay verbatim.
    """
    covered = ctx.summary.last_message_id if ctx.summary is not None else 0
    kept = [t for t in turns if max((m.id or 0) for m in t) > covered]
    return kept or turns[-1:]


def summary(ctx: StrategyContext) -> Selection:
    # Seed 000: a history within the limit goes as it is; otherwise the recent 20.
    turns, reached = _turns(ctx, None)
    if not reached:
        turns, reached = _turns(ctx, RECENT_TURNS["summary"])
    sel = Selection(turns=turns, reached_start=reached)
    if not reached:
        sel.use_summary = bool(ctx.summary and ctx.summary.text)
        if sel.use_summary:
            sel.turns = turns = _after_summary(ctx, turns)
        sel.gap_turns = gap_turns(ctx.store, ctx.session.id, ctx.summary, _start_id(turns))
    return sel


def hybrid(ctx: StrategyContext) -> Selection:
    turns, reached = _turns(ctx, RECENT_TURNS["hybrid"])
    sel = Selection(turns=turns, reached_start=reached)
    if not reached:
        sel.use_summary = bool(ctx.summary and ctx.summary.text)
        if sel.use_summary:
            sel.turns = turns = _after_summary(ctx, turns)
        start = _start_id(turns)
        sel.gap_turns = gap_turns(ctx.store, ctx.session.id, ctx.summary, start)
        sel.pinned = pinned_groups(ctx.store, ctx.session.id, start)
    return sel


def _topic_key(topics: Sequence[str]) -> set[str]:
    """The topic words of a block as stems in each language ("Zelte" meets "Zelt" as
    "tents" meets "tent"): a few words say too little to judge their language by, and a
    context read need not load the language model for it."""
    return {normalize_term(w, lng) for t in topics for w in tokenize_words(t) for lng in LANGUAGES}


def topic_summaries(blocks: Sequence[SummaryBlock]) -> list[TopicSummary]:
    """Adjacent blocks that share a topic word merged into one topic summary."""
    out: list[TopicSummary] = []
    keys: list[set[str]] = []
    for b in blocks:
        key = _topic_key(b.topics)
        if out and keys[-1] & key and len(out[-1].text) < 1200:
            last = out[-1]
            last.topics = list(dict.fromkeys([*last.topics, *b.topics]))[:5]
            last.last_turn = b.last_turn
            last.text = f"{last.text} {b.text}".strip()
            keys[-1] |= key
            continue
        out.append(TopicSummary(list(b.topics), b.first_turn, b.last_turn, b.text, b.started_at))
        keys.append(key)
    for t in out:
        # Each block opens with "A, B and C talked on <date>."; the line has the date once
        # already, and merged blocks would repeat the opener.
        t.text = _TALKED_RE.sub(" ", t.text).strip()
    return out


_TALKED_RE = re.compile(r"(?:^|(?<=[.!?])\s)[^.!?]*\btalked(?: on [^.!?]*?(?:am|pm))?\.(?=\s|$)")


def _archived(blocks: Sequence[SummaryBlock]) -> list[ArchivedBlock]:
    return [
        ArchivedBlock(
            first_turn=b.first_turn, last_turn=b.last_turn, first_message_id=b.first_message_id,
            last_message_id=b.last_message_id, topics=list(b.topics), started_at=b.started_at,
            ended_at=b.ended_at, text=b.text,
        )
        for b in blocks
    ]


def tiered(ctx: StrategyContext) -> Selection:
    turns, reached = _turns(ctx, RECENT_TURNS["tiered"])
    sel = Selection(turns=turns, reached_start=reached)
    if reached:
        return sel
    start = _start_id(turns)
    blocks = list(ctx.summary.blocks) if ctx.summary else []
    older = [b for b in blocks if start is None or b.first_message_id < start]
    summarized = older[-SUMMARIZED_BLOCKS:]
    sel.archived = _archived(older[: len(older) - len(summarized)])
    sel.topic_summaries = topic_summaries(summarized)
    sel.gap_turns = gap_turns(ctx.store, ctx.session.id, ctx.summary, start)
    return sel


STRATEGIES: dict[str, Strategy] = {
    "simple": simple,
    "summary": summary,
    "summarization": summary,  # seed 000's config spelling
    "hybrid": hybrid,
    "tiered": tiered,
}


def resolve_strategy(name: str | None, default: str) -> tuple[str, Strategy]:
    chosen = (name or default).strip().lower()
    if chosen == "summarization":
        chosen = "summary"
    found = STRATEGIES.get(chosen)
    if found is None:
        raise InvalidInputError(
            f"unknown context strategy {name!r}; choose one of {', '.join(sorted(STRATEGIES))}"
        )
    return chosen, found


def archived_blocks(
    source: SummaryManager | Essentials, session_id: str, *, with_text: bool = True
) -> list[ArchivedBlock]:
    """The archived tier of a session (what ``tiered`` leaves out), oldest first.

    ``source``: the summaries part (``mem.parts.summaries``), or what to make one from.
    A block whose summary text was compacted out of the record is summarized
    again from the log when ``with_text`` is set.
    """
    from memlane.context.summaries import SummaryManager

    manager = source if isinstance(source, SummaryManager) else SummaryManager(source)
    store = manager.essentials.store
    if store.get_session(session_id) is None:
        raise SessionNotFoundError(session_id)
    rec = manager.update(session_id)
    turns, _ = tail_turns(
        store, session_id, max_turns=RECENT_TURNS["tiered"], max_tokens=2**31,
        counter=manager.essentials.counter,
    )
    start = _start_id(turns)
    older = [b for b in rec.blocks if start is None or b.first_message_id < start]
    archived = _archived(older[: max(0, len(older) - SUMMARIZED_BLOCKS)])
    if with_text:
        for block in archived:
            if block.text:
                continue
            msgs = _range(store, session_id, block.first_message_id, block.last_message_id)
            block.text = manager.summarizer.summarize(msgs, max_tokens=manager.block_max_tokens)
    return archived


def _range(store: Store, session_id: str, first: int, last: int) -> list[Message]:
    out: list[Message] = []
    for msg in store.iter_messages(session_id, after_id=first - 1, include_hidden=False):
        if msg.id is not None and msg.id > last:
            break
        out.append(msg)
    return out

