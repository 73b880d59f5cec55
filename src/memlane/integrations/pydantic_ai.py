"""memlane for Pydantic AI (``pip install 'memlane[pydantic-ai]'``).

    from pydantic_ai import Agent
    from memlane import Memory
    from memlane.integrations.pydantic_ai import MemlaneHistory

    history = MemlaneHistory(Memory("memory.db"), "user-42")
    result = agent.run_sync("I fly to Oslo on Friday", message_history=history.load())
    history.save(result.new_messages())

Each ``ModelMessage`` is stored whole (Pydantic AI's own JSON form: every part, tool calls,
tool returns, thinking, files) and loads back equal; memlane reads its text and tool calls.
``context_processor(memory, session_id, max_tokens)`` is a history processor that hands
the model memlane's token-budgeted context packet (recent turns, rolling summary, recalled
messages, notes) in front of the current run's messages instead of the raw history.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from memlane.aio import AsyncMemory
from memlane.errors import SessionNotFoundError
from memlane.integrations._support import as_async, as_sync, require
from memlane.memory import Memory
from memlane.models import Message

require("pydantic_ai", "the Pydantic AI integration", "pydantic-ai")

from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

__all__ = ["MemlaneHistory", "context_processor", "from_memlane", "to_memlane"]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(c for c in content if isinstance(c, str))
    return json.dumps(content, ensure_ascii=False, default=str)


def _one(message: ModelMessage) -> Message:
    item = ModelMessagesTypeAdapter.dump_python([message], mode="json")[0]
    if isinstance(message, ModelResponse):
        calls = [
            {"id": p.tool_call_id, "type": "function", "function": {"name": p.tool_name, "arguments": p.args_as_json_str()}}
            for p in message.parts if isinstance(p, ToolCallPart)
        ]
        text = "\n".join(p.content for p in message.parts if isinstance(p, TextPart))
        return Message(role="assistant", content=text, tool_calls=calls or None, item=item)
    returns = [p for p in message.parts if isinstance(p, ToolReturnPart)]
    prompts = [_text(p.content) for p in message.parts if isinstance(p, UserPromptPart)]
    systems = [p.content for p in message.parts if isinstance(p, SystemPromptPart)]
    if len(returns) == 1 and not prompts and not systems:
        return Message(role="tool", content=_text(returns[0].content), tool_call_id=returns[0].tool_call_id,
                       item=item)
    texts = [*systems, *prompts, *(_text(r.content) for r in returns)]
    role = "system" if systems and not prompts and not returns else "user"
    return Message(role=role, content="\n".join(t for t in texts if t), item=item)


def to_memlane(messages: Sequence[ModelMessage]) -> list[Message]:
    """Pydantic AI messages as memlane Messages (each kept whole in ``Message.item``)."""
    return [_one(m) for m in messages]


def from_memlane(messages: Sequence[Message]) -> list[ModelMessage]:
    """memlane Messages as Pydantic AI messages: stored ones exactly, plain chat ones converted."""
    out: list[ModelMessage] = []
    for m in messages:
        item = m.item
        if item is not None and item.get("kind") in ("request", "response") and "parts" in item:
            out.extend(ModelMessagesTypeAdapter.validate_python([item]))
        elif m.role == "assistant":
            parts: list[Any] = [TextPart(m.content)] if m.content else []
            parts += [
                ToolCallPart(tool_name=c["function"]["name"], args=c["function"]["arguments"], tool_call_id=c["id"])
                for c in m.tool_calls or ()
            ]
            out.append(ModelResponse(parts=parts))
        elif m.role == "tool":
            out.append(ModelRequest(parts=[ToolReturnPart(tool_name=m.name or "tool", content=m.content,
                                                          tool_call_id=m.tool_call_id or "")]))
        elif m.role == "system":
            out.append(ModelRequest(parts=[SystemPromptPart(m.content)]))
        else:
            out.append(ModelRequest(parts=[UserPromptPart(m.content)]))
    return out


class MemlaneHistory:
    """One memlane session as a Pydantic AI message history."""

    def __init__(self, memory: Memory | AsyncMemory, session_id: str, **session_fields: Any) -> None:
        self.memory = as_sync(memory)
        self.session_id = session_id
        self._fields = session_fields

    def load(self, limit: int | None = None) -> list[ModelMessage]:
        """The stored history (the newest ``limit`` messages), oldest first."""
        try:
            return from_memlane(self.memory.items(self.session_id, limit))
        except SessionNotFoundError:
            return []

    def save(self, messages: Sequence[ModelMessage]) -> None:
        """Append a run's new messages (``result.new_messages()``) in one transaction."""
        if messages:
            self.memory.ensure_session(self.session_id, **self._fields)
            self.memory.add_messages(self.session_id, to_memlane(messages))

    def clear(self) -> None:
        """Delete the session's messages from disk."""
        try:
            self.memory.forget_history(self.session_id)
        except SessionNotFoundError:
            return


def _query(messages: Sequence[ModelMessage]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart):
                    return _text(part.content)
    return None


def context_processor(
    memory: Memory | AsyncMemory, session_id: str, max_tokens: int = 4000, *, strategy: str | None = None
) -> Callable[[list[ModelMessage]], Awaitable[list[ModelMessage]]]:
    """A history processor: the context packet of ``session_id`` for the run's newest user
    prompt (fitting ``max_tokens``), then the current run's own messages.

    Use it with ``capabilities=[ProcessHistory(context_processor(...))]`` and without
    ``message_history``: memlane decides what of the past the model sees.
    """
    amem = as_async(memory)

    async def process(messages: list[ModelMessage]) -> list[ModelMessage]:
        try:
            await amem.get_session(session_id)
        except SessionNotFoundError:
            return messages
        packet = await amem.context(session_id, _query(messages), max_tokens, strategy=strategy)
        past = [Message(role=m["role"], content=m.get("content") or "", tool_calls=m.get("tool_calls"),
                        tool_call_id=m.get("tool_call_id"), name=m.get("name"))
                for m in packet.to_messages()]
        return [*from_memlane(past), *messages]

    return process
