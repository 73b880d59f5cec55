"""`memlane bench hotcache`: a window read from the log beside the same window served from the
shared hot cache (a private Valkey on a Unix socket), on one session, two instances.

Timed side by side in one run: instance A reading without ``redis_url`` (the log only),
instance B's miss (log read, store in Valkey, re-check the session), and B's hit.

Context packets too: what building one costs beside serving it from Valkey through
``mem.context`` (a hit: versions read, GET, decode, render; memlane/hot_packets.py), the
GET and JSON decode of a packet's bytes alone, and what every miss adds (a GET that finds
nothing and a SET of the packet).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _median_ms(call: Callable[[], object], reads: int) -> float:
    times = []
    for _ in range(reads):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def run_hot_window_bench(messages: int, budget: int, reads: int) -> dict[str, Any]:
    from memlane import Memory
    from memlane.bus.redis_bus import embedded_server
    from memlane.hot_windows import session_tag

    with tempfile.TemporaryDirectory() as tmp, embedded_server() as url:
        target = str(Path(tmp) / "bench.db")
        with Memory(target, embedder="none") as plain, \
                Memory(target, embedder="none", redis_url=url, redis_prefix="bench") as shared:
            sid = plain.create_session(session_id="bench", system_prompt="You are a helpful assistant.")
            plain.add_messages(sid, [{"role": "user" if i % 2 == 0 else "assistant",
                                      "content": f"message {i} about the quarterly report and its figures"}
                                     for i in range(messages)])
            hot = shared.hot_cache
            assert hot is not None

            def miss() -> None:
                hot.invalidate(session_tag(sid))
                shared.window(sid, budget)

            log_ms = _median_ms(lambda: plain.window(sid, budget), reads)
            miss_ms = _median_ms(miss, reads)
            shared.window(sid, budget)
            hit_ms = _median_ms(lambda: shared.window(sid, budget), reads)
            win = plain.window(sid, budget)
            result: dict[str, Any] = {"messages": messages, "budget": budget, "reads": reads,
                      "window_messages": len(win.messages), "log_ms": log_ms,
                      "miss_ms": miss_ms, "hit_ms": hit_ms, "hits": shared.hot_window_counts["hits"]}
            result.update(_packet_figures(plain, shared, sid, budget, max(10, reads // 10), url))
    result["chat_packets"] = run_packet_repeats()
    return result


#: What a user asks the bench session (its messages are about a quarterly report).
_QUERIES = ("what did we say about the quarterly report?", "which figures were in message 12?",
            "summarise the report", "who wrote the figures?")


def _packet_figures(mem: Any, shared: Any, sid: str, budget: int, reads: int, url: str) -> dict[str, Any]:
    """A context packet built from the log beside the same packet from Valkey (``shared``:
    the same database with ``redis_url``), and a packet's bytes read from Valkey alone."""
    from memlane.bus.redis_bus import redis_client

    for _ in range(2):  # warm: summaries caught up, the keyword index read once
        mem.context(sid, _QUERIES[0], budget)
    mem.flush()
    turn = iter(range(10**9))
    build_ms = _median_ms(lambda: mem.context(sid, _QUERIES[next(turn) % len(_QUERIES)], budget), reads)
    fresh_query = iter(range(10**9))

    def missed() -> None:  # a question not asked before: built, versions checked, kept
        n = next(fresh_query)
        shared.context(sid, f"{_QUERIES[n % len(_QUERIES)]} ({n})", budget)

    missed_ms = _median_ms(missed, reads)
    for query in _QUERIES:  # one build of each, kept in Valkey for every instance
        shared.context(sid, query, budget)
    served_ms = _median_ms(lambda: shared.context(sid, _QUERIES[next(turn) % len(_QUERIES)], budget), reads)
    built = mem.context(sid, _QUERIES[0], budget)
    served = shared.context(sid, _QUERIES[0], budget)
    assert served.to_messages() == built.to_messages(), "a packet from Valkey must render as built"
    blob = built.to_json().encode()
    hot = redis_client(url)
    hot.set("bench:packet", blob)
    hit_ms = _median_ms(lambda: json.loads(hot.get("bench:packet") or b"{}"), reads * 10)
    fresh = iter(range(10**9))

    def miss() -> None:
        key = f"bench:packet:{next(fresh)}"
        hot.get(key)
        hot.set(key, blob, px=60_000)

    miss_ms = _median_ms(miss, reads * 10)
    hot.close()
    return {"packet_build_ms": build_ms, "packet_bytes": len(blob), "packet_hit_ms": hit_ms,
            "packet_miss_extra_ms": miss_ms, "packet_served_ms": served_ms, "packet_missed_ms": missed_ms,
            "packet_counts": dict(shared.hot_packet_counts)}



def format_table(result: dict[str, Any]) -> str:
    return "\n".join([
        f"session of {result['messages']} messages, window budget {result['budget']} tokens "
        f"({result['window_messages']} messages), median of {result['reads']} reads",
        f"  from the log (no redis_url)        {result['log_ms']:8.3f} ms",
        f"  hot cache miss (read, store, check) {result['miss_ms']:8.3f} ms",
        f"  hot cache hit (Valkey, unix socket) {result['hit_ms']:8.3f} ms",
        f"context packet ({result['packet_bytes']:,} bytes as JSON), median",
        f"  built from the log (mem.context)    {result['packet_build_ms']:8.3f} ms",
        f"  from Valkey (mem.context, a hit)    {result['packet_served_ms']:8.3f} ms"
        f"   ({result['packet_counts']['hits']} hits, {result['packet_counts']['kept']} kept)",
        f"  a miss with redis_url (built, kept) {result['packet_missed_ms']:8.3f} ms",
        f"  a hit's bytes: GET + JSON decode    {result['packet_hit_ms']:8.3f} ms",
        f"  a miss adds: GET (none) + SET       {result['packet_miss_extra_ms']:8.3f} ms",
        *(f"memlane chat, {chat['turns']} turns {where.replace('_', ' ')}: {chat[where]['builds']} packets built, "
          f"{chat[where]['repeats']} of them built before (what a packet cache could serve)"
          for chat in [result["chat_packets"]] for where in ("in_process", "rest")),
    ])


def run_packet_repeats(turns: int = 12) -> dict[str, Any]:
    """How often `memlane chat` builds a context packet it built before (the same session
    version, query, budget and strategy): the most hits a shared packet cache could have.
    One conversation of ``turns`` questions (one asked twice), in process and over REST,
    with the response cache on (it asks for the packet too)."""
    import io

    from rich.console import Console

    from memlane import Memory
    from memlane.bench_caches import WORKLOAD
    from memlane.client import MemoryClient
    from memlane.server.app import create_app
    from memlane.server.chat import ChatModel, ChatRepl
    from memlane.server.runner import ServerThread
    from memlane.tiny_model import TinyModel

    class Recording(Memory):
        """Memory that notes the key of every packet it builds (the measuring instrument)."""

        keys: list[tuple[Any, ...]]

        def context(self, session_id: str, query: str | None = None, max_tokens: int | None = None,
                    **options: Any) -> Any:
            session = self.get_session(session_id)
            self.keys.append((session.id, session.version, query, max_tokens, options.get("strategy")))
            return super().context(session_id, query, max_tokens, **options)

    questions = [q for _, q in WORKLOAD[: turns - 1]] + [WORKLOAD[0][1]]  # the first one again
    out: dict[str, Any] = {"turns": len(questions)}
    with tempfile.TemporaryDirectory() as tmp, TinyModel() as tiny:
        for where in ("in_process", "rest"):
            mem = Recording(Path(tmp) / f"{where}.db", embedder="none")
            mem.keys = []
            with mem:
                server = ServerThread(create_app(mem)) if where == "rest" else None
                front: Any = MemoryClient(server.start()) if server is not None else mem
                model = ChatModel(tiny.url, "tiny")
                repl = ChatRepl(front, model=model, console=Console(file=io.StringIO()), session_id="chat",
                                use_cache=True)
                for question in questions:
                    repl.handle(question)
                model.close()
                if server is not None:
                    front.close()
                    server.stop()
                out[where] = {"builds": len(mem.keys), "repeats": len(mem.keys) - len(set(mem.keys))}
    return out
