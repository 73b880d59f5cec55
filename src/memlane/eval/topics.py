"""``memlane eval topics``: topic-change detection scored on labelled EN/DE conversations.

A conversation (one JSON object per line) is ``{"id", "language", "split", "turns":
[{"role", "content", "switch": true|false}, ...]}``; ``switch`` on a user turn says
whether it starts a new topic. Each labelled turn is judged against the six messages
before it (the session manager's ``topic_window``), and precision and recall of the
switches are reported per language and split for three detectors:

* ``embedding`` - best cosine below 0.15, the detector before issue 17;
* ``stems`` - no shared content stem;
* ``combined`` - no shared stem and best cosine below the threshold, German compared
  through its English gloss (what MiniLM knows): the detector now.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlane.errors import InvalidInputError
from memlane.eval.labelled import read_jsonl
from memlane.language import words
from memlane.state.references import has_reference_cues
from memlane.state.topic_shift import DEFAULT_THRESHOLD, ShiftSignals, decide, shift_signals

__all__ = ["DEV_SET", "OLD_THRESHOLD", "run_topics_eval"]

DEV_SET = "topics_en_de.jsonl"
#: The embedding-only detector's threshold before issue 17 (SessionManager.topic_change_threshold).
OLD_THRESHOLD = 0.15
WINDOW = 6


@dataclass(slots=True)
class _Point:
    language: str
    split: str
    switch: bool
    skipped: bool  # too short or refers back: never a change
    signals: ShiftSignals


def _load(path: Path | str | None) -> list[dict[str, Any]]:
    convs = []
    for where, conv in read_jsonl(path, DEV_SET, "labelled conversations"):
        if not isinstance(conv, dict) or conv.get("language") not in ("en", "de") \
                or not isinstance(conv.get("turns"), list):
            raise InvalidInputError(f"{where}: a conversation needs language (en|de) and turns")
        convs.append(conv)
    return convs


def _points(convs: list[dict[str, Any]], embedder: Any) -> list[_Point]:
    out: list[_Point] = []
    for conv in convs:
        seen: list[str] = []
        for turn in conv["turns"]:
            content = str(turn.get("content") or "")
            if turn.get("role") == "user" and isinstance(turn.get("switch"), bool):
                recent = seen[-WINDOW:]
                sig = shift_signals(content, recent, embedder)
                skipped = len(words(content)) < 3 or has_reference_cues(content, recent)
                out.append(_Point(conv["language"], str(conv.get("split") or "dev"), turn["switch"],
                                  skipped, sig))
            seen.append(content)
    return out


def _detect(p: _Point, method: str, threshold: float) -> bool:
    if p.skipped:
        return False
    if method == "embedding":
        return p.signals.best_cosine < OLD_THRESHOLD
    if method == "stems":
        return not p.signals.shared_stems
    return decide(p.signals, p.language, threshold)


def _figures(points: list[_Point], method: str, threshold: float) -> dict[str, Any]:
    tp = sum(1 for p in points if p.switch and _detect(p, method, threshold))
    fp = sum(1 for p in points if not p.switch and _detect(p, method, threshold))
    switches = sum(p.switch for p in points)
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / switches if switches else None
    f1 = 2 * precision * recall / (precision + recall) if precision and recall else 0.0
    return {
        "switches": switches, "continuations": len(points) - switches, "detected": tp + fp,
        "precision": None if precision is None else round(precision, 3),
        "recall": None if recall is None else round(recall, 3), "f1": round(f1, 3),
    }


def run_topics_eval(
    path: Path | str | None = None, *, embedder: str = "minilm", threshold: float = DEFAULT_THRESHOLD,
) -> dict[str, Any]:
    """Precision/recall of the three detectors, overall, by language and by split."""
    from memlane.search.embedders import get_embedder

    points = _points(_load(path), get_embedder(embedder) if embedder != "none" else None)
    groups: dict[str, list[_Point]] = defaultdict(list)
    for p in points:
        for key in ("all", f"language:{p.language}", f"split:{p.split}", f"split:{p.split}/{p.language}"):
            groups[key].append(p)
    return {
        "threshold": threshold, "embedder": embedder,
        "figures": {
            method: {key: _figures(pts, method, threshold) for key, pts in sorted(groups.items())}
            for method in ("embedding", "stems", "combined")
        },
    }
