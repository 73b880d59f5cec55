"""Windows kept in the shared hot cache (Redis/Valkey at ``redis_url``) for every instance.

An entry's key names the session's state when it was made (its ``version``, which every
change of what a window shows moves in the change's own transaction: append, hide, pin,
message metadata, forget of a message, system prompt) and every argument of the read, so
a stale entry is never looked up: a change moves the key, on every instance at once,
without waiting for events. Entries are also tagged with the session, so a forget drops
them everywhere (:func:`session_tag`); change events of the session do the same on the
instances that hear of them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from memlane.context.window import Window
from memlane.models import Session

__all__ = ["WINDOW_TTL_SECONDS", "decode_window", "encode_window", "session_tag", "window_key"]

#: Entries never go stale (the key moves), so the TTL only bounds what the server keeps.
WINDOW_TTL_SECONDS = 3600.0
#: Bump when the stored shape or the key changes: old entries are then never read.
_FORMAT = 2


def session_tag(session_id: str) -> str:
    return f"session:{session_id}"


def window_key(session: Session, budget: int, encoding: str, *, include_system_prompt: bool) -> str:
    """The key of a window of ``session`` as it is now, for these arguments."""
    # created_at: a session forgotten and made again under its id starts at version 0 again
    state = [
        _FORMAT, session.tenant_id, session.created_at.isoformat(), session.version,
        session.system_prompt if include_system_prompt else None, budget, encoding,
    ]
    digest = hashlib.sha256(json.dumps(state, default=str).encode()).hexdigest()[:32]
    return f"window:{session.id}:{digest}"


def encode_window(win: Window) -> bytes:
    body: dict[str, Any] = {
        "messages": [m.to_dict() for m in win.messages], "tokens": win.tokens,
        "truncated": win.truncated, "exhausted": win.exhausted, "notes": win.notes,
        "skipped_ids": win.skipped_ids,
    }
    return json.dumps(body).encode()


def decode_window(raw: bytes) -> Window:
    from memlane.wire import message_from_dict  # the API's own parser of message dicts

    body = json.loads(raw)
    return Window(
        messages=[message_from_dict(m) for m in body["messages"]], tokens=int(body["tokens"]),
        truncated=bool(body["truncated"]), exhausted=bool(body["exhausted"]),
        notes=list(body["notes"]), skipped_ids=[int(i) for i in body["skipped_ids"]],
    )
