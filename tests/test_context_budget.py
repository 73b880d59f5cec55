"""The budget is never exceeded: every strategy, many budgets, two encodings, real conversations.

Property-style: for each conversation (English and German agent sessions with
tool calls, long LoCoMo dialogues) and each strategy, the packet is rendered at
a sweep of budgets; every rendering must count at most ``max_tokens`` with the
exact counter, account for every token in ``packet.budget``, keep tool results
with their calls, and keep the newest turn when it fits at all.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from memlane import Memory
from memlane.context.budget import Allocator, Candidates, TextBlock, TextItem, TextPart
from memlane.errors import InvalidInputError
from memlane.models import Message
from memlane.tokens import get_counter
from tests.conftest import LONG_CONVERSATION
from tests.context_scripts import DE, EN, tool_groups_intact, write_locomo, write_script

STRATEGIES = ("simple", "summary", "hybrid", "tiered")
BUDGETS = [1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987, 1597, 2584, 4181, 8000]
SYSTEM = "You are a careful assistant. Answer briefly and cite the turn you rely on. " * 3


@pytest.fixture(scope="module")
def convo(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[tuple[Memory, list[str]]]:
    """One database with an EN agent session, a DE agent session and a long LoCoMo dialogue."""
    path = tmp_path_factory.mktemp("budget") / "memory.db"
    mem = Memory(path, embedder="hashing")
    sids = []
    for name, script, repeat in (("en", EN, 3), ("de", DE, 2)):
        sid = mem.create_session(system_prompt=SYSTEM, session_id=name, user_id="ops")
        write_script(mem, sid, script, repeat=repeat)
        sids.append(sid)
    sid = mem.create_session(system_prompt=SYSTEM, session_id="locomo")
    write_locomo(mem, LONG_CONVERSATION, sid, sessions=8)
    sids.append(sid)
    # A pinned and an important message deep in the EN history, for hybrid.
    first = mem.load_session("en")[:6]
    mem.mark_important(first[0].id or 0, pinned=True)
    mem.mark_important(first[-1].id or 0, importance=0.9, pinned=False)
    mem.flush()
    yield mem, sids
    mem.close()


def _newest(mem: Memory, sid: str) -> Message:
    return mem.store.recent_messages(sid, 1)[0]


def test_budget_sweep_never_exceeded(convo: tuple[Memory, list[str]]) -> None:
    mem, sids = convo
    counter = get_counter(None)
    rendered = 0
    for sid in sids:
        newest = _newest(mem, sid)
        for strategy in STRATEGIES:
            packet = mem.context(sid, query="backup compression NAS", max_tokens=3000, strategy=strategy)
            for budget in BUDGETS:
                alloc = packet.render(max_tokens=budget)
                msgs = alloc.messages
                used = counter.count_messages(msgs) if msgs else 0
                assert used <= budget, (sid, strategy, budget, used)
                assert alloc.report.used == used
                assert sum(alloc.report.sections.values()) == used, alloc.report
                openai = [m.to_openai() for m in msgs]
                assert tool_groups_intact(openai), (sid, strategy, budget)
                assert openai == packet.to_messages(max_tokens=budget)
                # The newest message is sent whenever any room is left for it (cut if need be).
                if budget >= 89:
                    last = msgs[-1]
                    assert last.id == newest.id
                    assert newest.content.startswith(last.content)
                rendered += 1
    assert rendered == len(sids) * len(STRATEGIES) * len(BUDGETS)


def test_built_at_each_budget_and_o200k(convo: tuple[Memory, list[str]]) -> None:
    """Packets compiled for each budget (the strategy reads less), counted for gpt-4o."""
    mem, sids = convo
    rng = random.Random(7)
    o200k = get_counter("gpt-4o")
    for sid in sids:
        for strategy in STRATEGIES:
            for budget in [*rng.sample(range(20, 6000), 4), 64, 300]:
                packet = mem.context(sid, max_tokens=budget, strategy=strategy, model="gpt-4o")
                alloc = packet.render()
                assert alloc.report.encoding == "o200k_base"
                used = o200k.count_messages(alloc.messages) if alloc.messages else 0
                assert used == alloc.report.used <= budget
                # The same packet counted for another model still fits that model's count.
                other = packet.render(model="gpt-4", max_tokens=budget)
                cl = get_counter("gpt-4")
                assert (cl.count_messages(other.messages) if other.messages else 0) <= budget


def test_summary_present_when_history_does_not_fit(convo: tuple[Memory, list[str]]) -> None:
    mem, _ = convo
    packet = mem.context("en", max_tokens=1200, strategy="summary")
    assert packet.rolling_session_summary
    system = packet.to_messages()[0]["content"]
    assert "## Earlier in this conversation" in system
    assert packet.budget is not None and packet.budget.sections.get("summary", 0) > 0
    assert packet.budget.sections.get("recent", 0) > 0


def test_priorities_are_configurable(convo: tuple[Memory, list[str]]) -> None:
    mem, _ = convo
    query = "rsync compression"
    default = mem.context("en", query=query, max_tokens=900)
    assert default.budget is not None
    assert "recalled" in default.budget.sections
    recent_by_default = default.budget.sections["recent"]
    # Leaving a section out of the order leaves it out of the request.
    no_state = default.render(priorities=("system", "latest", "recent"))
    content = no_state.messages[0].content
    assert "## Session state" not in content and "## Relevant earlier messages" not in content
    assert set(no_state.report.sections) <= {"overhead", "system", "latest", "recent"}
    # Recent turns first: they take the room the summary and recall had.
    turns_first = default.render(priorities="system,latest,recent,state,summary,recalled")
    assert turns_first.report.sections["recent"] > recent_by_default
    assert default.budget is turns_first.report  # the packet records its last rendering
    with pytest.raises(InvalidInputError, match="priorities"):
        default.render(priorities=("system", "bogus"))
    with pytest.raises(InvalidInputError, match="priorities"):
        mem.context("en", priorities=("recent", "recent"))


def test_hybrid_keeps_pinned_and_important(convo: tuple[Memory, list[str]]) -> None:
    mem, _ = convo
    first = mem.load_session("en")[:6]
    packet = mem.context("en", max_tokens=1500, strategy="hybrid")
    kept = {m.id for m in packet.render().messages}
    assert first[0].id in kept and first[-1].id in kept  # pinned user message, important reply
    assert {m.id for m in packet.pinned_messages} >= {first[0].id, first[-1].id}
    # The important one is an assistant message after a tool call: its group came along.
    assert tool_groups_intact(packet.to_messages())
    simple = mem.context("en", max_tokens=1500, strategy="simple")
    assert first[0].id not in {m.id for m in simple.render().messages}


def test_allocator_direct_edge_cases() -> None:
    counter = get_counter(None)
    huge = Message(role="user", content="word " * 5000, id=10)
    call = Message(role="assistant", content="", id=8,
                   tool_calls=[{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}])
    result = Message(role="tool", content="ok " * 50, tool_call_id="c1", id=9)
    block = TextBlock("summary", "## S", [TextPart("", [TextItem("One. Two. Three. " * 40, splittable=True)], bullet="")])
    cand = Candidates(system_prompt="p " * 3000, latest=[[huge]], recent=[[[call, result]]],
                      blocks={"summary": block})
    for budget in (1, 4, 10, 50, 200, 1000, 3000):
        alloc = Allocator(cand, counter, budget).run().finish()
        used = counter.count_messages(alloc.messages) if alloc.messages else 0
        assert used == alloc.report.used <= budget
        if budget >= 50:
            # The newest message is cut to fit rather than dropped; the prompt gave way.
            assert alloc.messages[-1].metadata.get("truncated") is True
            assert "latest" in alloc.report.truncated and "system" in alloc.report.truncated
    with pytest.raises(InvalidInputError):
        Allocator(cand, counter, 0)


def test_tool_group_never_split() -> None:
    counter = get_counter(None)
    call = Message(role="assistant", content="", id=1, tool_calls=[
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}},
    ])
    ra = Message(role="tool", content="result a " * 30, tool_call_id="a", id=2)
    rb = Message(role="tool", content="result b " * 30, tool_call_id="b", id=3)
    reply = Message(role="assistant", content="done", id=4)
    question = Message(role="user", content="go", id=0)
    cand = Candidates(latest=[[question], [call, ra, rb], [reply]])
    whole = counter.count_messages([question, call, ra, rb, reply])
    for budget in range(5, whole + 5):
        msgs = [m.to_openai() for m in Allocator(cand, counter, budget).run().finish().messages]
        assert tool_groups_intact(msgs)
        roles = [m["role"] for m in msgs]
        assert roles.count("tool") in (0, 2)
        assert (roles.count("tool") == 2) == ("tool_calls" in str(msgs))


def test_long_text_is_cut_at_sentences_then_words() -> None:
    counter = get_counter(None)
    sentences = " ".join(f"Fact number {i} about the backup plan." for i in range(60))
    one_sentence = " ".join(f"word{i}" for i in range(400))
    for text, ending in ((sentences, "backup plan."), (one_sentence, "…")):
        block = TextBlock("summary", "## S", [TextPart("", [TextItem(text, splittable=True)], bullet="")])
        turns = [[[Message(role="user", content=f"message {i} " * 40, id=i)]] for i in range(40)]
        alloc = Allocator(Candidates(blocks={"summary": block}, recent=turns), counter, 1000).run().finish()
        content = alloc.messages[0].content
        assert content.endswith(ending) and len(content) < len(text)
        assert alloc.report.truncated == ["summary"]
        # While turns compete for the budget the cap (20%) holds; only the room the next whole
        # turn could not use (about 90 tokens) goes back to the summary afterwards.
        assert alloc.report.sections["recent"] > 600
        assert 150 < alloc.report.sections["summary"] <= 200 + 90
        # Nothing else wants room: the cap gives way and the cut uses the budget.
        alone = Allocator(Candidates(blocks={"summary": block}), counter, 400).run().finish()
        assert alone.messages[0].content.endswith(ending) and alone.report.truncated == ["summary"]
        assert 300 < alone.report.sections["summary"] <= 400


def test_cached_counts_not_reused_across_encodings(convo: tuple[Memory, list[str]]) -> None:
    """Messages carry cl100k counts; a gpt-4o packet must count them again, exactly."""
    mem, _ = convo
    o200k = get_counter("gpt-4o")
    for budget in (300, 1000, 2500):
        alloc = mem.context("de", max_tokens=budget, model="gpt-4o").render()
        msgs = alloc.messages
        assert alloc.report.used == o200k.count_messages(msgs) <= budget
        # Filled as an exact allocator fills: when turns were left out, little room is left.
        if alloc.report.dropped.get("recent"):
            assert budget - alloc.report.used < 200
