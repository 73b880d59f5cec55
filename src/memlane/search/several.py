"""Questions that ask for several things, whose answers are spread over a conversation.

"What activities has Melanie done with her family?", "Where has Maria made friends?",
"What do Jon and Gina both have in common?", "How many times has she gone to the beach?":
each answer is a list gathered from turns in different sessions. Ranked as usual, the
session that matches best fills the top with its own turns (the session and neighbour
parts lift a relevant session's turns together); ``RecallConfig.several_session`` and
``several_neighbour`` can make those two parts weigh less for these questions (off by
default: on LoCoMo that helped the tuning part, not the held-aside one; README).

The cues are grammar, not topics: a *what/which* question about a plural noun ("What
cities has ...", "What types of yoga ..."), the present perfect that sums up experience
("has X done/been/made ..."), "both" or "in common", and counting ("how many times"; not
"how often": a habit is told once). A question in the past simple ("What emotions did John
feel at the party?") asks about one occasion however many things it lists, and a singular
noun ("Which activity has John done ...?") for one thing. English, and
the German forms that mark the same things ("welche ... alle", "was ... alles", "beide").
"""

from __future__ import annotations

import re

from memlane.patterns import lazy_compile

_I = re.IGNORECASE | re.UNICODE

_AUXILIARY = frozenset({
    "do", "did", "does", "is", "are", "was", "were", "has", "have", "had", "will", "would", "can",
    "could", "should", "might", "must", "may",
})
# the past simple: one occasion
_ONE_OCCASION = frozenset({"did", "was", "were"})
_KINDS = frozenset({"kinds", "types", "sorts"})
# words ending in -s that are no plural nouns
_NOT_PLURAL = frozenset({"this", "his", "its", "thus", "plus", "news", "us", "yes", "always", "perhaps"})
_TOKEN = lazy_compile(r"[\w+/'’-]+", re.UNICODE)

# "has Melanie painted", "have Jon and Gina done", "has she ever been": the perfect that
# sums up what someone did over time. Not "how long has ...": that asks for one span; nor
# "has she been trying": one ongoing thing.
_PERFECT = lazy_compile(
    r"\b(?:has|have)\s+(?:[A-Z][\w'’-]*|he|she|they|you|i|we)"
    r"(?:\s+and\s+(?:his|her|their|my|your)?\s*[\w'’-]+)?\s+(?:ever\s+|already\s+|all\s+)?"
    r"(?!been\s+\w+ing\b)"
    r"[a-z]+(?:ed|en|wn|ne|ught|ade|one|een|et|ot|ad|un|ung|ept|elt|ilt|ound|ead|ard)\b",
    re.UNICODE,
)
_HOW_LONG = lazy_compile(r"^\s*(?:how\s+long|wie\s+lange|seit\s+wann)\b", _I)

# "both", "in common", counting: the answer is several turns by construction.
_SEVERAL = lazy_compile(
    r"\b(?:both|in\s+common|how\s+many\s+times|beide[nr]?|gemeinsam|"
    r"welche\s+\w+\s+(?:\w+\s+){0,4}alle|was\s+(?:\w+\s+){1,4}alles)\b",
    _I,
)


def question_head(query: str) -> tuple[list[str], str] | None:
    """The words between "what/which" and the question's auxiliary, and the auxiliary
    ("What European countries has ..." -> (["european", "countries"], "has")); None for a
    question of another shape ("What motivated Caroline", "Where did ...")."""
    tokens = [t.lower() for t in _TOKEN.findall(query)[:7]]
    if tokens[:1] == ["in"]:
        tokens = tokens[1:]
    if not tokens or tokens[0] not in ("what", "which"):
        return None
    for end in range(2, min(len(tokens), 5)):
        if tokens[end] in _AUXILIARY:
            return tokens[1:end], tokens[end]
    return None


def _plural(word: str) -> bool:
    return len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")) and word not in _NOT_PLURAL


def asks_for_several(query: str) -> bool:
    """Whether the question's answer is a list of things likely told in several turns."""
    if _SEVERAL.search(query):
        return True
    head = question_head(query)
    if head is not None:
        # The noun decides: "Which activity has John done ...?" wants one, in any tense.
        words, auxiliary = head
        return auxiliary not in _ONE_OCCASION and (_plural(words[-1]) or words[0] in _KINDS)
    return not _HOW_LONG.match(query) and _PERFECT.search(query) is not None
