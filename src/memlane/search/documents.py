"""How a stored message becomes the text its vector is made from.

A chat turn alone is often unsearchable: "Yes, last Saturday!" only means something next to
the question it answers, and a question about "what Caroline researched" matches her turn
better when the turn says it is hers. So a message is embedded as

    <speaker>: <the message>
    (reply to <previous speaker>: <previous turn, shortened>)

Own text first, context after: mean pooling weighs every token alike, and on LoCoMo this
order beat "previous turn, then message" (semantic Recall@10 0.54 vs 0.47) and the message
alone with its speaker (0.49) or without (0.30).

The recipe name is stored with the vectors; changing it makes the database ask for
``memlane reindex`` like a change of model does.
"""

from __future__ import annotations

from collections.abc import Sequence

from memlane.models import Message
from memlane.store import Store

#: Bump when document_text changes: stored vectors then no longer match new queries' shape.
RECIPE = "turn+reply-to-v1"

#: The previous turn is context, not content: keep enough of it to disambiguate, not so
#: much that it outweighs the message itself in the mean-pooled vector.
_PREVIOUS_CHARS = 150


def speaker_of(msg: Message) -> str:
    return msg.author_name or msg.author_id or msg.role


def document_text(msg: Message, previous: Message | None) -> str:
    own = f"{speaker_of(msg)}: {msg.content}"
    if previous is None or not previous.content:
        return own
    prev = previous.content
    if len(prev) > _PREVIOUS_CHARS:
        prev = prev[:_PREVIOUS_CHARS].rsplit(" ", 1)[0] + " …"
    return f"{own}\n(reply to {speaker_of(previous)}: {prev})"


def documents_for(store: Store, messages: Sequence[Message]) -> list[str]:
    """The embedding text of each message, fetching a previous turn only when needed."""
    out: list[str] = []
    last_in_session: dict[str, Message] = {}
    for msg in sorted(messages, key=lambda m: m.id or 0):
        prev = last_in_session.get(msg.session_id)
        if prev is None and msg.id is not None:
            found = store.recent_messages(msg.session_id, 1, before_id=msg.id, include_hidden=True)
            prev = found[0] if found else None
        last_in_session[msg.session_id] = msg
        out.append(document_text(msg, prev))
    # back to the caller's order
    order = sorted(range(len(messages)), key=lambda i: messages[i].id or 0)
    result = [""] * len(messages)
    for text, i in zip(out, order, strict=True):
        result[i] = text
    return result
