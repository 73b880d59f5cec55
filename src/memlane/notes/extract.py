"""Candidate notes from messages: deterministic English/German rules, an optional LLM.

:class:`RuleExtractor` needs no model. It reads user messages sentence by sentence and
matches first-person statements that are worth keeping across conversations:
preferences ("I love X", "ich mag keinen X"), facts about the speaker ("my X is Y",
"I work at X", "I moved to X", "ich wohne in X"), decisions ("we decided to X", "wir
haben beschlossen"), commitments ("I will X", "ich werde X") and links. Each candidate
names a *slot* — the one thing it states ("pref:coffee", "attr:email", "work") — so the
gate can tell a duplicate (same slot, same value) from a change of mind (same slot, new
value or polarity). Questions, hedges and pronoun objects ("I like it") lower the score
below the gate's threshold instead of producing noise.

:func:`annotate` finds the facets kept beside the dialogue: named entities, links,
dates and system actions (tool calls).

:class:`LLMExtractor` asks an OpenAI-compatible endpoint for the same candidates and falls
back to the rules when the endpoint fails.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

from memlane.context.keyphrases import STOPWORDS, normalize_term
from memlane.language import Language, detect_language, words
from memlane.models import Message
from memlane.notes.models import NOTE_KINDS, Facet, NoteCandidate
from memlane.patterns import lazy_compile

__all__ = [
    "ExtractionContext",
    "Extractor",
    "LLMExtractor",
    "RuleExtractor",
    "annotate",
    "find_urls",
    "object_key",
    "slot_key",
    "slot_object",
    "split_sentences",
]

log = logging.getLogger(__name__)


#: The author name a note gets when its message named nobody (no author, no Anchor name):
#: a placeholder, not a name, so listings show whom the note is about instead.
UNKNOWN_SPEAKER = "The user"

@dataclass(slots=True)
class ExtractionContext:
    """Who is who while extracting: the Anchor, and how to name speakers."""

    session_id: str
    anchor_id: str
    anchor_name: str | None = None
    session_user_id: str | None = None
    #: Message texts that are memory commands (never turned into notes themselves).
    is_command: Callable[[str], bool] | None = None

    def speaker(self, msg: Message) -> tuple[str, str]:
        """(user id, display name) of who said ``msg``.

        A user message without an author belongs to the session's user, else to the Anchor:
        in a single-user agent the person typing *is* the one the agent works for.
        """
        uid = msg.author_id or self.session_user_id or self.anchor_id
        if msg.author_name:
            return uid, msg.author_name
        if uid == self.anchor_id and self.anchor_name:
            return uid, self.anchor_name
        if msg.author_id:
            return uid, msg.author_id.lstrip("@").split(":", 1)[0]
        return uid, UNKNOWN_SPEAKER


@runtime_checkable
class Extractor(Protocol):
    """Anything that proposes notes from a block of messages (oldest first)."""

    def extract(self, messages: Sequence[Message], ctx: ExtractionContext) -> list[NoteCandidate]: ...


# --------------------------------------------------------------------- text helpers

_URL_RE = lazy_compile(r"\bhttps?://[^\s<>\"'`)\]]+", re.IGNORECASE)
_SENTENCE_RE = lazy_compile(r"(?<=[.!?])\s+|\n+")
_ARTICLES = frozenset(
    "the a an some my our your his her their this that these those der die das den dem des "
    "ein eine einen einem einer kein keine keinen keinem keiner mein meine meinen meinem".split()
)
# Words after which an object stops being the object ("coffee in the morning").
_PREPOSITIONS = frozenset(
    "in at on with for during when before after from than over to instead because but and or "
    "while if im am zum zur beim mit für auf bei nach vor als statt weil aber und oder wenn".split()
)
_TRAILING_FILLERS = lazy_compile(
    r"(?:\s+(?:very much|so much|a lot|too|as well|anymore|any more|now|these days|nowadays|"
    r"instead|actually|really|though|either|lately|again|jetzt|nicht mehr|mehr|inzwischen|"
    r"mittlerweile|sehr|total|auch|lieber|eigentlich|gerade|wirklich|nun|übrigens|"
    r"am meisten|most|best|by the way|btw|for now|for a while|at the moment|"
    r"last (?:week|month|year)|this (?:week|month|year)|yesterday|today|"
    r"recently|a while ago|\w+ ago|letzte woche|letzten monat|letztes jahr|seit kurzem|gestern|heute))+$",
    re.IGNORECASE,
)
_CLAUSE_BREAK = lazy_compile(
    r"\s*(?:,|;|:|\s-\s|\s–\s|\bbut\b|\band\s+(?:i\s+|also\s+)?(?:love|like|enjoy|hate|prefer|work|live|moved|have|am)\b|\bbecause\b|\bsince\b|\bso that\b|\bwhich\b|\bwho\b|"
    r"\baber\b|\bweil\b|\bdenn\b|\bda\b|\bdas ist\b|\bund ich\b|\band i\b)",
    re.IGNORECASE,
)
_PRONOUNS = frozenset(
    "it that this them those these him her one es das dies ihn sie ihm ihr so".split()
)
_HEDGES = lazy_compile(
    r"\b(?:maybe|perhaps|might|if|would|could|probably|not sure|i guess|i think|"
    r"vielleicht|eventuell|wenn|falls|würde|könnte|wahrscheinlich|glaube ich)\b",
    re.IGNORECASE,
)


_CLAUSES = lazy_compile(
    r"[,;]\s*(?=(?:I|ich|we|wir)\b)|\s+(?:but|and|aber|und|doch)\s+(?=(?:I|ich|we|wir)\b)",
    re.IGNORECASE,
)


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_RE.split(text) if s and s.strip()]


def find_urls(text: str) -> list[str]:
    return [u.rstrip(".,;:!?") for u in _URL_RE.findall(text)]


def _clean_value(raw: str, *, cut_clauses: bool = True) -> str:
    urls: list[str] = []

    def keep(m: re.Match[str]) -> str:  # a URL's ":" and "," must not end the value
        urls.append(m.group(0))
        return f"\x00{len(urls) - 1}\x00"

    value = _URL_RE.sub(keep, raw)
    if cut_clauses:
        value = _CLAUSE_BREAK.split(value, maxsplit=1)[0]
    value = value.strip().rstrip(".!?;:,").strip()
    prev = None
    while prev != value:
        prev = value
        value = _TRAILING_FILLERS.sub("", value).strip().rstrip(".!?;:,").strip()
    value = re.sub("\x00(\\d+)\x00", lambda m: urls[int(m.group(1))], value)
    words = value.split()
    if len(words) > 12:
        value = " ".join(words[:12])
    return value


def _head(value: str, max_words: int = 3, language: Language = "en") -> str:
    """The object's head for a slot: articles dropped, cut at the first preposition, each
    word as :func:`normalize_term` groups it in ``language`` ("Katzen", "Katze": "katz")."""
    words = [w.strip(".,!?\"'()") for w in value.split()]
    while words and words[0].lower() in _ARTICLES:
        words = words[1:]
    out: list[str] = []
    for w in words:
        if w.lower() in _PREPOSITIONS:
            break
        out.append(w)
        if len(out) >= max_words:
            break
    return " ".join(normalize_term(w, language) for w in out if w)


def slot_key(prefix: str, value: str, language: Language = "en") -> str:
    """The slot of a note about ``value`` (a statement in ``language``): a later note in the
    same slot supersedes it, whichever word form it used."""
    return f"{prefix}:{_head(value, language=language) or value.strip().lower()}"


# Everyday objects of likes and dislikes, German -> English, so "Ich trinke lieber Kaffee"
# and "I prefer coffee" are one object to the gate (a duplicate to merge, or a
# contradiction to resolve) although their slots ("pref:kaffee", "pref:coffee") differ.
_DE_EN_OBJECTS = {
    "kaffee": "coffee", "tee": "tea", "bier": "beer", "wein": "wine", "wasser": "water",
    "milch": "milk", "saft": "juice", "kakao": "cocoa", "limonade": "lemonade", "cola": "coke",
    "fleisch": "meat", "fisch": "fish", "gemüse": "vegetable", "obst": "fruit", "käse": "cheese",
    "schokolade": "chocolate", "kuchen": "cake", "brot": "bread", "nudel": "pasta", "reis": "rice",
    "zucker": "sugar", "suppe": "soup", "salat": "salad", "ei": "egg", "kartoffel": "potato",
    "musik": "music", "buch": "book", "film": "movie", "serie": "series", "sport": "sport",
    "fußball": "football", "schwimmen": "swimming", "wandern": "hiking", "laufen": "running",
    "radfahren": "cycling", "lesen": "reading", "kochen": "cooking", "reisen": "travel",
    "katze": "cat", "hund": "dog", "winter": "winter", "sommer": "summer", "meer": "sea",
    "berg": "mountain", "stadt": "city", "zug": "train", "auto": "car", "fahrrad": "bike",
    "meeting": "meeting", "besprechung": "meeting",
}


@lru_cache(maxsize=1)
def _de_en_stems() -> dict[str, str]:
    """_DE_EN_OBJECTS by German stem, to the English word's grouping form."""
    return {normalize_term(de, "de"): normalize_term(en, "en") for de, en in _DE_EN_OBJECTS.items()}


def object_key(value: str | None, language: str | None = "en") -> str:
    """What a preference is about, language-neutral: the value's head, German mapped to English.

    The gate compares these across slots: "My favourite drink is tea" and "I don't like tea"
    are about the same object, "tea", with opposite polarity; ``language`` is the
    statement's ("de" groups "Katzen" with "Katze", and "Kaffee" meets "coffee").
    """
    lng: Language = "de" if language == "de" else "en"
    return _object(_head(value or "", language=lng), lng)


def slot_object(slot: str, language: str | None = "en") -> str:
    """:func:`object_key` of the value a slot key was made from ("pref:katz" -> "cat"):
    its words are grouping forms already, which a second stemming could change."""
    return _object(slot.split(":", 1)[-1], "de" if language == "de" else "en")


def _object(head: str, language: Language) -> str:
    if language != "de":
        return head
    table = _de_en_stems()
    return " ".join(table.get(w, w) for w in head.split())


_MY = lazy_compile(r"\bmy\b", re.IGNORECASE)


def _norm_text(text: str, language: Language = "en") -> str:
    return " ".join(normalize_term(w, language) for w in words(text) if w not in _ARTICLES)


def _is_pronoun(value: str) -> bool:
    words = [w for w in value.lower().split() if w not in _ARTICLES]
    return not words or (len(words) == 1 and words[0] in _PRONOUNS)


def _lang_of(sentence: str, default: Language = "en") -> Language:
    """The sentence's language by the one language layer (py3langid, function words for
    the shortest), so notes read German as the tracker and the keyword index do."""
    return detect_language(sentence, default)


# --------------------------------------------------------------------- rules

# Each rule: compiled pattern, handler name. Patterns run on one sentence; the first
# match of each rule wins; several rules may fire on one sentence.
_I = r"(?:^|(?<=[\s,;:(]))"
# A value runs to the end of the sentence; a dot inside a word (an e-mail, a domain,
# "v1.2") does not end it.
_V = r"(?:[^.!?]|[.!?](?=\w))+"
_EN_POS = lazy_compile(
    _I + r"I(?:'m| am)?\s+(?:really\s+|truly\s+|absolutely\s+|also\s+|still\s+|now\s+|actually\s+)?"
    r"(?P<verb>love|like|enjoy|adore|prefer)s?\s+(?P<obj>" + _V + r")",
    re.IGNORECASE,
)
_EN_NEG = lazy_compile(
    _I + r"I\s+(?:(?:really\s+|absolutely\s+|just\s+|actually\s+)?(?P<verb>hate|dislike|detest|can't stand|cannot stand)"
    r"|(?:don't|do not|no longer|didn't ever|never)\s+(?:really\s+)?(?P<verb2>like|love|enjoy|prefer))\s+"
    r"(?P<obj>" + _V + r")",
    re.IGNORECASE,
)
_EN_NOT_FAN = lazy_compile(
    _I + r"I(?:'m| am)\s+(?P<neg>not\s+|no longer\s+)?(?:a\s+(?:big\s+|huge\s+)?fan of|into)\s+(?P<obj>" + _V + r")",
    re.IGNORECASE,
)
_EN_SWITCH = lazy_compile(
    _I + r"I(?:'ve| have)?\s+(?:switched|changed|moved on)\s+from\s+(?P<old>" + _V + r"?)\s+to\s+(?P<obj>" + _V + r")",
    re.IGNORECASE,
)
_EN_FAV = lazy_compile(
    r"\bmy\s+(?:new\s+|current\s+|all-time\s+)?favou?rite\s+(?P<cat>[\w\s-]{1,30}?)\s+(?:is|are)\s+(?:now\s+)?(?P<val>" + _V + r")",
    re.IGNORECASE,
)
_EN_ATTR = lazy_compile(
    r"\bmy\s+(?:new\s+)?(?P<attr>[a-z][\w\s-]{0,30}?)\s+(?:is|are)\s+(?:now\s+)?(?P<val>" + _V + r")",
    re.IGNORECASE,
)
_EN_NAME = lazy_compile(r"\b(?:call me|my name's)\s+(?P<val>[^.!?,]+)", re.IGNORECASE)
_EN_WORK = lazy_compile(
    _I + r"I(?:'m| am)?\s+(?:now\s+|currently\s+|still\s+)?(?:work(?:ing)?|started working|got a job|took a job)\s+"
    r"(?:at|for|with)\s+(?P<val>" + _V + r")",
    re.IGNORECASE,
)
_EN_HOME = lazy_compile(
    _I + r"I(?:'ve| have|'m| am)?\s+(?:just\s+|recently\s+|finally\s+|now\s+)?"
    r"(?P<verb>moved|relocated|live|living|settled)\s+(?:to|in)\s+(?P<val>" + _V + r")",
    re.IGNORECASE,
)
_EN_FROM = lazy_compile(_I + r"I(?:'m| am)\s+(?:originally\s+)?from\s+(?P<val>" + _V + r")", re.IGNORECASE)
_EN_ALLERGY = lazy_compile(_I + r"I(?:'m| am)\s+allergic to\s+(?P<val>" + _V + r")", re.IGNORECASE)
_EN_IS_A = lazy_compile(
    _I + r"I(?:'m| am)\s+(?:a|an)\s+(?P<val>" + _V + r")", re.IGNORECASE,
)
_EN_DECISION = lazy_compile(
    r"\b(?:we|I)\s+(?:have\s+|'ve\s+)?(?:decided|agreed|settled)\s+(?:to|on|that)?\s*(?P<val>" + _V + r")"
    r"|\blet's go with\s+(?P<val2>" + _V + r")|\bdecision:\s*(?P<val3>" + _V + r")",
    re.IGNORECASE,
)
_EN_COMMIT = lazy_compile(
    _I + r"I(?:'ll| will| promise to| am going to|'m going to)\s+(?!be\b|see\b|think\b|try\b|let\b|have a look\b)"
    r"(?P<val>" + _V + r")",
    re.IGNORECASE,
)
_EN_REMIND = lazy_compile(r"\bremind me to\s+(?P<val>" + _V + r")", re.IGNORECASE)

_DE_POS = lazy_compile(
    r"\bich\s+(?P<verb>mag|liebe|bevorzuge|(?:trinke|esse|höre|lese|spiele|sehe)\s+"
    r"(?:jetzt\s+|nun\s+|inzwischen\s+|mittlerweile\s+|auch\s+|eigentlich\s+)?(?:sehr\s+)?"
    r"(?:gern|gerne|lieber|am liebsten))\s+"
    r"(?P<obj>" + _V + r")",
    re.IGNORECASE,
)
_DE_NEG = lazy_compile(
    r"\bich\s+(?:(?P<hate>hasse|verabscheue)\s+(?P<obj1>" + _V + r")"
    r"|(?:mag|trinke|esse)\s+(?:kein|keine|keinen)\s+(?P<obj2>" + _V + r")"
    # obj3 stops at a comma: "ich mag Kaffee, nicht Tee" turns down the tea, not the coffee
    r"|mag\s+(?P<obj3>[^.!?,]+?)\s+(?:nicht|nicht mehr|gar nicht)(?:\s|$|[.!?,]))",
    re.IGNORECASE,
)
_DE_FAV = lazy_compile(
    r"\bmein(?:e|en)?\s+(?:neues?\s+|neuer\s+)?lieblings(?P<cat>\w+)\s+(?:ist|sind)\s+(?:jetzt\s+|nun\s+)?(?P<val>" + _V + r")",
    re.IGNORECASE,
)
_DE_ATTR = lazy_compile(
    r"\bmein(?:e)?\s+(?:neue[rs]?\s+)?(?P<attr>\w+)\s+(?:ist|sind|lautet)\s+(?:jetzt\s+|nun\s+)?(?P<val>" + _V + r")",
    re.IGNORECASE,
)
_DE_NAME = lazy_compile(r"\bich\s+heiße\s+(?P<val>[^.!?,]+)", re.IGNORECASE)
_DE_WORK = lazy_compile(
    r"\bich\s+arbeite\s+(?:jetzt\s+|seit\s+\w+\s+|inzwischen\s+)?(?:bei|für)\s+(?P<val>" + _V + r")",
    re.IGNORECASE,
)
_DE_HOME = lazy_compile(
    r"\bich\s+(?:(?:wohne|lebe)\s+(?:jetzt\s+|inzwischen\s+|seit\s+\w+\s+)?in\s+(?P<val1>" + _V + r")"
    r"|bin\s+(?:nach\s+(?P<val2>" + _V + r"?)\s+gezogen|umgezogen\s+nach\s+(?P<val3>" + _V + r"))"
    r"|ziehe\s+nach\s+(?P<val4>" + _V + r"))",
    re.IGNORECASE,
)
_DE_FROM = lazy_compile(r"\bich\s+komme\s+(?:ursprünglich\s+)?aus\s+(?P<val>" + _V + r")", re.IGNORECASE)
_DE_ALLERGY = lazy_compile(r"\bich\s+bin\s+allergisch\s+gegen\s+(?P<val>" + _V + r")", re.IGNORECASE)
_DE_DECISION = lazy_compile(
    r"\bwir\s+haben\s+(?:uns\s+)?(?:beschlossen|entschieden|vereinbart|geeinigt)\s*,?\s*(?:dass\s+|für\s+|auf\s+)?(?P<val>" + _V + r")",
    re.IGNORECASE,
)
_DE_COMMIT = lazy_compile(
    r"\bich\s+(?:werde|kümmere mich um|verspreche,?)\s+(?P<val>" + _V + r")", re.IGNORECASE,
)

# "my X is Y" is too broad without a stop list: "my point is", "my bad".
_ATTR_STOP = frozenset(
    "point question answer idea guess bad god goodness pleasure problem concern issue worry "
    "hope fear advice suggestion plan opinion view feeling sense impression understanding "
    "favorite favourite thought thoughts turn fault day week life head mind heart "
    "frage antwort idee meinung vorschlag problem plan gefühl eindruck lieblings".split()
)
_SELF_IS_STOP = frozenset("bit little lot big huge fan good sure".split())

_EN_VERB_TEXT = {"love": "loves", "like": "likes", "enjoy": "enjoys", "adore": "adores", "prefer": "prefers"}


class RuleExtractor:
    """Deterministic English/German candidate notes; same input, same output."""

    def extract(self, messages: Sequence[Message], ctx: ExtractionContext) -> list[NoteCandidate]:
        out: list[NoteCandidate] = []
        for msg in messages:
            if msg.id is None or msg.role != "user" or not msg.content.strip():
                continue
            if ctx.is_command is not None and ctx.is_command(msg.content):
                continue
            out.extend(self._from_message(msg, ctx))
        return out

    # ------------------------------------------------------------ per message

    def _from_message(self, msg: Message, ctx: ExtractionContext) -> list[NoteCandidate]:
        uid, name = ctx.speaker(msg)
        is_anchor = uid == ctx.anchor_id
        boost = 0.1 if is_anchor else 0.0
        boost += 0.2 * max(msg.importance, 1.0 if msg.pinned else 0.0)
        found: list[NoteCandidate] = []

        def add(text: str, kind: str, slot: str | None, value: str, *, polarity: int = 1,
                base: float, sentence: str, negates: Sequence[str] = (), lang: str = "en",
                comparative: bool = False) -> None:
            score = base + boost
            if sentence.rstrip().endswith("?"):
                score -= 0.4  # a question states nothing
            if _HEDGES.search(sentence):
                score -= 0.25
            if len(value) < 2 or _is_pronoun(value):
                score -= 0.5  # "I like it": the object needs the context we do not have here
            if lang == "en":
                text = _MY.sub("their", text)  # "enjoys hiking with my dog" -> "their dog"
            found.append(
                NoteCandidate(
                    text=text, kind=kind, user_id=uid, source_ids=[msg.id or 0],
                    session_id=ctx.session_id, author_id=msg.author_id, author_name=name,
                    slot=slot, value=value, polarity=polarity, importance=round(min(score, 1.0), 3),
                    entities=_entities(sentence), negates=list(negates), valid_from=msg.created_at,
                    metadata={"lang": lang, "sentence": sentence[:300],
                              # "prefer X (over Y)": a ranking, so it overturns "Y over X"
                              **({"comparative": True} if comparative else {})},
                )
            )

        whole = _lang_of(msg.content)  # what a short sentence of it ("Ja.", "Tee!") is in
        for sentence in split_sentences(msg.content):
            lang = _lang_of(sentence, whole)
            # "I don't like coffee anymore, I prefer tea now": two statements, one sentence.
            for clause in _CLAUSES.split(sentence):
                if clause.strip():
                    (self._german if lang == "de" else self._english)(clause.strip(), name, add)
        for url in find_urls(msg.content):
            add(f"{name} shared a link: {url}", "link", f"link:{url.lower()}", url, base=0.55,
                sentence=url, lang="en")
        return _dedupe(found)

    # ------------------------------------------------------------ English

    @staticmethod
    def _english(s: str, name: str, add: Callable[..., None]) -> None:
        poss = f"{name}'" if name.endswith("s") else f"{name}'s"
        fired = False
        m = _EN_SWITCH.search(s)
        if m:
            old, obj = _clean_value(m["old"]), _clean_value(m["obj"])
            add(f"{name} switched from {old} to {obj}.", "preference", slot_key("pref", obj), obj,
                base=0.65, sentence=s, negates=[slot_key("pref", old)], comparative=True)
            fired = True
        m = _EN_NEG.search(s)
        if m and not fired:
            verb = (m["verb"] or m["verb2"] or "").lower()
            obj = _clean_value(m["obj"])
            phrase = "hates" if verb == "hate" else "does not like"
            add(f"{name} {phrase} {obj}.", "preference", slot_key("pref", obj), obj, polarity=-1,
                base=0.6, sentence=s)
            fired = True
        m = _EN_NOT_FAN.search(s)
        if m and not fired:
            obj = _clean_value(m["obj"])
            neg = bool(m["neg"])
            add(f"{name} {'is not' if neg else 'is'} into {obj}.", "preference", slot_key("pref", obj),
                obj, polarity=-1 if neg else 1, base=0.55, sentence=s)
            fired = True
        m = _EN_POS.search(s)
        if m and not fired and not re.search(r"\b(?:would|'d)\s+(?:like|love|prefer)\b", s, re.IGNORECASE):
            verb = m["verb"].lower()
            raw = m["obj"]
            obj = _clean_value(raw)
            other = re.search(r"\b(?:over|to|rather than|instead of|more than)\s+(?P<o>[^.!?,]+)", raw, re.IGNORECASE)
            # "coffee now, not tea" / "coffee instead of tea": the other object is turned down.
            refused = re.search(r"(?:,\s*|\s)(?:and\s+|but\s+)?(?:not|instead of|rather than)\s+(?P<o>[^.!?,]+)",
                                raw, re.IGNORECASE)
            if verb == "prefer" and other:
                obj = _clean_value(raw[: other.start()])
                old = _clean_value(other["o"])
                add(f"{name} prefers {obj} over {old}.", "preference", slot_key("pref", obj), obj,
                    base=0.65, sentence=s, negates=[slot_key("pref", old)], comparative=True)
            elif refused and not _is_pronoun(refused["o"]):
                obj = _clean_value(raw[: refused.start()])
                old = _clean_value(refused["o"])
                add(f"{name} {_EN_VERB_TEXT[verb]} {obj}, not {old}.", "preference", slot_key("pref", obj), obj,
                    base=0.65, sentence=s, negates=[slot_key("pref", old)], comparative=verb == "prefer")
            elif re.match(r"(?:to|doing|going|being|when|that|it when)\b", obj, re.IGNORECASE) and verb != "prefer":
                add(f"{name} {_EN_VERB_TEXT[verb]} {obj}.", "preference", slot_key("pref", obj), obj,
                    base=0.55, sentence=s)
            else:
                add(f"{name} {_EN_VERB_TEXT[verb]} {obj}.", "preference", slot_key("pref", obj), obj,
                    base=0.6, sentence=s, comparative=verb == "prefer")
        m = _EN_FAV.search(s)
        if m:
            cat, val = " ".join(m["cat"].lower().split()), _clean_value(m["val"])
            add(f"{poss} favourite {cat} is {val}.", "preference", f"fav:{_head(cat)}", val,
                base=0.65, sentence=s)
        else:
            m = _EN_ATTR.search(s)
            if m:
                attr = " ".join(m["attr"].lower().split())
                val = _clean_value(m["val"])
                if attr.split()[0] not in _ATTR_STOP and attr not in STOPWORDS and len(attr.split()) <= 3:
                    base = 0.7 if attr in ("name", "email", "birthday", "phone number", "address") else 0.6
                    add(f"{poss} {attr} is {val}.", "fact", f"attr:{_head(attr)}", val, base=base, sentence=s)
        m = _EN_NAME.search(s)
        if m:
            val = _clean_value(m["val"])
            add(f"{poss} name is {val}.", "fact", "attr:name", val, base=0.7, sentence=s)
        m = _EN_WORK.search(s)
        if m:
            val = _clean_value(m["val"])
            add(f"{name} works at {val}.", "fact", "work", val, base=0.7, sentence=s)
        m = _EN_HOME.search(s)
        if m:
            val = _clean_value(m["val"])
            moved = m["verb"].lower() in ("moved", "relocated", "settled")
            text = f"{name} moved to {val}." if moved else f"{name} lives in {val}."
            add(text, "fact", "home", val, base=0.7, sentence=s)
        m = _EN_FROM.search(s)
        if m:
            val = _clean_value(m["val"])
            add(f"{name} is from {val}.", "fact", "origin", val, base=0.65, sentence=s)
        m = _EN_ALLERGY.search(s)
        if m:
            val = _clean_value(m["val"])
            add(f"{name} is allergic to {val}.", "fact", slot_key("allergy", val), val, base=0.8, sentence=s)
        elif (m := _EN_IS_A.search(s)) and not re.search(r"\bI(?:'m| am)\s+(?:a|an)\s+fan\b", s, re.IGNORECASE):
            val = _clean_value(m["val"])
            first = val.split()[0].lower() if val.split() else ""
            if first and first not in _SELF_IS_STOP and len(val.split()) <= 5:
                add(f"{name} is a{'n' if val[:1].lower() in 'aeiou' else ''} {val}.", "fact",
                    f"is:{_norm_text(val)}", val, base=0.55, sentence=s)
        m = _EN_DECISION.search(s)
        if m:
            val = _clean_value(m["val"] or m["val2"] or m["val3"] or "", cut_clauses=False)
            add(f"Decision ({name}): {val}.", "decision", f"decision:{_norm_text(val)}", val,
                base=0.7, sentence=s)
        m = _EN_COMMIT.search(s) or _EN_REMIND.search(s)
        if m:
            val = _clean_value(m["val"], cut_clauses=False)
            if len(val.split()) >= 2:
                add(f"{name} will {val}.", "commitment", f"commit:{_norm_text(val)}", val,
                    base=0.6, sentence=s)

    # ------------------------------------------------------------ German

    @staticmethod
    def _german(s: str, name: str, add: Callable[..., None]) -> None:
        poss = f"{name}'" if name.endswith(("s", "ß", "x", "z")) else f"{name}s"
        m = _DE_NEG.search(s)
        if m:
            obj = _clean_value(m["obj1"] or m["obj2"] or m["obj3"] or "")
            phrase = f"{name} hasst {obj}." if m["hate"] else f"{name} mag {obj} nicht."
            add(phrase, "preference", slot_key("pref", obj, "de"), obj, polarity=-1, base=0.6, sentence=s, lang="de")
        else:
            m = _DE_POS.search(s)
            if m and not re.search(r"\b(?:möchte|würde)\b", s, re.IGNORECASE):
                raw = m["obj"]
                other = re.search(r"\b(?:als|statt|anstatt|nicht)\s+(?P<o>[^.!?,]+)", raw, re.IGNORECASE)
                obj = _clean_value(raw[: other.start()] if other else raw)
                negates = [slot_key("pref", _clean_value(other["o"]), "de")] if other else []
                verb = m["verb"].lower()
                if verb.startswith(("trinke", "esse", "höre", "lese", "spiele", "sehe")) or verb == "bevorzuge" or other:
                    text = f"{name} mag {obj} lieber." if "lieber" in verb or other or verb == "bevorzuge" else f"{name} mag {obj}."
                else:
                    text = f"{name} {'liebt' if verb == 'liebe' else 'mag'} {obj}."
                add(text, "preference", slot_key("pref", obj, "de"), obj, base=0.6, sentence=s,
                    negates=negates, lang="de",
                    comparative="lieber" in verb or "liebsten" in verb or verb == "bevorzuge" or bool(other))
        m = _DE_FAV.search(s)
        if m:
            cat, val = m["cat"].lower(), _clean_value(m["val"])
            add(f"{poss} Lieblings{cat} ist {val}.", "preference", f"fav:{normalize_term(cat, 'de')}", val,
                base=0.65, sentence=s, lang="de")
        else:
            m = _DE_ATTR.search(s)
            if m and m["attr"].lower() not in _ATTR_STOP and not m["attr"].lower().startswith("lieblings"):
                attr, val = m["attr"], _clean_value(m["val"])
                add(f"{poss} {attr} ist {val}.", "fact", f"attr:{normalize_term(attr, 'de')}", val,
                    base=0.6, sentence=s, lang="de")
        m = _DE_NAME.search(s)
        if m:
            val = _clean_value(m["val"])
            add(f"{name} heißt {val}.", "fact", "attr:name", val, base=0.7, sentence=s, lang="de")
        m = _DE_WORK.search(s)
        if m:
            val = _clean_value(m["val"])
            add(f"{name} arbeitet bei {val}.", "fact", "work", val, base=0.7, sentence=s, lang="de")
        m = _DE_HOME.search(s)
        if m:
            val = _clean_value(m["val1"] or m["val2"] or m["val3"] or m["val4"] or "")
            add(f"{name} wohnt in {val}.", "fact", "home", val, base=0.7, sentence=s, lang="de")
        m = _DE_FROM.search(s)
        if m:
            val = _clean_value(m["val"])
            add(f"{name} kommt aus {val}.", "fact", "origin", val, base=0.65, sentence=s, lang="de")
        m = _DE_ALLERGY.search(s)
        if m:
            val = _clean_value(m["val"])
            add(f"{name} ist allergisch gegen {val}.", "fact", slot_key("allergy", val, "de"), val,
                base=0.8, sentence=s, lang="de")
        m = _DE_DECISION.search(s)
        if m:
            val = _clean_value(m["val"], cut_clauses=False)
            add(f"Beschluss ({name}): {val}.", "decision", f"decision:{_norm_text(val, 'de')}", val,
                base=0.7, sentence=s, lang="de")
        m = _DE_COMMIT.search(s)
        if m:
            val = _clean_value(m["val"], cut_clauses=False)
            if len(val.split()) >= 2:
                add(f"{name} wird {val}.", "commitment", f"commit:{_norm_text(val, 'de')}", val,
                    base=0.6, sentence=s, lang="de")


def _dedupe(cands: list[NoteCandidate]) -> list[NoteCandidate]:
    """One candidate per slot and message: the last statement in a message wins."""
    by_slot: dict[tuple[str | None, str | None], NoteCandidate] = {}
    for c in cands:
        by_slot[(c.user_id, c.slot or c.text)] = c
    return list(by_slot.values())


# --------------------------------------------------------------------- facets

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


def _entities(sentence: str) -> list[str]:
    """Capitalised names that are not sentence openers or stopwords (EN; DE nouns are noise)."""
    out: list[str] = []
    stripped = _URL_RE.sub(" ", sentence)
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
                for ent in _entities(sentence):
                    put("entity", ent)
            for m in _DATE_RE.finditer(msg.content):
                put("time", m.group(0))
    return out


# --------------------------------------------------------------------- LLM extractor

_LLM_PROMPT = """Extract long-term memory notes from the conversation below. Keep only facts
about people (who they are, where they live or work), stable preferences, decisions,
commitments and important links. Skip small talk and anything uncertain. Answer with a JSON
list only; each item: {"message_id": int, "kind": one of preference|fact|decision|commitment|link,
"text": a short third-person sentence naming the speaker, "slot": a short key for what the
note states (e.g. "pref:coffee", "work", "home", "attr:email") or null, "value": the stated
value, "polarity": 1 or -1, "importance": 0..1}.

Conversation:
"""


class LLMExtractor:
    """Candidates from an OpenAI-compatible chat endpoint; the rules when it fails."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 30.0,
        fallback: Extractor | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.fallback = fallback or RuleExtractor()

    def extract(self, messages: Sequence[Message], ctx: ExtractionContext) -> list[NoteCandidate]:
        users = [m for m in messages if m.role == "user" and m.id is not None]
        if not users:
            return []
        try:
            reply = self._ask(users, ctx)
            return parse_llm_notes(reply, users, ctx)
        except Exception as exc:  # an unreachable model must not stop promotion
            log.warning("LLM note extraction failed (%s); using the rules", exc)
            return self.fallback.extract(messages, ctx)

    def _ask(self, users: Sequence[Message], ctx: ExtractionContext) -> str:
        import httpx

        lines = []
        for m in users:
            _, name = ctx.speaker(m)
            lines.append(f"[{m.id}] {name}: {m.content[:2000]}")
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        url = self.base_url + ("/chat/completions" if self.base_url.endswith("/v1") else "/v1/chat/completions")
        resp = httpx.post(
            url,
            headers=headers,
            timeout=self.timeout,
            json={
                "model": self.model,
                "temperature": 0,
                "messages": [{"role": "user", "content": _LLM_PROMPT + "\n".join(lines)}],
            },
        )
        resp.raise_for_status()
        body = resp.json()
        return str(body["choices"][0]["message"]["content"])


def parse_llm_notes(reply: str, users: Sequence[Message], ctx: ExtractionContext) -> list[NoteCandidate]:
    """The candidates in an LLM's JSON answer; items naming unknown messages are dropped."""
    start, end = reply.find("["), reply.rfind("]")
    if start < 0 or end < start:
        raise ValueError("the model's answer holds no JSON list")
    items = json.loads(reply[start : end + 1])
    if not isinstance(items, list):
        raise ValueError("the model's answer is not a JSON list")
    by_id = {m.id: m for m in users}
    out: list[NoteCandidate] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        msg = by_id.get(item.get("message_id"))
        text = item.get("text")
        kind = item.get("kind")
        if msg is None or not isinstance(text, str) or not text.strip() or kind not in NOTE_KINDS:
            continue
        uid, name = ctx.speaker(msg)
        slot = item.get("slot") if isinstance(item.get("slot"), str) else None
        value = str(item.get("value") or "")
        try:
            importance = min(max(float(item.get("importance", 0.6)), 0.0), 1.0)
        except (TypeError, ValueError):
            importance = 0.6
        out.append(
            NoteCandidate(
                text=text.strip(), kind=kind, user_id=uid, source_ids=[msg.id or 0],
                session_id=ctx.session_id, author_id=msg.author_id, author_name=name,
                slot=slot or f"{kind}:{_norm_text(text, detect_language(text))}", value=value,
                polarity=-1 if item.get("polarity") == -1 else 1, importance=importance,
                entities=_entities(msg.content), valid_from=msg.created_at, origin="llm",
            )
        )
    return out
