"""ROUGE of memlane's extractive session summaries against LoCoMo's gold summaries.

For every session that has a gold ``session_N_summary``, the session's turns are
summarized by :class:`~memlane.context.summarizer.ExtractiveSummarizer` and
scored with ROUGE-1/2/L F1 (``rouge-score``, Porter stemming). In the same run a
lead baseline is scored: the session's first turns, written as
``Speaker: text`` the way lead-N is read for dialogues, cut to exactly as many
words as memlane's summary so length gives neither side an edge.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from memlane.context.summarizer import ExtractiveSummarizer, Summarizer
from memlane.errors import InvalidInputError, MissingExtraError
from memlane.eval.locomo_data import LocomoConversation, LocomoSession, load_locomo

__all__ = ["METRICS", "evaluate_summaries", "lead_summary", "run_summaries_eval"]

METRICS: tuple[str, ...] = ("rouge1", "rouge2", "rougeL")


class _Scorer(Protocol):
    def score(self, target: str, prediction: str) -> dict[str, Any]: ...


def _rouge_scorer() -> _Scorer:
    try:
        from rouge_score import rouge_scorer
    except ImportError as exc:  # an optional (dev) dependency
        raise MissingExtraError("ROUGE evaluation (package rouge-score)", "dev") from exc
    scorer: _Scorer = rouge_scorer.RougeScorer(list(METRICS), use_stemmer=True)
    return scorer


def lead_summary(conversation: LocomoConversation, session: LocomoSession, words: int) -> str:
    """The first ``words`` words of the session as "Speaker: text" lines."""
    out: list[str] = []
    for turn in session.turns:
        for word in f"{turn.speaker}: {turn.text}".split():
            if len(out) >= words:
                return " ".join(out)
            out.append(word)
    return " ".join(out)


def evaluate_summaries(
    paths: Sequence[Path | str | os.PathLike[str]],
    *,
    summarizer: Summarizer | None = None,
) -> dict[str, Any]:
    """Mean ROUGE-1/2/L F1 of memlane's summaries and of the lead baseline.

    Returns ``{"memlane": {"rouge1", "rouge2", "rougeL"}, "lead": {...}, "sessions": N}``.
    """
    if not paths:
        raise InvalidInputError("give at least one LoCoMo JSON file to evaluate")
    scorer = _rouge_scorer()
    summarizer = summarizer or ExtractiveSummarizer()
    totals: dict[str, dict[str, float]] = {
        "memlane": dict.fromkeys(METRICS, 0.0),
        "lead": dict.fromkeys(METRICS, 0.0),
    }
    sessions = 0
    for path in paths:
        for conversation in load_locomo(path):
            for session in conversation.sessions:
                if not session.summary or not session.turns:
                    continue
                messages = conversation.session_messages(session)
                ours = summarizer.summarize(messages)
                lead = lead_summary(conversation, session, len(ours.split()))
                for name, text in (("memlane", ours), ("lead", lead)):
                    scores = scorer.score(session.summary, text)
                    for metric in METRICS:
                        totals[name][metric] += float(scores[metric].fmeasure)
                sessions += 1
    if sessions == 0:
        raise InvalidInputError(
            "no session with a gold summary (session_N_summary) in the given files"
        )
    return {
        "memlane": {m: round(v / sessions, 4) for m, v in totals["memlane"].items()},
        "lead": {m: round(v / sessions, 4) for m, v in totals["lead"].items()},
        "sessions": sessions,
    }


def run_summaries_eval(paths: Sequence[Path | str | os.PathLike[str]], as_json: bool) -> str:
    """The evaluation as printable text: a table, or the JSON document with ``as_json``."""
    result = evaluate_summaries(paths)
    if as_json:
        return json.dumps(result, indent=2, sort_keys=True)
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Session summaries vs LoCoMo gold ({result['sessions']} sessions, F1)")
    table.add_column("system")
    for metric in METRICS:
        table.add_column(metric.replace("rouge", "ROUGE-"), justify="right")
    for name in ("memlane", "lead"):
        label = "memlane (extractive)" if name == "memlane" else "lead (same length)"
        table.add_row(label, *(f"{result[name][m]:.4f}" for m in METRICS))
    buffer = io.StringIO()
    Console(file=buffer, width=100, color_system=None).print(table)
    return buffer.getvalue()
