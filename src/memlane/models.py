"""Plain typed records that flow through memlane.

These are dataclasses on purpose: cheap to build on the hot path, easy to read,
and independent of any storage or transport. Validation of outside input
happens once, in :func:`message_from_input`, so the rest of the code can trust
these records.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any, Literal, cast

from memlane.errors import InvalidInputError
from memlane.items import is_item, is_private, read_item
from memlane.validation import check_object, check_text_chars

Role = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})
SessionStatus = Literal[
    "active", "paused", "resuming", "awaiting_clarification", "shutdown_clean", "ended", "archived"
]
SESSION_STATUSES: frozenset[str] = frozenset(
    {"active", "paused", "resuming", "awaiting_clarification", "shutdown_clean", "ended", "archived"}
)

#: A message larger than this is refused: it would blow any context window and
#: usually means a caller passed a file by mistake. Configurable on Memory.
DEFAULT_MAX_MESSAGE_CHARS = 1_000_000

#: Per-turn fields the seed projects record beside a user+assistant exchange.
TURN_FIELDS: tuple[str, ...] = (
    "intent",
    "action_name",
    "job_refs",
    "model_used",
    "confidence_score",
    "processing_time",
    "resolved_query",
    "context_used",
)

JSON = dict[str, Any]


def utcnow() -> datetime:
    return datetime.now(UTC)


def to_epoch(ts: datetime) -> float:
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return ts.timestamp()


def from_epoch(value: float) -> datetime:
    return datetime.fromtimestamp(value, UTC)


@dataclass(slots=True)
class Session:
    id: str
    user_id: str | None = None
    agent_id: str | None = None
    tenant_id: str = "default"
    title: str | None = None
    system_prompt: str | None = None
    metadata: JSON = field(default_factory=dict)
    status: str = "active"
    created_at: datetime = field(default_factory=utcnow)
    updated_at: datetime = field(default_factory=utcnow)
    last_active_at: datetime = field(default_factory=utcnow)
    message_count: int = 0
    #: Moves at every change of what the session's window shows (append, hide, pin,
    #: message metadata, forget of a message, system prompt); stores keep it.
    version: int = 0

    def to_dict(self) -> JSON:
        out: JSON = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.isoformat() if isinstance(value, datetime) else value
        return out


@dataclass(slots=True)
class Message:
    role: str
    content: str
    session_id: str = ""
    id: int | None = None
    name: str | None = None
    tool_calls: list[JSON] | None = None
    tool_call_id: str | None = None
    author_id: str | None = None
    author_name: str | None = None
    turn_id: str | None = None
    created_at: datetime = field(default_factory=utcnow)
    metadata: JSON = field(default_factory=dict)
    importance: float = 0.0
    pinned: bool = False
    hidden: bool = False
    token_count: int | None = None
    #: The framework item exactly as given (Responses item, content parts, Anthropic
    #: blocks), returned by :meth:`to_item`; role/content/tool_calls are what memlane
    #: read from it (memlane.items). None for a plain chat message.
    item: JSON | None = None

    @property
    def in_window(self) -> bool:
        """Whether a chat model should see this message again: not reasoning, not an
        item with nothing memlane can show (an image-only message, a hosted-tool call)."""
        if is_private(self.item):
            return False
        return bool(self.content) or bool(self.tool_calls) or self.role == "tool"

    def to_item(self) -> JSON:
        """The message as it was given: the framework's item, or the chat message."""
        return dict(self.item) if self.item is not None else self.to_openai()

    def to_openai(self) -> JSON:
        """The message as an OpenAI chat-completions message dict (what memlane read)."""
        out: JSON = {"role": self.role, "content": self.content}
        if self.name:
            out["name"] = self.name
        if self.tool_calls:
            out["tool_calls"] = self.tool_calls
        if self.tool_call_id:
            out["tool_call_id"] = self.tool_call_id
        return out

    def to_dict(self) -> JSON:
        out: JSON = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.isoformat() if isinstance(value, datetime) else value
        return out

    def with_(self, **changes: Any) -> Message:
        return replace(self, **changes)

    def stored_as(self, message_id: int, session_id: str) -> Message:
        """A copy with the id and session a store gave it (the write path's one copy:
        ``with_`` checks every field through dataclasses.replace, several times slower)."""
        copy = object.__new__(Message)
        for name in _MESSAGE_FIELDS:
            setattr(copy, name, getattr(self, name))
        copy.id = message_id
        copy.session_id = session_id
        return copy


#: Message's fields, in order (stored_as copies them without dataclasses.replace).
_MESSAGE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Message))


@dataclass(slots=True)
class Turn:
    """One user+assistant exchange, written in one transaction."""

    turn_id: str
    session_id: str
    user_message: Message
    assistant_message: Message
    intent: str | None = None
    action_name: str | None = None
    job_refs: list[str] = field(default_factory=list)
    model_used: str | None = None
    confidence_score: float | None = None
    processing_time: float | None = None
    resolved_query: str | None = None
    context_used: bool | None = None
    metadata: JSON = field(default_factory=dict)
    created_at: datetime = field(default_factory=utcnow)

    def to_dict(self) -> JSON:
        return {
            "turn_id": self.turn_id,
            "session_id": self.session_id,
            "query": self.user_message.content,
            "response": self.assistant_message.content,
            "intent": self.intent,
            "action_name": self.action_name,
            "job_refs": list(self.job_refs),
            "model_used": self.model_used,
            "confidence_score": self.confidence_score,
            "processing_time": self.processing_time,
            "resolved_query": self.resolved_query,
            "context_used": self.context_used,
            "metadata": self.metadata,
            "created_at": self.created_at.isoformat(),
            "user_message_id": self.user_message.id,
            "assistant_message_id": self.assistant_message.id,
        }


@dataclass(slots=True)
class SearchHit:
    message: Message
    score: float
    scores: dict[str, float] = field(default_factory=dict)
    snippet: str = ""
    session: Session | None = None

    def to_dict(self) -> JSON:
        return {
            "message": self.message.to_dict(),
            "score": self.score,
            "scores": dict(self.scores),
            "snippet": self.snippet,
            "session_id": self.message.session_id,
            "session_title": self.session.title if self.session else None,
        }


@dataclass(slots=True)
class SessionFilter:
    """Filters for listing sessions; None means 'any'."""

    user_id: str | None = None
    agent_id: str | None = None
    tenant_id: str | None = None
    status: str | None = None
    metadata: JSON = field(default_factory=dict)
    active_since: datetime | None = None
    inactive_before: datetime | None = None


@dataclass(slots=True)
class MessageFilter:
    """Filters for searching messages; None means 'any'."""

    session_id: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    tenant_id: str | None = None
    roles: tuple[str, ...] | None = None
    authors: tuple[str, ...] | None = None
    since: datetime | None = None
    until: datetime | None = None
    include_hidden: bool = False
    #: only sessions that belong to no user: what a session without a user may recall
    unowned: bool = False


# --------------------------------------------------------------------- input


def _check_text(value: object, what: str, max_chars: int) -> str:
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a string, got {type(value).__name__}")
    if len(value) > max_chars:
        raise InvalidInputError(
            f"{what} is {len(value):,} characters; the limit is {max_chars:,} "
            "(raise max_message_chars, or store large files elsewhere and keep a link)"
        )
    return check_text_chars(value, what)


def check_json(value: object, what: str) -> JSON:
    """Metadata must be a JSON object that round-trips; reject anything else loudly."""
    if value is None or (type(value) is dict and not value):
        return {}  # nothing to check (a new empty dict: the caller's is never shared)
    check_object(value, what)  # depth first: json.dumps recurses
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
        text.encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{what} is not JSON-serialisable: {exc}") from exc
    return cast(JSON, json.loads(text))


def _parse_time(value: object) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, int | float) and math.isfinite(value):
        return from_epoch(float(value))
    if isinstance(value, str):
        try:
            ts = datetime.fromisoformat(value)
        except ValueError as exc:
            raise InvalidInputError(f"created_at {value!r} is not an ISO-8601 time") from exc
        return ts if ts.tzinfo else ts.replace(tzinfo=UTC)
    raise InvalidInputError(f"created_at must be a datetime, epoch seconds or ISO string, got {value!r}")


def _check_tool_calls(value: object) -> list[JSON] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise InvalidInputError("tool_calls must be a list of OpenAI tool-call objects")
    calls: list[JSON] = []
    for i, call in enumerate(value):
        checked = check_json(call, f"tool_calls[{i}]")
        if not isinstance(checked.get("id"), str) or not checked["id"]:
            raise InvalidInputError(f"tool_calls[{i}] needs a non-empty string 'id'")
        calls.append(checked)
    return calls or None


_MESSAGE_KEYS = frozenset(
    {
        "role", "content", "name", "tool_calls", "tool_call_id", "author_id", "author_name",
        "turn_id", "created_at", "metadata", "importance", "pinned", "id", "session_id",
        "hidden", "token_count", "item",
    }
)
#: memlane's own fields, accepted beside a framework item (everything else is the item).
_OWN_KEYS = frozenset(
    {"author_id", "author_name", "turn_id", "created_at", "metadata", "importance", "pinned", "session_id",
     "hidden", "token_count"}
)


def _split_item(raw: dict[str, Any]) -> dict[str, Any]:
    """An item given as input: memlane's fields plus what it reads from the item itself."""
    own = {k: raw[k] for k in _OWN_KEYS if k in raw}
    item = check_json({k: v for k, v in raw.items() if k not in _OWN_KEYS}, "item")
    reading = read_item(item)
    return {
        **own, "role": reading.role, "content": reading.content, "tool_calls": reading.tool_calls,
        "tool_call_id": reading.tool_call_id, "name": reading.name, "item": item,
    }


def message_from_input(
    value: Message | Mapping[str, Any], *, max_chars: int = DEFAULT_MAX_MESSAGE_CHARS
) -> Message:
    """Validate a Message or an OpenAI-style dict and return a clean Message.

    Raises InvalidInputError naming the field that is wrong; never stores anything.
    """
    if isinstance(value, Message):
        raw: dict[str, Any] = value.to_dict()
        raw["created_at"] = value.created_at
    elif isinstance(value, Mapping):
        raw = dict(value)
    else:
        raise InvalidInputError(
            f"a message must be a dict like {{'role': 'user', 'content': 'hi'}} or a Message, "
            f"got {type(value).__name__}"
        )
    if is_item(raw):
        raw = _split_item(raw)
    given_item = check_json(raw["item"], "item") if raw.get("item") is not None else None
    unknown = set(raw) - _MESSAGE_KEYS
    if unknown:
        raise InvalidInputError(
            f"unknown message field(s) {sorted(unknown)}; put extra data under 'metadata'"
        )
    role = raw.get("role")
    if role not in ROLES:
        raise InvalidInputError(f"role must be one of {sorted(ROLES)}, got {role!r}")
    content = raw.get("content")
    tool_calls = _check_tool_calls(raw.get("tool_calls"))
    if content is None:
        if role == "assistant" and tool_calls:
            content = ""
        else:
            raise InvalidInputError(f"a {role} message needs 'content' (a string)")
    content = _check_text(content, "content", max_chars)
    tool_call_id = raw.get("tool_call_id")
    if role == "tool" and not tool_call_id:
        raise InvalidInputError("a tool message needs 'tool_call_id' naming the call it answers")
    importance = raw.get("importance", 0.0) or 0.0
    if not isinstance(importance, int | float) or not 0.0 <= float(importance) <= 1.0:
        raise InvalidInputError(f"importance must be a number in 0..1, got {importance!r}")
    optional: dict[str, str | None] = {}
    for key in ("name", "tool_call_id", "author_id", "author_name", "turn_id"):
        item = raw.get(key)
        if item is not None and not isinstance(item, str):
            raise InvalidInputError(f"{key} must be a string, got {type(item).__name__}")
        optional[key] = _check_text(item, key, 10_000) if item is not None else None
    return Message(
        role=role,
        content=content,
        session_id=str(raw.get("session_id") or ""),
        name=optional["name"],
        tool_calls=tool_calls,
        tool_call_id=optional["tool_call_id"],
        author_id=optional["author_id"],
        author_name=optional["author_name"],
        turn_id=optional["turn_id"],
        created_at=_parse_time(raw["created_at"]) if raw.get("created_at") else utcnow(),
        metadata=check_json(raw.get("metadata"), "metadata"),
        importance=float(importance),
        pinned=bool(raw.get("pinned", False)),
        item=given_item,
    )


# ---------------------------------------------------------------------------- context sections
# The vocabulary of a context packet's sections, here so settings can check a priority
# order when they are read (config is core; the allocator lives in context/budget.py).

#: Every section a packet can spend tokens on.
SECTIONS: tuple[str, ...] = (
    "system", "latest", "pinned", "state", "summary", "notes", "recalled", "recent",
)
#: Highest priority first. "latest" is the newest turn: kept whenever it fits at all.
DEFAULT_PRIORITIES: tuple[str, ...] = SECTIONS


def check_priorities(priorities: Iterable[str] | None) -> tuple[str, ...]:
    """Validated priority order; sections left out are not rendered at all."""
    if priorities is None:
        return DEFAULT_PRIORITIES
    if isinstance(priorities, str):
        priorities = [p.strip() for p in priorities.split(",") if p.strip()]
    out = tuple(priorities)
    unknown = [p for p in out if p not in SECTIONS]
    if unknown or len(set(out)) != len(out):
        raise InvalidInputError(
            f"priorities must name each section at most once, from {', '.join(SECTIONS)}; "
            f"got {list(out)}"
        )
    return out
