"""What counts as valid input: one set of checks for the library and the REST server.

The library calls these where input enters (messages, metadata, filters, budgets,
imports); the server's pydantic schemas call the same functions (``InvalidInputError`` is
a ``ValueError``, so pydantic turns it into a 422). So the two never disagree on what is
valid, and every refusal says what was wrong and how to fix it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from memlane.errors import InvalidInputError

__all__ = [
    "MAX_DEPTH",
    "check_depth",
    "check_identifier",
    "check_max_tokens",
    "check_metadata_filter",
    "check_object",
    "check_text_chars",
    "loads_json",
]

#: Deeper JSON than this is never real metadata or an export, and it would overflow the
#: (recursive) JSON encoders and decoders.
MAX_DEPTH = 64
_META_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
MAX_FILTER_KEYS = 20


def check_text_chars(value: str, what: str) -> str:
    """Text every store can keep: valid UTF-8 (no lone surrogates), no NUL characters."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"{what} contains a lone surrogate at position {exc.start}; send valid UTF-8 "
            "(decode the input with errors='replace' first)"
        ) from exc
    if "\x00" in value:
        raise InvalidInputError(
            f"{what} contains a NUL character (position {value.index(chr(0))}); remove it"
        )
    return value


MAX_ID = 256


def check_identifier(value: object, what: str = "session_id") -> str:
    """An id (session, user, tenant): non-empty printable text of at most MAX_ID characters."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"{what} must be a non-empty string")
    check_text_chars(value, what)
    if not value.isprintable():
        raise InvalidInputError(f"{what} must be printable text (no control characters)")
    if len(value) > MAX_ID:
        raise InvalidInputError(f"{what} is {len(value)} characters; the limit is {MAX_ID}")
    return value


def check_object(value: object, what: str) -> Mapping[str, Any]:
    """A JSON object (dict) nested at most MAX_DEPTH levels."""
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{what} must be a JSON object (dict), got {type(value).__name__}")
    check_depth(value, what)
    return value


def check_depth(value: object, what: str) -> None:
    """Refuse dicts/lists nested deeper than MAX_DEPTH, without recursing (no stack overflow)."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth >= MAX_DEPTH:
            raise InvalidInputError(f"{what} is nested deeper than {MAX_DEPTH} levels; flatten it")
        stack.extend((child, depth + 1) for child in children)


_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _json_depth(text: str) -> int:
    """The deepest bracket nesting of JSON text (brackets inside strings not counted).

    A regex walks strings whole and stops only at brackets, so the Python loop runs once
    per string or bracket, not once per character.
    """
    depth = deepest = 0
    for match in _JSON_TOKENS.finditer(text):
        ch = match.group()
        if ch in ("[", "{"):
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ("]", "}"):
            depth -= 1
    return deepest


def loads_json(text: str, what: str) -> Any:
    """``json.loads`` with nesting bounded first (the C decoder recurses) and clear errors."""
    if _json_depth(text) > MAX_DEPTH + 1:
        raise InvalidInputError(f"{what} is nested deeper than {MAX_DEPTH} levels; flatten it")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidInputError(f"{what} is not valid JSON: {exc}") from exc


def check_metadata_filter(value: object, what: str = "metadata filter") -> dict[str, Any]:
    """``{"key": scalar}`` filters; keys are plain names because they become JSON paths."""
    if not isinstance(value, Mapping) or len(value) > MAX_FILTER_KEYS:
        raise InvalidInputError(
            f'{what} must be a JSON object like {{"room": "x"}} with at most {MAX_FILTER_KEYS} keys'
        )
    for key, item in value.items():
        if not isinstance(key, str) or not _META_KEY.match(key):
            raise InvalidInputError(f"{what} key {key!r} must be a plain name (letters, digits, _)")
        if not isinstance(item, str | int | float | bool) or (
            isinstance(item, float) and not math.isfinite(item)
        ):
            raise InvalidInputError(f"{what} value of {key!r} must be a string, number or boolean")
        if isinstance(item, str):
            check_text_chars(item, f"{what} value of {key!r}")
    return dict(value)


def check_max_tokens(value: object, what: str = "max_tokens", *, limit: int = 10_000_000) -> int:
    """A positive whole number of tokens; ``"100"`` is read as 100, ``1.5``/``inf``/True are refused."""
    number: int
    if isinstance(value, bool):
        raise InvalidInputError(f"{what} must be a whole number of tokens, not {value!r}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    else:
        raise InvalidInputError(f"{what} must be a whole number of tokens like 2000, got {value!r}")
    if not 1 <= number <= limit:
        raise InvalidInputError(f"{what} must be between 1 and {limit:,}, got {number:,}")
    return number
