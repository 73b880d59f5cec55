"""LangChain chat history end to end: RunnableWithMessageHistory with LangChain's fake chat model."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain_core", reason="needs memlane[langchain] (make test installs it)")

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from pydantic import Field

from memlane import Memory
from memlane.integrations.langchain import MemlaneChatMessageHistory


class RecordingFakeModel(FakeMessagesListChatModel):
    """LangChain's fake chat model, keeping the messages of every call."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
def test_two_runs_share_history_and_clear_forgets(any_mem: Memory) -> None:
    model = RecordingFakeModel(responses=[AIMessage(content="Noted, Ada.", id="ai-1"),
                                          AIMessage(content="You are Ada.", id="ai-2")])
    prompt = ChatPromptTemplate.from_messages([("system", "Be brief."), MessagesPlaceholder("history"), ("human", "{q}")])
    chain = RunnableWithMessageHistory(
        prompt | model, lambda sid: MemlaneChatMessageHistory(sid, any_mem),
        input_messages_key="q", history_messages_key="history",
    )
    config: Any = {"configurable": {"session_id": "lc-1"}}
    chain.invoke({"q": "I am Ada."}, config=config)
    answer = chain.invoke({"q": "Who am I?"}, config=config)
    assert answer.content == "You are Ada."
    second_call = model.seen[-1]
    assert [m.content for m in second_call] == ["Be brief.", "I am Ada.", "Noted, Ada.", "Who am I?"]
    history = MemlaneChatMessageHistory("lc-1", any_mem)
    assert [m.id for m in history.messages if isinstance(m, AIMessage)] == ["ai-1", "ai-2"]
    any_mem.flush()
    assert any_mem.search("Ada", session_id="lc-1")
    history.clear()
    assert history.messages == [] and any_mem.store.message_ids("lc-1", include_hidden=True) == []
    assert any_mem.search("Ada", session_id="lc-1") == []


def test_ids_multimodal_parts_and_tool_calls_roundtrip(any_mem: Memory) -> None:
    history = MemlaneChatMessageHistory("lc-2", any_mem)
    sent: list[BaseMessage] = [
        SystemMessage(content="You see images.", id="s-1"),
        HumanMessage(content=[{"type": "text", "text": "look"},
                              {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}], id="h-1"),
        AIMessage(content="", id="a-1", tool_calls=[{"name": "zoom", "args": {"level": 2}, "id": "call-1", "type": "tool_call"}]),
        ToolMessage(content="a red bicycle", tool_call_id="call-1", id="t-1"),
        AIMessage(content=[{"type": "text", "text": "A red bicycle."}], id="a-2", additional_kwargs={"k": [1, 2]}),
    ]
    history.add_messages(sent)
    assert MemlaneChatMessageHistory("lc-2", any_mem).messages == sent
    shown = [(m.role, m.content) for m in any_mem.window("lc-2", 4000).messages]
    assert shown == [("system", "You see images."), ("user", "look"), ("assistant", ""),
                     ("tool", "a red bicycle"), ("assistant", "A red bicycle.")]
    assert any_mem.items("lc-2")[2].tool_calls == [
        {"id": "call-1", "type": "function", "function": {"name": "zoom", "arguments": "{\"level\": 2}"}}]


def test_reads_plain_memlane_messages(mem: Memory) -> None:
    sid = mem.create_session()
    mem.add(sid, "hello")
    mem.add(sid, "hi!", role="assistant")
    assert [(type(m).__name__, m.content) for m in MemlaneChatMessageHistory(sid, mem).messages] == [
        ("HumanMessage", "hello"), ("AIMessage", "hi!")]
    assert MemlaneChatMessageHistory("never-written", mem).messages == []
