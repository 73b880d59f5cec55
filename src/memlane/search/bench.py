"""``memlane bench search``: recall speed on one user's 100,000 messages, against ChromaDB.

Three figures, one run:

* ingest with embedding — messages/s through ``Memory.add_messages`` (one turn of two
  messages per call) until ``flush()`` returns, with the configured embedder;
* search latency — ``mem.search(query, user_id=..., top_k=10)`` over ``--messages`` messages
  (default 100,000) of one user, p50/p95, hybrid (BM25 + vectors + signals), plus the
  vector step alone;
* ChromaDB — the same vectors in a ChromaDB collection (cosine HNSW), the same query
  vectors and the same user filter; reported as chroma p50 / memlane vector p50.

Embedding 100,000 synthetic messages with MiniLM would take most of an hour on two cores and
says nothing about search speed, so the big corpus gets real MiniLM vectors of a pool of
distinct texts, each message the vector of its pool text plus a little noise (re-normalised).
Ingest throughput is measured separately, on real embedding of ``--ingest`` messages.
"""

from __future__ import annotations

import importlib.util
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from memlane.memory import Memory
from memlane.models import MessageFilter
from memlane.search.embedders import Embedder
from memlane.search.recall import embedder_from_settings, model_info
from memlane.search.vectors import SQLiteVectorIndex
from memlane.store.sqlite import SQLiteStore

Progress = Callable[[str, int, int], None]

_TOPICS = (
    "garden tomatoes roses compost soil seeds harvest greenhouse kayak river camping tent hiking "
    "trail mountain lake fishing guitar concert piano violin band album painting canvas pottery "
    "sculpture museum gallery novel poetry library bookstore recipe pasta curry sourdough bakery "
    "coffee espresso marathon yoga swimming tennis soccer basketball cycling bicycle puppy kitten "
    "adoption shelter volunteer charity school teacher exam university degree internship startup "
    "promotion interview salary mortgage apartment renovation kitchen furniture wedding birthday "
    "anniversary vacation beach island flight passport museum festival parade fireworks doctor "
    "therapy surgery pharmacy insurance laptop server database deployment kubernetes python "
    "invoice budget taxes grandmother cousin nephew neighbour roommate conference workshop"
).split()
_WORDS = (
    "i you we they it was were have has had really think feel want need went came saw made got "
    "about after before with from into over just still also very much many some more most little "
    "great good nice new old big small last next first today yesterday tomorrow week month year "
    "weekend morning evening night time day way thing lot fun hard easy excited happy tired busy "
    "finally always never maybe probably definitely love like enjoy try started finished planning"
).split()


def _sentence(rng: random.Random, topics: int = 2) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(6, 18))]
    for _ in range(topics):
        # Zipf-like: a few topics are common, most are rare, as in real chats
        idx = min(len(_TOPICS) - 1, int(rng.paretovariate(1.2)) - 1)
        words.insert(rng.randrange(len(words) + 1), _TOPICS[(idx * 7) % len(_TOPICS)])
    return " ".join(words).capitalize() + "."


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


def _timed(fn: Callable[[], object], runs: int) -> list[float]:
    out: list[float] = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def _time_once(fn: Callable[..., object], *args: Any, **kwargs: Any) -> float:
    t = time.perf_counter()
    fn(*args, **kwargs)
    return (time.perf_counter() - t) * 1000


def bench_ingest(embedder_spec: str, count: int, workdir: Path) -> float:
    """Messages/s through add_messages (2 per call) until flush() returns."""
    rng = random.Random(7)
    with Memory(workdir / "ingest.db", embedder=embedder_spec, durability="normal") as mem:
        sid = mem.create_session(user_id="bench")
        if mem.extensions.get("indexer") is not None:
            mem.extensions["indexer"].embedder.embed(["warm up"])  # model load is not ingest
        t = time.perf_counter()
        for i in range(0, count, 2):
            mem.add_messages(sid, [
                {"role": "user", "content": _sentence(rng), "author_name": "Ann"},
                {"role": "assistant", "content": _sentence(rng), "author_name": "Bot"},
            ][: count - i])
        mem.flush(None)
        return count / (time.perf_counter() - t)


def _build_corpus(
    path: Path, embedder: Embedder, messages: int, pool_size: int, progress: Progress | None
) -> tuple[np.ndarray[Any, np.dtype[np.float32]], list[int]]:
    rng = random.Random(11)
    nprng = np.random.default_rng(11)
    pool = [_sentence(rng) for _ in range(pool_size)]
    if progress:
        progress("embedding the text pool", 0, pool_size)
    pool_vecs = embedder.embed(pool)
    if progress:
        progress("embedding the text pool", pool_size, pool_size)
    vectors = np.zeros((messages, embedder.dimension), dtype=np.float32)
    ids: list[int] = []
    start = datetime(2024, 1, 1, tzinfo=UTC)
    with Memory(path, embedder="none", durability="normal") as mem:
        per_session = 50
        for s in range(0, messages, per_session):
            sid = mem.create_session(user_id="bench-user", title=f"chat {s // per_session}")
            batch = []
            for j in range(min(per_session, messages - s)):
                k = rng.randrange(pool_size)
                text = pool[k] + " " + " ".join(rng.choice(_WORDS) for _ in range(3))
                n = s + j
                noise = nprng.normal(0, 0.02, embedder.dimension).astype(np.float32)
                v = pool_vecs[k] + noise
                vectors[n] = v / np.linalg.norm(v)
                batch.append({
                    "role": "user" if j % 2 == 0 else "assistant", "content": text,
                    "author_name": "Ann" if j % 2 == 0 else "Bot",
                    "created_at": start + timedelta(minutes=n),
                })
            ids.extend(m.id for m in mem.add_messages(sid, batch) if m.id is not None)
            if progress and (s // per_session) % 20 == 0:
                progress("writing messages", s + per_session, messages)
    store = SQLiteStore(path, durability="normal")
    try:
        index = SQLiteVectorIndex(store)
        index.set_model_info(model_info(embedder))
        for i in range(0, messages, 5000):
            index.upsert(ids[i : i + 5000], vectors[i : i + 5000])
            if progress:
                progress("storing vectors", min(i + 5000, messages), messages)
    finally:
        store.close()
    return vectors, ids


def run_search_bench(
    *,
    messages: int = 100_000,
    ingest: int = 1000,
    queries: int = 200,
    embedder_spec: str = "minilm",
    pool_size: int = 2000,
    chroma: bool = True,
    progress: Progress | None = None,
) -> dict[str, Any]:
    embedder = embedder_from_settings(embedder_spec)
    if embedder is None:
        raise ValueError("bench search needs an embedder")
    result: dict[str, Any] = {"messages": messages, "embedder": embedder.model_id}
    rng = random.Random(5)
    query_texts = [_sentence(rng, topics=1)[: rng.randint(30, 80)] for _ in range(queries)]
    with tempfile.TemporaryDirectory(prefix="memlane-bench-") as tmp:
        work = Path(tmp)
        if progress:
            progress("ingest with embedding", 0, ingest)
        result["ingest_msgs_per_s"] = round(bench_ingest(embedder_spec, ingest, work), 1)
        db = work / "big.db"
        vectors, ids = _build_corpus(db, embedder, messages, pool_size, progress)
        qvecs = embedder.embed(query_texts)
        with Memory(db, embedder=embedder_spec, durability="normal") as mem:
            engine = mem.extensions["recall"]
            for q, v in zip(query_texts, qvecs, strict=True):
                engine._query_cache[q] = v  # query embedding is timed on its own below
            index = engine.index
            flt = MessageFilter(user_id="bench-user")
            mem.search(query_texts[0], user_id="bench-user")  # load the matrix
            if progress:
                progress("searching", 0, queries)
            hybrid: list[float] = []
            vec: list[float] = []
            kw: list[float] = []
            for q, v in zip(query_texts, qvecs, strict=True):
                hybrid.append(_time_once(mem.search, q, user_id="bench-user", top_k=10))
                vec.append(_time_once(index.search, v, 10, flt))
                kw.append(_time_once(mem.store.keyword_search, q, flt, limit=100))
            embed = _timed(lambda: embedder.embed_query("what did Ann say about the kayak trip"), 30)
        result["search_ms_p50"] = round(statistics.median(hybrid), 2)
        result["search_ms_p95"] = round(_pct(hybrid, 0.95), 2)
        result["search_ms_p50_with_query_embedding"] = round(
            statistics.median(hybrid) + statistics.median(embed), 2
        )
        result["query_embedding_ms_p50"] = round(statistics.median(embed), 2)
        result["vector_search_ms_p50"] = round(statistics.median(vec), 2)
        result["keyword_search_ms_p50"] = round(statistics.median(kw), 2)
        result["vectors"] = f"MiniLM vectors of {pool_size} texts, +noise, over {messages} messages"
        if chroma:
            result["chromadb"] = _chroma(vectors, ids, qvecs, work, progress)
            c = result["chromadb"]
            if "vector_search_ms_p50" in c and result["vector_search_ms_p50"] > 0:
                result["chromadb_vs_memlane_vector_p50"] = round(
                    c["vector_search_ms_p50"] / result["vector_search_ms_p50"], 2
                )
    return result


def chroma_available() -> bool:
    return importlib.util.find_spec("chromadb") is not None


def _chroma(
    vectors: np.ndarray[Any, np.dtype[np.float32]],
    ids: list[int],
    qvecs: np.ndarray[Any, np.dtype[np.float32]],
    work: Path,
    progress: Progress | None,
) -> dict[str, Any]:
    if not chroma_available():
        return {"skipped": "chromadb is not installed: pip install 'memlane[bench]'"}
    import chromadb

    client = chromadb.PersistentClient(path=str(work / "chroma"))
    col = client.create_collection("bench", metadata={"hnsw:space": "cosine"})
    step = 5000
    t = time.perf_counter()
    for i in range(0, len(ids), step):
        col.add(
            ids=[str(x) for x in ids[i : i + step]],
            embeddings=vectors[i : i + step].tolist(),
            metadatas=[{"user_id": "bench-user"}] * len(ids[i : i + step]),
        )
        if progress:
            progress("loading ChromaDB", min(i + step, len(ids)), len(ids))
    load_s = time.perf_counter() - t
    times = [
        _time_once(col.query, query_embeddings=[v.tolist()], n_results=10, where={"user_id": "bench-user"})
        for v in qvecs
    ]
    return {
        "vector_search_ms_p50": round(statistics.median(times), 2),
        "vector_search_ms_p95": round(_pct(times, 0.95), 2),
        "load_s": round(load_s, 1),
        "version": getattr(chromadb, "__version__", "?"),
    }
