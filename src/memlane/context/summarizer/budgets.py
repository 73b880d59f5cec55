"""Fitting a text to a token budget: whole words (or whole sentences) while they fit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memlane.context.summarizer.cleaning import split_sentences

if TYPE_CHECKING:

    from memlane.tokens import TokenCounter


def fit_to_budget(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """``text`` cut at a word boundary so that it counts at most ``max_tokens``."""
    if max_tokens <= 0:
        return ""
    if counter.count(text) <= max_tokens:
        return text
    words = text.split()
    lo, hi = 0, len(words)
    # Binary search on the number of words; token counts grow with words.
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter.count(" ".join(words[:mid]) + "…") <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        return ""
    return " ".join(words[:lo]) + "…"


def fit_sentences(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """Whole sentences while they fit; a cut sentence only if the first one is too long."""
    if counter.count(text) <= max_tokens:
        return text
    kept: list[str] = []
    for sentence in split_sentences(text):
        if counter.count(" ".join([*kept, sentence])) > max_tokens:
            break
        kept.append(sentence)
    return " ".join(kept) if kept else fit_to_budget(text, max_tokens, counter)
