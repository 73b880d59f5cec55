"""A question asking *when* favours the turn that says when (search/when.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memlane import Memory
from memlane.search.when import asks_when, says_when


@pytest.mark.parametrize(
    "query",
    ["When did Ann go to the pottery class?", "How long ago did Bob move?", "What year did they marry?",
     "Since when has she been painting?", "Wann war Ann beim Töpferkurs?", "Seit wann malt sie?"],
)
def test_questions_that_ask_for_a_time(query: str) -> None:
    assert asks_when(query)


@pytest.mark.parametrize(
    "query", ["What did Ann make at the pottery class?", "Where does Bob live now?", "Was hat Ann getöpfert?"]
)
def test_questions_that_do_not(query: str) -> None:
    assert not asks_when(query)


@pytest.mark.parametrize(
    "text",
    ["I went to a pottery class yesterday", "We moved here two years ago", "Back in 2019 I started",
     "See you next Friday!", "It was in August", "Ich war gestern dort", "Das war letzte Woche",
     "the other day I saw it", "Wir sind vor drei Jahren umgezogen"],
)
def test_turns_that_say_when(text: str) -> None:
    assert says_when(text)


@pytest.mark.parametrize(
    "text", ["I may go to the pottery class", "Pottery is so relaxing", "Ich liebe Töpfern", "I made a bowl"]
)
def test_turns_that_do_not(text: str) -> None:
    assert not says_when(text)


TURNS = [
    ("s1", "Ann", "I went to a pottery class yesterday"),
    ("s1", "Bob", "Nice! What did you make?"),
    ("s2", "Ann", "The pottery class is so relaxing"),
    ("s2", "Bob", "Sounds lovely"),
    ("s3", "Ann", "My friends from the pottery class and I made bowls"),
]


def test_when_question_ranks_the_dated_turn_first(mem: Memory) -> None:
    start = datetime(2024, 5, 1, tzinfo=UTC)
    for n, (sid, who, text) in enumerate(TURNS):
        mem.add(sid, text, role="user" if who == "Ann" else "assistant", author_name=who,
                created_at=start + timedelta(days=n))
    mem.flush()
    hits = mem.search("When did Ann go to the pottery class?", top_k=5)
    assert "yesterday" in hits[0].message.content and hits[0].scores["when"] == 1.0
    assert all(h.scores.get("when", 0.0) == 0.0 for h in hits[1:])
    # a question not about time gets no such part at all, so its ranking is as before
    other = mem.search("What did Ann make at the pottery class?", top_k=5)
    assert other and all("when" not in h.scores for h in other)
