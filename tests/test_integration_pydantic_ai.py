"""Pydantic AI end to end: a real Agent with Pydantic AI's FunctionModel, history kept in memlane."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="needs memlane[pydantic-ai] (make test installs it)")

from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from memlane import Memory
from memlane.integrations.pydantic_ai import MemlaneHistory, context_processor


def scripted(seen: list[list[ModelMessage]]) -> FunctionModel:
    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
            return ModelResponse(parts=[TextPart("It rains in Oslo, Ada.")])
        prompt = next(p.content for p in reversed(last.parts) if isinstance(p, UserPromptPart))
        if "weather" in str(prompt).lower():
            return ModelResponse(parts=[ToolCallPart("weather", {"city": "Oslo"}, tool_call_id="call-1")])
        return ModelResponse(parts=[TextPart(f"answer to: {prompt}")])

    return FunctionModel(reply)


def make_agent(seen: list[list[ModelMessage]], **kwargs: Any) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(scripted(seen), **kwargs)

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"rain in {city}"

    return agent


def dump(messages: list[ModelMessage]) -> Any:
    return ModelMessagesTypeAdapter.dump_python(messages, mode="json")


def test_two_runs_tool_calls_roundtrip_and_forget(any_mem: Memory) -> None:
    seen: list[list[ModelMessage]] = []
    agent = make_agent(seen)
    history = MemlaneHistory(any_mem, "pa-1")
    first = agent.run_sync("I am Ada. What is the weather in Oslo?", message_history=history.load())
    assert first.output == "It rains in Oslo, Ada."
    history.save(first.new_messages())
    assert dump(history.load()) == dump(first.all_messages())  # every part, exactly
    stored = any_mem.items("pa-1")
    assert stored[1].tool_calls == [{"id": "call-1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}]
    assert (stored[2].role, stored[2].tool_call_id, stored[2].content) == ("tool", "call-1", "rain in Oslo")

    second = make_agent(seen).run_sync("Who am I?", message_history=MemlaneHistory(any_mem, "pa-1").load())
    assert dump(seen[-1][:4]) == dump(first.all_messages())  # the second run saw the first
    history.save(second.new_messages())
    any_mem.flush()
    assert any_mem.search("Ada Oslo weather", session_id="pa-1")
    history.clear()
    assert history.load() == [] and any_mem.store.message_ids("pa-1", include_hidden=True) == []
    assert any_mem.search("Ada Oslo weather", session_id="pa-1") == []


def test_history_processor_feeds_the_context_packet(mem: Memory) -> None:
    sid = mem.create_session(session_id="pa-2")
    for i in range(60):
        mem.add(sid, f"fact {i}: locker {i} has code {1000 + i}")
    seen: list[list[ModelMessage]] = []
    agent = make_agent(seen, capabilities=[ProcessHistory(context_processor(mem, sid, max_tokens=300))])
    result = agent.run_sync("which code has locker 59?")
    assert result.output == "answer to: which code has locker 59?"
    sent = seen[-1]
    texts = [str(p.content) for m in sent if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, UserPromptPart)]
    assert any("1059" in t for t in texts)  # the newest facts are in the packet
    assert len(sent) < 30  # but not the whole history: the packet fits 300 tokens
    assert texts[-1] == "which code has locker 59?"
