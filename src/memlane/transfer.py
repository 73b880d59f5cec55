"""Export and import of sessions as JSON, JSONL or Markdown.

JSON and JSONL carry every field and round-trip exactly: exporting an
imported session gives the same document. Markdown is for people; it keeps
roles, authors, times and text, and imports back as a new session.
Storage ids are not exported (they belong to one database); turns point at
their messages by position instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memlane.errors import InvalidInputError, SessionExistsError
from memlane.items import describe
from memlane.models import (
    JSON,
    SESSION_STATUSES,
    Message,
    Session,
    Turn,
    check_json,
    message_from_input,
    utcnow,
)
from memlane.scoping import DEFAULT_TENANT, public_session_id, session_key
from memlane.store.base import TurnRecord
from memlane.tokens import counts_cheaply
from memlane.validation import check_identifier, loads_json

if TYPE_CHECKING:
    from memlane.memory import Memory

FORMAT = "memlane.session/1"
FORMATS = ("json", "jsonl", "markdown")
_SESSION_KEYS = (
    "id", "tenant_id", "user_id", "agent_id", "title", "system_prompt", "metadata", "status",
    "created_at", "updated_at", "last_active_at",
)
_MESSAGE_SKIP = {"id", "session_id", "token_count"}
_TURN_KEYS = (
    "turn_id", "intent", "action_name", "job_refs", "model_used", "confidence_score",
    "processing_time", "resolved_query", "context_used", "metadata",
)


def _check_format(fmt: str) -> str:
    fmt = fmt.lower()
    if fmt == "md":
        fmt = "markdown"
    if fmt not in FORMATS:
        raise InvalidInputError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    return fmt


def session_document(session: Session, messages: Sequence[Message], turns: Sequence[Turn]) -> JSON:
    position = {m.id: i for i, m in enumerate(messages)}
    session_dict = session.to_dict()
    out_turns = []
    for t in turns:
        entry: JSON = {k: getattr(t, k) for k in _TURN_KEYS}
        entry["user_index"] = position.get(t.user_message.id)
        entry["assistant_index"] = position.get(t.assistant_message.id)
        out_turns.append(entry)
    # the id its tenant knows it by: the import puts it back under that tenant's key
    session_dict["id"] = public_session_id(session.id)
    return {
        "format": FORMAT,
        "session": {k: session_dict[k] for k in _SESSION_KEYS},
        "messages": [
            {k: v for k, v in m.to_dict().items() if k not in _MESSAGE_SKIP} for m in messages
        ],
        "turns": out_turns,
    }


def export_session(
    session: Session, messages: Sequence[Message], turns: Sequence[Turn], fmt: str
) -> str:
    fmt = _check_format(fmt)
    doc = session_document(session, messages, turns)
    if fmt == "json":
        return json.dumps(doc, ensure_ascii=False, indent=2)
    if fmt == "jsonl":
        lines = [json.dumps({"type": "session", "format": FORMAT, **doc["session"]}, ensure_ascii=False)]
        lines += [json.dumps({"type": "message", **m}, ensure_ascii=False) for m in doc["messages"]]
        lines += [json.dumps({"type": "turn", **t}, ensure_ascii=False) for t in doc["turns"]]
        return "\n".join(lines) + "\n"
    return _markdown(session, messages, doc["turns"])


def _turn_line(turn: JSON) -> str:
    """A turn's fields as one readable line (seed 004's entry: model, confidence, time...)."""
    parts = [f"turn `{turn['turn_id']}`"]
    labels = (
        ("intent", "intent {}"), ("action_name", "action {}"), ("model_used", "model {}"),
        ("confidence_score", "confidence {}"), ("processing_time", "{} s"),
    )
    parts += [fmt.format(turn[k]) for k, fmt in labels if turn.get(k) is not None]
    if turn.get("job_refs"):
        parts.append("jobs " + ", ".join(turn["job_refs"]))
    if turn.get("context_used") is not None:
        parts.append("context used" if turn["context_used"] else "no context used")
    if turn.get("resolved_query"):
        parts.append(f"resolved query: {turn['resolved_query']}")
    return "_" + " · ".join(parts) + "_"


_MD_TURN = "<!-- memlane-turn "


def _markdown(session: Session, messages: Sequence[Message], turns: Sequence[JSON] = ()) -> str:
    public = public_session_id(session.id)
    out = [f"# {session.title or 'Session ' + public}", ""]
    out.append(f"- session: `{public}`")
    if session.user_id:
        out.append(f"- user: `{session.user_id}`")
    out.append(f"- created: {session.created_at.isoformat()}")
    if session.system_prompt:
        out += ["", "> " + session.system_prompt.replace("\n", "\n> ")]
    after = {t["assistant_index"]: t for t in turns if t.get("assistant_index") is not None}
    for i, m in enumerate(messages):
        who = m.role + (f" [{m.tool_call_id}]" if m.tool_call_id else "")
        if m.author_name or m.author_id:
            who += f" · {m.author_name or ''}" + (f" <{m.author_id}>" if m.author_id else "")
        out += ["", f"### {who} · {m.created_at.isoformat()}", ""]
        out.append(m.content)
        if m.item is not None:  # what the text does not show (images, reasoning, ...) is named
            out += ["", f"_({describe(m.item)}, kept as given)_"]
        if m.tool_calls:
            out += ["", "```json", json.dumps(m.tool_calls, ensure_ascii=False), "```"]
        turn = after.get(i)
        if turn is not None:
            # Readable for people; the comment carries the exact fields back on import.
            data = json.dumps(turn, ensure_ascii=False, default=str).replace("--", "\\u002d\\u002d")
            out += ["", _turn_line(turn), _MD_TURN + data + " -->"]
    return "\n".join(out) + "\n"


_MD_HEADING = re.compile(r"^### (system|user|assistant|tool)(?: \[(.+?)\])?(?: · (.*?))? · (\S+)$")
_MD_AUTHOR = re.compile(r"^(.*?)(?: <(.+)>)?$")


def _parse_markdown(text: str) -> JSON:
    lines = text.splitlines()
    if not lines or not lines[0].startswith("# "):
        raise InvalidInputError("a Markdown export starts with a '# title' line")
    title = lines[0][2:].strip()
    messages: list[JSON] = []
    system: list[str] = []
    current: JSON | None = None
    body: list[str] = []
    turns: list[JSON] = []

    def close() -> None:
        if current is not None:
            while body and not body[-1].strip():
                body.pop()
            if body and body[-1].startswith(_MD_TURN) and body[-1].endswith(" -->"):
                turn = json.loads(body.pop()[len(_MD_TURN):-4])
                turn["user_index"] = len(messages) - 1
                turn["assistant_index"] = len(messages)
                turns.append(turn)
                if body and body[-1].startswith("_turn `"):
                    body.pop()
            content = "\n".join(body).strip("\n")
            fence = re.search(r"\n*```json\n(.*)\n```$", content, re.S)
            if fence and current["role"] == "assistant":
                current["tool_calls"] = json.loads(fence.group(1))
                content = content[: fence.start()]
            current["content"] = content
            messages.append(current)

    for line in lines[1:]:
        match = _MD_HEADING.match(line)
        if match:
            close()
            body = []
            current = {"role": match.group(1), "created_at": match.group(4)}
            if match.group(2):
                current["tool_call_id"] = match.group(2)
            if match.group(3):
                author = _MD_AUTHOR.match(match.group(3))
                assert author is not None
                current["author_name"] = author.group(1) or None
                current["author_id"] = author.group(2)
        elif current is None:
            if line.startswith("> "):
                system.append(line[2:])
        else:
            body.append(line)
    close()
    return {
        "session": {"title": title, "system_prompt": "\n".join(system) or None},
        "messages": messages,
        "turns": turns,
    }


def _documents(text: str, fmt: str) -> Iterator[JSON]:
    if fmt == "markdown":
        yield _parse_markdown(text)
        return
    if fmt == "json":
        data = loads_json(text, "the import")
        docs = data if isinstance(data, list) else [data]
        for doc in docs:
            if not isinstance(doc, dict) or doc.get("format") != FORMAT:
                raise InvalidInputError(f"not a memlane session export (expected format {FORMAT!r})")
            yield doc
        return
    current: JSON | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        item = loads_json(line, f"line {number}")
        kind = item.pop("type", None) if isinstance(item, dict) else None
        if kind == "session":
            if current is not None:
                yield current
            item.pop("format", None)
            current = {"session": item, "messages": [], "turns": []}
        elif kind in ("message", "turn") and current is not None:
            current["messages" if kind == "message" else "turns"].append(item)
        else:
            raise InvalidInputError(
                f"line {number}: expected a session line first, then message/turn lines"
            )
    if current is not None:
        yield current


def import_sessions(
    mem: Memory, text: str, fmt: str, *, on_conflict: str = "error",
    progress: Callable[[int, int], None] | None = None,
) -> list[str]:
    """Validate every document fully before writing anything, then restore each session,
    each in one transaction (an import stopped midway leaves whole sessions only: import
    again with ``on_conflict="skip"`` to add the rest). ``progress(done, total)`` counts
    messages written. Derived data (keyword languages, vectors, summaries) is left to
    background work, as for any write."""
    fmt = _check_format(fmt)
    if on_conflict not in ("error", "skip", "replace", "new"):
        raise InvalidInputError("on_conflict must be error, skip, replace or new")
    plans: list[tuple[Session, list[Message], list[tuple[TurnRecord, int, int]]]] = []
    for doc in _documents(text, fmt):
        plans.append(_plan(mem, doc, fresh_id=fmt == "markdown" or on_conflict == "new"))
    total = sum(len(messages) for _, messages, _ in plans)
    done = 0
    ids: list[str] = []
    for session, messages, turns in plans:
        done += len(messages)
        if mem.store.get_session(session.id) is not None:
            if on_conflict == "skip":
                if progress is not None:
                    progress(done, total)
                continue
            if on_conflict == "replace":
                mem.delete_session(session.id)
            else:
                raise SessionExistsError(session.id)
        mem.store.restore_session(session, messages, turns)
        stored = mem.store.get_session(session.id)
        if stored is not None and messages:
            mem._notify(stored, list(mem.store.iter_messages(session.id)))
        ids.append(session.id)
        if progress is not None:
            progress(done, total)
    return ids


def _plan(
    mem: Memory, doc: JSON, *, fresh_id: bool
) -> tuple[Session, list[Message], list[tuple[TurnRecord, int, int]]]:
    import uuid

    raw = doc.get("session")
    if not isinstance(raw, dict):
        raise InvalidInputError("export has no 'session' object")
    status = raw.get("status") or "active"
    if status not in SESSION_STATUSES:
        raise InvalidInputError(f"session status {status!r} is not one of {sorted(SESSION_STATUSES)}")
    tenant = str(raw.get("tenant_id") or DEFAULT_TENANT)
    check_identifier(tenant, "tenant_id")
    session_id = session_key(tenant, str(uuid.uuid4()) if fresh_id or not raw.get("id") else str(raw["id"]))
    times: dict[str, datetime] = {}
    for key in ("created_at", "updated_at", "last_active_at"):
        if raw.get(key):
            try:
                times[key] = datetime.fromisoformat(str(raw[key]))
            except ValueError as exc:
                raise InvalidInputError(f"session {key} {raw[key]!r} is not ISO-8601") from exc
    session = Session(
        id=session_id,
        created_at=times.get("created_at") or utcnow(),
        updated_at=times.get("updated_at") or utcnow(),
        last_active_at=times.get("last_active_at") or utcnow(),
        tenant_id=tenant,
        user_id=raw.get("user_id"),
        agent_id=raw.get("agent_id"),
        title=raw.get("title"),
        system_prompt=raw.get("system_prompt"),
        metadata=check_json(raw.get("metadata"), "session metadata"),
        status=status,
    )
    messages: list[Message] = []
    calls: set[str] = set()
    for i, item in enumerate(doc.get("messages") or []):
        if not isinstance(item, dict):
            raise InvalidInputError(f"message {i} is not an object")
        extra = {k: item[k] for k in ("hidden",) if k in item}
        fields: dict[str, Any] = {k: v for k, v in item.items() if k != "hidden"}
        try:
            msg = message_from_input(fields, max_chars=mem.settings.max_message_chars)
        except InvalidInputError as exc:
            raise InvalidInputError(f"message {i}: {exc}") from exc
        if msg.role == "tool" and msg.tool_call_id not in calls:
            raise InvalidInputError(f"message {i}: tool result without a matching call")
        calls.update(c["id"] for c in msg.tool_calls or ())
        msg.hidden = bool(extra.get("hidden", False))
        msg.session_id = session_id
        # An imported session's counts are never trusted (no encoding is recorded for it):
        # counting here would only load the vocabulary for nothing.
        msg.token_count = mem.counter.count_message(msg) if counts_cheaply(mem.counter) else None
        messages.append(msg)
    if fresh_id:
        # A copy needs its own turn ids too: they are unique across the store.
        renamed: dict[str, str] = {}
        for msg in messages:
            if msg.turn_id:
                msg.turn_id = renamed.setdefault(msg.turn_id, str(uuid.uuid4()))
        for item in doc.get("turns") or []:
            if isinstance(item, dict) and item.get("turn_id"):
                item["turn_id"] = renamed.setdefault(str(item["turn_id"]), str(uuid.uuid4()))
    turns: list[tuple[TurnRecord, int, int]] = []
    for j, item in enumerate(doc.get("turns") or []):
        ui, ai = item.get("user_index"), item.get("assistant_index")
        if not isinstance(ui, int) or not isinstance(ai, int) or not (
            0 <= ui < len(messages) and 0 <= ai < len(messages)
        ):
            raise InvalidInputError(f"turn {j} points at messages that are not in the export")
        turns.append(
            (
                TurnRecord(
                    turn_id=str(item.get("turn_id") or uuid.uuid4()),
                    intent=item.get("intent"),
                    action_name=item.get("action_name"),
                    job_refs=tuple(item.get("job_refs") or ()),
                    model_used=item.get("model_used"),
                    confidence_score=item.get("confidence_score"),
                    processing_time=item.get("processing_time"),
                    resolved_query=item.get("resolved_query"),
                    context_used=item.get("context_used"),
                    metadata=check_json(item.get("metadata"), f"turn {j} metadata"),
                ),
                ui,
                ai,
            )
        )
    return session, messages, turns
