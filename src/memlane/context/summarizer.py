"""Summaries of conversations: extractive and offline by default, an LLM when configured.

:class:`ExtractiveSummarizer` needs no model and no network. It splits every
message into sentences, drops greetings, fillers, emoji and questions, rewrites
the rest into the third person with the speaker's name ("I went to a support
group" from Caroline becomes "Caroline went to a support group"), scores each
sentence by centrality in the sentence-similarity graph (TextRank), coverage of
the conversation's keyphrases and how much it tells about the speaker, then
picks sentences with maximal marginal relevance (no near-duplicates, both
speakers heard) and prints them in the order they were said. Same input, same
output; a 30-turn session takes a few milliseconds.

:class:`RollingSummary` keeps a summary under a token budget while a
conversation grows: each new block of messages contributes its own best
sentences, and when the budget is full the oldest, least salient sentences go
first, while an early fact on a topic the conversation keeps returning to stays.

:class:`LLMSummarizer` asks any OpenAI-compatible chat-completions endpoint and
falls back to the extractive summary (with a warning) when the endpoint fails.

Token budgets are exact per :mod:`memlane.tokens`: a summary given
``max_tokens`` never counts more than that.
    """

from __future__ import annotations

import logging
import math
import os
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memlane.context.keyphrases import (
    GENERIC_WORDS,
    STOPWORDS,
    normalize_term,
    score_keyphrases,
    texts_language,
    tokenize_words,
)
from memlane.errors import InvalidInputError
from memlane.language import Language, detect_language
from memlane.models import Message
from memlane.patterns import lazy_compile

if TYPE_CHECKING:
    import httpx
    import numpy as np

    from memlane.tokens import TokenCounter

__all__ = [
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "RankWeights",
    "RollingSummary",
    "Summarizer",
    "SummarySentence",
    "clean_text",
    "fit_to_budget",
    "split_sentences",
]

log = logging.getLogger(__name__)


@runtime_checkable
class Summarizer(Protocol):
    """Anything that turns messages into a summary string."""

    def summarize(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        previous_summary: str | None = None,
    ) -> str: ...


def _default_counter() -> TokenCounter:
    # Imported late: the summarizer is usable (without budgets) on its own.
    from memlane.tokens import get_counter

    return get_counter(None)


def _check_budget(max_tokens: int | None) -> None:
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 0):
        raise InvalidInputError(
            f"max_tokens must be a non-negative integer or None, got {max_tokens!r}"
        )


# ------------------------------------------------------------------ cleaning

_URL_RE = lazy_compile(r"https?://\S+|www\.\S+")
_EMOTICON_RE = lazy_compile(r"(?<!\w)(?:[:;=8][-'^]?[)(\]\[dDpPoO/\\|*]+|<3+|\^_?\^|xD+|XD+)(?!\w)")
_SPACE_RE = lazy_compile(r"\s+")
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
    return _SPACE_RE.sub(" ", text).strip()


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
class _People:
    """Who is speaking and who is spoken to, for the third-person rewrite."""

    names: frozenset[str]  # full names and the short forms seen in the text

    def is_name(self, word: str) -> bool:
        w = word.strip(".,!?;:").lower()
        return w in self.names or w in _GENERIC_VOCATIVES


def _strip_vocatives(sentence: str, people: _People) -> str:
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


# ----------------------------------------------------------- third person

_ADVERBS = (
    r"really|just|also|always|still|never|actually|totally|definitely|usually|often|"
    r"sometimes|absolutely|truly|even|only|already|kinda|honestly|personally|now|"
    r"finally|recently|currently|especially|sure|do|so|too"
)
_IRREGULAR = {"have": "has", "do": "does", "go": "goes", "be": "is", "am": "is", "are": "is"}
# Present-tense verbs that follow "I" in chat often enough to be worth
# conjugating; anything else (past forms, modals, unknown words) is left alone.
_VERBS = frozenset(
    """
    love like think feel want need know hope have do go enjoy find believe guess mean agree
    wish try plan miss remember see get work play keep make take appreciate understand admire
    adore prefer hate use run teach learn live stay spend read write watch cook bake paint draw
    sing dance swim volunteer care support imagine bet plan look recommend visit travel feel
    bring call collect dream practice study listen hang help tend carry own value realize
    struggle worry relax train believe cherish mentor hike walk skate surf create build love
    bring start stop continue forget say tell ask give put leave pick send buy sell move grow
    wonder suppose hear meet lose win fix check share paint manage handle finish join follow
    """.split()
)


def _third_person(verb: str) -> str:
    lower = verb.lower()
    if lower in _IRREGULAR:
        return _IRREGULAR[lower]
    if re.search(r"(?:s|sh|ch|x|z|o)$", lower):
        return verb + "es"
    if re.search(r"[^aeiou]y$", lower):
        return verb[:-1] + "ies"
    return verb + "s"


# One alternation per person, tried left to right at each position, so the
# longer forms ("I'm", "you're") win over the bare pronoun. Each group names the
# replacement; "{n}" is the person's name, "{p}" the possessive, "conj" means
# "name, the adverbs, then the verb in the third person".
_ADV = rf"(?:\s+(?:{_ADVERBS}))*"
_SPEAKER_FORMS: tuple[tuple[str, str], ...] = (
    (r"\bI'm\b|\bIm\b|\bI am\b", "{n} is"),
    (r"\bI've\b|\bI have\b", "{n} has"),
    (r"\bI'd\b", "{n} would"),
    (r"\bI'll\b", "{n} will"),
    (r"\bI don't\b|\bI do not\b", "{n} doesn't"),
    (rf"\bI{_ADV}\s+[a-zA-Z]+\b", "conj"),
    (r"\bI\b", "{n}"),
    (r"(?i:\bmyself\b)", "themself"),
    (r"(?i:\bmy\b|\bmine\b)", "{p}"),
    (r"(?i:\bme\b)", "{o}"),
)
_GROUP_FORMS: tuple[tuple[str, str], ...] = (
    (r"(?i:\bwe're\b|\bwe are\b)", "they are"),
    (r"(?i:\bwe've\b)", "they have"),
    (r"(?i:\bwe'll\b)", "they will"),
    (r"(?i:\bwe'd\b)", "they would"),
    (r"(?i:\bwe\b)", "they"),
    (r"(?i:\bourselves\b)", "themselves"),
    (r"(?i:\bours\b)", "theirs"),
    (r"(?i:\bour\b)", "their"),
    (r"(?i:\bus\b)", "them"),
)
_ADDRESSEE_FORMS: tuple[tuple[str, str], ...] = (
    (r"(?i:\byou guys\b|\by'all\b)", "they"),
    (r"(?i:\byou're\b|\byou are\b)", "{n} is"),
    (r"(?i:\byou were\b)", "{n} was"),
    (r"(?i:\byou've\b|\byou have\b)", "{n} has"),
    (r"(?i:\byou'll\b)", "{n} will"),
    (r"(?i:\byou'd\b)", "{n} would"),
    (r"(?i:\byou don't\b)", "{n} doesn't"),
    (r"(?i:\byourself\b)", "themself"),
    (r"(?i:\byours\b|\byour\b)", "{p}"),
    (rf"(?i:\byou{_ADV}\s+[a-zA-Z]+\b)", "conj"),
    (r"(?i:\byou\b)", "{n}"),
)


def _compile(groups: Sequence[tuple[str, tuple[tuple[str, str], ...]]]) -> tuple[
    re.Pattern[str], dict[str, tuple[str, str]]
]:
    parts: list[str] = []
    table: dict[str, tuple[str, str]] = {}
    for who, forms in groups:
        for i, (pattern, template) in enumerate(forms):
            name = f"{who}{i}"
            parts.append(f"(?P<{name}>{pattern})")
            table[name] = (who, template)
    return re.compile("|".join(parts)), table


_PRONOUN_RE, _PRONOUN_TABLE = _compile(
    (("s", _SPEAKER_FORMS), ("g", _GROUP_FORMS), ("a", _ADDRESSEE_FORMS))
)
_PRONOUN_RE_NO_ADDRESSEE, _ = _compile((("s", _SPEAKER_FORMS), ("g", _GROUP_FORMS)))
_PRONOUN_START_RE = lazy_compile(r"(?i)\b(?=i\b|i'|im\b|m[ey]\b|mine\b|myself\b|we\b|we'|our|us\b|y(?:ou|'all))")
_CONJ_RE = lazy_compile(rf"^(\w+)((?i:{_ADV}))\s+([a-zA-Z]+)$")


def _conjugated(text: str, name: str) -> str:
    m = _CONJ_RE.match(text)
    if m is None:  # pragma: no cover - the outer pattern guarantees the shape
        return text
    adverbs = m.group(2).split()
    verb = m.group(3)
    if adverbs and adverbs[0].lower() == "do":
        # "I do love it" -> "Caroline does love it": the auxiliary takes the -s.
        adverbs[0] = "does"
    elif verb.lower() in _VERBS:
        verb = _third_person(verb)
    middle = (" " + " ".join(adverbs)) if adverbs else ""
    return f"{name}{middle} {verb}"


def _rewrite(sentence: str, speaker: str, addressee: str | None) -> str:
    """``sentence`` said by ``speaker`` to ``addressee``, told in the third person.

    Deliberately simple and gender-neutral: "I" becomes the speaker's name,
    "my" becomes "<Name>'s", "you" the addressee's name, "we" becomes "they".
    """

    pattern = _PRONOUN_RE if addressee else _PRONOUN_RE_NO_ADDRESSEE
    out: list[str] = []
    done = 0
    last = ""  # the person named most recently
    # Scanning only where a pronoun starts is much faster than letting the big
    # alternation try every character position.
    for hit in _PRONOUN_START_RE.finditer(sentence):
        if hit.start() < done:
            continue
        m = pattern.match(sentence, hit.start())
        if m is None:
            continue
        who, template = _PRONOUN_TABLE[m.lastgroup or ""]
        name = speaker if who == "s" else (addressee or "")
        # The name once, then "their"/"them": "Caroline loves their dog", not
        # "Caroline loves Caroline's dog". Subjects keep the name so verbs agree.
        again = last == name
        if who != "g":
            last = name
        if template == "conj":
            text = _conjugated(m.group(0), name)
        else:
            text = template.format(
                n=name, p="their" if again else f"{name}'s", o="them" if again else name
            )
        if m.start() > 0 and name.startswith("The "):
            # A role, not a name: "Remind the user to...", not "Remind The user to...".
            text = text.replace(name, "the" + name[3:], 1)
        out.append(sentence[done : m.start()])
        out.append(text)
        done = m.end()
    out.append(sentence[done:])
    s = "".join(out).strip()
    return s[:1].upper() + s[1:] if s else s


# ---------------------------------------------------------------- sentences


@dataclass(slots=True)
class SummarySentence:
    """One candidate sentence: the rewritten text plus what ranking needs."""

    text: str
    speaker: str
    order: int  # position in the input; output follows it
    terms: dict[str, float] = field(default_factory=dict)  # term -> tf-idf weight
    score: float = 0.0
    words: int = 0
    candidate: bool = True  # False: kept for the graph only (questions, small talk)
    source: str = ""  # the sentence as said, before the rewrite
    weight: float = 1.0  # prior from the sentence's form (see _disclosure)


def _speaker_of(msg: Message) -> str:
    if msg.author_name:
        return msg.author_name.strip()
    if msg.name:
        return msg.name.strip()
    return {"user": "The user", "assistant": "The assistant", "system": "The system"}.get(
        msg.role, msg.role.title()
    )


_LOWER_WORD_RE = lazy_compile(r"\b[a-z][a-z'-]*\b")
_CAPITALISED_RE = lazy_compile(r"\b[A-Z][a-z]{2,}\b")


def _name_forms(speakers: Sequence[str], texts: Sequence[str]) -> frozenset[str]:
    """Speaker names plus the short forms used for them ("Mel" for Melanie)."""
    full = {s.lower() for s in speakers}
    firsts = {s.split()[0].lower() for s in speakers if s.split()}
    forms = set(full) | firsts
    for text in texts:
        for word in _CAPITALISED_RE.findall(text):
            lw = word.lower()
            if lw not in forms and any(f.startswith(lw) for f in firsts):
                forms.add(lw)
    return frozenset(forms)


_FIRST_PERSON_RE = lazy_compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|we|our|us|we're|we've)\b")
_SECOND_PERSON_RE = lazy_compile(r"(?i)\b(?:you|your|you're|you've|yours)\b")
_CONTENT_MIN = 2


def _content_terms(text: str, names: frozenset[str], language: Language) -> list[str]:
    out: list[str] = []
    for word in tokenize_words(text):
        lw = word.lower()
        if lw in STOPWORDS or lw in GENERIC_WORDS or lw in names or len(lw) < 3:
            continue
        out.append(normalize_term(lw, language))
    return out


@dataclass(slots=True)
class _Prepared:
    sentences: list[SummarySentence]
    speakers: list[str]
    names: frozenset[str]
    input_words: int
    english: bool = True
    language: Language = "en"




# Intensifiers and hedges: they carry the speaker's tone, not the content, and a
# summary reads better (and shorter) without them.
_INTENSIFIER_RE = lazy_compile(
    r"(?i)\b(?:really|super|totally|actually|literally|definitely|absolutely|honestly|"
    r"kinda|just|truly|seriously|basically)\s+"
    r"|\bso\s+(?=(?:much|many|happy|glad|proud|excited|great|cool|awesome|amazing|good|"
    r"grateful|thankful|fun|sweet|kind|nice|beautiful|important|hard|tough|inspiring|"
    r"powerful|special|lucky|busy|relaxing|rewarding|stressful|tired|sorry|true|"
    r"fulfilling|meaningful|peaceful|exciting)\b)"
)
_SUBJECT_RE = lazy_compile(r"^(?:[A-Z][\w'-]*|They|It|There|This|That|These|Those|He|She)\b")


ATTRIBUTION = " said "
_EXCLAIM_RE = lazy_compile(r"\s*[!?.]*![!?.]*$")
_PAST_STARTS = frozenset(
    """
    went got had made took saw did found met bought came left ran tried started finished
    spent felt thought heard told gave won lost read wrote built kept joined visited signed
    """.split()
)
_NO_SUBJECT_RE = lazy_compile(r"^([A-Z][a-z]+)\b(?!')")


def _add_subject(text: str, common: frozenset[str]) -> str:
    """Give a subjectless chat sentence its "I" back: "Dyed my hair" -> "I dyed my hair".

    ``common`` holds the words seen in lower case in the conversation, so a
    name that happens to end in -ing or -ed ("Rowling") is left alone.
    """
    m = _NO_SUBJECT_RE.match(text)
    if m is None:
        return text
    word = m.group(1).lower()
    # "Created a reminder", "Deleted 412 files": a name is rarely followed by an article
    # or a number, a verb reporting what was done often is.
    reported = word.endswith("ed") and len(word) > 4 and bool(_OBJECT_START_RE.match(text[m.end():]))
    if word not in common and word not in _PAST_STARTS and word != "been" and not reported:
        return text
    rest = text[m.end() :]
    clause = rest.split(",", 1)[0].split(" - ", 1)[0].lower().split()
    if _HAS_SUBJECT_RE.search(rest) or any(w in _FINITE for w in clause[:8]):
        # "Talking to them made me ...": the -ing phrase is the subject already.
        return text
    if word == "been":
        return f"I have been{rest}"
    if word.endswith("ing") and len(word) > 5 and word not in _NOT_GERUNDS:
        return f"I am {word}{rest}"
    if word in _PAST_STARTS or (word.endswith("ed") and not word.endswith("eed") and len(word) > 4):
        return f"I {word}{rest}"
    return text


_OBJECT_START_RE = lazy_compile(r"\s+(?:a|an|the|your|my|its|their|this|that|these|those|all|\d)", re.IGNORECASE)
_HAS_SUBJECT_RE = lazy_compile(r"^[^,.;!?]*,\s*(?:I|we|they|he|she|it)\b")
_FINITE = frozenset(
    """
    is was are were has have had made makes make helps helped gives gave feels felt means
    meant keeps kept can could will would brings brought reminds reminded gets got takes took
    shows showed lets let does did seems seemed sounds sounded
    """.split()
)
_NOT_GERUNDS = frozenset("something nothing anything everything morning evening thing".split())


def _lower_first(text: str, common: frozenset[str]) -> str:
    """Lower-case the first word after "X said" unless it is a name."""
    first = text.split(" ", 1)[0].strip("\"'(")
    if (first.lower() in common or first.lower() in STOPWORDS) and first != "I":
        return text[:1].lower() + text[1:]
    return text


# "It's awesome - ", "That's so cool! ": a reaction in front of the content.
_REACTION_RE = lazy_compile(
    r"^(?:it's|that's|this is|that is|it is|it was|that was|this was|sounds|looks)\s+"
    r"(?:\w+\s+)?(?:awesome|great|amazing|cool|fantastic|wonderful|incredible|nice|"
    r"lovely|beautiful|good|fun|crazy|wild|sweet|terrific|brilliant|exciting|inspiring)"
    r"\s*(?:[,;:]|\s-+|\s–|\s—)\s*(?=\S)",
    re.IGNORECASE,
)


def _compose(
    said: str,
    speaker: str,
    addressee: str | None,
    *,
    third_person: bool,
    compress: bool,
    attribute: bool,
    common: frozenset[str] = frozenset(),
) -> str:
    """The summary form of one sentence: compressed, rewritten, attributed."""
    text = said
    # "job-204 and job-205 run at 02:00" stays lower-case after "X said".
    starts_lower = said[:1].islower()
    if compress:
        compact = _REACTION_RE.sub("", text)
        compact = _INTENSIFIER_RE.sub("", compact).strip()
        # Capitalise only where a word was taken off the front: "sudo ufw ..." stays as typed.
        if compact and compact[:1] != text[:1]:
            compact = compact[:1].upper() + compact[1:]
        text = compact or text
    if third_person:
        text = _rewrite(_add_subject(text, common), speaker, addressee)
        if attribute and speaker.lower() not in text.lower():
            # Nobody the reader can place ("The stories were inspiring!"): say who said it.
            lowered = text[:1].lower() + text[1:] if starts_lower else _lower_first(text, common)
            text = f"{speaker}{ATTRIBUTION}{lowered}"
    elif attribute and speaker not in text and not text.startswith(f"{speaker}:"):
        text = f"{speaker}: {text}"
    # A summary states; it does not exclaim.
    text = _EXCLAIM_RE.sub(".", text)
    if text and text[-1] not in ".?":
        text += "."
    return text


def _prepare(messages: Sequence[Message], opts: ExtractiveSummarizer) -> _Prepared:
    visible = [m for m in messages if m.role in ("user", "assistant") and not m.hidden]
    speakers = list(dict.fromkeys(_speaker_of(m) for m in visible))
    texts = [m.content for m in visible]
    names = _name_forms(speakers, texts)
    people = _People(names)
    common = frozenset(w for t in texts for w in _LOWER_WORD_RE.findall(t))
    # The third-person rewrite knows English grammar only; other languages keep their
    # sentences and get a "Name: ..." attribution instead. Words meet by their stems in it.
    language = texts_language(texts)
    english = language == "en"
    sentences: list[SummarySentence] = []
    input_words = 0
    previous_other: dict[str, str] = {}  # speaker -> who spoke last before them
    last_speaker: str | None = None
    for i, msg in enumerate(visible):
        speaker = _speaker_of(msg)
        if last_speaker is not None and last_speaker != speaker:
            previous_other[speaker] = last_speaker
        last_speaker = speaker
        # In a dialogue "you" is the other speaker; in a group, whoever spoke
        # last before this speaker.
        if len(speakers) == 2:
            addressee: str | None = speakers[1] if speaker == speakers[0] else speakers[0]
        else:
            addressee = previous_other.get(speaker)
        text = clean_text(msg.content)
        input_words += len(text.split())
        for j, raw in enumerate(split_sentences(text)):
            stripped = _strip_vocatives(raw, people)
            if not stripped:
                continue
            terms = _content_terms(stripped, names, language)
            question = stripped.rstrip().endswith("?")
            rewritten = _compose(
                stripped,
                speaker,
                addressee,
                third_person=opts.third_person and english,
                compress=opts.compress,
                attribute=opts.attribute,
                common=common,
            )
            sentences.append(
                SummarySentence(
                    text=rewritten,
                    speaker=speaker,
                    order=i * 1000 + j,
                    terms={t: 1.0 for t in terms},
                    words=len(rewritten.split()),
                    candidate=not question and len(terms) >= _CONTENT_MIN,
                    source=stripped,
                    weight=_disclosure(stripped, opts.weights)
                    * _specificity(stripped, names, opts.weights),
                )
            )
        caption = msg.metadata.get("image_caption") if opts.captions else None
        if isinstance(caption, str) and caption.strip():
            cap = clean_text(caption).rstrip(".")
            if not cap.lower().startswith(("a photo", "an image", "a picture", "photo")):
                cap = f"a photo of {cap}"
            text_c = f"{speaker} shared {cap}."
            terms = _content_terms(cap, names, language)
            sentences.append(
                SummarySentence(
                    text=text_c,
                    speaker=speaker,
                    order=i * 1000 + 999,
                    terms={t: 1.0 for t in terms},
                    words=len(text_c.split()),
                    candidate=len(terms) >= _CONTENT_MIN,
                    source=cap,
                    weight=0.8,
                )
            )
    return _Prepared(sentences, speakers, names, input_words, english, language)


def _disclosure(raw: str, weights: RankWeights) -> float:
    """How much a sentence tells about its speaker: "I went ..." beats "You're so sweet"."""
    if _FIRST_PERSON_RE.search(raw):
        return weights.first_person
    if _SECOND_PERSON_RE.search(raw):
        return weights.second_person
    return 1.0


_SPECIFIC_RE = lazy_compile(r"(?<=\w )[A-Z][a-z]+|\d")


def _specificity(raw: str, names: frozenset[str], weights: RankWeights) -> float:
    """Names of things, places and numbers mark facts worth keeping."""
    for m in _SPECIFIC_RE.finditer(raw):
        if m.group(0).lower() not in names:
            return weights.specific
    return 1.0


# ------------------------------------------------------------------ ranking


@dataclass(frozen=True, slots=True)
class RankWeights:
    """How the extractive summarizer weighs a sentence (tuned on LoCoMo dialogues)."""

    centrality: float = 0.6  # TextRank score, mean 1 over the session
    coverage: float = 0.4  # sum of the session keyphrases the sentence contains (cap 3)
    first_person: float = 1.25  # factor for "I/my/we" sentences: news about the speaker
    second_person: float = 0.8  # factor for "you" sentences without "I": mostly reactions
    specific: float = 1.0  # factor for sentences naming things or numbers
    position: float = 0.15  # bonus for early sentences, falling linearly to 0 at the end
    full_length: int = 6  # content words from which a sentence is not penalised as short
    long_words: int = 40  # words above which a sentence is penalised as long


def _tfidf(sentences: list[SummarySentence]) -> None:
    df: dict[str, int] = {}
    for s in sentences:
        for t in s.terms:
            df[t] = df.get(t, 0) + 1
    n = len(sentences)
    for s in sentences:
        weights = {t: (1.0 + math.log((n + 1) / (df[t] + 0.5))) for t in s.terms}
        norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
        s.terms = {t: w / norm for t, w in weights.items()}


def _similarity(a: dict[str, float], b: dict[str, float]) -> float:
    if len(a) > len(b):
        a, b = b, a
    return sum(w * b[t] for t, w in a.items() if t in b)


def _textrank(sentences: list[SummarySentence]) -> np.ndarray[Any, np.dtype[np.float64]]:
    import numpy as np  # on the first summary, not when Memory opens

    n = len(sentences)
    if n == 0:
        return np.zeros(0)
    # Cosine similarities through an inverted index: sentences share few
    # terms, and a small dense matrix product would go to a multi-threaded
    # BLAS that is slower than this on a busy machine.
    postings: dict[str, list[tuple[int, float]]] = {}
    for i, s in enumerate(sentences):
        for t, w in s.terms.items():
            postings.setdefault(t, []).append((i, w))
    sim = np.zeros((n, n))
    for plist in postings.values():
        if len(plist) < 2:
            continue
        for a in range(len(plist)):
            i, wi = plist[a]
            for b in range(a + 1, len(plist)):
                j, wj = plist[b]
                sim[i, j] += wi * wj
    sim = sim + sim.T
    sim[sim < 0.05] = 0.0
    rows = sim.sum(axis=1, keepdims=True)
    trans = np.divide(sim, rows, out=np.full_like(sim, 1.0 / n), where=rows > 0)
    rank = np.full(n, 1.0 / n)
    damping = 0.85
    for _ in range(50):
        new = (1 - damping) / n + damping * (trans.T @ rank)
        if float(np.abs(new - rank).sum()) < 1e-9:
            rank = new
            break
        rank = new
    result: np.ndarray[Any, np.dtype[np.float64]] = rank * n  # mean 1
    return result


def _keyphrase_weights(sentences: list[SummarySentence], language: Language) -> dict[tuple[str, ...], float]:
    scored = score_keyphrases([s.source or s.text for s in sentences], language)[:20]
    if not scored:
        return {}
    top = scored[0][1]
    out: dict[tuple[str, ...], float] = {}
    for surface, score in scored:
        key = tuple(normalize_term(w, language) for w in tokenize_words(surface))
        out[key] = score / top
    return out


def _rank(prepared: _Prepared, w: RankWeights) -> list[SummarySentence]:
    sentences = prepared.sentences
    graph = [s for s in sentences if s.terms]
    if not graph:
        return []
    kp = _keyphrase_weights(graph, prepared.language)
    # Term lists are order-preserving, so the keyphrase match below is stable.
    term_lists = {id(s): list(s.terms) for s in graph}
    _tfidf(graph)
    central = _textrank(graph)
    total = len(graph)
    for idx, s in enumerate(graph):
        terms = term_lists[id(s)]
        coverage = 0.0
        for key, weight in kp.items():
            if key[0] not in s.terms:
                continue
            n = len(key)
            if n == 1 or any(tuple(terms[k : k + n]) == key for k in range(len(terms) - n + 1)):
                coverage += weight
        n_content = len(terms)
        length = min(1.0, n_content / w.full_length)
        if s.words > w.long_words:
            length *= w.long_words / s.words
        position = 1.0 + w.position * (1.0 - idx / total)
        s.score = (
            (w.centrality * float(central[idx]) + w.coverage * min(coverage, 3.0))
            * s.weight
            * length
            * position
        )
    return graph


# ---------------------------------------------------------------- budgets


def fit_to_budget(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """``text`` cut at a word boundary so that it counts at most ``max_tokens``."""
    if max_tokens <= 0:
        return ""
    if counter.count(text) <= max_tokens:
        return text
    words = text.split()
    lo, hi = 0, len(words)
    # Binary search on the number of words; token counts grow with words.
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter.count(" ".join(words[:mid]) + "…") <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        return ""
    return " ".join(words[:lo]) + "…"


def _header(messages: Sequence[Message], speakers: Sequence[str]) -> str:
    if len(speakers) < 2:
        return ""
    # Role labels are not names: "JanHein, the assistant and Maria talked...".
    people = [s if i == 0 or not s.startswith("The ") else "the" + s[3:] for i, s in enumerate(speakers)]
    names = ", ".join(people[:-1]) + f" and {people[-1]}"
    first = min((m.created_at for m in messages), default=None)
    if first is None or first.year <= 1970:
        return f"{names} talked."
    hour = first.hour % 12 or 12
    when = f"{first.day} {first.strftime('%B')} {first.year} at {hour}:{first.minute:02d} "
    when += "am" if first.hour < 12 else "pm"
    return f"{names} talked on {when}."


# -------------------------------------------------------------- extractive


@dataclass(slots=True)
class ExtractiveSummarizer:
    """Deterministic, offline summaries built from the conversation's own sentences.

    ``target_words`` fixes the length; by default it grows gently with the
    input (about 110 words for a 500-word session, at most ``max_words``).
    ``max_tokens`` passed to :meth:`summarize` caps the length further.
    """

    target_words: int | None = None
    min_words: int = 60
    max_words: int = 180
    words_per_input_word: float = 0.1
    base_words: int = 60
    diversity: float = 0.3  # MMR: weight of the redundancy penalty
    duplicate_threshold: float = 0.6  # a sentence this similar to a chosen one is skipped
    header: bool = True
    third_person: bool = True
    compress: bool = True
    attribute: bool = True
    captions: bool = False
    weights: RankWeights = field(default_factory=lambda: RankWeights())
    counter: TokenCounter | None = None

    def _counter(self) -> TokenCounter:
        if self.counter is None:
            self.counter = _default_counter()
        return self.counter

    def length_for(self, input_words: int) -> int:
        if self.target_words is not None:
            return self.target_words
        want = self.base_words + self.words_per_input_word * input_words
        return int(max(self.min_words, min(self.max_words, round(want))))

    def rank(self, messages: Sequence[Message]) -> list[SummarySentence]:
        """Every sentence worth summarizing with its salience score, in input order."""
        prepared = _prepare(messages, self)
        return [s for s in _rank(prepared, self.weights) if s.candidate]

    def select(
        self,
        ranked: Sequence[SummarySentence],
        *,
        max_words: int,
        max_tokens: int | None = None,
        prefix: str = "",
    ) -> list[SummarySentence]:
        """Maximal-marginal-relevance choice of sentences within the limits, in input order."""
        chosen: list[SummarySentence] = []
        words = len(prefix.split())
        counts: dict[str, int] = {}
        speakers = list(dict.fromkeys(s.speaker for s in ranked))
        pool = sorted(ranked, key=lambda s: (-s.score, s.order))
        top = pool[0].score if pool and pool[0].score > 0 else 1.0
        # Highest similarity of each pool sentence to anything chosen so far,
        # updated against the newest choice only.
        redundancy_of: dict[int, float] = {id(s): 0.0 for s in pool}
        newest: SummarySentence | None = None
        while pool:
            if newest is not None:
                for s in pool:
                    sim = _similarity(s.terms, newest.terms)
                    if sim > redundancy_of[id(s)]:
                        redundancy_of[id(s)] = sim
                newest = None
            best: SummarySentence | None = None
            best_value = -math.inf
            for s in pool:
                redundancy = redundancy_of[id(s)]
                if redundancy >= self.duplicate_threshold:
                    continue
                # Keep both sides heard: a speaker already ahead by two gets a nudge down.
                lead = counts.get(s.speaker, 0) - min((counts.get(p, 0) for p in speakers), default=0)
                balance = 1.0 - 0.1 * max(0, lead - 1)
                value = (1 - self.diversity) * (s.score / top) * balance - self.diversity * redundancy
                if value > best_value:
                    best, best_value = s, value
            if best is None:
                break
            pool.remove(best)
            if words + best.words > max_words * 1.1 and chosen:
                continue
            if max_tokens is not None:
                trial = _join(prefix, sorted([*chosen, best], key=lambda c: c.order))
                if self._counter().count(trial) > max_tokens:
                    continue
            chosen.append(best)
            newest = best
            counts[best.speaker] = counts.get(best.speaker, 0) + 1
            words += best.words
            if words >= max_words:
                break
        return sorted(chosen, key=lambda c: c.order)

    def summarize(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        previous_summary: str | None = None,
    ) -> str:
        _check_budget(max_tokens)
        if previous_summary:
            # Without a budget the merged summary may grow to about max_words.
            budget = max_tokens if max_tokens is not None else int(self.max_words * 1.4)
            rolling = RollingSummary(max_tokens=budget, summarizer=self)
            return rolling.update(messages, previous_summary=previous_summary)
        if max_tokens == 0:
            return ""
        prepared = _prepare(messages, self)
        ranked = [s for s in _rank(prepared, self.weights) if s.candidate]
        header = _header(messages, prepared.speakers) if self.header and prepared.english else ""
        if header and max_tokens is not None and self._counter().count(header) > max_tokens // 3:
            header = ""  # a tiny budget is better spent on content
        target = self.length_for(prepared.input_words)
        chosen = self.select(ranked, max_words=target, max_tokens=max_tokens, prefix=header)
        text = _join(header, chosen)
        if max_tokens is not None:
            if not chosen and ranked:
                # Not even the best sentence fits: send it cut rather than nothing.
                best = max(ranked, key=lambda s: (s.score, -s.order))
                text = _join(header, [best])
            text = fit_to_budget(text, max_tokens, self._counter())
        return text


def _join(prefix: str, sentences: Sequence[SummarySentence]) -> str:
    parts = [prefix] if prefix else []
    parts.append(said_once([s.text for s in sentences]))
    return " ".join(p for p in parts if p)


_LABEL_RE = lazy_compile(r"^([^:.!?]{1,40}): (?=\S)")


def said_once(sentences: Sequence[str]) -> str:
    """Sentences joined, a speaker's label said once per run of their sentences:
    "Ana: A. B." rather than "Ana: A. Ana: B." (labels are used where the third-person
    rewrite does not apply, e.g. German)."""
    out: list[str] = []
    last: str | None = None
    for text in sentences:
        m = _LABEL_RE.match(text)
        label = m.group(1) if m else None
        if m is not None and label == last:
            text = text[m.end():]
        last = label
        out.append(text)
    return " ".join(out)


# ----------------------------------------------------------------- rolling


@dataclass(slots=True)
class _Kept:
    sentence: SummarySentence
    salience: float  # 0..1 within the block it came from
    block: int  # negative for sentences of a summary loaded as text
    central: float = 0.0  # 0..1 centrality among everything kept, refreshed each update


@dataclass(slots=True)
class RollingSummary:
    """A summary that is updated block by block and never exceeds ``max_tokens``.

    Each :meth:`update` ranks only the new messages and merges their best
    sentences into the kept ones; nothing is recomputed over the whole history.
    While over budget it drops the sentence with the lowest priority:

        priority = (salience in its block + centrality among the kept) / 2 - age penalty

    The age penalty grows over ``horizon`` blocks and then stays flat, so the
    oldest of the least salient sentences go first, while an early fact that
    was salient, and that later talk keeps returning to (high centrality),
    survives. The state lives in the object; given a ``previous_summary`` it
    did not write (e.g. loaded from storage), it starts from that text.
    """

    max_tokens: int
    summarizer: ExtractiveSummarizer = field(default_factory=ExtractiveSummarizer)
    age_weight: float = 0.3  # priority an old sentence loses against a new one
    horizon: int = 4  # blocks after which a sentence counts as fully old
    block_share: float = 0.5  # at most this share of the budget for one new block
    crowding: float = 0.2  # priority lost per better sentence kept from the same block
    _kept: list[_Kept] = field(default_factory=list)
    _blocks: int = 0
    _text: str = ""
    # term -> number of blocks that mention it: what the whole conversation
    # keeps talking about, kept up to date one block at a time.
    _profile: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_budget(self.max_tokens)

    @property
    def text(self) -> str:
        return self._text

    def update(self, messages: Sequence[Message], previous_summary: str | None = None) -> str:
        """Merge ``messages`` into the summary; returns the new summary text."""
        if previous_summary is not None and previous_summary.strip() != self._text:
            self._seed(previous_summary)
        counter = self.summarizer._counter()
        block = self._blocks
        self._blocks += 1
        ranked = self.summarizer.rank(messages)
        for term in {t for s in ranked for t in s.terms}:
            self._profile[term] = self._profile.get(term, 0) + 1
        if ranked and self.max_tokens > 0:
            share = max(1, int(self.max_tokens * self.block_share))
            # The delta: the block's own best sentences, about as many as a
            # share of the budget holds (a word is ~1.3 tokens in English).
            words = max(12, int(share * 0.75))
            words = min(words, self.summarizer.length_for(sum(s.words for s in ranked)))
            new = self.summarizer.select(ranked, max_words=words, max_tokens=share)
            if not new:
                # Even the best sentence is over the share: keep it, eviction cuts it.
                new = [max(ranked, key=lambda s: (s.score, -s.order))]
            top = max((s.score for s in new), default=1.0) or 1.0
            for s in new:
                if self._twin(s):
                    continue  # said before: the kept wording stands
                s.order = block * 1_000_000 + s.order % 1_000_000
                self._kept.append(_Kept(s, 0.3 + 0.7 * (s.score / top), block))
        self._refresh_centrality()
        self._evict(counter)
        return self._text

    # -- internals

    def _seed(self, summary: str) -> None:
        sentences = [s for s in split_sentences(clean_text(summary)) if s]
        self._kept = []
        self._blocks = 0
        n = len(sentences)
        language = detect_language(summary)
        for i, text in enumerate(sentences):
            terms = _content_terms(text, frozenset(), language)
            sentence = SummarySentence(
                text=text, speaker="", order=i, terms={t: 1.0 for t in terms}, words=len(text.split())
            )
            # Without the old scores, later sentences of the stored summary
            # count as newer and a little more salient.
            self._kept.append(_Kept(sentence, 0.5 + 0.2 * (i + 1) / n, -self.horizon - (n - i)))
        graph = [k.sentence for k in self._kept if k.sentence.terms]
        _tfidf(graph)
        self._text = said_once(sentences)

    def _twin(self, s: SummarySentence) -> bool:
        threshold = self.summarizer.duplicate_threshold
        return any(_similarity(s.terms, k.sentence.terms) >= threshold for k in self._kept)

    def _refresh_centrality(self) -> None:
        # How much of the conversation so far is about this sentence's topics:
        # the share of blocks that mention its terms, best term first.
        blocks = max(self._blocks, 1)
        values: list[float] = []
        for k in self._kept:
            spread = sorted((self._profile.get(t, 0) / blocks for t in k.sentence.terms), reverse=True)
            values.append(sum(spread[:3]) / 3 if spread else 0.0)
        top = max(values, default=0.0) or 1.0
        for k, v in zip(self._kept, values, strict=True):
            k.central = v / top

    def _priorities(self) -> dict[int, float]:
        # Within one block, the second-best kept sentence ranks below every
        # block's best one: the summary keeps one fact from many moments
        # rather than many facts from one.
        by_block: dict[int, list[_Kept]] = {}
        for k in self._kept:
            by_block.setdefault(k.block, []).append(k)
        out: dict[int, float] = {}
        for items in by_block.values():
            items.sort(key=lambda k: (-k.salience, k.sentence.order))
            for rank, k in enumerate(items):
                age = (self._blocks - 1 - k.block) / max(self.horizon, 1)
                out[id(k)] = (
                    (k.salience + k.central) / 2
                    - self.age_weight * min(age, 1.0)
                    - self.crowding * rank
                )
        return out

    def _evict(self, counter: TokenCounter) -> None:
        self._kept.sort(key=lambda k: (k.block, k.sentence.order))
        text = said_once([k.sentence.text for k in self._kept])
        # The last sentence stays even when too long: cut below, it beats nothing.
        while len(self._kept) > 1 and counter.count(text) > self.max_tokens:
            priority = self._priorities()
            victim = min(self._kept, key=lambda k: (priority[id(k)], k.block, k.sentence.order))
            self._kept.remove(victim)
            text = said_once([k.sentence.text for k in self._kept])
        self._text = fit_to_budget(text, self.max_tokens, counter) if self._kept else ""


# --------------------------------------------------------------------- LLM

_SYSTEM_PROMPT = (
    "You summarize conversations. Write one concise paragraph in the third person that "
    "names the speakers (for example: 'Alice told Bob that she moved to Berlin.'). Keep "
    "concrete facts: names, dates, places, numbers, plans, decisions and open questions. "
    "Leave out greetings and small talk. Reply with the summary only."
)


class _RetryableStatus(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


@dataclass(slots=True)
class LLMSummarizer:
    """Summaries from an OpenAI-compatible chat-completions endpoint, fail-open.

    ``base_url`` is the API root (``http://127.0.0.1:8000/v1``); the request
    goes to ``{base_url}/chat/completions``. The key is read from the
    environment variable named by ``api_key_env`` (no header when unset, as
    local servers need none). Transport errors, 429 and 5xx are retried with
    backoff; when every try fails the ``fallback`` summarizer answers and a
    warning is logged, so a summary is always produced.
    """

    base_url: str
    model: str
    api_key_env: str | None = "OPENAI_API_KEY"
    timeout: float = 30.0
    max_attempts: int = 3
    backoff_seconds: float = 0.5
    temperature: float = 0.0
    fallback: Summarizer = field(default_factory=ExtractiveSummarizer)
    counter: TokenCounter | None = None
    client: httpx.Client | None = None

    def _counter(self) -> TokenCounter:
        if self.counter is None:
            self.counter = _default_counter()
        return self.counter

    def _payload(
        self, messages: Sequence[Message], max_tokens: int | None, previous_summary: str | None
    ) -> dict[str, Any]:
        lines: list[str] = []
        for m in messages:
            if m.role not in ("user", "assistant") or m.hidden or not m.content.strip():
                continue
            lines.append(f"{_speaker_of(m)}: {m.content.strip()}")
        when = min((m.created_at for m in messages), default=None)
        user = ""
        if previous_summary:
            user += (
                "Summary so far:\n" + previous_summary.strip() + "\n\nUpdate it with the new "
                "messages below; keep earlier facts that still matter.\n\n"
            )
        if when is not None:
            user += f"Conversation on {when.strftime('%d %B %Y, %H:%M')} UTC:\n"
        user += "\n".join(lines)
        if max_tokens is not None:
            user += f"\n\nUse at most {max(1, int(max_tokens * 0.85))} tokens."
        payload: dict[str, Any] = {
            "model": self.model,
            "temperature": self.temperature,
            "messages": [
                {"role": "system", "content": _SYSTEM_PROMPT},
                {"role": "user", "content": user},
            ],
        }
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        return payload

    def _request(self, payload: dict[str, Any]) -> str:
        import httpx
        from tenacity import (
            retry,
            retry_if_exception_type,
            stop_after_attempt,
            wait_exponential,
        )

        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        url = self.base_url.rstrip("/") + "/chat/completions"

        @retry(
            retry=retry_if_exception_type((httpx.TransportError, _RetryableStatus)),
            stop=stop_after_attempt(max(1, self.max_attempts)),
            wait=wait_exponential(multiplier=self.backoff_seconds, max=8.0),
            reraise=True,
        )
        def call() -> str:
            if self.client is not None:
                response = self.client.post(url, json=payload, headers=headers, timeout=self.timeout)
            else:
                response = httpx.post(url, json=payload, headers=headers, timeout=self.timeout)
            if response.status_code == 429 or response.status_code >= 500:
                raise _RetryableStatus(response.status_code)
            response.raise_for_status()
            data = response.json()
            content = data["choices"][0]["message"]["content"]
            if not isinstance(content, str) or not content.strip():
                raise ValueError("the endpoint returned an empty summary")
            return content.strip()

        return call()

    def summarize(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        previous_summary: str | None = None,
    ) -> str:
        _check_budget(max_tokens)
        if max_tokens == 0:
            return ""
        try:
            text = self._request(self._payload(messages, max_tokens, previous_summary))
        except Exception as exc:  # fail-open: any failure means "use the offline summary"
            log.warning(
                "LLM summarizer at %s failed (%s: %s); using the extractive summary instead",
                self.base_url, type(exc).__name__, exc,
            )
            return self.fallback.summarize(
                messages, max_tokens=max_tokens, previous_summary=previous_summary
            )
        text = _SPACE_RE.sub(" ", text)
        if max_tokens is not None:
            text = _fit_sentences(text, max_tokens, self._counter())
        return text


def _fit_sentences(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """Whole sentences while they fit; a cut sentence only if the first one is too long."""
    if counter.count(text) <= max_tokens:
        return text
    kept: list[str] = []
    for sentence in split_sentences(text):
        if counter.count(" ".join([*kept, sentence])) > max_tokens:
            break
        kept.append(sentence)
    return " ".join(kept) if kept else fit_to_budget(text, max_tokens, counter)
