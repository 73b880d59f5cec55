"""What a pronoun, a "there"/"dort" or a "then"/"damals" points back to, English and German.

The reference resolver (``state/references/``) finds the words that refer back; this
module finds their antecedents when they are not a command or a suggestion of the
assistant but a thing named in the conversation:

* places for "there", "dort", "da": the last name after a place preposition ("in Berlin",
  "im Stadtkrankenhaus"), the name a sentence ends on ("The capital is Paris.") or, failing
  both, the name a sentence opens on as its subject ("Lisbon is lovely in spring.") when no
  message of the last turns names a place either way;
* times for "then", "at that time", "damals": the last calendar expression ("last Friday");
* people for "she", "her", "er", "sie": a name after a kinship or role noun ("my sister Anna");
* grammatical gender for German pronouns: "sie" wants a feminine noun ("eine
  PostgreSQL-Datenbank"), "er"/"ihn"/"ihm" a masculine one ("den Raspberry Pi"), "es"
  a neuter one ("das Skript backup.sh"), read off the article before the noun.

Plain word classes (prepositions, articles, weekdays, kinship nouns), no model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memlane.language import STOPWORDS, sentences
from memlane.models import Message
from memlane.patterns import lazy_compile

__all__ = ["Antecedent", "find_person", "find_place", "find_time", "gender_of", "noun_genders"]

_I = re.IGNORECASE | re.UNICODE
_NAME = r"[A-ZÄÖÜ][\wäöüß.-]*(?:\s+[A-ZÄÖÜ0-9][\wäöüß.-]*){0,2}"
_PLACE = lazy_compile(
    r"\b(?:in|at|to|from|near|around|outside|im|in\s+der|in\s+dem|nach|bei|beim|aus|am|um|nahe)\s+"
    r"(?:the\s+)?(" + _NAME + r")",
    re.UNICODE,
)
_PLACE_LOWER = lazy_compile(r"\b(?:at|in|to)\s+the\s+((?:[a-z]+\s+){0,2}[a-z]+)\b", re.UNICODE)
#: A name a sentence opens on as the subject of a place's verbs ("Lisbon is lovely in spring",
#: "Dresden bietet viel"): the weakest sign of a place, tried after the prepositions.
_SUBJECT_NAME = lazy_compile(
    r"^\W*(" + _NAME + r")\s+(?:is|was|has|offers|lies|ist|war|hat|bietet|liegt)\b", re.UNICODE)
_SENTENCE_END_NAME = lazy_compile(r"\b(?:is|are|was|ist|sind|war)\s+(" + _NAME + r")\s*[.!]?\s*$", re.UNICODE)
_TIME = lazy_compile(
    r"\b(?:(?:last|next|this|on|letzten|nächsten|diesen|am)\s+)?"
    r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday|montag|dienstag|mittwoch|"
    r"donnerstag|freitag|samstag|sonntag|yesterday|gestern|vorgestern|"
    r"january|february|march|april|may|june|july|august|september|october|november|december|"
    r"januar|februar|märz|mai|juni|juli|oktober|dezember|"
    r"\d{1,2}\.\s?\d{1,2}\.(?:\d{2,4})?|\d{4}-\d{2}-\d{2})\b"
    r"|\b(?:last|letzte[nm]?|vorige[nm]?)\s+(?:week|month|year|woche|monat|jahr)\b"
    # a year is a calendar expression too: "I started in 2015" - "what was popular then?"
    r"|\b(?:in|im\s+jahr|seit|since|(?<=\s))\s*(?:1[89]|20)\d{2}\b(?![.:,]\d)",
    _I,
)
_PERSON = lazy_compile(
    r"\b(sister|mother|mom|mum|daughter|wife|girlfriend|aunt|grandmother|niece|"
    r"brother|father|dad|son|husband|boyfriend|uncle|grandfather|nephew|friend|colleague|boss|"
    r"schwester|mutter|tochter|frau|freundin|tante|oma|großmutter|nichte|kollegin|chefin|"
    r"bruder|vater|sohn|mann|freund|onkel|opa|großvater|neffe|kollege|chef)\s+([A-ZÄÖÜ][a-zäöüß]+)",
    _I,
)
_TITLE = lazy_compile(
    r"\b((?i:herrn?|frau|mr|mrs|ms|miss)\.?)\s+([A-ZÄÖÜ][a-zäöüß]+(?:\s+[A-ZÄÖÜ][a-zäöüß]+)?)", re.UNICODE)
_FEMALE_TITLES = frozenset("frau mrs ms miss".split())
_MALE_TITLES = frozenset("herr herrn mr".split())
#: Whom the assistant sends the user to talk to: the object of asking, calling, writing.
_ADDRESSEE = lazy_compile(
    r"\b(?i:ask|call|talk\s+to|speak\s+to|contact|email|text|frag|fragt|ruf|kontaktiere|schreib|"
    r"wende\s+dich\s+an)\s+([A-ZÄÖÜ][a-zäöüß]+(?:\s+[A-ZÄÖÜ][a-zäöüß]+)?)", re.UNICODE)
_FEMALE = frozenset(
    "sister mother mom mum daughter wife girlfriend aunt grandmother niece schwester mutter "
    "tochter frau freundin tante oma großmutter nichte kollegin chefin".split()
)
_MALE = frozenset(
    "brother father dad son husband boyfriend uncle grandfather nephew bruder vater sohn mann "
    "freund onkel opa großvater neffe kollege chef".split()
)
#: German articles and what they say about the noun after them (nominative, accusative, dative).
_ARTICLE_GENDER = {
    "der": "m", "den": "m", "einen": "m", "dieser": "m", "diesen": "m", "ein": "mn", "dem": "mn",
    "einem": "mn", "die": "f", "eine": "f", "einer": "f", "diese": "f", "das": "n", "dieses": "n",
}
_GERMAN_NP = lazy_compile(
    r"\b((?i:der|den|dem|die|das|ein|eine|einen|einem|einer|dieser|diesen|diese|dieses))\s+"
    # the noun, and a name after it ("den Editor VS Code", "den Raspberry Pi 5", "das Skript
    # backup.sh"): capitalised words, numbers and file-like names, so the verb after a
    # subject ("Der Fehler sagt") stays out
    r"(?:[a-zäöüß]+(?:e|en|er|es|em)\s+)?"
    r"([A-ZÄÖÜ][\wäöüß-]*(?:\s+(?:[A-Z0-9][\w.-]*|[a-z][\w-]*[._/][\w./-]+)){0,3})",
    re.UNICODE,
)
_DATIVE_PREPS = frozenset("mit von zu bei aus nach seit gegenüber in an auf unter über vor hinter neben zwischen".split())
#: What a German pronoun agrees with: "f" feminine, "m" masculine, "n" neuter.
#: The demonstratives der/den/dem stand for a noun as er/ihn/ihm do ("Reicht der?" = "Reicht er?").
PRONOUN_GENDER = {"sie": "f", "ihr": "f", "er": "m", "ihn": "m", "ihm": "mn", "es": "n",
                  "der": "m", "den": "m", "dem": "mn", "die": "f"}


@dataclass(slots=True)
class Antecedent:
    text: str  # the place, time, person or noun phrase
    message: Message
    sentence: str


def _recent(history: Sequence[Message], turns: int = 3) -> list[Message]:
    """The newest messages first, up to ``turns`` user messages back (tool output left out)."""
    out: list[Message] = []
    users = 0
    for msg in reversed(history):
        if msg.role not in ("user", "assistant") or not msg.content.strip():
            continue
        out.append(msg)
        users += msg.role == "user"
        if users >= turns:
            break
    return out


def _last_match(history: Sequence[Message], finders: Sequence[re.Pattern[str]]) -> Antecedent | None:
    for msg in _recent(history):
        for sentence in reversed(sentences(msg.content)):
            for rx in finders:
                found = [m.group(1) for m in rx.finditer(sentence)]
                found = [f for f in found if f.split()[0].lower() not in STOPWORDS]
                if found:
                    return Antecedent(found[-1].rstrip(".!?,"), msg, sentence)
    return None


def find_place(history: Sequence[Message]) -> Antecedent | None:
    """The place "there"/"dort" points to: the newest place named."""
    # A name after a place preposition anywhere in the last turns beats a subject name
    # ("the hospital" before "Nursing is demanding"): a subject is often no place at all.
    return _last_match(history, (_SENTENCE_END_NAME, _PLACE, _PLACE_LOWER)) \
        or _last_match(history, (_SUBJECT_NAME,))


def find_time(history: Sequence[Message]) -> Antecedent | None:
    """The time "then"/"damals" points to: the newest calendar expression."""
    for msg in _recent(history):
        for sentence in reversed(sentences(msg.content)):
            found = list(_TIME.finditer(sentence))
            if found:
                return Antecedent(found[-1].group(0), msg, sentence)
    return None


def find_person(history: Sequence[Message], gender: str) -> Antecedent | None:
    """The person "she"/"him"/"sie"/"ihn" points to, newest message first: a name introduced
    by a kinship or role noun or a title of that gender ("my sister Anna", "Herrn Schulz"),
    or a name the assistant sends the user to ("Ask Priya", "Call Mike Jensen"), whose
    gender the name alone does not tell; ``gender`` is "f" or "m"."""
    words = _FEMALE if gender == "f" else _MALE
    titles = _FEMALE_TITLES if gender == "f" else _MALE_TITLES
    for msg in _recent(history, turns=4):
        found = [(m.start(), m.group(2), m.group(0)) for m in _PERSON.finditer(msg.content)
                 if m.group(1).lower() in words]
        found += [(m.start(), m.group(2), m.group(0)) for m in _TITLE.finditer(msg.content)
                  if m.group(1).lower().rstrip(".") in titles]
        found += [(m.start(), m.group(1), m.group(0)) for m in _ADDRESSEE.finditer(msg.content)
                  if m.group(1).split()[0].lower() not in STOPWORDS]
        if found:
            _, name, phrase = max(found)
            return Antecedent(name, msg, phrase)
    return None


_OTHER_PREPS = frozenset("für durch gegen ohne um wegen während trotz statt".split())


def _noun_phrases(text: str) -> list[tuple[str, str, bool]]:
    """German noun phrases of ``text``: (phrase, genders its article allows, inside a
    prepositional phrase)."""
    out: list[tuple[str, str, bool]] = []
    for m in _GERMAN_NP.finditer(text):
        article = m.group(1).lower()
        gender = _ARTICLE_GENDER[article]
        before = text[: m.start()].split()
        prev = before[-1].lower() if before else ""
        if article in ("der", "einer", "dieser") and prev in _DATIVE_PREPS:
            gender = "f"  # "mit der Zeile": dative feminine, not a masculine subject
        out.append((m.group(2), gender, prev in _DATIVE_PREPS or prev in _OTHER_PREPS))
    return out


def noun_genders(text: str) -> list[tuple[str, str]]:
    """German noun phrases of ``text`` with the genders their articles allow ("f", "mn", ...)."""
    return [(np, g) for np, g, _ in _noun_phrases(text)]


def gender_of(text: str, pronoun: str) -> str | None:
    """The noun phrase of ``text`` the German ``pronoun`` most likely stands for: the last one
    that agrees with it, a subject or object before one inside a prepositional phrase
    ("Ich empfehle die Bibliothek Pandas für die Auswertung": "sie" is the library - an
    oblique noun is the least salient antecedent). None if none agrees."""
    want = PRONOUN_GENDER.get(pronoun.lower())
    if want is None:
        return None
    agreeing = [(np, oblique) for np, g, oblique in _noun_phrases(text) if set(want) & set(g)]
    core = [np for np, oblique in agreeing if not oblique]
    if core:
        return core[-1]
    return agreeing[-1][0] if agreeing else None
