"""Dates a query names, matched to when messages were written.

"What did Joanna watch on 1 May, 2022?", "Where was John between August 11 and August 15
2023?", "What did Maria start in December?": the answer is a turn told on or shortly after
that date. Messages carry the time they were written (``created_at``; an imported
conversation keeps its sessions' dates), so a query naming a date lifts the turns written
in its window (``RecallConfig.dated``). Candidates come from the query's words as before:
an extra search inside the window found nothing more on LoCoMo (pool 100).

Only calendar dates are read here: a day, a month, a season or a year, in English or German
("3 June 2023", "June 3rd", "in May 2022", "summer 2021", "im März", "2023-06-03"). Without
a year a month or day matches that date in any year. Relative phrases ("last week") are
left to :mod:`memlane.search.when`; they say nothing about which stored dates are meant.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from memlane.patterns import lazy_compile

__all__ = ["DateSpan", "date_match", "date_matcher", "query_dates"]

_MONTHS: dict[str, int] = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
    "januar": 1, "februar": 2, "märz": 3, "maerz": 3, "mai": 5, "juni": 6, "juli": 7,
    "oktober": 10, "dezember": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
    "sept": 9, "oct": 10, "okt": 10, "nov": 11, "dec": 12, "dez": 12,
}
#: Months of a season (northern hemisphere; winter runs into the next year).
_SEASONS: dict[str, tuple[int, int]] = {
    "spring": (3, 3), "summer": (6, 3), "fall": (9, 3), "autumn": (9, 3), "winter": (12, 3),
    "frühling": (3, 3), "frühjahr": (3, 3), "sommer": (6, 3), "herbst": (9, 3),
}
_FULL = (
    r"january|february|march|april|june|july|august|september|october|november|december|"
    r"januar|februar|märz|maerz|juni|juli|oktober|dezember"
)
_ABBR = r"jan|feb|mar|apr|jun|jul|aug|sept?|oct|okt|nov|dec|dez"
# "May"/"Mai" and the abbreviations are also ordinary words ("may", "mar"): they count only
# next to a day or year number, or (May, March, Mai) capitalised inside a sentence.
_ANY = rf"(?:{_FULL}|{_ABBR}|may|mai)"
_ALSO_WORDS = frozenset({"may", "mai", "march"})
_DAY = r"(?P<{}>[0-3]?\d)(?:st|nd|rd|th|\.)?"
_YEAR = r"(?P<{}>(?:19|20)\d\d)"

_DATE = lazy_compile(
    "|".join((
        r"\b(?P<iso>(?:19|20)\d\d-[01]\d-[0-3]\d)\b",
        rf"\b{_DAY.format('d1')}\s+(?:of\s+)?(?P<m1>{_ANY})\b\.?,?(?:\s+{_YEAR.format('y1')})?\b",
        rf"\b(?P<m2>{_ANY})\.?\s+{_DAY.format('d2')}(?![\d:])\b,?(?:\s+{_YEAR.format('y2')})?\b",
        rf"\b(?P<m3>{_ANY})\.?,?\s+{_YEAR.format('y3')}\b",
        rf"\b(?P<s4>spring|summer|fall|autumn|winter|frühling|frühjahr|sommer|herbst)\s+(?:of\s+)?{_YEAR.format('y4')}\b",
        rf"\b(?P<m6>{_FULL}|may|mai)\b",
        rf"\b{_YEAR.format('y7')}\b",
    )),
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class DateSpan:
    """A calendar span the query names; ``year`` None: that span in any year."""

    year: int | None
    month: int | None  # None: the whole year (or the season's months)
    day: int | None
    months: int = 1  # length in months when no day is given (a season: 3)

    def bounds(self, year: int) -> tuple[datetime, datetime]:
        """[start, end) of the span in ``year`` (its own year when it has one)."""
        y = self.year if self.year is not None else year
        if self.month is None:
            return datetime(y, 1, 1, tzinfo=UTC), datetime(y + 1, 1, 1, tzinfo=UTC)
        if self.day is not None:
            try:
                start = datetime(y, self.month, self.day, tzinfo=UTC)
            except ValueError:  # "31 June": the month then
                return DateSpan(y, self.month, None).bounds(y)
            return start, start + timedelta(days=1)
        end_month = self.month - 1 + self.months
        return (datetime(y, self.month, 1, tzinfo=UTC),
                datetime(y + end_month // 12, end_month % 12 + 1, 1, tzinfo=UTC))


def _span(m: re.Match[str]) -> DateSpan | None:
    g = m.groupdict()
    if g["iso"]:
        y, mo, d = (int(x) for x in g["iso"].split("-"))
        return DateSpan(y, mo, d) if 1 <= mo <= 12 else None
    for month_key, day_key, year_key in (("m1", "d1", "y1"), ("m2", "d2", "y2"), ("m3", None, "y3")):
        name = g[month_key]
        if name is None:
            continue
        day = int(g[day_key]) if day_key and g[day_key] else None
        if day is not None and not 1 <= day <= 31:
            return None
        return DateSpan(int(g[year_key]) if g[year_key] else None, _MONTHS[name.lower()], day)
    if g["s4"]:
        first, length = _SEASONS[g["s4"].lower()]
        return DateSpan(int(g["y4"]), first, None, length)
    name = g["m6"]
    if name:
        if name.lower() in _ALSO_WORDS and (not name[0].isupper() or m.start() == 0):
            return None  # the verb (or a sentence's first word)
        return DateSpan(None, _MONTHS[name.lower()], None)
    return DateSpan(int(g["y7"]), None, None) if g["y7"] else None


def query_dates(query: str) -> list[DateSpan]:
    """The calendar spans the query names, in order. A span without a year takes the year
    named later in the query ("between August 11 and August 15 2023")."""
    spans = [s for m in _DATE.finditer(query) if (s := _span(m)) is not None]
    # "before April 10, 2023" is about April: its year alone adds nothing
    dated = {s.year for s in spans if s.month is not None}
    spans = [s for s in spans if s.month is not None or s.year not in dated]
    out: list[DateSpan] = []
    for i, s in enumerate(spans):
        if s.year is None:
            later = next((t.year for t in spans[i + 1:] if t.year is not None), None)
            if later is not None:
                s = DateSpan(later, s.month, s.day, s.months)
        out.append(s)
    return out


#: A turn tells of an event on the day or within these days after it ("last Friday",
#: "two weeks ago"); a few days before when it was planned ("I'm going tomorrow").
_TOLD_AFTER = timedelta(days=14)
_TOLD_BEFORE = timedelta(days=2)
#: Further out the match is half as strong (a month later: "last month").
_LOOSE_AFTER = timedelta(days=45)
_LOOSE_BEFORE = timedelta(days=14)


def date_matcher(spans: list[DateSpan]) -> Callable[[datetime], float]:
    """A function giving 1.0 for a time in (or just after) a span, 0.5 near one, else 0.

    Built once per query: the windows of each year asked about are worked out once, so
    scoring a few hundred candidates compares numbers only."""
    by_year: dict[int, list[tuple[float, float, float, float]]] = {}

    def windows(year: int) -> list[tuple[float, float, float, float]]:
        found = by_year.get(year)
        if found is None:
            found = []
            for s in spans:
                # without a year: the span in this year, or the last one (December, told in January)
                for y in ((s.year,) if s.year is not None else (year, year - 1)):
                    start, end = s.bounds(y or year)
                    found.append(((start - _TOLD_BEFORE).timestamp(), (end + _TOLD_AFTER).timestamp(),
                                  (start - _LOOSE_BEFORE).timestamp(), (end + _LOOSE_AFTER).timestamp()))
            by_year[year] = found
        return found

    def match(when: datetime) -> float:
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        t = when.timestamp()
        best = 0.0
        for tight_from, tight_to, loose_from, loose_to in windows(when.year):
            if tight_from <= t < tight_to:
                return 1.0
            if loose_from <= t < loose_to:
                best = 0.5
        return best

    return match


def date_match(spans: list[DateSpan], when: datetime) -> float:
    """:func:`date_matcher` for one time."""
    return date_matcher(spans)(when)
