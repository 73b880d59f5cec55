"""memlane as an MCP server (the official ``mcp`` SDK): stdio and streamable HTTP.

The tools go through :class:`TenantView` like the REST routes. Over HTTP the
tenant comes from the API key that :class:`AuthMiddleware` checked for the
request (it sits in front of /mcp too); over stdio it is the ``--tenant``
given to ``memlane mcp`` (the local user, every tenant, by default).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, cast

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings

import memlane
from memlane.errors import MemlaneError
from memlane.memory import Memory
from memlane.models import Message
from memlane.server.tenancy import Caller, TenantView, public_ids

INSTRUCTIONS = """\
memlane is conversation memory. Store each exchange with store_interaction (or single messages
with add_message), call get_context before answering to get the relevant history for a token
budget, search_memory to recall anything said in earlier sessions, and forget_session when the
user asks you to forget a conversation. Long-term notes: remember a fact with remember, look
them up with recall_notes, see how one changed with note_history. When someone says a memory
command in the conversation ("forget this", "remember that ...", "merk dir das"), pass it to
memory_command with the speaker's id: only the Anchor may change memory. Sessions and their
transcripts are also resources (memlane://sessions, memlane://sessions/{id}/transcript)."""

CallerOf = Callable[[Context], Caller]
Runner = Callable[[Callable[[], dict[str, Any]]], dict[str, Any]]


def _jsonable(value: Any) -> Any:
    """Times as ISO strings, tuples as lists: what JSON (and so MCP) can carry."""
    return json.loads(json.dumps(value, default=lambda v: v.isoformat() if hasattr(v, "isoformat") else str(v)))


def _message(m: Message, *, limit: int | None = None) -> dict[str, Any]:
    content = m.content if limit is None or len(m.content) <= limit else m.content[:limit] + "…"
    out: dict[str, Any] = {
        "id": m.id, "session_id": m.session_id, "role": m.role, "content": content,
        "created_at": m.created_at.isoformat(),
    }
    for key in ("author_name", "author_id", "name", "tool_call_id", "turn_id"):
        if getattr(m, key):
            out[key] = getattr(m, key)
    if m.tool_calls:
        out["tool_calls"] = m.tool_calls
    return out


#: The tenant of the MCP call in progress (set by view(), read by run() in the same context).
_TENANT: ContextVar[str | None] = ContextVar("memlane_mcp_tenant", default=None)


def build_server(mem: Memory, caller_of: CallerOf) -> MCPServer:
    server: MCPServer = MCPServer(
        "memlane", instructions=INSTRUCTIONS, version=memlane.__version__, log_level="WARNING"
    )

    def view(ctx: Context) -> TenantView:
        found = TenantView(mem, caller_of(ctx))
        _TENANT.set(found.caller.tenant)  # run() shows results with the tenant's own ids
        return found

    def run(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            return cast(dict[str, Any], public_ids(fn(), _TENANT.get()))
        except MemlaneError as exc:  # the model reads this text; say what went wrong
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc

    @server.tool()
    def create_session(
        ctx: Context, title: str | None = None, system_prompt: str | None = None,
        session_id: str | None = None, user_id: str | None = None,
    ) -> dict[str, Any]:
        """Start a new conversation session; returns its id."""
        fields = {"title": title, "system_prompt": system_prompt, "session_id": session_id, "user_id": user_id}
        return run(lambda: view(ctx).create_session(**{k: v for k, v in fields.items() if v is not None}).to_dict())

    @server.tool()
    def add_message(
        ctx: Context, session_id: str, content: str, role: str = "user",
        author_name: str | None = None, author_id: str | None = None,
    ) -> dict[str, Any]:
        """Append one message (role user, assistant, system) to a session (created on first use)."""
        raw = {"role": role, "content": content, "author_name": author_name, "author_id": author_id}
        return run(lambda: _message(view(ctx).save_message(
            session_id, {k: v for k, v in raw.items() if v is not None})))

    @server.tool()
    def store_interaction(
        ctx: Context, query: str, response: str, session_id: str | None = None,
        user_id: str | None = None, metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Store a user query and the assistant's answer as one turn. Without session_id the
        user's active session is used (or a new one)."""

        def go() -> dict[str, Any]:
            turn_id, sid = view(ctx).store_interaction(
                query, response, metadata, session_id=session_id, user_id=user_id
            )
            return {"turn_id": turn_id, "session_id": sid}

        return run(go)

    @server.tool()
    def search_memory(
        ctx: Context, query: str, session_id: str | None = None, top_k: int = 5
    ) -> dict[str, Any]:
        """Search everything said in past conversations (or one session); best matches first."""

        def go() -> dict[str, Any]:
            hits = view(ctx).search(query, session_id=session_id, top_k=max(1, min(top_k, 100)))
            return {"hits": [
                {**_message(h.message, limit=2000), "score": h.score, "scores": h.scores, "snippet": h.snippet}
                for h in hits
            ]}

        return run(go)

    @server.tool()
    def get_context(
        ctx: Context, session_id: str, query: str | None = None, max_tokens: int = 2000
    ) -> dict[str, Any]:
        """The context to answer the next message in a session, within max_tokens: recent turns,
        summary, state and recalled past messages (or the recent window on a plain build)."""

        def go() -> dict[str, Any]:
            v = view(ctx)
            budget = max(1, min(max_tokens, 1_000_000))
            if callable(getattr(mem, "context", None)):
                packet = v.context(session_id, query, budget, None)
                out: dict[str, Any] = {"source": "context_engine"}
                to_messages = getattr(packet, "to_messages", None)
                if callable(to_messages):
                    out["messages"] = to_messages()
                to_dict = getattr(packet, "to_dict", None)
                if callable(to_dict):
                    out["packet"] = to_dict()
                return out
            msgs, tokens = v.messages(session_id, max_tokens=budget)
            return {"source": "recent_window", "tokens": tokens, "messages": [m.to_openai() for m in msgs]}

        return run(go)

    @server.tool()
    def list_sessions(
        ctx: Context, limit: int = 20, user_id: str | None = None, status: str | None = None
    ) -> dict[str, Any]:
        """Sessions, most recently active first."""
        filters: dict[str, Any] = {k: v for k, v in {"user_id": user_id, "status": status}.items() if v}
        return run(lambda: {"sessions": [
            {"id": s.id, "title": s.title, "user_id": s.user_id, "status": s.status,
             "message_count": s.message_count, "last_active_at": s.last_active_at.isoformat()}
            for s in view(ctx).list_sessions(limit=max(1, min(limit, 1000)), **filters)
        ]})

    @server.tool()
    def session_history(ctx: Context, session_id: str, limit: int = 50) -> dict[str, Any]:
        """The newest `limit` messages of a session, oldest first."""

        def go() -> dict[str, Any]:
            msgs, _ = view(ctx).messages(session_id)
            return {"session_id": session_id, "messages": [_message(m) for m in msgs[-max(1, limit):]]}

        return run(go)

    @server.tool()
    def forget_session(ctx: Context, session_id: str) -> dict[str, Any]:
        """Delete a session and everything derived from it. This cannot be undone."""
        return run(lambda: {"session_id": session_id, "deleted": view(ctx).delete_session(session_id)})

    _note_tools(server, view, run)
    _resources(server, view)
    return server


def _note_tools(server: MCPServer, view: Callable[[Context], TenantView], run: Runner) -> None:
    """Long-term notes and memory commands."""

    @server.tool()
    def remember(
        ctx: Context, text: str, session_id: str | None = None, kind: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, Any]:
        """Keep a long-term note (a fact, preference or decision); one about the same thing
        is merged with it or superseded by it. With an API key, give the session it belongs to."""
        fields = {k: v for k, v in {"kind": kind, "user_id": user_id}.items() if v is not None}
        return run(lambda: _jsonable(view(ctx).add_note(text, session_id=session_id, **fields).to_dict()))

    @server.tool()
    def recall_notes(
        ctx: Context, about: str | None = None, session_id: str | None = None, limit: int = 10,
    ) -> dict[str, Any]:
        """Long-term notes true now, best matches for `about` first (all of them without it);
        with session_id, the notes that conversation sees."""
        return run(lambda: {"notes": [
            _jsonable(n.to_dict())
            for n in view(ctx).notes(about, session_id=session_id, limit=max(1, min(limit, 200)))
        ]})

    @server.tool()
    def note_history(ctx: Context, note_id: int) -> dict[str, Any]:
        """Every version of a note, oldest first: what it said and when it changed."""
        return run(lambda: {"versions": [_jsonable(n.to_dict()) for n in view(ctx).note_history(note_id)]})

    @server.tool()
    def memory_command(
        ctx: Context, session_id: str, text: str, author_id: str, author_name: str | None = None,
    ) -> dict[str, Any]:
        """Check what someone said in a conversation for a memory command ("forget this
        conversation", "remember that ...", "merk dir das") and run it. Only the Anchor may
        change memory: anyone else gets a refusal and nothing changes; every command is
        audited. recognized=false means it was no command: answer the text as usual."""
        return run(lambda: _jsonable(view(ctx).handle_command(
            session_id, text, author_id, author_name=author_name).to_dict()))


def _resources(server: MCPServer, view: Callable[[Context], TenantView]) -> None:
    """Sessions and transcripts as resources a host can attach."""

    @server.resource("memlane://sessions{?limit}", name="sessions", mime_type="application/json")
    def sessions(ctx: Context, limit: int = 50) -> str:
        """The sessions, most recently active first."""
        v = view(ctx)
        found = v.list_sessions(limit=max(1, min(int(limit), 1000)))
        return json.dumps(public_ids([_jsonable(s.to_dict()) for s in found], v.caller.tenant), ensure_ascii=False)

    @server.resource("memlane://sessions/{session_id}", name="session", mime_type="application/json")
    def session(ctx: Context, session_id: str) -> str:
        """One session and its visible messages, oldest first."""
        v = view(ctx)
        found = v.session(session_id)
        msgs, _ = v.messages(session_id)
        return json.dumps(public_ids({"session": _jsonable(found.to_dict()), "messages": [_message(m) for m in msgs]},
                                     v.caller.tenant), ensure_ascii=False)

    @server.resource("memlane://sessions/{session_id}/transcript", name="transcript", mime_type="text/markdown")
    def transcript(ctx: Context, session_id: str) -> str:
        """A session as a Markdown transcript for people."""
        return view(ctx).export_session(session_id, "markdown")


def http_caller(ctx: Context) -> Caller:
    request = ctx.request_context.request
    scope = getattr(request, "scope", None)
    caller = scope.get("state", {}).get("caller") if isinstance(scope, dict) else None
    if not isinstance(caller, Caller):  # AuthMiddleware always sets it; refuse rather than guess
        raise ToolError("no authenticated caller for this request")
    return caller


def build_http_app(mem: Memory, *, host: str = "127.0.0.1") -> tuple[MCPServer, StreamableHTTPASGIApp]:
    """The MCP server and its streamable-HTTP endpoint, to mount at /mcp."""
    server = build_server(mem, http_caller)
    security = None
    if host not in ("127.0.0.1", "localhost", "::1"):
        # On a public bind the API key is the guard; Host-header pinning would only break proxies.
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    server.streamable_http_app(transport_security=security, host=host, stateless_http=False)
    return server, StreamableHTTPASGIApp(server.session_manager)


def run_stdio(mem: Memory, tenant: str | None = None) -> None:
    caller = Caller(tenant=tenant)
    server = build_server(mem, lambda ctx: caller)
    server.run("stdio")
