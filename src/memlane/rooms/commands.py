"""Recognising memory commands said in the conversation, in English and German.

Recognition is conservative: a command must be the whole message (after a leading
"@bot:" mention and politeness like "please", "bitte", "can you" are set aside), so
"I'll never forget this conversation" or "do you remember that movie?" are ordinary
chat, not commands. The handler (``rooms/handler.py``) decides who may run them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ACTIONS", "MUTATING_ACTIONS", "Command", "is_command", "parse_command"]

# The recall commands that are orders, not questions.
_ORDER = re.compile(r"(?:search|durchsuche)\b", re.IGNORECASE)

#: Every action a command can ask for.
ACTIONS: tuple[str, ...] = (
    "forget_conversation", "forget_about", "remember", "mark_important", "recall", "archive",
)
#: Actions that change memory: only the Anchor may run them.
MUTATING_ACTIONS: frozenset[str] = frozenset(
    {"forget_conversation", "forget_about", "remember", "mark_important", "archive"}
)


@dataclass(frozen=True, slots=True)
class Command:
    """A recognised memory command."""

    action: str
    lang: str  # "en" | "de"
    argument: str | None = None  # what to remember / the topic asked about
    text: str = ""
    #: asked as a question ("what do you remember about X?") rather than ordered ("search
    #: your memory for X"): a chat with a model answers such questions from the packet
    question: bool = False


_F = re.IGNORECASE | re.DOTALL
_CONV_EN = r"(?:conversation|chat|discussion|room|thread|talk|exchange)(?:\s+history)?"
_CONV_DE = r"(?:gespräch|unterhaltung|chat|konversation|verlauf|unterhaltung hier|raum)"

# (action, lang, pattern). Patterns must match the whole cleaned message.
_PATTERNS: list[tuple[str, str, re.Pattern[str]]] = [
    ("forget_conversation", "en", re.compile(
        rf"(?:forget|delete|erase|wipe|clear out)\s+(?:all of\s+|everything (?:in|from|of)\s+)?"
        rf"(?:this|our|the|this whole|this entire|the whole|the entire)\s+{_CONV_EN}", _F)),
    ("forget_conversation", "en", re.compile(
        r"forget (?:everything|all)(?: (?:we|you and i|i) (?:said|discussed|talked about))?(?: (?:here|in this room))?", _F)),
    ("forget_conversation", "de", re.compile(
        rf"(?:vergiss|vergesse|lösche|lösch)\s+(?:bitte\s+)?(?:dieses|das|unser|diese|unsere|den|die|dies)\s+"
        rf"(?:ganze\s+|gesamte\s+)?{_CONV_DE}", _F)),
    ("forget_conversation", "de", re.compile(
        r"vergiss (?:bitte )?alles(?:,? was wir (?:hier )?(?:besprochen|gesagt|geredet) haben)?", _F)),
    ("forget_about", "en", re.compile(
        r"forget (?:what i (?:said|told you) |everything (?:i said |you know )?|what you know )?about\s+(?P<arg>.+)", _F)),
    ("forget_about", "de", re.compile(
        r"vergiss(?: bitte)?,? (?:alles,? )?(?:was (?:ich|du) )?(?:über|zu)\s+(?P<arg>.+?)(?:\s+(?:gesagt habe|weißt|gesagt hab))?", _F)),
    ("mark_important", "en", re.compile(
        r"(?:mark|flag|tag|pin)\s+(?:this|that|it|this message|that message|the last message|this point)\s+"
        r"(?:as\s+)?(?:important|high[- ]priority|a priority|priority)", _F)),
    ("mark_important", "en", re.compile(r"(?:this|that) is (?:really |very )?important|that's (?:really |very )?important", _F)),
    ("mark_important", "de", re.compile(
        r"(?:markiere|markier|kennzeichne|merke)\s+(?:das|dies|diese nachricht|den punkt)\s+als\s+(?:sehr\s+)?wichtig", _F)),
    ("mark_important", "de", re.compile(r"das ist (?:sehr |wirklich )?wichtig", _F)),
    ("remember", "en", re.compile(
        r"(?:remember|memorize|memorise|note|keep in mind|don't forget|do not forget)\s+"
        r"(?:this|that)(?:\s+(?:important\s+)?(?:point|fact|one|bit))?"
        r"(?:\s*[:,\-–]\s*(?P<arg>.+)|\s+(?P<arg2>(?!(?:please|for me)$).+))?", _F)),
    ("remember", "en", re.compile(r"(?:remember|memorize|memorise)\s*[:\-–]\s*(?P<arg>.+)", _F)),
    ("remember", "en", re.compile(r"(?:remember|memorize|memorise|note|keep in mind)\s+(?P<arg>(?:my|our|i|we|the)\b.+)", _F)),
    ("remember", "de", re.compile(
        r"(?:merk|merke|merkt)\s+dir\s*(?:bitte\s+)?(?:das|dies|folgendes|diesen punkt)?"
        r"(?:\s*[:,\-–]\s*(?:dass\s+)?(?P<arg>.+)|\s+dass\s+(?P<arg2>.+))?", _F)),
    ("remember", "de", re.compile(r"(?:behalte|behalt) (?:das|dies)(?: im (?:kopf|gedächtnis))?|vergiss (?:das|dies) nicht", _F)),
    ("remember", "de", re.compile(r"nicht vergessen\s*[:\-–]\s*(?P<arg>.+)", _F)),
    ("recall", "en", re.compile(
        r"what do you (?:remember|know|recall)(?:\s+(?:about|of|regarding|on)\s+(?P<arg>.+))?", _F)),
    ("recall", "en", re.compile(
        r"what did (?:we|i|you) (?:say|discuss|talk about|decide|agree)(?:\s+(?:about|regarding|on)\s+(?P<arg>.+))?", _F)),
    ("recall", "en", re.compile(r"do you (?:still )?remember (?:anything )?(?:about\s+)?(?P<arg>.+)", _F)),
    ("recall", "en", re.compile(
        r"search (?:your |the |my )?(?:memory|memories|archive|history)(?: for)?\s+(?P<arg>.+)", _F)),
    ("recall", "de", re.compile(
        r"was weißt du (?:noch )?(?:über|von|zu)\s+(?P<arg>.+)|was weisst du (?:noch )?(?:über|von|zu)\s+(?P<arg2>.+)", _F)),
    ("recall", "de", re.compile(r"woran erinnerst du dich(?:\s+(?:bei|zu|über)\s+(?P<arg>.+))?", _F)),
    ("recall", "de", re.compile(r"erinnerst du dich (?:noch )?an\s+(?P<arg>.+)", _F)),
    ("recall", "de", re.compile(
        r"was (?:haben wir|hast du dir) (?:über|zu)\s+(?P<arg>.+?)\s+(?:gesagt|besprochen|beschlossen|gemerkt)", _F)),
    ("recall", "de", re.compile(
        r"durchsuche (?:das archiv|dein gedächtnis|deine erinnerungen|den verlauf) nach\s+(?P<arg>.+)", _F)),
    ("archive", "en", re.compile(rf"archive\s+(?:this|our|the)\s+{_CONV_EN}", _F)),
    ("archive", "de", re.compile(rf"archiviere?\s+(?:dieses|das|unser|diese|den)\s+{_CONV_DE}", _F)),
]

_MENTION = re.compile(r"^\s*(?:@[\w.\-]+(?::[\w.\-]+)?|[\w.\-]{1,32}(?=\s*[:,]\s))\s*[:,]?\s*")
_LEAD = re.compile(
    r"^(?:(?:ok(?:ay)?|hey|hi|so|and|also|now|please|pls|bitte|also|hallo|nun|jetzt|"
    r"can you|could you|would you|will you|kannst du|könntest du|würdest du|du sollst|i want you to|"
    r"ich möchte,? dass du)[\s,]+)+",
    re.IGNORECASE,
)
_TRAIL = re.compile(
    r"(?:[\s,]+(?:please|pls|bitte|for me|für mich|thanks|thank you|danke|now|jetzt|ok))*[\s.!…]*$",
    re.IGNORECASE,
)


def _clean(text: str) -> str:
    out = " ".join(text.split())
    prev = None
    while prev != out:
        prev = out
        out = _LEAD.sub("", out)
        out = _TRAIL.sub("", out).strip()
    return out


def _match(text: str) -> Command | None:
    for action, lang, pattern in _PATTERNS:
        m = pattern.fullmatch(text)
        if m is None:
            continue
        arg = next((v for k, v in m.groupdict().items() if k.startswith("arg") and v), None)
        arg = arg.strip().strip("\"'“”„").rstrip("?.!").strip() if arg else None
        if action == "remember" and text.rstrip().endswith("?"):
            return None  # "remember that movie?" is a question, not an order
        return Command(action, lang, arg or None)
    return None


def parse_command(text: str) -> Command | None:
    """The memory command ``text`` is, or None for ordinary chat."""
    if not isinstance(text, str) or not text.strip() or len(text) > 4000:
        return None
    if text.strip().endswith("?"):
        # Only recall is asked as a question; a "?" keeps chat from being read as an order.
        candidates = [_clean(text.strip().rstrip("?")), _clean(_MENTION.sub("", text, count=1).strip().rstrip("?"))]
        for cand in candidates:
            found = _match(cand)
            if found is not None and found.action == "recall":
                return Command(found.action, found.lang, found.argument, text, question=True)
        return None
    for cand in (_clean(text), _clean(_MENTION.sub("", text, count=1))):
        found = _match(cand)
        if found is not None:
            question = found.action == "recall" and not _ORDER.match(cand)
            return Command(found.action, found.lang, found.argument, text, question=question)
    return None


def is_command(text: str) -> bool:
    return parse_command(text) is not None
