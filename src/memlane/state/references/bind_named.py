"""Binding the references that name what they point to: replies ("ja", "nein"), named
references ("your suggestion"), selections, entities ("the task"), topics, places and
times, and fragments that repeat the last action."""

from __future__ import annotations

import re
from collections.abc import Sequence

from memlane.models import Message
from memlane.patterns import lazy_compile
from memlane.state import antecedents as ante
from memlane.state import language as lang
from memlane.state.references.binding import actionable, bind, focus_of, mark_ambiguous, nearest_turn, one_plan
from memlane.state.references.candidates import LIST_ITEM, last_assistant
from memlane.state.references.cue_patterns import CONTINUE, REF_DE, REF_EN, RESULT_REF, SELECT, SELECT_NOUN_DE
from memlane.state.references.lexicon import (
    COMMAND_NOUNS,
    COPULA,
    FLAGS,
    NOUNS_DE,
    NOUNS_EN,
    ORDINALS,
    TASK_NOUNS,
    TOOL_NOUNS,
)
from memlane.state.references.matching import best_qualified, shared_count, text_stems, turn_about
from memlane.state.references.pronouns import prev_word
from memlane.state.references.records import Candidate, Reference, snip


def resolve_reply(ref: Reference, history: Sequence[Message], cands: Sequence[Candidate] = (),
                   query: str = "") -> None:
    """Confirmations and negations react to the assistant's last message."""
    msg = last_assistant(history)
    if msg is None:
        ref.confidence = 0.2
        return
    what, text = focus_of(msg)
    snippet = snip(text)
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
        chosen = best_qualified(options, query, ref)
        if len(chosen) == 1:
            c = chosen[0]
            bind(ref, c.target, c.message_id, c.message_text, 0.8, f"User chooses: {snip(c.target)}")
        else:
            mark_ambiguous(ref, options)
        return
    if ref.kind == "negation":
        bind(ref, text, msg.id, msg.content, 0.85, f"User rejects the previous {what}: {snippet}")
    elif CONTINUE.search(ref.text):
        bind(ref, text, msg.id, msg.content, 0.85, f"Continue with: {snippet}")
    else:
        confidence = 0.9 if what != "answer" else 0.7
        bind(ref, text, msg.id, msg.content, confidence,
             f"User confirms the previous {what}: {snippet}")


def resolve_named(ref: Reference, history: Sequence[Message], cands: list[Candidate],
                   query: str = "") -> None:
    """'your suggestion', 'the previous answer', 'what you said', 'deinen Vorschlag'."""
    m = REF_EN.search(ref.text) or REF_DE.search(ref.text) or RESULT_REF.search(ref.text)
    noun = m.group(1).lower() if m else ""
    what = NOUNS_EN.get(noun) or NOUNS_DE.get(noun) or "answer"
    if m is None and re.search(r"suggest|propos|recommend|vorgeschlagen", ref.text, FLAGS):
        what = "suggestion"
    if noun in COMMAND_NOUNS or ref.kind == "entity":
        what = "command"
    mine = [c for c in cands if c.role == "assistant" and c.message_id is not None]
    ran = [c for c in mine if c.kind in ("action", "command")] if what == "result" else []
    if ran:  # the result of what the assistant ran: the command and what it reported
        c = nearest_turn(ran)[0]
        outcome = c.answer or c.sentence
        bind(ref, c.target, c.message_id, c.message_text, 0.85,
             f"'{ref.text}' is the result of `{c.target}`: {snip(outcome, 160)}")
        return
    if what == "result" and not REF_EN.search(ref.text) and not REF_DE.search(ref.text):
        ref.confidence = 0.2  # "the result was fine" with nothing run: no result to point at
        return
    if what == "list":
        items = [c for c in mine if c.in_list]
        if items:
            same = nearest_turn(items)
            joined = "; ".join(c.target for c in same)
            bind(ref, joined, same[0].message_id, same[0].message_text, 0.85,
                 f"The previous list was: {joined}")
            return
    elif what in ("suggestion", "command"):
        matching = [c for c in mine if (c.suggested or c.kind in ("suggestion", "item"))] \
            if what == "suggestion" else [c for c in mine if c.kind == "command"]
        qualified = best_qualified(matching, query, ref)
        topic = None if qualified else turn_about(history, query, ref, topic_only=True)
        if topic is not None:  # "dein Tipp zu den Schlüsseln": the turn about the keys
            bind(ref, topic.content, topic.id, topic.content, 0.8,
                 f"Previous answer was: {snip(topic.content)}")
            return
        matching = qualified or matching
        if matching:
            same = one_plan(nearest_turn(matching))
            if len(same) > 1:
                mark_ambiguous(ref, same)
                return
            c = same[0]
            confidence = 0.9 if c.distance <= 1 else 0.75
            text = c.sentence if what == "suggestion" else c.target
            if what == "suggestion":
                description = f"Previous suggestion was: {text}"
            else:
                description = f"'{ref.text}' is the command `{c.target}`"
            bind(ref, c.target, c.message_id, c.message_text, confidence, description)
            return
    msg = turn_about(history, query, ref) or last_assistant(history)
    if msg is None:
        ref.confidence = 0.1
        return
    confidence = 0.9 if what == "answer" else 0.5
    bind(ref, msg.content, msg.id, msg.content, confidence,
         f"Previous answer was: {snip(msg.content)}")


def resolve_selection(ref: Reference, history: Sequence[Message]) -> None:
    m = SELECT.search(ref.text)
    msg = last_assistant(history)
    noun = SELECT_NOUN_DE.match(ref.text) if m is None else None
    if msg is None or (noun is not None and not shared_count(text_stems(noun.group(2)), text_stems(msg.content))):
        return  # "der erste Schultag" is no option of an answer that never spoke of one
    if noun is not None:
        index = ORDINALS[noun.group(1).lower()]
    elif m is not None:
        index = ORDINALS[m.group(1).lower()] if m.group(1) else int(m.group(2) or m.group(3))
    else:
        return
    items = [i.strip() for i in LIST_ITEM.findall(msg.content)] or _inline_items(msg.content)
    if index == -1:
        index = len(items)
    if 1 <= index <= len(items):
        item = items[index - 1]
        bind(ref, item, msg.id, msg.content, 0.9, f"Option {index} was: {snip(item)}")


_RUN_ON_LIST = lazy_compile(r":\s*([^:]+?)\s*[.!]?\s*$")


_LIST_SEPARATOR = lazy_compile(r"\s*[,;]\s*(?:(?:or|and|oder|und)\s+)?|\s+(?:or|and|oder|und)\s+", FLAGS)


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


def resolve_entity(ref: Reference, history: Sequence[Message], cands: list[Candidate],
                    query: str = "") -> None:
    words = lang.words(ref.text)
    noun = words[-1].split("-")[-1] if words else ""  # "Update-Befehl" is a Befehl
    if noun in TOOL_NOUNS:
        actions = [c for c in cands if c.kind == "action"]
        if actions:
            c = nearest_turn(actions)[0]
            bind(ref, c.target, c.message_id, c.message_text, 0.85, f"'{ref.text}' is {c.describe()}")
            return
    if noun in TASK_NOUNS:
        jobs = [c for c in cands if c.kind == "job"]
        if jobs:
            same = nearest_turn(jobs)
            if len(same) > 1 and same[0].message_id is not None:
                mark_ambiguous(ref, same)
                return
            c = same[0]
            confidence = 0.9 if c.distance <= 1 else 0.7
            bind(ref, c.target, c.message_id, c.message_text, confidence,
                 f"'{ref.text}' is {c.target}")
            return
    if noun in COMMAND_NOUNS:
        resolve_named(ref, history, cands, query)
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
                bind(ref, sentence, msg.id, msg.content, 0.75,
                     f"'{ref.text}' refers to: {snip(sentence)}")
                return
    ref.confidence = 0.4  # a descriptive phrase still reads fine unresolved


def predicate_reading(ref: Reference, query: str) -> None:
    """"Is this safe on a shared repo?": after a copula, "this <word>" that names nothing in
    the conversation is the pronoun and its predicate, not a demonstrative and a noun."""
    words = ref.text.split()
    if ref.target is None and len(words) == 2 and words[0].lower() in ("this", "that") \
            and prev_word(query, ref.start) in COPULA:
        ref.kind, ref.text, ref.end = "pronoun", words[0], ref.start + len(words[0])


def resolve_topic(ref: Reference, query: str, history: Sequence[Message]) -> None:
    """"About hashing: which parameters?": the answer of the turn about that topic; a topic
    no earlier turn is about is new, and the query stays as it is."""
    msg = turn_about(history, query, ref, topic_only=True)
    if msg is None:
        ref.confidence = 0.5
        return
    bind(ref, msg.content, msg.id, msg.content, 0.8, f"Previous answer about it was: {snip(msg.content)}")


def resolve_place_or_time(ref: Reference, history: Sequence[Message]) -> None:
    found = ante.find_place(history) if ref.kind == "place" else ante.find_time(history)
    if found is None:
        ref.confidence = 0.3
        return
    bind(ref, found.text, found.message.id, found.message.content, 0.8,
         f"'{ref.text}' refers to {found.text} ({snip(found.sentence, 100)})")


def resolve_repeat(ref: Reference, cands: list[Candidate]) -> None:
    """"now for /var": the last action again, with what the fragment names."""
    acts = actionable(cands)
    if not acts:
        # Nothing the assistant ran or offered: the last request itself is repeated
        # ("Translate 'good morning' into Italian." - "again, but in Spanish").
        turns = [c for c in cands if c.kind == "message" and c.message_id is not None]
        if not turns:
            ref.confidence = 0.3
            return
        c = nearest_turn(turns)[0]
        bind(ref, c.target, c.message_id, c.message_text, 0.6,
             f"Repeat the request {c.describe()} with: {ref.text}")
        return
    same = one_plan(nearest_turn(acts))
    commands = [c for c in same if c.kind in ("command", "action")]
    same = commands or same
    if len(same) > 1:
        mark_ambiguous(ref, same)
        return
    c = same[0]
    bind(ref, c.target, c.message_id, c.message_text, 0.75,
         f"Repeat {c.describe()} with: {ref.text}")
