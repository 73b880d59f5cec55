"""Asking instead of guessing: the alternatives an answer leaves open and the numbered
clarification question in the query's language (seed 004)."""

from __future__ import annotations

from collections.abc import Sequence

from memlane.language import STOPWORDS
from memlane.models import Message
from memlane.patterns import lazy_compile
from memlane.state import language as lang
from memlane.state.references.binding import bind, mark_ambiguous
from memlane.state.references.candidates import LIST_ITEM, last_assistant, turns_newest_first
from memlane.state.references.lexicon import FLAGS
from memlane.state.references.matching import best_qualified
from memlane.state.references.records import Candidate, Reference, snip

MAX_OPTIONS = 3


_DISJUNCTION = lazy_compile(r"\s*,?\s*\b(?:or|oder)\b\s*", FLAGS)


_EITHER = lazy_compile(r"^\W*(?:either|entweder)\s+", FLAGS)


#: A list header that calls its items alternatives ("Two options:", "Zwei Möglichkeiten:"), not
#: steps or ingredients: the nouns of choosing, in both languages.
_OPTIONS_HEADER = lazy_compile(
    r"\b(?:options?|choices?|alternatives?|ways|ideas|possibilities|möglichkeiten|optionen|"
    r"alternativen|wege|ideen|varianten)\b", FLAGS)


#: The bare words that point at "the thing you proposed" without saying which one.
_BARE = frozenset("it that this das es dies".split())


def _alternatives(msg: Message) -> list[str]:
    """The choice the assistant's answer leaves open: the parts of a one-sentence answer
    joined by "or"/"oder" ("the climbing hall or the farmers' market"), or the items of a
    list its header calls options; [] when it proposes one thing."""
    items = [i.strip() for i in LIST_ITEM.findall(msg.content)]
    if len(items) >= 2:
        return items if _OPTIONS_HEADER.search(LIST_ITEM.sub("", msg.content)) else []
    sents = lang.sentences(msg.content)
    if len(sents) != 1:
        return []  # "Oat milk or regular? I'd add oat milk.": the answer recommends one
    parts = [_EITHER.sub("", p).strip(" .!?,;:") for p in _DISJUNCTION.split(sents[0])]
    # every part must name something: "passt das so, oder?" offers no second option
    if len(parts) < 2 or not all(
            any(len(w) > 2 and w not in STOPWORDS for w in lang.words(p)) for p in parts):
        return []
    return parts


def ask_between_alternatives(refs: list[Reference], history: Sequence[Message], query: str) -> None:
    """"Let's do it" after "the climbing hall or the farmers' market": a bare pronoun or a
    yes to an answer that offers a choice picks none of them - unless a word of the query
    names one ("ok, the market"), it asks, with the alternatives as options."""
    last = last_assistant(history)
    options = _alternatives(last) if last is not None else []
    if last is None or not options:
        return
    recent = {m.id for m in turns_newest_first(history)[0]} | {last.id}
    for ref in refs:
        bare = ref.kind == "confirmation" or (ref.kind == "pronoun" and ref.text.lower() in _BARE)
        if not bare or (ref.target is not None and ref.message_id not in recent):
            continue  # "it" bound to something older than the answer with the choice
        cands = [Candidate("item", snip(o, 120), last.id, snip(last.content, 300), "assistant", 0,
                           1.0, snip(o), True, True) for o in options]
        chosen = best_qualified(cands, query, ref)
        if len(chosen) == 1:
            c = chosen[0]
            bind(ref, c.target, c.message_id, c.message_text, 0.8, f"User chooses: {snip(c.target)}")
        else:
            ref.target, ref.description = None, None
            mark_ambiguous(ref, cands)


def clarification_for(ref: Reference, language: str) -> tuple[str, list[str]]:
    options: list[str] = []
    for cand in ref.candidates:
        if not cand.offerable:
            continue  # the user knows what they said; offer what the assistant proposed or did
        label = cand.label(language)
        if label not in options:
            options.append(label)
    options = options[:MAX_OPTIONS]
    if language == "de":
        head = f"Ich bin mir nicht sicher, worauf sich '{ref.text}' bezieht."
        ask, other, vague = "Meinten Sie:", "Etwas anderes?", "Können Sie das genauer sagen?"
    else:
        head = f"I'm not sure what '{ref.text}' refers to."
        ask, other, vague = "Did you mean:", "Something else?", "Could you say what you mean?"
    if not options:
        return f"{head} {vague}", []
    lines = [f"{i}. {label}" for i, label in enumerate([*options, other], 1)]
    return f"{head} {ask}\n" + "\n".join(lines), options
