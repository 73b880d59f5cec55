"""Hybrid recall through Memory: background indexing, filters, RAG context, keyword-only."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memlane import Memory
from memlane.models import Message
from memlane.search.embedders import HashingEmbedder
from memlane.search.vectors import SQLiteVectorIndex
from memlane.store import SQLiteStore

FACTS = [
    ("Ann", "I adopted a puppy called Rex from the shelter last week"),
    ("Bob", "That is lovely, what breed is he?"),
    ("Ann", "A beagle, he loves long walks in the park"),
    ("Bob", "I spent the weekend fixing the kayak for our river trip"),
    ("Ann", "Did the leak in the kayak get fixed?"),
    ("Bob", "Yes, a patch kit did it. We paddle on Saturday"),
]


class GatedEmbedder(HashingEmbedder):
    """The hashing model, but no batch finishes before the test opens the gate (like a big
    model on a busy CPU, without depending on how busy the CPU really is)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.calls = 0
        self.timed_out = False  # a batch waited the whole minute: someone waited for it

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if not self.gate.wait(60):
            self.timed_out = True
        return super().embed(texts)


def _chat(mem: Memory, sid: str = "chat", user: str = "u1", day: int = 0) -> list[Message]:
    mem.create_session(session_id=sid, user_id=user)
    start = datetime(2024, 3, 1, tzinfo=UTC) + timedelta(days=day)
    return mem.add_messages(
        sid,
        [
            {"role": "user" if a == "Ann" else "assistant", "content": t, "author_name": a,
             "created_at": start + timedelta(minutes=i)}
            for i, (a, t) in enumerate(FACTS)
        ],
    )


def test_add_returns_before_embedding_and_flush_waits(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="hashing", durability="normal") as mem:
        indexer = mem.parts.indexer
        mem.flush()  # starts background work: from now on writes are embedded as they come
        slow = GatedEmbedder()
        indexer.embedder = slow
        sid = mem.create_session()
        for i in range(20):
            mem.add(sid, f"message number {i} about kayaks")
        # every add returned while the embedder could not finish a single batch
        assert not slow.timed_out, "add waited for the embedder"
        assert indexer.pending() > 0
        slow.gate.set()
        mem.flush()
        assert indexer.pending() == 0
        assert mem.parts.recall.index.count() == 20
        assert slow.calls < 20, "messages were not batched"


def test_flush_timeout_returns_and_close_drains(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    mem = Memory(path, embedder="hashing")
    mem.parts.indexer.flush()
    slow = GatedEmbedder()
    mem.parts.indexer.embedder = slow
    sid = mem.create_session()
    for i in range(5):
        mem.add(sid, f"note {i}")
    mem.flush(0.05)  # gives up at its timeout: no batch can finish before the gate opens
    assert not slow.timed_out and mem.parts.indexer.pending() > 0
    slow.gate.set()
    mem.close()  # drains the queue before stopping the thread
    assert not any(t.name == "memlane-indexer" and t.is_alive() for t in threading.enumerate()
                   if t is mem.parts.indexer._thread)
    store = SQLiteStore(path)
    try:
        assert SQLiteVectorIndex(store).count() == 5
    finally:
        store.close()


def test_restart_embeds_the_backlog(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory(path, embedder="none") as mem:  # stored, never embedded (as after a crash)
        _chat(mem)
        assert mem.parts.indexer is None
    with Memory(path, embedder="hashing") as mem:
        mem.flush()
        assert mem.parts.recall.index.count() == len(FACTS)
        assert mem.search("beagle puppy")[0].message.author_name == "Ann"


def test_hybrid_hits_carry_score_parts_and_session(mem: Memory) -> None:
    _chat(mem)
    mem.flush()
    hits = mem.search("beagle walks in the park", top_k=3)
    assert hits and "beagle" in hits[0].message.content
    parts = hits[0].scores
    assert {"semantic", "keyword", "speaker", "neighbour", "session", "recency", "importance"} <= set(parts)
    assert hits[0].session is not None and hits[0].session.id == "chat"
    assert hits == sorted(hits, key=lambda h: -h.score)
    assert mem.search_history("kayak leak", limit=2)[0]["scores"]["semantic"] > 0


def test_filters(mem: Memory) -> None:
    _chat(mem, "a", user="u1", day=0)
    _chat(mem, "b", user="u2", day=10)
    mem.flush()
    q = "kayak trip"

    def check(hits: list, pred: object) -> None:
        assert hits, "no hits"
        assert all(pred(h.message) for h in hits)  # type: ignore[operator]

    check(mem.search(q, session_id="b"), lambda m: m.session_id == "b")
    check(mem.search(q, user_id="u1"), lambda m: m.session_id == "a")
    check(mem.search(q, roles=["user"]), lambda m: m.role == "user")
    check(mem.search(q, authors=["Bob"]), lambda m: m.author_name == "Bob")
    since = datetime(2024, 3, 5, tzinfo=UTC)
    check(mem.search(q, since=since), lambda m: m.created_at >= since)
    check(mem.search(q, until=since), lambda m: m.created_at <= since)
    assert mem.search(q, user_id="nobody") == []

    # agent_id: a third session run by another agent, with one long message about the kayak
    mem.create_session(session_id="c", user_id="u1", agent_id="planner")
    filler = "We talked about the weather, the train times and lunch plans for a long while. " * 3
    long_text = filler + "Then Cy said the kayak trip moves to Sunday morning. " + filler
    mem.add("c", long_text, author_name="Cy")
    mem.flush()
    check(mem.search(q, agent_id="planner"), lambda m: m.session_id == "c")
    assert mem.search(q, agent_id="nobody") == []

    # min_score keeps only hits at or above the threshold, and drops some here
    everything = mem.search(q, top_k=20)
    threshold = sorted(h.score for h in everything)[len(everything) // 2]
    kept = mem.search(q, top_k=20, min_score=threshold)
    assert kept and all(h.score >= threshold for h in kept)
    assert len(kept) < len(everything)

    # snippet: short messages whole, a long one as a window around the query word
    hits = {h.message.session_id: h for h in everything}
    long_hit = hits["c"]
    assert long_hit.snippet != long_hit.message.content
    assert "kayak" in long_hit.snippet and len(long_hit.snippet) <= 162
    assert long_hit.snippet.startswith("…") and long_hit.snippet.strip("…") in long_hit.message.content
    short = next(h for h in everything if h.message.session_id != "c")
    assert short.snippet == short.message.content


def test_speaker_named_in_query_is_preferred(mem: Memory) -> None:
    for sid, who in (("s-ann", "Ann"), ("s-bob", "Bob"), ("s-cy", "Cy")):
        mem.add(sid, "I finally fixed the old kayak", author_name=who)
    mem.flush()
    for who in ("Bob", "Ann"):
        hits = mem.search(f"what did {who} fix?", top_k=3)
        assert hits[0].message.author_name == who
        assert hits[0].scores["speaker"] == 1.0 and hits[1].scores["speaker"] == 0.0
    assert mem.search("what did Bob's friend fix?")[0].message.author_name == "Bob"


def test_relevant_context_fits_budget_and_dedups(mem: Memory) -> None:
    _chat(mem, "a")
    _chat(mem, "b", day=3)  # the same texts again: each should appear once
    mem.flush()
    ctx = mem.get_relevant_context("kayak leak", max_tokens=10_000)
    texts = [m.content.split("] ", 1)[1] for m in ctx]
    assert len(texts) == len(set(texts))
    assert ctx[0].content.startswith("[") and ": " in ctx[0].content
    assert "March 2024" in ctx[0].content and ("Ann:" in ctx[0].content or "Bob:" in ctx[0].content)
    assert ctx[0].metadata["message_id"] is not None
    for budget in (25, 40, 80):
        small = mem.get_relevant_context("kayak leak", max_tokens=budget)
        assert sum(mem.counter.count_message(m) for m in small) <= budget
    first_cost = mem.counter.count_message(ctx[0])
    exact = mem.get_relevant_context("kayak leak", max_tokens=first_cost)
    assert [m.content for m in exact][:1] == [ctx[0].content]
    only_b = mem.get_relevant_context("kayak leak", max_tokens=10_000, session_id="b")
    assert {m.session_id for m in only_b} == {"b"}


def test_keyword_only_when_embedder_is_off(tmp_path: Path) -> None:
    with Memory(tmp_path / "k.db", embedder="none") as mem:
        _chat(mem)
        hits = mem.search("kayak")
        assert hits and all("kayak" in h.message.content.lower() for h in hits)
        assert all(h.scores["semantic"] == 0.0 for h in hits)
        assert mem.parts.recall.has_vectors is False


def test_importance_breaks_ties(mem: Memory) -> None:
    sid = mem.create_session()
    same = datetime(2024, 1, 1, tzinfo=UTC)
    a = mem.add(sid, "the red kayak", created_at=same)
    b = mem.add(sid, "the red kayak", created_at=same)
    mem.flush()
    mem.mark_important(b.id or 0)
    hits = mem.search("red kayak")
    # The same line twice is listed once: the important copy wins the tie.
    assert [h.message.id for h in hits] == [b.id] and a.id != b.id


@pytest.mark.parametrize("mode", ["keyword", "semantic", "hybrid"])
def test_modes(mem: Memory, mode: str) -> None:
    from memlane.models import MessageFilter

    _chat(mem)
    mem.flush()
    hits = mem.parts.recall.search("kayak", MessageFilter(), 3, mode=mode)
    assert hits and "kayak" in hits[0].message.content.lower()


def test_killed_before_flush_is_embedded_at_next_start(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "crash.db"
    script = (
        "import os, sys\n"
        "from memlane import Memory\n"
        "mem = Memory(sys.argv[1], embedder='hashing')\n"
        "mem.parts.indexer.close(0)\n"  # the worker is gone: nothing gets embedded
        "for i in range(40):\n"
        "    mem.add('s', f'crash note {i} about kayaks')\n"
        "os._exit(0)\n"  # no close, no flush: as if the process was killed
    )
    subprocess.run([sys.executable, "-c", script, str(path)], check=True, timeout=120)
    store = SQLiteStore(path)
    try:
        assert store.count_messages() == 40
        assert SQLiteVectorIndex(store).count() == 0
    finally:
        store.close()
    with Memory(path, embedder="hashing") as mem:
        mem.flush()
        assert mem.parts.recall.index.count() == 40


def test_speaker_names_stay_out_of_the_query_vector(tmp_path: Path) -> None:
    """A name in the question would pull the query vector towards every turn that greets
    that person; the speaker part scores names, the vector gets the rest of the question."""
    from memlane.models import MessageFilter

    with Memory(str(tmp_path / "names.db"), embedder="minilm") as mem:
        mem.create_session(session_id="s", user_id="u")
        greet, paint = mem.add_messages("s", [
            {"role": "user", "content": "Hey Melanie! So good to talk to you again, Melanie.",
             "author_name": "Caroline"},
            {"role": "assistant", "content": "I painted a sunrise over the lake last weekend.",
             "author_name": "Melanie"},
        ])
        mem.flush(timeout=None)
        engine = mem.parts.recall
        assert engine is not None and engine.index is not None and greet.id and paint.id
        question = "What did Melanie paint?"
        found = {c.message.id: c for c in engine.candidates(question, MessageFilter(user_id="u"))}
        with_name = engine.index.similarities(engine.embed_query(question), [greet.id])[greet.id]
        assert found[greet.id].semantic < with_name
        assert found[paint.id].semantic > found[greet.id].semantic
