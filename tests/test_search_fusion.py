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
