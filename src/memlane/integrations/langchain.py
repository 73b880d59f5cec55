"""memlane as LangChain chat history (``pip install 'memlane[langchain]'``).

    from langchain_core.runnables.history import RunnableWithMessageHistory
    from memlane import Memory
    from memlane.integrations.langchain import MemlaneChatMessageHistory

    mem = Memory("memory.db")
    chain = RunnableWithMessageHistory(model, lambda sid: MemlaneChatMessageHistory(sid, mem))
    chain.invoke("I fly to Oslo on Friday", config={"configurable": {"session_id": "u42"}})

Each message is stored whole (LangChain's own ``message_to_dict``: ids, multimodal content
parts, tool calls, additional kwargs) and comes back equal; memlane reads its text and tool
calls for search and context. ``clear()`` deletes the messages from disk.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memlane.aio import AsyncMemory
from memlane.errors import SessionNotFoundError
from memlane.integrations._support import as_sync, require
from memlane.items import text_of
from memlane.memory import Memory
from memlane.models import Message

require("langchain_core", "the LangChain chat history", "langchain")

from langchain_core.chat_history import BaseChatMessageHistory  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    ToolMessage,
    convert_to_messages,
    message_to_dict,
    messages_from_dict,
)

__all__ = ["MemlaneChatMessageHistory", "from_langchain", "to_langchain"]

_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "tool"}


def from_langchain(message: BaseMessage) -> Message:
    """A LangChain message as a memlane Message: the whole message kept, text and calls read."""
    role = _ROLES.get(message.type, "user")
    if message.type == "chat":  # ChatMessage carries its own role
        role = {"human": "user", "ai": "assistant"}.get(str(getattr(message, "role", "")), "user")
        role = role if role in ("system", "user", "assistant") else "user"
    calls = None
    if isinstance(message, AIMessage) and message.tool_calls:
        calls = [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": json.dumps(c["args"], ensure_ascii=False)}}
            for c in message.tool_calls
        ]
    return Message(
        role=role,
        content=text_of(message.content),
        name=message.name,
        tool_calls=calls,
        tool_call_id=message.tool_call_id if isinstance(message, ToolMessage) else None,
        item=message_to_dict(message),
    )


def to_langchain(message: Message) -> BaseMessage:
    """The LangChain message memlane was given, or one made from a plain chat message."""
    item = message.item
    if item is not None and isinstance(item.get("data"), dict) and isinstance(item.get("type"), str):
        return messages_from_dict([item])[0]
    return convert_to_messages([message.to_openai()])[0]


class MemlaneChatMessageHistory(BaseChatMessageHistory):
    """The chat history of one memlane session (made on first write)."""

    def __init__(self, session_id: str, memory: Memory | AsyncMemory, **session_fields: Any) -> None:
        self.session_id = session_id
        self.memory = as_sync(memory)
        self._fields = session_fields

    def _exists(self) -> bool:
        try:
            self.memory.get_session(self.session_id)
        except SessionNotFoundError:
            return False
        return True

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        return [to_langchain(m) for m in self.memory.items(self.session_id)] if self._exists() else []

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        if messages:
            self.memory.ensure_session(self.session_id, **self._fields)
            self.memory.add_messages(self.session_id, [from_langchain(m) for m in messages])

    def clear(self) -> None:
        """Delete this session's messages from disk."""
        if self._exists():
            self.memory.forget_history(self.session_id)
