"""``memlane eval crosslingual``: does a German query find the English memory, and the reverse?

Each pair (one JSON object per line) is a memory in one language and a question about it
in the other: ``{"id", "memory", "memory_language", "query", "query_language", "split"}``.
All memories go into one store (one session each, so every other memory is a distractor);
each query is searched and the memory's rank recorded. Reported per direction (DE query ->
EN memory, EN query -> DE memory) and split: Recall@1/5/10, for each embedder asked for,
with and without bilingual query expansion (search/crosslingual.py), plus search time.
"""

from __future__ import annotations

import tempfile
from functools import partial
from pathlib import Path
from typing import Any

from memlane.errors import InvalidInputError
from memlane.eval.labelled import read_jsonl
from memlane.eval.pairs import KS, rank_pairs
from memlane.search.engine import RecallConfig

__all__ = ["DEV_SET", "KS", "run_crosslingual_eval"]

DEV_SET = "crosslingual_de_en.jsonl"


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


def _directions(pair: dict[str, str]) -> list[str]:
    direction = f"{pair['query_language']}->{pair['memory_language']}"
    split = pair.get("split", "dev")
    return [direction, f"split:{split}", f"split:{split}/{direction}"]


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
                out["runs"][name] = rank_pairs(
                    pairs, Path(tmp) / f"{embedder}-{int(crosslingual)}.db", embedder=embedder,
                    groups=_directions, configure=partial(RecallConfig.with_, crosslingual=crosslingual),
                )
    return out
