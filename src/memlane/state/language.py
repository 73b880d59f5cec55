"""English and German cues for the state tracker and the reference resolver.

The cues are word lists and regular expressions over the language layer
(``memlane.language``: one tokenizer, py3langid language id, pysbd sentences),
deterministic, offline and cheap enough to run on every message. The lists cover the way
people talk to an assistant (seed 004 is a German/English shell helper), not
grammar in general; a miss costs a less precise state, never a wrong write.
"""

from __future__ import annotations

import re

from memlane.language import Language, detect_language, sentences, surface_words, words

__all__ = ["Language", "detect_language", "sentences", "words"]  # re-exported: one language layer


def _rx(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE | re.UNICODE)


# ----------------------------------------------------------------- questions

QUESTION_WORDS = frozenset(
    "what what's whats how how's why when where where's who who's whom whose which "
    "was wie warum wieso weshalb wann wo woher wohin wer wen wem wessen welche welcher welches "
    "welchen welchem".split()
)
# Verbs that open a yes/no question when they come first ("Can you ...", "Kannst du ...").
QUESTION_OPENERS = frozenset(
    "can could would will should shall do does did is are was were am have has had may might "
    "kann kannst könnte könntest können würde würdest wäre ist sind hast hat habt gibt soll "
    "sollte darf muss bist".split()
)

# ----------------------------------------------------------------- assistant acts

#: The assistant commits to doing something later ("I'll check", "ich werde ...").
PROMISE_RE = _rx(
    r"\bI\s*(?:'|’)ll\s+(?!be\s+(?:happy|glad)\b)\w+",
    r"\bI\s+will\s+(?!be\s+(?:happy|glad)\b)\w+",
    r"\bI\s+am\s+going\s+to\s+\w+",
    r"\bI\s*(?:'|’)m\s+going\s+to\s+\w+",
    r"\blet\s+me\s+(?:check|look|find|get\s+back|see|investigate|verify|remind)\b",
    r"\bwill\s+remind\s+you\b",
    r"\bich\s+werde\s+\w+",
    r"\bich\s+(?:kümmere|melde|erinnere)\s+(?:mich|dich|sie)\b",
    r"\bich\s+schaue?\s+(?:mal\s+)?nach\b",
    r"\bich\s+(?:sehe|seh|gucke|guck|frage)\s+(?:das\s+|mal\s+)*nach\b",
    r"\bwerde\s+ich\s+\w+",
    r"\b(?:get|come)\s+back\s+to\s+you\b",
)

# German says what it will do in the present tense ("Ich schicke dir morgen die Datei",
# "Das prüfe ich gleich"), English in the progressive ("I'm sending it in an hour"): such a
# sentence commits the speaker when a first-person action verb meets a time ahead.
#: A time ahead of now: tomorrow, in a moment, later, next week, by Friday, once it's done.
FUTURE_TIME_RE = _rx(
    r"(?<!jeden\s)(?<!heute\s)\bmorgen\b", r"\bübermorgen\b",
    r"\b(?:gleich|sofort|nachher|später|bald|demnächst|umgehend)\b",
    r"\bheute\s+(?:abend|nachmittag|noch)\b",
    r"\b(?:nächste|nächsten|kommende|kommenden)\s+\w+",
    r"\bbis\s+(?:morgen|heute|spätestens|ende|zum|zur|montag|dienstag|mittwoch|donnerstag|freitag|samstag|sonntag|\d)",
    r"\bin\s+(?:einer|einem|ein\s+paar|wenigen|zwei|drei|\d+)\s+\w+",
    r"\b(?:sobald|nach\s+der|nach\s+dem)\b",
    r"\b(?:tomorrow|tonight|later|soon|shortly)\b",
    r"\b(?:right|straight)\s+away\b",
    r"\b(?:next|this)\s+(?:week|month|morning|afternoon|evening)\b",
    r"\bby\s+(?:tomorrow|tonight|the\s+end|monday|tuesday|wednesday|thursday|friday|saturday|sunday|\d)",
    r"\bin\s+(?:an?|one|two|three|a\s+few|\d+)\s+\w+",
    r"\b(?:as\s+soon\s+as|once|after\s+(?:the|lunch))\b",
)
#: First-person verbs that state, judge or could, not do: "Ich habe morgen keine Zeit",
#: "Ich glaube, ...", "Ich kann morgen nicht" commit to nothing.
_NOT_ACTION_DE = frozenset(
    "habe hab hatte bin war wäre kann könnte muss müsste soll sollte darf will möchte würde mag "
    "weiß glaube denke finde hoffe verstehe empfehle meine fürchte vermute brauche liebe wünsche "
    "freue bedanke entschuldige nicht auch schon noch".split()
)
#: "ich" opening a clause and the word after it ("Ich schicke ..."), or a word before
#: "ich" ("Das prüfe ich", "Mache ich sofort"): where German puts the finite verb.
_FIRST_PERSON_DE = re.compile(r"^\s*ich\s+([^\W\d_]+)|([^\W\d_]+)\s+ich\b", re.IGNORECASE | re.UNICODE)
_PROGRESSIVE_EN = re.compile(r"\bI\s*(?:'|’)?\s*(?:m|am)\s+(?!going\b)([a-z]+ing)\b", re.IGNORECASE)
#: Someone else acts for the speaker: "Bis heute Abend bekommst du von mir die Liste".
_FROM_ME = re.compile(r"\b(?:von\s+mir|from\s+me)\b", re.IGNORECASE)
#: Where a clause ends: the time must be in the clause of the verb ("Ich wusste nicht,
#: dass das Update morgen kommt" says nothing about what the speaker will do).
_CLAUSE_BREAK = re.compile(r"[,;:–—]|\s(?=(?:dass|daß|ob|weil|wenn|falls|if|because)\b)", re.IGNORECASE)
#: A clause that only says when the one before it happens ("..., sobald das Update durch ist").
_WHEN_CLAUSE = re.compile(r"^\s*(?:sobald|bis|once|as\s+soon\s+as|until)\b", re.IGNORECASE)


def _acts(clause: str) -> bool:
    """A first-person action verb in this clause ("Ich schicke", "prüfe ich", "I'm sending")."""
    if _PROGRESSIVE_EN.search(clause) or _FROM_ME.search(clause):
        return True
    for m in _FIRST_PERSON_DE.finditer(clause):
        verb = (m.group(1) or m.group(2)).lower()
        if verb not in _NOT_ACTION_DE and verb not in _NOT_VERB_BEFORE_ICH:
            return True
    return False


def _commits_ahead(sentence: str) -> bool:
    """A present-tense commitment: a first-person action verb and a time ahead, in one clause."""
    clauses = [c for c in _CLAUSE_BREAK.split(sentence) if c.strip()]
    for i, clause in enumerate(clauses):
        if not _acts(clause):
            continue
        if FUTURE_TIME_RE.search(clause):
            return True
        if i + 1 < len(clauses) and _WHEN_CLAUSE.search(clauses[i + 1]):
            return True
    return False


#: Words before "ich" that are not its verb ("wenn ich", "und ich") or that make it no
#: commitment ("soll ich", "kann ich").
_NOT_VERB_BEFORE_ICH = frozenset(
    "wenn dass daß ob weil und oder aber als da wie was wo sobald bevor nachdem damit denn soll "
    "kann darf muss will möchte werde würde sollte könnte habe bin hab".split()
)


def is_promise(sentence: str) -> bool:
    """The speaker commits to doing something later ("I'll check", "ich werde ...",
    "Ich schicke dir morgen ...", "Mache ich sofort"); a question never does."""
    if is_question(sentence):
        return False
    return bool(PROMISE_RE.search(sentence)) or _commits_ahead(sentence)


#: The assistant reports that something is finished.
COMPLETION_RE = _rx(
    r"\b(?:done|finished|completed|complete|succeeded|ready)\b",
    r"\bI\s*(?:'|’)ve\s+\w+",
    r"\bI\s+have\s+(?:now\s+)?\w+ed\b",
    r"\bhere\s+(?:is|are|'s)\b",
    r"\breminder\b",
    r"\b(?:erledigt|fertig|abgeschlossen|erfolgreich|umgesetzt|ausgeführt|angelegt|erstellt)\b",
    r"\bhabe\s+ich\s+\w+",
    r"\bich\s+habe\b",
    r"\bhier\s+(?:ist|sind)\b",
    r"\berinnerung\b",
)

#: The user withdraws a request ("never mind", "vergiss es").
CANCEL_RE = _rx(
    r"\bnever\s*mind\b", r"\bforget\s+(?:it|that|about\s+it)\b", r"\bno\s+longer\s+needed\b",
    r"\bcancel\s+(?:it|that)\b", r"\bvergiss\s+(?:es|das)\b", r"\bnicht\s+mehr\s+nötig\b",
    r"\bschon\s+gut\b", r"\bhat\s+sich\s+erledigt\b",
)

ERROR_RE = _rx(
    r"^\W*(?:error|fehler)\b",
    r"\b(?:an?\s+)?error\s+occurred\b",
    r"\bI\s+(?:can(?:'|’)?t|cannot|couldn(?:'|’)?t|was\s+unable\s+to|am\s+unable\s+to)\b",
    r"\bsomething\s+went\s+wrong\b",
    r"\b(?:es\s+ist\s+ein\s+fehler|ein\s+fehler\s+ist)\b",
    r"\b(?:ich\s+konnte|konnte\s+ich)\s+(?:\S+\s+){0,3}nicht\b",
    r"\bich\s+kann\s+(?:\S+\s+){0,3}nicht\b",
    r"\betwas\s+ist\s+schiefgelaufen\b",
)

#: The assistant says it does not know: the user's question stays open.
UNSURE_RE = _rx(
    r"\bI\s+(?:don(?:'|’)?t|do\s+not)\s+know\b", r"\bI(?:'|’)m\s+not\s+sure\b",
    r"\bnot\s+sure\b", r"\bweiß\s+(?:ich\s+)?nicht\b", r"\bnicht\s+sicher\b",
)

SUGGESTION_RE = _rx(
    r"\bI\s+(?:would\s+)?(?:suggest|recommend|propose|advise)\b",
    r"\bI(?:'|’)d\s+(?:suggest|recommend|propose)\b",
    r"\bmy\s+(?:suggestion|recommendation|advice)\b",
    r"\byou\s+(?:could|should|might|may)\b",
    r"\byou\s+can\s+(?!not\b|n't\b)\w+",
    r"\b(?:how|what)\s+about\b",
    r"\bwhy\s+not\b",
    r"\bshall\s+I\b",
    r"\bshould\s+I\b",
    r"\bwould\s+you\s+like\s+(?:me\s+)?to\b",
    r"\bdo\s+you\s+want\s+me\s+to\b",
    r"^\W*(?:try|consider|use|run|install|check|execute|restart)\b",
    r"\bich\s+(?:würde|empfehle|schlage)\b",
    r"\bmein\s+vorschlag\b",
    r"\b(?:du|sie)\s+(?:könntest|könnten|solltest|sollten|kannst)\b",
    r"\bsoll\s+ich\b",
    r"\bmöchtest\s+du\b",
    r"\bwie\s+wäre\s+es\b",
    r"^\W*(?:versuche?|probiere?|nutze|verwende|führe|starte|installiere|prüfe)\b",
)

#: Questions that only close a conversation politely; no answer is awaited.
PLEASANTRY_QUESTION_RE = _rx(
    r"\banything\s+else\b", r"\bcan\s+I\s+help\b", r"\bhelp\s+(?:you\s+)?with\s+anything\b",
    r"\bsonst\s+noch\b", r"\bnoch\s+etwas\b", r"\bkann\s+ich\s+(?:dir|ihnen)\s+(?:noch\s+)?helfen\b",
    r"\bhow\s+are\s+you\b", r"\bwie\s+geht\s+es\s+(?:dir|ihnen)\b",
)

CONFIRMATION_WORDS = frozenset(
    "ok okay yes yeah yep yup sure alright continue proceed correct exactly right agreed "
    "ja jawohl genau weiter einverstanden passt gerne richtig stimmt klar okay los".split()
)


def is_question(sentence: str) -> bool:
    """True for a sentence that asks something (a '?' or an opening question word)."""
    text = sentence.strip()
    if not text:
        return False
    if text.rstrip().endswith("?"):
        return True
    tokens = words(text)
    if not tokens:
        return False
    # Without a '?' only a clear opener counts: "what time is it" but not "when I was young".
    return tokens[0] in QUESTION_WORDS and len(tokens) > 2 and tokens[1] in QUESTION_OPENERS


# ----------------------------------------------------------------- answers

#: Words that acknowledge without saying anything: "Okay.", "Hmm.", "Gern." answer nothing.
ACK_WORDS = frozenset(
    "ok okay okey sure alright hmm hm mhm well right so oh ah thanks thank you good question "
    "interesting moment one second sec klar gern gerne also na tja gut gute frage danke "
    "interessant sekunde augenblick moment".split()
)

#: The reply turns to something else: what was asked stays open.
SUBJECT_CHANGE_RE = _rx(
    r"^\W*(?:by\s+the\s+way|btw|anyway|on\s+another\s+note|unrelated(?:ly)?|speaking\s+of|"
    r"before\s+(?:that|we\s+(?:go\s+on|continue))|first,?\s+(?:though|however))\b",
    r"^\W*(?:übrigens|apropos|nebenbei(?:\s+bemerkt)?|anderes\s+thema|"
    r"bevor\s+(?:ich|wir)\s+(?:das|darauf))\b",
)

def answers(sentence: str) -> bool:
    """Whether an assistant sentence can answer a question.

    Short answers count ("About 10 minutes.", "Yes.", "Etwa 10 Minuten."); a
    question back, "I don't know", a deferral ("I'll check", "ich schaue nach",
    tracked as a promise instead) and bare acknowledgements ("Okay.", "Hmm.") do not.
    """
    if is_question(sentence) or UNSURE_RE.search(sentence) or is_promise(sentence):
        return False
    tokens = words(sentence)
    return any(t not in ACK_WORDS for t in tokens)


# ----------------------------------------------------------------- suggestions

# Finite verbs and subjects: a sentence with one of them states something; German
# instructions in the infinitive ("Das System neu starten.") have neither.
_FINITE_DE = frozenset(
    "ich du er sie es wir ihr man ist sind war waren bin bist hat habe haben hast hatte wird "
    "werden wurde kann kannst können muss müssen musst soll sollte sollten will wollen würde "
    "würden gibt geht liegt dauert".split()
)


def is_instruction_de(sentence: str) -> bool:
    """A German instruction in the infinitive, the way manuals and helpers write steps:
    "Das System neu starten.", "Die Logs prüfen." (no subject, no finite verb, ends in a
    lower-case infinitive; nouns are capitalised, so "Etwa 10 Minuten." is no instruction)."""
    text = sentence.strip()
    if not text or text.endswith(("?", ":")):  # a question, or the heading of a list
        return False
    raw = surface_words(text)
    if not 2 <= len(raw) <= 8:
        return False
    last = raw[-1]
    if not (last.islower() and len(last) >= 5 and last.endswith(("en", "ern", "eln"))):
        return False
    if any(t.lower() in _FINITE_DE for t in raw):
        return False
    return detect_language(text, default="de") == "de"


def is_suggestion(sentence: str) -> bool:
    """Whether a sentence suggests or offers something (English or German)."""
    return bool(SUGGESTION_RE.search(sentence)) or is_instruction_de(sentence)


# ----------------------------------------------------------------- intents

#: The coarse intents :func:`infer_intent` knows, in the order it tests them.
INTENTS: tuple[str, ...] = (
    "memory_command", "negation", "confirmation", "smalltalk", "question", "command", "statement"
)

_MEMORY_COMMAND_RE = _rx(
    r"\b(?:remember|memorize|note)\s+(?:that|this|it|me)\b",
    r"\bdon(?:'|’)?t\s+forget\b",
    r"\bforget\s+(?:what|that|everything|about|my)\b",
    r"\bremind\s+me\b",
    r"\bwhat\s+do\s+you\s+(?:remember|know\s+about\s+me)\b",
    r"\bmerk\s*(?:e|t)?\s+(?:dir|ihnen)\b",
    r"\bvergiss\s+(?:nicht|was|alles|dass|meine?n?)\b",
    r"\berinnere\s+mich\b",
    r"\bwas\s+weißt\s+du\s+(?:noch\s+)?über\s+mich\b",
)
_NEGATION_INTENT_RE = _rx(
    r"^\W*(?:no|nope|nah|nein|nee|ne)(?:\W|$)(?!\W*(?:problem|worries|thanks|danke|sorgen)\b)",
    r"\bthat(?:'|’)?s\s+(?:wrong|not\s+(?:right|correct|what\s+I\s+meant))\b",
    r"\b(?:das\s+(?:ist|war)\s+falsch|stimmt\s+nicht|das\s+meinte\s+ich\s+nicht)\b",
    r"^\W*(?:don(?:'|’)?t|lieber\s+nicht|bitte\s+nicht|auf\s+keinen\s+fall)\b",
)
_CONFIRMATION_INTENT_RE = _rx(
    r"^\W*(?:yes|yeah|yep|yup|sure|ok(?:ay)?|alright|correct|exactly|agreed|go\s+ahead|"
    r"please\s+do|do\s+it|sounds\s+good|continue|proceed|"
    r"ja(?:wohl)?|genau|einverstanden|passt|gerne?|richtig|stimmt|klar|los|leg\s+los|"
    r"mach\s+weiter|weiter)(?:\W|$)",
)
_SMALLTALK_RE = _rx(
    r"^\W*(?:hi|hello|hey|good\s+(?:morning|evening|afternoon|night)|thanks|thank\s+you|"
    r"cheers|bye|goodbye|see\s+you|hallo|moin|servus|guten\s+(?:morgen|tag|abend)|"
    r"gute\s+nacht|danke|vielen\s+dank|tschüss|tschüs|ciao|bis\s+(?:bald|später|morgen))\b",
    r"\bhow\s+are\s+you\b|\bwie\s+geht(?:'s|\s+es\s+(?:dir|ihnen))\b",
    r"^\W*(?:no\s+(?:problem|worries)|kein\s+problem)\b",
    r"\b(?:thanks|thank\s+you|danke(?:\s+schön)?)\W*$",
)
# "Can you ...", "Kannst du ...": a request phrased as a question.
_REQUEST_RE = _rx(
    r"^\W*(?:please\s+)?(?:can|could|would|will)\s+you\b",
    r"^\W*(?:kannst|könntest|würdest)\s+du\b", r"^\W*(?:können|könnten|würden)\s+sie\b",
)
_COMMAND_START = frozenset(
    "please run start stop restart install uninstall remove delete create add set show list "
    "check open close find search send make build deploy update upgrade tell give explain write "
    "fix move copy rename enable disable kill schedule cancel export import try use "
    "bitte starte starten stoppe halte lösche entferne erstelle lege setze setz zeige zeig "
    "liste prüfe prüf öffne schließe finde suche sende schick schicke baue aktualisiere "
    "installiere erkläre schreibe schreib repariere verschiebe kopiere benenne aktiviere "
    "deaktiviere plane exportiere importiere mach mache führe richte gib sag nutze verwende "
    "versuche probiere".split()
)


def infer_intent(text: str) -> str:
    """A coarse intent for a user message when the caller supplied none.

    Deterministic cue words, English and German, tested in the order of
    :data:`INTENTS`: ``memory_command`` (remember/forget/remind me, merk dir,
    vergiss nicht), ``negation`` (no, nein, that's wrong, never mind), ``confirmation`` (yes, ok,
    ja, mach weiter), ``smalltalk`` (greetings, thanks, goodbyes), ``question``,
    ``command`` (an imperative or a "can you ..." request) and ``statement`` for
    everything else. Coarse on purpose: it tells a runtime what kind of turn it
    was, not what the user wants done.
    """
    text = text.strip()
    if not text:
        return "statement"
    if _MEMORY_COMMAND_RE.search(text):
        return "memory_command"
    if _NEGATION_INTENT_RE.search(text) or CANCEL_RE.search(text):
        return "negation"
    tokens = words(text)
    if _CONFIRMATION_INTENT_RE.search(text) and len(tokens) <= 8:
        return "confirmation"
    if _SMALLTALK_RE.search(text) and len(tokens) <= 8:
        return "smalltalk"
    if _REQUEST_RE.search(text):
        return "command"
    if any(is_question(s) for s in sentences(text)):
        return "question"
    if tokens and tokens[0] in _COMMAND_START:
        return "command"
    return "statement"


# --------------------------------------------------------------------- job references

JOB_RE = re.compile(
    r"\b(job|task|ticket|issue|auftrag|aufgabe)[-_ ]?#?(\d+)\b|(?<![\w&/])#(\d+)\b"
    r"|\b(job[-_][A-Za-z0-9][\w-]*)",
    re.IGNORECASE,
)

def extract_job_refs(text: str) -> list[str]:
    """Job ids mentioned in ``text``, in order: ``job-123``, ``task-7`` (from "task 7"),
    ``#42`` (also from "Auftrag #42", so both spellings meet), ``job_ab12``."""
    out: list[str] = []
    for m in JOB_RE.finditer(text):
        if m.group(1) and "#" in m.group(0):
            ref = f"#{m.group(2)}"
        elif m.group(1):
            ref = f"{m.group(1).lower()}-{m.group(2)}"
        elif m.group(3):
            ref = f"#{m.group(3)}"
        else:
            ref = m.group(4)
        if ref not in out:
            out.append(ref)
    return out
