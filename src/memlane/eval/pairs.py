"""Ranking memory/query pairs: the harness of ``memlane eval crosslingual`` and ``memlane eval wordforms``.

Every pair is a memory and a question about it. All memories go into one fresh store (one
session each, so every other memory is a distractor); each query is searched and the rank
of its own memory recorded under the groups the caller names (language, split, ...).
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from memlane.errors import InvalidInputError
from memlane.memory import Memory
from memlane.models import MessageFilter
from memlane.search.engine import Mode, RecallConfig

__all__ = ["KS", "rank_pairs"]

KS = (1, 5, 10)
_USER = "pairs-eval"

Groups = Callable[[dict[str, str]], Iterable[str]]


def rank_pairs(
    pairs: list[dict[str, str]], db: Path, *, embedder: str, groups: Groups, mode: Mode = "hybrid",
    configure: Callable[[RecallConfig], RecallConfig] = lambda c: c,
) -> dict[str, Any]:
    """Recall@1/5/10 of each group and the median search time, on a fresh store at ``db``."""
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
        cfg = configure(engine.config)
        flt = MessageFilter(user_id=_USER)
        for pair in pairs:
            t0 = time.perf_counter()
            hits = engine.search(pair["query"], flt, max(KS), mode=mode, config=cfg)
            latencies.append((time.perf_counter() - t0) * 1000)
            found = [h.message.id for h in hits]
            rank = found.index(ids[pair["id"]]) + 1 if ids[pair["id"]] in found else None
            for key in ("all", *groups(pair)):
                ranks[key].append(rank)
    figures = {
        key: {"pairs": len(r), **{f"recall@{k}": round(sum(1 for x in r if x is not None and x <= k) / len(r), 3)
                                  for k in KS}}
        for key, r in sorted(ranks.items())
    }
    return {"figures": figures, "search_ms_p50": round(statistics.median(latencies), 2)}
