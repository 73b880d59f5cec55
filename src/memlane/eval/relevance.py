"""``memlane eval relevance``: how well the calibrated relevance separates relevant hits.

Loads the hand-labelled set ``eval/data/relevance_dev.json`` (conversations, queries, the
messages relevant to each) into a fresh memory, searches every query and compares each
hit's relevance with its label. ``fit=True`` refits the logistic coefficients of
:mod:`memlane.search.relevance` on the "fit" queries (Newton's method, a little L2); the
report is always on the "held_out" queries, which are never fitted.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from memlane.memory import Memory
from memlane.search.relevance import Calibration

__all__ = ["Sample", "collect", "fit", "load_set", "report"]

FLOORS = (0.3, 0.5, 0.7)


@dataclass(frozen=True, slots=True)
class Sample:
    query: str
    split: str
    features: tuple[float, float, float]  # cosine, own, context
    relevance: float
    label: bool


def load_set(path: Path | None = None) -> dict[str, Any]:
    if path is None:
        text = resources.files("memlane.eval").joinpath("data/relevance_dev.json").read_text("utf-8")
    else:
        text = path.read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def collect(data: dict[str, Any], embedder: str | None, top_k: int = 20) -> list[Sample]:
    """Every hit of every query with its features and label."""
    with tempfile.TemporaryDirectory() as tmp, Memory(Path(tmp) / "rel.db", embedder=embedder,
                                                      notes_enabled=False) as mem:
        where: dict[int, tuple[str, int]] = {}
        for name, turns in data["conversations"].items():
            sid = mem.create_session(session_id=name)
            for i, (role, text) in enumerate(turns):
                msg = mem.save_message(sid, {"role": role, "content": text})
                assert msg.id is not None
                where[msg.id] = (name, i)
        mem.flush()
        out: list[Sample] = []
        for q in data["queries"]:
            relevant = {(c, i) for c, i in q["relevant"]}
            for hit in mem.search(q["query"], top_k=top_k):
                s = hit.scores
                out.append(Sample(
                    q["query"], q["split"], (s["cosine"], s["own"], s["context"]), hit.score,
                    where.get(hit.message.id or -1) in relevant,
                ))
        return out


def fit(samples: list[Sample], *, l2: float = 0.1, vectors: bool = True) -> Calibration:
    """Logistic regression on the "fit" samples (Newton-Raphson with an L2 penalty)."""
    train = [s for s in samples if s.split == "fit"]
    cols = [0, 1, 2] if vectors else [1, 2]
    x = np.array([[1.0, *(s.features[c] for c in cols)] for s in train])
    y = np.array([1.0 if s.label else 0.0 for s in train])
    w = np.zeros(x.shape[1])
    penalty = np.eye(x.shape[1]) * l2
    penalty[0, 0] = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        grad = x.T @ (p - y) + penalty @ w
        hess = (x.T * (p * (1 - p))) @ x + penalty
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    coef = [round(float(v), 2) for v in w]
    if vectors:
        return Calibration(bias=coef[0], cosine=coef[1], own=coef[2], context=coef[3])
    return Calibration(bias=coef[0], cosine=0.0, own=coef[1], context=coef[2])


def report(samples: list[Sample], split: str = "held_out") -> dict[str, Any]:
    """Precision and recall of "relevance >= floor" per floor; queries with nothing relevant
    stored count how often they still got a hit above the floor (padding)."""
    chosen = [s for s in samples if s.split == split]
    positives = sum(s.label for s in chosen)
    by_query: dict[str, list[Sample]] = {}
    for s in chosen:
        by_query.setdefault(s.query, []).append(s)
    empty = [q for q, ss in by_query.items() if not any(s.label for s in ss)]
    out: dict[str, Any] = {"split": split, "hits": len(chosen), "relevant_hits": positives,
                           "queries": len(by_query), "floors": {}}
    for floor in FLOORS:
        kept = [s for s in chosen if s.relevance >= floor]
        tp = sum(s.label for s in kept)
        out["floors"][str(floor)] = {
            "precision": round(tp / len(kept), 3) if kept else None,
            "recall": round(tp / positives, 3) if positives else None,
            "nothing_relevant_queries_with_a_hit": sum(
                any(s.relevance >= floor for s in by_query[q]) for q in empty),
            "nothing_relevant_queries": len(empty),
        }
    return out
