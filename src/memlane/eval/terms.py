"""``memlane eval terms``: do word forms meet, in German as in English?

Keyphrases (a session's active topics, summary topics) and note slots group words by a
normalised form; "Datenbanken" must meet "Datenbank" as "databases" meets "database".
Each case (one JSON object per line) is one of two tasks:

* ``{"task": "keyphrases", "texts": [...], "topics": [[variant, ...], ...]}`` - a short
  conversation and the topics it is about, each with the forms that name it. Of the top
  four keyphrases (what summaries keep), a phrase *names* a topic when one of its variants
  occurs in it as whole words. Reported: recall (topics named, of at most four),
  precision (phrases that name a topic) and duplicates (phrases naming a topic an
  earlier phrase already named: "Datenbank" and "Datenbanken" both shown).
* ``{"task": "slots", "a": ..., "b": ..., "same": true|false}`` - two user statements;
  ``same`` when their notes are about the same thing (a later one supersedes or
  contradicts the earlier: "Ich mag Katzen" / "Ich mag keine Katze"). Reported:
  precision and recall of "same slot" over the pairs.

Every case has ``language`` (en|de) and ``split``. The shipped set (64 cases, 16 per task
and language, half ``dev`` and half ``held``) was written before keyphrases and notes used
the language layer's stemmer (they stripped English plurals only), and nothing was tuned on it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from memlane.context.keyphrases import extract_keyphrases
from memlane.errors import InvalidInputError
from memlane.eval.labelled import read_jsonl
from memlane.language import words
from memlane.models import Message
from memlane.notes.extract import ExtractionContext, RuleExtractor

__all__ = ["DEV_SET", "TOP_K", "run_terms_eval"]

DEV_SET = "terms_en_de.jsonl"
#: Keyphrases judged per conversation: the number a session summary keeps.
TOP_K = 4


def _load(path: str | None) -> list[dict[str, Any]]:
    cases = []
    for where, case in read_jsonl(path, DEV_SET, "labelled word-form cases"):
        ok = isinstance(case, dict) and case.get("language") in ("en", "de")
        if ok and case.get("task") == "keyphrases":
            ok = isinstance(case.get("texts"), list) and isinstance(case.get("topics"), list) and bool(case["topics"])
        elif ok and case.get("task") == "slots":
            ok = isinstance(case.get("a"), str) and isinstance(case.get("b"), str) and isinstance(case.get("same"), bool)
        else:
            ok = False
        if not ok:
            raise InvalidInputError(
                f"{where}: a case needs language (en|de) and either task 'keyphrases' with texts and "
                "topics (lists of variants) or task 'slots' with a, b and same (true|false)")
        cases.append(case)
    return cases


def _names(phrase: str, variant: str) -> bool:
    p, v = words(phrase), words(variant)
    return any(p[i : i + len(v)] == v for i in range(len(p) - len(v) + 1)) if v else False


def _judge_keyphrases(case: dict[str, Any]) -> tuple[int, int, int, int, int, list[str]]:
    """(topics named, topics counted, phrases naming a topic, phrases, duplicates, phrases)."""
    phrases = extract_keyphrases(case["texts"], top_k=TOP_K)
    topics: list[list[str]] = case["topics"]
    named: set[int] = set()
    good = dup = 0
    for phrase in phrases:
        hit = [i for i, variants in enumerate(topics) if any(_names(phrase, v) for v in variants)]
        if hit:
            good += 1
            if all(i in named for i in hit):
                dup += 1
            named.update(hit)
    return len(named), min(len(topics), TOP_K), good, len(phrases), dup, phrases


def _slots(text: str) -> set[str]:
    ctx = ExtractionContext(session_id="eval", anchor_id="@eval")
    found = RuleExtractor().extract([Message(role="user", content=text, id=1)], ctx)
    return {c.slot for c in found if c.slot}


def run_terms_eval(path: str | None = None) -> dict[str, Any]:
    """Keyphrase recall/precision/duplicates and slot-match precision/recall, per language and split."""
    kp: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0, 0])  # named, topics, good, phrases, dup, cases
    sl: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # tp, fp, fn, tn
    misses: list[dict[str, Any]] = []
    for case in _load(path):
        split = case.get("split", "dev")
        groups = ("all", case["language"], f"split:{split}", f"split:{split}/{case['language']}")
        if case["task"] == "keyphrases":
            named, topics, good, n, dup, phrases = _judge_keyphrases(case)
            for g in groups:
                row = kp[g]
                for i, v in enumerate((named, topics, good, n, dup, 1)):
                    row[i] += v
            if named < topics or good < n or dup:
                misses.append({"id": case.get("id"), "split": split, "task": "keyphrases", "got": phrases})
        else:
            a, b = _slots(case["a"]), _slots(case["b"])
            got, want = bool(a & b), case["same"]
            for g in groups:
                sl[g][0 if got and want else 1 if got else 2 if want else 3] += 1
            if got != want:
                misses.append({"id": case.get("id"), "split": split, "task": "slots",
                               "got": [*sorted(a), "|", *sorted(b)]})
    figures: dict[str, dict[str, Any]] = {}
    for g, (named, topics, good, n, dup, cases) in sorted(kp.items()):
        figures[f"keyphrases {g}"] = {
            "cases": cases, "recall": round(named / topics, 3) if topics else None,
            "precision": round(good / n, 3) if n else None, "duplicates": dup,
        }
    for g, (tp, fp, fn, tn) in sorted(sl.items()):
        figures[f"slots {g}"] = {
            "cases": tp + fp + fn + tn, "recall": round(tp / (tp + fn), 3) if tp + fn else None,
            "precision": round(tp / (tp + fp), 3) if tp + fp else None, "duplicates": None,
        }
    return {"figures": figures, "misses": misses}
