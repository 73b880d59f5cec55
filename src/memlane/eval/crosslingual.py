"""``memlane eval crosslingual``: does a German query find the English memory, and the reverse?

Each pair (one JSON object per line) is a memory in one language and a question about it
in the other: ``{"id", "memory", "memory_language", "query", "query_language", "split"}``.
All memories go into one store (one session each, so every other memory is a distractor);
each query is searched and the memory's rank recorded. Reported per direction (DE query ->
EN memory, EN query -> DE memory) and split: Recall@1/5/10, for each embedder asked for,
with and without bilingual query expansion (search/crosslingual.py), plus search time.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from memlane.errors import InvalidInputError
from memlane.eval.labelled import read_jsonl
from memlane.memory import Memory
from memlane.models import MessageFilter

__all__ = ["DEV_SET", "run_crosslingual_eval"]

DEV_SET = "crosslingual_de_en.jsonl"
KS = (1, 5, 10)
_USER = "crosslingual-eval"


def _load(path: Path | str | None) -> list[dict[str, str]]:
    pairs = []
    for where, pair in read_jsonl(path, DEV_SET, "DE/EN pairs"):
        if not isinstance(pair, dict) or not all(
            isinstance(pair.get(k), str) and pair.get(k) for k in ("memory", "query")
        ) or {pair.get("memory_language"), pair.get("query_language")} != {"de", "en"}:
            raise InvalidInputError(
                f"{where}: a pair needs memory, query, and memory_language/query_language de and en"
            )
        pairs.append({k: str(v) for k, v in pair.items()})
    return pairs


def _run(pairs: list[dict[str, str]], embedder: str, crosslingual: bool, workdir: str) -> dict[str, Any]:
    db = Path(workdir) / f"{embedder}-{int(crosslingual)}.db"
    ranks: dict[str, list[int | None]] = defaultdict(list)
    latencies: list[float] = []
    with Memory(str(db), embedder=None if embedder == "none" else embedder, durability="normal") as mem:
        ids: dict[str, int] = {}
        for pair in pairs:
            sid = mem.create_session(user_id=_USER)
            stored = mem.add_messages(sid, [{"role": "user", "content": pair["memory"]}])
            mid = stored[0].id
            assert mid is not None
            ids[pair["id"]] = mid
        mem.flush(timeout=None)
        engine = mem.parts.recall
        if engine is None:
            raise InvalidInputError("the recall engine is not attached to this Memory")
        cfg = engine.config.with_(crosslingual=crosslingual)
        flt = MessageFilter(user_id=_USER)
        for pair in pairs:
            t0 = time.perf_counter()
            hits = engine.search(pair["query"], flt, max(KS), config=cfg)
            latencies.append((time.perf_counter() - t0) * 1000)
            found = [h.message.id for h in hits]
            rank = found.index(ids[pair["id"]]) + 1 if ids[pair["id"]] in found else None
            direction = f"{pair['query_language']}->{pair['memory_language']}"
            for key in ("all", direction, f"split:{pair.get('split', 'dev')}",
                        f"split:{pair.get('split', 'dev')}/{direction}"):
                ranks[key].append(rank)
    figures = {
        key: {"pairs": len(r), **{f"recall@{k}": round(sum(1 for x in r if x is not None and x <= k) / len(r), 3)
                                  for k in KS}}
        for key, r in sorted(ranks.items())
    }
    return {"figures": figures, "search_ms_p50": round(statistics.median(latencies), 2)}


def run_crosslingual_eval(
    path: Path | str | None = None, *, embedders: tuple[str, ...] = ("minilm",),
) -> dict[str, Any]:
    """For each embedder, recall with and without bilingual query expansion."""
    pairs = _load(path)
    out: dict[str, Any] = {"pairs": len(pairs), "runs": {}}
    with tempfile.TemporaryDirectory(prefix="memlane-crosslingual-") as tmp:
        for embedder in embedders:
            for crosslingual in (False, True):
                name = f"{embedder}{' + expansion' if crosslingual else ''}"
                out["runs"][name] = _run(pairs, embedder, crosslingual, tmp)
    return out
