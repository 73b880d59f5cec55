"""Cue detection: the references in a query, in the order they appear (not yet resolved)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from memlane.state import language as lang
from memlane.state.references.cue_patterns import (
    ADDITIVE,
    ADDITIVE_WORDS,
    CONFIRM_START,
    CONTINUE,
    DEFINITE_TASK,
    DEMONSTRATIVE_DE,
    DEMONSTRATIVE_EN,
    FIRST_PERSON_BEFORE,
    FRAGMENT,
    NAMED_ID,
    NEGATION_ANY,
    NEGATION_START,
    PLACE_REF,
    REF_DE,
    REF_EN,
    RESULT_REF,
    SAID,
    SELECT,
    SELECT_ELIDED,
    SELECT_NOUN_DE,
    TIME_REF,
    TOPIC_FRONT,
)
from memlane.state.references.lexicon import (
    COPULA,
    NOT_NOUN,
    NOT_NOUN_EN,
    PERSONS,
    SUBJECTS,
    THAT_CONJ_BEFORE,
    TIME_NOUNS,
    adjective,
    adverb,
)
from memlane.state.references.matching import shared_count, text_stems
from memlane.state.references.pronouns import PRONOUN_RE, next_words, prev_word, pronoun_ok, verb_follows
from memlane.state.references.records import Reference


def _overlaps(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    return any(start < e and s < end for s, e in spans)


def detect_references(query: str) -> list[Reference]:
    """The references in ``query`` (not yet resolved), in the order they appear."""
    found: list[Reference] = []
    spans: list[tuple[int, int]] = []

    def add(text: str, kind: str, start: int, end: int) -> None:
        if not _overlaps(spans, start, end):
            spans.append((start, end))
            found.append(Reference(text=text, kind=kind, start=start, end=end))

    for rx, kind in ((CONFIRM_START, "confirmation"), (CONTINUE, "confirmation"),
                     (NEGATION_START, "negation"), (NEGATION_ANY, "negation"),
                     (REF_EN, "reference"), (REF_DE, "reference"), (SAID, "reference"),
                     (RESULT_REF, "reference"),
                     (SELECT, "selection"), (SELECT_ELIDED, "selection"), (SELECT_NOUN_DE, "selection"),
                     (DEFINITE_TASK, "entity")):
        for m in rx.finditer(query):
            text = m.group(0).strip(" ,.!?")
            if rx is CONTINUE and FIRST_PERSON_BEFORE.search(query[:m.start()]):
                continue  # "I'll continue tomorrow" tells what the user will do, not "go on"
            if kind == "entity" and NAMED_ID.match(query, m.end()):
                continue  # "der Auftrag #17" names its referent itself
            if text:
                add(text, kind, m.start(), m.start() + len(m.group(0).rstrip(" ,.!?")))
    for rx in (DEMONSTRATIVE_EN, DEMONSTRATIVE_DE):
        for m in rx.finditer(query):
            noun = m.group(2).lower()
            if noun in NOT_NOUN or noun in TIME_NOUNS or noun in SUBJECTS or noun in NOT_NOUN_EN \
                    or (rx is DEMONSTRATIVE_EN and adverb(noun)):
                continue
            if m.group(1).lower() == "that" and prev_word(query, m.start()) in THAT_CONJ_BEFORE:
                continue
            if NAMED_ID.match(query, m.end()) or query[m.end():m.end() + 1] in ("'", "’"):
                continue  # "this doesn't": a contraction, not "this <noun>"
            if rx is DEMONSTRATIVE_EN and re.match(r"\s*[?.!]*\s*$", query[m.end():]) \
                    and prev_word(query, m.start()) in COPULA:
                continue  # "is that safe?": the pronoun and a predicate, not "that <noun>"
            if rx is DEMONSTRATIVE_EN and verb_follows(query, m.start(), *next_words(query, m.start(1) + len(m.group(1)))):
                continue  # "did that happen": the pronoun and a verb
            end = m.end()
            if rx is DEMONSTRATIVE_EN and adjective(noun):
                # "these vulnerable moments": the noun is the next word.
                nxt = re.match(r"\s+([a-z][\w-]*)", query[end:])
                if nxt is None or nxt.group(1).lower() in NOT_NOUN | NOT_NOUN_EN | TIME_NOUNS:
                    continue
                end += nxt.end()
            add(query[m.start():end], "entity", m.start(), end)
    for rx, kind in ((PLACE_REF, "place"), (TIME_REF, "time")):
        for m in rx.finditer(query):
            add(m.group(0), kind, m.start(), m.end())
    front = TOPIC_FRONT.match(query)
    if front is not None:
        add(front.group(0).strip(" ,:"), "topic", front.start(), front.end())
    fragment = FRAGMENT.match(query)
    if fragment is not None and len(lang.words(query)) <= 8 and not found:
        add(fragment.group(0).strip(), "repeat", fragment.start(), fragment.end())
    words = lang.words(query)
    additive = ADDITIVE.match(query)
    if additive is not None and not found and len(words) <= ADDITIVE_WORDS \
            and not PERSONS.intersection(words):
        add(query.strip(" .!?"), "repeat", additive.start(), additive.end())
    for m in PRONOUN_RE.finditer(query):
        if pronoun_ok(query, m):
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
    if ref.kind != "selection" or SELECT.search(ref.text) is not None:
        return False
    noun = SELECT_NOUN_DE.match(ref.text)
    return noun is not None and not shared_count(text_stems(noun.group(2)), text_stems(last))
