"""Whether a pronoun-shaped word ("it", "das", "der", "that") really points back into the
conversation, or is an article, a relative pronoun, a conjunction or an impersonal subject."""

from __future__ import annotations

import re

from memlane.patterns import lazy_compile
from memlane.state import language as lang
from memlane.state.references.impersonal import CATAPHORIC, EXPLETIVE_DE, EXPLETIVE_EN
from memlane.state.references.lexicon import (
    ADJECTIVE_ENDINGS,
    AFTER_VERB,
    AUXILIARIES,
    CONJUNCTIONS,
    COPULA,
    ENGLISH_DETERMINERS,
    FLAGS,
    GENERIC,
    GERMAN_DEMONSTRATIVE,
    NOT_NOUN,
    NOT_NOUN_EN,
    ORDINALS,
    THAT_CONJ_BEFORE,
    adverb,
)

PRONOUN_RE = lazy_compile(
    r"\b(it|that(?:'s)?|this|them|they|these|those|the\s+same(?:\s+thing)?|she|her|he|him|"
    r"es|das|dies|dieses|diese|ihn|ihm|ihr|sie|er|der|den|dem|die|dasselbe|das\s+gleiche|selbiges|"
    # German pronominal adverbs point back like "it" with a preposition: "dafür" = "for it"
    r"da(?:r)?(?:an|auf|aus|bei|durch|für|gegen|in|mit|nach|neben|über|um|unter|von|vor|zu|zwischen))\b",
    FLAGS,
)


def prev_word(text: str, start: int) -> str:
    words = lang.words(text[:start])
    return words[-1] if words else ""


_FOLLOWING = lazy_compile(r"((?:\s+[\w'’-]+){0,3})")


def next_words(text: str, end: int, n: int = 2) -> list[str]:
    """The ``n`` words right after position ``end`` ("" where there are none)."""
    found = _FOLLOWING.match(text, end)
    words = found.group(1).split()[:n] if found else []
    return words + [""] * (n - len(words))


def verb_follows(query: str, start: int, after: str, second: str) -> bool:
    """Whether "that"/"this" at ``start`` is the subject after an auxiliary and ``after`` its
    verb: the last word, or one an object or a phrase follows."""
    return prev_word(query, start) in AUXILIARIES and bool(after) and (
        not second or second.lower().strip("?.!,") in AFTER_VERB)


def pronoun_ok(query: str, m: re.Match[str]) -> bool:
    """Whether a pronoun-shaped word is really a reference back into the conversation."""
    word = m.group(1).lower()
    start, end = m.span(1)
    after, second = next_words(query, end)
    low_after = after.lower()
    window = query  # one utterance: "wie spät ist es" needs the words before "es"
    if word == "it" and EXPLETIVE_EN.search(window):
        return False
    if word == "es" and EXPLETIVE_DE.search(window):
        return False
    if word.startswith("da") and len(word) > 3 and CATAPHORIC.match(query, end):
        return False  # "es kommt darauf an, wie ...": the clause that follows is what it means
    if word in ("sie", "ihr", "ihnen") and m.group(1)[0].isupper() and query[:start].strip() \
            and not re.search(r"[.!?:]\s*$", query[:start]):
        return False  # formal address mid-sentence: "Können Sie mir helfen?"
    if word == "ihr" and (after[:1].isupper() or prev_word(query, start).endswith("t")):
        return False  # a possessive ("ihr Auto") or "you" plural ("habt ihr")
    if word == "her" and after and after.lower() not in NOT_NOUN and after.isalpha() \
            and after.lower() not in ("on", "to", "for", "about", "a", "the", "that", "again"):
        return False  # a possessive: "her first day"
    if re.match(r"^\W*[\w.-]+(?:\s+[\w.-]+)?\s*:", query) and query.index(":") < start:
        return False  # "Logrotate: how does it work?" - the query names what "it" is
    at_end = bool(re.match(r"\s*[\w'’-]+\s*[?.!]*\s*$", query[end:])) \
        and prev_word(query, start) in COPULA
    # After do-support or a modal the verb follows the subject: "why did that happen?",
    # "did that fix the problem?" ("that" the subject) - but "does that file exist?" has
    # another word for the verb, so "file" is the noun of "that file".
    pronoun_before_verb = verb_follows(query, start, after, second)
    if word in ("that", "this", "these", "those") and after and low_after not in NOT_NOUN \
            and low_after not in NOT_NOUN_EN and not adverb(low_after) \
            and not at_end and not pronoun_before_verb:
        return False  # "that file" (an entity), "that we" (a conjunction), "this morning"
    if word == "that" and prev_word(query, start) in THAT_CONJ_BEFORE:
        return False  # "I think that's ..." reads as a statement, not a pointer
    if word in GERMAN_DEMONSTRATIVE:
        # An article has its noun after it (German nouns are capitalised), maybe behind an
        # adjective; "der zweite" is an ordinal (a selection); "the den" is English.
        attributive = after.islower() and after.endswith(ADJECTIVE_ENDINGS) and second[:1].isupper()
        if not after or after[:1].isupper() or attributive \
                or low_after in ORDINALS or prev_word(query, start) in ENGLISH_DETERMINERS:
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
        if w in CONJUNCTIONS and any(
            len(x) > 3 and x not in GENERIC and x not in lang.QUESTION_WORDS for x in before[:i]
        ):
            return False
    return True
