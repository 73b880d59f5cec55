"""The resolver: detect the references of a query, bind each to the recent history and
build the ``[Context: ...]`` suffix or a clarification."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from memlane.errors import InvalidInputError
from memlane.models import Message
from memlane.state import language as lang
from memlane.state.references.bind_named import (
    predicate_reading,
    resolve_entity,
    resolve_named,
    resolve_place_or_time,
    resolve_repeat,
    resolve_reply,
    resolve_selection,
    resolve_topic,
)
from memlane.state.references.bind_pronouns import resolve_pronoun
from memlane.state.references.candidates import collect_candidates
from memlane.state.references.clarification import ask_between_alternatives, clarification_for
from memlane.state.references.cues import detect_references
from memlane.state.references.records import Reference, Resolution

if TYPE_CHECKING:
    from memlane.ports import MessageLog
    from memlane.state.tracker import SessionState


HISTORY = 12


def _confirm_what_is_named(refs: list[Reference]) -> None:
    """"ja, setze deinen Vorschlag um": one reference, not two.

    A confirmation or negation next to a named reference ("your suggestion", "the
    second one", "that command") confirms or rejects what that reference names, so it
    takes over the reference's target - or its ambiguity, and then the resolver asks
    instead of pairing "ja" with the last answer and "deinen Vorschlag" with another.
    """
    named = next(
        (r for r in refs if r.kind in ("reference", "selection", "entity")
         and (r.target is not None or r.ambiguous)),
        None,
    )
    if named is None:
        return
    for ref in refs:
        if ref.kind in ("confirmation", "negation"):
            ref.target = named.target
            ref.message_id = named.message_id
            ref.message_text = named.message_text
            ref.confidence = named.confidence
            ref.ambiguous = named.ambiguous
            ref.candidates = list(named.candidates)
            ref.description = None  # the named reference carries the context note


def resolve(
    query: str,
    history: Sequence[Message],
    *,
    job_refs: Sequence[str] = (),
    language: str | None = None,
) -> Resolution:
    """Resolve the references in ``query`` against ``history`` (oldest first).

    ``job_refs`` are the active job ids the session state knows (newest first);
    ``language`` is the conversation's language, used when the query itself is
    too short to tell ("ok", "2").
    """
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("query must be a non-empty string")
    lng = lang.detect_language(query, default="de" if language == "de" else "en")
    refs = detect_references(query)
    if not refs:
        return Resolution(query, query, [], 1.0, lng)
    cands = collect_candidates(history, job_refs)
    for ref in refs:
        if ref.kind in ("confirmation", "negation"):
            resolve_reply(ref, history, cands, query)
        elif ref.kind == "reference":
            resolve_named(ref, history, cands, query)
        elif ref.kind == "selection":
            resolve_selection(ref, history)
        elif ref.kind == "entity":
            resolve_entity(ref, history, cands, query)
            predicate_reading(ref, query)
        elif ref.kind in ("place", "time"):
            resolve_place_or_time(ref, history)
        elif ref.kind == "repeat":
            resolve_repeat(ref, cands)
        elif ref.kind == "topic":
            resolve_topic(ref, query, history)
    _confirm_what_is_named(refs)
    named = [r for r in refs if r.kind != "pronoun" and r.target is not None]
    # A named reference ("deinen Vorschlag") outranks a reply cue ("ja") as the anchor.
    named.sort(key=lambda r: r.kind in ("confirmation", "negation"))
    for ref in refs:
        if ref.kind == "pronoun":
            resolve_pronoun(ref, query, history, cands, named)
    ask_between_alternatives(refs, history, query)
    parts: list[str] = []
    seen: set[int | str | None] = set()
    # One context note per earlier message; what the user named beats a bare "ja"/"nein".
    for ref in sorted(refs, key=lambda r: (r.kind in ("confirmation", "negation"), r.start)):
        if ref.target is None or not ref.description:
            continue
        key = ref.message_id if ref.message_id is not None else ref.target
        if key not in seen:
            seen.add(key)
            parts.append(ref.description)
    resolved = f"{query} [Context: {'; '.join(parts)}]" if parts else query
    clarification: str | None = None
    options: list[str] = []
    # Ask about what the user named ("deinen Vorschlag"), not about the "ja" that adopted it.
    unclear = next(
        (r for r in sorted(refs, key=lambda r: r.kind in ("confirmation", "negation"))
         if r.ambiguous),
        None,
    )
    # With nothing to offer, only a request or a question needs asking back ("delete it");
    # "that is all for today" does not.
    if unclear is None and not parts and (
        any(c.offerable for c in cands) or lang.infer_intent(query) in ("command", "question")
    ):
        unclear = next((r for r in refs if r.kind == "pronoun" and r.target is None), None)
    if unclear is not None:
        clarification, options = clarification_for(unclear, lng)
    confidence = min(r.confidence for r in refs)
    return Resolution(query, resolved, refs, round(confidence, 4), lng, clarification, options)


def resolve_in_session(
    log: MessageLog, state_of: Callable[[str], SessionState], query: str, session_id: str
) -> Resolution:
    """``Memory.resolve_references``: resolve ``query`` against the session's recent history
    and its state (``state_of(session_id)``, asked only when the session exists)."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("query must be a non-empty string")
    if not isinstance(session_id, str) or not session_id:
        raise InvalidInputError("session_id must be a non-empty string")
    if log.get_session(session_id) is None:
        return resolve(query, [])  # a session about to be auto-created has no history yet
    history = list(reversed(log.recent_messages(session_id, HISTORY)))
    state = state_of(session_id)
    return resolve(query, history, job_refs=state.active_job_refs, language=state.language)
