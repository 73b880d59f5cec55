"""The erase benchmark behind `memlane bench erase`: what forgetting one conversation costs.

Two SQLite stores of different sizes (the small one a tenth of the large one) get the
same conversations to erase, and each erase (``Memory.delete_session``: rows, full-text
entries, derived data, the bytes in the file and its WAL) is timed on both in one run,
interleaved, so the ratio says whether the cost follows what is erased (ratio near 1) or
the size of the store (ratio near 10). Conversations are made of varied sentences so the
full-text index is as large as a real one of that many messages.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memlane.memory import Memory

_SESSION_MESSAGES = 40  # messages per conversation, in the store and in each erased one
_VOCABULARY = 20_000  # distinct made-up words the messages are drawn from


def _words(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choices(letters, k=rng.randint(3, 9))) for _ in range(_VOCABULARY)]


def _fill(mem: Memory, prefix: str, sessions: int, words: list[str], rng: random.Random,
          progress: Callable[[str], None] | None) -> list[str]:
    ids: list[str] = []
    for n in range(sessions):
        sid = f"{prefix}-{n}"
        mem.add_messages(sid, [
            {"role": "user" if i % 2 == 0 else "assistant", "content": " ".join(rng.choices(words, k=14))}
            for i in range(_SESSION_MESSAGES)
        ])
        ids.append(sid)
        if progress is not None and n % 500 == 499:
            progress(f"{prefix}: {(n + 1) * _SESSION_MESSAGES:,} messages")
    return ids


def _summary(samples_s: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples_s)
    return {"p50_ms": round(statistics.median(ms), 2), "max_ms": round(ms[-1], 2),
            "mean_ms": round(statistics.fmean(ms), 2)}


def run_erase_bench(*, messages: int = 100_000, erases: int = 20,
                    progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Erase ``erases`` conversations from a store of ``messages`` and one of a tenth of it."""
    sizes = {"small": max(messages // 10, _SESSION_MESSAGES * erases),
             "large": max(messages, _SESSION_MESSAGES * erases)}
    rng = random.Random(18)
    words = _words(rng)
    with tempfile.TemporaryDirectory() as tmp:
        stores: dict[str, Memory] = {}
        doomed: dict[str, list[str]] = {}
        try:
            for name, size in sizes.items():
                mem = Memory(Path(tmp) / f"{name}.db", embedder="none")
                stores[name] = mem
                ids = _fill(mem, name, size // _SESSION_MESSAGES, words, rng, progress)
                # spread over the store's history: old conversations sit in the big segments
                doomed[name] = ids[:: max(1, len(ids) // erases)][:erases]
            fts = stores["large"].store.stats().get("sqlite_version", "")
            times: dict[str, list[float]] = {name: [] for name in sizes}
            for i in range(erases):
                for name, mem in stores.items():  # interleaved: both see the same machine load
                    t0 = time.perf_counter()
                    if not mem.delete_session(doomed[name][i]):
                        raise RuntimeError(f"bench: {doomed[name][i]} was not there to erase")
                    times[name].append(time.perf_counter() - t0)
                if progress is not None:
                    progress(f"erased {i + 1}/{erases}")
            secure = stores["large"].store.stats().get("fts_secure_delete")
        finally:
            for mem in stores.values():
                mem.close()
    small, large = _summary(times["small"]), _summary(times["large"])
    return {
        "messages_small": sizes["small"], "messages_large": sizes["large"],
        "messages_per_erase": _SESSION_MESSAGES, "erases": erases,
        "sqlite": fts, "fts_secure_delete": secure,
        "small": small, "large": large,
        "large_vs_small_p50": round(large["p50_ms"] / small["p50_ms"], 2) if small["p50_ms"] else None,
    }


def format_table(r: dict[str, Any]) -> str:
    mode = "in-place full-text deletes" if r["fts_secure_delete"] else "full-text index rewritten per erase"
    return "\n".join([
        f"erase one conversation of {r['messages_per_erase']} messages (delete_session, 0 bytes left; "
        f"SQLite {r['sqlite']}, {mode}), {r['erases']} erases per store",
        f"  store of {r['messages_small']:>9,} messages: p50 {r['small']['p50_ms']} ms, "
        f"max {r['small']['max_ms']} ms",
        f"  store of {r['messages_large']:>9,} messages: p50 {r['large']['p50_ms']} ms, "
        f"max {r['large']['max_ms']} ms",
        f"  large / small (p50): {r['large_vs_small_p50']}x  (1x: cost follows what is erased; "
        f"{r['messages_large'] // r['messages_small']}x: it follows the store's size)",
    ])
