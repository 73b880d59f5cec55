"""MCP tools for notes and memory commands (with the Anchor check) and the session resources,
driven by the official SDK's client connected in-process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from memlane import Memory
from memlane.server.mcp import build_server
from memlane.server.tenancy import Caller

ANCHOR = "@ana:example.org"


def _data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    data: dict[str, Any] = result.structured_content if result.structured_content is not None else json.loads(
        result.content[0].text)
    return data


def test_notes_commands_and_resources(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder="hashing", anchor_id=ANCHOR, anchor_name="Ana")
    mem.create_session(session_id="room", title="Trip")
    mem.add("room", {"role": "user", "content": "We fly to Oslo on Friday.", "author_id": ANCHOR})
    mem.add("room", {"role": "assistant", "content": "Noted: Oslo on Friday."})
    server = build_server(mem, lambda ctx: Caller(tenant=None))

    async def main() -> dict[str, Any]:
        async with Client(server) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert {"remember", "recall_notes", "note_history", "memory_command"} <= tools
            first = _data(await client.call_tool("remember", {"text": "Ana is vegetarian", "kind": "preference",
                                                              "session_id": "room"}))
            recalled = _data(await client.call_tool("recall_notes", {"about": "what does Ana eat?"}))["notes"]
            history = _data(await client.call_tool("note_history", {"note_id": first["id"]}))["versions"]
            refused = _data(await client.call_tool("memory_command", {
                "session_id": "room", "text": "forget this conversation", "author_id": "@mallory:example.org"}))
            kept = mem.items("room")
            chat = _data(await client.call_tool("memory_command", {
                "session_id": "room", "text": "how is the weather?", "author_id": ANCHOR}))
            remembered = _data(await client.call_tool("memory_command", {
                "session_id": "room", "text": "remember that the gate code is 4711", "author_id": ANCHOR}))
            templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
            listing = await client.read_resource("memlane://sessions")
            one = await client.read_resource("memlane://sessions/room")
            transcript = await client.read_resource("memlane://sessions/room/transcript")
            missing = await client.call_tool("note_history", {"note_id": 999_999})
            forgotten = _data(await client.call_tool("memory_command", {
                "session_id": "room", "text": "forget this conversation", "author_id": ANCHOR}))
            return {
                "first": first, "recalled": recalled, "history": history, "refused": refused, "kept": len(kept),
                "chat": chat, "remembered": remembered, "templates": templates,
                "listing": json.loads(listing.contents[0].text), "one": json.loads(one.contents[0].text),
                "transcript": transcript.contents[0].text, "missing": missing, "forgotten": forgotten,
            }

    got = anyio.run(main)
    mem.flush()
    assert got["first"]["text"] == "Ana is vegetarian"
    assert got["recalled"][0]["text"] == "Ana is vegetarian"
    assert [v["id"] for v in got["history"]] == [got["first"]["id"]]
    assert got["refused"]["recognized"] and not got["refused"]["allowed"] and not got["refused"]["changed"]
    assert got["kept"] == 2  # the refusal changed nothing
    assert got["chat"]["recognized"] is False
    assert got["remembered"]["allowed"] and got["remembered"]["changed"]
    assert "the gate code is 4711" in json.dumps(got["remembered"])
    assert {"memlane://sessions{?limit}", "memlane://sessions/{session_id}",
            "memlane://sessions/{session_id}/transcript"} <= got["templates"]
    assert [s["id"] for s in got["listing"]] == ["room"]
    assert [m["content"] for m in got["one"]["messages"]][:2] == ["We fly to Oslo on Friday.", "Noted: Oslo on Friday."]
    assert "We fly to Oslo on Friday." in got["transcript"]
    assert got["missing"].is_error and "not" in got["missing"].content[0].text.lower()
    assert got["forgotten"]["allowed"] and got["forgotten"]["changed"]
    assert mem.items("room") == [] or mem.store.get_session("room") is None  # gone from disk
    mem.close()
