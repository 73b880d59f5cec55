"""The newest messages of a session that fit a token budget.

Reads the log backwards in pages through the (session_id, id) index, so the
cost depends on the budget, never on the length of the history. Tool results
travel with the assistant message that called them: a group is kept or
dropped whole, so the window never starts with an orphaned tool message.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from memlane.models import Message
from memlane.store.base import Store
from memlane.tokens import TokenCounter

log = logging.getLogger(__name__)

#: Tokens of the reply priming that every chat request carries.
REPLY_PRIMING = 3
_PAGE = 64


@dataclass(slots=True)
class Window:
    messages: list[Message] = field(default_factory=list)
    tokens: int = 0
    truncated: bool = False  # the newest message alone was cut to fit
    exhausted: bool = True  # the whole visible history fit


def message_tokens(msg: Message, counter: TokenCounter, *, use_cache: bool = True) -> int:
    """Tokens of one message; the count cached at write time is used when it was made
    with the same counter (``use_cache``)."""
    if use_cache and msg.token_count is not None:
        return msg.token_count
    return counter.count_message(msg)


def _groups(store: Store, session_id: str, before_id: int | None) -> list[list[Message]]:
    """One page of newest-first groups; a group is oldest-first and self-contained."""
    page = store.recent_messages(session_id, _PAGE, before_id=before_id)
    groups: list[list[Message]] = []
    pending_tools: list[Message] = []
    for msg in page:  # newest first
        if msg.role == "tool":
            pending_tools.append(msg)
            continue
        if pending_tools:
            if msg.role == "assistant" and msg.tool_calls:
                groups.append([msg, *reversed(pending_tools)])
                pending_tools = []
                continue
            # Tool results whose call is not directly before them: drop them rather
            # than send a request the model API would reject.
            log.debug("dropping %d tool results without their call", len(pending_tools))
            pending_tools = []
        groups.append([msg])
    if pending_tools and len(page) == _PAGE:
        # The call is on the next page: re-read from the oldest tool result.
        oldest = pending_tools[-1].id
        more = store.recent_messages(session_id, _PAGE, before_id=oldest)
        for msg in more:
            if msg.role == "assistant" and msg.tool_calls:
                groups.append([msg, *reversed(pending_tools)])
                break
            if msg.role != "tool":
                break
            pending_tools.append(msg)
    return groups


def recent_window(
    store: Store,
    session_id: str,
    max_tokens: int,
    counter: TokenCounter,
    *,
    reserved: int = 0,
    max_messages: int | None = None,
    use_cache: bool = True,
) -> Window:
    """The newest messages whose tokens plus ``reserved`` fit ``max_tokens``; oldest first."""
    budget = max_tokens - reserved - REPLY_PRIMING
    chosen: list[list[Message]] = []
    used = 0
    before: int | None = None
    window = Window()
    count = 0
    while True:
        groups = _groups(store, session_id, before)
        if not groups:
            break
        stop = False
        for group in groups:
            cost = sum(message_tokens(m, counter, use_cache=use_cache) for m in group)
            if used + cost > budget or (max_messages is not None and count + len(group) > max_messages):
                stop = True
                window.exhausted = False
                break
            chosen.append(group)
            used += cost
            count += len(group)
        if stop:
            break
        oldest = groups[-1][0].id
        before = oldest
    if not chosen and not window.exhausted:
        newest = store.recent_messages(session_id, 1)
        if newest and budget > 0:
            msg = newest[0]
            overhead = counter.count_message(msg.with_(content=""))
            room = max(0, budget - overhead)
            cut = counter.truncate(msg.content, room)
            log.warning(
                "message %s (%d tokens) exceeds the %d-token budget; sending it truncated",
                msg.id, message_tokens(msg, counter, use_cache=use_cache), max_tokens,
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
    window.messages = [m for group in reversed(chosen) for m in group]
    window.tokens = used + REPLY_PRIMING + reserved if window.messages else reserved
    return window
