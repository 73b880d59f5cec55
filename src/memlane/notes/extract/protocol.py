"""What an extractor is (:class:`Extractor`) and who is who while it runs
(:class:`ExtractionContext`: the Anchor, and how to name speakers)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from memlane.models import Message
from memlane.notes.models import NoteCandidate

#: The author name a note gets when its message named nobody (no author, no Anchor name):
#: a placeholder, not a name, so listings show whom the note is about instead.
UNKNOWN_SPEAKER = "The user"


@dataclass(slots=True)
class ExtractionContext:
    """Who is who while extracting: the Anchor, and how to name speakers."""

    session_id: str
    anchor_id: str
    anchor_name: str | None = None
    session_user_id: str | None = None
    #: Message texts that are memory commands (never turned into notes themselves).
    is_command: Callable[[str], bool] | None = None

    def speaker(self, msg: Message) -> tuple[str, str]:
        """(user id, display name) of who said ``msg``.

        A user message without an author belongs to the session's user, else to the Anchor:
        in a single-user agent the person typing *is* the one the agent works for.
        """
        uid = msg.author_id or self.session_user_id or self.anchor_id
        if msg.author_name:
            return uid, msg.author_name
        if uid == self.anchor_id and self.anchor_name:
            return uid, self.anchor_name
        if msg.author_id:
            return uid, msg.author_id.lstrip("@").split(":", 1)[0]
        return uid, UNKNOWN_SPEAKER


@runtime_checkable
class Extractor(Protocol):
    """Anything that proposes notes from a block of messages (oldest first)."""

    def extract(self, messages: Sequence[Message], ctx: ExtractionContext) -> list[NoteCandidate]: ...
