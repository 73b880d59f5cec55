"""memlane as an OpenAI Agents SDK ``Session`` (``pip install 'memlane[agents]'``).

    from agents import Agent, Runner
    from memlane import Memory
    from memlane.integrations.openai_agents import MemlaneSession

    mem = Memory("memory.db")
    session = MemlaneSession("user-42", mem)
    await Runner.run(agent, "Remember: I fly to Oslo on Friday", session=session)
    await Runner.run(agent, "When do I fly?", session=session)   # sees the first run

Every run item (messages with images or files, ``function_call``, ``function_call_output``,
``reasoning``, hosted-tool calls) is stored verbatim and ``get_items`` returns it exactly;
memlane reads the text and tool calls for search and context. ``clear_session`` deletes
the history from disk.

``MemlaneSession(..., packet_tokens=4000)`` is the mode only memlane gives this SDK:
``get_items`` then returns the token-budgeted context packet (recent turns verbatim, a
rolling summary of older ones, recalled messages from earlier sessions, notes) instead
of the raw history, so a long conversation never outgrows the model's window.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memlane.integrations._support import AnyMemory, as_async, require
from memlane.items import chat_to_responses

require("agents", "the OpenAI Agents SDK session", "agents")

from agents.memory.session import SessionABC  # noqa: E402

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings

__all__ = ["MemlaneSession"]


class MemlaneSession(SessionABC):
    """An Agents SDK session kept in memlane: a ``Memory`` in this process or a memlane
    server through ``MemoryClient`` (sync or async variants of either).

    ``session_id`` names the memlane session (created on first use). ``packet_tokens``
    switches ``get_items`` to the context packet of that many tokens; ``strategy`` picks
    the packet's strategy (see memlane.context.strategies).
    """

    def __init__(
        self,
        session_id: str,
        memory: AnyMemory,
        *,
        packet_tokens: int | None = None,
        strategy: str | None = None,
        session_settings: SessionSettings | None = None,
        **session_fields: Any,
    ) -> None:
        self.session_id = session_id
        self.memory = as_async(memory)
        self.packet_tokens = packet_tokens
        self.strategy = strategy
        self.session_settings = session_settings
        self._fields = session_fields  # user_id, agent_id, ... for a session made on first use

    async def _ensure(self) -> None:
        await self.memory.ensure_session(self.session_id, **self._fields)

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        await self._ensure()
        if self.packet_tokens is not None:
            return await self._packet_items(limit, self.packet_tokens)
        return [m.to_item() for m in await self.memory.items(self.session_id, limit)]  # type: ignore[misc]

    async def _packet_items(self, limit: int | None, budget: int) -> list[TResponseInputItem]:
        # The SDK asks before it adds the new input, so the query is the newest user text.
        newest = await self.memory.items(self.session_id, 16)
        query = next((m.content for m in reversed(newest) if m.role == "user" and m.content), None)
        packet = await self.memory.context(
            self.session_id, query, budget, strategy=self.strategy
        )
        items = chat_to_responses(packet.to_messages())
        if limit:
            items = items[-limit:]
            while items and items[0].get("type") == "function_call_output":
                items = items[1:]  # its call was cut off: a result alone is refused by the API
        return items  # type: ignore[return-value]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        if not items:
            return
        await self._ensure()
        await self.memory.add_messages(self.session_id, [dict(i) for i in items])

    async def pop_item(self) -> TResponseInputItem | None:
        await self._ensure()
        popped = await self.memory.pop(self.session_id)
        return popped.to_item() if popped is not None else None  # type: ignore[return-value]

    async def clear_session(self) -> None:
        """Delete every item of this session from disk (the session record stays)."""
        await self._ensure()
        await self.memory.forget_history(self.session_id)
