"""The MCP server, driven by the official SDK's own client: over stdio and over streamable HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from memlane import Memory
from memlane.scoping import session_key
from memlane.server.auth import key_store_for
from memlane.server.tenancy import Caller, TenantView
from tests.server_support import MEMLANE, cli_env, new_key, open_memory, running_server

TOOLS = {"add_message", "store_interaction", "search_memory", "get_context", "list_sessions",
         "session_history", "forget_session", "create_session"}


def _data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        data: dict[str, Any] = result.structured_content
        return data
    parsed: dict[str, Any] = json.loads(result.content[0].text)
    return parsed


async def exercise(client: Client) -> dict[str, Any]:
    """An agent's round trip through every tool."""
    tools = {t.name for t in (await client.list_tools()).tools}
    assert tools >= TOOLS
    await client.call_tool("create_session", {"session_id": "mcp-1", "title": "From MCP"})
    await client.call_tool("add_message", {"session_id": "mcp-1", "content": "My sister Lena lives in Graz.",
                                           "author_name": "Ana"})
    turn = _data(await client.call_tool("store_interaction", {
        "session_id": "mcp-1", "query": "Where does Lena live?", "response": "In Graz."}))
    assert turn["session_id"] == "mcp-1"
    history = _data(await client.call_tool("session_history", {"session_id": "mcp-1"}))
    assert [m["content"] for m in history["messages"]] == [
        "My sister Lena lives in Graz.", "Where does Lena live?", "In Graz."]
    assert history["messages"][0]["author_name"] == "Ana"
    hits = _data(await client.call_tool("search_memory", {"query": "Lena Graz"}))["hits"]
    assert hits and "Graz" in hits[0]["content"] and "scores" in hits[0]
    ctx = _data(await client.call_tool("get_context", {"session_id": "mcp-1", "query": "Lena", "max_tokens": 500}))
    assert "Graz" in json.dumps(ctx)
    sessions = _data(await client.call_tool("list_sessions", {}))["sessions"]
    missing = await client.call_tool("session_history", {"session_id": "nope"})
    assert missing.is_error and "does not exist" in missing.content[0].text
    forgotten = _data(await client.call_tool("forget_session", {"session_id": "mcp-1"}))
    after = _data(await client.call_tool("list_sessions", {}))["sessions"]
    return {"sessions": [s["id"] for s in sessions], "forgotten": forgotten["deleted"],
            "after": [s["id"] for s in after]}


def test_mcp_over_stdio(tmp_path: Path) -> None:
    db = tmp_path / "stdio.db"
    params = StdioServerParameters(command=MEMLANE, args=["--store", str(db), "mcp"], env=cli_env(tmp_path))

    async def main() -> dict[str, Any]:
        async with Client(params) as client:
            return await exercise(client)

    result = anyio.run(main)
    assert result == {"sessions": ["mcp-1"], "forgotten": True, "after": []}
    with Memory(db, embedder="none") as mem:
        assert mem.store.get_session("mcp-1") is None  # forgotten on disk too


def test_mcp_over_http_with_tenants(tmp_path: Path) -> None:
    mem = open_memory(tmp_path / "http.db")
    key_a = new_key(mem, "a")
    TenantView(mem, Caller("b")).store_interaction("b's private note about Vienna", "ok", session_id="b-only")

    with running_server(mem, keys=key_store_for(mem.store), require_auth=True) as url:

        async def as_key(key: str | None) -> dict[str, Any]:
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=30) as http,
                Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
            ):
                result = await exercise(client)
                b_hits = _data(await client.call_tool("search_memory", {"query": "Vienna"}))["hits"]
                assert all(h["session_id"] != "b-only" for h in b_hits)
                denied = await client.call_tool("session_history", {"session_id": "b-only"})
                assert denied.is_error
                return result

        assert anyio.run(as_key, key_a) == {"sessions": ["mcp-1"], "forgotten": True, "after": []}
        b_only = session_key("b", "b-only")  # ids are per tenant: b's session is stored under its key
        assert mem.get_session(b_only).tenant_id == "b" and mem.load_session(b_only)

        async def anonymous() -> None:
            async with httpx2.AsyncClient(timeout=10) as http:
                r = await http.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
                assert r.status_code == 401

        anyio.run(anonymous)
    mem.close()


def test_mcp_stdio_tenant_option(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with Memory(db, embedder="none") as mem:
        mem.create_session(session_id="other", tenant_id="someone-else")
    params = StdioServerParameters(
        command=MEMLANE, args=["--store", str(db), "mcp", "--tenant", "me"], env=cli_env(tmp_path)
    )

    async def main() -> list[str]:
        async with Client(params) as client:
            await client.call_tool("add_message", {"session_id": "mine", "content": "hello"})
            return [s["id"] for s in _data(await client.call_tool("list_sessions", {}))["sessions"]]

    assert anyio.run(main) == ["mine"]
    with Memory(db, embedder="none") as mem:
        assert mem.get_session(session_key("me", "mine")).tenant_id == "me"
