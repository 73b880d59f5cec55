"""Rolling session summaries kept beside the log, updated as turns arrive.

The PRD's compression policy: every ``settings.summarize_every`` turns (10) the
oldest unsummarized block is folded into the session's rolling summary, and the
last ``settings.keep_raw_turns`` turns (3) are never summarized. Each block
also keeps its own summary (the *delta*) and keyphrases, which the ``tiered``
strategy shows as topic summaries.

The record lives in ``store.put_derived(session_id, "summary", ...)``: derived
state, rebuilt from the log whenever it is missing, unreadable or covers
messages that were hidden or forgotten. It reports ``tokens_saved`` (tokens of
the summarized messages minus tokens of the summary) for ``memlane stats``.

Summarizing never runs on the write path: an observer only queues the session
id, and one background thread (started on demand, gone when idle) updates the
summary and then writes the session's checkpoint. ``Memory.flush()`` waits for
it. Reading a context catches up synchronously when the record lags by a whole
block (for example right after an import), so a packet never misses a block.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from memlane.context.keyphrases import extract_keyphrases
from memlane.context.summarizer import (
    ExtractiveSummarizer,
    LLMSummarizer,
    RollingSummary,
    Summarizer,
    clean_text,
    fit_to_budget,
    split_sentences,
)
from memlane.errors import MemlaneError
from memlane.lru import LRUCache
from memlane.models import JSON, Message, Session, utcnow
from memlane.tokens import TokenCounter

if TYPE_CHECKING:
    from memlane.ports import Essentials

__all__ = [
    "SUMMARY_KIND",
    "SummaryBlock",
    "SummaryManager",
    "SummaryRecord",
    "brief_turn",
    "split_groups",
    "split_turns",
]

log = logging.getLogger(__name__)

SUMMARY_KIND = "summary"
RECORD_VERSION = 1
#: Token budget of the rolling summary (the whole session's gist).
ROLLING_MAX_TOKENS = 400
#: Token budget of one block's own summary (the delta).
BLOCK_MAX_TOKENS = 120
#: Blocks whose delta text is kept in the record; older ones keep range and topics
#: only (their text can be rebuilt from the log on demand).
MAX_TEXT_BLOCKS = 60
#: Width of a one-line turn summary.
BRIEF_MAX_TOKENS = 48


# ------------------------------------------------------------------ turns


def split_turns(messages: Sequence[Message]) -> list[list[Message]]:
    """Messages (oldest first) cut into turns.

    A turn starts at a user message that follows anything but user or system
    messages, so "user, user, assistant, tool, assistant" is one turn and a
    multi-party room's consecutive speakers stay together until someone answers.
    """
    turns: list[list[Message]] = []
    current: list[Message] = []
    answered = False
    for msg in messages:
        if not msg.in_window:  # reasoning, image-only items: kept, never shown again
            continue
        if msg.role == "user" and answered:
            turns.append(current)
            current, answered = [], False
        current.append(msg)
        if msg.role in ("assistant", "tool"):
            answered = True
    if current:
        turns.append(current)
    return turns


def split_groups(messages: Sequence[Message]) -> list[list[Message]]:
    """Messages cut into groups that must travel together.

    An assistant message with ``tool_calls`` and the tool results answering it
    form one group; every other message is its own group. Chat APIs reject a
    tool result without its call and a call without a result for each of its
    ids, so a tool result whose call is missing is dropped, and a call left
    unanswered (a crash mid-turn, a tool that never returned) keeps only its
    text, or goes when it has none.
    """
    groups: list[list[Message]] = []
    open_calls: set[str] = set()
    owner: list[Message] | None = None
    for msg in messages:
        if msg.role == "tool":
            if owner is not None and msg.tool_call_id in open_calls:
                owner.append(msg)
            else:
                log.debug("dropping tool result %s without its call", msg.id)
            continue
        if msg.role == "assistant" and msg.tool_calls:
            owner = [msg]
            open_calls = {str(c.get("id")) for c in msg.tool_calls}
            groups.append(owner)
            continue
        owner, open_calls = None, set()
        groups.append([msg])
    return [g for g in (_answered(g) for g in groups) if g]


def _answered(group: list[Message]) -> list[Message]:
    head = group[0]
    if not head.tool_calls:
        return group
    asked = {str(c.get("id")) for c in head.tool_calls}
    if asked <= {m.tool_call_id for m in group[1:]}:
        return group
    log.debug("tool call message %s has unanswered calls; sending its text only", head.id)
    if not head.content.strip():
        return []
    return [head.with_(tool_calls=None, token_count=None)]


def _speaker(msg: Message) -> str:
    if msg.author_name:
        return msg.author_name
    if msg.name:
        return msg.name
    return msg.role.title()


def _lead(text: str, words: int = 28) -> str:
    """The first informative sentence of ``text`` (greetings skipped), at most ``words`` words."""
    sentences = split_sentences(clean_text(text))
    if not sentences:
        return ""
    chosen = next((s for s in sentences if len(s.split()) >= 4), sentences[0])
    parts = chosen.split()
    return chosen if len(parts) <= words else " ".join(parts[:words]) + "…"


def brief_turn(turn: Sequence[Message], counter: TokenCounter, max_tokens: int = BRIEF_MAX_TOKENS) -> str:
    """One line for a turn: who said what, first informative sentence each.

    Questions are kept (unlike in the extractive summary): in a turn summary
    the question is what the answer means.
    """
    parts: list[str] = []
    for msg in turn:
        if msg.role in ("tool", "system"):
            continue
        if msg.role == "assistant" and msg.tool_calls and not msg.content.strip():
            names = ", ".join(
                str((c.get("function") or {}).get("name") or c.get("name") or "a tool")
                for c in msg.tool_calls
            )
            parts.append(f"{_speaker(msg)} called {names}")
            continue
        lead = _lead(msg.content)
        if lead:
            parts.append(f"{_speaker(msg)}: {lead}")
    return fit_to_budget(" / ".join(parts), max_tokens, counter)


# ----------------------------------------------------------------- record


@dataclass(slots=True)
class SummaryBlock:
    """One summarized block of turns: its range, its own summary and topics."""

    index: int
    first_message_id: int
    last_message_id: int
    first_turn: int  # 0-based index of the block's first turn in the session
    turns: int
    text: str
    topics: list[str]
    tokens: int
    source_tokens: int
    started_at: str = ""
    ended_at: str = ""

    @property
    def last_turn(self) -> int:
        return self.first_turn + self.turns - 1


@dataclass(slots=True)
class SummaryRecord:
    """The derived summary of one session (see the module docstring)."""

    session_id: str
    text: str = ""
    covered_turns: int = 0
    first_message_id: int = 0
    last_message_id: int = 0  # the summary covers visible messages with id <= this
    blocks: list[SummaryBlock] = field(default_factory=list)
    tokens: int = 0
    source_tokens: int = 0
    tokens_saved: int = 0
    summarizer: str = "extractive"
    updated_at: str = ""
    version: int = RECORD_VERSION

    def to_json(self) -> JSON:
        return asdict(self)

    @classmethod
    def from_json(cls, session_id: str, raw: JSON) -> SummaryRecord | None:
        """The record, or None when it is from another version or malformed."""
        try:
            if raw.get("version") != RECORD_VERSION:
                return None
            blocks = [SummaryBlock(**b) for b in raw.get("blocks", [])]
            data = {k: v for k, v in raw.items() if k != "blocks"}
            data["session_id"] = session_id
            rec = cls(**data, blocks=blocks)
        except (TypeError, ValueError, AttributeError):
            return None
        if not isinstance(rec.text, str) or not isinstance(rec.last_message_id, int):
            return None
        return rec

    @property
    def delta(self) -> SummaryBlock | None:
        """The newest block: what the last update added."""
        return self.blocks[-1] if self.blocks else None


# ---------------------------------------------------------------- manager


def _make_summarizer(essentials: Essentials) -> tuple[Summarizer, str]:
    counter = essentials.counter
    extractive = ExtractiveSummarizer(counter=counter)
    s = essentials.settings
    if s.llm_base_url:
        model = s.llm_model or "gpt-4o-mini"
        llm = LLMSummarizer(
            base_url=s.llm_base_url, model=model, api_key_env=s.llm_api_key_env,
            fallback=extractive, counter=counter,
        )
        return llm, f"llm:{model}"
    return extractive, "extractive"


class _Worker:
    """One background thread draining a queue of session ids (coalesced).

    It starts on the first submit and exits after ``idle`` seconds without
    work, so a Memory that is never closed leaves no thread behind for long.
    """

    def __init__(self, fn: Callable[[str], None], *, idle: float = 2.0) -> None:
        self._fn = fn
        self._idle = idle
        self._pending: OrderedDict[str, None] = OrderedDict()
        self._busy = 0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, session_id: str) -> None:
        with self._cond:
            if self._closed:
                return
            self._pending[session_id] = None
            self._pending.move_to_end(session_id)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="memlane-summaries", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._pending and not self._closed:
                    self._cond.wait(self._idle)
                if not self._pending:
                    self._thread = None
                    self._cond.notify_all()
                    return
                sid, _ = self._pending.popitem(last=False)
                self._busy += 1
            try:
                self._fn(sid)
            except Exception:  # derived work: log, never kill the worker
                log.exception("background summary/checkpoint for session %s failed", sid)
            finally:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()

    def discard(self, session_id: str) -> None:
        with self._cond:
            self._pending.pop(session_id, None)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until the queue is empty; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and not self._busy, timeout)

    def close(self, timeout: float = 30.0) -> None:
        self.flush(timeout)
        with self._cond:
            self._closed = True
            self._pending.clear()
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)


class SummaryManager:
    """Keeps each session's rolling summary current (one per Memory)."""

    def __init__(
        self,
        essentials: Essentials,
        *,
        every: int | None = None,
        keep_raw: int | None = None,
        rolling_max_tokens: int = ROLLING_MAX_TOKENS,
        block_max_tokens: int = BLOCK_MAX_TOKENS,
        summarizer: Summarizer | None = None,
    ) -> None:
        self.essentials = essentials
        self.every = every if every is not None else essentials.settings.summarize_every
        self.keep_raw = keep_raw if keep_raw is not None else essentials.settings.keep_raw_turns
        self.rolling_max_tokens = rolling_max_tokens
        self.block_max_tokens = block_max_tokens
        if summarizer is None:
            self.summarizer, self.summarizer_name = _make_summarizer(essentials)
        else:
            self.summarizer, self.summarizer_name = summarizer, type(summarizer).__name__
        self._rolling: LRUCache[str, RollingSummary] = LRUCache(256)
        # Weak values: a session's lock lives while someone holds or waits for it, so the
        # map does not grow with every session the process has ever summarized.
        self._locks: weakref.WeakValueDictionary[str, threading.RLock] = weakref.WeakValueDictionary()
        self._locks_guard = threading.Lock()
        # Ids announced by a forget hook but maybe not yet deleted from the store.
        self._forgotten: dict[str, set[int]] = {}
        #: Sessions deleted in this process (until a message arrives for the id again).
        self.deleted: set[str] = set()
        #: Run on the background thread after each update: with the new record (the state
        #: part keeps it as the session's rolling summary), then with the session id
        #: (the checkpoint). Wired in components.py.
        self.on_record: list[Callable[[SummaryRecord], None]] = []
        self.after_update: list[Callable[[str], None]] = []
        self.worker = _Worker(self._background)

    # -- plumbing

    def lock(self, session_id: str) -> threading.RLock:
        with self._locks_guard:
            found = self._locks.get(session_id)
            if found is None:
                found = threading.RLock()
                self._locks[session_id] = found
            return found

    def _background(self, session_id: str) -> None:
        if session_id in self.deleted or self.essentials.store.get_session(session_id) is None:
            return  # deleted meanwhile
        rec = self.update(session_id)
        for share in self.on_record:
            share(rec)
        for hook in self.after_update:
            hook(session_id)

    def observe(self, session: Session, stored: list[Message]) -> None:
        """Observer on durable appends: queue the session, nothing else."""
        if stored:
            self.deleted.discard(session.id)  # a session of that id lives (again)
            self.worker.submit(session.id)

    def forget(self, session_id: str, message_ids: Sequence[int] | None) -> None:
        """Forget hook: drop the derived summary; the next read rebuilds it without them.

        Nothing is queued here: the hook runs before the messages are deleted,
        and work started now could still read them. A deleted session is
        tombstoned so that work queued before cannot write for it again.
        """
        with self.lock(session_id):
            if message_ids is None:
                self._forgotten.pop(session_id, None)
                self.deleted.add(session_id)
                self.worker.discard(session_id)
            else:
                self._forgotten.setdefault(session_id, set()).update(message_ids)
            self._rolling.pop(session_id)
            with contextlib.suppress(MemlaneError):
                self.essentials.store.delete_derived(session_id, SUMMARY_KIND)

    def drop_cached(self, session_id: str | None) -> None:
        """Drop this process's rolling summarizer of the session (of all when None; it holds
        sentences of the messages it read); the next fold starts from the stored record."""
        if session_id is None:
            self._rolling.clear()
        else:
            self._rolling.pop(session_id)

    def visible(self, session_id: str, messages: Iterable[Message]) -> list[Message]:
        gone = self._forgotten.get(session_id)
        if not gone:
            return list(messages)
        return [m for m in messages if m.id not in gone]

    # -- reading

    def load(self, session_id: str) -> SummaryRecord | None:
        try:
            raw = self.essentials.store.get_derived(session_id, SUMMARY_KIND)
        except MemlaneError:
            log.warning("summary record of session %s is unreadable; rebuilding it", session_id)
            return None
        if raw is None:
            return None
        rec = SummaryRecord.from_json(session_id, raw)
        if rec is None:
            log.warning("summary record of session %s is malformed; rebuilding it", session_id)
        return rec

    def current(self, session_id: str, *, catch_up: bool = True) -> SummaryRecord | None:
        """The session's summary record, brought up to date first when ``catch_up``."""
        if catch_up:
            return self.update(session_id)
        return self.load(session_id)

    # -- writing

    def _first_visible_id(self, session_id: str) -> int | None:
        for msg in self.essentials.store.iter_messages(session_id, batch=1, include_hidden=False):
            if msg.id is not None and msg.id not in self._forgotten.get(session_id, ()):
                return msg.id
        return None

    def update(self, session_id: str, *, force: bool = False) -> SummaryRecord:
        """Summarize every full block that is due; with ``force`` also a final partial one.

        Returns the current record (written to the store when it changed).
        """
        # The store's lock spans processes: another one folding the same blocks
        # would otherwise overwrite this record with its own copy.
        with self.lock(session_id), self.essentials.store.session_lock(session_id, SUMMARY_KIND):
            rec = self.load(session_id)
            changed = False
            first = self._first_visible_id(session_id)
            if rec is not None and rec.last_message_id and (first is None or first > rec.first_message_id):
                # Messages it covers were hidden (/clear) or forgotten: start over.
                log.info("summary of session %s covers hidden messages; rebuilding", session_id)
                rec, changed = None, True
            if rec is None:
                rec = SummaryRecord(session_id)
                self._rolling.pop(session_id)
            tail = self.visible(
                session_id,
                self.essentials.store.iter_messages(
                    session_id, after_id=rec.last_message_id, include_hidden=False
                ),
            )
            turns = split_turns(tail)
            # The newest turn may still be in flight: never summarize it, except
            # on shutdown (force), when it is complete by definition.
            hold = self.keep_raw if force else max(self.keep_raw, 1)
            ready = turns[: max(0, len(turns) - hold)]
            while len(ready) >= self.every or (force and ready):
                block, ready = ready[: self.every], ready[self.every :]
                self._fold(rec, block)
                changed = True
            if changed:
                rec.updated_at = utcnow().isoformat()
                with contextlib.suppress(MemlaneError):  # the session may be gone
                    self.essentials.store.put_derived(session_id, SUMMARY_KIND, rec.to_json())
            return rec

    def _fold(self, rec: SummaryRecord, block_turns: list[list[Message]]) -> None:
        """Add one block: its delta, then the rolling summary updated with it."""
        msgs = [m for turn in block_turns for m in turn]
        counter = self.essentials.counter
        delta = self.summarizer.summarize(msgs, max_tokens=self.block_max_tokens)
        rolling = self._rolling.get(rec.session_id)
        if isinstance(self.summarizer, ExtractiveSummarizer):
            if rolling is None:
                rolling = RollingSummary(max_tokens=self.rolling_max_tokens, summarizer=self.summarizer)
                self._rolling.put(rec.session_id, rolling)
            # Passing the stored text re-seeds the object only if it differs
            # (another process wrote it, or this object is new).
            text = rolling.update(msgs, previous_summary=rec.text or None)
        else:
            text = self.summarizer.summarize(
                msgs, max_tokens=self.rolling_max_tokens, previous_summary=rec.text or None
            )
        source = sum(m.token_count if m.token_count is not None else counter.count_message(m) for m in msgs)
        ids = [m.id for m in msgs if m.id is not None]
        block = SummaryBlock(
            index=rec.blocks[-1].index + 1 if rec.blocks else 0,
            first_message_id=min(ids, default=rec.last_message_id),
            last_message_id=max(ids, default=rec.last_message_id),
            first_turn=rec.covered_turns,
            turns=len(block_turns),
            text=delta,
            topics=extract_keyphrases([m.content for m in msgs if m.role in ("user", "assistant")], 4),
            tokens=counter.count(delta),
            source_tokens=source,
            started_at=min(m.created_at for m in msgs).isoformat(),
            ended_at=max(m.created_at for m in msgs).isoformat(),
        )
        rec.blocks.append(block)
        if len(rec.blocks) > MAX_TEXT_BLOCKS:
            rec.blocks[-MAX_TEXT_BLOCKS - 1].text = ""
        if not rec.first_message_id:
            rec.first_message_id = block.first_message_id
        rec.last_message_id = block.last_message_id
        rec.covered_turns += len(block_turns)
        rec.text = text
        rec.tokens = counter.count(text)
        rec.source_tokens += source
        rec.tokens_saved = max(0, rec.source_tokens - rec.tokens)
        rec.summarizer = self.summarizer_name

    def flush(self, timeout: float | None = None) -> bool:
        return self.worker.flush(timeout)

    def close(self) -> None:
        self.worker.close()


def block_time(block: SummaryBlock) -> datetime | None:
    try:
        return datetime.fromisoformat(block.started_at) if block.started_at else None
    except ValueError:
        return None
