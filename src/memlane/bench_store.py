"""The store benchmark behind ``memlane bench store``: SQLite and PostgreSQL side by side.

Both stores get the same synthetic log in the same run (default 100,000 messages in
1,000 sessions of 100, words drawn from a Zipf distribution over an English vocabulary,
so term frequencies look like real chat rather than one sentence repeated), then:

* add: ``Memory.add`` of one message to a session that already has history (with every
  attached component's per-turn work), and a bare ``Store.append`` of one message, timed
  one by one, alternating between the two stores so both see the same machine noise;
* search: ``Memory.search`` over all sessions (top 10) with queries made of words of a
  random stored message, each query on both stores back to back, the store that goes
  first swapping every query (neither always meets the other's warmed caches or the
  scheduler's leftovers), after a few untimed warm-up queries;
* ``search_ratio``: PostgreSQL over SQLite, of the p50s and the p95s, and the median of
  the per-query ratios (each pair ran within milliseconds, so under one load); the load
  average at the start and end of the searches is reported beside it, because on a busy
  machine a round trip to the server waits for it to be scheduled.
* with an embedder, the HNSW graph's recall@10 against exact search on PostgreSQL
  (``hnsw_recall_at_10``; SQLite's vectors are searched exactly at this size).

Durability is the default of each (SQLite ``synchronous=FULL``; PostgreSQL
``synchronous_commit=on``, fsync on), so an acknowledged add is on disk in both.
PostgreSQL statistics are refreshed with ANALYZE after the fill, as autovacuum would.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from memlane.memory import Memory
from memlane.models import Message
from memlane.store.scratch import scratch_stores
from memlane.text import content_words

Progress = Callable[[str, int, int], None]
#: Untimed queries on each store before the timed ones.
_WARMUP = 10


def _vocabulary() -> list[str]:
    """~20k English words, roughly most frequent first (the MiniLM WordPiece vocabulary)."""
    import re

    data = resources.files("memlane.search").joinpath("data/minilm-tokenizer.json").read_text("utf-8")
    vocab = json.loads(data)["model"]["vocab"]
    ordered = sorted(vocab, key=lambda t: vocab[t])
    return [t for t in ordered if re.fullmatch(r"[a-z]{3,}", t)]


class _Corpus:
    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.words = _vocabulary()
        # Zipf(1.1) weights over the frequency rank
        self.weights = [1.0 / (rank + 1) ** 1.1 for rank in range(len(self.words))]
        self._cum: list[float] = []
        total = 0.0
        for w in self.weights:
            total += w
            self._cum.append(total)

    def text(self) -> str:
        n = self.rng.randint(6, 28)
        return " ".join(self.rng.choices(self.words, cum_weights=self._cum, k=n)).capitalize() + "."

    def query(self, message: str) -> str:
        words = content_words(message)
        return " ".join(self.rng.sample(words, k=min(len(words), self.rng.randint(2, 4))))


def _summary(samples_s: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples_s)

    def pct(q: float) -> float:
        return round(ms[min(len(ms) - 1, max(0, round(q * (len(ms) - 1))))], 3)

    return {"p50_ms": pct(0.50), "p95_ms": pct(0.95), "mean_ms": round(statistics.fmean(ms), 3)}


def _ratios(lite_s: list[float], pg_s: list[float]) -> dict[str, float]:
    """PostgreSQL / SQLite: of the p50s, of the p95s, and the median of paired ratios."""
    lite, pg = _summary(lite_s), _summary(pg_s)
    paired = statistics.median(p / max(q, 1e-9) for p, q in zip(pg_s, lite_s, strict=True))
    return {
        "p50": round(pg["p50_ms"] / max(lite["p50_ms"], 1e-9), 3),
        "p95": round(pg["p95_ms"] / max(lite["p95_ms"], 1e-9), 3),
        "paired_median": round(paired, 3),
    }


def _load() -> list[float]:
    """The 1/5/15-minute load averages (empty where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def _hnsw_recall(mem: Memory, texts: list[str], corpus: _Corpus, queries: int = 50) -> float | None:
    """Share of the exact top 10 (every vector compared) that PostgreSQL's HNSW graph
    returns, over ``queries`` queries made like the timed ones; None without vectors."""
    engine = mem.parts.recall
    index = engine.index if engine is not None else None
    graph_recall = getattr(index, "graph_recall", None)  # the pgvector index has a graph
    if engine is None or engine.embedder is None or not callable(graph_recall):
        return None
    vectors = [engine.embed_query(corpus.query(corpus.rng.choice(texts))) for _ in range(queries)]
    return round(float(graph_recall(vectors, 10)), 4)


def run_store_bench(
    *,
    postgres: str = "embedded",
    messages: int = 100_000,
    per_session: int = 100,
    adds: int = 1000,
    searches: int = 200,
    embedder: str = "none",
    progress: Progress | None = None,
    workdir: Path | None = None,
) -> dict[str, Any]:
    """Fill both stores, then time add and search on each; returns the JSON-ready result."""
    say: Progress = progress or (lambda _what, _done, _total: None)
    corpus = _Corpus()
    sessions = max(1, messages // per_session)
    with (
        tempfile.TemporaryDirectory(dir=workdir, prefix="memlane-bench-") as tmp,
        scratch_stores(None, tmp) as lite_stores,
        scratch_stores(postgres, tmp) as pg_stores,
        lite_stores.target("bench") as lite_target,
        pg_stores.target("bench") as pg_target,
    ):
        mems = {
            "sqlite": Memory(lite_target, embedder=embedder),
            "postgres": Memory(pg_target, embedder=embedder),
        }
        try:
            texts: list[str] = []
            for s in range(sessions):
                batch = [
                    {"role": "user" if i % 2 == 0 else "assistant", "content": corpus.text()}
                    for i in range(per_session)
                ]
                texts.extend(m["content"] for m in batch[:3])
                for mem in mems.values():
                    sid = mem.create_session(session_id=f"s{s}", user_id=f"u{s % 50}")
                    mem.add_messages(sid, batch)
                say("fill", (s + 1) * per_session, sessions * per_session)
            for name, mem in mems.items():
                say(f"indexing {name}", 0, 1)
                mem.flush(None)
            pg_store = mems["postgres"].store
            pg_store.write(lambda c: c.execute("ANALYZE"))  # type: ignore[attr-defined]

            timings: dict[str, dict[str, list[float]]] = {
                n: {"add": [], "append": [], "search": []} for n in mems
            }
            for i in range(adds):
                text = corpus.text()
                for name, mem in mems.items():
                    t0 = time.perf_counter()
                    mem.add(f"s{i % sessions}", text)
                    timings[name]["add"].append(time.perf_counter() - t0)
                    # the store alone: one Store.append, without Memory's observers
                    msg = Message(role="user", content=text, token_count=20)
                    t0 = time.perf_counter()
                    mem.store.append(f"s{(i + 1) % sessions}", [msg])
                    timings[name]["append"].append(time.perf_counter() - t0)
                say("add", i + 1, adds)
            for mem in mems.values():
                mem.flush(None)
            for _ in range(_WARMUP):  # first searches fill caches (statistics, query plans)
                query = corpus.query(corpus.rng.choice(texts))
                for mem in mems.values():
                    mem.search(query, top_k=10)
            hits: dict[str, int] = dict.fromkeys(mems, 0)
            load_before = _load()
            names = list(mems)
            for i in range(searches):
                query = corpus.query(corpus.rng.choice(texts))
                for name in names if i % 2 == 0 else names[::-1]:
                    t0 = time.perf_counter()
                    found = mems[name].search(query, top_k=10)
                    timings[name]["search"].append(time.perf_counter() - t0)
                    hits[name] += len(found)
                say("search", i + 1, searches)
            load_after = _load()
            result: dict[str, Any] = {
                "messages": sessions * per_session,
                "sessions": sessions,
                "adds": adds,
                "searches": searches,
                "embedder": embedder,
                "postgres_server": pg_stores.spec if pg_stores.spec == "embedded" else "postgresql://...",
            }
            for name, mem in mems.items():
                stats = mem.store.stats()
                result[name] = {
                    "memory_add": _summary(timings[name]["add"]),
                    "store_append": _summary(timings[name]["append"]),
                    "search_top10": _summary(timings[name]["search"]),
                    "mean_hits": round(hits[name] / searches, 2),
                    "stored_messages": stats["messages"],
                    "bytes": stats["bytes"],
                }
            result["search_ratio"] = {
                **_ratios(timings["sqlite"]["search"], timings["postgres"]["search"]),
                "load_average_start": load_before,
                "load_average_end": load_after,
            }
            if embedder != "none":
                result["postgres"]["hnsw_recall_at_10"] = _hnsw_recall(mems["postgres"], texts, corpus)
            version = pg_store.read("SHOW server_version")[0][0]  # type: ignore[attr-defined]
            result["postgres_version"] = str(version)
            return result
        finally:
            for mem in mems.values():
                mem.close()
