"""Faithful items: what agent frameworks hand memlane, kept whole and read where we can.

Frameworks speak three shapes beside the plain OpenAI chat message:

- OpenAI Responses API items: ``{"type": "message", "role": ..., "content": [parts]}``,
  ``function_call``, ``function_call_output``, ``reasoning`` and a growing list of
  hosted-tool items (``web_search_call``, ``computer_call``, ``mcp_call``, ...);
- chat messages whose ``content`` is a list of parts (text, ``image_url``, ``input_image``,
  ``input_file``, ``input_audio``, ...);
- Anthropic-style content blocks (``text``, ``image``, ``document``, ``tool_use``,
  ``tool_result``, ``thinking``).

memlane keeps such an item verbatim (``Message.item``, returned as given) and reads from
it only what it understands: text, tool calls and tool results. That reading is what
feeds windows, search and the context engine; everything else stays opaque. An item
that reads as nothing a chat model should see again (a reasoning item, an image-only
message, a hosted-tool call) is kept and returned, but never becomes an empty
placeholder in a window.

This module is pure: no storage, no memlane records, so both the model layer and the
integrations can use it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memlane.errors import InvalidInputError

JSON = dict[str, Any]

#: Content-part types whose ``text`` memlane reads (OpenAI chat + Responses, Anthropic).
TEXT_PARTS: frozenset[str] = frozenset(
    {"text", "input_text", "output_text", "summary_text", "reasoning_text"}
)
#: Item types that are the model's private working, not conversation: kept, never shown.
PRIVATE_TYPES: frozenset[str] = frozenset({"reasoning", "thinking", "redacted_thinking", "compaction"})

# Responses roles onto the four chat roles memlane stores.
_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}


@dataclass(frozen=True, slots=True)
class Reading:
    """What memlane understands of an item: the chat message it stands for."""

    role: str
    content: str
    tool_calls: list[JSON] | None = None
    tool_call_id: str | None = None
    name: str | None = None


def is_item(raw: Mapping[str, Any]) -> bool:
    """Whether ``raw`` is more than a plain chat message (a typed item or content parts)."""
    return "type" in raw or isinstance(raw.get("content"), list)


def item_type(item: Mapping[str, Any] | None) -> str | None:
    """The item's ``type`` (``"message"`` for a typeless item with a role), None for no item."""
    if item is None:
        return None
    kind = item.get("type")
    return kind if isinstance(kind, str) else "message"


def is_private(item: Mapping[str, Any] | None) -> bool:
    """Reasoning and the like: stored and returned, never put into a window or packet."""
    return item_type(item) in PRIVATE_TYPES


def text_of(value: object) -> str:
    """The readable text of a content value: a string, or the text parts of a list."""
    if isinstance(value, str):
        return value
    if not isinstance(value, Sequence):
        return ""
    texts: list[str] = []
    for part in value:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, Mapping):
            kind = part.get("type")
            if kind in TEXT_PARTS and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif kind == "refusal" and isinstance(part.get("refusal"), str):
                texts.append(part["refusal"])
            elif kind == "tool_result":
                texts.append(text_of(part.get("content")))
    return "\n".join(t for t in texts if t)


def _call(call_id: object, name: object, arguments: object) -> JSON:
    if not isinstance(call_id, str) or not call_id:
        raise InvalidInputError("a tool call item needs a non-empty string call id ('call_id' or 'id')")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    return {"id": call_id, "type": "function", "function": {"name": str(name or ""), "arguments": arguments}}


def _role(item: Mapping[str, Any], default: str) -> str:
    role = item.get("role", default)
    if role not in _ROLES:
        raise InvalidInputError(
            f"item role must be one of {sorted(_ROLES)}, got {role!r}"
        )
    return _ROLES[role]


def _read_message(item: Mapping[str, Any]) -> Reading:
    """A message with content parts: Responses ``message``, chat parts, Anthropic blocks."""
    role = _role(item, "user")
    content = item.get("content")
    blocks = [p for p in content if isinstance(p, Mapping)] if isinstance(content, list) else []
    calls = [_call(b.get("id"), b.get("name"), b.get("input", {})) for b in blocks if b.get("type") == "tool_use"]
    results = [b for b in blocks if b.get("type") == "tool_result"]
    text = text_of([b for b in blocks if b.get("type") != "tool_result"] if blocks else content)
    chat_calls = item.get("tool_calls")
    if isinstance(chat_calls, list) and chat_calls:  # a chat message with parts and calls
        calls = [dict(c) for c in chat_calls if isinstance(c, Mapping)]
    tool_call_id = item.get("tool_call_id")
    if len(results) == 1 and not text:
        # Anthropic answers a tool call in a user turn: read as the chat tool message.
        result = results[0]
        return Reading("tool", text_of(result.get("content")), tool_call_id=str(result.get("tool_use_id") or ""))
    if results:  # several results in one turn: their text, not linked to the calls
        text = "\n".join(t for t in [text, *(text_of(r.get("content")) for r in results)] if t)
    name = item.get("name")
    return Reading(
        role,
        text,
        tool_calls=calls or None,
        tool_call_id=tool_call_id if isinstance(tool_call_id, str) else None,
        name=name if isinstance(name, str) else None,
    )


def read_item(item: Mapping[str, Any]) -> Reading:
    """What memlane reads from ``item``; raises InvalidInputError for a malformed one."""
    kind = item_type(item)
    if kind == "message":
        return _read_message(item)
    if kind == "function_call":
        return Reading(
            "assistant", "", tool_calls=[_call(item.get("call_id"), item.get("name"), item.get("arguments", ""))]
        )
    if kind == "function_call_output":
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidInputError("a function_call_output item needs 'call_id' naming the call it answers")
        return Reading("tool", text_of(item.get("output")), tool_call_id=call_id)
    if kind in PRIVATE_TYPES:
        summary = item.get("summary")
        return Reading("assistant", text_of(summary if summary else item.get("content")))
    # Hosted-tool calls and anything newer: kept opaque; any text they carry is searchable.
    return Reading(_role(item, "assistant"), text_of(item.get("content")))


def describe(item: Mapping[str, Any]) -> str:
    """A person's one-line account of what an item holds beyond its text (for transcripts)."""
    kind = item_type(item) or "message"
    content = item.get("content")
    parts = [p.get("type") for p in content if isinstance(p, Mapping)] if isinstance(content, list) else []
    other = sorted({str(p) for p in parts if p not in TEXT_PARTS})
    return f"{kind} item" + (f" with {', '.join(other)}" if other else "")


def chat_to_responses(messages: Sequence[Mapping[str, Any]]) -> list[JSON]:
    """OpenAI chat messages (a context packet) as Responses input items: calls become
    ``function_call`` items, tool results ``function_call_output`` items."""
    out: list[JSON] = []
    for msg in messages:
        role = msg.get("role")
        if role == "tool":
            out.append({"type": "function_call_output", "call_id": msg.get("tool_call_id"), "output": msg.get("content", "")})
            continue
        if msg.get("content"):
            out.append({"role": role, "content": msg["content"]})
        for call in msg.get("tool_calls") or ():
            fn = call.get("function") or {}
            out.append({"type": "function_call", "call_id": call.get("id"), "name": fn.get("name", ""),
                        "arguments": fn.get("arguments", "")})
    return out
