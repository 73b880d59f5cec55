"""A client for the memlane server that mirrors :class:`memlane.Memory`.

Switching an agent from a local database to a server is one line::

    mem = Memory("~/.memlane/memory.db")
    mem = MemoryClient("http://127.0.0.1:8765", api_key=os.environ["MEMLANE_API_KEY"])

The methods take the same arguments and return the same dataclasses
(:class:`Session`, :class:`Message`, :class:`Turn`, :class:`SearchHit`), and the
server's errors come back as the same exceptions (``SessionNotFoundError``,
``InvalidInputError``...), decoded from the ``{"error": {"type", ...}}`` body.

Local-only Memory members
-------------------------
Every method of Memory's public surface (docs/api.md) has a REST route
(``server/routes.py``, ``server/routes_lifecycle.py``) and a client method here, so the
answer is the server's own, never one assembled from other calls (session expiry runs in
the server's process). Operations over the whole database (stats, maintain, prune,
expiry) are refused with API keys: they span tenants. :data:`LOCAL_ONLY` names the few
members that only make sense in the process owning the store, and why;
``tests/test_client.py`` keeps that list complete.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import httpx

from memlane import errors
from memlane.context.answers import CacheHit
from memlane.context.budget import BudgetReport
from memlane.context.window import Window
from memlane.items import is_item
from memlane.models import Message, SearchHit, Session, Turn
from memlane.notes.models import AuditEntry, Facet, Note
from memlane.ports import CachedResponse
from memlane.rooms.handler import CommandResult
from memlane.wire import (
    audit_from_dict,
    facet_from_dict,
    hit_from_dict,
    message_from_dict,
    note_from_dict,
    session_from_dict,
    turn_from_dict,
)

MessageInput = Message | Mapping[str, Any]

#: The most turns the server lists at once (its MAX_LIST); older turns of a longer session
#: come back from search_history as message-only entries.
_MAX_TURNS = 1000
_SENT_FIELDS = (
    "role", "content", "name", "tool_calls", "tool_call_id", "author_id", "author_name", "turn_id",
    "created_at", "metadata", "importance", "pinned",
)
#: What memlane reads from an item (sent inside the item, not beside it).
_ITEM_READ_FIELDS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id"})
#: Keys Memory accepts in a message dict but ignores (they come from the store).
_STORE_FIELDS = frozenset({"id", "session_id", "hidden", "token_count"})

#: Public Memory members the client does not offer, each with the reason. A test checks that
#: every public Memory member is either a MemoryClient method or listed here.
LOCAL_ONLY: dict[str, str] = {
    # the server process's own background work (state, summaries, notes, vectors)
    "MAX_DEFERRED": "a setting of the server process's background work, not of a caller",
    # a blocking iterator over the database's outbox; remote callers stream GET /v1/events (SSE)
    "events": "follow GET /v1/events (Server-Sent Events, Last-Event-ID) instead",
    "subscribe": "callbacks run in the process that owns the store; follow GET /v1/events instead",
    "bus": "the event bus wires the server's own instances together",
    "sync_caches": "the server's own caches follow the outbox before its reads; a client keeps none",
    "hot_cache": "the server's shared cache (redis_url in its settings), not a caller's",
    "backlog": "the server's own background work; its stats() and /metrics carry backlog_vectors",
    "background_work_started": "the server starts its background work itself",
    "start_background_work": "the server starts its background work itself when it starts",
    "sessions": "the SessionManager object lives in the server process (its calls are "
    "active_session_for, get_active_session, auto_expire_sessions, detect_topic_change)",
    "audit": "the server writes audit entries itself, for every change made through it",
    "erase": "no route: delete_session and forget_messages erase through it on the server; bulk retention "
             "erasure (keep_notes) is the operator's memlane maintain",
    "token_encoding_of": "the token-count cache of the store's own process; the server counts tokens itself",
    "inactive_sessions": "cross-tenant listing for prune_old_sessions; run it on the server host",
    "add_observer": "callbacks run in the process that owns the store",
    "add_closer": "callbacks run in the process that owns the store",
    "in_memory": "opens a throwaway store; a client connects to a server with MemoryClient(base_url)",
    "extensions": "deprecated view of the server process's own parts (mem.parts)",
}


class ServerError(errors.MemlaneError):
    """The server answered with an error that has no closer library equivalent."""

    def __init__(self, status: int, type_: str, message: str) -> None:
        super().__init__(f"{message} (HTTP {status}, {type_})")
        self.status = status
        self.type = type_


def _error(response: httpx.Response) -> Exception:
    try:
        body = response.json()
        err = body["error"]
        type_, message = str(err["type"]), str(err["message"])
    except (ValueError, KeyError, TypeError):
        return ServerError(response.status_code, "http_error", response.text[:500] or response.reason_phrase)
    if type_ == "session_not_found":
        return errors.SessionNotFoundError(str(err.get("session_id", "")))
    if type_ == "note_superseded":
        successor = err.get("superseded_by")
        return errors.NoteSupersededError(int(err.get("note_id") or 0), int(successor) if successor else None)
    simple: dict[str, type[errors.MemlaneError]] = {
        "not_found": errors.NotFoundError,
        "conflict": errors.ConflictError,
        "permission_denied": errors.PermissionDeniedError,
        "unauthorized": errors.PermissionDeniedError,
        "invalid_input": errors.InvalidInputError,
        "validation_error": errors.InvalidInputError,
        "payload_too_large": errors.InvalidInputError,
        "storage_unavailable": errors.StorageError,
        "embedder_unavailable": errors.EmbedderError,
        "lock_timeout": errors.LockTimeoutError,
        "corrupt_record": errors.MemlaneError,
        "config_error": errors.ConfigError,
    }
    cls = simple.get(type_)
    if cls is not None:
        return cls(message)
    return ServerError(response.status_code, type_, message)


class RemoteContextPacket:
    """The server's context packet with ContextPacket's reading surface: ``to_dict()``,
    ``to_messages()``, ``budget`` (a BudgetReport) and the packet's fields as attributes
    (``recent_turns`` and ``pinned_messages`` as Message objects)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data
        raw = data.get("budget") or {}
        self.budget: BudgetReport | None = BudgetReport(
            max_tokens=int(raw["max_tokens"]), used=int(raw["used"]), encoding=str(raw.get("encoding", "")),
            priorities=tuple(raw.get("priorities") or ()), sections=dict(raw.get("sections") or {}),
            included=dict(raw.get("included") or {}), dropped=dict(raw.get("dropped") or {}),
            truncated=list(raw.get("truncated") or []),
        ) if raw else None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self._data:
            raise AttributeError(name)
        value = self._data[name]
        if name in ("recent_turns", "pinned_messages"):
            return [message_from_dict(m) for m in value]
        return value

    def to_dict(self) -> dict[str, Any]:
        return dict(self._data)

    def to_messages(self) -> list[dict[str, Any]]:
        return list(self._data.get("messages") or [])


def _fingerprint(context: Any) -> str | None:
    """The server's fingerprint of a packet it sent (None: not one of its packets)."""
    if isinstance(context, RemoteContextPacket):
        found = context.to_dict().get("fingerprint")
        return found if isinstance(found, str) else None
    return None


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _message_body(message: MessageInput) -> dict[str, Any]:
    if isinstance(message, Message):
        raw: dict[str, Any] = {k: getattr(message, k) for k in _SENT_FIELDS}
    elif isinstance(message, Mapping):
        raw = {k: v for k, v in message.items() if k not in _STORE_FIELDS}
    else:
        raise errors.InvalidInputError(
            f"a message must be a dict like {{'role': 'user', 'content': 'hi'}} or a Message, "
            f"got {type(message).__name__}"
        )
    return {k: _jsonable(v) for k, v in raw.items() if v is not None}


def _is_item(message: MessageInput) -> bool:
    if isinstance(message, Message):
        return message.item is not None
    return isinstance(message, Mapping) and is_item(message)


def _item_body(message: MessageInput) -> dict[str, Any]:
    """A message for the items route: the framework item verbatim, memlane's own fields beside it."""
    if isinstance(message, Mapping) and is_item(message):  # an item's "id" is its own, keep it
        return {k: _jsonable(v) for k, v in message.items() if k not in _STORE_FIELDS - {"id"}}
    if not isinstance(message, Message):
        return _message_body(message)
    own = {k: getattr(message, k) for k in _SENT_FIELDS if k not in _ITEM_READ_FIELDS}
    base = message.to_item()
    return {**{k: _jsonable(v) for k, v in own.items() if v is not None and v != {}}, **base}


def _clean(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _jsonable(v) for k, v in params.items() if v is not None}


class MemoryClient:
    """The Memory API over HTTP. Thread-safe (httpx.Client is); close it or use ``with``."""

    def __init__(
        self, base_url: str, api_key: str | None = None, *, timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout, transport=transport)

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(
        self, method: str, path: str, *, json: Any = None, params: Mapping[str, Any] | None = None,
        raw: bool = False,
    ) -> Any:
        try:
            response = self._http.request(method, path, json=json, params=_clean(params or {}))
        except httpx.HTTPError as exc:
            raise errors.StorageError(f"cannot reach the memlane server at {self.base_url}: {exc}") from exc
        if response.status_code >= 400:
            raise _error(response)
        return response.text if raw else response.json()

    # ------------------------------------------------------------ sessions

    def health(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/healthz")
        return result

    def create_session(
        self, system_prompt: str | None = None, metadata: Mapping[str, Any] | None = None, *,
        user_id: str | None = None, agent_id: str | None = None, title: str | None = None,
        session_id: str | None = None, tenant_id: str | None = None,
    ) -> str:
        body = _clean({
            "system_prompt": system_prompt, "metadata": metadata, "user_id": user_id, "agent_id": agent_id,
            "title": title, "session_id": session_id, "tenant_id": tenant_id,
        })
        return str(self._call("POST", "/v1/sessions", json=body)["id"])

    def get_session(self, session_id: str) -> Session:
        return session_from_dict(self._call("GET", f"/v1/sessions/{_seg(session_id)}"))

    def ensure_session(self, session_id: str, **fields: Any) -> Session:
        try:
            return self.get_session(session_id)
        except errors.SessionNotFoundError:
            with contextlib.suppress(errors.ConflictError):  # created concurrently
                self.create_session(session_id=session_id, **fields)
            return self.get_session(session_id)

    def list_sessions(self, limit: int = 10, offset: int = 0, **filters: Any) -> list[Session]:
        unknown = set(filters) - {
            "user_id", "agent_id", "tenant_id", "status", "active_since", "inactive_before", "metadata"}
        if unknown:
            raise errors.InvalidInputError(
                f"unknown session filter(s) {sorted(unknown)} for the server; use user_id, agent_id, "
                "tenant_id, status, metadata, active_since, inactive_before"
            )
        if filters.get("metadata") is not None:
            filters["metadata"] = json.dumps(filters["metadata"])
        data = self._call("GET", "/v1/sessions", params={"limit": limit, "offset": offset, **filters})
        return [session_from_dict(s) for s in data["sessions"]]

    def update_session(self, session_id: str, **changes: Any) -> Session:
        return session_from_dict(self._call("PATCH", f"/v1/sessions/{_seg(session_id)}", json=_clean(changes)))

    def end_session(self, session_id: str) -> bool:
        try:
            return bool(self._call("POST", f"/v1/sessions/{_seg(session_id)}/end")["ok"])
        except errors.SessionNotFoundError:
            return False

    def delete_session(self, session_id: str) -> bool:
        try:
            return bool(self._call("DELETE", f"/v1/sessions/{_seg(session_id)}")["ok"])
        except errors.SessionNotFoundError:
            return False

    def clear_session(self, session_id: str) -> int:
        return int(self._call("DELETE", f"/v1/sessions/{_seg(session_id)}/messages")["count"])

    def load_session(self, session_id: str, *, include_hidden: bool = False) -> list[Message]:
        data = self._call("GET", f"/v1/sessions/{_seg(session_id)}/messages",
                          params={"include_hidden": str(include_hidden).lower()})
        return [message_from_dict(m) for m in data["messages"]]

    # ------------------------------------------------------------ writing

    def save_message(self, session_id: str, message: MessageInput) -> Message:
        data = self._call("POST", f"/v1/sessions/{_seg(session_id)}/messages", json=_message_body(message))
        return message_from_dict(data)

    def add(self, session_id: str, content: str | MessageInput, role: str = "user", **fields: Any) -> Message:
        if isinstance(content, str):
            return self.save_message(session_id, {"role": role, "content": content, **fields})
        return self.save_message(session_id, content)

    def add_messages(self, session_id: str, messages: Iterable[MessageInput]) -> list[Message]:
        listed = list(messages)
        if not listed:
            return []
        if any(_is_item(m) for m in listed):  # framework items go through the items route, verbatim
            data = self._call("POST", f"/v1/sessions/{_seg(session_id)}/items",
                              json={"items": [_item_body(m) for m in listed]})
        else:
            data = self._call("POST", f"/v1/sessions/{_seg(session_id)}/messages/batch",
                              json={"messages": [_message_body(m) for m in listed]})
        return [message_from_dict(m) for m in data["messages"]]

    # ------------------------------------------------------------ items (framework sessions)

    def items(self, session_id: str, limit: int | None = None) -> list[Message]:
        data = self._call("GET", f"/v1/sessions/{_seg(session_id)}/items", params={"limit": limit})
        return [message_from_dict(m) for m in data["messages"]]

    def pop(self, session_id: str) -> Message | None:
        found = self._call("POST", f"/v1/sessions/{_seg(session_id)}/items/pop")["message"]
        return message_from_dict(found) if found is not None else None

    def forget_at(self, session_id: str, index: int) -> Message | None:
        found = self._call("DELETE", f"/v1/sessions/{_seg(session_id)}/items/{int(index)}")["message"]
        return message_from_dict(found) if found is not None else None

    def forget_history(self, session_id: str) -> int:
        return int(self._call("DELETE", f"/v1/sessions/{_seg(session_id)}/items")["count"])

    def replace_history(self, session_id: str, messages: Iterable[MessageInput]) -> list[Message]:
        data = self._call("PUT", f"/v1/sessions/{_seg(session_id)}/items",
                          json={"items": [_item_body(m) for m in messages]})
        return [message_from_dict(m) for m in data["messages"]]

    def store_interaction(
        self, query: str, response: str, metadata: Mapping[str, Any] | None = None, *,
        session_id: str | None = None, user_id: str | None = None, author_id: str | None = None,
        author_name: str | None = None, created_at: datetime | None = None,
    ) -> str:
        body = _clean({
            "query": query, "response": response, "metadata": metadata, "session_id": session_id,
            "user_id": user_id, "author_id": author_id, "author_name": author_name, "created_at": created_at,
        })
        return str(self._call("POST", "/v1/turns", json=body)["turn_id"])

    def mark_important(self, message_id: int, *, importance: float = 1.0, pinned: bool | None = True) -> Message:
        body = _clean({"importance": importance, "pinned": pinned})
        return message_from_dict(self._call("PATCH", f"/v1/messages/{int(message_id)}", json=body))

    def forget_messages(self, message_ids: Sequence[int]) -> int:
        deleted = 0
        for mid in message_ids:
            try:
                deleted += int(self._call("DELETE", f"/v1/messages/{int(mid)}")["count"])
            except errors.NotFoundError:
                continue
        return deleted

    # ------------------------------------------------------------ reading

    def window(self, session_id: str, max_tokens: int | None = None) -> Window:
        data = self._call("GET", f"/v1/sessions/{_seg(session_id)}/messages",
                          params={"max_tokens": max_tokens or 4096})
        return Window(messages=[message_from_dict(m) for m in data["messages"]], tokens=int(data["tokens"] or 0))

    def get_recent_messages(self, session_id: str, max_tokens: int | None = None) -> list[Message]:
        return self.window(session_id, max_tokens).messages

    def list_turns(self, session_id: str, limit: int = 50) -> list[Turn]:
        data = self._call("GET", f"/v1/sessions/{_seg(session_id)}/turns", params={"limit": limit})
        return [turn_from_dict(t) for t in data["turns"]]

    def get_conversation_context(self, session_id: str, limit: int = 5) -> list[dict[str, Any]]:
        data = self._call("GET", f"/v1/sessions/{_seg(session_id)}/turns", params={"limit": limit})
        return list(data["turns"])

    def get_message(self, message_id: int) -> Message:
        return message_from_dict(self._call("GET", f"/v1/messages/{int(message_id)}"))

    def search(
        self, query: str, *, session_id: str | None = None, user_id: str | None = None,
        agent_id: str | None = None, tenant_id: str | None = None, top_k: int = 10,
        roles: Sequence[str] | None = None, authors: Sequence[str] | None = None,
        since: datetime | None = None, until: datetime | None = None, min_score: float | None = None,
    ) -> list[SearchHit]:
        body = _clean({
            "query": query, "session_id": session_id, "user_id": user_id, "agent_id": agent_id,
            "tenant_id": tenant_id, "top_k": top_k, "roles": list(roles) if roles else None,
            "authors": list(authors) if authors else None, "since": since, "until": until,
            "min_score": min_score,
        })
        return [hit_from_dict(h) for h in self._call("POST", "/v1/search", json=body)["hits"]]

    def search_history(
        self, query: str, session_id: str | None = None, limit: int = 10, *,
        user_id: str | None = None, min_score: float | None = None,
    ) -> list[dict[str, Any]]:
        from memlane.search.history import history_entries

        hits = self.search(query, session_id=session_id, user_id=user_id, top_k=limit * 2, min_score=min_score)
        return history_entries(hits, lambda sid: self.list_turns(sid, limit=_MAX_TURNS), limit)

    def get_relevant_context(
        self, query: str, max_tokens: int = 2048, session_id: str | None = None, user_id: str | None = None,
    ) -> list[Message]:
        body = _clean({"query": query, "max_tokens": max_tokens, "session_id": session_id, "user_id": user_id})
        return [message_from_dict(m) for m in self._call("POST", "/v1/relevant-context", json=body)["messages"]]

    def context(
        self, session_id: str, query: str | None = None, max_tokens: int = 4096, strategy: str | None = None,
    ) -> RemoteContextPacket:
        body = _clean({"query": query, "max_tokens": max_tokens, "strategy": strategy})
        data = self._call("POST", f"/v1/sessions/{_seg(session_id)}/context", json=body)
        return RemoteContextPacket(data)

    def cached_response(
        self, query: str, session_id: str, *, model: str, context: Any = None, semantic: bool = True,
        max_tokens: int = 4096, strategy: str | None = None,
    ) -> CacheHit | None:
        """The answer cached for ``query`` from ``model`` in this session's context, or None.
        ``context``: the packet from :meth:`context` the model was sent; its fingerprint
        names it to the server. Without one the server builds the packet (``max_tokens``,
        ``strategy``)."""
        body = _clean({"query": query, "model": model, "semantic": semantic, "max_tokens": max_tokens,
                       "strategy": strategy, "fingerprint": _fingerprint(context)})
        hit = self._call("POST", f"/v1/sessions/{_seg(session_id)}/response-cache/lookup", json=body)["hit"]
        if hit is None:
            return None
        entry = CachedResponse(
            tenant_id="", scope="", model=hit["model"], fingerprint="", query_key="", query=hit["cached_query"],
            response=hit["response"], created_at=hit["created_at"], expires_at=hit["expires_at"],
            cost_seconds=hit["saved_seconds"], cost_tokens=hit["saved_tokens"], hits=hit["hits"] - 1,
            id=hit["entry_id"],
        )
        return CacheHit(hit["response"], hit["match"], hit["similarity"], entry)

    def cache_response(
        self, query: str, response: str, session_id: str, *, model: str, context: Any = None,
        ttl: float | None = None, cost_seconds: float | None = None, cost_tokens: int | None = None,
        message_ids: Sequence[int] = (), max_tokens: int = 4096, strategy: str | None = None,
    ) -> CachedResponse:
        """Keep ``model``'s answer to ``query`` in this session's context (see Memory.cache_response);
        ``context``: the packet from :meth:`context` the model was sent (as for :meth:`cached_response`)."""
        body = _clean({
            "query": query, "response": response, "model": model, "ttl": ttl, "cost_seconds": cost_seconds,
            "cost_tokens": cost_tokens, "message_ids": [int(i) for i in message_ids], "max_tokens": max_tokens,
            "strategy": strategy, "fingerprint": _fingerprint(context),
        })
        out = self._call("POST", f"/v1/sessions/{_seg(session_id)}/response-cache", json=body)
        return CachedResponse(
            tenant_id="", scope="", model=out["model"], fingerprint="", query_key="", query=query,
            response=response, created_at=out["created_at"], expires_at=out["expires_at"], session_id=session_id,
            id=out["entry_id"],
        )

    def get_state(self, session_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/v1/sessions/{_seg(session_id)}/state")
        return result

    def notes(self, query: str | None = None, **filters: Any) -> list[Note]:
        """Long-term notes (session_id, user_id, kind, include_history, limit filters)."""
        data = self._call("GET", "/v1/notes", params={"query": query, **filters})
        return [note_from_dict(n) for n in data["notes"]]

    def add_note(self, text: str, **fields: Any) -> Note:
        return note_from_dict(self._call("POST", "/v1/notes", json=_clean({"text": text, **fields})))

    def forget_note(self, note_id: int) -> int:
        """Delete a note with every version of it (audited by the server)."""
        return int(self._call("DELETE", f"/v1/notes/{int(note_id)}")["count"])

    def correct_note(self, note_id: int, text: str, *, value: str | None = None, reason: str | None = None,
                     corrected_by: str | None = None) -> Note:
        """Correct a current note (audited by the server, which names the key as who did it)."""
        del corrected_by  # the server records the caller's key, not a name the client claims
        body = _clean({"text": text, "value": value, "reason": reason})
        return note_from_dict(self._call("PATCH", f"/v1/notes/{int(note_id)}", json=body))

    def audit_log(self, *, session_id: str | None = None, limit: int = 100) -> list[AuditEntry]:
        """The audit log of this key's tenant, newest first."""
        data = self._call("GET", "/v1/audit", params={"session_id": session_id, "limit": limit})
        return [audit_from_dict(e) for e in data["entries"]]

    def facets(
        self, session_id: str | None = None, kind: str | None = None, *,
        value: str | None = None, limit: int = 200,
    ) -> list[Facet]:
        """Entities, links, dates and actions tracked in one conversation, oldest first."""
        if session_id is None:
            # The route is per conversation: across sessions it would have to span the tenant.
            raise errors.InvalidInputError("the server lists facets per conversation: pass session_id")
        data = self._call("GET", f"/v1/sessions/{_seg(session_id)}/facets",
                          params={"kind": kind, "value": value, "limit": limit})
        return [facet_from_dict(f) for f in data["facets"]]

    def handle_command(
        self, session_id: str, text: str, author_id: str | None = None, *,
        author_name: str | None = None, message_id: int | None = None,
    ) -> CommandResult:
        """Run a memory command said in the conversation (see Memory.handle_command).

        The server trusts the caller (its API key) to say who spoke, as it does for a
        message's author; it checks that speaker against its configured Anchor.
        ``message_id`` is accepted for the same signature; the server audits the text.
        """
        del message_id
        data = self._call("POST", f"/v1/sessions/{_seg(session_id)}/commands",
                          json=_clean({"text": text, "author_id": author_id, "author_name": author_name}))
        return CommandResult(
            recognized=bool(data["recognized"]), action=data.get("action"), allowed=bool(data["allowed"]),
            changed=bool(data["changed"]), message=str(data["message"]), lang=str(data["lang"]),
            is_anchor=bool(data["is_anchor"]), argument=data.get("argument"),
            notes=[note_from_dict(n) for n in data.get("notes") or []],
            hits=[hit_from_dict(h) for h in data.get("hits") or []],
            detail=dict(data.get("detail") or {}), audit_id=data.get("audit_id"),
        )

    # ------------------------------------------------------------ export / import

    def note_history(self, note_id: int) -> list[Note]:
        """Every version of a note, oldest first."""
        return [note_from_dict(n) for n in self._call("GET", f"/v1/notes/{int(note_id)}/history")["notes"]]

    def archive_session(self, session_id: str, reason: str | None = None) -> bool:
        body = _clean({"reason": reason})
        return bool(self._call("POST", f"/v1/sessions/{_seg(session_id)}/archive", json=body)["ok"])

    def unarchive_session(self, session_id: str) -> bool:
        return bool(self._call("POST", f"/v1/sessions/{_seg(session_id)}/unarchive", json={})["ok"])

    @property
    def anchor_id(self) -> str:
        """The server's Anchor (asked each time: the server's settings may change)."""
        return str(self._call("GET", "/v1/whoami")["anchor_id"])

    def is_anchor(self, author_id: str | None) -> bool:
        return bool(author_id) and author_id == self.anchor_id

    # ------------------------------------------------------------ session lifecycle

    def active_session_for(self, user_id: str | None, query: str | None = None) -> str:
        """The user's most recently active open session, or a new one."""
        body = _clean({"user_id": user_id, "query": query})
        return str(self._call("POST", "/v1/sessions/active", json=body)["session_id"])

    def get_active_session(self, user_id: str | None = None) -> Session:
        """The user's active session, created when there is none (idle ones expire first)."""
        return self.get_session(self.active_session_for(user_id))

    def auto_expire_sessions(self) -> list[str]:
        return [str(x) for x in self._call("POST", "/v1/sessions/expire", json={})["session_ids"]]

    def detect_topic_change(self, query: str, session_id: str) -> bool:
        body = {"query": query}
        return bool(self._call("POST", f"/v1/sessions/{_seg(session_id)}/topic-change", json=body)["changed"])

    def resolve_references(self, query: str, session_id: str) -> dict[str, Any]:
        """The resolution as a dict (query, resolved_query, references, confidence, ...)."""
        result: dict[str, Any] = self._call(
            "POST", f"/v1/sessions/{_seg(session_id)}/resolve", json={"query": query}
        )
        return result

    def hydrate(
        self, session_id: str, query: str | None = None, max_tokens: int | None = None
    ) -> RemoteContextPacket:
        body = _clean({"query": query, "max_tokens": max_tokens})
        return RemoteContextPacket(self._call("POST", f"/v1/sessions/{_seg(session_id)}/hydrate", json=body))

    def shutdown(self, session_id: str | None = None, *, close: bool = False) -> dict[str, Any]:
        """Clean shutdown of one session on the server (``close`` closes this client too)."""
        if session_id is None:
            raise errors.InvalidInputError(
                "the server shuts sessions down one at a time: pass session_id"
            )
        result: dict[str, Any] = self._call("POST", f"/v1/sessions/{_seg(session_id)}/shutdown", json={})
        if close:
            self.close()
        return result

    # ------------------------------------------------------------ administration

    def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/v1/stats")
        return result

    def maintain(self, *, dry_run: bool = False) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", "/v1/maintain", json={"dry_run": dry_run})
        return result

    def prune_old_sessions(self, days: int = 30) -> int:
        return int(self._call("POST", "/v1/prune", json={"days": days})["count"])

    @property
    def pending_writes(self) -> int:
        """Always 0: every write goes to the server at once; nothing is held here."""
        return 0

    @classmethod
    def from_url(cls, url: str, **options: Any) -> MemoryClient:
        """A client of the memlane server at ``url`` (``Memory.from_url`` opens a store)."""
        return cls(url, **options)

    def export_session(self, session_id: str, fmt: str = "json") -> str:
        return str(self._call("GET", f"/v1/sessions/{_seg(session_id)}/export", params={"format": fmt}, raw=True))

    def import_sessions(self, text: str, fmt: str = "json", *, on_conflict: str = "error") -> list[str]:
        data = self._call("POST", "/v1/import", json={"data": text, "format": fmt, "on_conflict": on_conflict})
        return [str(s) for s in data["session_ids"]]

    def flush(self, timeout: float | None = None) -> None:
        """Nothing to wait for on the client: the server acknowledged every write."""


def _seg(value: str) -> str:
    """A session id as one path segment (ids may hold '/', '?', '#', spaces)."""
    from urllib.parse import quote

    if not isinstance(value, str) or not value:
        raise errors.InvalidInputError("session_id must be a non-empty string")
    return quote(value, safe="")
