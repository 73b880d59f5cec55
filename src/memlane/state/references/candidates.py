"""Candidate collection: what in the recent history a reference may point to (commands,
tool calls, job ids, list items, suggestions, whole turns), with their salience."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from memlane.models import Message
from memlane.patterns import lazy_compile
from memlane.state import language as lang
from memlane.state.language import extract_job_refs
from memlane.state.references.matching import short_stems
from memlane.state.references.records import TURN_DECAY, Candidate, Reference, snip

_CODE_RE = lazy_compile(r"`([^`\n]{2,200})`")


_SHELL_LINE = lazy_compile(
    r"^\s*(?:\$\s+)?((?:sudo|apt|apt-get|systemctl|useradd|usermod|docker|git|pip|npm|kubectl|"
    r"rm|cp|mv|mkdir|chmod|chown|ls|cat|reboot|shutdown)\b[^\n]{0,200})$",
    re.MULTILINE,
)


LIST_ITEM = lazy_compile(r"^\s*(?:\d{1,2}[.)]|[-*•])\s+(.{2,300})$", re.MULTILINE)


def turns_newest_first(history: Sequence[Message]) -> list[list[Message]]:
    """The history grouped into turns (a user message and what followed), newest first."""
    turns: list[list[Message]] = []
    current: list[Message] = []
    for msg in history:
        if msg.role == "system":
            continue
        if msg.role == "user" and current:
            turns.append(current)
            current = []
        current.append(msg)
    if current:
        turns.append(current)
    return list(reversed(turns))


def _tool_call_text(call: object) -> str:
    """``name {"arg": ...}`` of an OpenAI tool call, shortened; "" when it has no name."""
    if not isinstance(call, dict):
        return ""
    fn = call.get("function")
    name = fn.get("name") if isinstance(fn, dict) else None
    if not isinstance(name, str) or not name:
        return ""
    args = fn.get("arguments") if isinstance(fn, dict) else None
    args_text = " ".join(args.split()) if isinstance(args, str) else ""
    return snip(f"{name} {args_text}".strip(), 80)


def _is_command(code: str) -> bool:
    # `sudo useradd -m max` is something to run; `/etc/hosts` or `PATH` is a name.
    first = code.split()[0] if code.split() else ""
    return " " in code.strip() and bool(re.fullmatch(r"[a-z][\w.-]*", first))


def _message_candidates(msg: Message, distance: int) -> list[Candidate]:
    text = msg.content
    weight = 1.0 if msg.role == "assistant" else 0.8
    out: list[Candidate] = []

    def add(kind: str, target: str, sentence: str, w: float, in_list: bool = False) -> None:
        if not any(c.target == target for c in out):
            out.append(Candidate(kind, target, msg.id, snip(text, 300), msg.role, distance, w,
                                 snip(sentence), lang.is_suggestion(sentence), in_list))

    if msg.role == "assistant":
        # A tool call is something the assistant did: "do that again" may mean it.
        for call in msg.tool_calls or []:
            action = _tool_call_text(call)
            if action:
                add("action", action, action, 0.9)

    items = [i.strip() for i in LIST_ITEM.findall(text)] if msg.role == "assistant" else []
    body = LIST_ITEM.sub("", text) if len(items) >= 2 else text
    for line in _SHELL_LINE.findall(body):
        if "`" not in line:
            add("command", line.strip(), line, weight)
    for sentence in lang.sentences(body):
        codes = [c.strip() for c in _CODE_RE.findall(sentence)]
        for code in codes:
            if _is_command(code):
                add("command", code, sentence, weight)
        for ref in extract_job_refs(sentence):
            add("job", ref, sentence, weight)
        if msg.role == "assistant" and lang.is_suggestion(sentence) and not any(
            c.sentence == snip(sentence) for c in out
        ) and not lang.PLEASANTRY_QUESTION_RE.search(sentence):
            add("suggestion", snip(sentence), sentence, 0.9 * weight)
    if len(items) >= 2:
        for item in items:
            codes = [c.strip() for c in _CODE_RE.findall(item) if _is_command(c.strip())]
            if codes:
                add("command", codes[0], item, 0.9, in_list=True)
            else:
                add("item", snip(item, 120), item, 0.9, in_list=True)
    return out


def collect_candidates(history: Sequence[Message], extra_jobs: Sequence[str]) -> list[Candidate]:
    out: list[Candidate] = []
    turns = turns_newest_first(history)
    for distance, turn in enumerate(turns):
        found: list[Candidate] = []
        for msg in reversed(turn):  # the answer before the request
            for cand in _message_candidates(msg, distance):
                if not any(c.target == cand.target for c in found):
                    found.append(cand)
        if not found and lang.infer_intent(turn[0].content) != "smalltalk":
            # No concrete referent: the turn itself, named by the user's request.
            first = turn[0]
            sentence = next(iter(lang.sentences(first.content)), first.content)
            answer = next((m.content for m in reversed(turn)
                           if m.role == "assistant" and m.content.strip()), "")
            found.append(Candidate("message", snip(sentence, 120), first.id,
                                   snip(first.content, 300), first.role, distance, 0.5,
                                   snip(sentence), False, answer=answer))
        results = [m.content for m in turn if m.role == "tool" and m.content.strip()]
        for cand in found:
            if cand.kind == "action" and results:
                cand.answer = results[0] if len(results) == 1 else "; ".join(results)
            cand.score *= TURN_DECAY**distance
            if not any(c.target == cand.target for c in out):
                out.append(cand)
    known = {c.target for c in out}
    for ref in extra_jobs:  # active jobs the state remembers from further back
        if ref not in known:
            out.append(Candidate("job", ref, None, ref, "assistant", len(turns),
                                 0.5 * TURN_DECAY ** len(turns), ref, False))
    return out


def rank(
    cands: list[Candidate], query: str, ref: Reference
) -> list[tuple[Candidate, int]]:
    """Candidates by salience, raised by the words the rest of the query shares with them."""
    words = short_stems(query[: ref.start] + " " + query[ref.end:])
    ranked: list[tuple[Candidate, int]] = []
    for cand in cands:
        overlap = len(words & short_stems(cand.message_text + " " + cand.target))
        ranked.append((replace(cand, score=cand.score * (1.0 + 1.5 * overlap)), overlap))
    return sorted(ranked, key=lambda co: (-co[0].score, co[0].distance))


def last_assistant(history: Sequence[Message]) -> Message | None:
    for msg in reversed(history):
        if msg.role == "assistant" and msg.content.strip():
            return msg
    return None
