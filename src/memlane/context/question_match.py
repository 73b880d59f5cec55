"""When two questions may share one cached answer (the response cache's match rule).

Exact: the same words after normalising case, spacing and closing punctuation.

Semantic: the embedder's cosine of the two questions reaches the threshold calibrated for
their language, both questions are in the same language (an answer is in the language it
was asked in), both name the same specifics (numbers, versions, paths, flags, ``code``:
``port 22`` and ``port 80`` are near in meaning, not the same question), and they are not
a minimal pair: two questions that differ in exactly one content word, in the same place
("enable"/"disable", "cat"/"dog", "dentist"/"doctor"), ask about that word, however close
their vectors are.
The thresholds come from ``memlane eval response-cache`` on
``eval/data/response_cache_en_de.jsonl`` (paraphrases against different questions, EN and
DE, a third held aside): the highest cosine of a different question of the tune split, plus
a margin of 0.1. MiniLM knows English; for German its paraphrases score no higher than its
different questions, so the German threshold (0.97) leaves German to exact match in effect.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

from memlane.language import STOPWORDS, Language, detect_language, words

__all__ = [
    "CALIBRATED_FOR",
    "SEMANTIC_THRESHOLDS",
    "minimal_pair",
    "normalize_question",
    "question_key",
    "same_language",
    "semantic_match",
    "specifics",
]

#: Cosine a paraphrase must reach, per language, for the default embedder (MiniLM):
#: calibrated by ``memlane eval response-cache`` (tune split), see the module doc.
SEMANTIC_THRESHOLDS: dict[str, float] = {"en": 0.78, "de": 0.97}
#: The embedder those thresholds were calibrated for (its model id starts so); another
#: embedder's cosines mean something else, so it gets exact match only unless thresholds
#: calibrated for it are given.
CALIBRATED_FOR = "all-MiniLM-L6-v2"

_SPACE = re.compile(r"\s+")
_TRAILING = re.compile(r"[\s.!?¿¡…]+$")
# Tokens that name a specific thing: anything with a digit, a path or dotted name,
# a flag, or a `code span`.
_SPECIFIC = re.compile(r"`[^`]+`|(?<!\w)-{1,2}[A-Za-z][\w-]*|\S*\d\S*|\S+[/.]\S+")


def normalize_question(text: str) -> str:
    """Case, spacing, Unicode form and closing punctuation removed: what exact match compares."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return _TRAILING.sub("", _SPACE.sub(" ", text).strip())


def question_key(text: str) -> str:
    """A stable key for exact match (SHA-256 of the normalised question)."""
    return hashlib.sha256(normalize_question(text).encode("utf-8")).hexdigest()


def specifics(text: str) -> frozenset[str]:
    """The specific tokens of a question (numbers, versions, paths, flags, code), normalised."""
    return frozenset(
        m.strip("`.,;:!?()[]{}\"'").casefold() for m in _SPECIFIC.findall(unicodedata.normalize("NFKC", text))
    ) - {""}


def minimal_pair(a: str, b: str) -> bool:
    """Whether the questions differ in exactly one word, at the same place, that is not a
    function word on both sides (a swapped subject, object or verb)."""
    wa, wb = words(a), words(b)
    if len(wa) != len(wb):
        return False
    swapped = [(x, y) for x, y in zip(wa, wb, strict=True) if x != y]
    return len(swapped) == 1 and not (swapped[0][0] in STOPWORDS and swapped[0][1] in STOPWORDS)


def same_language(a: str, b: str) -> Language | None:
    """The language both questions are in, or None when they differ."""
    la = detect_language(a)
    return la if detect_language(b, default=la) == la else None


def semantic_match(a: str, b: str, cosine: float, thresholds: dict[str, float] | None = None) -> bool:
    """Whether question ``b`` may take the answer cached for ``a`` given their cosine."""
    language = same_language(a, b)
    if language is None:
        return False
    threshold = (SEMANTIC_THRESHOLDS if thresholds is None else thresholds).get(language)
    if threshold is None or cosine < threshold:
        return False
    return specifics(a) == specifics(b) and not minimal_pair(a, b)
