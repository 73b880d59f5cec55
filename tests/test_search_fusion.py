"""How the hybrid ranking scales BM25 before fusing it (RecallConfig.keyword_power)."""

from __future__ import annotations

import pytest

from memlane import Memory
from memlane.models import MessageFilter

TURNS = [
    "The ferry engine failed again near the harbour",
    "I fixed the engine last night",
    "The harbour was quiet this morning",
    "We painted the fence together",
]


def test_keyword_part_is_bm25_over_the_best_to_a_power(mem: Memory) -> None:
    sid = mem.create_session(user_id="u")
    mem.add_messages(sid, [{"role": "user", "content": t} for t in TURNS])
    mem.flush()
    engine = mem.parts.recall
    assert engine is not None
    flt = MessageFilter(user_id="u")
    query = "ferry engine harbour"
    raw = {h.message.content: h.scores["keyword"] for h in engine.search(query, flt, 5, mode="keyword")}
    best = max(raw.values())
    assert len(raw) == 3  # the fence turn shares no word
    for power in (1.0, engine.config.keyword_power):
        hits = engine.search(query, flt, 5, config=engine.config.with_(keyword_power=power))
        parts = {h.message.content: h.scores["keyword"] for h in hits}
        for text, score in raw.items():
            assert parts[text] == pytest.approx((score / best) ** power, abs=1e-5)
    # a partial match is kept further from the full one than BM25's plain ratio
    partial = min(raw.values()) / best
    assert partial ** engine.config.keyword_power < partial < 1.0


# A reply that shares no word with the query, after a question that does; and turns that
# fill the small candidate pools with the query's words.
QUESTION = "What genre is the screenplay you printed?"
REPLY = "A mix of drama and romance!"
FILLERS = [
    "My screenplay was printed on thick paper",
    "The screenplay genre panel ran late",
    "Printed screenplay copies for everyone in the genre club",
]


def _candidates(mem: Memory, query: str, flt: MessageFilter | None = None, **config: int) -> list[str]:
    engine = mem.parts.recall
    assert engine is not None
    cfg = engine.config.with_(**config)
    found = engine.candidates(query, flt or MessageFilter(user_id="u"), pool=3, config=cfg)
    return [c.message.content for c in found]


def test_the_reply_to_a_matching_question_is_a_candidate(mem: Memory) -> None:
    sid = mem.create_session(user_id="u")
    mem.add_messages(sid, [
        {"role": "user", "content": QUESTION, "author_name": "Nate"},
        {"role": "assistant", "content": REPLY, "author_name": "Joanna"},
        *({"role": "user", "content": t, "author_name": "Nate"} for t in FILLERS),
    ])
    mem.flush()
    query = "screenplay genre printed"
    assert REPLY not in _candidates(mem, query, replies=0)  # outside both pools of three
    found = _candidates(mem, query)
    assert REPLY in found and QUESTION in found
    # the search filter holds for a reply as for any candidate
    assert REPLY not in _candidates(mem, query, MessageFilter(user_id="u", authors=("Nate",)))
    # and it ranks: its question scores it as a neighbour
    engine = mem.parts.recall
    assert engine is not None
    ranked = engine.rank(query, engine.candidates(query, MessageFilter(user_id="u"), pool=3))
    reply = next(parts for c, _, parts in ranked if c.message.content == REPLY)
    assert reply["neighbour"] > 0 and reply["keyword"] == 0


def test_a_reply_is_only_the_other_speakers_next_turn_in_the_same_session(mem: Memory) -> None:
    first = mem.create_session(user_id="u")
    mem.add_messages(first, [{"role": "user", "content": QUESTION, "author_name": "Nate"}])
    second = mem.create_session(user_id="u")  # the next id, but another conversation
    mem.add_messages(second, [
        {"role": "assistant", "content": REPLY, "author_name": "Joanna"},
        *({"role": "user", "content": t, "author_name": "Nate"} for t in FILLERS),
    ])
    mem.flush()
    assert REPLY not in _candidates(mem, "screenplay genre printed")
