"""Pydantic models at the HTTP edge: what the REST API accepts and returns.

Inside, memlane passes plain dataclasses; these models exist only to validate
requests, document the API (OpenAPI) and shape responses. Every string that
reaches the store passes :data:`Text`, which refuses lone surrogates and NULs:
JSON can carry them, SQLite cannot store them, and a 422 that says so beats a
500 from the driver.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from memlane.scoping import SEPARATOR
from memlane.validation import (
    check_identifier,
    check_max_tokens,
    check_metadata_filter,
    check_object,
    check_text_chars,
    loads_json,
)

Role = Literal["system", "user", "assistant", "tool"]
Status = Literal[
    "active", "paused", "resuming", "awaiting_clarification", "shutdown_clean", "ended", "archived"
]
ExportFormat = Literal["json", "jsonl", "markdown", "md"]
OnConflict = Literal["error", "skip", "replace", "new"]

MAX_ID = 256
MAX_SHORT = 10_000
MAX_TOP_K = 1000
MAX_LIST = 1000
MAX_OFFSET = 1_000_000_000
MAX_TOKENS = 10_000_000


def _storable(value: str) -> str:
    return check_text_chars(value, "text")


def _ident(value: str) -> str:
    return check_identifier(value, "the id")


def _session_ident(value: str) -> str:
    """A session id, or a session's key (``tenant<US>id``, memlane.scoping) as a server
    without keys lists another tenant's sessions; with a key, a key of another tenant's
    session names nothing (TenantView.key puts the caller's tenant in front of it)."""
    tenant, sep, rest = value.partition(SEPARATOR)
    if sep:
        check_identifier(tenant, "the id's tenant")
        check_identifier(rest, "the id")
        return value
    return _ident(value)


def _object(value: Any) -> Any:
    return check_object(value, "the value")


def _budget(value: Any) -> Any:
    return None if value is None else check_max_tokens(value, limit=MAX_TOKENS)


Text = Annotated[str, AfterValidator(_storable)]
ShortText = Annotated[str, Field(max_length=MAX_SHORT), AfterValidator(_storable)]
Ident = Annotated[str, Field(min_length=1, max_length=MAX_ID), AfterValidator(_ident)]
JsonObject = Annotated[dict[str, Any], BeforeValidator(_object)]
#: A token budget, checked by the library's own rule ("100" is 100; 1.5, inf, true are refused).
TokenBudget = Annotated[int, BeforeValidator(_budget)]


def metadata_filter(text: str) -> dict[str, Any]:
    """``{"key": scalar, ...}`` from a query parameter (the library's own check, see validation.py)."""
    return check_metadata_filter(loads_json(text, "metadata"), "metadata filter")


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SessionCreate(_In):
    session_id: Ident | None = Field(None, description="Your own key (room id, chat id); a UUID if omitted.")
    system_prompt: Text | None = None
    metadata: JsonObject | None = None
    user_id: Ident | None = None
    agent_id: Ident | None = None
    title: ShortText | None = None
    tenant_id: Ident | None = Field(
        None, description="Only honoured without API keys; a key always writes to its own tenant."
    )


class SessionUpdate(_In):
    title: ShortText | None = None
    system_prompt: Text | None = None
    metadata: JsonObject | None = None
    status: Status | None = None
    user_id: Ident | None = None
    agent_id: Ident | None = None


class ToolCallIn(BaseModel):
    """An OpenAI tool call: ``{"id", "type": "function", "function": {"name", "arguments"}}``."""

    model_config = ConfigDict(extra="allow")
    id: Ident

    @model_validator(mode="after")
    def _not_too_deep(self) -> ToolCallIn:
        _object(self.model_dump())
        return self


class MessageIn(_In):
    role: Role
    content: Text | list[JsonObject] | None = Field(
        None, description="Text (or OpenAI content parts); null only for an assistant message with tool_calls."
    )
    name: ShortText | None = None
    tool_calls: list[ToolCallIn] | None = Field(None, max_length=MAX_LIST)
    tool_call_id: ShortText | None = None
    author_id: ShortText | None = None
    author_name: ShortText | None = None
    turn_id: ShortText | None = None
    created_at: datetime | None = None
    metadata: JsonObject | None = None
    importance: float = Field(0.0, ge=0.0, le=1.0, allow_inf_nan=False)
    pinned: bool = False

    def to_input(self) -> dict[str, Any]:
        out = self.model_dump(exclude_none=True)
        if self.tool_calls is not None:
            out["tool_calls"] = [c.model_dump() for c in self.tool_calls]
        return out


class MessagesIn(_In):
    messages: list[MessageIn] = Field(..., max_length=MAX_LIST)


class TurnIn(_In):
    query: Text
    response: Text
    metadata: JsonObject | None = Field(
        None, description="Per-turn fields (intent, action_name, job_refs, model_used, ...) and anything else."
    )
    user_id: Ident | None = None
    author_id: ShortText | None = None
    author_name: ShortText | None = None
    created_at: datetime | None = None


class TurnWithSessionIn(TurnIn):
    session_id: Ident | None = Field(None, description="Omit to use the user's active session (or a new one).")


class MessagePatch(_In):
    importance: float | None = Field(None, ge=0.0, le=1.0, allow_inf_nan=False)
    pinned: bool | None = None


class SearchIn(_In):
    query: Annotated[str, Field(min_length=1, max_length=MAX_SHORT), AfterValidator(_storable)]
    session_id: Ident | None = None
    user_id: Ident | None = None
    agent_id: Ident | None = None
    tenant_id: Ident | None = Field(None, description="Only honoured without API keys.")
    top_k: int = Field(10, ge=1, le=MAX_TOP_K)
    roles: list[Role] | None = Field(None, max_length=4)
    authors: list[ShortText] | None = Field(None, max_length=MAX_LIST)
    since: datetime | None = None
    until: datetime | None = None
    min_score: float | None = Field(None, allow_inf_nan=False)


class ContextIn(_In):
    query: Annotated[str, Field(max_length=MAX_SHORT), AfterValidator(_storable)] | None = None
    max_tokens: TokenBudget = 4096
    strategy: Ident | None = None


class RelevantIn(_In):
    query: Annotated[str, Field(min_length=1, max_length=MAX_SHORT), AfterValidator(_storable)]
    max_tokens: TokenBudget = 2048
    session_id: Ident | None = None
    user_id: Ident | None = None


class ImportIn(_In):
    data: Text = Field(..., description="The text of an export (json, jsonl or markdown).")
    format: ExportFormat = "json"
    on_conflict: OnConflict = "error"


class NoteIn(_In):
    text: Annotated[str, Field(min_length=1, max_length=MAX_SHORT), AfterValidator(_storable)]
    session_id: Ident | None = Field(None, description="The conversation the note belongs to (required with a key).")
    user_id: Ident | None = None
    kind: Ident | None = None
    importance: float | None = Field(None, ge=0.0, le=1.0, allow_inf_nan=False)
    metadata: JsonObject | None = None
    slot: ShortText | None = Field(None, description='What single thing it states ("attr:city"): a newer note '
                                   "about the same slot supersedes this one, which stays in its history.")
    value: ShortText | None = None


class NoteCorrectionIn(_In):
    text: Annotated[str, Field(min_length=1, max_length=MAX_SHORT), AfterValidator(_storable)] = Field(
        ..., description="What the note should say instead.")
    value: ShortText | None = Field(None, description="The slot's new value (default: the text, when the old "
                                    "value was the old text; else unchanged).")
    reason: ShortText | None = Field(None, description="Why it was corrected: shown in the note's history "
                                     "and written to the audit log.")


class DayCount(BaseModel):
    day: str = Field(..., description="UTC day, YYYY-MM-DD.")
    messages: int
    user: int
    assistant: int
    other: int = Field(..., description="System and tool messages.")


class TimelineOut(BaseModel):
    session_id: str
    messages: int = Field(..., description="Messages in the log, cleared ones included.")
    days: list[DayCount]
    summary: JsonObject = Field(..., description="blocks (each with the messages it covers: ids and 0-based "
                                "positions in the log), summarized_messages, covered_turns, tokens_saved.")
    checkpoint: JsonObject = Field(..., description="state (fresh, stale, missing, corrupt, disabled) and, when "
                                   "readable, written_at, reason, last_message_id and its position.")


class LangCount(BaseModel):
    lang: str | None = Field(..., description="ISO 639-1 code ('de', 'en') the message was judged to be in "
                             "when written; null for messages never judged (`memlane reindex` judges them).")
    messages: int
    sessions: int | None = Field(None, description="Sessions with messages in this language (memory-wide only).")


class SessionLangs(BaseModel):
    session_id: str
    languages: list[LangCount]


class LanguagesOut(BaseModel):
    user_id: str | None = Field(..., description="The person asked about, or null for everyone the caller sees.")
    languages: list[LangCount] = Field(..., description="Per language, most messages first.")
    sessions: list[SessionLangs] = Field(..., description="Each session's languages, most messages first.")


class MessageLang(BaseModel):
    id: int
    lang: str | None


class SessionLanguagesOut(BaseModel):
    session_id: str
    languages: list[LangCount]
    messages: list[MessageLang] = Field(..., description="Each message's language, in log order.")


class PersonOut(BaseModel):
    user_id: str
    sessions: list[JsonObject] = Field(..., description="The person's sessions the caller may see, most recently "
                                       "active first: session_id, title, status, message_count, last_active_at.")
    truncated: bool = Field(..., description="True when the person has more sessions than were summed (200).")
    state: JsonObject | None = Field(..., description="topics, open_loops, pending_clarifications: each item once "
                                     "with the session_ids it is in, the ones in most sessions first; null "
                                     "without a state tracker.")
    facets: list[JsonObject] | None = Field(..., description="Each (kind, value) once: count, session_ids, and "
                                            "first (session_id, message_id); null without notes.")


class OverviewOut(BaseModel):
    tenant_id: str | None
    figures: JsonObject = Field(..., description="sessions, messages, notes, notes_superseded, index_backlog and "
                                "database_bytes; null where the caller may not see it (a tenant's key: "
                                "database size and backlog span every tenant).")
    backlog_cap: int
    messages_per_day: list[DayCount]
    sessions_per_day: list[JsonObject]


class CommandIn(_In):
    text: Annotated[str, Field(min_length=1, max_length=MAX_SHORT), AfterValidator(_storable)] = Field(
        ..., description='What was said, e.g. "forget this conversation" or "merk dir das".')
    author_id: Ident | None = Field(None, description="Who said it; only the Anchor may change memory.")
    author_name: Annotated[str | None, Field(max_length=MAX_ID)] = None


class CommandOut(BaseModel):
    recognized: bool = Field(..., description="False: not a memory command (send it to the model).")
    action: str | None = None
    allowed: bool
    changed: bool
    message: str = Field(..., description="The reply to show, in the speaker's language.")
    lang: str
    is_anchor: bool
    argument: str | None = None
    notes: list[JsonObject]
    hits: list[JsonObject]
    detail: JsonObject
    audit_id: int | None = None


class NoteList(BaseModel):
    notes: list[JsonObject]


class FacetList(BaseModel):
    facets: list[JsonObject] = Field(
        ..., description="Entities, links, dates (time) and system actions found in the messages, oldest first.")


# ---------------------------------------------------------------- responses


class SessionOut(BaseModel):
    id: str
    tenant_id: str
    user_id: str | None
    agent_id: str | None
    title: str | None
    system_prompt: str | None
    metadata: JsonObject
    status: str
    created_at: datetime
    updated_at: datetime
    last_active_at: datetime
    message_count: int
    display_title: str | None = None  # title, else the start of the first user message


class SessionList(BaseModel):
    sessions: list[SessionOut]


class MessageOut(BaseModel):
    id: int | None
    session_id: str
    role: str
    content: str
    name: str | None
    tool_calls: list[JsonObject] | None
    tool_call_id: str | None
    author_id: str | None
    author_name: str | None
    turn_id: str | None
    created_at: datetime
    metadata: JsonObject
    importance: float
    pinned: bool
    hidden: bool
    token_count: int | None
    item: JsonObject | None = Field(None, description="The framework item the message was given as, verbatim.")


class ItemsIn(_In):
    items: list[JsonObject] = Field(
        ..., max_length=MAX_LIST,
        description="Framework items kept verbatim: OpenAI chat messages, Responses items (message, "
                    "function_call, function_call_output, reasoning, ...), Anthropic content blocks.",
    )


class PoppedOut(BaseModel):
    message: MessageOut | None


class MessageList(BaseModel):
    messages: list[MessageOut]
    tokens: int | None = Field(None, description="Tokens used, when a max_tokens window was asked for.")


class TurnOut(BaseModel):
    turn_id: str
    session_id: str
    query: str
    response: str
    intent: str | None
    action_name: str | None
    job_refs: list[str]
    model_used: str | None
    confidence_score: float | None
    processing_time: float | None
    resolved_query: str | None
    context_used: bool | None
    metadata: JsonObject
    created_at: datetime
    user_message_id: int | None
    assistant_message_id: int | None


class TurnList(BaseModel):
    turns: list[TurnOut]


class TurnCreated(BaseModel):
    turn_id: str
    session_id: str


class HitOut(BaseModel):
    message: MessageOut
    score: float
    scores: dict[str, float]
    snippet: str
    session_id: str
    session_title: str | None


class SearchOut(BaseModel):
    hits: list[HitOut]


class AuditOut(BaseModel):
    id: int | None
    at: datetime
    tenant_id: str
    session_id: str | None
    actor_id: str | None
    actor_name: str | None
    is_anchor: bool
    action: str
    allowed: bool
    result: str
    command: str | None
    detail: JsonObject


class AuditList(BaseModel):
    entries: list[AuditOut]


class Count(BaseModel):
    count: int


class Done(BaseModel):
    ok: bool


class ImportOut(BaseModel):
    session_ids: list[str]


class Health(BaseModel):
    status: str
    version: str
    store: str


class WhoAmI(BaseModel):
    auth: bool
    tenant: str | None
    key_id: str | None
    features: dict[str, bool]
    anchor_id: str = Field(..., description="The Anchor: the one person whose memory commands change memory.")


class QueryIn(_In):
    query: Annotated[str, Field(min_length=1, max_length=MAX_SHORT), AfterValidator(_storable)]


class ActiveIn(_In):
    user_id: Ident | None = None
    query: Annotated[str, Field(max_length=MAX_SHORT), AfterValidator(_storable)] | None = None


class SessionIdOut(BaseModel):
    session_id: str


class Changed(BaseModel):
    changed: bool


class ArchiveIn(_In):
    reason: Annotated[str, Field(max_length=MAX_SHORT), AfterValidator(_storable)] | None = None


class MaintainIn(_In):
    dry_run: bool = False


class PruneIn(_In):
    days: int = Field(30, ge=0, le=365_000)


class SessionIds(BaseModel):
    session_ids: list[str]


class CacheLookupIn(_In):
    query: Annotated[str, Field(min_length=1, max_length=MAX_SHORT), AfterValidator(_storable)] = Field(
        ..., description="The question, its references resolved (POST /v1/sessions/{id}/resolve)."
    )
    model: Annotated[str, Field(min_length=1, max_length=MAX_ID)]
    semantic: bool = Field(True, description="Also take the answer of a paraphrase (calibrated threshold).")
    fingerprint: str | None = Field(
        None, pattern=r"^pk1_[0-9a-f]{40}$",
        description="The `fingerprint` of the context packet the model was sent (POST "
                    "/v1/sessions/{id}/context returns it): that packet is used. Without it, or "
                    "when the server no longer knows it, the server builds the packet from "
                    "max_tokens and strategy.",
    )
    max_tokens: TokenBudget = Field(4096, description="Budget of the context packet the model is sent "
                                                      "(when no known fingerprint is given).")
    strategy: Ident | None = None


class CacheStoreIn(CacheLookupIn):
    response: Annotated[str, Field(min_length=1), AfterValidator(_storable)]
    ttl: float | None = Field(None, gt=0, le=10 * 365 * 86_400, description="Seconds (default: the server's setting).")
    cost_seconds: float | None = Field(None, ge=0, le=86_400)
    cost_tokens: int | None = Field(None, ge=0, le=MAX_TOKENS)
    message_ids: list[Annotated[int, Field(ge=1, le=2**62)]] = Field(
        default_factory=list, max_length=MAX_LIST, description="The stored turn's messages: also sources."
    )


class CachedOut(BaseModel):
    entry_id: int
    model: str
    created_at: float
    expires_at: float | None


class CacheHitOut(BaseModel):
    response: str
    match: Literal["exact", "semantic"]
    similarity: float
    entry_id: int | None
    cached_query: str
    model: str
    created_at: float
    expires_at: float | None
    hits: int
    saved_seconds: float | None
    saved_tokens: int | None


class CacheLookupOut(BaseModel):
    hit: CacheHitOut | None
