"""memlane as a LlamaIndex chat store (``pip install 'memlane[llamaindex]'``).

    from llama_index.core.memory import ChatMemoryBuffer
    from memlane import Memory
    from memlane.integrations.llamaindex import MemlaneChatStore

    store = MemlaneChatStore(Memory("memory.db"))
    memory = ChatMemoryBuffer.from_defaults(chat_store=store, chat_store_key="user-42")

A key is a memlane session. Each ``ChatMessage`` is stored whole (its content blocks:
text, images, audio, documents, tool calls, thinking) and comes back equal; memlane reads
its text and tool calls. ``set_messages`` replaces a history after checking the new one,
``delete_message(key, idx)`` reads only the row it deletes, and deleting removes the rows
from disk.
"""

from __future__ import annotations

import json
from typing import Any

from memlane.aio import AsyncMemory
from memlane.errors import SessionNotFoundError
from memlane.integrations._support import as_sync, require
from memlane.memory import Memory
from memlane.models import Message

require("llama_index.core", "the LlamaIndex chat store", "llamaindex")

from llama_index.core.base.llms.types import ChatMessage, TextBlock, ToolCallBlock  # noqa: E402
from llama_index.core.storage.chat_store.base import BaseChatStore  # noqa: E402
from pydantic import PrivateAttr  # noqa: E402

__all__ = ["MemlaneChatStore"]

_AGENT = "llamaindex-chat-store"  # marks the sessions this store made, for get_keys
_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant",
          "chatbot": "assistant", "model": "assistant", "tool": "tool", "function": "tool"}


class MemlaneChatStore(BaseChatStore):
    """A LlamaIndex ``BaseChatStore`` on memlane (SQLite or PostgreSQL)."""

    _memory: Memory = PrivateAttr()

    def __init__(self, memory: Memory | AsyncMemory, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._memory = as_sync(memory)

    @classmethod
    def class_name(cls) -> str:
        return "MemlaneChatStore"

    # ------------------------------------------------------------ conversion

    def _to_memlane(self, key: str, message: ChatMessage, known: set[str] | None = None) -> Message:
        """``known``: call ids of messages converted before this one in the same batch."""
        text = "\n".join(b.text for b in message.blocks if isinstance(b, TextBlock) and b.text)
        calls = [
            {"id": b.tool_call_id, "type": "function",
             "function": {"name": b.tool_name,
                          "arguments": b.tool_kwargs if isinstance(b.tool_kwargs, str)
                          else json.dumps(b.tool_kwargs, ensure_ascii=False)}}
            for b in message.blocks if isinstance(b, ToolCallBlock) and b.tool_call_id
        ]
        role = _ROLES.get(str(message.role.value), "user")
        call_id = message.additional_kwargs.get("tool_call_id")
        if role == "tool" and not (
            isinstance(call_id, str)
            and (call_id in (known or ()) or self._memory.store.find_tool_call(key, call_id))
        ):
            role, call_id = "user", None  # a result memlane cannot pair: read as plain text
        if known is not None:
            known.update(str(c["id"]) for c in calls)
        return Message(
            role=role, content=text, tool_calls=calls or None,
            tool_call_id=call_id if role == "tool" else None,
            item=message.model_dump(mode="json"),
        )

    @staticmethod
    def _to_llamaindex(message: Message) -> ChatMessage:
        if message.item is not None and "blocks" in message.item:
            return ChatMessage.model_validate(message.item)
        chat = message.to_openai()
        extra = {"tool_call_id": chat["tool_call_id"]} if chat.get("tool_call_id") else {}
        return ChatMessage(role=chat["role"], content=chat["content"], additional_kwargs=extra)

    def _session(self, key: str) -> str:
        self._memory.ensure_session(key, agent_id=_AGENT)
        return key

    def _exists(self, key: str) -> bool:
        try:
            self._memory.get_session(key)
        except SessionNotFoundError:
            return False
        return True

    # ------------------------------------------------------------ BaseChatStore

    def set_messages(self, key: str, messages: list[ChatMessage]) -> None:
        """Replace the history of ``key`` (the new messages are checked first)."""
        session = self._session(key)
        known: set[str] = set()
        converted = [self._to_memlane(session, m, known) for m in messages]
        self._memory.replace_history(session, converted)

    def get_messages(self, key: str) -> list[ChatMessage]:
        return [self._to_llamaindex(m) for m in self._memory.items(key)] if self._exists(key) else []

    def add_message(self, key: str, message: ChatMessage, idx: int | None = None) -> None:
        if idx is not None:  # an insert in the middle rewrites the history after it
            messages = self.get_messages(key)
            messages.insert(idx, message)
            self.set_messages(key, messages)
            return
        session = self._session(key)
        self._memory.add_messages(session, [self._to_memlane(session, message)])

    def delete_messages(self, key: str) -> list[ChatMessage] | None:
        if not self._exists(key):
            return None
        gone = self.get_messages(key)
        self._memory.forget_history(key)
        return gone

    def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        if not self._exists(key):
            return None
        gone = self._memory.forget_at(key, idx)
        return self._to_llamaindex(gone) if gone is not None else None

    def delete_last_message(self, key: str) -> ChatMessage | None:
        if not self._exists(key):
            return None
        gone = self._memory.pop(key)
        return self._to_llamaindex(gone) if gone is not None else None

    def get_keys(self) -> list[str]:
        return sorted(s.id for s in self._memory.list_sessions(limit=100_000, agent_id=_AGENT))
