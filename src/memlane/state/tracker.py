"""Session state: what the conversation is about and what is still open.

The tracker watches every durable append (``Memory.add_observer``) and folds the
new messages into a :class:`SessionState`: active topics (keyphrases, decayed
so old topics fade), open loops (user questions not yet answered, things the
assistant promised to do), pending clarifications (the assistant asked the
user something), active job refs, resolved entities, last intent (the caller's,
else a coarse one from ``language.infer_intent``), last response type and turn
count. It is cheap, deterministic and offline: word lists and regular
expressions (``state/language.py``), no model.

The state is derived data: it lives in the store's ``derived`` area under the
kind ``"state"`` and can always be rebuilt from the log (:func:`rebuild_state`).
Because the update is a pure fold over the messages in log order, replaying
the log gives exactly the state the live tracker built. Each saved state
remembers the last message it has seen, so :func:`get_state` catches up on
messages it missed (a crash between the append and the observer, another
process writing without a tracker) instead of trusting a stale copy.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memlane.context.keyphrases import extract_keyphrases, tokenize_words
from memlane.errors import CorruptRecordError, InvalidInputError, MemlaneError, SessionNotFoundError
from memlane.language import Language, content_stems, detect_language, stem
from memlane.models import JSON, SESSION_STATUSES, Message, Session, Turn, utcnow
from memlane.state import language as lang
from memlane.state.language import extract_job_refs

if TYPE_CHECKING:
    from memlane.context.summaries import SummaryRecord
    from memlane.ports import Essentials, MessageLog, SessionStore

log = logging.getLogger(__name__)

__all__ = [
    "STATE_KIND",
    "STATE_STATUSES",
    "OpenLoop",
    "SessionState",
    "StateTracker",
    "classify_response",
    "compute_topics",
    "extract_job_refs",
    "get_state",
    "rebuild_state",
    "save_state",
]

#: The ``derived`` kind the state is stored under.
STATE_KIND = "state"
#: Bumped when the update rules change, so stored states are rebuilt with the new rules.
STATE_VERSION = 2
#: The PRD's statuses. The session lifecycle adds "ended" and "archived" (models.SESSION_STATUSES).
STATE_STATUSES: tuple[str, ...] = (
    "active", "paused", "resuming", "awaiting_clarification", "shutdown_clean"
)

# Tuning. Topics come from the last TOPIC_WINDOW messages; each mention counts
# TOPIC_DECAY**age (age 0 = newest), so a topic must keep coming up to stay active.
TOPIC_WINDOW = 10
TOPIC_DECAY = 0.8
TOPIC_MIN_SCORE = 0.6
TOPIC_CANDIDATES = 15
ACTIVE_TOPICS = 5
MAX_LOOPS = 12
MAX_JOB_REFS = 10
MAX_ENTITIES = 20
HISTORY = 12  # messages of context the reference resolver and the topics look at
ASSISTANT_TOPIC_WEIGHT = 0.7


@dataclass(slots=True)
class OpenLoop:
    """Something the conversation still owes: an unanswered question or a promise."""

    kind: str  # "question" (the user asked) | "promise" (the assistant said it would)
    text: str
    message_id: int | None = None
    turn: int = 0  # turn_count when it was opened

    def to_dict(self) -> JSON:
        return {"kind": self.kind, "text": self.text, "message_id": self.message_id, "turn": self.turn}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OpenLoop:
        kind, text = data.get("kind"), data.get("text")
        if kind not in ("question", "promise") or not isinstance(text, str):
            raise InvalidInputError(f"an open loop needs kind question|promise and text, got {data!r}")
        mid = data.get("message_id")
        return cls(kind, text, int(mid) if isinstance(mid, int) else None, int(data.get("turn") or 0))


def _str_list(data: Mapping[str, Any], key: str) -> list[str]:
    value = data.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidInputError(f"SessionState.{key} must be a list of strings")
    return list(value)


def _opt_str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidInputError(f"SessionState.{key} must be a string or null")
    return value


@dataclass(slots=True)
class SessionState:
    """The live state of one session (PRD-014 ``SessionState`` plus resolved entities)."""

    session_id: str
    status: str = "active"
    active_topics: list[str] = field(default_factory=list)
    pending_clarifications: list[str] = field(default_factory=list)
    open_loops: list[str] = field(default_factory=list)
    active_job_refs: list[str] = field(default_factory=list)
    resolved_entities: dict[str, str] = field(default_factory=dict)
    last_intent: str | None = None
    last_response_type: str | None = None
    turn_count: int = 0
    rolling_summary: str | None = None
    updated_at: datetime = field(default_factory=utcnow)
    # Bookkeeping that makes each update O(new messages): the structured loops behind
    # open_loops, the topic scores behind active_topics, the conversation's language
    # and the last message folded in.
    loops: list[OpenLoop] = field(default_factory=list)
    topic_scores: dict[str, float] = field(default_factory=dict)
    language: str = "en"
    last_message_id: int = 0
    last_assistant_message_id: int = 0
    message_count: int = 0
    version: int = STATE_VERSION
    #: Process-local: which forget this copy has seen (not stored, not compared).
    generation: int = field(default=0, compare=False, repr=False)

    def to_dict(self) -> JSON:
        return {
            "session_id": self.session_id,
            "status": self.status,
            "active_topics": list(self.active_topics),
            "pending_clarifications": list(self.pending_clarifications),
            "open_loops": list(self.open_loops),
            "active_job_refs": list(self.active_job_refs),
            "resolved_entities": dict(self.resolved_entities),
            "last_intent": self.last_intent,
            "last_response_type": self.last_response_type,
            "turn_count": self.turn_count,
            "rolling_summary": self.rolling_summary,
            "updated_at": self.updated_at.isoformat(),
            "loops": [loop.to_dict() for loop in self.loops],
            "topic_scores": dict(self.topic_scores),
            "language": self.language,
            "last_message_id": self.last_message_id,
            "last_assistant_message_id": self.last_assistant_message_id,
            "message_count": self.message_count,
            "version": self.version,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionState:
        """Inverse of :meth:`to_dict`; raises InvalidInputError naming a bad field."""
        if not isinstance(data, Mapping):
            raise InvalidInputError("SessionState.from_dict needs a mapping")
        sid = data.get("session_id")
        if not isinstance(sid, str) or not sid:
            raise InvalidInputError("SessionState.session_id must be a non-empty string")
        status = data.get("status", "active")
        if status not in SESSION_STATUSES:
            raise InvalidInputError(
                f"SessionState.status must be one of {sorted(SESSION_STATUSES)}, got {status!r}"
            )
        entities = data.get("resolved_entities") or {}
        if not isinstance(entities, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in entities.items()
        ):
            raise InvalidInputError("SessionState.resolved_entities must map strings to strings")
        updated = data.get("updated_at")
        try:
            when = datetime.fromisoformat(updated) if isinstance(updated, str) else utcnow()
        except ValueError as exc:
            raise InvalidInputError(f"SessionState.updated_at {updated!r} is not ISO-8601") from exc
        scores = data.get("topic_scores") or {}
        if not isinstance(scores, Mapping):
            raise InvalidInputError("SessionState.topic_scores must map topics to scores")
        loops_raw = data.get("loops") or []
        if not isinstance(loops_raw, list):
            raise InvalidInputError("SessionState.loops must be a list")

        def _int(key: str) -> int:
            value = data.get(key) or 0
            if not isinstance(value, int):
                raise InvalidInputError(f"SessionState.{key} must be an integer")
            return value

        state = cls(
            session_id=sid,
            status=str(status),
            active_topics=_str_list(data, "active_topics"),
            pending_clarifications=_str_list(data, "pending_clarifications"),
            open_loops=_str_list(data, "open_loops"),
            active_job_refs=_str_list(data, "active_job_refs"),
            resolved_entities=dict(entities),
            last_intent=_opt_str(data, "last_intent"),
            last_response_type=_opt_str(data, "last_response_type"),
            turn_count=_int("turn_count"),
            rolling_summary=_opt_str(data, "rolling_summary"),
            updated_at=when,
            loops=[OpenLoop.from_dict(x) for x in loops_raw],
            topic_scores={str(k): float(v) for k, v in scores.items()},
            language=str(data.get("language") or "en"),
            last_message_id=_int("last_message_id"),
            last_assistant_message_id=_int("last_assistant_message_id"),
            message_count=_int("message_count"),
            version=_int("version") or STATE_VERSION,
        )
        if "open_loops" in data and not loops_raw and state.open_loops:
            # A state written by another runtime may carry only the flat list.
            state.loops = [OpenLoop("question", text) for text in state.open_loops]
        return state


# --------------------------------------------------------------------- cues

_JOB_DONE_RE = re.compile(
    r"\b(?:done|finished|completed|succeeded|cancel+ed|failed|stopped|closed|resolved|"
    r"erledigt|fertig|abgeschlossen|abgebrochen|beendet|fehlgeschlagen|gestoppt)\b",
    re.IGNORECASE,
)
_CLARIFY_RE = re.compile(
    r"\bdid\s+you\s+mean\b|\bdo\s+you\s+mean\b|\bwhich\b|\bcould\s+you\s+clarify\b|"
    r"\bcan\s+you\s+(?:be\s+more\s+specific|clarify)\b|\bwhat\s+do\s+you\s+mean\b|"
    r"\bmeinten\s+sie\b|\bmeinst\s+du\b|\bwelche[nmrs]?\b|\bwas\s+meinst\b|\bgenauer\b",
    re.IGNORECASE,
)
_CONFIRM_OPEN_RE = re.compile(
    r"^\s*(?:ok(?:ay)?|sure|alright|all\s+right|got\s+it|noted|done|understood|of\s+course|"
    r"alles\s+klar|verstanden|erledigt|in\s+ordnung|gemacht|notiert|klar)\b",
    re.IGNORECASE,
)


def classify_response(text: str, tool_calls: object = None) -> str:
    """What an assistant message does: action, error, clarification, question, suggestion,
    confirmation or answer (the first that applies, in that order)."""
    if tool_calls:
        return "action"
    if lang.ERROR_RE.search(text):
        return "error"
    sents = lang.sentences(text)
    questions = [s for s in sents if lang.is_question(s) and not lang.PLEASANTRY_QUESTION_RE.search(s)]
    if questions and sents and lang.is_question(sents[-1]):
        return "clarification" if any(_CLARIFY_RE.search(q) for q in questions) else "question"
    if any(lang.is_promise(s) for s in sents):
        return "action"
    if lang.SUGGESTION_RE.search(text):
        return "suggestion"
    if _CONFIRM_OPEN_RE.search(text) and len(lang.words(text)) <= 12:
        return "confirmation"
    return "answer"


def _content(text: str) -> set[str]:
    # The language layer's stems (German and English alike), not English plural stripping:
    # "Ich prüfe die Sicherungen der Datenbanken" is answered by "Die Datenbanksicherung lief".
    return content_stems(text)


def _snip(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# --------------------------------------------------------------------- the fold


class _Context:
    """The messages before the one being folded in, fetched only when a rule needs them."""

    def __init__(self, log: MessageLog | None, session_id: str, preload: bool) -> None:
        self.log = log
        self.session_id = session_id
        self.loaded = preload
        self.items: deque[Message] = deque(maxlen=HISTORY)

    def before(self, msg: Message) -> list[Message]:
        if not self.loaded:
            self.loaded = True
            if self.log is not None and msg.id is not None:
                older = self.log.recent_messages(self.session_id, HISTORY, before_id=msg.id)
                self.items.extend(reversed(older))
        return list(self.items)

    def push(self, msg: Message) -> None:
        self.items.append(msg)

    def window(self) -> list[Message]:
        return list(self.items)


def _key(text: str, language: Language) -> tuple[str, ...]:
    return tuple(stem(w, language) for w in tokenize_words(text))


def _contains(words: Sequence[str], key: tuple[str, ...]) -> bool:
    n = len(key)
    return any(tuple(words[i : i + n]) == key for i in range(len(words) - n + 1))


# Request verbs and question words: how people ask, not what they ask about.
_NOT_TOPICS = frozenset(
    "check remind look help show tell run make please thanks want need let ask asked "
    "prüfen prüfe machen mach zeig zeigen sag sagen hilf helfen ansehen schau schauen danke "
    "bitte erinnere erinnern soll sollte sollen kann kannst könnte muss musst möchte möchtest "
    "würde wird werde".split()
) | lang.QUESTION_WORDS | lang.CONFIRMATION_WORDS


def _topical(phrase: str, window: Sequence[Message]) -> bool:
    words = tokenize_words(phrase)
    if len(words) == 1 and words[0].lower() in _NOT_TOPICS:
        return False
    # German capitalises every noun, so lower-case words alone in German text are verbs,
    # adverbs or adjectives ("hängt", "frei", "danach neu", "installiert wurde"), not a topic.
    if all(w.islower() for w in words):
        german = [m for m in window if phrase in m.content]
        if german and all(lang.detect_language(m.content) == "de" for m in german):
            return False
    return True


def compute_topics(messages: Sequence[Message]) -> list[tuple[str, float]]:
    """Topics of the last ``TOPIC_WINDOW`` messages with their scores, best first.

    Candidates are the keyphrases of the whole window (so a phrase repeated across
    messages wins); each is then scored by the messages that mention it, newer ones
    counting more. A pure function of the window, so replaying the log gives the
    same topics as the live tracker.
    """
    window = [m for m in messages if m.role in ("user", "assistant") and m.content.strip()]
    window = window[-TOPIC_WINDOW:]
    if not window:
        return []
    phrases = [
        p for p in extract_keyphrases([m.content for m in window], top_k=TOPIC_CANDIDATES)
        if _topical(p, window)
    ]
    # Each message's words as stems of its own language ("Datenbanken" meets "Datenbank"
    # as "databases" meets "database"); a phrase is looked for in each language's stems.
    langs = [detect_language(m.content) for m in window]
    tokens = [_key(m.content, lng) for m, lng in zip(window, langs, strict=True)]
    scored: list[tuple[str, float]] = []
    for rank, phrase in enumerate(phrases):
        keys = {lng: _key(phrase, lng) for lng in set(langs)}
        if not any(keys.values()):
            continue
        key = next(iter(keys.values()))
        score = 0.0
        for age, (msg, words, lng) in enumerate(zip(reversed(window), reversed(tokens), reversed(langs), strict=True)):
            if _contains(words, keys[lng]):
                score += TOPIC_DECAY**age * (1.0 if msg.role == "user" else ASSISTANT_TOPIC_WEIGHT)
        # Longer phrases name a topic more precisely; the extractor's rank breaks ties.
        score *= (1.0 + 0.25 * (len(key) - 1)) * (1.0 + 0.02 * (TOPIC_CANDIDATES - rank))
        if score > 0:
            scored.append((phrase, round(score, 4)))
    scored.sort(key=lambda kv: (-kv[1], kv[0].lower()))
    return scored


def _update_topics(state: SessionState, window: Sequence[Message]) -> None:
    scored = compute_topics(window)
    state.topic_scores = dict(scored)
    state.active_topics = [p for p, v in scored[:ACTIVE_TOPICS] if v >= TOPIC_MIN_SCORE]


def _update_jobs(state: SessionState, msg: Message, turn_refs: Iterable[str]) -> None:
    refs = list(dict.fromkeys([*turn_refs, *extract_job_refs(msg.content)]))
    if not refs:
        return
    finished: set[str] = set()
    if msg.role in ("assistant", "tool"):
        # Only a report ends a job; "why did job-42 fail?" from the user keeps it live.
        for sentence in lang.sentences(msg.content):
            if _JOB_DONE_RE.search(sentence) and not lang.is_question(sentence):
                finished.update(extract_job_refs(sentence))
    for ref in reversed(refs):  # the first one mentioned ends up most recent
        if ref in state.active_job_refs:
            state.active_job_refs.remove(ref)
        if ref not in finished:
            state.active_job_refs.insert(0, ref)
    del state.active_job_refs[MAX_JOB_REFS:]


def _close(state: SessionState, loop: OpenLoop) -> None:
    if loop in state.loops:
        state.loops.remove(loop)


def _same_question(a: str, b: str) -> bool:
    """The same request in other words: equal, or nearly the same content words."""
    if a == b:
        return True
    wa, wb = _content(a), _content(b)
    return bool(wa) and bool(wb) and len(wa & wb) / len(wa | wb) >= 0.8


def _related(a: str, b: str) -> int:
    """How strongly two texts are about the same thing: shared content words, and a
    shared job id counts double."""
    shared_jobs = set(extract_job_refs(a)) & set(extract_job_refs(b))
    return len(_content(a) & _content(b)) + 2 * len(shared_jobs)


def _fold_user(state: SessionState, msg: Message, turn: Turn | None, ctx: _Context) -> None:
    text = msg.content
    state.turn_count += 1
    state.language = lang.detect_language(text, default="de" if state.language == "de" else "en")
    intent = turn.intent if turn is not None else msg.metadata.get("intent")
    # The caller's intent always wins; otherwise a coarse one from cue words, so the
    # state says what kind of turn this was even when the runtime did not.
    state.last_intent = intent if isinstance(intent, str) and intent else lang.infer_intent(text)
    # Any reply from the user answers what the assistant asked; the question that made the
    # assistant ask back is now carried by this reply, so the next answer closes it.
    if state.pending_clarifications:
        for loop in state.loops:
            asked_before = (loop.message_id or 0) < state.last_assistant_message_id
            if loop.kind == "question" and asked_before and loop.turn == state.turn_count - 1 \
                    and msg.id is not None:
                loop.message_id = msg.id
    state.pending_clarifications = []
    if lang.CANCEL_RE.search(text) and state.loops:
        _close(state, state.loops[-1])
    for sentence in lang.sentences(text):
        if lang.is_question(sentence):
            question = _snip(sentence)
            # Asked again ("Also, which backup jobs run tonight?"): the same loop, now newer.
            again = [lp for lp in state.loops if _same_question(lp.text, question)]
            for loop in again:
                _close(state, loop)
            state.loops.append(OpenLoop("question", question, msg.id, state.turn_count))
    _resolve_entities(state, msg, ctx)


def _resolve_entities(state: SessionState, msg: Message, ctx: _Context) -> None:
    # Late import: the resolver module uses this module's cues.
    from memlane.state.references import has_reference_cues, resolve

    if not has_reference_cues(msg.content):
        return
    result = resolve(
        msg.content, ctx.before(msg), job_refs=state.active_job_refs, language=state.language
    )
    for ref in result.references:
        # Named things only ("that task", "deinen Vorschlag"): a bare "it" means
        # something else in every message, so remembering it would mislead.
        if ref.target is not None and ref.confidence >= 0.6 and ref.kind in ("entity", "reference"):
            state.resolved_entities.pop(ref.text.lower(), None)
            state.resolved_entities[ref.text.lower()] = ref.target
    while len(state.resolved_entities) > MAX_ENTITIES:
        state.resolved_entities.pop(next(iter(state.resolved_entities)))


def _fold_assistant(state: SessionState, msg: Message) -> None:
    text = msg.content
    kind = classify_response(text, msg.tool_calls)
    state.last_response_type = kind
    sents = lang.sentences(text)
    # A reply answers when it states something, however short ("About 10 minutes.",
    # "Yes."): "Which server?" alone does not, "I'm swamped with work. And you?" does.
    # "I don't know", "Okay.", errors and "I'll check" (a promise, tracked on its own)
    # leave the question open, and so does a reply that asks for clarification first.
    statements = [x for x in sents if lang.answers(x)]
    previous_reply = state.last_assistant_message_id
    if kind not in ("error", "clarification") and (statements or msg.tool_calls):
        # "By the way, ..." turns to something else: only what it names is answered.
        aside = bool(sents) and bool(lang.SUBJECT_CHANGE_RE.search(sents[0]))
        for loop in [lp for lp in state.loops if lp.kind == "question"]:
            # The questions of the user's last message are answered by this reply; older
            # ones only when the reply talks about the same things.
            recent = loop.message_id is None or loop.message_id > previous_reply
            if (recent and not aside) or _related(loop.text, text) >= 2:
                _close(state, loop)
        # A question the assistant deferred ("I'll check") is answered later by a reply
        # about the same things.
        for loop in [lp for lp in state.loops if lp.kind == "promise" and lp.text.rstrip().endswith("?")]:
            if (loop.message_id or 0) <= previous_reply and _related(loop.text, text) >= 2:
                _close(state, loop)
    if lang.COMPLETION_RE.search(text):
        promises = [lp for lp in state.loops if lp.kind == "promise"]
        if promises:
            best = max(promises, key=lambda lp: (_related(lp.text, text), lp.turn))
            # "Done." right after "I'll do X" is about X; later, it must name it.
            if _related(best.text, text) > 0 or (
                best.message_id is not None and best.message_id == previous_reply
            ):
                _close(state, best)
    for sentence in sents:
        if lang.is_promise(sentence):
            promise = _snip(sentence)
            if any(lp.kind == "promise" and lp.text == promise for lp in state.loops):
                continue
            # One loop per request: a promise on the question just asked ("I'll check")
            # makes that question something the assistant owes; it is not a second loop.
            asked = [lp for lp in state.loops if lp.kind == "question"
                     and lp.message_id is not None and lp.message_id > previous_reply]
            if asked:
                asked[-1].kind = "promise"
                for extra in asked[:-1]:
                    _close(state, extra)
            else:
                state.loops.append(OpenLoop("promise", promise, msg.id, state.turn_count))
    state.pending_clarifications = [
        _snip(s) for s in sents if lang.is_question(s) and not lang.PLEASANTRY_QUESTION_RE.search(s)
    ][-3:]
    if msg.id is not None:
        state.last_assistant_message_id = msg.id


def fold_message(
    state: SessionState, msg: Message, turn: Turn | None = None, ctx: _Context | None = None
) -> None:
    """Fold one stored message (in log order) into ``state``."""
    if ctx is None:
        ctx = _Context(None, state.session_id, preload=True)
    if msg.role != "system":
        state.message_count += 1
        turn_refs = turn.job_refs if turn is not None and msg.role == "user" else []
        _update_jobs(state, msg, turn_refs)
        if msg.role == "user":
            _fold_user(state, msg, turn, ctx)
        elif msg.role == "assistant":
            _fold_assistant(state, msg)
        del state.loops[:-MAX_LOOPS]
        state.open_loops = [loop.text for loop in state.loops]
        state.status = "awaiting_clarification" if state.pending_clarifications else "active"
    if msg.id is not None:
        state.last_message_id = max(state.last_message_id, msg.id)
    ctx.push(msg)


# --------------------------------------------------------------------- tracker


class StateTracker:
    """Keeps each session's state current; one per Memory (``mem.parts.state``)."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._lock = threading.RLock()
        # Forgetting is announced before the messages are deleted, and other threads may
        # read the state in between: remember the ids so no rebuild folds them back in,
        # and count forgets so a copy taken before one is never saved over the rebuild.
        self._forgotten: dict[str, set[int]] = {}
        self._generation: dict[str, int] = {}

    # observer: runs after every durable append
    def on_append(self, session: Session, stored: list[Message]) -> None:
        if not any(m.id is not None for m in stored):
            return  # held in fail-open mode, not stored yet
        self.advance(session.id)

    def on_forget(self, session_id: str, message_ids: Iterable[int] | None) -> None:
        """Forget hook: drop the state; the next read rebuilds it without those messages."""
        with self._lock:
            self._generation[session_id] = self._generation.get(session_id, 0) + 1
            if message_ids is None:
                self._forgotten.pop(session_id, None)
            else:
                self._forgotten.setdefault(session_id, set()).update(message_ids)
            self.store.delete_derived(session_id, STATE_KIND)

    def generation(self, session_id: str) -> int:
        return self._generation.get(session_id, 0)

    def load(self, session_id: str) -> SessionState | None:
        try:
            raw = self.store.get_derived(session_id, STATE_KIND)
        except CorruptRecordError:
            log.warning("session state of %s is corrupt; rebuilding it from the log", session_id)
            return None
        if raw is None:
            return None
        try:
            state = SessionState.from_dict(raw)
        except (InvalidInputError, TypeError, ValueError):
            log.warning("session state of %s is unreadable; rebuilding it from the log", session_id)
            return None
        if state.version != STATE_VERSION:
            return None
        state.generation = self.generation(session_id)
        return state

    def _fresh(self, session_id: str) -> SessionState:
        if self.store.get_session(session_id) is None:
            raise SessionNotFoundError(session_id)
        return SessionState(session_id=session_id, generation=self.generation(session_id))

    def advance(self, session_id: str) -> SessionState:
        """The stored state with every message it has not seen folded in, saved."""
        # The store's lock makes the read-fold-save atomic across processes too.
        with self._lock, self.store.session_lock(session_id, STATE_KIND):
            state = self.load(session_id) or self._fresh(session_id)
            if self._catch_up(state):
                self.save(state)
            return state

    def _catch_up(self, state: SessionState) -> bool:
        store = self.store
        gone = self._forgotten.get(state.session_id, set())
        new = [
            m for m in store.iter_messages(
                state.session_id, after_id=state.last_message_id, include_hidden=False
            )
            if m.id not in gone
        ]
        if not new:
            return False
        turn_ids = {m.turn_id for m in new if m.turn_id}
        turns: dict[str, Turn] = {}
        if turn_ids:
            limit = len(turn_ids) + 4 if state.last_message_id else 1_000_000
            found = store.list_turns(state.session_id, limit=limit)
            if not turn_ids <= {t.turn_id for t in found}:
                found = store.list_turns(state.session_id, limit=1_000_000)
            turns = {t.turn_id: t for t in found if t.turn_id in turn_ids}
        ctx = _Context(self.store, state.session_id, preload=state.last_message_id == 0)
        ctx.before(new[0])  # topics need the window before the new messages
        for msg in new:
            if msg.id not in gone:
                fold_message(state, msg, turns.get(msg.turn_id or ""), ctx)
        _update_topics(state, [m for m in ctx.window() if m.id not in gone])
        return True

    def rebuild(self, session_id: str, *, keep_from: SessionState | None = None) -> SessionState:
        """A state from the log alone; the rolling summary (not ours to derive) is kept."""
        with self._lock, self.store.session_lock(session_id, STATE_KIND):
            state = self._fresh(session_id)
            previous = keep_from or self.load(session_id)
            if previous is not None:
                state.rolling_summary = previous.rolling_summary
            self._catch_up(state)
            self.save(state)
            return state

    def save(self, state: SessionState) -> None:
        state.updated_at = utcnow()
        self.store.put_derived(state.session_id, STATE_KIND, state.to_dict())

    def save_external(self, state: SessionState) -> SessionState:
        """Store a state someone changed (status, rolling summary), brought up to date."""
        with self._lock, self.store.session_lock(state.session_id, STATE_KIND):
            if state.generation < self.generation(state.session_id):
                # Taken before messages were forgotten: rebuild, keep only what they set.
                fresh = self.rebuild(state.session_id, keep_from=state)
                fresh.status = state.status
                self.save(fresh)
                return fresh
            self._catch_up(state)
            self.save(state)
            return state


def _tracker(source: StateTracker | Essentials) -> StateTracker:
    """The tracker given, or one on the store given (a Memory's parts hand theirs in:
    it knows which messages are being forgotten right now)."""
    return source if isinstance(source, StateTracker) else StateTracker(source.store)


def get_state(source: StateTracker | Essentials, session_id: str) -> SessionState:
    """The session's current state (rebuilt from the log when missing, stale or corrupt)."""
    return _tracker(source).advance(session_id)


def save_state(source: StateTracker | Essentials, state: SessionState) -> None:
    """Store ``state`` after changing it (status ``resuming``/``shutdown_clean``, a summary).

    Messages the copy has not seen yet are folded in first, so saving an old copy never
    loses a turn; a message after a status change makes the session active again.
    """
    if not isinstance(state, SessionState):
        raise InvalidInputError("save_state needs a SessionState")
    if state.status not in SESSION_STATUSES:
        raise InvalidInputError(
            f"status must be one of {sorted(SESSION_STATUSES)}, got {state.status!r}"
        )
    _tracker(source).save_external(state)


def rebuild_state(source: StateTracker | Essentials, session_id: str) -> SessionState:
    """Recompute the state from the log alone, store it and return it."""
    return _tracker(source).rebuild(session_id)


def share_summary(tracker: StateTracker, record: SummaryRecord) -> None:
    """Put a session's rolling summary into its state (``rolling_summary``); the summaries
    part calls this after each update (wired in components.py)."""
    try:
        state = tracker.advance(record.session_id)
        if (state.rolling_summary or "") != record.text:
            state.rolling_summary = record.text or None
            # Saving a copy that missed a message is safe: the tracker replays
            # from the copy's last_message_id on its next read.
            tracker.save_external(state)
    except MemlaneError as exc:
        log.debug("could not share the rolling summary of %s: %s", record.session_id, exc)
