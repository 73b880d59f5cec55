"""Helpers every binder shares: binding a reference to its target, marking it ambiguous,
the nearest turn's candidates, what the assistant's last message offers."""

from __future__ import annotations

from dataclasses import replace

from memlane.models import Message
from memlane.patterns import lazy_compile
from memlane.state import language as lang
from memlane.state.references.lexicon import FLAGS
from memlane.state.references.records import Candidate, Reference, snip

_ELLIPTICAL = 3  # words at most in a question that leaves out what it asks about


def focus_of(msg: Message) -> tuple[str, str]:
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


def bind(ref: Reference, target: str, msg_id: int | None, msg_text: str | None,
         confidence: float, description: str) -> None:
    """Bind ``ref`` to ``target`` (snipped) in the message it came from."""
    ref.target = snip(target)
    ref.message_id = msg_id
    ref.message_text = msg_text
    ref.confidence = round(confidence, 4)
    ref.description = description


def mark_ambiguous(ref: Reference, cands: list[Candidate], confidence: float = 0.3) -> None:
    """Leave ``ref`` unbound with the ``cands`` a clarification offers."""
    ref.ambiguous = True
    ref.candidates = cands
    ref.confidence = confidence


def nearest_turn(cands: list[Candidate]) -> list[Candidate]:
    """The candidates of the newest turn that has any."""
    nearest = min(c.distance for c in cands)
    return [c for c in cands if c.distance == nearest]


_SEQUENCE = lazy_compile(r"\b(?:and\s+then|then|afterwards|after\s+that|und\s+dann|dann|danach|anschließend)\b", FLAGS)


def one_plan(cands: list[Candidate]) -> list[Candidate]:
    """Commands of one suggested sequence ("create it with A and then set a password with B")
    are one plan, not a choice: they collapse into their sentence."""
    sentences_ = {c.sentence for c in cands}
    if len(cands) > 1 and len(sentences_) == 1:
        sentence = cands[0].sentence
        if _SEQUENCE.search(sentence) and any(c.suggested for c in cands):
            plan = replace(cands[0], kind="suggestion", target=sentence)
            return [plan]
    return cands


def actionable(cands: list[Candidate]) -> list[Candidate]:
    """What the assistant offered or did, nearest first: commands, tool calls, suggestions."""
    return [c for c in cands if c.role == "assistant" and c.message_id is not None
            and (c.kind in ("command", "action") or c.suggested or c.kind == "suggestion")]
