"""LlamaIndex chat store end to end: a chat engine with LlamaIndex's mock LLM and ChatMemoryBuffer."""

from __future__ import annotations

import pytest

pytest.importorskip("llama_index.core", reason="needs memlane[llamaindex] (make test installs it)")

from llama_index.core.base.llms.types import ChatMessage, ImageBlock, TextBlock, ToolCallBlock
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms.mock import MockLLMWithChatMemoryOfLastCall
from llama_index.core.memory import ChatMemoryBuffer

from memlane import Memory
from memlane.integrations.llamaindex import MemlaneChatStore


def words(text: str) -> list[str]:
    return text.split()  # a tokenizer that needs no download


def engine(store: MemlaneChatStore, llm: MockLLMWithChatMemoryOfLastCall) -> SimpleChatEngine:
    memory = ChatMemoryBuffer.from_defaults(chat_store=store, chat_store_key="ada", token_limit=2000,
                                            tokenizer_fn=words)
    return SimpleChatEngine.from_defaults(llm=llm, memory=memory)


def test_two_runs_share_history_and_delete_forgets(any_mem: Memory) -> None:
    llm = MockLLMWithChatMemoryOfLastCall(max_tokens=5)
    engine(MemlaneChatStore(any_mem), llm).chat("I am Ada from Oslo.")
    engine(MemlaneChatStore(any_mem), llm).chat("Who am I?")  # a new engine: history from memlane
    sent = [(m.role.value, m.content) for m in llm.last_chat_messages or ()]
    assert sent[0] == ("user", "I am Ada from Oslo.") and sent[-1] == ("user", "Who am I?")
    assert sent[1][0] == "assistant" and len(sent) == 3
    store = MemlaneChatStore(any_mem)
    assert store.get_keys() == ["ada"]
    any_mem.flush()
    assert any_mem.search("Ada Oslo", session_id="ada")
    gone = store.delete_messages("ada")
    assert gone is not None and len(gone) == 4
    assert store.get_messages("ada") == [] and any_mem.store.message_ids("ada", include_hidden=True) == []
    assert any_mem.search("Ada Oslo", session_id="ada") == []


def test_blocks_tool_calls_replace_and_delete_by_index(any_mem: Memory) -> None:
    store = MemlaneChatStore(any_mem)
    history = [
        ChatMessage(role="user", blocks=[TextBlock(text="what is this?"), ImageBlock(url="https://example.org/bike.png")]),
        ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_call_id="c1", tool_name="look", tool_kwargs={"zoom": 2})]),
        ChatMessage(role="tool", content="a red bicycle", additional_kwargs={"tool_call_id": "c1"}),
        ChatMessage(role="assistant", content="A red bicycle."),
    ]
    store.set_messages("k", history)
    assert store.get_messages("k") == history
    stored = any_mem.items("k")
    assert stored[1].tool_calls == [{"id": "c1", "type": "function", "function": {"name": "look", "arguments": "{\"zoom\": 2}"}}]
    assert (stored[2].role, stored[2].tool_call_id) == ("tool", "c1")
    assert [(m.role, m.content) for m in any_mem.window("k", 4000).messages] == [
        ("user", "what is this?"), ("assistant", ""), ("tool", "a red bicycle"), ("assistant", "A red bicycle.")]
    store.add_message("k", ChatMessage(role="user", content="thanks"))
    assert store.delete_message("k", 0) == history[0]
    assert store.delete_last_message("k") == ChatMessage(role="user", content="thanks")
    assert store.get_messages("k") == history[1:]
    assert store.delete_message("k", 10) is None and store.delete_message("missing", 0) is None
    store.set_messages("k", [ChatMessage(role="user", content="fresh start")])
    assert [m.content for m in store.get_messages("k")] == ["fresh start"]
    store.add_message("k", ChatMessage(role="assistant", content="first"), idx=0)
    assert [m.content for m in store.get_messages("k")] == ["first", "fresh start"]


def test_async_methods(mem: Memory) -> None:
    import asyncio

    store = MemlaneChatStore(mem)

    async def run() -> list[ChatMessage]:
        await store.async_add_message("a", ChatMessage(role="user", content="hi"))
        return await store.aget_messages("a")

    assert [m.content for m in asyncio.run(run())] == ["hi"]
