"""`memlane bench caches`: the response cache's effect in `memlane chat`, and what keeping
per-instance caches exact costs.

Chat: a scripted week of a shell helper (seed 004), English and German: each question is
its own short conversation (a new session, as a one-shot helper opens), and questions come
back, repeated or in other words, beside new ones. The same script runs through the chat
REPL twice on fresh stores, once with ``--no-cache``, against a local chat-completions
server that answers after ``model_delay`` seconds (a stand-in for a local model; seed 004
logs 2.02 s for llama3.2:3b). Reported: model calls, hits (exact/semantic), hit rate, the
time of a turn answered from the cache beside one answered by the model, and the total.

Invalidation: what :meth:`Memory.sync_caches` costs before a read: with nothing new in
the outbox (the common case), after another instance appended 100 messages (skipped by
kind), after it forgot a session; beside the search it guards.
"""

from __future__ import annotations

import io
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

#: (day, question): each line is a new one-question session. Day 1 asks, later days come back.
WORKLOAD: tuple[tuple[int, str], ...] = (
    (1, "How do I list open ports on Linux?"),
    (1, "How do I find which process uses the most memory?"),
    (1, "How do I check how much disk space is left?"),
    (1, "How do I restart the nginx service?"),
    (1, "How do I show hidden files with ls?"),
    (1, "Wie entpacke ich eine tar.gz-Datei?"),
    (1, "Wie lege ich einen neuen Benutzer an?"),
    (1, "Wie zeige ich die Kernel-Version an?"),
    (2, "How do I list open ports on Linux?"),
    (2, "What's the command to restart nginx?"),
    (2, "how do I check how much disk space is left"),
    (2, "Wie entpacke ich eine tar.gz-Datei?"),
    (2, "How do I count the lines in a file?"),
    (2, "Wie lege ich einen neuen Benutzer an?"),
    (2, "How can ls list hidden files too?"),
    (2, "How do I set the timezone on Ubuntu?"),
    (3, "Which command shows the open ports on my Linux machine?"),
    (3, "How do I count the lines in a file?"),
    (3, "Wie zeige ich die Kernel-Version an?"),
    (3, "How do I find which process uses the most memory?"),
    (3, "How do I set the timezone on Ubuntu?"),
    (3, "Wie starte ich den nginx-Dienst neu?"),
    (3, "How do I restart the nginx service?"),
    (3, "How do I make a script executable?"),
)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def _echo(messages: list[dict[str, Any]]) -> str:
    """The stand-in model's answer: the question back (what it says does not matter here)."""
    return f"Answer to: {messages[-1]['content']}"


def _chat_run(directory: Path, url: str, calls: list[Any], use_cache: bool, embedder: str) -> dict[str, Any]:
    from rich.console import Console

    from memlane import Memory
    from memlane.server.chat import ChatModel, ChatRepl

    before = len(calls)
    turns: dict[str, list[float]] = {"cache": [], "model": []}
    with Memory(directory / ("cached.db" if use_cache else "plain.db"), embedder=embedder) as mem:
        model = ChatModel(url, "bench-model")
        mem.start_background_work()  # as a running helper: the embedding model is loaded once
        started = time.perf_counter()
        for i, (day, question) in enumerate(WORKLOAD):
            out = io.StringIO()
            repl = ChatRepl(mem, model=model, console=Console(file=out, width=300), session_id=f"day{day}-{i}",
                            use_cache=use_cache)
            t0 = time.perf_counter()
            repl.handle(question)
            mem.flush(60)  # the helper's derived work finishes between questions
            elapsed = (time.perf_counter() - t0) * 1000
            turns["cache" if "from the response cache" in out.getvalue() else "model"].append(elapsed)
        total = time.perf_counter() - started
        stats = mem.stats().get("response_cache", {})
        model.close()
    return {
        "questions": len(WORKLOAD), "model_calls": len(calls) - before,
        "hits": len(turns["cache"]), "hit_rate": round(len(turns["cache"]) / len(WORKLOAD), 3),
        "cache_turn_ms_p50": round(_pct(turns["cache"], 0.5), 1) if turns["cache"] else None,
        "model_turn_ms_p50": round(_pct(turns["model"], 0.5), 1) if turns["model"] else None,
        "total_s": round(total, 2), "saved_seconds": stats.get("saved_seconds"),
    }


def run_chat_bench(model_delay: float, embedder: str = "minilm") -> dict[str, Any]:
    from memlane import Memory
    from memlane.tiny_model import TinyModel

    with tempfile.TemporaryDirectory(prefix="memlane-bench-chat-") as tmp, \
            TinyModel(_echo, delay=model_delay) as model:
        url, calls = model.url, model.requests
        with Memory(Path(tmp) / "warm.db", embedder=embedder) as warm:  # models load once, before both runs
            warm.add("warm", "warm up the embedding and language models")
            warm.search("warm up")
        return {
            "model_delay_s": model_delay, "embedder": embedder,
            "no_cache": _chat_run(Path(tmp), url, calls, False, embedder),
            "cache": _chat_run(Path(tmp), url, calls, True, embedder),
        }


def _sync_costs(target: str, reads: int) -> dict[str, Any]:
    from memlane import Memory

    with Memory(target, embedder="hashing") as a, Memory(target, embedder="none") as b:
        for s in range(20):
            for i in range(10):
                b.add(f"s{s}", f"session {s} line {i} about ports, disks and users")
        a.search("ports")  # a read: caches fill, the outbox reader starts
        idle: list[float] = []
        for _ in range(reads):
            t0 = time.perf_counter()
            a.sync_caches()
            idle.append((time.perf_counter() - t0) * 1e6)
        search: list[float] = []
        for i in range(min(reads, 200)):
            t0 = time.perf_counter()
            a.search(f"line {i % 10} about disks")
            search.append((time.perf_counter() - t0) * 1e6)
        for i in range(100):
            b.add("busy", f"another instance writes {i}")
        t0 = time.perf_counter()
        a.sync_caches()
        after_appends = (time.perf_counter() - t0) * 1e6
        b.delete_session("s3")
        t0 = time.perf_counter()
        handled = a.sync_caches()
        after_forget = (time.perf_counter() - t0) * 1e6
        return {
            "backend": a.store.stats()["backend"],
            "idle_us_p50": round(statistics.median(idle), 1), "idle_us_p95": round(_pct(idle, 0.95), 1),
            "search_us_p50": round(statistics.median(search), 1),
            "idle_share_of_search": round(statistics.median(idle) / statistics.median(search), 4),
            "after_100_appends_us": round(after_appends, 1),
            "after_forget_us": round(after_forget, 1), "events_handled_after_forget": handled,
        }


def run_sync_bench(reads: int, postgres: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="memlane-bench-sync-") as tmp:
        out.append(_sync_costs(str(Path(tmp) / "bench.db"), reads))
    if postgres:
        from memlane.store.pg_embedded import EmbeddedPostgres

        with EmbeddedPostgres(fsync=False) as server:
            out.append(_sync_costs(server.create_database("bench_caches"), reads))
    return out


def format_table(chat: dict[str, Any] | None, sync: list[dict[str, Any]]) -> str:
    lines: list[str] = []
    if chat is not None:
        lines.append(f"memlane chat, {chat['no_cache']['questions']} one-question sessions (EN/DE), "
                     f"model answers after {chat['model_delay_s']} s, embedder {chat['embedder']}")
        lines.append(f"{'run':<10}{'model calls':>12}{'hits':>6}{'hit rate':>10}{'cache turn p50':>16}"
                     f"{'model turn p50':>16}{'total':>9}")
        for name in ("no_cache", "cache"):
            r = chat[name]
            cache_ms = "-" if r["cache_turn_ms_p50"] is None else f"{r['cache_turn_ms_p50']:.0f} ms"
            model_ms = "-" if r["model_turn_ms_p50"] is None else f"{r['model_turn_ms_p50']:.0f} ms"
            lines.append(f"{name:<10}{r['model_calls']:>12}{r['hits']:>6}{r['hit_rate']:>10.3f}"
                         f"{cache_ms:>16}{model_ms:>16}{r['total_s']:>8.1f}s")
        lines.append("")
    lines.append("cache invalidation (Memory.sync_caches before a read)")
    lines.append(f"{'backend':<10}{'idle p50':>10}{'idle p95':>10}{'search p50':>12}{'share':>8}"
                 f"{'+100 appends':>14}{'+forget':>10}")
    for r in sync:
        lines.append(f"{r['backend']:<10}{r['idle_us_p50']:>8.0f}us{r['idle_us_p95']:>8.0f}us"
                     f"{r['search_us_p50']:>10.0f}us{r['idle_share_of_search']:>8.1%}"
                     f"{r['after_100_appends_us']:>12.0f}us{r['after_forget_us']:>8.0f}us")
    return "\n".join(lines)
