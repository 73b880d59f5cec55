"""A query naming a calendar date favours turns written then (search/dates.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memlane import Memory
from memlane.models import MessageFilter
from memlane.search.dates import DateSpan, date_match, query_dates

FIXTURE = Path(__file__).parent / "data" / "recall" / "dated_trips.json"


@pytest.mark.parametrize(
    ("query", "spans"),
    [
        ("What did Joanna watch on 1 May, 2022?", [DateSpan(2022, 5, 1)]),
        ("Who did Maria have dinner with on May 3, 2023?", [DateSpan(2023, 5, 3)]),
        ("What did he start in December 2023?", [DateSpan(2023, 12, None)]),
        ("Which spot did she visit in May?", [DateSpan(None, 5, None)]),
        ("Where was he between August 11 and August 15 2023?", [DateSpan(2023, 8, 11), DateSpan(2023, 8, 15)]),
        ("What did she do last weekend before April 10, 2023?", [DateSpan(2023, 4, 10)]),
        ("Which state did she visit in summer 2021?", [DateSpan(2021, 6, None, 3)]),
        ("How often did he go to the beach in 2023?", [DateSpan(2023, None, None)]),
        ("Was ist am 3. Mai 2023 passiert?", [DateSpan(2023, 5, 3)]),
        ("what happened on 2023-06-03", [DateSpan(2023, 6, 3)]),
    ],
)
def test_dates_a_query_names(query: str, spans: list[DateSpan]) -> None:
    assert query_dates(query) == spans


@pytest.mark.parametrize(
    "query",
    ["May I ask what you did?", "You may go now", "When did Ann go to the pottery class?",
     "What did we discuss last week?", "Did they march together?"],
)
def test_no_date_named(query: str) -> None:
    assert query_dates(query) == []


def test_a_turn_is_told_on_the_day_or_soon_after() -> None:
    june = [DateSpan(2023, 6, None)]
    assert date_match(june, datetime(2023, 6, 20, tzinfo=UTC)) == 1.0
    assert date_match(june, datetime(2023, 7, 10, tzinfo=UTC)) == 1.0  # "last month", two weeks on
    assert date_match(june, datetime(2023, 8, 1, tzinfo=UTC)) == 0.5
    assert date_match(june, datetime(2023, 10, 1, tzinfo=UTC)) == 0.0
    assert date_match(june, datetime(2024, 6, 20, tzinfo=UTC)) == 0.0  # another year
    # without a year: that month in any year, December told in January too
    assert date_match([DateSpan(None, 12, None)], datetime(2025, 1, 5, tzinfo=UTC)) == 1.0
    # "31 June" does not exist: the month stands for it
    assert date_match([DateSpan(2023, 6, 31)], datetime(2023, 6, 2, tzinfo=UTC)) == 1.0


def _load(mem: Memory) -> list[dict[str, Any]]:
    data = json.loads(FIXTURE.read_text())
    for n, session in enumerate(data["sessions"]):
        start = datetime.fromisoformat(session["date"])
        sid = mem.create_session(session_id=f"trips-{n}", user_id="lena")
        mem.add_messages(sid, [
            {"role": "user" if who == "Lena" else "assistant", "content": text, "author_name": who,
             "created_at": start.replace(second=i).isoformat()}
            for i, (who, text) in enumerate(session["turns"])
        ])
    mem.flush()
    questions: list[dict[str, Any]] = data["questions"]
    return questions


def test_the_turn_told_on_the_named_date_ranks_first(mem: Memory) -> None:
    for qa in _load(mem):
        hits = mem.search(qa["query"], user_id="lena", top_k=3)
        assert qa["answer"] in hits[0].message.content, (qa["query"], [h.message.content for h in hits])
        assert hits[0].scores["dated"] == 1.0


def test_without_the_date_part_the_other_trips_compete(mem: Memory) -> None:
    """The same questions with the part off: for some of them a trip or cake told at
    another time ranks first, so it is the date that finds the answer above."""
    questions = _load(mem)
    engine = mem.parts.recall
    assert engine is not None
    off = engine.config.with_(dated=0.0)
    wrong = []
    for qa in questions:
        hits = engine.search(qa["query"], MessageFilter(user_id="lena"), 3, config=off)
        assert all("dated" not in h.scores for h in hits)
        if qa["answer"] not in hits[0].message.content:
            wrong.append(qa["query"])
    assert wrong
    # a query naming no date gets no such part at all, so its ranking is as before
    other = mem.search("Where did Lena take a trip?", user_id="lena", top_k=3)
    assert other and all("dated" not in h.scores for h in other)
