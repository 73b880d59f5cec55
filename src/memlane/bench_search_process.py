"""The fresh-process half of ``memlane bench search``: run as its own Python process.

``python -m memlane.bench_search_process SPEC.json`` opens the benchmark's database the way a
CLI call, a worker or a restarted server does (nothing loaded yet), times its first
search, then times hybrid searches filtered to each user share and prints one JSON object
with the figures and the process's memory (``/proc/self/status``): RSS after the
searches (steady) and its peak, each split into private memory (``RssAnon``) and pages of
mapped files (``RssFile``: the vector index files, shared with every other process through
the OS page cache). The benchmark's own process holds every vector for the peers
(ChromaDB, sqlite-vec), so its memory would say nothing about memlane's.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memlane.memory import Memory


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


def memory_mb() -> dict[str, float]:
    """This process's memory from /proc/self/status, in MB (empty where there is no /proc)."""
    wanted = {"VmRSS": "rss_mb", "VmHWM": "rss_peak_mb", "RssAnon": "rss_anon_mb", "RssFile": "rss_file_mb"}
    out: dict[str, float] = {}
    status = Path("/proc/self/status")
    if not status.exists():
        return out
    for line in status.read_text().splitlines():
        key, _, value = line.partition(":")
        if key in wanted:
            out[wanted[key]] = round(int(value.split()[0]) / 1024, 1)
    return out


#: Run as ``python -c UNWARMED SPEC`` (not ``-m``, which imports the memlane package before
#: any code of ours could look at a clock): the clock starts before memlane is imported.
UNWARMED = (
    "import sys, time; started = time.time(); t0 = time.perf_counter()\n"
    "from memlane.bench_search_process import unwarmed_main\n"
    "unwarmed_main(sys.argv[1], started, t0)\n"
)


def unwarmed_main(spec_path: str, started: float, t0: float) -> None:
    print(json.dumps(run_unwarmed(json.loads(Path(spec_path).read_text()), started, t0)))


def run_unwarmed(spec: dict[str, Any], started: float, t0: float) -> dict[str, Any]:
    """What a one-shot process (a CLI call, a restarted worker) waits for, nothing loaded
    before it: the interpreter's start (from the parent's ``spawned_at``, wall clock), the
    imports, opening the store, and the first search (the model starts during it: its own
    start is ``model_start_ms`` of the warmed run). ``total_ms`` is import + open + first
    search; ``from_spawn_ms`` adds the interpreter's start."""
    from memlane.memory import Memory

    imported = time.perf_counter()
    with Memory(spec["db"], embedder=spec["embedder"], durability="normal") as mem:
        opened = time.perf_counter()
        mem.search(spec["queries"][0], top_k=10, **next(iter(spec["shares"].values())))
        first = time.perf_counter()
        memory = memory_mb()
    total = (first - t0) * 1000
    out: dict[str, Any] = {
        "import_ms": round((imported - t0) * 1000, 1), "open_ms": round((opened - imported) * 1000, 1),
        "first_search_ms": round((first - opened) * 1000, 1), "total_ms": round(total, 1),
        "memory_after_first_search": memory,
    }
    if "spawned_at" in spec:
        interpreter = (started - float(spec["spawned_at"])) * 1000
        out["interpreter_start_ms"] = round(interpreter, 1)
        out["from_spawn_ms"] = round(interpreter + total, 1)
    return out


def run(spec: dict[str, Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    from memlane.memory import Memory

    queries: list[str] = spec["queries"]
    shares: dict[str, dict[str, Any]] = spec["shares"]
    first_filter = next(iter(shares.values()))
    out: dict[str, Any] = {}
    with Memory(spec["db"], embedder=spec["embedder"], durability="normal") as mem:
        opened = time.perf_counter()
        engine = mem.parts.recall
        if engine is not None and engine.embedder is not None:
            # The embedding model's own start (ONNX session, tokenizer), apart from the index's.
            engine.embedder.embed_query("warm up")
        model = time.perf_counter()
        mem.search(queries[0], top_k=10, **first_filter)
        first = time.perf_counter()
        # The same search again: what the first one paid for opening the index is gone.
        mem.search(queries[0], top_k=10, **first_filter)
        again = time.perf_counter()
        out["open_ms"] = round((opened - t0) * 1000, 1)
        out["model_start_ms"] = round((model - opened) * 1000, 1)
        out["first_search_ms"] = round((first - model) * 1000, 1)
        out["second_search_ms"] = round((again - first) * 1000, 1)
        out["first_search_cold_total_ms"] = round((first - t0) * 1000, 1)
        out["by_share"] = _hybrid_by_share(mem, queries, shares)
        out["memory_after_searches"] = memory_mb()
    return out


def _hybrid_by_share(mem: Memory, queries: list[str], shares: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Hybrid search p50/p95 per user share, each search a new question: the query's
    vectors are dropped before it, so every share pays its query's embedding (kept, only
    the first share to ask a query would). Then the same query again with its vectors
    kept: the search work alone. Shares take turns query by query, so a burst of load on
    a shared machine falls on every share alike."""
    engine = mem.parts.recall
    names = list(shares)
    new: dict[str, list[float]] = {s: [] for s in names}
    cached: dict[str, list[float]] = {s: [] for s in names}
    for i, q in enumerate(queries):
        for share in names[i % len(names):] + names[: i % len(names)]:
            if engine is not None:
                engine.drop_query_vectors()
            t = time.perf_counter()
            mem.search(q, top_k=10, **shares[share])
            new[share].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            mem.search(q, top_k=10, **shares[share])
            cached[share].append((time.perf_counter() - t) * 1000)
    return {
        share: {
            "filter": shares[share],
            "search_ms_p50": round(statistics.median(new[share]), 2),
            "search_ms_p95": round(_pct(new[share], 0.95), 2),
            "search_ms_p50_query_vector_cached": round(statistics.median(cached[share]), 2),
            "search_ms_p95_query_vector_cached": round(_pct(cached[share], 0.95), 2),
        }
        for share in names
    }


def run_vectors(spec: dict[str, Any]) -> dict[str, Any]:
    """The vector index alone: ``index.search`` with each share's filter."""
    t0 = time.perf_counter()
    import numpy as np

    from memlane.models import MessageFilter
    from memlane.store import open_store

    queries = np.load(spec["vector_queries"])
    shares: dict[str, dict[str, Any]] = spec["shares"]
    out: dict[str, Any] = {}
    store = open_store(spec["db"], durability="normal")
    try:
        index = store.vector_index()
        assert index is not None
        opened = time.perf_counter()
        index.search(queries[0], 10, MessageFilter(**shares["100%"]))
        first = time.perf_counter()
        out["open_ms"] = round((opened - t0) * 1000, 1)
        out["first_search_ms"] = round((first - opened) * 1000, 1)
        by_share: dict[str, Any] = {}
        for share, flt in shares.items():
            times: list[float] = []
            for q in queries:
                t = time.perf_counter()
                index.search(q, 100, MessageFilter(**flt))
                times.append((time.perf_counter() - t) * 1000)
            by_share[share] = {"filter": flt, "vector_search_ms_p50": round(statistics.median(times), 2),
                               "vector_search_ms_p95": round(_pct(times, 0.95), 2)}
        out["by_share"] = by_share
        out["memory_after_searches"] = memory_mb()
        exact = getattr(index, "exact_top", None)
        if callable(exact):
            # Recall@10/@100 of index.search (exact int8 pre-ranking with float32 re-scoring
            # up to ivf.ANN_ABOVE rows, the inverted lists beyond) against a float32 scan
            # of every row the share's filter allows.
            from memlane.search.ivf import ANN_ABOVE

            out["ann_above_rows"] = ANN_ABOVE
            for share, flt in shares.items():
                found10: list[float] = []
                found100: list[float] = []
                for q in queries[:20]:
                    got = [m for m, _ in index.search(q, 100, MessageFilter(**flt))]
                    want = [m for m, _ in exact(q, 100, MessageFilter(**flt))]
                    found10.append(len(set(got[:10]) & set(want[:10])) / max(1, min(10, len(want))))
                    found100.append(len(set(got) & set(want)) / max(1, len(want)))
                by_share[share]["recall_at_10_vs_exact"] = round(sum(found10) / len(found10), 4)
                by_share[share]["recall_at_100_vs_exact"] = round(sum(found100) / len(found100), 4)
    finally:
        store.close()
    return out


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    if "vector_queries" in spec:
        print(json.dumps(run_vectors(spec)))
    else:
        print(json.dumps(run(spec)))


if __name__ == "__main__":
    main()
