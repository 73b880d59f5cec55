""":func:`annotate`: the facets kept beside the dialogue - named entities, links, dates
and system actions (tool calls)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from memlane.context.keyphrases import STOPWORDS
from memlane.models import Message
from memlane.notes.extract.slots import URL_RE, find_urls, split_sentences
from memlane.notes.models import Facet
from memlane.patterns import lazy_compile

_CAP = r"[A-ZÄÖÜ][\w'’-]+"


_ENTITY_RE = lazy_compile(rf"\b{_CAP}(?:\s+(?:(?:of|von|de|van|der|the)\s+)?{_CAP})*")


_DATE_RE = lazy_compile(
    r"\b(?:\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2})?|\d{1,2}\.\s?\d{1,2}\.(?:\d{2,4})?|"
    r"\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*(?:\s+\d{4})?|"
    r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\s+\d{1,2}(?:st|nd|rd|th)?(?:,?\s+\d{4})?|"
    r"\d{1,2}\.\s+(?:Januar|Februar|März|April|Mai|Juni|Juli|August|September|Oktober|November|Dezember)(?:\s+\d{4})?|"
    r"(?:next|this|last|on)\s+(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday|week|month|year)|"
    r"(?:nächsten|am|diesen|letzten)\s+(?:Montag|Dienstag|Mittwoch|Donnerstag|Freitag|Samstag|Sonntag)|"
    r"tomorrow|yesterday|tonight|morgen|übermorgen|gestern)\b",
    re.IGNORECASE,
)


_ENTITY_STOP = STOPWORDS | frozenset("i i'm i'll i've i'd ok okay yes no hey hi hello thanks".split())


def entities(sentence: str) -> list[str]:
    """Capitalised names that are not sentence openers or stopwords (EN; DE nouns are noise)."""
    out: list[str] = []
    stripped = URL_RE.sub(" ", sentence)
    for m in _ENTITY_RE.finditer(stripped):
        text = m.group(0).strip()
        start = m.start()
        before = stripped[:start].rstrip()
        opener = not before or before[-1] in ".!?:\"“„("
        words = text.split()
        if opener and len(words) == 1:
            continue  # a capital after a full stop says nothing
        if opener and (words[0].lower() in _ENTITY_STOP or len(words) >= 3):
            # "Meet Maria Lopez": the opener is grammar; "Maria Lopez called": it is the name.
            text = " ".join(words[1:])
        if not text or text.lower() in _ENTITY_STOP or len(text) < 2:
            continue
        if text not in out:
            out.append(text)
    return out[:8]


def _action_text(call: dict[str, Any]) -> str:
    fn = call.get("function") if isinstance(call.get("function"), dict) else {}
    name = str((fn or {}).get("name") or call.get("name") or call.get("type") or "tool")
    args = (fn or {}).get("arguments") or call.get("arguments") or ""
    if not isinstance(args, str):
        args = json.dumps(args, ensure_ascii=False, sort_keys=True)
    args = " ".join(args.split())
    return f"{name}({args[:160]})"


def annotate(messages: Sequence[Message]) -> list[Facet]:
    """Entities, links, dates and system actions of ``messages``, for the facet table."""
    out: list[Facet] = []
    for msg in messages:
        if msg.id is None:
            continue
        seen: set[tuple[str, str]] = set()

        def put(kind: str, value: str, msg: Message = msg, seen: set[tuple[str, str]] = seen) -> None:
            value = value.strip()[:300]
            if value and (kind, value) not in seen:
                seen.add((kind, value))
                out.append(Facet(msg.id or 0, msg.session_id, kind, value, msg.created_at))

        for call in msg.tool_calls or ():
            put("action", _action_text(call))
        if msg.role == "tool":
            put("action", f"result of {msg.name or msg.tool_call_id or 'tool'}")
            continue
        for url in find_urls(msg.content):
            put("link", url)
        if msg.role in ("user", "assistant"):
            for sentence in split_sentences(msg.content):
                for ent in entities(sentence):
                    put("entity", ent)
            for m in _DATE_RE.finditer(msg.content):
                put("time", m.group(0))
    return out
