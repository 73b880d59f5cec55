"""Cleaning a message for summarizing: URLs, emoticons and emoji out, sentences split,
fillers ("lol", "haha") and generic vocatives ("hey guys") dropped."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from memlane.patterns import lazy_compile

_URL_RE = lazy_compile(r"https?://\S+|www\.\S+")


_EMOTICON_RE = lazy_compile(r"(?<!\w)(?:[:;=8][-'^]?[)(\]\[dDpPoO/\\|*]+|<3+|\^_?\^|xD+|XD+)(?!\w)")


SPACE_RE = lazy_compile(r"\s+")


# A sentence ends at . ! ? (or an ellipsis) followed by space; quotes and
# brackets may close it. Newlines always end one.
_SPLIT_RE = lazy_compile(r"(?<=[.!?…])[\"'”’)\]]*\s+|\s*\n+\s*")


_ABBREVIATIONS = frozenset(
    """
    mr mrs ms dr st jr sr prof vs etc e.g i.e approx no fig inc ltd co mt ft
    """.split()
)


_EMOJI_RE = lazy_compile(
    "[\U0001F000-\U0001FAFF\u2600-\u27BF\u2B00-\u2BFF\u200D\uFE0E\uFE0F\u20E3\u2190-\u21FF]+"
)


def clean_text(text: str) -> str:
    """Text without URLs, emoji and emoticons, with straight quotes and single spaces."""
    text = _URL_RE.sub(" ", text)
    if not text.isascii():
        text = _EMOJI_RE.sub(" ", text)
        # Other pictographs (category "So") outside the common emoji blocks.
        if any(ord(ch) > 0x2000 and unicodedata.category(ch) == "So" for ch in text):
            text = "".join(" " if unicodedata.category(ch) == "So" else ch for ch in text)
        text = text.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')
    text = _EMOTICON_RE.sub(" ", text)
    return SPACE_RE.sub(" ", text).strip()


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``; abbreviations like "Dr." do not end one."""
    parts = [p.strip() for p in _SPLIT_RE.split(text) if p and p.strip()]
    out: list[str] = []
    for part in parts:
        if out:
            last = out[-1].rsplit(" ", 1)[-1]
            last_word = last.rstrip(".").lower()
            # "Dr." and initials ("J.K. Rowling") do not end a sentence.
            initial = len(last) >= 2 and last[-2].isupper() and (len(last) == 2 or last[-3] == ".")
            if out[-1].endswith(".") and (last_word in _ABBREVIATIONS or initial):
                out[-1] = f"{out[-1]} {part}"
                continue
        out.append(part)
    return out


# Interjections that can open a sentence and say nothing ("Wow", "Hey Mel").
_FILLER_ANY = (
    r"hey+|hi+|hello|hiya|yo|wow+|whoa|woah|oh+|ooh+|ah+|aw+|lol|lmao|haha(?:ha)*|hehe|omg|"
    r"gosh|hmm+|um+|uh+|yay+|ugh|oops|phew|oh my gosh|oh my god|oh wow|jeez|geez"
)


# Words that are fillers only when punctuation follows ("Yeah, ..." but not "So glad").
_FILLER_PUNCT = (
    r"yeah|yep|yup|yes|no|nah|nope|ok|okay|well|so|sure|thanks|thank you|thanks so much|"
    r"thank you so much|cheers|totally|absolutely|definitely|congrats|congratulations|"
    r"true|exactly|indeed|agreed|cool|awesome|amazing|great|nice|wonderful|sweet|"
    r"bye|take care|see you|see ya|good night|good morning|right|anyway|anyways|honestly|"
    r"guess what|you know what|by the way|btw"
)


_LEADING_FILLER_RE = lazy_compile(
    rf"^(?:(?:(?:{_FILLER_ANY})\b[\s,!.~-]*|(?:{_FILLER_PUNCT})\s*[,!.~-]+\s*))+",
    re.IGNORECASE,
)


_GENERIC_VOCATIVES = frozenset(
    """
    buddy man dude guys girl friend mate bro pal dear sis everyone y'all folks
    """.split()
)


@dataclass(frozen=True, slots=True)
class People:
    """Who is speaking and who is spoken to, for the third-person rewrite."""

    names: frozenset[str]  # full names and the short forms seen in the text

    def is_name(self, word: str) -> bool:
        w = word.strip(".,!?;:").lower()
        return w in self.names or w in _GENERIC_VOCATIVES


def strip_vocatives(sentence: str, people: People) -> str:
    s = sentence.strip()
    for _ in range(3):
        before = s
        s = _LEADING_FILLER_RE.sub("", s).strip()
        # "Mel, you ..." / "Mel!" at the start
        m = re.match(r"^([A-Z][\w'-]*)\s*([,!.]+|$)\s*", s)
        if m and people.is_name(m.group(1)):
            s = s[m.end() :].strip()
        # "..., Caroline!" / "... Mel." at the end
        m = re.search(r",?\s+([A-Za-z][\w'-]*)\s*([!.?]*)\s*$", s)
        # A generic word ("everyone") is a vocative only after a comma; a
        # speaker's name also before the final punctuation ("Thanks Mel!").
        spoken_to = m is not None and (
            (m.group(0).startswith(",") and people.is_name(m.group(1)))
            or (bool(m.group(2)) and m.group(1).lower() in people.names and m.group(1)[:1].isupper())
        )
        if m and spoken_to:
            s = (s[: m.start()].rstrip(" ,") + (m.group(2) or "")).strip()
        if s == before:
            break
    return s
