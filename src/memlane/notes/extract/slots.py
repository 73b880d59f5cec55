"""The text helpers of extraction and the slot keys a note names ("pref:coffee",
"attr:email"): one key for a thing however it is inflected, in English or German."""

from __future__ import annotations

import re
from functools import lru_cache

from memlane.context.keyphrases import normalize_term
from memlane.language import Language, detect_language, words
from memlane.patterns import lazy_compile

URL_RE = lazy_compile(r"\bhttps?://[^\s<>\"'`)\]]+", re.IGNORECASE)


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


HEDGES = lazy_compile(
    r"\b(?:maybe|perhaps|might|if|would|could|probably|not sure|i guess|i think|"
    r"vielleicht|eventuell|wenn|falls|würde|könnte|wahrscheinlich|glaube ich)\b",
    re.IGNORECASE,
)


CLAUSES = lazy_compile(
    r"[,;]\s*(?=(?:I|ich|we|wir)\b)|\s+(?:but|and|aber|und|doch)\s+(?=(?:I|ich|we|wir)\b)",
    re.IGNORECASE,
)


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_RE.split(text) if s and s.strip()]


def find_urls(text: str) -> list[str]:
    return [u.rstrip(".,;:!?") for u in URL_RE.findall(text)]


def clean_value(raw: str, *, cut_clauses: bool = True) -> str:
    urls: list[str] = []

    def keep(m: re.Match[str]) -> str:  # a URL's ":" and "," must not end the value
        urls.append(m.group(0))
        return f"\x00{len(urls) - 1}\x00"

    value = URL_RE.sub(keep, raw)
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


def head_words(value: str, max_words: int = 3, language: Language = "en") -> str:
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
    return f"{prefix}:{head_words(value, language=language) or value.strip().lower()}"


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
    return _object(head_words(value or "", language=lng), lng)


def slot_object(slot: str, language: str | None = "en") -> str:
    """:func:`object_key` of the value a slot key was made from ("pref:katz" -> "cat"):
    its words are grouping forms already, which a second stemming could change."""
    return _object(slot.split(":", 1)[-1], "de" if language == "de" else "en")


def _object(head: str, language: Language) -> str:
    if language != "de":
        return head
    table = _de_en_stems()
    return " ".join(table.get(w, w) for w in head.split())


MY = lazy_compile(r"\bmy\b", re.IGNORECASE)


def norm_text(text: str, language: Language = "en") -> str:
    return " ".join(normalize_term(w, language) for w in words(text) if w not in _ARTICLES)


def is_pronoun(value: str) -> bool:
    words = [w for w in value.lower().split() if w not in _ARTICLES]
    return not words or (len(words) == 1 and words[0] in _PRONOUNS)


def lang_of(sentence: str, default: Language = "en") -> Language:
    """The sentence's language by the one language layer (py3langid, function words for
    the shortest), so notes read German as the tracker and the keyword index do."""
    return detect_language(sentence, default)
