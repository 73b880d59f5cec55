"""AsyncMemory and AsyncMemoryClient: the sync engine awaited, on both stores and the server."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any

from memlane import Memory
from memlane.aio import AsyncMemory, AsyncMemoryClient
from memlane.client import MemoryClient
from memlane.server.auth import key_store_for
from tests.server_support import open_memory, running_server

# Sync-only on purpose: wiring (observers, closers), constructors, and plain lookups.
SYNC_ONLY = {"add_observer", "add_closer", "from_url", "in_memory", "sessions", "token_encoding_of",
             "pending_writes", "anchor_id", "is_anchor", "MAX_DEFERRED", "background_work_started",
             # an iterator that may block while it follows; async callers use GET /v1/events
             "events",
             # the event bus and shared cache objects, and callbacks on a thread of their own
             "bus", "hot_cache", "subscribe",
             # the deprecated view of mem.parts, kept only for old sync callers
             "extensions"}


async def script(mem: Any) -> dict[str, Any]:
    """An agent's async use of memory; the same on AsyncMemory and AsyncMemoryClient."""
    sid = await mem.create_session(system_prompt="Be brief.", user_id="ana")
    await mem.add(sid, "I am vegetarian and visit Lisbon in May.")
    await asyncio.gather(*(mem.add(sid, f"note {i} about trams", role="assistant") for i in range(8)))
    call = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    await mem.add_messages(sid, [{"role": "assistant", "content": None, "tool_calls": [call]},
                                 {"role": "tool", "content": "sunny", "tool_call_id": "c1"}])
    await mem.flush()
    recent = await mem.get_recent_messages(sid, 4096)
    hits = await mem.search("vegetarian Lisbon", top_k=3)
    packet = await mem.context(sid, "what do I eat?", max_tokens=600)
    forgotten = await mem.forget_messages([m.id for m in recent if m.content == "note 0 about trams"])
    after = await mem.get_recent_messages(sid, 4096)
    deleted = await mem.delete_session(sid)
    return {
        "recent": sorted((m.role, m.content) for m in recent),
        "first_hit": hits[0].message.content,
        "packet_fits": packet.budget is not None and packet.budget.used <= 600 and len(packet.to_messages()) > 1,
        "forgotten": forgotten,
        "after": len(after),
        "deleted": deleted,
    }


EXPECTED = {
    "recent": sorted([("system", "Be brief."), ("user", "I am vegetarian and visit Lisbon in May."),
                      *(("assistant", f"note {i} about trams") for i in range(8)),
                      ("assistant", ""), ("tool", "sunny")]),
    "first_hit": "I am vegetarian and visit Lisbon in May.",
    "packet_fits": True,
    "forgotten": 1,
    "after": 11,
    "deleted": True,
}


def test_async_memory_on_both_stores(any_mem: Memory) -> None:
    assert asyncio.run(script(AsyncMemory.wrap(any_mem))) == EXPECTED


def test_async_memory_opens_and_closes_like_memory(tmp_path: Path) -> None:
    async def run() -> list[str]:
        async with AsyncMemory(tmp_path / "m.db", embedder="hashing") as mem:
            sid = await mem.create_session(session_id="s")
            await mem.add_messages(sid, [{"type": "reasoning", "id": "rs", "summary": []},
                                         {"role": "user", "content": "hi"}])
            return [m.to_item().get("id", m.content) for m in await mem.items(sid)]

    assert asyncio.run(run()) == ["rs", "hi"]
    with Memory(tmp_path / "m.db", embedder="hashing") as mem:  # closed cleanly, data on disk
        assert [m.content for m in mem.items("s")] == ["", "hi"]


def test_async_client_against_the_server(tmp_path: Path) -> None:
    mem = open_memory(tmp_path / "server.db")
    try:
        with running_server(mem, keys=key_store_for(mem.store), require_auth=False) as url:

            async def run() -> dict[str, Any]:
                async with AsyncMemoryClient(url) as client:
                    assert (await client.health())["status"] == "ok"
                    return await script(client)

            got = asyncio.run(run())
    finally:
        mem.close()
    assert got == EXPECTED


def test_every_method_has_an_async_twin() -> None:
    for sync_cls, async_cls in ((Memory, AsyncMemory), (MemoryClient, AsyncMemoryClient)):
        public = {n for n in dir(sync_cls) if not n.startswith("_") and n not in SYNC_ONLY}
        missing = sorted(n for n in public if not inspect.iscoroutinefunction(getattr(async_cls, n, None)))
        assert missing == [], f"{async_cls.__name__} lacks async {missing}"
        for name in public:  # same parameters as the sync method
            sync_params = list(inspect.signature(getattr(sync_cls, name)).parameters)
            assert getattr(async_cls, name).__doc__ == getattr(sync_cls, name).__doc__, name
            assert sync_params[0] == "self"
