"""The English and German words the cues and the binders test against (nouns of
reference, ordinals, words that show a pronoun is not one, determiners, persons)."""

from __future__ import annotations

import re

FLAGS = re.IGNORECASE | re.UNICODE


NOUNS_EN = {
    "suggestion": "suggestion", "suggestions": "suggestion", "idea": "suggestion",
    "recommendation": "suggestion", "advice": "suggestion", "proposal": "suggestion",
    "plan": "suggestion", "solution": "suggestion", "tip": "suggestion",
    "answer": "answer", "response": "answer", "reply": "answer", "message": "answer",
    "explanation": "answer", "example": "answer",
    "command": "command",
    "list": "list", "options": "list",
    "result": "result", "results": "result", "output": "result",
}


NOUNS_DE = {
    "vorschlag": "suggestion", "vorschlags": "suggestion", "vorschläge": "suggestion",
    "idee": "suggestion", "empfehlung": "suggestion", "lösung": "suggestion",
    "plan": "suggestion", "tipp": "suggestion", "rat": "suggestion",
    "antwort": "answer", "nachricht": "answer", "erklärung": "answer", "beispiel": "answer",
    "befehl": "command", "befehls": "command", "kommando": "command",
    "liste": "list", "optionen": "list",
    "ergebnis": "result", "ergebnisse": "result", "resultat": "result", "ausgabe": "result",
}


RESULT_NOUNS = [n for n, what in (*NOUNS_EN.items(), *NOUNS_DE.items()) if what == "result"]


ORDINALS_DE = {
    "erste": 1, "ersten": 1, "erster": 1, "erstes": 1, "zweite": 2, "zweiten": 2, "zweiter": 2,
    "zweites": 2, "dritte": 3, "dritten": 3, "dritter": 3, "drittes": 3, "vierte": 4,
    "vierten": 4, "letzte": -1, "letzten": -1,
}


ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "last": -1, **ORDINALS_DE}


TASK_NOUNS = frozenset("task job ticket issue aufgabe auftrag vorgang".split())


COMMAND_NOUNS = frozenset("command befehl kommando".split())


TOOL_NOUNS = frozenset("tool werkzeug".split())


# Words after "that"/"this" that show it is the pronoun itself, not "that <noun>".
NOT_NOUN = frozenset(
    "again now too first instead please for is was are were works worked sounds one then "
    "later right also as in on at to with by from into or and but so if when will would "
    "should could can did does do has had have isn't wasn't doesn't won't looks seems "
    "helped happened means".split()
)


# Words after "that"/"this" in chat that are verbs, modals or pronouns, never the noun.
NOT_NOUN_EN = frozenset(
    "must might may must've stands stand made makes make means meant got gets went goes came "
    "comes keeps kept feels felt sounded seemed looked happens that this these those which "
    "what who i'm you're we're they're it's what's kind sort way much many "
    # prepositions: "what was that about sleep?" - "that" is the pronoun, "about" its topic
    "about of for with from into onto over under after before without than like".split()
)


_ADJECTIVES = frozenset(
    "new old big small little tough great last other same whole first second next nice "
    "good bad amazing awesome cool lovely beautiful special huge tiny whole entire".split()
)


def adverb(word: str) -> bool:
    """"Does that really work?": an -ly adverb between a pronoun and its verb is no noun."""
    return len(word) > 4 and word.endswith("ly") and word not in _LY_NOUNS


#: Nouns that end like an adverb ("that family", "this July").
_LY_NOUNS = frozenset("family supply assembly reply july italy rally jelly belly bully holly anomaly".split())


def adjective(word: str) -> bool:
    return word in _ADJECTIVES or word.endswith(("ous", "ful", "ive", "able", "ible", "ical"))


TIME_NOUNS = frozenset(
    "morning evening afternoon night week weekend month year time moment day".split()
)


THAT_CONJ_BEFORE = frozenset(
    "anything something everything nothing anyone someone everyone one all stuff "
    "think know said say says sure so such hope mean means believe seems guess than now feel "
    "realize realise given except shows show told tell noticed notice read heard see saw "
    "glad sad afraid".split()
)


SUBJECTS = frozenset(
    "i you we they he she it the a an my your our their this there his her some".split()
)


PLURAL = frozenset({"them", "they", "these", "those"})


COPULA = frozenset("is was are were isn't wasn't aren't weren't".split())


AUXILIARIES = frozenset(
    "did does do didn't doesn't don't will would can could should might may must won't "
    "wouldn't can't couldn't shouldn't".split()
)


#: Personal pronouns that may stand for a person, with the gender they ask for.
PERSONAL = {"she": "f", "her": "f", "he": "m", "him": "m", "sie": "f", "ihr": "f", "er": "m", "ihn": "m", "ihm": "m"}


GERMAN_PERSONAL = frozenset({"sie", "ihr", "er", "ihn", "ihm", "es", "der", "den", "dem", "die"})


#: der/den/dem/die alone are demonstrative pronouns ("Reicht der auch?"); before a noun, articles.
GERMAN_DEMONSTRATIVE = frozenset({"der", "den", "dem", "die"})


#: An attributive German adjective always carries one of these endings ("der neue Server").
ADJECTIVE_ENDINGS = ("e", "en", "er", "es", "em")


ENGLISH_DETERMINERS = frozenset("the a an my your our their his her its this that".split())


#: The speaker or the listener in an additive fragment ("and you too", "ich auch") make it a
#: reply about people, not one more object for the last request.
PERSONS = frozenset("i me you we us ich mir mich du dir dich wir uns ihr euch".split())


CONJUNCTIONS = frozenset("and then but or und dann aber oder sowie".split())


GENERIC = frozenset(
    "do does did done doing run running make again please can could would you me mach mache "
    "machen mal nochmal noch wieder bitte kannst könntest tu tue tun führe aus ausführen "
    "repeat retry once more one thing what how why was wie warum ist is are sind the der die "
    "das it es that this dies diese dieses them ihn und and".split()
)


AFTER_VERB = frozenset(
    "the a an my your our their his her its it this that them me us you to in on at for with "
    "from into so again".split()
)
