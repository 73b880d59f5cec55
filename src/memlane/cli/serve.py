"""`memlane serve`, `memlane mcp`, `memlane keys ...`, `memlane chat`, `memlane bench serve`.

The server parts are an extra (``pip install 'memlane[server]'``); they are
imported inside the commands so the rest of the CLI works without them.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

import typer
from rich.markup import escape

from memlane.cli.common import STORE_OPTION, console, err_console, state
from memlane.cli.progress import status
from memlane.cli.render import add_plain_row
from memlane.errors import ConfigError, InvalidInputError, MissingExtraError

keys_app = typer.Typer(help="API keys of the server: each key maps to one tenant.", no_args_is_help=True)


def _need_server_extra() -> None:
    for module in ("fastapi", "uvicorn", "mcp", "prometheus_client"):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise MissingExtraError("the memlane server", "server") from exc


def decide_auth(host: str, has_keys: bool, flag: bool | None) -> bool:
    """Whether API keys are required. No-auth is only ever allowed on a loopback bind."""
    from memlane.server.app import is_loopback

    loopback = is_loopback(host)
    if flag is False:
        if not loopback:
            raise ConfigError(
                f"--no-auth is only allowed on a loopback address (127.0.0.1), not {host!r}; "
                "create a key with: memlane keys create --tenant NAME"
            )
        return False
    if flag is True or has_keys:
        return True
    if loopback:
        return False
    raise ConfigError(
        f"refusing to serve on {host!r} without API keys: anyone who can reach it could read "
        "every conversation. Create a key (memlane keys create --tenant NAME) or bind to 127.0.0.1"
    )


def serve_cmd(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (no-auth mode only on loopback)."),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="Port (0 picks a free one)."),
    store: str | None = STORE_OPTION,
    auth: bool | None = typer.Option(
        None, "--auth/--no-auth",
        help="Require API keys. Default: required when keys exist or the bind is not loopback.",
    ),
    max_body_bytes: int = typer.Option(8 * 1024 * 1024, "--max-body-bytes", min=1024,
                                       help="Refuse larger request bodies with 413."),
    mcp: bool = typer.Option(True, "--mcp/--no-mcp", help="Mount the MCP server at /mcp."),
    log_level: str = typer.Option("warning", "--log-level", help="uvicorn log level."),
    allowed_host: list[str] | None = typer.Option(
        None, "--allowed-host",
        help="A Host name the server answers to (repeatable; DNS-rebinding protection). "
             "Default: allowed_hosts of the config, else the loopback names on a loopback bind.",
    ),
) -> None:
    """Serve the REST API (/v1), MCP (/mcp), metrics (/metrics) and the web inspector (/)."""
    _need_server_extra()
    from memlane.server.app import create_app
    from memlane.server.auth import key_store_for
    from memlane.server.runner import serve_forever

    mem = state(ctx, store).open(create=True)
    try:
        keys = key_store_for(mem.store)
        require = decide_auth(host, keys.has_active_keys(), auth)
        app = create_app(mem, keys=keys, require_auth=require, max_body_bytes=max_body_bytes, mcp=mcp, host=host,
                         allowed_hosts=allowed_host or None)
        active = len(keys.list_keys()) if require else 0

        def banner(url: str) -> None:
            # plain print: rich would wrap the URLs at the terminal width and break copy-paste
            print(f"memlane server on {mem.store.url}")
            print(f"  inspector  {url}/")
            print(f"  REST API   {url}/v1   (docs {url}/docs, spec {url}/openapi.json)")
            if mcp:
                print(f"  MCP        {url}/mcp  (streamable HTTP)")
            print(f"  metrics    {url}/metrics   health {url}/healthz")
            if require:
                print(f"  auth       API keys required ({active} active); send 'Authorization: Bearer <key>'")
            else:
                print("  auth       OFF: no API keys and bound to loopback, so anyone on this machine can read")
                print("             and write this memory. Turn auth on with: memlane keys create --tenant NAME")
            print("Press Ctrl-C to stop.", flush=True)

        serve_forever(app, host, port, on_bound=banner, log_level=log_level)
    finally:
        mem.close()


def mcp_cmd(
    ctx: typer.Context,
    store: str | None = STORE_OPTION,
    tenant: str | None = typer.Option(None, "--tenant", help="Only this tenant's sessions (default: all)."),
) -> None:
    """Run the MCP server over stdio (for Claude Desktop, IDEs and other MCP hosts)."""
    _need_server_extra()
    from memlane.server.mcp import run_stdio

    mem = state(ctx, store).open(create=True)
    try:
        run_stdio(mem, tenant)
    finally:
        mem.close()


# ---------------------------------------------------------------- keys


def keys_create_cmd(
    ctx: typer.Context,
    tenant: str = typer.Option(..., "--tenant", help="The tenant whose sessions this key may see."),
    name: str | None = typer.Option(None, "--name", help="A label, e.g. the agent that uses the key."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    store: str | None = STORE_OPTION,
) -> None:
    """Create an API key. The key is printed once; only its hash is stored."""
    from memlane.server.auth import key_store_for

    with state(ctx, store).open(create=True) as mem:
        record, plaintext = key_store_for(mem.store).create_key(tenant, name)
    if as_json:
        print(json.dumps({**record.to_dict(), "key": plaintext}))
        return
    console.print(f"created key [bold]{escape(record.id)}[/bold] for tenant [bold]{escape(record.tenant_id)}[/bold]:",
                  highlight=False)
    print(plaintext)
    err_console.print("Store it now: it cannot be shown again.")


def keys_list_cmd(
    ctx: typer.Context,
    all_: bool = typer.Option(False, "--all", help="Include revoked keys."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    store: str | None = STORE_OPTION,
) -> None:
    """List API keys (ids and tenants; never the keys themselves)."""
    from rich.table import Table

    from memlane.server.auth import key_store_for

    with state(ctx, store).open() as mem:
        found = key_store_for(mem.store).list_keys(include_revoked=all_)
    if as_json:
        print(json.dumps([k.to_dict() for k in found], indent=2))
        return
    table = Table("id", "tenant", "name", "created", "last used", "status")
    for k in found:
        add_plain_row(
            table, k.id, k.tenant_id, k.name or "", k.created_at.strftime("%Y-%m-%d %H:%M"),
            k.last_used_at.strftime("%Y-%m-%d %H:%M") if k.last_used_at else "",
            "active" if k.active else "revoked",
        )
    console.print(table)


def keys_revoke_cmd(
    ctx: typer.Context,
    key: str = typer.Argument(..., help="The key's id or name (from `memlane keys list`), or the whole key."),
    store: str | None = STORE_OPTION,
) -> None:
    """Revoke an API key; requests with it are refused from now on."""
    from memlane.errors import NotFoundError
    from memlane.server.auth import key_store_for, split_key

    parts = split_key(key)
    wanted = parts[0] if parts else key
    with state(ctx, store).open() as mem:
        keys = key_store_for(mem.store)
        if not keys.revoke_key(wanted):
            named = [k.id for k in keys.list_keys() if k.name == key]
            if len(named) > 1:
                raise InvalidInputError(
                    f"{len(named)} active keys are named {key!r} ({', '.join(named)}); revoke one by its id"
                )
            if not named or not keys.revoke_key(named[0]):
                raise NotFoundError(f"no active key with id or name {key!r}; see memlane keys list --all")
            wanted = named[0]
    console.print(f"revoked key {wanted}", highlight=False, markup=False)


# ---------------------------------------------------------------- chat


def chat_cmd(
    ctx: typer.Context,
    session: str | None = typer.Option(None, "--session", "-s", help="Continue this session (created if new)."),
    user: str | None = typer.Option(None, "--user", help="Your display name in the transcript (the messages carry the Anchor id; default: the configured anchor_name)."),
    base_url: str | None = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint (default: llm_base_url, else Ollama)."),
    model: str | None = typer.Option(None, "--model", help="Model name (default: llm_model, else llama3.2)."),
    max_tokens: int = typer.Option(3000, "--max-tokens", min=64, help="Token budget of the context packet."),
    strategy: str | None = typer.Option(None, "--strategy", help="Context strategy: simple, summary, hybrid, tiered."),
    system: str = typer.Option("You are a helpful assistant. Use the conversation memory you are given.",
                               "--system", help="System prompt of new sessions."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the packet instead of calling a model; store nothing."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Always ask the model (skip the response cache)."),
    server: str | None = typer.Option(None, "--server", help="Use a memlane server (URL) instead of the local database."),
    api_key: str | None = typer.Option(None, "--api-key", envvar="MEMLANE_API_KEY", help="API key for --server."),
    store: str | None = STORE_OPTION,
) -> None:
    """Chat with any OpenAI-compatible model, with memlane as its memory (/help inside)."""
    import os

    from memlane.server.chat import DEFAULT_BASE_URL, DEFAULT_MODEL, ChatModel, ChatRepl, stdin_lines

    st = state(ctx, store)
    settings = st.settings()
    chat_model = None
    if not dry_run:
        chat_model = ChatModel(
            base_url or settings.llm_base_url or DEFAULT_BASE_URL,
            model or settings.llm_model or DEFAULT_MODEL,
            os.environ.get(settings.llm_api_key_env) or None,
        )
    if server:
        from memlane.client import MemoryClient

        mem: Any = MemoryClient(server, api_key=api_key)
    else:
        mem = st.open(create=not dry_run)
    try:
        from rich.console import Console

        # soft wrap: long replies and URLs stay whole lines (the terminal wraps them)
        repl = ChatRepl(mem, model=chat_model, console=Console(soft_wrap=True), session_id=session, user=user,
                        system_prompt=system, max_tokens=max_tokens, strategy=strategy, dry_run=dry_run,
                        use_cache=False if no_cache else None)
        repl.run(stdin_lines())
    finally:
        if chat_model is not None:
            chat_model.close()
        mem.close()


# ---------------------------------------------------------------- bench


def bench_serve_cmd(
    clients: int = typer.Option(8, "--clients", "-c", min=1, max=256, help="Concurrent clients."),
    duration: float = typer.Option(60.0, "--duration", "-d", min=1.0, help="Seconds to run."),
    search_every: int = typer.Option(5, "--search-every", min=0, help="Every n-th request is a search (0: none)."),
    min_requests: int = typer.Option(
        0, "--min-requests", min=0, help="Each client makes at least this many requests, even past --duration."
    ),
    url: str | None = typer.Option(None, "--url", help="Bench a running server instead of starting one."),
    api_key: str | None = typer.Option(None, "--api-key", envvar="MEMLANE_API_KEY", help="API key for --url."),
    embedder: str | None = typer.Option(None, "--embedder", help="Embedder of the started server (default: configured)."),
    servers: int = typer.Option(
        1, "--servers", min=1, max=8,
        help="Servers to start on one database (more than 1: an embedded PostgreSQL, unless --store names one).",
    ),
    store: str | None = typer.Option(None, "--store", help="Database the started servers share (postgresql://...)."),
    postgres: bool = typer.Option(False, "--postgres", help="Start the server(s) on an embedded PostgreSQL, even one."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Load-test the server: clients append and search; reports throughput, p50/p95 and
    checks that every acknowledged message is stored (with --servers 2, read back from the other server)."""
    _need_server_extra()
    from memlane.server.bench import format_report, run_serve_bench

    with status("benchmarking the server") as say:
        result = run_serve_bench(url=url, api_key=api_key, clients=clients, duration=duration,
                                 search_every=search_every, min_requests=min_requests, embedder=embedder, servers=servers,
                                 store=store, postgres=postgres, progress=say)
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        print(format_report(result))
    if not result["ok"]:
        raise typer.Exit(1)


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    app.command("serve")(serve_cmd)
    app.command("mcp")(mcp_cmd)
    app.command("chat")(chat_cmd)
    bench_app.command("serve")(bench_serve_cmd)
    app.add_typer(keys_app, name="keys")
    keys_app.command("create")(keys_create_cmd)
    keys_app.command("list")(keys_list_cmd)
    keys_app.command("revoke")(keys_revoke_cmd)
