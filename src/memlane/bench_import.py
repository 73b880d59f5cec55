"""The bulk-write benchmark behind `memlane bench import`.

Messages per second for ``Memory.add_messages`` (batches of one session's messages) and
for ``memlane import`` of a JSONL export holding the same messages, each into a new
SQLite file, beside the OpenAI Agents SDK's ``SQLiteSession.add_items`` writing the same
batches in the same run. Derived work (keyword-index languages, vectors, summaries) is
not waited for: the figures say how much of it is left (the backlog) when the writes
return. With ``embed`` the default embedder then catches up, and the ingest rate with
embeddings (messages / (write + catch-up)) is reported too.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from memlane.memory import Memory
from memlane.transfer import FORMAT

_WORDS = (
    "train Sintra Lisbon Rossio Saturday picnic weather vegetarian booking museum tickets "
    "Datenbank Fahrrad Keller Urlaub Wetter Zug morgen gestern report invoice deadline "
    "meeting project budget hotel flight dinner recipe garden concert birthday"
).split()


def _text(i: int) -> str:
    """A distinct chat-like line (no two alike: caches that key on text never help)."""
    picks = " ".join(_WORDS[(i * k) % len(_WORDS)] for k in (3, 7, 11, 13, 17))
    return f"Message {i}: what about the {picks}? I wrote it down at {i % 24}:{i % 60:02d}."


def _batches(messages: int, per_session: int) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    for start in range(0, messages, per_session):
        n = min(per_session, messages - start)
        yield f"s{start // per_session}", [
            {"role": "user" if j % 2 == 0 else "assistant", "content": _text(start + j)} for j in range(n)
        ]


def _export_file(path: Path, messages: int, per_session: int) -> None:
    """A JSONL export (memlane export --format jsonl) of the same sessions and messages."""
    with path.open("w", encoding="utf-8") as out:
        for sid, batch in _batches(messages, per_session):
            out.write(json.dumps({"type": "session", "format": FORMAT, "id": sid}) + "\n")
            for msg in batch:
                out.write(json.dumps({"type": "message", **msg}, ensure_ascii=False) + "\n")


def _rate(messages: int, seconds: float) -> float:
    return round(messages / seconds, 1) if seconds > 0 else 0.0


def _agents_sdk(path: Path, messages: int, per_session: int) -> dict[str, Any]:
    try:
        from agents import SQLiteSession
    except ImportError:
        return {"skipped": "openai-agents is not installed (pip install 'memlane[agents]')"}
    loop = asyncio.new_event_loop()
    sessions: dict[str, Any] = {}
    try:
        t0 = time.perf_counter()
        for sid, batch in _batches(messages, per_session):
            session = sessions.setdefault(sid, SQLiteSession(sid, str(path)))
            loop.run_until_complete(session.add_items(batch))
        seconds = time.perf_counter() - t0
    finally:
        for session in sessions.values():
            session.close()
        loop.close()
    return {"seconds": round(seconds, 3), "msgs_per_s": _rate(messages, seconds)}


def run_import_bench(
    *,
    messages: int = 100_000,
    per_session: int = 1000,
    embed: bool = False,
    workdir: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    say = progress or (lambda _msg: None)
    embedder = None if embed else "none"
    out: dict[str, Any] = {"messages": messages, "per_session": per_session, "embed": embed}
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        root = Path(tmp)
        say(f"add_messages: {messages:,} messages in batches of {per_session:,}")
        options: dict[str, Any] = {} if embedder is None else {"embedder": embedder}
        with Memory(root / "add.db", **options) as mem:
            t0 = time.perf_counter()
            for sid, batch in _batches(messages, per_session):
                mem.add_messages(sid, batch)
            seconds = time.perf_counter() - t0
            out["add_messages"] = {"seconds": round(seconds, 3), "msgs_per_s": _rate(messages, seconds),
                                   "backlog_after": mem.backlog()}
            if embed:
                say("catching up: keyword languages and vectors")
                t1 = time.perf_counter()
                mem.flush()
                catch_up = time.perf_counter() - t1
                out["add_messages"]["catch_up_s"] = round(catch_up, 3)
                out["ingest_with_embeddings_msgs_per_s"] = _rate(messages, seconds + catch_up)
        say("the Agents SDK's SQLiteSession.add_items, same batches")
        out["agents_sdk_add_items"] = _agents_sdk(root / "agents.db", messages, per_session)
        say("memlane import of the same messages (JSONL export)")
        export = root / "export.jsonl"
        _export_file(export, messages, per_session)
        out["export_bytes"] = export.stat().st_size
        with Memory(root / "import.db", embedder="none") as mem:
            t0 = time.perf_counter()
            mem.import_sessions(export.read_text(encoding="utf-8"), "jsonl")
            seconds = time.perf_counter() - t0
            out["memlane_import"] = {"seconds": round(seconds, 3), "msgs_per_s": _rate(messages, seconds),
                                     "backlog_after": mem.backlog()}
    return out


def format_table(result: dict[str, Any]) -> str:
    lines = [f"{result['messages']:,} messages, {result['per_session']:,} per session"]
    for label, key in (("memlane add_messages", "add_messages"), ("memlane import (JSONL)", "memlane_import"),
                       ("Agents SDK SQLiteSession.add_items", "agents_sdk_add_items")):
        fig = result.get(key) or {}
        if "skipped" in fig:
            lines.append(f"{label:36} skipped: {fig['skipped']}")
            continue
        backlog = fig.get("backlog_after")
        extra = f"   backlog when it returned: {backlog}" if backlog else ""
        lines.append(f"{label:36} {fig['msgs_per_s']:>10,.0f} msg/s  ({fig['seconds']:.1f} s){extra}")
    if "ingest_with_embeddings_msgs_per_s" in result:
        lines.append(f"{'ingest with embeddings (add + catch-up)':36} "
                     f"{result['ingest_with_embeddings_msgs_per_s']:>10,.0f} msg/s  "
                     f"(catch-up {result['add_messages']['catch_up_s']:.1f} s)")
    return "\n".join(lines)
