"""The FastAPI application: REST under /v1, MCP at /mcp, the inspector at /.

``create_app`` takes an open :class:`Memory`; whoever opened it closes it
(``memlane serve`` does, after uvicorn stops). Middleware order, outermost
first: metrics (times everything, refusals included) -> body limit -> auth -> public ids
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import AsyncIterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import FileResponse
from fastapi_offline import FastAPIOffline
from starlette.routing import Route
from starlette.staticfiles import StaticFiles

import memlane
from memlane.errors import PermissionDeniedError
from memlane.memory import Memory
from memlane.server import errors, routes, routes_cache, routes_events, routes_inspector, routes_lifecycle
from memlane.server.auth import KeyStore
from memlane.server.metrics import CONTENT_TYPE, Metrics, MetricsMiddleware
from memlane.server.middleware import (
    LOOPBACK_NAMES,
    AuthMiddleware,
    BodyLimitMiddleware,
    HostCheckMiddleware,
    PublicIdsMiddleware,
)
from memlane.server.schemas import Health

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
DOCS_ASSETS = "/static-docs"  # where /docs loads Swagger UI's files from
DESCRIPTION = """\
Conversation memory for LLM agents over HTTP.

Authenticate with `Authorization: Bearer <key>` (create keys with `memlane keys create --tenant T`);
a key sees only its tenant's sessions. Without keys the server only runs on loopback.
Errors always look like `{"error": {"type": "...", "message": "..."}}`.
"""


def static_dir() -> Path:
    return Path(str(resources.files("memlane.server") / "static"))


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _warm_up(mem: Memory) -> None:
    """A server lives long: load now what a short script defers (the token vocabulary, so
    writes cache their counts) and keep derived data (state, summaries, notes, vectors)
    current as clients write."""
    mem.counter.count("warm up")
    mem.start_background_work()


def create_app(
    mem: Memory,
    *,
    keys: KeyStore | None = None,
    require_auth: bool = False,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    mcp: bool = True,
    host: str = "127.0.0.1",
    allowed_hosts: Sequence[str] | None = None,
) -> FastAPI:
    """The REST + MCP app. ``allowed_hosts``: the Host names it answers to (None: the
    settings' ``allowed_hosts``, else the loopback names when ``host`` is loopback, else
    no check — a server on a public address needs API keys anyway)."""
    if require_auth and keys is None:
        raise ValueError("require_auth needs a key store")
    mcp_server: Any = None
    if mcp:
        from memlane.server.mcp import build_http_app

        mcp_server, mcp_endpoint = build_http_app(mem, host=host)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if mcp_server is None:
            yield
            return
        async with mcp_server.session_manager.run():
            yield

    # Swagger UI's script and styles come from a pip package, not a CDN: /docs works offline.
    app = FastAPIOffline(
        title="memlane",
        version=memlane.__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
        static_url=DOCS_ASSETS,
    )
    _warm_up(mem)
    app.state.mem = mem
    app.state.require_auth = require_auth
    metrics = Metrics(mem)
    app.state.metrics = metrics
    errors.install(app)
    app.include_router(routes_lifecycle.router)  # first: /sessions/active before /sessions/{id}
    app.include_router(routes.router)
    app.include_router(routes_events.router)
    app.include_router(routes_inspector.router)
    app.include_router(routes_cache.router)

    @app.get("/healthz", response_model=Health, tags=["meta"])
    def healthz() -> dict[str, Any]:
        """Liveness: the store answers a trivial read."""
        mem.store.get_session("\x01healthz")
        return {"status": "ok", "version": memlane.__version__, "store": type(mem.store).__name__}

    @app.get("/metrics", include_in_schema=False)
    def prometheus_metrics(request: Request) -> Response:
        # The counters cover every tenant's traffic: with keys required, only an admin
        # tenant's key may read them (without keys the server is loopback-only anyway).
        caller = request.scope.get("state", {}).get("caller")
        tenant = getattr(caller, "tenant", None)
        if require_auth and tenant not in mem.settings.admin_tenants:
            admins = ", ".join(mem.settings.admin_tenants) or "none configured"
            raise PermissionDeniedError(
                "/metrics counts every tenant's traffic and needs an admin tenant's key "
                f"(admin_tenants: {admins}); create one with: memlane keys create --tenant admin"
            )
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    @app.get("/", include_in_schema=False)
    def inspector(request: Request) -> FileResponse:
        return FileResponse(static_dir() / "index.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=static_dir()), name="static")
    if mcp_server is not None:
        # A raw ASGI endpoint (not a request handler): Route passes scope/receive/send through.
        app.router.routes.append(Route("/mcp", mcp_endpoint, include_in_schema=False))

    app.openapi_schema = None
    _document_security(app)
    # Added last = outermost.
    app.add_middleware(PublicIdsMiddleware)  # inside auth: it reads the caller auth resolved
    app.add_middleware(AuthMiddleware, keys=keys, require=require_auth)
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    names = allowed_hosts if allowed_hosts is not None else mem.settings.allowed_hosts
    if names is None and is_loopback(host):
        names = [*LOOPBACK_NAMES, host]
    if names is not None:
        app.add_middleware(HostCheckMiddleware, allowed=names)
    return app


def _document_security(app: FastAPI) -> None:
    """Declare the bearer scheme in the spec; the check itself is AuthMiddleware's."""
    original = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = original()
        schema.setdefault("components", {})["securitySchemes"] = {
            "apiKey": {"type": "http", "scheme": "bearer", "description": "memlane API key (mlk_...)"}
        }
        schema["security"] = [{"apiKey": []}, {}]
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
