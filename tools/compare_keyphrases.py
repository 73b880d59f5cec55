"""Keyphrases for the extractive summarizer: memlane's own (context/keyphrases.py) beside YAKE.

Issue 17 asked whether a maintained keyword extractor (``yake``) should replace memlane's
RAKE-style keyphrases. The summarizer is where keyphrases decide something measurable:
it favours sentences that hold the session's keyphrases, and ``memlane eval summaries``
scores its summaries against LoCoMo's gold with ROUGE. This runs that evaluation twice,
once with each extractor, and times both extractors on one session's turns.

    pip install yake
    python tools/compare_keyphrases.py ../shared/data/locomo/*.json

Measured on the five LoCoMo conversations (128 sessions): ROUGE-1/2/L 0.442/0.146/0.261
with memlane's keyphrases, 0.445/0.147/0.263 with YAKE, at 1.5 ms vs 49.1 ms per session
(two shared cores). A third of a ROUGE point for 33 times the time: memlane keeps its own.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

from memlane.context import summarizer
from memlane.context.keyphrases import score_keyphrases
from memlane.eval.locomo_data import load_locomo
from memlane.eval.summaries import METRICS, evaluate_summaries
from memlane.language import detect_language

Scorer = Callable[[Sequence[str]], list[tuple[str, float]]]


def yake_scorer() -> Scorer:
    """YAKE's keyphrases in score_keyphrases' shape: best first, larger is better."""
    import yake

    extractors: dict[str, Any] = {}

    def score(texts: Sequence[str]) -> list[tuple[str, float]]:
        text = "\n".join(texts)
        lang = detect_language(text)
        if lang not in extractors:
            extractors[lang] = yake.KeywordExtractor(lan=lang, n=3, top=20, dedupLim=0.9)
        found = extractors[lang].extract_keywords(text)  # (phrase, score): smaller is better
        return sorted(((kw, 1.0 / (1e-6 + s)) for kw, s in found), key=lambda t: -t[1])

    return score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="LoCoMo conversation files (.json)")
    args = parser.parse_args()
    extractors: dict[str, Scorer] = {"memlane": score_keyphrases, "yake": yake_scorer()}
    turns = [t.text for t in load_locomo(args.files[0])[0].sessions[0].turns]
    for name, scorer in extractors.items():
        summarizer.score_keyphrases = scorer  # what the summarizer ranks sentences by
        result = evaluate_summaries(args.files)
        t0 = time.perf_counter()
        for _ in range(20):
            scorer(turns)
        per_session = (time.perf_counter() - t0) / 20 * 1000
        rouge = "/".join(f"{result['memlane'][m]:.3f}" for m in METRICS)
        print(f"{name}: ROUGE-1/2/L {rouge} over {result['sessions']} sessions, {per_session:.1f} ms per session")
    summarizer.score_keyphrases = score_keyphrases


if __name__ == "__main__":
    main()
