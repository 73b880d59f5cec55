"""The OpenAI Agents SDK Session, end to end with the real Runner and a scripted model."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("agents", reason="needs memlane[agents] (make test installs it)")

from agents import Agent, Model, ModelResponse, Runner, function_tool, set_tracing_disabled
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary

from memlane import Memory
from memlane.integrations.openai_agents import MemlaneSession

set_tracing_disabled(True)


def say(text: str, n: int) -> ResponseOutputMessage:
    return ResponseOutputMessage(id=f"msg_{n}", type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=text, annotations=[])])


class ScriptedModel(Model):
    """A model that answers from a script and records every input it was sent."""

    def __init__(self, script: list[list[Any]]) -> None:
        self.script = script
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        self.inputs.append(json.loads(json.dumps(input, default=str)))
        return ModelResponse(output=self.script.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"rain in {city}, 4 C"


def first_run_script() -> list[list[Any]]:
    return [
        [ResponseReasoningItem(id="rs_1", type="reasoning", summary=[Summary(type="summary_text", text="check the weather tool")],
                               encrypted_content="gAAAAB-opaque=="),
         ResponseFunctionToolCall(id="fc_1", type="function_call", call_id="call_1", name="weather",
                                  arguments='{"city":"Oslo"}', status="completed")],
        [say("It rains in Oslo, Ada.", 1)],
    ]


def test_two_runs_tool_calls_roundtrip_and_forget(any_mem: Memory) -> None:
    async def run() -> None:
        session = MemlaneSession("user-ada", any_mem, user_id="ada")
        model = ScriptedModel([*first_run_script(), [say("Your name is Ada.", 2)]])
        agent = Agent(name="helper", instructions="Be brief.", model=model, tools=[weather])

        first = await Runner.run(agent, "I am Ada. Weather in Oslo?", session=session)
        assert first.final_output == "It rains in Oslo, Ada."
        stored = await session.get_items()
        # Real run items round-trip exactly: reasoning, function_call, its output, the message.
        assert stored == json.loads(json.dumps(first.to_input_list(), default=str))
        assert [i.get("type") for i in stored] == [None, "reasoning", "function_call", "function_call_output", "message"]

        second = await Runner.run(agent, "What is my name?", session=session)
        assert second.final_output == "Your name is Ada."
        seen = model.inputs[-1]
        assert seen[: len(stored)] == stored  # the second run saw the whole first run, verbatim
        assert seen[-1]["content"] == "What is my name?"

        assert await session.get_items(limit=2) == (await session.get_items())[-2:]
        popped = await session.pop_item()
        assert popped is not None and popped["content"][0]["text"] == "Your name is Ada."
        any_mem.flush()
        assert any_mem.search("Oslo weather", session_id="user-ada")
        await session.clear_session()
        assert await session.get_items() == []
        assert any_mem.store.message_ids("user-ada", include_hidden=True) == []
        assert any_mem.search("Oslo weather", session_id="user-ada") == []

    asyncio.run(run())


def test_windows_skip_reasoning_items(mem: Memory) -> None:
    async def run() -> None:
        session = MemlaneSession("w", mem)
        agent = Agent(name="helper", model=ScriptedModel(first_run_script()), tools=[weather])
        await Runner.run(agent, "I am Ada. Weather in Oslo?", session=session)

    asyncio.run(run())
    shown = [(m.role, m.content, bool(m.tool_calls)) for m in mem.window("w", 4000).messages]
    assert shown == [("user", "I am Ada. Weather in Oslo?", False), ("assistant", "", True),
                     ("tool", "rain in Oslo, 4 C", False), ("assistant", "It rains in Oslo, Ada.", False)]


def test_packet_mode_feeds_the_budgeted_context(mem: Memory) -> None:
    async def run() -> tuple[list[Any], list[Any]]:
        raw = MemlaneSession("p", mem)
        await raw.add_items([{"role": "user", "content": f"fact {i}: the locker code is {1000 + i}"} for i in range(60)])
        session = MemlaneSession("p", mem, packet_tokens=300)
        model = ScriptedModel([[say("1059", 1)]])
        agent = Agent(name="helper", model=model)
        await Runner.run(agent, "which locker code was fact 59?", session=session)
        return model.inputs[-1], await session.get_items()

    seen, items = asyncio.run(run())
    texts = [i.get("content") for i in seen if isinstance(i.get("content"), str)]
    assert any("1059" in t for t in texts)  # the newest fact made it into the packet
    assert len(seen) < 60  # but not the whole history: the packet fits 300 tokens
    from memlane.models import message_from_input
    from memlane.tokens import get_counter

    counter = get_counter(None)
    chat = [message_from_input(i) for i in items if i.get("type") is None]
    assert counter.count_messages(chat) <= 300


def test_session_on_a_memlane_server(tmp_path: Any) -> None:
    from memlane.client import MemoryClient
    from memlane.server.auth import key_store_for
    from tests.server_support import open_memory, running_server

    served = open_memory(tmp_path / "server.db")
    try:
        with running_server(served, keys=key_store_for(served.store), require_auth=False) as url, \
                MemoryClient(url) as client:

            async def run() -> None:
                session = MemlaneSession("remote-ada", client)
                model = ScriptedModel([*first_run_script(), [say("Your name is Ada.", 2)]])
                agent = Agent(name="helper", model=model, tools=[weather])
                first = await Runner.run(agent, "I am Ada. Weather in Oslo?", session=session)
                assert await session.get_items() == json.loads(json.dumps(first.to_input_list(), default=str))
                await Runner.run(agent, "What is my name?", session=session)
                assert model.inputs[-1][0]["content"] == "I am Ada. Weather in Oslo?"
                assert (await session.pop_item() or {})["content"][0]["text"] == "Your name is Ada."
                await session.clear_session()
                assert await session.get_items() == []

            asyncio.run(run())
        assert served.store.message_ids("remote-ada", include_hidden=True) == []
    finally:
        served.close()
