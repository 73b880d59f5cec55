"""``memlane eval promises``: does an assistant's promise open a loop, in German as in English?

Each case (one JSON object per line) is an assistant message and whether it commits the
assistant to something later: ``{"id", "text", "language", "promise": true|false, "split"}``.
The negatives are what a promise detector confuses: plans of others ("Du schickst mir
morgen ..."), the past ("Ich habe dir gestern ... geschickt"), offers asked as questions,
schedules ("Das Backup läuft jede Nacht"), opinions and advice. Each message is folded
alone into a fresh session state by the tracker itself, and precision and recall of the
promise loops it opens are reported per language and split.

Splits of the shipped set (125 cases): ``dev`` and ``held`` (80) were written before the
present-tense rule and both seen while writing it (German recall 0.15 before, 1.00
after); ``fresh`` (29) was written after its first version, which got 27 right (two past
or ``dass`` clauses taken for promises, hence the one-clause condition); ``untouched``
(16) was written after the last change and never changed anything.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from memlane.errors import InvalidInputError
from memlane.eval.labelled import read_jsonl
from memlane.models import Message
from memlane.state.fold import fold_message
from memlane.state.session_state import SessionState

__all__ = ["DEV_SET", "opens_promise", "run_promises_eval"]

DEV_SET = "promises_en_de.jsonl"


def opens_promise(text: str) -> bool:
    """Whether the tracker opens a promise loop for this assistant message."""
    state = SessionState(session_id="eval")
    fold_message(state, Message(role="assistant", content=text, id=1))
    return any(loop.kind == "promise" for loop in state.loops)


def _load(path: Path | str | None) -> list[dict[str, Any]]:
    cases = []
    for where, case in read_jsonl(path, DEV_SET, "labelled assistant messages"):
        if not isinstance(case, dict) or not isinstance(case.get("text"), str) \
                or case.get("language") not in ("en", "de") or not isinstance(case.get("promise"), bool):
            raise InvalidInputError(f"{where}: a case needs text, language (en|de) and promise (true|false)")
        cases.append(case)
    return cases


def run_promises_eval(path: Path | str | None = None) -> dict[str, Any]:
    """Precision, recall and accuracy of promise loops per language and split, and the misses."""
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # tp, fp, fn, tn
    misses = []
    for case in _load(path):
        got, want = opens_promise(case["text"]), case["promise"]
        split = case.get("split", "dev")
        slot = 0 if got and want else 1 if got else 2 if want else 3
        for key in ("all", case["language"], f"split:{split}", f"split:{split}/{case['language']}"):
            tally[key][slot] += 1
        if got != want:
            misses.append({"id": case.get("id"), "text": case["text"], "expected": want, "split": split})
    figures = {}
    for key, (tp, fp, fn, tn) in sorted(tally.items()):
        figures[key] = {
            "cases": tp + fp + fn + tn,
            "precision": round(tp / (tp + fp), 3) if tp + fp else None,
            "recall": round(tp / (tp + fn), 3) if tp + fn else None,
            "accuracy": round((tp + tn) / (tp + fp + fn + tn), 3),
        }
    return {"figures": figures, "misses": misses}
