"""LangGraph: the checkpointer passes LangGraph's own conformance suite on both stores, and a real
graph with LangChain's fake chat model runs twice on one thread; the store searches through memlane."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.conformance", reason="needs memlane[langgraph] (make test installs it)")

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import Field

from memlane import Memory
from memlane.integrations.langgraph import MemlaneSaver, MemlaneStore


def test_checkpointer_passes_langgraph_conformance(any_mem: Memory) -> None:
    @checkpointer_test(name="MemlaneSaver")
    async def saver() -> AsyncIterator[MemlaneSaver]:
        yield MemlaneSaver(any_mem)

    report = asyncio.run(validate(saver))
    report.print_report()
    failures = {cap: r.failures for cap, r in report.results.items() if r.passed is False}
    assert failures == {}
    assert report.passed_all_base()
    passed = {cap: r.tests_passed for cap, r in report.results.items() if r.passed}
    assert set(passed) >= {"put", "put_writes", "get_tuple", "list", "delete_thread", "copy_thread",
                           "prune", "delete_for_runs"}


class RecordingFakeModel(FakeMessagesListChatModel):
    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"rain in {city}"


def build(model: RecordingFakeModel, saver: MemlaneSaver) -> Any:
    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([weather]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=saver)


def test_graph_two_runs_tool_calls_and_forget(any_mem: Memory) -> None:
    model = RecordingFakeModel(responses=[
        AIMessage(content="", id="a1", tool_calls=[{"name": "weather", "args": {"city": "Oslo"}, "id": "call-1"}]),
        AIMessage(content="It rains in Oslo, Ada.", id="a2"),
        AIMessage(content="You are Ada.", id="a3"),
    ])
    saver = MemlaneSaver(any_mem)
    config: Any = {"configurable": {"thread_id": "t-ada"}}
    build(model, saver).invoke({"messages": [HumanMessage("I am Ada. Weather in Oslo?", id="h1")]}, config)
    # a new graph object (a restarted process) on the same memory continues the thread
    out = build(model, MemlaneSaver(any_mem)).invoke({"messages": [HumanMessage("Who am I?", id="h2")]}, config)
    assert out["messages"][-1].content == "You are Ada."
    seen = model.seen[-1]
    assert [type(m).__name__ for m in seen] == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage", "HumanMessage"]
    assert isinstance(seen[2], ToolMessage) and seen[2].content == "rain in Oslo" and seen[2].tool_call_id == "call-1"
    assert seen[1].tool_calls[0]["args"] == {"city": "Oslo"}
    history = list(saver.list(config))
    assert len(history) >= 6 and saver.get_tuple(config) is not None
    saver.delete_thread("t-ada")
    assert saver.get_tuple(config) is None and list(saver.list(config)) == []
    assert any_mem.store.list_records("langgraph:thread:t-ada") == []


def test_async_graph_run(mem: Memory) -> None:
    model = RecordingFakeModel(responses=[AIMessage(content="hi", id="x1"), AIMessage(content="again", id="x2")])
    graph = build(model, MemlaneSaver(mem))
    config: Any = {"configurable": {"thread_id": "t-async"}}

    async def run() -> Any:
        await graph.ainvoke({"messages": [HumanMessage("one")]}, config)
        return await graph.ainvoke({"messages": [HumanMessage("two")]}, config)

    out = asyncio.run(run())
    assert [m.content for m in out["messages"]] == ["one", "hi", "two", "again"]


def test_store_search_is_memlane_search(any_mem: Memory) -> None:
    store = MemlaneStore(any_mem)
    ns = ("users", "ada", "memories")
    store.put(ns, "food", {"text": "Ada is vegetarian and loves falafel", "kind": "diet"})
    store.put(ns, "trip", {"text": "Ada flies to Oslo on Friday", "kind": "travel"})
    store.put(("users", "bob", "memories"), "food", {"text": "Bob eats everything, falafel too", "kind": "diet"})
    store.put(ns, "secret", {"text": "vegetarian falafel code 77"}, index=False)
    any_mem.flush()
    got = store.get(ns, "food")
    assert got is not None and got.value["kind"] == "diet"
    hits = store.search(("users", "ada"), query="what food does she like? falafel vegetarian")
    assert [h.key for h in hits][:1] == ["food"] and all(h.namespace == ns for h in hits)
    assert "secret" not in [h.key for h in hits]  # index=False: stored, not searchable
    assert hits[0].score is not None
    diet = store.search(("users",), query="falafel", filter={"kind": "diet"})
    assert sorted((h.namespace[1], h.key) for h in diet) == [("ada", "food"), ("bob", "food")]
    assert {h.key for h in store.search(ns)} == {"food", "trip", "secret"}
    assert sorted(store.list_namespaces(prefix=("users",))) == [("users", "ada", "memories"), ("users", "bob", "memories")]
    assert store.list_namespaces(prefix=("users",), max_depth=2) == [("users", "ada"), ("users", "bob")]
    store.put(ns, "food", {"text": "Ada now eats fish", "kind": "diet"})  # replaced: old text unindexed
    any_mem.flush()
    assert "food" not in [h.key for h in store.search(ns, query="falafel vegetarian")]
    store.delete(ns, "food")
    any_mem.flush()
    assert store.get(ns, "food") is None and "food" not in [h.key for h in store.search(ns, query="fish")]

    async def arun() -> Any:
        await store.aput(ns, "pet", {"text": "Ada has a cat named Miso"})
        return await store.aget(ns, "pet")

    assert asyncio.run(arun()).value["text"] == "Ada has a cat named Miso"
