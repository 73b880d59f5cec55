"""``memlane eval recall``: does a question find its memory in the same language, EN and DE?

Each pair (one JSON object per line) is a memory and a natural question about it in the
same language: ``{"id", "memory", "query", "language", "split"}``. Questions use other
word forms than their memory as people do ("Datenbanken" / "Datenbank", "gestohlen" /
"stiehlt"), which is what stemming in the keyword index is for. All memories go into one
store, so every other memory is a distractor. Reported per language and split, for the
keyword index alone (BM25) and for hybrid search, with search time: Recall@1/5/10.

The shipped set (``recall_en_de.jsonl``: 90 German, 50 English pairs, every third held
aside) was written before the keyword index learnt German stems, and not changed after.
24 German pairs of category ``compound_reverse`` (the memory writes a compound, the
question its parts: "Datenbanksicherung" / "Sicherung der Datenbank"; 8 held aside) were
written before the keyword index learnt to split stored compounds.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from memlane.errors import InvalidInputError
from memlane.eval.labelled import read_jsonl
from memlane.eval.pairs import KS, rank_pairs
from memlane.search.engine import Mode

__all__ = ["DEV_SET", "KS", "run_recall_eval"]

DEV_SET = "recall_en_de.jsonl"
MODES: tuple[Mode, ...] = ("keyword", "hybrid")


def _load(path: Path | str | None) -> list[dict[str, str]]:
    pairs = []
    for where, pair in read_jsonl(path, DEV_SET, "memory/query pairs"):
        if not isinstance(pair, dict) or not all(
            isinstance(pair.get(k), str) and pair.get(k) for k in ("id", "memory", "query")
        ) or pair.get("language") not in ("de", "en"):
            raise InvalidInputError(f"{where}: a pair needs id, memory, query and language (de or en)")
        pairs.append({k: str(v) for k, v in pair.items()})
    return pairs


def _groups(pair: dict[str, str]) -> list[str]:
    split, lang = pair.get("split", "dev"), pair["language"]
    groups = [lang, f"split:{split}", f"split:{split}/{lang}"]
    if pair.get("category"):  # e.g. compound_reverse: the query names a stored compound's parts
        groups += [f"category:{pair['category']}/{lang}", f"category:{pair['category']}/{split}/{lang}"]
    return groups


def run_recall_eval(path: Path | str | None = None, *, embedder: str = "minilm") -> dict[str, Any]:
    """Recall per language and split, keyword alone and hybrid (hybrid needs an embedder)."""
    pairs = _load(path)
    out: dict[str, Any] = {"pairs": len(pairs), "embedder": embedder, "runs": {}}
    with tempfile.TemporaryDirectory(prefix="memlane-recall-") as tmp:
        for mode in MODES:
            out["runs"][mode] = rank_pairs(
                pairs, Path(tmp) / f"{mode}.db", embedder=embedder, groups=_groups, mode=mode,
            )
    return out
