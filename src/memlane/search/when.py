"""Questions that ask *when*, and turns that say when.

"When did Caroline go to the support group?" is answered by the turn that tells of it with a
time attached ("I went to a support group yesterday"), not by the later turns that merely
mention the group again. So when a query asks for a time, a candidate that carries a time
expression of its own gets a small part of the score (``RecallConfig.when``). Both sides are
general language patterns (English and German), not phrases from any evaluation set.
"""

from __future__ import annotations

import re

from memlane.patterns import lazy_compile

_I = re.IGNORECASE | re.UNICODE

# The question asks for a point in time or a span: "when", "what year", "how long ago",
# "since when", "wann", "seit wann", "in welchem Jahr".
_ASKS_WHEN = lazy_compile(
    r"\b(?:when|what\s+(?:time|date|day|month|year)|which\s+(?:day|month|year|week)|"
    r"how\s+long(?:\s+ago)?|since\s+when|wann|seit\s+wann|an\s+welchem\s+tag|"
    r"in\s+welchem\s+(?:jahr|monat)|wie\s+lange)\b",
    _I,
)

_UNIT = r"(?:week|weekend|month|year|summer|winter|spring|fall|autumn|night)"
_MONTH = (
    r"(?:january|february|march|april|june|july|august|september|october|november|december|"
    r"januar|februar|märz|juni|juli|oktober|dezember)"
)

# A turn that places something in time: relative days, "last/next/this <unit>", "... ago",
# years, weekdays and month names ("may" is left out: mostly the verb), dates. Kept to plain
# alternatives on lower-cased text: it runs on every candidate of a "when" question.
_SAYS_WHEN = lazy_compile(
    rf"\b(?:yesterday|today|tonight|tomorrow|the other day|recently|lately|ago|"
    rf"(?:last|next|this|past|coming) {_UNIT}|(?:19|20)\d\d|(?:mon|tues|wednes|thurs|fri|satur|sun)day|"
    rf"{_MONTH}|gestern|vorgestern|heute|morgen|neulich|kürzlich|"
    rf"(?:letzte|nächste|diese|vorige)[nrs]? (?:woche|monat|jahr|wochenende)|"
    rf"vor \w+ (?:tagen|wochen|monaten|jahren)|\d\d?\.\d\d?\.|\d{{4}}-\d\d-\d\d)",
)


def asks_when(query: str) -> bool:
    """The query asks for a time or a span of time."""
    return _ASKS_WHEN.search(query) is not None


def says_when(text: str) -> bool:
    """The text carries a time expression of its own."""
    return _SAYS_WHEN.search(text.lower()) is not None


__all__ = ["asks_when", "says_when"]
