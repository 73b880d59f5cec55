"""Binding a pronoun ("it", "sie", "them") by person, gender, the query's anchor, an offer,
a reported fault or salience - or marking it ambiguous when two referents are close."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from memlane.language import STOPWORDS
from memlane.models import Message
from memlane.patterns import lazy_compile
from memlane.state import antecedents as ante
from memlane.state import language as lang
from memlane.state.references.binding import bind, focus_of, mark_ambiguous, nearest_turn, one_plan
from memlane.state.references.candidates import last_assistant, rank
from memlane.state.references.lexicon import FLAGS, GERMAN_PERSONAL, PERSONAL, PLURAL
from memlane.state.references.matching import turn_about
from memlane.state.references.records import AMBIGUITY_RATIO, Candidate, Reference, snip


def _agreeing(ref: Reference, history: Sequence[Message]) -> tuple[str, Message] | None:
    """German: the newest noun phrase of the last assistant turn whose article agrees with
    the pronoun ("sie" -> "eine PostgreSQL-Datenbank", "ihn" -> "den Raspberry Pi 5")."""
    for msg in reversed(history):
        if msg.role == "user":
            return None
        if msg.role == "assistant" and msg.content.strip():
            found = ante.gender_of(msg.content, ref.text)
            if found is not None:
                return found, msg
    return None


# Verbs whose object is a fault, not a thing to run: "fix it", "how do I free it",
# "Reparier das", "Wie gebe ich ihn frei?" (a separable verb: its particle "frei" ends the clause).
_REPAIR = lazy_compile(
    r"\b(?:fix|fixe?n?|repair|solve|resolve|free|unblock|troubleshoot|debug|"
    r"reparier\w*|beheb\w*|behob\w*|lös(?!ch)\w*|beseitig\w*|frei(?:geben|machen|bekommen)?)\b",
    FLAGS,
)


# What reports a fault: an error, something failing, taken, full, refused or missing.
_FAULT = lazy_compile(
    r"\b(?:error|errors|fail(?:s|ed|ing|ure)?|crash(?:es|ed|ing)?|broken|in\s+use|denied|refused|"
    r"not\s+found|timed?\s+out|conflicts?|full|"
    r"fehler\w*|fehlgeschlagen|schlägt\s+fehl|abgestürzt|stürzt|kaputt|belegt|verweigert|"
    r"nicht\s+gefunden|voll|konflikt\w*|zeitüberschreitung)\b",
    FLAGS,
)


def _fault(history: Sequence[Message]) -> tuple[str, Message] | None:
    """The newest sentence of the last turn that reports a fault (the assistant's diagnosis
    before the user's complaint): what "fix it" or "Wie gebe ich ihn frei?" is about."""
    for msg in reversed(history):
        if msg.role != "system" and msg.content.strip():
            for sentence in reversed(lang.sentences(msg.content)):
                if _FAULT.search(sentence):
                    return sentence, msg
        if msg.role == "user":
            return None
    return None


def resolve_pronoun(ref: Reference, query: str, history: Sequence[Message],
                     cands: list[Candidate], resolved: list[Reference]) -> None:
    word = ref.text.lower()
    plural = word in PLURAL
    if word in PERSONAL:
        person = ante.find_person(history, PERSONAL[word])
        if person is not None:
            bind(ref, person.text, person.message.id, person.message.content, 0.8,
                 f"'{ref.text}' refers to {person.text} ({person.sentence})")
            return
    if word == "sie" and any(c.in_list and c.distance == 0 for c in cands):
        plural = True  # "Starte sie neu" after a list: sie is plural
    anchor = next((r for r in resolved if r.target is not None), None)
    if anchor is not None and not plural:
        # "yes, do it" / "ja, setz das um": the pronoun is what the rest of the query names.
        bind(ref, anchor.target or "", anchor.message_id, anchor.message_text,
             anchor.confidence, "")
        return
    topic = turn_about(history, query, ref, topic_only=True) if not plural else None
    if topic is not None:  # "what was that again about cron?": the turn about cron
        bind(ref, topic.content, topic.id, topic.content, 0.75,
             f"'{ref.text}' refers to the answer: {snip(topic.content)}")
        return
    last = last_assistant(history)
    if last is not None and not plural:
        what, text = focus_of(last)
        if what == "offer":  # "Shall I restart nginx?" - "do it"
            bind(ref, text, last.id, last.content, 0.8, f"'{ref.text}' refers to: {snip(text)}")
            return
    fault = _fault(history) if not plural and _REPAIR.search(query) else None
    if fault is not None:
        sentence, msg = fault
        bind(ref, sentence, msg.id, msg.content, 0.75, f"'{ref.text}' refers to the problem: {snip(sentence)}")
        return
    if word in GERMAN_PERSONAL and not plural and anchor is None:
        agreeing = _agreeing(ref, history)
        if agreeing is not None:
            noun, msg = agreeing
            # The sentence around the noun says which one: "das Programm" is Borg in
            # "Nimm Borg: das Programm dedupliziert ..." (as a person's note gives the sentence).
            where = next((s for s in lang.sentences(msg.content) if noun in s), "")
            note = f"'{ref.text}' refers to {noun}" + (f" ({snip(where, 120)})" if where else "")
            bind(ref, noun, msg.id, msg.content, 0.75, note)
            return
    if not cands:
        ref.confidence = 0.1
        return
    if plural:
        items = [c for c in cands if c.in_list and c.distance == 0]
        if len(items) >= 2:
            joined = "; ".join(c.target for c in items)
            bind(ref, joined, items[0].message_id, items[0].message_text, 0.8,
                 f"'{ref.text}' refers to: {joined}")
            return
    ranked = rank(cands, query, ref)
    top = [c for c, _ in ranked if c.score >= AMBIGUITY_RATIO * ranked[0][0].score]
    plan = one_plan(nearest_turn(top)) if top else []
    if len(plan) == 1 and plan[0].target not in {c.target for c in top}:
        c = plan[0]  # the commands of one suggested sequence: that sequence
        bind(ref, c.target, c.message_id, c.message_text, 0.75, f"'{ref.text}' refers to: {snip(c.target)}")
        return
    best, best_overlap = ranked[0]
    if not plural and best.kind == "message" and best.answer:
        # "Firefox for browsing and Thunderbird for mail." - "Install it.": an answer that
        # names two things side by side is a choice, whether or not it is a list.
        named = _side_by_side(best.answer)
        chosen = [n for n in named if n.lower() in query.lower()]
        if len(named) >= 2 and len(chosen) != 1:
            mark_ambiguous(ref, [replace(best, kind="item", target=n, role="assistant", in_list=True)
                             for n in named])
            return
    runner, runner_overlap = ranked[1] if len(ranked) > 1 else (None, 0)
    # Close in salience and no word in the query to tell them apart: ask, do not guess.
    if runner is not None and runner.score >= AMBIGUITY_RATIO * best.score \
            and runner_overlap >= best_overlap:
        mark_ambiguous(ref, [c for c, _ in ranked if c.score >= AMBIGUITY_RATIO * best.score],
                   best.score / (best.score + runner.score))
        return
    confidence = 0.8 if runner is None else 0.5 + 0.45 * (1.0 - runner.score / best.score)
    if best.distance > 0:
        confidence -= 0.1
    if best_overlap > runner_overlap:  # the query names it: "restart it" after a restart
        confidence = max(confidence, 0.7)
    bind(ref, best.target, best.message_id, best.message_text, confidence,
         f"'{ref.text}' refers to {best.describe()}")


_COORDINATION = lazy_compile(r"\s*(?:[;,]|\b(?:and|or|und|oder|sowie)\b)\s*", FLAGS)


def _side_by_side(answer: str) -> list[str]:
    """The names a one-sentence answer sets side by side: every coordinated part opens on
    a capitalised name ("Obsidian stores ...; Joplin syncs ..."); [] when any part does not."""
    if len(lang.sentences(answer)) != 1:
        return []
    parts = [p for p in _COORDINATION.split(answer.strip()) if p.strip()]
    heads: list[str] = []
    for part in parts:
        words = part.split()
        head = words[0].strip("`*\"'“”„:.!") if words else ""
        if not head[:1].isupper() or head.lower() in STOPWORDS or len(words) > 6:
            return []
        heads.append(head)
    return heads if len(set(heads)) >= 2 else []
