"""`memlane bench hotcache`: a window read from the log beside the same window served from the
shared hot cache (a private Valkey on a Unix socket), on one session, two instances.

Timed side by side in one run: instance A reading without ``redis_url`` (the log only),
instance B's miss (log read, store in Valkey, re-check the session), and B's hit.
"""

from __future__ import annotations

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
            return {"messages": messages, "budget": budget, "reads": reads,
                    "window_messages": len(win.messages), "log_ms": log_ms,
                    "miss_ms": miss_ms, "hit_ms": hit_ms, "hits": shared.hot_window_counts["hits"]}


def format_table(result: dict[str, Any]) -> str:
    return "\n".join([
        f"session of {result['messages']} messages, window budget {result['budget']} tokens "
        f"({result['window_messages']} messages), median of {result['reads']} reads",
        f"  from the log (no redis_url)        {result['log_ms']:8.3f} ms",
        f"  hot cache miss (read, store, check) {result['miss_ms']:8.3f} ms",
        f"  hot cache hit (Valkey, unix socket) {result['hit_ms']:8.3f} ms",
    ])
