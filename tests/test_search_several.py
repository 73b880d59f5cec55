"""Questions asking for several things can weigh the session and neighbour parts less
(search/several.py, RecallConfig.several_session / several_neighbour; off by default)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memlane import Memory
from memlane.models import MessageFilter
from memlane.search.several import asks_for_several, question_head


@pytest.mark.parametrize(
    "query",
    [
        "What activities has Melanie done with her family?",  # plural noun + perfect
        "What instruments does Melanie play?",  # plural noun, present
        "What types of yoga has Maria practiced?",  # "types of"
        "Where has Maria made friends?",  # perfect, no noun
        "What has she painted?",
        "What do Jon and Gina both have in common?",
        "How many times has Melanie gone to the beach?",
        "Welche Bücher hat Anna alle gelesen?",
        "Was hat Anna alles gekocht?",
        "Was mögen beide?",
    ],
)
def test_questions_that_ask_for_several_things(query: str) -> None:
    assert asks_for_several(query)


@pytest.mark.parametrize(
    "query",
    [
        "What emotions did John feel during the party?",  # past simple: one occasion
        "Which activity has John done apart from yoga?",  # singular noun
        "What does Melanie think about adoption?",
        "What Jon thinks the studio should look like?",  # -s verb, no auxiliary after it
        "How long has Caroline had her friends?",  # one span
        "What topic has John been blogging about?",  # one ongoing thing
        "How often does John work out?",  # a habit, told once
        "When did Ann go to the pottery class?",
        "Wo wohnt Anna?",
    ],
)
def test_questions_that_ask_for_one(query: str) -> None:
    assert not asks_for_several(query)


def test_question_head_stops_at_the_auxiliary() -> None:
    assert question_head("What European countries has Maria been to?") == (["european", "countries"], "has")
    assert question_head("In what ways is Caroline helping?") == (["ways"], "is")
    assert question_head("What motivated Caroline to paint?") is None
    assert question_head("Where did she go?") is None


SESSIONS = {
    "s1": [("Ann", "We went camping by the lake with the kids"),
           ("Bob", "Camping by the lake with kids sounds great"),
           ("Ann", "The kids loved camping there")],
    "s2": [("Bob", "How was your weekend?"), ("Ann", "We camped in the mountains with the kids"),
           ("Bob", "Sounds cold")],
    "s3": [("Ann", "I bought new shoes"), ("Bob", "Nice shoes")],
}


def _ranked(mem: Memory, query: str, **changes: float) -> list[tuple[str, float]]:
    engine = mem.parts.recall
    assert engine is not None
    hits = engine.search(query, MessageFilter(user_id="u"), 8, config=engine.config.with_(**changes))
    return [(h.message.content, round(h.scores["fused"], 6)) for h in hits]


def test_a_list_question_weighs_session_and_neighbours_less(mem: Memory) -> None:
    start = datetime(2024, 5, 1, tzinfo=UTC)
    n = 0
    for sid, turns in SESSIONS.items():
        mem.create_session(session_id=sid, user_id="u")
        for who, text in turns:
            mem.add(sid, text, role="user" if who == "Ann" else "assistant", author_name=who,
                    created_at=start + timedelta(days=n))
            n += 1
    mem.flush()
    engine = mem.parts.recall
    assert engine is not None
    cfg = engine.config
    assert (cfg.several_session, cfg.several_neighbour) == (1.0, 1.0)  # off by default
    on = {"several_session": 0.0, "several_neighbour": 0.5}
    several = "Where has Ann camped with the kids?"
    # the same as the plain ranking with those two weights scaled by hand
    scaled = _ranked(mem, several, session=0.0, neighbour=cfg.neighbour * 0.5)
    assert _ranked(mem, several, **on) == scaled
    assert scaled != _ranked(mem, several)  # and the scaling changes the scores
    # a question about one occasion ranks as without it
    one = "Where did Ann camp with the kids last weekend?"
    assert _ranked(mem, one, **on) == _ranked(mem, one)
