"""Score recall settings on LoCoMo without re-ingesting: the tuning harness of issue 21.

Each conversation is ingested once into ``--db-dir`` (kept between runs), then every variant
(``RecallConfig`` field changes, as JSON) is asked every question of the chosen part of the
split (split "a": tune 26, 30, 41; held 42, 43; split "b" swaps them; ``--part all`` asks all
five). Prints Recall@5/10/20 overall, Recall@10 per category, Recall@5/10 per conversation,
and search p50 for each variant (query vector cached; the variants take turns question by
question, so their p50s compare). Tune on ``tune``; look at ``held`` only to report.

    python tools/tune_recall.py ../shared/data/locomo/*.json --part tune \\
        --variants '{"base": {}, "speaker.5": {"speaker": 0.5}}'

``--losses`` also counts, per category, where each variant loses the evidence turns: ranked
below 10 although a candidate (ranking's part), or never a candidate (the candidates' part).

``--changes`` lists the questions whose Recall@5 or Recall@10 differs from the first
variant's, with each evidence turn's rank in both (a change that only trades one question
for another shows as such, not as a flat total).

A database written by an older memlane keeps its old keyword index: run ``memlane reindex``
on it or delete ``--db-dir``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from pathlib import Path

from memlane import Memory
from memlane.eval.locomo import CATEGORIES, CATEGORY_NAMES, SPLITS, Scores, ingest, questions, split_conversations
from memlane.eval.locomo_data import load_locomo
from memlane.models import MessageFilter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="LoCoMo conversation files (.json)")
    parser.add_argument("--part", choices=("tune", "held", "all"), default="tune")
    parser.add_argument("--split", choices=SPLITS, default="a")
    parser.add_argument("--variants", default='{"base": {}}', help="JSON: name -> RecallConfig changes")
    parser.add_argument("--db-dir", default="locomo-dbs", help="where the ingested conversations are kept")
    parser.add_argument("--embedder", default="minilm", help="embedder spec (keep one --db-dir per embedder)")
    parser.add_argument("--losses", action="store_true",
                        help="count evidence turns in the top 10 / candidates ranked lower / never candidates")
    parser.add_argument("--changes", action="store_true",
                        help="list the questions whose R@5 or R@10 differs from the first variant's")
    args = parser.parse_args()
    conversations = [c for f in args.files for c in load_locomo(f)]
    groups = split_conversations(conversations, args.split)
    chosen = groups["tune"] + groups["held"] if args.part == "all" else groups[args.part]
    chosen.sort(key=lambda c: c.sample_id)
    variants: dict[str, dict[str, float]] = json.loads(args.variants)
    Path(args.db_dir).mkdir(parents=True, exist_ok=True)
    keys = ["all", *(str(c) for c in CATEGORIES), *(c.sample_id for c in chosen)]
    scores = {name: {k: Scores() for k in keys} for name in variants}
    latencies: dict[str, list[float]] = {name: [] for name in variants}
    losses: dict[str, Counter[tuple[int, str]]] = {name: Counter() for name in variants}
    changes: list[str] = []
    for conv in chosen:
        db = Path(args.db_dir) / f"{conv.sample_id}.db"
        fresh = not db.exists()
        with Memory(str(db), embedder=args.embedder, durability="normal") as mem:
            if fresh:
                ingest(mem, conv)
                mem.flush(timeout=None)
            engine = mem.parts.recall
            assert engine is not None
            flt = MessageFilter(user_id=conv.sample_id)
            configs = {name: engine.config.with_(**changes) for name, changes in variants.items()}
            names = list(configs)
            for n, qa in enumerate(questions(conv)):
                rankings: dict[str, list[str]] = {}
                # The variants take turns question by question, each starting in turn, after one
                # untimed search that embeds the query: their p50s compare in the same load.
                engine.search(qa.question, flt, 20)
                for name in names[n % len(names):] + names[: n % len(names)]:
                    t0 = time.perf_counter()
                    hits = engine.search(qa.question, flt, 20, config=configs[name])
                    latencies[name].append((time.perf_counter() - t0) * 1000)
                    ranked = [str(h.message.metadata.get("dia_id", "")) for h in hits]
                    rankings[name] = ranked
                    for key in ("all", str(qa.category), conv.sample_id):
                        scores[name][key].add(ranked, qa.evidence)
                    if args.losses:
                        found = engine.candidates(qa.question, flt, config=configs[name])
                        pooled = {str(c.message.metadata.get("dia_id", "")) for c in found}
                        for turn in qa.evidence:
                            where = "top 10" if turn in ranked[:10] else "lower" if turn in pooled else "never"
                            losses[name][(qa.category, where)] += 1
                if args.changes:
                    changes.extend(_changes(conv.sample_id, qa.category, qa.question, qa.evidence, names, rankings))
    for name, by in scores.items():
        overall = by["all"].as_dict()
        cats = " ".join(f"c{c}:{by[str(c)].as_dict()['recall@10']:.3f}" for c in CATEGORIES if by[str(c)].n)
        convs = " ".join(
            f"{c.sample_id}:{by[c.sample_id].as_dict()['recall@5']:.3f}/{by[c.sample_id].as_dict()['recall@10']:.3f}"
            for c in chosen
        )
        print(f"{name:20s} R@5 {overall['recall@5']:.3f} R@10 {overall['recall@10']:.3f} "
              f"R@20 {overall['recall@20']:.3f} | {cats} | {convs} | p50 {statistics.median(latencies[name]):.1f} ms",
              flush=True)
        if args.losses:
            print(" " * 21 + "evidence in the top 10 / a candidate ranked lower / never a candidate: " + ", ".join(
                f"{CATEGORY_NAMES[c]} {losses[name][(c, 'top 10')]}/{losses[name][(c, 'lower')]}/"
                f"{losses[name][(c, 'never')]}" for c in CATEGORIES))
    if args.changes:
        print(f"questions whose R@5 or R@10 differs from {next(iter(variants))!r} "
              "(conversation, category, variant, R@5, R@10, each evidence turn's rank from 1, none = not in the top 20):")
        print("\n".join(changes) if changes else "none")


def _recall(ranked: list[str], evidence: tuple[str, ...], k: int) -> float:
    return sum(1 for e in evidence if e in ranked[:k]) / len(evidence)


def _changes(conv: str, category: int, question: str, evidence: tuple[str, ...], names: list[str],
             rankings: dict[str, list[str]]) -> list[str]:
    """One line per variant whose R@5 or R@10 on this question differs from the first's."""
    first = rankings[names[0]]
    out: list[str] = []

    def rank(ranked: list[str], turn: str) -> str:
        return str(ranked.index(turn) + 1) if turn in ranked else "none"

    for name in names[1:]:
        ranked = rankings[name]
        scores = [(_recall(first, evidence, k), _recall(ranked, evidence, k)) for k in (5, 10)]
        if all(a == b for a, b in scores):
            continue
        (a5, b5), (a10, b10) = scores
        ranks = ", ".join(f"{e} at {rank(first, e)}->{rank(ranked, e)}" for e in evidence)
        out.append(f"  {conv} {CATEGORY_NAMES[category]:12s} {name}: R@5 {a5:.2f}->{b5:.2f} "
                   f"R@10 {a10:.2f}->{b10:.2f} | {question} | {ranks}")
    return out


if __name__ == "__main__":
    main()
