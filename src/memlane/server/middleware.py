"""ASGI middleware in front of every route, REST and MCP alike: host check, body limit, auth,
the tenant's own session ids in responses.

Both are plain ASGI (not FastAPI dependencies) because the MCP endpoint is a
raw ASGI app that FastAPI's dependency system never sees.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from urllib.parse import urlsplit

import anyio.to_thread
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memlane.errors import InvalidInputError
from memlane.server.auth import KeyStore
from memlane.server.errors import error_body
from memlane.server.tenancy import Caller, public_ids
from memlane.validation import MAX_DEPTH, loads_json

#: Paths anyone may fetch: the inspector's static page (it asks for a key itself), health, the spec
#: and its browsable docs (Swagger UI asks for a key itself, under "Authorize").
PUBLIC_PATHS = frozenset({"/", "/healthz", "/openapi.json", "/favicon.ico", "/docs", "/docs/oauth2-redirect"})
PUBLIC_PREFIXES = ("/static/", "/static-docs/")
_NO_BODY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


async def send_error(send: Send, status: int, type_: str, message: str,
                     headers: dict[str, str] | None = None) -> None:
    body = json.dumps(error_body(type_, message)).encode("utf-8")
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


#: What a server bound to a loopback address answers to unless told otherwise.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def _hostname(value: str) -> str | None:
    """The host part of a Host header or Origin URL, lowercased, without port or brackets."""
    try:
        parts = urlsplit(value if "//" in value else f"//{value}")
        return (parts.hostname or "").lower() or None
    except ValueError:
        return None


class HostCheckMiddleware:
    """Refuse requests whose Host (or browser Origin) is not one of the allowed names.

    DNS rebinding: a web page on ``evil.example`` that re-points its name to 127.0.0.1
    makes the victim's browser send requests to the local server with
    ``Host: evil.example``. Checking Host on every route (REST, MCP, metrics, the
    inspector) stops it; checking Origin stops a page on another name that reaches us
    under our own.
    """

    def __init__(self, app: ASGIApp, allowed: Iterable[str]) -> None:
        self.app = app
        self.allowed = frozenset(h.strip("[]").lower() for h in allowed)

    def _refuse(self, what: str, value: str) -> str:
        names = ", ".join(sorted(self.allowed))
        return (
            f"{what} {value!r} is not allowed: this server answers only to {names} "
            "(DNS-rebinding protection); add the name with --allowed-host NAME, "
            "MEMLANE_ALLOWED_HOSTS or allowed_hosts in the config"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {name: value.decode("latin-1") for name, value in scope.get("headers", ())}
        host = headers.get(b"host", "")
        if _hostname(host) not in self.allowed:
            await send_error(send, 403, "forbidden_host", self._refuse("Host", host))
            return
        origin = headers.get(b"origin")
        if origin and origin != "null" and _hostname(origin) not in self.allowed:
            await send_error(send, 403, "forbidden_origin", self._refuse("Origin", origin))
            return
        await self.app(scope, receive, send)


def _too_deep(body: bytes) -> str | None:
    """Why a JSON body is refused for its nesting, or None.

    The JSON decoder recurses once per level, so 50,000 nested arrays would end the
    request in a RecursionError (a 500). Only a body with more brackets than the limit
    can be too deep, so ordinary requests skip the scan.
    """
    if body.count(b"[") + body.count(b"{") <= MAX_DEPTH:
        return None
    try:
        loads_json(body.decode("utf-8", errors="replace"), "the request body")
    except InvalidInputError as exc:
        return None if "not valid JSON" in str(exc) else str(exc)  # syntax: the route says it
    return None


class BodyLimitMiddleware:
    """Refuse request bodies over ``max_bytes`` with 413, whether announced or streamed.

    The body is read here, up to the limit, and replayed to the app: that way a chunked
    upload that turns out too large is refused before any route has seen a byte of it.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self) -> str:
        return (
            f"request body is larger than {self.max_bytes:,} bytes; send less per request "
            "(e.g. batches of messages) or start the server with a larger --max-body-bytes"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    announced = int(value)
                except ValueError:
                    await send_error(send, 400, "bad_request", "Content-Length is not a number")
                    return
                if announced > self.max_bytes:
                    await send_error(send, 413, "payload_too_large", self._too_large())
                    return
        if scope.get("method") in _NO_BODY_METHODS:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away mid-upload
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await send_error(send, 413, "payload_too_large", self._too_large())
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        problem = _too_deep(b"".join(chunks))
        if problem:
            await send_error(send, 422, "invalid_input", problem)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()  # later calls wait for the disconnect, as the app expects

        await self.app(scope, replay, send)


def _presented_key(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            text: str = value.decode("latin-1")
            scheme, _, token = text.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
        elif name == b"x-api-key":
            key: str = value.decode("latin-1").strip()
            return key or None
    return None


class AuthMiddleware:
    """Resolve the caller (tenant) of every request; with keys required, refuse anonymous ones."""

    def __init__(self, app: ASGIApp, keys: KeyStore | None, require: bool) -> None:
        self.app = app
        self.keys = keys
        self.require = require

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        caller: Caller | None
        if not self.require:
            caller = Caller(tenant=None)
        elif path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES):
            caller = None
        else:
            presented = _presented_key(scope)
            if presented is None:
                await send_error(
                    send, 401, "unauthorized",
                    "this server requires an API key: send 'Authorization: Bearer <key>' "
                    "(create one with: memlane keys create --tenant NAME)",
                    {"WWW-Authenticate": "Bearer"},
                )
                return
            assert self.keys is not None
            key = await anyio.to_thread.run_sync(self.keys.verify, presented)
            if key is None:
                await send_error(send, 401, "unauthorized", "unknown or revoked API key",
                                 {"WWW-Authenticate": "Bearer"})
                return
            caller = Caller(tenant=key.tenant_id, key_id=key.id)
        scope.setdefault("state", {})["caller"] = caller
        await self.app(scope, receive, send)


class PublicIdsMiddleware:
    """Show an API key's caller its own session ids in every JSON response.

    Sessions of a tenant other than "default" are stored under keys with the tenant in
    them (memlane.scoping); the caller sent and knows the plain id. The JSON body is
    rewritten with :func:`memlane.server.tenancy.public_ids` (id fields only); other
    responses (the event stream frames its own ids) pass through untouched.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = scope.get("state", {}).get("caller") if scope["type"] == "http" else None
        tenant = getattr(caller, "tenant", None)
        if not tenant or tenant == "default":
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        chunks: list[bytes] = []

        async def rewrite(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                kind = dict(message.get("headers") or []).get(b"content-type", b"")
                if kind.startswith(b"application/json"):
                    start = message  # held until the whole body is in
                    return
            elif message["type"] == "http.response.body" and start is not None:
                chunks.append(message.get("body", b""))
                if message.get("more_body"):
                    return
                body = b"".join(chunks)
                with contextlib.suppress(ValueError):
                    body = json.dumps(public_ids(json.loads(body), tenant), ensure_ascii=False, allow_nan=False,
                                      separators=(",", ":")).encode("utf-8")
                headers = [(k, v) for k, v in start.get("headers") or [] if k.lower() != b"content-length"]
                await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
            await send(message)

        await self.app(scope, receive, rewrite)
