"""The candidate sentences of a conversation: each message's sentences cleaned, rewritten,
given a subject, weighed for what they disclose about the speaker, with their terms."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memlane.context.keyphrases import (
    GENERIC_WORDS,
    STOPWORDS,
    normalize_term,
    texts_language,
    tokenize_words,
)
from memlane.context.summarizer.cleaning import People, clean_text, split_sentences, strip_vocatives
from memlane.context.summarizer.third_person import rewrite
from memlane.language import Language
from memlane.models import Message
from memlane.patterns import lazy_compile

if TYPE_CHECKING:
    # types only: the extractive summarizer and the ranking import this module
    from memlane.context.summarizer.extractive import ExtractiveSummarizer
    from memlane.context.summarizer.ranking import RankWeights


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


def speaker_of(msg: Message) -> str:
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


def content_terms(text: str, names: frozenset[str], language: Language) -> list[str]:
    out: list[str] = []
    for word in tokenize_words(text):
        lw = word.lower()
        if lw in STOPWORDS or lw in GENERIC_WORDS or lw in names or len(lw) < 3:
            continue
        out.append(normalize_term(lw, language))
    return out


@dataclass(slots=True)
class Prepared:
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
        text = rewrite(_add_subject(text, common), speaker, addressee)
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


def prepare_sentences(messages: Sequence[Message], opts: ExtractiveSummarizer) -> Prepared:
    visible = [m for m in messages if m.role in ("user", "assistant") and not m.hidden]
    speakers = list(dict.fromkeys(speaker_of(m) for m in visible))
    texts = [m.content for m in visible]
    names = _name_forms(speakers, texts)
    people = People(names)
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
        speaker = speaker_of(msg)
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
            stripped = strip_vocatives(raw, people)
            if not stripped:
                continue
            terms = content_terms(stripped, names, language)
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
            terms = content_terms(cap, names, language)
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
    return Prepared(sentences, speakers, names, input_words, english, language)


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
