"""Deterministic keyphrase extraction for English and German text.

Used for the "active topics" of a session and by the extractive summarizer to
judge which sentences cover what a conversation is about. No model, no
download: candidate phrases are runs of content words between stopwords and
punctuation (the RAKE idea); every 1-3 word n-gram inside a run is a candidate,
scored by how often it occurs, how long it is, how early it first appears and
whether it looks like a noun (capitalised mid-sentence, which in German is every
noun). The same input always gives the same output.
    """

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from memlane import language
from memlane.language import Language, detect_language, grouping_form, surface_words

# Keyphrases stop at function words and at chat filler alike (one source: memlane.language).
STOPWORDS_EN: frozenset[str] = language.STOPWORDS_EN | language.FILLER_EN
STOPWORDS_DE: frozenset[str] = language.STOPWORDS_DE | language.FILLER_DE
STOPWORDS: frozenset[str] = STOPWORDS_EN | STOPWORDS_DE

__all__ = [
    "GENERIC_WORDS",
    "STOPWORDS",
    "STOPWORDS_DE",
    "STOPWORDS_EN",
    "extract_keyphrases",
    "normalize_term",
    "score_keyphrases",
    "texts_language",
    "tokenize_words",
]

#: Chat words that carry mood, not topic. They end a candidate phrase like a
#: stopword does, so "great support group" yields "support group".
GENERIC_WORDS: frozenset[str] = frozenset(
    """
    hey hi hello hiya yo wow whoa woah oops ooh ah aw aww awww yeah yep yup nope nah lol lmao
    haha hahaha hehe omg gosh hmm um uh cool great awesome amazing nice good bad fine glad
    happy thanks thank thx congrats congratulations sounds sound totally definitely absolutely
    super pretty lot lots kind kinda sort stuff bit bye cheers love loved lovely fun wonderful
    fantastic incredible beautiful excited exciting proud sorry hope hoping wish glad dear guys
    man dude buddy friend wanna gonna gotta tell told telling talk talking know knew think
    thought feel feeling felt want wanted need needs needed keep kept take took try trying tried look
    looks looking looked mean means meant guess seeing seen saw went come came coming day days
    time times today yesterday tomorrow new old big little best better true real right
    important special thing inspiring inspired share shared sharing hear heard totally truly
    agree agreed hard easy lucky long taking making getting doing start started starting last
    next week weeks month months year years night morning evening weekend moment moments ago
    lately recently wait waiting give giving meet happen happening happened discuss discussing
    expressing expressed found given
    """.split()
)

# Punctuation that ends a phrase; a run of content words never spans one of these.
_BREAK_RE = re.compile(r"[.!?;:,()\[\]{}\"“”„«»/\\|…—–]+|\s-\s|\n")
_MAX_NGRAM = 3


def tokenize_words(text: str) -> list[str]:
    """Words of ``text`` that start with a letter, original case (the one tokenizer's words)."""
    return [w for w in surface_words(text) if not w[0].isdigit()]


@lru_cache(maxsize=65536)
def normalize_term(word: str, language: Language = "en") -> str:
    """The form words are grouped by: lower-cased, possessive dropped, and the Snowball
    stem in ``language`` (the language layer's, as the keyword index and topics use), so
    "Datenbanken" meets "Datenbank" and "Fahrräder" "Fahrrad" as "databases" meets
    "database". Only the grouping uses it; a phrase is shown as the text spelled it.
    """
    return grouping_form(word, language)


def texts_language(texts: Sequence[str]) -> Language:
    """The language of a conversation's ``texts`` taken together (one judgement, so every
    word of it is grouped by the same stemmer)."""
    return detect_language(" ".join(t[:500] for t in texts[:40]))


_GREETINGS = frozenset({"hey", "hi", "hello", "hiya", "thanks", "thank", "dear", "hallo", "danke"})


def _is_boundary(word: str) -> bool:
    lw = word.lower()
    if lw in STOPWORDS or lw in GENERIC_WORDS or len(lw) < 3:
        return True
    # Lower-case English past forms ("failed", "inspired") are verbs far more
    # often than topics; "need"/"speed" keep their double e.
    return word.islower() and len(lw) > 4 and lw.endswith("ed") and not lw.endswith("eed")


@dataclass(slots=True)
class _Candidate:
    key: tuple[str, ...]
    count: int
    first: int
    capitalised: int
    surfaces: dict[str, int]


def _runs(texts: Iterable[str]) -> Iterable[tuple[list[str], list[bool]]]:
    """Runs of content words, with a flag per word saying it was capitalised mid-sentence."""
    for text in texts:
        for chunk in _BREAK_RE.split(text):
            words = tokenize_words(chunk)
            # A lone capitalised word between commas ("..., Caroline!") is a
            # vocative, and so is a name right after a greeting ("Hey Mel"):
            # who is spoken to is not what is spoken about.
            if len(words) == 1 and words[0][:1].isupper():
                continue
            run: list[str] = []
            caps: list[bool] = []
            for i, word in enumerate(words):
                if i > 0 and words[i - 1].lower() in _GREETINGS and word[:1].isupper():
                    continue
                if _is_boundary(word):
                    if run:
                        yield run, caps
                    run, caps = [], []
                    continue
                run.append(word)
                # The first word of a chunk is capitalised for grammar, not meaning.
                caps.append(i > 0 and word[:1].isupper())
            if run:
                yield run, caps


def score_keyphrases(texts: Sequence[str], language: Language | None = None) -> list[tuple[str, float]]:
    """All candidate phrases with their scores, best first (ties broken alphabetically);
    word forms meet by their stems in ``language`` (the texts' own when None)."""
    lng = language or texts_language(texts)
    candidates: dict[tuple[str, ...], _Candidate] = {}
    position = 0
    for run, caps in _runs(texts):
        for n in range(1, _MAX_NGRAM + 1):
            for start in range(0, len(run) - n + 1):
                words = run[start : start + n]
                key = tuple(normalize_term(w, lng) for w in words)
                surface = " ".join(words)
                cand = candidates.get(key)
                if cand is None:
                    cand = _Candidate(key, 0, position + start, 0, {})
                    candidates[key] = cand
                cand.count += 1
                cand.capitalised += int(all(caps[start : start + n]))
                cand.surfaces[surface] = cand.surfaces.get(surface, 0) + 1
        position += len(run)
    total = max(position, 1)
    # A word that mostly occurs inside a repeated longer phrase ("support" in
    # "support group") is counted only for its occurrences outside it, so the
    # longer, more telling phrase wins (the C-value idea, simplified).
    nested: dict[tuple[str, ...], int] = {}
    for key, cand in candidates.items():
        if len(key) < 2 or cand.count < 2:
            continue
        for sub in (key[:-1], key[1:]):
            nested[sub] = max(nested.get(sub, 0), cand.count)
    scored: list[tuple[str, float]] = []
    for key, cand in candidates.items():
        n = len(key)
        count = max(cand.count - nested.get(key, 0), 1) if key in nested else cand.count
        # A phrase seen once is weak evidence unless it is long or a name.
        length_weight = (1.0, 1.6, 1.8)[n - 1]
        if n > 1 and count == 1:
            # Seen once, a longer n-gram is more likely a chance run of words
            # ("staging cluster needs") than a name for a topic.
            length_weight *= (1.0, 0.8, 0.65)[n - 1]
        early = 1.0 + 0.3 * (1.0 - cand.first / total)
        noun_like = 1.0 + 0.5 * (cand.capitalised / cand.count)
        score = (count**0.8) * length_weight * early * noun_like
        if n == 1 and count == 1 and len(key[0]) < 5:
            score *= 0.6
        scored.append((_best_surface(cand.surfaces), score))
    scored.sort(key=lambda item: (-item[1], item[0].lower()))
    return scored


def _best_surface(surfaces: dict[str, int]) -> str:
    # The most frequent spelling; prefer lower case when counts tie so a word
    # that opened one sentence is not shown capitalised.
    best = sorted(surfaces.items(), key=lambda kv: (-kv[1], kv[0] != kv[0].lower(), kv[0]))[0][0]
    return best


def extract_keyphrases(texts: Sequence[str], top_k: int = 8) -> list[str]:
    """The ``top_k`` keyphrases of ``texts``, best first, without overlapping phrases.

    A phrase is skipped when it is part of, or contains, a phrase already chosen
    ("support" after "support group"), so the list names distinct topics.
    """
    if isinstance(texts, str):
        texts = [texts]
    if top_k <= 0:
        return []
    lng = texts_language(texts)
    chosen: list[str] = []
    chosen_keys: list[tuple[str, ...]] = []
    for surface, _score in score_keyphrases(texts, lng):
        key = tuple(normalize_term(w, lng) for w in tokenize_words(surface))
        if not key or any(_overlaps(key, other) for other in chosen_keys):
            continue
        chosen.append(surface)
        chosen_keys.append(key)
        if len(chosen) >= top_k:
            break
    return chosen


def _overlaps(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    # Sharing any word counts: "lake sunrise" and "sunrise last year" name one topic.
    return not set(a).isdisjoint(b)
