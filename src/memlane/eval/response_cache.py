"""``memlane eval response-cache``: when may a new question take a cached answer?

Each line of the set is a labelled pair ``{"id", "language", "split", "kind", "same", "a",
"b"}``: ``same`` is true when ``b`` asks what ``a`` asks (a paraphrase) and false for a
different question (``near``: one detail changed, cat/dog, enable/disable, port 22/80;
``diff``: same topic, other question; ``crosslang``: the same question in the other
language, whose cached answer would be in the wrong language).

The threshold per language is calibrated on the ``tune`` split only: the lowest cosine at
which the semantic match (:func:`memlane.context.question_match.semantic_match`) takes no
different question there; a wrong cached answer costs far more than a missed one.
Precision and recall are then reported per language and split, the ``held`` split never
having been looked at while choosing.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlane.context.question_match import SEMANTIC_THRESHOLDS, semantic_match
from memlane.errors import InvalidInputError
from memlane.eval.labelled import read_jsonl

__all__ = ["DEV_SET", "calibrate", "run_response_cache_eval"]

DEV_SET = "response_cache_en_de.jsonl"


@dataclass(frozen=True, slots=True)
class Pair:
    id: str
    language: str
    split: str
    kind: str
    same: bool
    a: str
    b: str
    cosine: float


def load_pairs(path: Path | str | None, embedder: Any) -> list[Pair]:
    raw: list[dict[str, Any]] = []
    for where, row in read_jsonl(path, DEV_SET, "labelled question pairs"):
        if not isinstance(row, dict) or not isinstance(row.get("same"), bool) \
                or not all(isinstance(row.get(k), str) for k in ("a", "b", "language")):
            raise InvalidInputError(f"{where}: a pair needs strings a, b, language and a boolean same")
        raw.append(row)
    a = embedder.embed([r["a"] for r in raw])
    b = embedder.embed([r["b"] for r in raw])
    return [
        Pair(str(r.get("id") or i), r["language"], str(r.get("split") or "tune"), str(r.get("kind") or ""),
             r["same"], r["a"], r["b"], float(a[i] @ b[i]))
        for i, r in enumerate(raw)
    ]


def _figures(pairs: list[Pair], thresholds: dict[str, float]) -> dict[str, Any]:
    said = [(p, semantic_match(p.a, p.b, p.cosine, thresholds)) for p in pairs]
    tp = sum(1 for p, hit in said if hit and p.same)
    fp = sum(1 for p, hit in said if hit and not p.same)
    same = sum(1 for p in pairs if p.same)
    return {
        "pairs": len(pairs), "paraphrases": same, "matched": tp + fp, "wrong": fp,
        "precision": round(tp / (tp + fp), 3) if tp + fp else None,
        "recall": round(tp / same, 3) if same else None,
    }


#: Added above the highest cosine of a different question seen: some twenty negatives per
#: language cannot show the tail of all different questions, and a wrong cached answer
#: costs far more than a missed one.
MARGIN = 0.10


def calibrate(pairs: list[Pair], language: str) -> float:
    """The threshold for ``language``: the highest cosine of a different question of
    ``pairs`` that the other rules let through, rounded up to 0.01, plus :data:`MARGIN`."""
    mine = [p for p in pairs if p.language == language]
    through = [p.cosine for p in mine if not p.same and semantic_match(p.a, p.b, p.cosine, {language: -1.0})]
    return round(math.floor(max(through, default=0.0) * 100 + 1) / 100 + MARGIN, 2)


def run_response_cache_eval(path: Path | str | None = None, *, embedder: str = "minilm") -> dict[str, Any]:
    """Calibrate on ``tune``, report precision/recall per language and split for the shipped
    thresholds and the calibrated ones."""
    from memlane.search.embedders import get_embedder

    pairs = load_pairs(path, get_embedder(embedder))
    tune = [p for p in pairs if p.split == "tune"]
    calibrated = {lang: calibrate(tune, lang) for lang in sorted({p.language for p in pairs})}
    groups: dict[str, list[Pair]] = defaultdict(list)
    for p in pairs:
        for key in ("all", f"{p.split}", f"{p.split}/{p.language}"):
            groups[key].append(p)
    return {
        "embedder": embedder,
        "calibrated": calibrated,
        "shipped": dict(SEMANTIC_THRESHOLDS),
        "figures": {key: _figures(groups[key], SEMANTIC_THRESHOLDS) for key in sorted(groups)},
        "figures_calibrated": {key: _figures(groups[key], calibrated) for key in sorted(groups)},
        "cosines": {
            kind: [round(p.cosine, 3) for p in pairs if p.kind == kind] for kind in sorted({p.kind for p in pairs})
        },
    }
