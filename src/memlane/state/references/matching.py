"""Which earlier turn or candidate the query's own words point at: stems shared between the
query and the history, a topic phrase ("about cron", "zu den Schlüsseln")."""

from __future__ import annotations

from collections.abc import Sequence

from memlane.language import stem
from memlane.models import Message
from memlane.patterns import lazy_compile
from memlane.state import language as lang
from memlane.state.references.lexicon import FLAGS, GENERIC
from memlane.state.references.records import Candidate, Reference


def short_stems(text: str) -> set[str]:
    # First five letters: enough to let German inflections meet ("startest"/"starte").
    return {w[:5] for w in lang.words(text) if len(w) > 2 and w not in GENERIC}


def _qualifiers(query: str, ref: Reference) -> set[str]:
    """Stems of the query's telling words (what a reference is "about"), hyphen parts too."""
    return _telling_stems(query)


def _telling_stems(text: str) -> set[str]:
    lng = lang.detect_language(text)
    out: set[str] = set()
    for w in lang.words(text):
        for part in {w, *w.split("-")}:
            if len(part) > 2 and part not in GENERIC and part not in lang.QUESTION_WORDS \
                    and part not in _QUALIFIER_NOISE:
                out.add(stem(part, lng)[:6])
    return out


_QUALIFIER_NOISE = frozenset(
    "said say says suggested mentioned wrote before earlier again repeat about über zum zur "
    "gesagt vorhin eben gerade nochmal hast your deine deinen answer antwort "
    "mean meant meintest meinten gemeint".split()
)


# "what you said about cron", "dein Tipp zu den Schlüsseln", "Zum Hashen: ...": the words
# after the preposition name the topic of the turn the query points back to.
_TOPIC = lazy_compile(
    r"\b(?:about|regarding|concerning|as\s+for|über|zu[mr]|zu(?=\s+(?:den|dem|der|des)\b)|"
    r"bezüglich|betreffend)\s+"
    r"((?:(?:the|a|an|den|dem|der|die|das|des|einen|einem|einer)\s+)?[\w./-]+(?:\s+[\w./-]+)?)",
    FLAGS,
)


def _topic_stems(query: str) -> set[str]:
    """Stems of the words a topic phrase of ``query`` names ("about rebooting" -> reboot)."""
    out: set[str] = set()
    for m in _TOPIC.finditer(query):
        out |= _telling_stems(m.group(1))
    return out


def text_stems(text: str) -> set[str]:
    lng = lang.detect_language(text)
    return {stem(p, lng)[:6] for w in lang.words(text) for p in {w, *w.split("-")} if len(p) > 2}


def shared_count(want: set[str], have: set[str]) -> int:
    """How many wanted stems the text has; one may be the start of the other, so a name meets
    the compound it opens ("cron" / "crontab", "Lüfter" / "Lüftersteuerung")."""
    return sum(
        1 for q in want
        if q in have or (len(q) >= 4 and any(h.startswith(q) or (len(h) >= 4 and q.startswith(h))
                                             for h in have))
    )


def best_qualified(cands: list[Candidate], query: str, ref: Reference) -> list[Candidate]:
    """The candidates that share the most qualifying words with the query ("the update command")."""
    want = _qualifiers(query, ref)
    if not want:
        return []
    # A list item is judged by its own line: the message around it holds the other options too.
    scored = [(shared_count(want, text_stems((c.sentence if c.in_list else c.message_text) + " " + c.target)), c)
              for c in cands]
    best = max((n for n, _ in scored), default=0)
    return [c for n, c in scored if n == best] if best else []


def turn_about(history: Sequence[Message], query: str, ref: Reference,
           topic_only: bool = False) -> Message | None:
    """"What you said about rebooting": the assistant answer of the turn that best matches
    what the query says it is about (the user's question counts for its answer). With
    ``topic_only``, only the words of an explicit topic phrase ("about X", "zu X") count."""
    want = _topic_stems(query) if topic_only else _qualifiers(query, ref)
    if not want:
        return None
    best: tuple[int, Message] | None = None
    asked = ""
    for msg in history:
        if msg.role == "user":
            asked = msg.content
        elif msg.role == "assistant" and msg.content.strip():
            have = text_stems(asked + " " + msg.content)
            # a word named as such outranks a compound it opens ("Braten" / "Bratensatz")
            overlap = shared_count(want, have) + len(want & have)
            if overlap and (best is None or overlap >= best[0]):
                best = (overlap, msg)
    return best[1] if best else None
