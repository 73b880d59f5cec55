"""The newest messages of a session that fit a token budget.

Reads the log backwards in pages through the (session_id, id) index, so the
cost depends on the budget, never on the length of the history. Tool results
travel with the assistant message that called them: a group is kept only when
every call of the assistant message has its result right after it, and then it
is kept or dropped whole. An incomplete group (a call without its result, or a
result without its call) is left out and the window says so in ``notes``,
because the chat APIs reject a request that contains one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from memlane.errors import CorruptRecordError
from memlane.models import Message
from memlane.store.base import Store
from memlane.tokens import TokenCounter, min_tokens

log = logging.getLogger(__name__)

#: Tokens of the reply priming that every chat request carries.
REPLY_PRIMING = 3
_PAGE = 64
_MIN_PAGE, _MAX_PAGE = 8, 1000


@dataclass(slots=True)
class Window:
    messages: list[Message] = field(default_factory=list)
    tokens: int = 0
    truncated: bool = False  # the newest message alone was cut to fit
    exhausted: bool = True  # the whole visible history fit
    #: What was left out on purpose and why (incomplete tool groups, corrupted rows).
    notes: list[str] = field(default_factory=list)
    #: Ids of stored rows that could not be decoded and were skipped (fail-open mode).
    skipped_ids: list[int] = field(default_factory=list)


def message_tokens(msg: Message, counter: TokenCounter, *, use_cache: bool = True) -> int:
    """Tokens of one message; the count cached at write time is used only when the
    caller knows it was made with this counter's encoding (``use_cache``)."""
    if use_cache and msg.token_count is not None:
        return msg.token_count
    return counter.count_message(msg)


def group_tokens(group: list[Message], counter: TokenCounter, room: int, *, use_cache: bool = True) -> int:
    """Tokens of ``group``, exact when they fit ``room``; past it, possibly only a lower
    bound already past it. Counting a message of megabytes exactly takes seconds; a
    window that cannot hold it needs to know only that."""
    total = 0
    for msg in group:
        if not (use_cache and msg.token_count is not None):
            bound = min_tokens(counter, msg.content)
            if total + bound > room:
                return total + bound
        total += message_tokens(msg, counter, use_cache=use_cache)
    return total


def _bad_row(exc: CorruptRecordError) -> int | None:
    row = exc.row_id
    return row if exc.table == "messages" and isinstance(row, int) else None


def _newest_first(
    store: Store,
    session_id: str,
    window: Window,
    *,
    skip_corrupt: bool,
    page_size: Callable[[], int],
) -> Iterator[Message]:
    """The visible messages of a session, newest first, read page by page.

    ``page_size`` is asked before each page: the window sizes later pages by what is left
    of its budget, so it neither decodes many rows it will not use nor makes many trips.

    With ``skip_corrupt`` a row that cannot be decoded is skipped (and its id kept in
    ``window.skipped_ids``) instead of failing the whole window: a page that fails is
    re-read one row at a time, so only the bad rows are lost.
    """
    before: int | None = None
    while True:
        size = max(1, page_size())
        try:
            page = store.recent_messages(session_id, size, before_id=before)
        except CorruptRecordError:
            if not skip_corrupt:
                raise
            page = None
        if page is not None:
            yield from page
            if len(page) < size:
                return
            before = page[-1].id
            continue
        for _ in range(_PAGE):
            try:
                one = store.recent_messages(session_id, 1, before_id=before)
            except CorruptRecordError as exc:
                bad = _bad_row(exc)
                if bad is None:  # cannot tell which row: nothing safe to skip past
                    raise
                log.error("skipping corrupted message %d in session %s: %s", bad, session_id, exc)
                window.skipped_ids.append(bad)
                window.notes.append(f"skipped corrupted message {bad}")
                before = bad
                continue
            if not one:
                return
            yield one[0]
            before = one[0].id


def _complete(call: Message, results: list[Message]) -> bool:
    """Whether ``results`` (oldest first) answer every call of ``call`` and nothing else."""
    wanted = sorted(str(c.get("id")) for c in call.tool_calls or ())
    return wanted == sorted(str(r.tool_call_id) for r in results)


def _merged_calls(msg: Message, later: list[Message]) -> Message:
    """One assistant message carrying ``msg``'s calls and those of the ``later`` call
    messages (oldest first): Responses items give each parallel call its own item,
    a chat request wants them in one message before their results."""
    if not later:
        return msg
    calls = [c for m in (msg, *later) for c in m.tool_calls or ()]
    text = "\n".join(m.content for m in (msg, *later) if m.content)
    return msg.with_(tool_calls=calls, content=text, token_count=None)


def _groups(messages: Iterator[Message], window: Window) -> Iterator[list[Message]]:
    """Newest-first groups; each group is oldest-first and self-contained."""
    results: list[Message] = []  # tool results seen so far, newest first
    later_calls: list[Message] = []  # call messages whose results are still above
    for msg in messages:
        if not msg.in_window:  # reasoning, image-only items: kept, never shown again
            continue
        if msg.role == "tool":
            results.append(msg)
            continue
        if msg.role == "assistant" and msg.tool_calls:
            own = {str(c.get("id")) for c in msg.tool_calls}
            unclaimed = {str(r.tool_call_id) for r in results} - {
                str(c.get("id")) for m in later_calls for c in m.tool_calls or ()
            }
            if own < unclaimed:  # a parallel call of the same step: its siblings are older
                later_calls.insert(0, msg)
                continue
            msg = _merged_calls(msg, later_calls)
            later_calls = []
            group = [msg, *reversed(results)]
            results = []
            if _complete(msg, group[1:]):
                yield group
            else:
                window.notes.append(
                    f"left out message {msg.id} and its {len(group) - 1} tool result(s): "
                    "not every tool call has its result"
                )
            continue
        if results:
            window.notes.append(
                f"left out {len(results)} tool result(s) without their call "
                f"(ids {', '.join(str(r.id) for r in reversed(results))})"
            )
            results, later_calls = [], []
        yield [msg]
    if results:
        window.notes.append(
            f"left out {len(results)} tool result(s) without their call "
            f"(ids {', '.join(str(r.id) for r in reversed(results))})"
        )


def recent_window(
    store: Store,
    session_id: str,
    max_tokens: int,
    counter: TokenCounter,
    *,
    reserved: int = 0,
    max_messages: int | None = None,
    use_cache: bool = True,
    skip_corrupt: bool = False,
) -> Window:
    """The newest messages whose tokens plus ``reserved`` fit ``max_tokens``; oldest first.

    ``use_cache`` says the token counts stored on the messages were made with
    ``counter``'s encoding; otherwise every message is counted again.
    """
    budget = max_tokens - reserved - REPLY_PRIMING
    chosen: list[list[Message]] = []
    used = 0
    window = Window()
    count = 0
    first: list[Message] | None = None

    def page_size() -> int:
        # First page: a fixed guess. Later pages: the messages the rest of the budget
        # should hold at the mean size so far, plus a margin (a page too short only
        # costs one more trip; one too long decodes rows that are thrown away).
        if count == 0 or used <= 0:
            return _PAGE
        wanted = (budget - used) * count / used
        if max_messages is not None:
            wanted = min(wanted, max_messages - count)
        return min(_MAX_PAGE, max(_MIN_PAGE, int(wanted * 1.1) + 4))

    messages = _newest_first(store, session_id, window, skip_corrupt=skip_corrupt, page_size=page_size)
    for group in _groups(messages, window):
        if first is None:
            first = group
        cost = group_tokens(group, counter, budget - used, use_cache=use_cache)
        if used + cost > budget or (max_messages is not None and count + len(group) > max_messages):
            window.exhausted = False
            break
        chosen.append(group)
        used += cost
        count += len(group)
    if not chosen and not window.exhausted and first is not None and budget > 0:
        # Even the newest group does not fit: send its newest message alone, cut.
        msg = first[-1]
        overhead = counter.count_message(msg.with_(content=""))
        room = max(0, budget - overhead)
        cut = counter.truncate(msg.content, room)
        bound = min_tokens(counter, msg.content)
        uncounted = not (use_cache and msg.token_count is not None)
        log.warning(
            "message %s (%s tokens) exceeds the %d-token budget; sending it truncated",
            msg.id,
            f"at least {bound}" if uncounted and bound > max_tokens
            else message_tokens(msg, counter, use_cache=use_cache),
            max_tokens,
        )
        trimmed = msg.with_(
            content=cut,
            tool_calls=None,
            metadata={**msg.metadata, "truncated": True},
            token_count=None,
        )
        if trimmed.role == "tool":
            trimmed = trimmed.with_(role="user", tool_call_id=None)
        chosen = [[trimmed]]
        used = counter.count_message(trimmed)
        window.truncated = True
        window.notes.append(f"message {msg.id} was cut to fit the {max_tokens}-token budget")
    window.messages = [m for group in reversed(chosen) for m in group]
    window.tokens = used + REPLY_PRIMING + reserved if window.messages else reserved
    for note in window.notes:
        log.info("window of session %s: %s", session_id, note)
    return window
