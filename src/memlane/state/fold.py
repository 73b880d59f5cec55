"""The fold: one stored message at a time into a :class:`SessionState` - topics, open loops,
pending clarifications, job refs, resolved entities, the response type. Pure and
deterministic, so replaying the log gives exactly the state the live tracker built."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from memlane.context.keyphrases import extract_keyphrases, tokenize_words
from memlane.language import Language, content_stems, detect_language, stem
from memlane.models import Message, Turn
from memlane.state import language as lang
from memlane.state.language import extract_job_refs
from memlane.state.session_state import OpenLoop, SessionState

if TYPE_CHECKING:
    from memlane.ports import MessageLog


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


class FoldContext:
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


def update_topics(state: SessionState, window: Sequence[Message]) -> None:
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


def _fold_user(state: SessionState, msg: Message, turn: Turn | None, ctx: FoldContext) -> None:
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


def _resolve_entities(state: SessionState, msg: Message, ctx: FoldContext) -> None:
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
    state: SessionState, msg: Message, turn: Turn | None = None, ctx: FoldContext | None = None
) -> None:
    """Fold one stored message (in log order) into ``state``."""
    if ctx is None:
        ctx = FoldContext(None, state.session_id, preload=True)
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
