"""How the CLI shows messages: one header per message, tool calls as calls, not JSON blobs."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text


def tool_call_text(call: Any) -> str:
    """``get_weather(city='Lisbon', month='May')  [call_w1]`` from an OpenAI tool-call object."""
    if not isinstance(call, dict):
        return json.dumps(call, ensure_ascii=False)
    function = call.get("function") or {}
    name = function.get("name") or call.get("type") or "call"
    raw = function.get("arguments")
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        args = None
    if isinstance(args, dict):
        shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    else:  # not JSON: show what was sent, as sent
        shown = "" if raw in (None, "") else str(raw)
    ident = f"  [{call['id']}]" if call.get("id") else ""
    return f"{name}({shown}){ident}"


def print_message(
    console: Console, *, header: str, content: str | None, tool_calls: list[Any] | None, tool_call_id: str | None
) -> None:
    """A message as a bold header, its text, its tool calls one per line, and a blank line after."""
    console.print(header, highlight=False, markup=False, style="bold")
    if tool_call_id:
        console.print(f"(result of {tool_call_id})", highlight=False, markup=False, style="dim")
    if content:
        console.print(content, highlight=False, markup=False)
    for call in tool_calls or []:
        console.print(f"[cyan]→ calls[/cyan] {escape(tool_call_text(call))}", highlight=False)
    console.print()


def figure_lines(data: Any, prefix: str = "") -> list[str]:
    """A benchmark's nested result as ``a.b.c  value`` lines, for people (``--json`` is for programs)."""
    if isinstance(data, dict):
        return [line for key, value in data.items() for line in figure_lines(value, f"{prefix}{key}.")]
    if isinstance(data, list) and any(isinstance(v, dict | list) for v in data):
        return [line for i, value in enumerate(data) for line in figure_lines(value, f"{prefix}{i}.")]
    shown = ", ".join(map(str, data)) if isinstance(data, list) else ("-" if data is None else str(data))
    return [f"{prefix.rstrip('.'):<48} {shown}"]


def add_plain_row(table: Table, *values: str) -> None:
    """A table row of stored data, shown as typed: a title like "notes [draft]" is not markup."""
    table.add_row(*(Text(value) for value in values))
