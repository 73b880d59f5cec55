"""Reading labelled JSONL evaluation sets: a user's file, or one shipped in memlane/eval/data."""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from memlane.errors import InvalidInputError

__all__ = ["read_jsonl"]


def read_jsonl(path: Path | str | None, shipped: str, what: str) -> Iterator[tuple[str, Any]]:
    """``(where, object)`` for each line of ``path`` (the shipped ``shipped`` set when None);
    ``where`` ("file:line") goes into error messages. ``what`` names the expected content."""
    if path is None:
        text = resources.files("memlane.eval").joinpath("data", shipped).read_text("utf-8")
        name = shipped
    else:
        p = Path(path)
        if not p.is_file():
            raise InvalidInputError(f"{p}: no such file (give a JSONL file of {what})")
        text, name = p.read_text("utf-8"), str(p)
    found = False
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"{name}:{n}: not JSON ({exc.msg})") from exc
        found = True
        yield f"{name}:{n}", data
    if not found:
        raise InvalidInputError(f"{name}: no {what}")
