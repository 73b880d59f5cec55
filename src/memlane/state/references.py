"""Reference resolution (seed 004), English and German.

A user's message often points back into the conversation: "ja setze deinen
Vorschlag um", "run that again", "no, that's wrong", "the second one". The
resolver finds those references, decides what each points to in the recent
history, and returns the query with a ``[Context: ...]`` suffix an LLM can use
(the seed's example: ``ja setze deinen vorschlag um! [Context: Previous
suggestion was ...]``). When a reference could mean several recent things it
does not guess: it returns a numbered clarification in the query's language,
built from those things (seed 004: "Ich bin mir nicht sicher, worauf sich 'das'
bezieht. Meinten Sie: 1. ... 2. ... 3. Etwas anderes?").

Referents are commands (code spans, shell lines), tool calls, job ids, list
items and the assistant's suggestions or offers (German infinitive steps such as
"Das System neu starten." included); a turn with none of those is a referent
itself (named by the user's request). Salience falls by ``TURN_DECAY`` per turn
back, and words the query shares with a referent raise it. A bare reference
("mach das nochmal", "do it again") whose runner-up referent reaches
``AMBIGUITY_RATIO`` of the best one is ambiguous. Clarification options are
only what the assistant suggested or did: the user is never offered their own
line back. A confirmation next to a named reference ("ja, setze deinen
Vorschlag um") confirms what that reference names and shares its ambiguity.

Deterministic, offline, regular expressions only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from memlane.errors import InvalidInputError
from memlane.language import STOPWORDS, stem
from memlane.models import JSON, Message
from memlane.patterns import lazy_compile
from memlane.state import antecedents as ante
from memlane.state import language as lang
from memlane.state.language import extract_job_refs

if TYPE_CHECKING:
    from memlane.ports import MessageLog
    from memlane.state.tracker import SessionState

__all__ = [
    "AMBIGUITY_RATIO",
    "Candidate",
    "Reference",
    "Resolution",
    "detect_references",
    "has_reference_cues",
    "resolve",
    "resolve_in_session",
]

AMBIGUITY_RATIO = 0.55
TURN_DECAY = 0.6
MAX_OPTIONS = 3
HISTORY = 12

_I = re.IGNORECASE | re.UNICODE


# --------------------------------------------------------------------- records


@dataclass(slots=True)
class Candidate:
    """Something in the recent conversation a reference may point to."""

    kind: str  # command | action | job | item | suggestion | message
    target: str  # what a reference to it stands for (a command, a job id, a sentence)
    message_id: int | None
    message_text: str
    role: str
    distance: int  # turns back from the newest (0 = the last turn)
    score: float = 0.0
    sentence: str = ""  # the sentence it appears in
    suggested: bool = False  # that sentence suggests or offers something
    in_list: bool = False  # one item of a numbered or bulleted list
    answer: str = ""  # a whole turn's answer ("message"), a tool call's result ("action")

    def label(self, language: str) -> str:
        """How the candidate reads as a numbered option."""
        if self.kind == "command":
            if language == "de":
                return f"Den Befehl `{self.target}` ausführen"
            return f"Run `{self.target}`"
        if self.kind == "action":
            if language == "de":
                return f"`{self.target}` erneut aufrufen"
            return f"Call `{self.target}` again"
        # An option is a choice, not a sentence: "Das System neu starten" (seed 004).
        return self.target.rstrip(".") or self.target

    def describe(self) -> str:
        if self.kind == "command":
            return f"the command `{self.target}`"
        if self.kind == "action":  # its result is what "is that enough?" asks about
            result = f" (result: {_snip(self.answer, 120)})" if self.answer else ""
            return f"the action `{self.target}`{result}"
        if self.answer:  # a turn is its request and its answer: "they" after "which are down?"
            return f"{self.target} (answer: {_snip(self.answer, 160)})"
        return self.target

    @property
    def offerable(self) -> bool:
        """Whether it may be offered as a clarification option: something the assistant
        suggested or did, or a thing with an id - never a user's own line."""
        return not (self.kind == "message" and self.role == "user")

    def to_dict(self) -> JSON:
        return {
            "kind": self.kind, "target": self.target, "message_id": self.message_id,
            "message_text": self.message_text, "role": self.role, "distance": self.distance,
            "score": round(self.score, 4), "sentence": self.sentence,
        }


@dataclass(slots=True)
class Reference:
    """One reference found in the query and what it was resolved to."""

    text: str  # as written in the query ("deinen Vorschlag")
    kind: str  # pronoun | reference | entity | selection | confirmation | negation
    start: int = 0
    end: int = 0
    target: str | None = None  # what it stands for; None when unresolved or ambiguous
    message_id: int | None = None  # the earlier message it points to
    message_text: str | None = None
    confidence: float = 0.0
    ambiguous: bool = False
    candidates: list[Candidate] = field(default_factory=list)
    description: str | None = None  # this reference's part of "[Context: ...]"

    def to_dict(self) -> JSON:
        return {
            "text": self.text, "kind": self.kind, "start": self.start, "end": self.end,
            "target": self.target, "message_id": self.message_id,
            "message_text": self.message_text, "confidence": round(self.confidence, 4),
            "ambiguous": self.ambiguous, "description": self.description,
            "candidates": [c.to_dict() for c in self.candidates],
        }


@dataclass(slots=True)
class Resolution:
    """The result of resolving a query against its session."""

    query: str
    resolved_query: str
    references: list[Reference] = field(default_factory=list)
    confidence: float = 1.0  # 1.0 when there was nothing to resolve
    language: str = "en"
    clarification: str | None = None  # a question to ask instead of guessing
    options: list[str] = field(default_factory=list)

    @property
    def needs_clarification(self) -> bool:
        return self.clarification is not None

    @property
    def context_used(self) -> bool:
        return self.resolved_query != self.query

    @property
    def references_resolved(self) -> list[str]:
        """The resolved phrases; a bare "ja"/"no" only when nothing more telling was found."""
        done = [r for r in self.references if r.target is not None]
        named = [r.text for r in done if r.kind not in ("confirmation", "negation")]
        return named or [r.text for r in done]

    def to_dict(self) -> JSON:
        return {
            "query": self.query, "resolved_query": self.resolved_query,
            "references": [r.to_dict() for r in self.references],
            "confidence": round(self.confidence, 4), "language": self.language,
            "clarification": self.clarification, "options": list(self.options),
        }

    def to_metadata(self) -> JSON:
        """Turn fields and metadata for ``store_interaction`` (seed 004's entry shape)."""
        out: JSON = {
            "resolved_query": self.resolved_query,
            "context_used": self.context_used,
            "references_resolved": self.references_resolved,
            "resolution_confidence": round(self.confidence, 4),
        }
        if self.clarification is not None:
            out["clarification"] = self.clarification
        return out


# --------------------------------------------------------------------- detection

_CONFIRM_START = lazy_compile(
    r"^\W*(?:(?:ok(?:ay)?|yes|sure|ja)\W+do\s+it(?!\s+again)|go\s+ahead|please\s+do|"
    r"let'?s\s+do\s+it|sounds\s+good|do\s+it(?=\W*$)|"
    r"yes|yeah|yep|yup|sure|ok(?:ay)?|alright|correct|exactly|"
    r"ja(?:wohl)?|genau|einverstanden|passt|gerne|richtig|stimmt|leg\s+los|klar)(?=\W|$)",
    _I,
)
_CONTINUE = lazy_compile(
    r"\b(?:continue|proceed|go\s+on|carry\s+on|keep\s+going|mach\s+(?:bitte\s+)?weiter|"
    r"weitermachen|fahre?\s+fort)\b|^\W*weiter\W*$",
    _I,
)
# A first-person subject right before "continue" makes it a statement about the user.
_FIRST_PERSON_BEFORE = lazy_compile(
    r"\b(?:i|we|ich|wir)(?:'ll|'d|\s+will|\s+shall|\s+can|\s+could|\s+might|\s+would|"
    r"\s+want\s+to|\s+werde|\s+werden|\s+will|\s+wollen|\s+kann|\s+können)?\s*$",
    _I,
)
_NEGATION_START = lazy_compile(
    r"^\W*(?:no|nope|nah|nein|nee)(?=\W|$)(?!\W+(?:problem|worries|idea|way|need|thanks|"
    r"danke|sorgen)\b)",
    _I,
)
_NEGATION_ANY = lazy_compile(
    r"\b(?:that(?:'s|\s+is)\s+(?:wrong|incorrect|not\s+(?:right|correct|it|what\s+I\s+meant))|"
    r"you(?:'re|\s+are)\s+wrong|not\s+what\s+I\s+meant|"
    r"das\s+(?:ist|war)\s+falsch|(?:das\s+)?stimmt\s+(?:so\s+)?nicht|das\s+meinte\s+ich\s+nicht|"
    r"so\s+nicht)\b|^\W*(?:wrong|incorrect|falsch)\b",
    _I,
)
_NOUNS_EN = {
    "suggestion": "suggestion", "suggestions": "suggestion", "idea": "suggestion",
    "recommendation": "suggestion", "advice": "suggestion", "proposal": "suggestion",
    "plan": "suggestion", "solution": "suggestion", "tip": "suggestion",
    "answer": "answer", "response": "answer", "reply": "answer", "message": "answer",
    "explanation": "answer", "example": "answer",
    "command": "command",
    "list": "list", "options": "list",
    "result": "result", "results": "result", "output": "result",
}
_NOUNS_DE = {
    "vorschlag": "suggestion", "vorschlags": "suggestion", "vorschläge": "suggestion",
    "idee": "suggestion", "empfehlung": "suggestion", "lösung": "suggestion",
    "plan": "suggestion", "tipp": "suggestion", "rat": "suggestion",
    "antwort": "answer", "nachricht": "answer", "erklärung": "answer", "beispiel": "answer",
    "befehl": "command", "befehls": "command", "kommando": "command",
    "liste": "list", "optionen": "list",
    "ergebnis": "result", "ergebnisse": "result", "resultat": "result", "ausgabe": "result",
}
_RESULT_NOUNS = [n for n, what in (*_NOUNS_EN.items(), *_NOUNS_DE.items()) if what == "result"]
# What came out of a command needs no "your": "is the header in the result?", "im Ergebnis" -
# the conversation has one result, the one the assistant just reported.
_RESULT_REF = lazy_compile(
    r"\b(?:the|das|die|dem|im|vom|beim|aus\s+dem)\s+(" + "|".join(_RESULT_NOUNS) + r")\b"
    r"(?!\s+(?:of|from|von|des|der|aus)\b)",  # "the result of the vote" names its own source
    _I)
_REF_EN = lazy_compile(
    r"\b(?:your|the\s+(?:previous|last|earlier)|that)\s+"
    r"(?:(?:last|previous|earlier|first|latest)\s+)?(" + "|".join(_NOUNS_EN) + r")\b",
    _I,
)
_REF_DE = lazy_compile(
    r"\b(?:dein|deine|deinen|deinem|deiner|ihr|ihre|ihren|ihrem|ihrer|"
    r"(?:der|die|den|dem|das)\s+(?:vorherige[nmrs]?|letzte[nmrs]?|vorige[nmrs]?))\s+"
    r"(?:(?:letzte[nmrs]?|vorherige[nmrs]?|erste[nmrs]?)\s+)?(" + "|".join(_NOUNS_DE) + r")\b",
    _I,
)
_SAID = lazy_compile(
    r"\b(?:what\s+did\s+you\s+(?:just\s+)?(?:say|suggest|mention|write|propose|recommend)|"
    r"was\s+(?:hast|hattest|habt|hattet|haben|hatten)\s+(?:du|ihr|sie)\b(?:\s+[\w-]+){0,4}?\s+"
    r"(?:gesagt|vorgeschlagen|geschrieben|erwähnt)|"
    r"was\s+du\b(?:\s+[\w-]+){1,4}?\s+(?:gesagt|vorgeschlagen|geschrieben|erwähnt)(?:\s+hast)?|"
    r"what\s+you\s+(?:just\s+)?(?:said|suggested|mentioned|wrote|proposed|recommended)|"
    r"(?:as|like)\s+you\s+(?:said|suggested)|you\s+(?:just\s+)?(?:said|mentioned)|"
    # what the assistant meant points back as what it said: "what did you mean by X",
    # "was meintest du mit X", "was hast du mit X gemeint"
    r"what\s+did\s+you\s+mean|what\s+you\s+meant|was\s+(?:meintest|meinten)\s+(?:du|sie|ihr)|"
    r"was\s+(?:hast|hattest|haben|hatten)\s+(?:du|sie|ihr)\b(?:\s+[\w-]+){0,4}?\s+gemeint|"
    r"was\s+(?:du|sie)\s+(?:gerade\s+|eben\s+)?(?:gesagt|vorgeschlagen|geschrieben|erwähnt)"
    r"(?:\s+(?:hast|haben))?|wie\s+(?:du|sie)\s+(?:gesagt|vorgeschlagen))\b",
    _I,
)
_ORDINALS_DE = {
    "erste": 1, "ersten": 1, "erster": 1, "erstes": 1, "zweite": 2, "zweiten": 2, "zweiter": 2,
    "zweites": 2, "dritte": 3, "dritten": 3, "dritter": 3, "drittes": 3, "vierte": 4,
    "vierten": 4, "letzte": -1, "letzten": -1,
}
_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "last": -1, **_ORDINALS_DE}
_SELECT = lazy_compile(
    r"\b(?:the|die|den|das|der|dem)\s+(" + "|".join(_ORDINALS) + r")"
    r"(?:\s+(?:one|option|choice|item|variante|möglichkeit|punkt)\b|(?=\W*$))|"
    r"\b(?:option|number|nummer|nr\.?|punkt|variante)\s*(\d)\b|^\W*(\d)\W*$",
    _I,
)
# German writes every noun with a capital: an article and an ordinal before a lower-case word
# ("Läuft der zweite fehlerfrei?") or nothing leave the noun out, as "the second one" does.
_SELECT_ELIDED = lazy_compile(
    r"\b(?:die|den|das|der|dem)\s+(?:" + "|".join(_ORDINALS_DE)
    + r")(?=\s+(?-i:[a-zäöüß])|\W*$)",
    _I,
)
# German capitalises the noun after an ordinal: "die dritte Idee", "den zweiten Flug" - a
# selection when the last answer names that noun (its list header: "Drei Ideen:").
_SELECT_NOUN_DE = lazy_compile(
    r"\b(?:die|den|das|der|dem)\s+(" + "|".join(_ORDINALS_DE) + r")\s+(?-i:([A-ZÄÖÜ][\wäöüß-]+))", _I)
_NAMED_ID = lazy_compile(r"\s*[-#]?\s*\d")
_TASK_NOUNS = frozenset("task job ticket issue aufgabe auftrag vorgang".split())
_COMMAND_NOUNS = frozenset("command befehl kommando".split())
_TOOL_NOUNS = frozenset("tool werkzeug".split())
_DEMONSTRATIVE_EN = lazy_compile(r"\b(that|this|these|those)\s+([a-z][\w-]*)", _I)
_DEMONSTRATIVE_DE = lazy_compile(
    r"\b(diese[nmrs]?|dieses|jene[nmrs]?)\s+([A-ZÄÖÜ][\wäöüß-]*)", re.UNICODE
)
_DEFINITE_TASK = lazy_compile(
    r"\b(?:the\s+(?:task|job|ticket)|(?:die|der|den|dem)\s+(?:aufgabe|auftrag|job|ticket))\b|"
    # "the command", "the update command", "den Update-Befehl", "das Tool"
    r"\b(?:the|that|this)\s+(?:[\w-]+\s+)?(?:command|tool)\b|"
    r"\b(?:den|dem|der|das|diesen|dieses)\s+(?:[\w-]+-)?(?:befehl|kommando|tool|werkzeug)\b", _I
)
# Words after "that"/"this" that show it is the pronoun itself, not "that <noun>".
_NOT_NOUN = frozenset(
    "again now too first instead please for is was are were works worked sounds one then "
    "later right also as in on at to with by from into or and but so if when will would "
    "should could can did does do has had have isn't wasn't doesn't won't looks seems "
    "helped happened means".split()
)
# Words after "that"/"this" in chat that are verbs, modals or pronouns, never the noun.
_NOT_NOUN_EN = frozenset(
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


def _adverb(word: str) -> bool:
    """"Does that really work?": an -ly adverb between a pronoun and its verb is no noun."""
    return len(word) > 4 and word.endswith("ly") and word not in _LY_NOUNS


#: Nouns that end like an adverb ("that family", "this July").
_LY_NOUNS = frozenset("family supply assembly reply july italy rally jelly belly bully holly anomaly".split())


def _adjective(word: str) -> bool:
    return word in _ADJECTIVES or word.endswith(("ous", "ful", "ive", "able", "ible", "ical"))


_TIME_NOUNS = frozenset(
    "morning evening afternoon night week weekend month year time moment day".split()
)
_THAT_CONJ_BEFORE = frozenset(
    "anything something everything nothing anyone someone everyone one all stuff "
    "think know said say says sure so such hope mean means believe seems guess than now feel "
    "realize realise given except shows show told tell noticed notice read heard see saw "
    "glad sad afraid".split()
)
_SUBJECTS = frozenset(
    "i you we they he she it the a an my your our their this there his her some".split()
)
_EXPLETIVE_EN = lazy_compile(
    r"\bit(?:'s|\s+is|\s+was)\s+(?:time|raining|snowing|late|early|possible|likely|important|"
    r"necessary|hard|easy|true|nice|great|good|fine|okay|ok)\b|"
    r"\bit\s+(?:seems|looks|depends|turns\s+out|appears|rains)\b|"
    r"\bhow(?:'s|\s+is|\s+was)\s+it\s+going\b|\bis\s+it\s+(?:possible|ok|okay|safe|true|"
    r"necessary|normal|worth)\b|\bmake\s+it\s+(?:to|happen)\b|"
    # weather and clock time have no referent: "is it raining", "what time is it"
    r"\bit\b[^.?!,;]{0,24}?\b(?:rain|snow|hail|drizzl|thunder|freez)\w*|\btime\s+is\s+it\b|"
    # a placeholder for a clause that follows: "it is important to back up"
    r"\bit(?:'s|\s+is|\s+was)\s+\w+\s+(?:to|that)\b|"
    # light, temperature and the hour as a state "it" is in or gets into: "it's getting dark",
    # "it'll be pitch-dark soon", "it was already too late"
    r"\bit(?:'s|'ll\s+be|\s+is|\s+was|\s+will\s+be|\s+gets|\s+got|\s+becomes|\s+became|"
    r"(?:'s|\s+has|\s+had)\s+been)\s+(?:(?:getting|becoming|going\s+to\s+be|already|still|so|"
    r"very|too|really|quite|pretty|rather|almost|nearly|way|\w+ly)\s+)*"
    r"(?:[\w-]+-)?(?:dark|light|bright|cold|hot|warm|cool|chilly|freezing|humid|sunny|cloudy|"
    r"windy|foggy|stormy|late|early|noon|midnight)\b|"
    # a stretch of time as the subject's state: "it's been a long day", "it has been ages"
    r"\bit(?:'s|\s+has|\s+had)\s+been\s+(?:(?:a|an|such\s+a|so|too)\s+)?(?:[\w-]+\s+){0,2}"
    r"(?:day|days|week|weeks|month|months|year|years|while|ages|night)\b|"
    # a duration has no referent: "how long does it take to ...", "it takes ages until ..."
    r"\bhow\s+(?:long|much\s+time)\s+(?:does|did|will|would|could|might|should)\s+it\s+take\b|"
    r"\bit\s+(?:takes|took|will\s+take)\s+(?:ages|forever|long|a\s+while|(?:a\s+few|\d+|\w+)\s+"
    r"(?:minutes|hours|days|weeks|months|years))\b|\bit\b[^.?!,;]{0,30}\b(?:until|till)\b|"
    # "matter" and "seem" take an impersonal subject: "it doesn't matter", "does it matter"
    r"\bit\s+(?:doesn't|does\s+not|didn't|did\s+not|won't|wouldn't|don't)\s+(?:matter|seem)\b|"
    # a gerund clause that follows: "it's worth starting early", "it's no use asking"
    r"\bit(?:'s|\s+is|\s+was)\s+(?:(?:not|no|really|definitely|still)\s+)?(?:worth|use|good)\s+\w+ing\b|"
    r"\b(?:does|did|will|would)\s+it\s+(?:matter|seem)\b|\bit\s+(?:matters|mattered|seemed)\b",
    _I,
)
#: German predicates of light, temperature and the hour ("eiskalt", "stockdunkel" are compounds).
_STATE_DE = (
    r"(?:[a-zäöüß]*(?:kalt|warm|heiß|kühl|dunkel|spät|früh|schwül|windig|neblig|sonnig|bewölkt|"
    r"frostig|stürmisch)|hell|nacht|abend|tag|mittag|winter|sommer|herbst|frühling)"
)
_EXPLETIVE_DE = lazy_compile(
    r"\bes\s+(?:gibt|geht|regnet|schneit|tut\s+mir\s+leid|sei\s+denn|kommt\s+darauf\s+an)\b|"
    r"\b(?:gibt|geht|ging|gab)\s+es\b|\bwie\s+geht'?s\b|"
    # weather, clock time and temperature: "regnet es", "wie spät ist es", "es ist kalt"
    # weather verbs in any tense and order ("wird es morgen regnen"), clock time ("Uhr ist es")
    r"\bes\b[^.?!,;]{0,24}?\b(?:regn|schnei|hagel|donner|blitz|niesel|frier)\w*|"
    r"\b(?:regn|schnei|hagel|donner|blitz|niesel|frier)\w*\s+es\b|\b(?:spät|uhr)\s+ist\s+es\b|"
    # "es" as the subject of a state of light, temperature or the hour, in either order and
    # with any copula: "es wird schon dunkel", "ist es noch zu früh", "es bleibt heute eiskalt"
    r"(?:\bes\s+(?:ist|war|wird|wurde|bleibt|blieb|würde)|\b(?:ist|war|wird|wurde|bleibt|blieb)\s+es)"
    r"\s+(?:(?:so|sehr|zu|schon|noch|ganz|ziemlich|echt|langsam|gleich|bald|heute|morgen|jetzt|"
    r"hier|draußen|drinnen|wieder|immer|ja|aber|wohl|recht|total|viel|etwas|richtig|bereits)\s+)*"
    + _STATE_DE + r"\b|"
    # a placeholder for a clause that follows: "es ist wichtig, ... zu", "kommt es vor, dass"
    r"\bes\b[^.?!]*,\s*(?:dass|zu|wenn|ob|bis)\b|\bes\b[^.?!,]*\bvor,?\s+dass\b|"
    # ... or an extraposed infinitive: "es fällt mir schwer, jeden Tag zu üben"
    # (a separable verb takes "zu" inside: "es lohnt sich, früh loszugehen")
    r"\bes\b[^.?!]*,[^.?!,]*\b(?:zu\s+[a-zäöüß]+|[a-zäöüß]{2,}zu[a-zäöüß]{2,}en)\s*[.!?]*\s*$|"
    # durations and "schwer/leicht fallen" take an impersonal subject: "wie lange dauert es"
    r"\bwie\s+(?:lange|viel\s+zeit)\s+(?:dauert|dauerte|braucht|brauchte)\s+es\b|"
    r"\bes\s+fällt\s+\w+\s+(?:\w+\s+)?(?:schwer|leicht)\b|\bfällt\s+es\s+\w+\s+(?:\w+\s+)?(?:schwer|leicht)\b|"
    r"^\W*es\s+ist\s+[a-zäöüß]+\s*,",
    _I,
)
#: A pronominal adverb ("darauf", "davon") that announces the clause after it points forward,
#: maybe behind its verb's particle ("es kommt darauf an, wie ...").
_CATAPHORIC = lazy_compile(r"(?:\s+[a-zäöüß]+)?\s*,\s*(?:wie|ob|dass|was|wann|wo|wer|welche[mnrs]?|zu)\b", _I)
_PRONOUN_RE = lazy_compile(
    r"\b(it|that(?:'s)?|this|them|they|these|those|the\s+same(?:\s+thing)?|she|her|he|him|"
    r"es|das|dies|dieses|diese|ihn|ihm|ihr|sie|er|der|den|dem|die|dasselbe|das\s+gleiche|selbiges|"
    # German pronominal adverbs point back like "it" with a preposition: "dafür" = "for it"
    r"da(?:r)?(?:an|auf|aus|bei|durch|für|gegen|in|mit|nach|neben|über|um|unter|von|vor|zu|zwischen))\b",
    _I,
)
_PLURAL = frozenset({"them", "they", "these", "those"})
_COPULA = frozenset("is was are were isn't wasn't aren't weren't".split())
_AUXILIARIES = frozenset(
    "did does do didn't doesn't don't will would can could should might may must won't "
    "wouldn't can't couldn't shouldn't".split()
)
#: Personal pronouns that may stand for a person, with the gender they ask for.
_PERSONAL = {"she": "f", "her": "f", "he": "m", "him": "m", "sie": "f", "ihr": "f", "er": "m", "ihn": "m", "ihm": "m"}
_GERMAN_PERSONAL = frozenset({"sie", "ihr", "er", "ihn", "ihm", "es", "der", "den", "dem", "die"})
#: der/den/dem/die alone are demonstrative pronouns ("Reicht der auch?"); before a noun, articles.
_GERMAN_DEMONSTRATIVE = frozenset({"der", "den", "dem", "die"})
#: An attributive German adjective always carries one of these endings ("der neue Server").
_ADJECTIVE_ENDINGS = ("e", "en", "er", "es", "em")
_ENGLISH_DETERMINERS = frozenset("the a an my your our their his her its this that".split())
# "there"/"dort"/"da" point to a place, "then"/"damals" to a time. Existential "there is" and
# the conjunction "da" (a clause's first word: "Da es regnet, ...") do not.
_PLACE_REF = lazy_compile(
    r"(?<!\bis\s)(?<!\bare\s)(?<!\bwas\s)(?<!\bwere\s)"  # "is there a GUI?" asks whether one exists
    r"\bthere\b(?!\s*(?:is|are|was|were|'s|'re|will|must|might|may|seems?|should|could|has|have)\b)"
    r"|(?<=\w\s)\b(?:dort|da)\b(?!\s*,)|\bdort(?:hin)?\b",
    _I,
)
_TIME_REF = lazy_compile(
    r"\b(?:at\s+that\s+time|back\s+then|damals|zu\s+dem\s+zeitpunkt|zu\s+der\s+zeit)\b"
    r"|\bthen\b(?=\s*(?:too|as\s+well)?\s*[?.!]*\s*$)",
    _I,
)
# A fragment that only names a new object or place for the last action: "now for /var",
# "und für Anna auch", "same for /tmp", "and now on the staging server".
_FRAGMENT = lazy_compile(
    r"^\W*(?:(?:and|now|also|then|ok(?:ay)?|again|once\s+more|but|und|jetzt|nun|auch|dann|bitte|"
    r"nochmal|noch\s+einmal|erneut|aber)\W+)*"
    r"(?:(?:the\s+)?same(?:\s+thing)?|dasselbe|das\s+gleiche|genauso)?\s*"
    r"(?:for|on|in|with|at|für|auf|mit|bei|im)\b",
    _I,
)
# A verbless fragment that adds one more thing to the last request: "now the invoice too",
# "and butter as well", "und Butter auch", "jetzt noch den zweiten" - an opening "and/now"
# and an additive particle ("too", "as well", "auch", "noch"), a few words at most.
_ADDITIVE = lazy_compile(
    r"^\W*(?:and|now|und|jetzt|nun)\b(?:\W+[\w/.-]+){1,4}?\W+(?:too|as\s+well|also|auch)\W*$"
    r"|^\W*(?:(?:and|und)\s+)?(?:now|jetzt|nun)\s+(?:noch|also|auch)\b",
    _I,
)
_ADDITIVE_WORDS = 6
#: The speaker or the listener in an additive fragment ("and you too", "ich auch") make it a
#: reply about people, not one more object for the last request.
_PERSONS = frozenset("i me you we us ich mir mich du dir dich wir uns ihr euch".split())
_CONJUNCTIONS = frozenset("and then but or und dann aber oder sowie".split())
_GENERIC = frozenset(
    "do does did done doing run running make again please can could would you me mach mache "
    "machen mal nochmal noch wieder bitte kannst könntest tu tue tun führe aus ausführen "
    "repeat retry once more one thing what how why was wie warum ist is are sind the der die "
    "das it es that this dies diese dieses them ihn und and".split()
)


def _overlaps(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    return any(start < e and s < end for s, e in spans)


def _prev_word(text: str, start: int) -> str:
    words = lang.words(text[:start])
    return words[-1] if words else ""


_FOLLOWING = lazy_compile(r"((?:\s+[\w'’-]+){0,3})")


def _next_words(text: str, end: int, n: int = 2) -> list[str]:
    """The ``n`` words right after position ``end`` ("" where there are none)."""
    found = _FOLLOWING.match(text, end)
    words = found.group(1).split()[:n] if found else []
    return words + [""] * (n - len(words))


_AFTER_VERB = frozenset(
    "the a an my your our their his her its it this that them me us you to in on at for with "
    "from into so again".split()
)


def _verb_follows(query: str, start: int, after: str, second: str) -> bool:
    """Whether "that"/"this" at ``start`` is the subject after an auxiliary and ``after`` its
    verb: the last word, or one an object or a phrase follows."""
    return _prev_word(query, start) in _AUXILIARIES and bool(after) and (
        not second or second.lower().strip("?.!,") in _AFTER_VERB)


def _pronoun_ok(query: str, m: re.Match[str]) -> bool:
    """Whether a pronoun-shaped word is really a reference back into the conversation."""
    word = m.group(1).lower()
    start, end = m.span(1)
    after, second = _next_words(query, end)
    low_after = after.lower()
    window = query  # one utterance: "wie spät ist es" needs the words before "es"
    if word == "it" and _EXPLETIVE_EN.search(window):
        return False
    if word == "es" and _EXPLETIVE_DE.search(window):
        return False
    if word.startswith("da") and len(word) > 3 and _CATAPHORIC.match(query, end):
        return False  # "es kommt darauf an, wie ...": the clause that follows is what it means
    if word in ("sie", "ihr", "ihnen") and m.group(1)[0].isupper() and query[:start].strip() \
            and not re.search(r"[.!?:]\s*$", query[:start]):
        return False  # formal address mid-sentence: "Können Sie mir helfen?"
    if word == "ihr" and (after[:1].isupper() or _prev_word(query, start).endswith("t")):
        return False  # a possessive ("ihr Auto") or "you" plural ("habt ihr")
    if word == "her" and after and after.lower() not in _NOT_NOUN and after.isalpha() \
            and after.lower() not in ("on", "to", "for", "about", "a", "the", "that", "again"):
        return False  # a possessive: "her first day"
    if re.match(r"^\W*[\w.-]+(?:\s+[\w.-]+)?\s*:", query) and query.index(":") < start:
        return False  # "Logrotate: how does it work?" - the query names what "it" is
    at_end = bool(re.match(r"\s*[\w'’-]+\s*[?.!]*\s*$", query[end:])) \
        and _prev_word(query, start) in _COPULA
    # After do-support or a modal the verb follows the subject: "why did that happen?",
    # "did that fix the problem?" ("that" the subject) - but "does that file exist?" has
    # another word for the verb, so "file" is the noun of "that file".
    pronoun_before_verb = _verb_follows(query, start, after, second)
    if word in ("that", "this", "these", "those") and after and low_after not in _NOT_NOUN \
            and low_after not in _NOT_NOUN_EN and not _adverb(low_after) \
            and not at_end and not pronoun_before_verb:
        return False  # "that file" (an entity), "that we" (a conjunction), "this morning"
    if word == "that" and _prev_word(query, start) in _THAT_CONJ_BEFORE:
        return False  # "I think that's ..." reads as a statement, not a pointer
    if word in _GERMAN_DEMONSTRATIVE:
        # An article has its noun after it (German nouns are capitalised), maybe behind an
        # adjective; "der zweite" is an ordinal (a selection); "the den" is English.
        attributive = after.islower() and after.endswith(_ADJECTIVE_ENDINGS) and second[:1].isupper()
        if not after or after[:1].isupper() or attributive \
                or low_after in _ORDINALS or _prev_word(query, start) in _ENGLISH_DETERMINERS:
            return False
        if query[:start].rstrip().endswith(","):
            return False  # a relative pronoun: "der Server, der läuft"
    if word in ("das", "dies", "dieses", "diese"):
        if after[:1].isupper() or (after.islower() and second[:1].isupper()):
            return False  # an article or determiner: "das System", "das neue System"
        if query[:start].rstrip().endswith(","):
            return False  # a relative pronoun: "das Buch, das ich las"
    # A pronoun after "X and ..." in the same query usually points to X, not back in time.
    before = lang.words(query[:start])
    for i, w in enumerate(before):
        if w in _CONJUNCTIONS and any(
            len(x) > 3 and x not in _GENERIC and x not in lang.QUESTION_WORDS for x in before[:i]
        ):
            return False
    return True


def detect_references(query: str) -> list[Reference]:
    """The references in ``query`` (not yet resolved), in the order they appear."""
    found: list[Reference] = []
    spans: list[tuple[int, int]] = []

    def add(text: str, kind: str, start: int, end: int) -> None:
        if not _overlaps(spans, start, end):
            spans.append((start, end))
            found.append(Reference(text=text, kind=kind, start=start, end=end))

    for rx, kind in ((_CONFIRM_START, "confirmation"), (_CONTINUE, "confirmation"),
                     (_NEGATION_START, "negation"), (_NEGATION_ANY, "negation"),
                     (_REF_EN, "reference"), (_REF_DE, "reference"), (_SAID, "reference"),
                     (_RESULT_REF, "reference"),
                     (_SELECT, "selection"), (_SELECT_ELIDED, "selection"), (_SELECT_NOUN_DE, "selection"),
                     (_DEFINITE_TASK, "entity")):
        for m in rx.finditer(query):
            text = m.group(0).strip(" ,.!?")
            if rx is _CONTINUE and _FIRST_PERSON_BEFORE.search(query[:m.start()]):
                continue  # "I'll continue tomorrow" tells what the user will do, not "go on"
            if kind == "entity" and _NAMED_ID.match(query, m.end()):
                continue  # "der Auftrag #17" names its referent itself
            if text:
                add(text, kind, m.start(), m.start() + len(m.group(0).rstrip(" ,.!?")))
    for rx in (_DEMONSTRATIVE_EN, _DEMONSTRATIVE_DE):
        for m in rx.finditer(query):
            noun = m.group(2).lower()
            if noun in _NOT_NOUN or noun in _TIME_NOUNS or noun in _SUBJECTS or noun in _NOT_NOUN_EN \
                    or (rx is _DEMONSTRATIVE_EN and _adverb(noun)):
                continue
            if m.group(1).lower() == "that" and _prev_word(query, m.start()) in _THAT_CONJ_BEFORE:
                continue
            if _NAMED_ID.match(query, m.end()) or query[m.end():m.end() + 1] in ("'", "’"):
                continue  # "this doesn't": a contraction, not "this <noun>"
            if rx is _DEMONSTRATIVE_EN and re.match(r"\s*[?.!]*\s*$", query[m.end():]) \
                    and _prev_word(query, m.start()) in _COPULA:
                continue  # "is that safe?": the pronoun and a predicate, not "that <noun>"
            if rx is _DEMONSTRATIVE_EN and _verb_follows(query, m.start(), *_next_words(query, m.start(1) + len(m.group(1)))):
                continue  # "did that happen": the pronoun and a verb
            end = m.end()
            if rx is _DEMONSTRATIVE_EN and _adjective(noun):
                # "these vulnerable moments": the noun is the next word.
                nxt = re.match(r"\s+([a-z][\w-]*)", query[end:])
                if nxt is None or nxt.group(1).lower() in _NOT_NOUN | _NOT_NOUN_EN | _TIME_NOUNS:
                    continue
                end += nxt.end()
            add(query[m.start():end], "entity", m.start(), end)
    for rx, kind in ((_PLACE_REF, "place"), (_TIME_REF, "time")):
        for m in rx.finditer(query):
            add(m.group(0), kind, m.start(), m.end())
    front = _TOPIC_FRONT.match(query)
    if front is not None:
        add(front.group(0).strip(" ,:"), "topic", front.start(), front.end())
    fragment = _FRAGMENT.match(query)
    if fragment is not None and len(lang.words(query)) <= 8 and not found:
        add(fragment.group(0).strip(), "repeat", fragment.start(), fragment.end())
    words = lang.words(query)
    additive = _ADDITIVE.match(query)
    if additive is not None and not found and len(words) <= _ADDITIVE_WORDS \
            and not _PERSONS.intersection(words):
        add(query.strip(" .!?"), "repeat", additive.start(), additive.end())
    for m in _PRONOUN_RE.finditer(query):
        if _pronoun_ok(query, m):
            add(m.group(1), "pronoun", m.start(1), m.end(1))
    found.sort(key=lambda r: r.start)
    return found


def has_reference_cues(text: str, recent: Sequence[str] = ()) -> bool:
    """Whether ``text`` refers back at all (the tracker's cheap test before it reads history).

    With ``recent`` (the turns before it, oldest first), an ordinal before a noun ("die dritte
    Idee") counts only when the last of them names that noun, as the resolver requires: "die
    letzte Fußball-WM" after a cake recipe is a new topic, not a pick from a list.
    """
    refs = detect_references(text)
    if recent:
        refs = [r for r in refs if not _noun_selection_unbacked(r, recent[-1])]
    return bool(refs)


def _noun_selection_unbacked(ref: Reference, last: str) -> bool:
    if ref.kind != "selection" or _SELECT.search(ref.text) is not None:
        return False
    noun = _SELECT_NOUN_DE.match(ref.text)
    return noun is not None and not _shared(_text_stems(noun.group(2)), _text_stems(last))


# --------------------------------------------------------------------- candidates

_CODE_RE = lazy_compile(r"`([^`\n]{2,200})`")
_SHELL_LINE = lazy_compile(
    r"^\s*(?:\$\s+)?((?:sudo|apt|apt-get|systemctl|useradd|usermod|docker|git|pip|npm|kubectl|"
    r"rm|cp|mv|mkdir|chmod|chown|ls|cat|reboot|shutdown)\b[^\n]{0,200})$",
    re.MULTILINE,
)
_LIST_ITEM = lazy_compile(r"^\s*(?:\d{1,2}[.)]|[-*•])\s+(.{2,300})$", re.MULTILINE)


def _snip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _stems(text: str) -> set[str]:
    # First five letters: enough to let German inflections meet ("startest"/"starte").
    return {w[:5] for w in lang.words(text) if len(w) > 2 and w not in _GENERIC}


def _turns(history: Sequence[Message]) -> list[list[Message]]:
    """The history grouped into turns (a user message and what followed), newest first."""
    turns: list[list[Message]] = []
    current: list[Message] = []
    for msg in history:
        if msg.role == "system":
            continue
        if msg.role == "user" and current:
            turns.append(current)
            current = []
        current.append(msg)
    if current:
        turns.append(current)
    return list(reversed(turns))


def _tool_call_text(call: object) -> str:
    """``name {"arg": ...}`` of an OpenAI tool call, shortened; "" when it has no name."""
    if not isinstance(call, dict):
        return ""
    fn = call.get("function")
    name = fn.get("name") if isinstance(fn, dict) else None
    if not isinstance(name, str) or not name:
        return ""
    args = fn.get("arguments") if isinstance(fn, dict) else None
    args_text = " ".join(args.split()) if isinstance(args, str) else ""
    return _snip(f"{name} {args_text}".strip(), 80)


def _is_command(code: str) -> bool:
    # `sudo useradd -m max` is something to run; `/etc/hosts` or `PATH` is a name.
    first = code.split()[0] if code.split() else ""
    return " " in code.strip() and bool(re.fullmatch(r"[a-z][\w.-]*", first))


def _message_candidates(msg: Message, distance: int) -> list[Candidate]:
    text = msg.content
    weight = 1.0 if msg.role == "assistant" else 0.8
    out: list[Candidate] = []

    def add(kind: str, target: str, sentence: str, w: float, in_list: bool = False) -> None:
        if not any(c.target == target for c in out):
            out.append(Candidate(kind, target, msg.id, _snip(text, 300), msg.role, distance, w,
                                 _snip(sentence), lang.is_suggestion(sentence), in_list))

    if msg.role == "assistant":
        # A tool call is something the assistant did: "do that again" may mean it.
        for call in msg.tool_calls or []:
            action = _tool_call_text(call)
            if action:
                add("action", action, action, 0.9)

    items = [i.strip() for i in _LIST_ITEM.findall(text)] if msg.role == "assistant" else []
    body = _LIST_ITEM.sub("", text) if len(items) >= 2 else text
    for line in _SHELL_LINE.findall(body):
        if "`" not in line:
            add("command", line.strip(), line, weight)
    for sentence in lang.sentences(body):
        codes = [c.strip() for c in _CODE_RE.findall(sentence)]
        for code in codes:
            if _is_command(code):
                add("command", code, sentence, weight)
        for ref in extract_job_refs(sentence):
            add("job", ref, sentence, weight)
        if msg.role == "assistant" and lang.is_suggestion(sentence) and not any(
            c.sentence == _snip(sentence) for c in out
        ) and not lang.PLEASANTRY_QUESTION_RE.search(sentence):
            add("suggestion", _snip(sentence), sentence, 0.9 * weight)
    if len(items) >= 2:
        for item in items:
            codes = [c.strip() for c in _CODE_RE.findall(item) if _is_command(c.strip())]
            if codes:
                add("command", codes[0], item, 0.9, in_list=True)
            else:
                add("item", _snip(item, 120), item, 0.9, in_list=True)
    return out


def _candidates(history: Sequence[Message], extra_jobs: Sequence[str]) -> list[Candidate]:
    out: list[Candidate] = []
    turns = _turns(history)
    for distance, turn in enumerate(turns):
        found: list[Candidate] = []
        for msg in reversed(turn):  # the answer before the request
            for cand in _message_candidates(msg, distance):
                if not any(c.target == cand.target for c in found):
                    found.append(cand)
        if not found and lang.infer_intent(turn[0].content) != "smalltalk":
            # No concrete referent: the turn itself, named by the user's request.
            first = turn[0]
            sentence = next(iter(lang.sentences(first.content)), first.content)
            answer = next((m.content for m in reversed(turn)
                           if m.role == "assistant" and m.content.strip()), "")
            found.append(Candidate("message", _snip(sentence, 120), first.id,
                                   _snip(first.content, 300), first.role, distance, 0.5,
                                   _snip(sentence), False, answer=answer))
        results = [m.content for m in turn if m.role == "tool" and m.content.strip()]
        for cand in found:
            if cand.kind == "action" and results:
                cand.answer = results[0] if len(results) == 1 else "; ".join(results)
            cand.score *= TURN_DECAY**distance
            if not any(c.target == cand.target for c in out):
                out.append(cand)
    known = {c.target for c in out}
    for ref in extra_jobs:  # active jobs the state remembers from further back
        if ref not in known:
            out.append(Candidate("job", ref, None, ref, "assistant", len(turns),
                                 0.5 * TURN_DECAY ** len(turns), ref, False))
    return out


def _rank(
    cands: list[Candidate], query: str, ref: Reference
) -> list[tuple[Candidate, int]]:
    """Candidates by salience, raised by the words the rest of the query shares with them."""
    words = _stems(query[: ref.start] + " " + query[ref.end:])
    ranked: list[tuple[Candidate, int]] = []
    for cand in cands:
        overlap = len(words & _stems(cand.message_text + " " + cand.target))
        ranked.append((replace(cand, score=cand.score * (1.0 + 1.5 * overlap)), overlap))
    return sorted(ranked, key=lambda co: (-co[0].score, co[0].distance))


# --------------------------------------------------------------------- resolution


def _last_assistant(history: Sequence[Message]) -> Message | None:
    for msg in reversed(history):
        if msg.role == "assistant" and msg.content.strip():
            return msg
    return None


_ELLIPTICAL = 3  # words at most in a question that leaves out what it asks about


def _focus(msg: Message) -> tuple[str, str]:
    """The part of an assistant message a reply reacts to: (what it is, its text)."""
    sents = lang.sentences(msg.content)
    for i in range(len(sents) - 1, -1, -1):
        s = sents[i]
        if lang.is_question(s) and not lang.PLEASANTRY_QUESTION_RE.search(s):
            if len(lang.words(s)) <= _ELLIPTICAL and i > 0:
                # "I can rotate the API keys now. Want me to?": the question leaves its
                # verb and object out; the sentence before says what is offered.
                return "offer", f"{sents[i - 1]} {s}"
            return ("offer" if lang.SUGGESTION_RE.search(s) else "question"), s
    for s in sents:
        if lang.is_suggestion(s):
            return "suggestion", s
    return "answer", msg.content


def _set(ref: Reference, target: str, msg_id: int | None, msg_text: str | None,
         confidence: float, description: str) -> None:
    ref.target = _snip(target)
    ref.message_id = msg_id
    ref.message_text = msg_text
    ref.confidence = round(confidence, 4)
    ref.description = description


def _ambiguous(ref: Reference, cands: list[Candidate], confidence: float = 0.3) -> None:
    ref.ambiguous = True
    ref.candidates = cands
    ref.confidence = confidence


def _resolve_reply(ref: Reference, history: Sequence[Message], cands: Sequence[Candidate] = (),
                   query: str = "") -> None:
    """Confirmations and negations react to the assistant's last message."""
    msg = _last_assistant(history)
    if msg is None:
        ref.confidence = 0.2
        return
    what, text = _focus(msg)
    snippet = _snip(text)
    mine = [c for c in cands if c.message_id == msg.id]
    commands = [c for c in mine if c.kind in ("command", "action")]
    if what == "offer" and len(commands) == 1 and commands[0].target not in text:
        # "Shall I run it?": the offer stands for the command the message proposed
        snippet = f"{snippet} (`{commands[0].target}`)"
    options = [c for c in mine if c.in_list]
    steps = [c for c in options if c.kind in ("command", "action") or c.suggested]
    if what != "question" and len(steps) >= 2:
        options = steps  # "Two options: 1. `restart` 2. `clear the cache`" - "ok do that"
    if ref.kind == "confirmation" and len(options) >= 2 and (what == "question" or options is steps):
        # "Which do you prefer?" - "ok": a yes to a choice is no choice. A word of the
        # query that names one option ("ok, restart") picks it; otherwise ask.
        chosen = _qualified(options, query, ref)
        if len(chosen) == 1:
            c = chosen[0]
            _set(ref, c.target, c.message_id, c.message_text, 0.8, f"User chooses: {_snip(c.target)}")
        else:
            _ambiguous(ref, options)
        return
    if ref.kind == "negation":
        _set(ref, text, msg.id, msg.content, 0.85, f"User rejects the previous {what}: {snippet}")
    elif _CONTINUE.search(ref.text):
        _set(ref, text, msg.id, msg.content, 0.85, f"Continue with: {snippet}")
    else:
        confidence = 0.9 if what != "answer" else 0.7
        _set(ref, text, msg.id, msg.content, confidence,
             f"User confirms the previous {what}: {snippet}")


def _nearest(cands: list[Candidate]) -> list[Candidate]:
    nearest = min(c.distance for c in cands)
    return [c for c in cands if c.distance == nearest]


def _resolve_named(ref: Reference, history: Sequence[Message], cands: list[Candidate],
                   query: str = "") -> None:
    """'your suggestion', 'the previous answer', 'what you said', 'deinen Vorschlag'."""
    m = _REF_EN.search(ref.text) or _REF_DE.search(ref.text) or _RESULT_REF.search(ref.text)
    noun = m.group(1).lower() if m else ""
    what = _NOUNS_EN.get(noun) or _NOUNS_DE.get(noun) or "answer"
    if m is None and re.search(r"suggest|propos|recommend|vorgeschlagen", ref.text, _I):
        what = "suggestion"
    if noun in _COMMAND_NOUNS or ref.kind == "entity":
        what = "command"
    mine = [c for c in cands if c.role == "assistant" and c.message_id is not None]
    ran = [c for c in mine if c.kind in ("action", "command")] if what == "result" else []
    if ran:  # the result of what the assistant ran: the command and what it reported
        c = _nearest(ran)[0]
        outcome = c.answer or c.sentence
        _set(ref, c.target, c.message_id, c.message_text, 0.85,
             f"'{ref.text}' is the result of `{c.target}`: {_snip(outcome, 160)}")
        return
    if what == "result" and not _REF_EN.search(ref.text) and not _REF_DE.search(ref.text):
        ref.confidence = 0.2  # "the result was fine" with nothing run: no result to point at
        return
    if what == "list":
        items = [c for c in mine if c.in_list]
        if items:
            same = _nearest(items)
            joined = "; ".join(c.target for c in same)
            _set(ref, joined, same[0].message_id, same[0].message_text, 0.85,
                 f"The previous list was: {joined}")
            return
    elif what in ("suggestion", "command"):
        matching = [c for c in mine if (c.suggested or c.kind in ("suggestion", "item"))] \
            if what == "suggestion" else [c for c in mine if c.kind == "command"]
        qualified = _qualified(matching, query, ref)
        topic = None if qualified else _about(history, query, ref, topic_only=True)
        if topic is not None:  # "dein Tipp zu den Schlüsseln": the turn about the keys
            _set(ref, topic.content, topic.id, topic.content, 0.8,
                 f"Previous answer was: {_snip(topic.content)}")
            return
        matching = qualified or matching
        if matching:
            same = _one_plan(_nearest(matching))
            if len(same) > 1:
                _ambiguous(ref, same)
                return
            c = same[0]
            confidence = 0.9 if c.distance <= 1 else 0.75
            text = c.sentence if what == "suggestion" else c.target
            if what == "suggestion":
                description = f"Previous suggestion was: {text}"
            else:
                description = f"'{ref.text}' is the command `{c.target}`"
            _set(ref, c.target, c.message_id, c.message_text, confidence, description)
            return
    msg = _about(history, query, ref) or _last_assistant(history)
    if msg is None:
        ref.confidence = 0.1
        return
    confidence = 0.9 if what == "answer" else 0.5
    _set(ref, msg.content, msg.id, msg.content, confidence,
         f"Previous answer was: {_snip(msg.content)}")


def _resolve_selection(ref: Reference, history: Sequence[Message]) -> None:
    m = _SELECT.search(ref.text)
    msg = _last_assistant(history)
    noun = _SELECT_NOUN_DE.match(ref.text) if m is None else None
    if msg is None or (noun is not None and not _shared(_text_stems(noun.group(2)), _text_stems(msg.content))):
        return  # "der erste Schultag" is no option of an answer that never spoke of one
    if noun is not None:
        index = _ORDINALS[noun.group(1).lower()]
    elif m is not None:
        index = _ORDINALS[m.group(1).lower()] if m.group(1) else int(m.group(2) or m.group(3))
    else:
        return
    items = [i.strip() for i in _LIST_ITEM.findall(msg.content)] or _inline_items(msg.content)
    if index == -1:
        index = len(items)
    if 1 <= index <= len(items):
        item = items[index - 1]
        _set(ref, item, msg.id, msg.content, 0.9, f"Option {index} was: {_snip(item)}")


_RUN_ON_LIST = lazy_compile(r":\s*([^:]+?)\s*[.!]?\s*$")
_LIST_SEPARATOR = lazy_compile(r"\s*[,;]\s*(?:(?:or|and|oder|und)\s+)?|\s+(?:or|and|oder|und)\s+", _I)


def _inline_items(text: str) -> list[str]:
    """The options of a list run into a sentence after a colon ("Good choices: JetBrains Mono,
    Fira Code or Iosevka."): short coordinated phrases; none when the sentence is prose."""
    for sentence in reversed(lang.sentences(text)):
        m = _RUN_ON_LIST.search(sentence)
        if m is None:
            continue
        items = [i.strip() for i in _LIST_SEPARATOR.split(m.group(1)) if i.strip()]
        if len(items) >= 2 and all(len(i.split()) <= 4 for i in items):
            return items
    return []


def _resolve_entity(ref: Reference, history: Sequence[Message], cands: list[Candidate],
                    query: str = "") -> None:
    words = lang.words(ref.text)
    noun = words[-1].split("-")[-1] if words else ""  # "Update-Befehl" is a Befehl
    if noun in _TOOL_NOUNS:
        actions = [c for c in cands if c.kind == "action"]
        if actions:
            c = _nearest(actions)[0]
            _set(ref, c.target, c.message_id, c.message_text, 0.85, f"'{ref.text}' is {c.describe()}")
            return
    if noun in _TASK_NOUNS:
        jobs = [c for c in cands if c.kind == "job"]
        if jobs:
            same = _nearest(jobs)
            if len(same) > 1 and same[0].message_id is not None:
                _ambiguous(ref, same)
                return
            c = same[0]
            confidence = 0.9 if c.distance <= 1 else 0.7
            _set(ref, c.target, c.message_id, c.message_text, confidence,
                 f"'{ref.text}' is {c.target}")
            return
    if noun in _COMMAND_NOUNS:
        _resolve_named(ref, history, cands, query)
        return
    # Five letters let inflections meet ("Datei"/"Dateien", "agency"/"agencies");
    # a shorter noun must match whole ("pic" is not "pick").
    stem = noun[:5]

    def mentions(word: str) -> bool:
        return word.startswith(stem) if len(noun) >= 5 else word in (noun, noun + "s")

    for msg in reversed(history):
        if msg.role == "system" or not stem:
            continue
        for sentence in lang.sentences(msg.content):
            if any(mentions(w) for w in lang.words(sentence)):
                _set(ref, sentence, msg.id, msg.content, 0.75,
                     f"'{ref.text}' refers to: {_snip(sentence)}")
                return
    ref.confidence = 0.4  # a descriptive phrase still reads fine unresolved


def _predicate_reading(ref: Reference, query: str) -> None:
    """"Is this safe on a shared repo?": after a copula, "this <word>" that names nothing in
    the conversation is the pronoun and its predicate, not a demonstrative and a noun."""
    words = ref.text.split()
    if ref.target is None and len(words) == 2 and words[0].lower() in ("this", "that") \
            and _prev_word(query, ref.start) in _COPULA:
        ref.kind, ref.text, ref.end = "pronoun", words[0], ref.start + len(words[0])


_SEQUENCE = lazy_compile(r"\b(?:and\s+then|then|afterwards|after\s+that|und\s+dann|dann|danach|anschließend)\b", _I)


def _one_plan(cands: list[Candidate]) -> list[Candidate]:
    """Commands of one suggested sequence ("create it with A and then set a password with B")
    are one plan, not a choice: they collapse into their sentence."""
    sentences_ = {c.sentence for c in cands}
    if len(cands) > 1 and len(sentences_) == 1:
        sentence = cands[0].sentence
        if _SEQUENCE.search(sentence) and any(c.suggested for c in cands):
            plan = replace(cands[0], kind="suggestion", target=sentence)
            return [plan]
    return cands


def _qualifiers(query: str, ref: Reference) -> set[str]:
    """Stems of the query's telling words (what a reference is "about"), hyphen parts too."""
    return _telling_stems(query)


def _telling_stems(text: str) -> set[str]:
    lng = lang.detect_language(text)
    out: set[str] = set()
    for w in lang.words(text):
        for part in {w, *w.split("-")}:
            if len(part) > 2 and part not in _GENERIC and part not in lang.QUESTION_WORDS \
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
    _I,
)
# A query that opens on its topic and then asks: "About hashing: which parameters?"
_TOPIC_FRONT = lazy_compile(
    r"^\W*(?:about|regarding|concerning|as\s+for|re|zum|zur|zu|über|bezüglich|betreffend|wegen)\s+"
    r"[^:,?!.]{2,40}[:,]",
    _I,
)


def _topic_stems(query: str) -> set[str]:
    """Stems of the words a topic phrase of ``query`` names ("about rebooting" -> reboot)."""
    out: set[str] = set()
    for m in _TOPIC.finditer(query):
        out |= _telling_stems(m.group(1))
    return out


def _text_stems(text: str) -> set[str]:
    lng = lang.detect_language(text)
    return {stem(p, lng)[:6] for w in lang.words(text) for p in {w, *w.split("-")} if len(p) > 2}


def _shared(want: set[str], have: set[str]) -> int:
    """How many wanted stems the text has; one may be the start of the other, so a name meets
    the compound it opens ("cron" / "crontab", "Lüfter" / "Lüftersteuerung")."""
    return sum(
        1 for q in want
        if q in have or (len(q) >= 4 and any(h.startswith(q) or (len(h) >= 4 and q.startswith(h))
                                             for h in have))
    )


def _qualified(cands: list[Candidate], query: str, ref: Reference) -> list[Candidate]:
    """The candidates that share the most qualifying words with the query ("the update command")."""
    want = _qualifiers(query, ref)
    if not want:
        return []
    # A list item is judged by its own line: the message around it holds the other options too.
    scored = [(_shared(want, _text_stems((c.sentence if c.in_list else c.message_text) + " " + c.target)), c)
              for c in cands]
    best = max((n for n, _ in scored), default=0)
    return [c for n, c in scored if n == best] if best else []


def _about(history: Sequence[Message], query: str, ref: Reference,
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
            have = _text_stems(asked + " " + msg.content)
            # a word named as such outranks a compound it opens ("Braten" / "Bratensatz")
            overlap = _shared(want, have) + len(want & have)
            if overlap and (best is None or overlap >= best[0]):
                best = (overlap, msg)
    return best[1] if best else None


def _resolve_topic(ref: Reference, query: str, history: Sequence[Message]) -> None:
    """"About hashing: which parameters?": the answer of the turn about that topic; a topic
    no earlier turn is about is new, and the query stays as it is."""
    msg = _about(history, query, ref, topic_only=True)
    if msg is None:
        ref.confidence = 0.5
        return
    _set(ref, msg.content, msg.id, msg.content, 0.8, f"Previous answer about it was: {_snip(msg.content)}")


def _resolve_place_or_time(ref: Reference, history: Sequence[Message]) -> None:
    found = ante.find_place(history) if ref.kind == "place" else ante.find_time(history)
    if found is None:
        ref.confidence = 0.3
        return
    _set(ref, found.text, found.message.id, found.message.content, 0.8,
         f"'{ref.text}' refers to {found.text} ({_snip(found.sentence, 100)})")


def _actionable(cands: list[Candidate]) -> list[Candidate]:
    """What the assistant offered or did, nearest first: commands, tool calls, suggestions."""
    return [c for c in cands if c.role == "assistant" and c.message_id is not None
            and (c.kind in ("command", "action") or c.suggested or c.kind == "suggestion")]


def _resolve_repeat(ref: Reference, cands: list[Candidate]) -> None:
    """"now for /var": the last action again, with what the fragment names."""
    acts = _actionable(cands)
    if not acts:
        # Nothing the assistant ran or offered: the last request itself is repeated
        # ("Translate 'good morning' into Italian." - "again, but in Spanish").
        turns = [c for c in cands if c.kind == "message" and c.message_id is not None]
        if not turns:
            ref.confidence = 0.3
            return
        c = _nearest(turns)[0]
        _set(ref, c.target, c.message_id, c.message_text, 0.6,
             f"Repeat the request {c.describe()} with: {ref.text}")
        return
    same = _one_plan(_nearest(acts))
    commands = [c for c in same if c.kind in ("command", "action")]
    same = commands or same
    if len(same) > 1:
        _ambiguous(ref, same)
        return
    c = same[0]
    _set(ref, c.target, c.message_id, c.message_text, 0.75,
         f"Repeat {c.describe()} with: {ref.text}")


def _agreeing(ref: Reference, history: Sequence[Message]) -> tuple[str, Message] | None:
    """German: the newest noun phrase of the last assistant turn whose article agrees with
    the pronoun ("sie" -> "eine PostgreSQL-Datenbank", "ihn" -> "den Raspberry Pi 5")."""
    for msg in reversed(history):
        if msg.role == "user":
            return None
        if msg.role == "assistant" and msg.content.strip():
            found = ante.gender_of(msg.content, ref.text)
            if found is not None:
                return found, msg
    return None


# Verbs whose object is a fault, not a thing to run: "fix it", "how do I free it",
# "Reparier das", "Wie gebe ich ihn frei?" (a separable verb: its particle "frei" ends the clause).
_REPAIR = lazy_compile(
    r"\b(?:fix|fixe?n?|repair|solve|resolve|free|unblock|troubleshoot|debug|"
    r"reparier\w*|beheb\w*|behob\w*|lös(?!ch)\w*|beseitig\w*|frei(?:geben|machen|bekommen)?)\b",
    _I,
)
# What reports a fault: an error, something failing, taken, full, refused or missing.
_FAULT = lazy_compile(
    r"\b(?:error|errors|fail(?:s|ed|ing|ure)?|crash(?:es|ed|ing)?|broken|in\s+use|denied|refused|"
    r"not\s+found|timed?\s+out|conflicts?|full|"
    r"fehler\w*|fehlgeschlagen|schlägt\s+fehl|abgestürzt|stürzt|kaputt|belegt|verweigert|"
    r"nicht\s+gefunden|voll|konflikt\w*|zeitüberschreitung)\b",
    _I,
)


def _fault(history: Sequence[Message]) -> tuple[str, Message] | None:
    """The newest sentence of the last turn that reports a fault (the assistant's diagnosis
    before the user's complaint): what "fix it" or "Wie gebe ich ihn frei?" is about."""
    for msg in reversed(history):
        if msg.role != "system" and msg.content.strip():
            for sentence in reversed(lang.sentences(msg.content)):
                if _FAULT.search(sentence):
                    return sentence, msg
        if msg.role == "user":
            return None
    return None


def _resolve_pronoun(ref: Reference, query: str, history: Sequence[Message],
                     cands: list[Candidate], resolved: list[Reference]) -> None:
    word = ref.text.lower()
    plural = word in _PLURAL
    if word in _PERSONAL:
        person = ante.find_person(history, _PERSONAL[word])
        if person is not None:
            _set(ref, person.text, person.message.id, person.message.content, 0.8,
                 f"'{ref.text}' refers to {person.text} ({person.sentence})")
            return
    if word == "sie" and any(c.in_list and c.distance == 0 for c in cands):
        plural = True  # "Starte sie neu" after a list: sie is plural
    anchor = next((r for r in resolved if r.target is not None), None)
    if anchor is not None and not plural:
        # "yes, do it" / "ja, setz das um": the pronoun is what the rest of the query names.
        _set(ref, anchor.target or "", anchor.message_id, anchor.message_text,
             anchor.confidence, "")
        return
    topic = _about(history, query, ref, topic_only=True) if not plural else None
    if topic is not None:  # "what was that again about cron?": the turn about cron
        _set(ref, topic.content, topic.id, topic.content, 0.75,
             f"'{ref.text}' refers to the answer: {_snip(topic.content)}")
        return
    last = _last_assistant(history)
    if last is not None and not plural:
        what, text = _focus(last)
        if what == "offer":  # "Shall I restart nginx?" - "do it"
            _set(ref, text, last.id, last.content, 0.8, f"'{ref.text}' refers to: {_snip(text)}")
            return
    fault = _fault(history) if not plural and _REPAIR.search(query) else None
    if fault is not None:
        sentence, msg = fault
        _set(ref, sentence, msg.id, msg.content, 0.75, f"'{ref.text}' refers to the problem: {_snip(sentence)}")
        return
    if word in _GERMAN_PERSONAL and not plural and anchor is None:
        agreeing = _agreeing(ref, history)
        if agreeing is not None:
            noun, msg = agreeing
            # The sentence around the noun says which one: "das Programm" is Borg in
            # "Nimm Borg: das Programm dedupliziert ..." (as a person's note gives the sentence).
            where = next((s for s in lang.sentences(msg.content) if noun in s), "")
            note = f"'{ref.text}' refers to {noun}" + (f" ({_snip(where, 120)})" if where else "")
            _set(ref, noun, msg.id, msg.content, 0.75, note)
            return
    if not cands:
        ref.confidence = 0.1
        return
    if plural:
        items = [c for c in cands if c.in_list and c.distance == 0]
        if len(items) >= 2:
            joined = "; ".join(c.target for c in items)
            _set(ref, joined, items[0].message_id, items[0].message_text, 0.8,
                 f"'{ref.text}' refers to: {joined}")
            return
    ranked = _rank(cands, query, ref)
    top = [c for c, _ in ranked if c.score >= AMBIGUITY_RATIO * ranked[0][0].score]
    plan = _one_plan(_nearest(top)) if top else []
    if len(plan) == 1 and plan[0].target not in {c.target for c in top}:
        c = plan[0]  # the commands of one suggested sequence: that sequence
        _set(ref, c.target, c.message_id, c.message_text, 0.75, f"'{ref.text}' refers to: {_snip(c.target)}")
        return
    best, best_overlap = ranked[0]
    if not plural and best.kind == "message" and best.answer:
        # "Firefox for browsing and Thunderbird for mail." - "Install it.": an answer that
        # names two things side by side is a choice, whether or not it is a list.
        named = _side_by_side(best.answer)
        chosen = [n for n in named if n.lower() in query.lower()]
        if len(named) >= 2 and len(chosen) != 1:
            _ambiguous(ref, [replace(best, kind="item", target=n, role="assistant", in_list=True)
                             for n in named])
            return
    runner, runner_overlap = ranked[1] if len(ranked) > 1 else (None, 0)
    # Close in salience and no word in the query to tell them apart: ask, do not guess.
    if runner is not None and runner.score >= AMBIGUITY_RATIO * best.score \
            and runner_overlap >= best_overlap:
        _ambiguous(ref, [c for c, _ in ranked if c.score >= AMBIGUITY_RATIO * best.score],
                   best.score / (best.score + runner.score))
        return
    confidence = 0.8 if runner is None else 0.5 + 0.45 * (1.0 - runner.score / best.score)
    if best.distance > 0:
        confidence -= 0.1
    if best_overlap > runner_overlap:  # the query names it: "restart it" after a restart
        confidence = max(confidence, 0.7)
    _set(ref, best.target, best.message_id, best.message_text, confidence,
         f"'{ref.text}' refers to {best.describe()}")


_COORDINATION = lazy_compile(r"\s*(?:[;,]|\b(?:and|or|und|oder|sowie)\b)\s*", _I)


def _side_by_side(answer: str) -> list[str]:
    """The names a one-sentence answer sets side by side: every coordinated part opens on
    a capitalised name ("Obsidian stores ...; Joplin syncs ..."); [] when any part does not."""
    if len(lang.sentences(answer)) != 1:
        return []
    parts = [p for p in _COORDINATION.split(answer.strip()) if p.strip()]
    heads: list[str] = []
    for part in parts:
        words = part.split()
        head = words[0].strip("`*\"'“”„:.!") if words else ""
        if not head[:1].isupper() or head.lower() in STOPWORDS or len(words) > 6:
            return []
        heads.append(head)
    return heads if len(set(heads)) >= 2 else []


_DISJUNCTION = lazy_compile(r"\s*,?\s*\b(?:or|oder)\b\s*", _I)
_EITHER = lazy_compile(r"^\W*(?:either|entweder)\s+", _I)
#: A list header that calls its items alternatives ("Two options:", "Zwei Möglichkeiten:"), not
#: steps or ingredients: the nouns of choosing, in both languages.
_OPTIONS_HEADER = lazy_compile(
    r"\b(?:options?|choices?|alternatives?|ways|ideas|possibilities|möglichkeiten|optionen|"
    r"alternativen|wege|ideen|varianten)\b", _I)
#: The bare words that point at "the thing you proposed" without saying which one.
_BARE = frozenset("it that this das es dies".split())


def _alternatives(msg: Message) -> list[str]:
    """The choice the assistant's answer leaves open: the parts of a one-sentence answer
    joined by "or"/"oder" ("the climbing hall or the farmers' market"), or the items of a
    list its header calls options; [] when it proposes one thing."""
    items = [i.strip() for i in _LIST_ITEM.findall(msg.content)]
    if len(items) >= 2:
        return items if _OPTIONS_HEADER.search(_LIST_ITEM.sub("", msg.content)) else []
    sents = lang.sentences(msg.content)
    if len(sents) != 1:
        return []  # "Oat milk or regular? I'd add oat milk.": the answer recommends one
    parts = [_EITHER.sub("", p).strip(" .!?,;:") for p in _DISJUNCTION.split(sents[0])]
    # every part must name something: "passt das so, oder?" offers no second option
    if len(parts) < 2 or not all(
            any(len(w) > 2 and w not in STOPWORDS for w in lang.words(p)) for p in parts):
        return []
    return parts


def _ask_between_alternatives(refs: list[Reference], history: Sequence[Message], query: str) -> None:
    """"Let's do it" after "the climbing hall or the farmers' market": a bare pronoun or a
    yes to an answer that offers a choice picks none of them - unless a word of the query
    names one ("ok, the market"), it asks, with the alternatives as options."""
    last = _last_assistant(history)
    options = _alternatives(last) if last is not None else []
    if last is None or not options:
        return
    recent = {m.id for m in _turns(history)[0]} | {last.id}
    for ref in refs:
        bare = ref.kind == "confirmation" or (ref.kind == "pronoun" and ref.text.lower() in _BARE)
        if not bare or (ref.target is not None and ref.message_id not in recent):
            continue  # "it" bound to something older than the answer with the choice
        cands = [Candidate("item", _snip(o, 120), last.id, _snip(last.content, 300), "assistant", 0,
                           1.0, _snip(o), True, True) for o in options]
        chosen = _qualified(cands, query, ref)
        if len(chosen) == 1:
            c = chosen[0]
            _set(ref, c.target, c.message_id, c.message_text, 0.8, f"User chooses: {_snip(c.target)}")
        else:
            ref.target, ref.description = None, None
            _ambiguous(ref, cands)


def _confirm_what_is_named(refs: list[Reference]) -> None:
    """"ja, setze deinen Vorschlag um": one reference, not two.

    A confirmation or negation next to a named reference ("your suggestion", "the
    second one", "that command") confirms or rejects what that reference names, so it
    takes over the reference's target - or its ambiguity, and then the resolver asks
    instead of pairing "ja" with the last answer and "deinen Vorschlag" with another.
    """
    named = next(
        (r for r in refs if r.kind in ("reference", "selection", "entity")
         and (r.target is not None or r.ambiguous)),
        None,
    )
    if named is None:
        return
    for ref in refs:
        if ref.kind in ("confirmation", "negation"):
            ref.target = named.target
            ref.message_id = named.message_id
            ref.message_text = named.message_text
            ref.confidence = named.confidence
            ref.ambiguous = named.ambiguous
            ref.candidates = list(named.candidates)
            ref.description = None  # the named reference carries the context note


def _clarification(ref: Reference, language: str) -> tuple[str, list[str]]:
    options: list[str] = []
    for cand in ref.candidates:
        if not cand.offerable:
            continue  # the user knows what they said; offer what the assistant proposed or did
        label = cand.label(language)
        if label not in options:
            options.append(label)
    options = options[:MAX_OPTIONS]
    if language == "de":
        head = f"Ich bin mir nicht sicher, worauf sich '{ref.text}' bezieht."
        ask, other, vague = "Meinten Sie:", "Etwas anderes?", "Können Sie das genauer sagen?"
    else:
        head = f"I'm not sure what '{ref.text}' refers to."
        ask, other, vague = "Did you mean:", "Something else?", "Could you say what you mean?"
    if not options:
        return f"{head} {vague}", []
    lines = [f"{i}. {label}" for i, label in enumerate([*options, other], 1)]
    return f"{head} {ask}\n" + "\n".join(lines), options


def resolve(
    query: str,
    history: Sequence[Message],
    *,
    job_refs: Sequence[str] = (),
    language: str | None = None,
) -> Resolution:
    """Resolve the references in ``query`` against ``history`` (oldest first).

    ``job_refs`` are the active job ids the session state knows (newest first);
    ``language`` is the conversation's language, used when the query itself is
    too short to tell ("ok", "2").
    """
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("query must be a non-empty string")
    lng = lang.detect_language(query, default="de" if language == "de" else "en")
    refs = detect_references(query)
    if not refs:
        return Resolution(query, query, [], 1.0, lng)
    cands = _candidates(history, job_refs)
    for ref in refs:
        if ref.kind in ("confirmation", "negation"):
            _resolve_reply(ref, history, cands, query)
        elif ref.kind == "reference":
            _resolve_named(ref, history, cands, query)
        elif ref.kind == "selection":
            _resolve_selection(ref, history)
        elif ref.kind == "entity":
            _resolve_entity(ref, history, cands, query)
            _predicate_reading(ref, query)
        elif ref.kind in ("place", "time"):
            _resolve_place_or_time(ref, history)
        elif ref.kind == "repeat":
            _resolve_repeat(ref, cands)
        elif ref.kind == "topic":
            _resolve_topic(ref, query, history)
    _confirm_what_is_named(refs)
    named = [r for r in refs if r.kind != "pronoun" and r.target is not None]
    # A named reference ("deinen Vorschlag") outranks a reply cue ("ja") as the anchor.
    named.sort(key=lambda r: r.kind in ("confirmation", "negation"))
    for ref in refs:
        if ref.kind == "pronoun":
            _resolve_pronoun(ref, query, history, cands, named)
    _ask_between_alternatives(refs, history, query)
    parts: list[str] = []
    seen: set[int | str | None] = set()
    # One context note per earlier message; what the user named beats a bare "ja"/"nein".
    for ref in sorted(refs, key=lambda r: (r.kind in ("confirmation", "negation"), r.start)):
        if ref.target is None or not ref.description:
            continue
        key = ref.message_id if ref.message_id is not None else ref.target
        if key not in seen:
            seen.add(key)
            parts.append(ref.description)
    resolved = f"{query} [Context: {'; '.join(parts)}]" if parts else query
    clarification: str | None = None
    options: list[str] = []
    # Ask about what the user named ("deinen Vorschlag"), not about the "ja" that adopted it.
    unclear = next(
        (r for r in sorted(refs, key=lambda r: r.kind in ("confirmation", "negation"))
         if r.ambiguous),
        None,
    )
    # With nothing to offer, only a request or a question needs asking back ("delete it");
    # "that is all for today" does not.
    if unclear is None and not parts and (
        any(c.offerable for c in cands) or lang.infer_intent(query) in ("command", "question")
    ):
        unclear = next((r for r in refs if r.kind == "pronoun" and r.target is None), None)
    if unclear is not None:
        clarification, options = _clarification(unclear, lng)
    confidence = min(r.confidence for r in refs)
    return Resolution(query, resolved, refs, round(confidence, 4), lng, clarification, options)


def resolve_in_session(
    log: MessageLog, state_of: Callable[[str], SessionState], query: str, session_id: str
) -> Resolution:
    """``Memory.resolve_references``: resolve ``query`` against the session's recent history
    and its state (``state_of(session_id)``, asked only when the session exists)."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("query must be a non-empty string")
    if not isinstance(session_id, str) or not session_id:
        raise InvalidInputError("session_id must be a non-empty string")
    if log.get_session(session_id) is None:
        return resolve(query, [])  # a session about to be auto-created has no history yet
    history = list(reversed(log.recent_messages(session_id, HISTORY)))
    state = state_of(session_id)
    return resolve(query, history, job_refs=state.active_job_refs, language=state.language)
