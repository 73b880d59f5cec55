"""The Anchor (the person the agent works for), rooms, and transcripts that name speakers.

Seed 003: a conversation is a room keyed by its external id, with many participants;
each message keeps its author's id and display name; the Anchor is configured by id
(``MEMLANE_ANCHOR_ID``, or ``MATRIX_USER_ID`` for compatibility, default ``cli-user``)
and is *computed* whenever it is needed — never stored — so changing the setting changes
it everywhere, in the CLI and in every room alike.

For the context engine: :func:`render_transcript` and :func:`label_messages` are the two
ways to show speakers to a model::

    Anchor (JanHein): What is quantum computing?
    Assistant: Quantum computing uses qubits ...
    Maria: How does that differ from classical computing?

``mem.parts.render_transcript`` is :func:`render_transcript` bound to the
Memory's current Anchor and its ``settings.anchor_name`` (``fn(messages) -> str``), and ``mem.parts.label_messages``
likewise for :func:`label_messages` (``fn(messages) -> list[Message]``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from memlane.config import Settings
from memlane.errors import ConflictError, NotFoundError
from memlane.models import Message, SearchHit, Session

if TYPE_CHECKING:
    from memlane.notes.service import NotesService
    from memlane.store import Store
    from memlane.store.erase import EraseCounts


class SessionMaker(Protocol):
    """Makes and reads sessions the way ``Memory`` (and ``MemoryClient``) do."""

    def create_session(
        self, system_prompt: str | None = None, metadata: Mapping[str, Any] | None = None, *,
        title: str | None = None, session_id: str | None = None, tenant_id: str = "default",
    ) -> str: ...
    def get_session(self, session_id: str) -> Session: ...


class HasNotesPart(Protocol):
    @property
    def notes(self) -> NotesService | None: ...


class RoomMemory(SessionMaker, Protocol):
    """What memory commands, forgetting a conversation and lifecycle maintenance use of a
    memory (``Memory`` has it): its store and settings, sessions, search, pinning, the one
    erase routine, flush and the notes part; nothing else of it is in reach."""

    @property
    def store(self) -> Store: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def parts(self) -> HasNotesPart: ...
    def ensure_session(self, session_id: str, **fields: Any) -> Session: ...
    def search(
        self, query: str, *, session_id: str | None = None, tenant_id: str | None = None, top_k: int = 10,
    ) -> list[SearchHit]: ...
    def mark_important(
        self, message_id: int, *, importance: float = 1.0, pinned: bool | None = True
    ) -> Message: ...
    def erase(
        self, *, session_ids: Sequence[str] = (), message_ids: Sequence[int] = (),
        note_ids: Sequence[int] = (), keep_notes: bool = False,
    ) -> EraseCounts: ...
    def flush(self, timeout: float | None = None) -> None: ...


__all__ = [
    "DEFAULT_ANCHOR_ID",
    "HasNotesPart",
    "RoomMemory",
    "SessionMaker",
    "anchor_id",
    "cli_author",
    "display_name",
    "ensure_room",
    "is_anchor",
    "label_messages",
    "render_transcript",
    "speaker_label",
]

#: The Anchor of a CLI-only setup, when neither MEMLANE_ANCHOR_ID nor MATRIX_USER_ID is set.
DEFAULT_ANCHOR_ID = "cli-user"


def anchor_id(settings: Settings) -> str:
    """The configured Anchor id (``settings.anchor_id`` already honours MATRIX_USER_ID)."""
    return (settings.anchor_id or "").strip() or DEFAULT_ANCHOR_ID


def is_anchor(author_id: str | None, anchor: str) -> bool:
    """Whether ``author_id`` is the Anchor. A message without an author is not."""
    return bool(author_id) and author_id == anchor


def display_name(author_id: str | None, author_name: str | None = None) -> str:
    """A readable name: the display name, else the id without Matrix decoration."""
    if author_name and author_name.strip():
        return author_name.strip()
    if author_id:
        return author_id.lstrip("@").split(":", 1)[0] or author_id
    return "User"


def cli_author(settings: Settings) -> tuple[str, str | None]:
    """(author id, display name) to stamp on CLI messages: the CLI user *is* the Anchor."""
    return anchor_id(settings), settings.anchor_name


def speaker_label(msg: Message, anchor: str, *, assistant_name: str = "Assistant",
                  anchor_label: str = "Anchor", anchor_name: str | None = None) -> str:
    """Who said ``msg``, as the transcript shows it ("Anchor (JanHein)", "Maria", "Assistant")."""
    if msg.role == "assistant":
        return assistant_name
    if msg.role == "system":
        return "System"
    if msg.role == "tool":
        return f"Tool ({msg.name})" if msg.name else "Tool"
    if is_anchor(msg.author_id, anchor):
        name = display_name(msg.author_id, msg.author_name or anchor_name)
        return f"{anchor_label} ({name})"
    if msg.author_id is None and msg.author_name is None:
        return "User"
    return display_name(msg.author_id, msg.author_name)


def _tool_calls_text(msg: Message) -> str:
    parts = []
    for call in msg.tool_calls or ():
        fn = call.get("function") if isinstance(call.get("function"), dict) else {}
        name = (fn or {}).get("name") or call.get("name") or "tool"
        args = (fn or {}).get("arguments") or ""
        if not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        parts.append(f"{name}({' '.join(args.split())})")
    return "[calls " + ", ".join(parts) + "]" if parts else ""


def render_transcript(
    messages: Sequence[Message],
    anchor_id: str,
    *,
    assistant_name: str = "Assistant",
    anchor_label: str = "Anchor",
    anchor_name: str | None = None,
    include_tools: bool = True,
) -> str:
    """A plain-text transcript, one speaker-labelled line (or paragraph) per message.

    The Anchor's messages read ``Anchor (Name): ...``; other people by their display name;
    the agent's replies ``Assistant: ...``. ``anchor_name`` names the Anchor where a message
    carries only the id (the CLI: ``settings.anchor_name``). Tool calls and results are shown as system
    actions beside the dialogue unless ``include_tools`` is False.
    """
    lines: list[str] = []
    for msg in messages:
        if msg.role == "tool" and not include_tools:
            continue
        label = speaker_label(msg, anchor_id, assistant_name=assistant_name, anchor_label=anchor_label,
                              anchor_name=anchor_name)
        text = msg.content.strip()
        calls = _tool_calls_text(msg) if include_tools else ""
        if calls:
            text = f"{text} {calls}".strip()
        if not text:
            continue
        lines.append(f"{label}: {text}")
    return "\n".join(lines)


def label_messages(
    messages: Sequence[Message], anchor_id: str, *, anchor_label: str = "Anchor", anchor_name: str | None = None
) -> list[Message]:
    """Copies of ``messages`` whose user turns start with the speaker ("Anchor (JanHein): ...").

    For chat-completions APIs, which have one "user" role for everybody in a room. Only
    user messages with a known author are labelled; the stored messages are not touched.
    """
    out: list[Message] = []
    for msg in messages:
        if msg.role == "user" and (msg.author_id or msg.author_name):
            label = speaker_label(msg, anchor_id, anchor_label=anchor_label, anchor_name=anchor_name)
            out.append(msg.with_(content=f"{label}: {msg.content}"))
        else:
            out.append(msg)
    return out


def ensure_room(
    sessions: SessionMaker,
    room_id: str,
    *,
    name: str | None = None,
    tenant_id: str = "default",
    system_prompt: str | None = None,
) -> Session:
    """The conversation of room ``room_id`` (its id *is* the room id), created on first use
    (``sessions``: a Memory or a MemoryClient)."""
    with contextlib.suppress(NotFoundError):
        return sessions.get_session(room_id)
    # Created explicitly (not via auto-create) so a room works even with auto-create off.
    with contextlib.suppress(ConflictError):  # another process created it first
        sessions.create_session(
            session_id=room_id, title=name, tenant_id=tenant_id, system_prompt=system_prompt,
            metadata={"kind": "room", "room_id": room_id, **({"room_name": name} if name else {})},
        )
    return sessions.get_session(room_id)
