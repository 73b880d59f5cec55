"""Sentence salience: TF-IDF terms, centrality in the sentence-similarity graph (TextRank),
coverage of the conversation's keyphrases, disclosure and specificity."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memlane.context.keyphrases import (
    normalize_term,
    score_keyphrases,
    tokenize_words,
)
from memlane.context.summarizer.sentences import Prepared, SummarySentence
from memlane.language import Language

if TYPE_CHECKING:
    import numpy as np



@dataclass(frozen=True, slots=True)
class RankWeights:
    """How the extractive summarizer weighs a sentence (tuned on LoCoMo dialogues)."""

    centrality: float = 0.6  # TextRank score, mean 1 over the session
    coverage: float = 0.4  # sum of the session keyphrases the sentence contains (cap 3)
    first_person: float = 1.25  # factor for "I/my/we" sentences: news about the speaker
    second_person: float = 0.8  # factor for "you" sentences without "I": mostly reactions
    specific: float = 1.0  # factor for sentences naming things or numbers
    position: float = 0.15  # bonus for early sentences, falling linearly to 0 at the end
    full_length: int = 6  # content words from which a sentence is not penalised as short
    long_words: int = 40  # words above which a sentence is penalised as long


def tfidf(sentences: list[SummarySentence]) -> None:
    df: dict[str, int] = {}
    for s in sentences:
        for t in s.terms:
            df[t] = df.get(t, 0) + 1
    n = len(sentences)
    for s in sentences:
        weights = {t: (1.0 + math.log((n + 1) / (df[t] + 0.5))) for t in s.terms}
        norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
        s.terms = {t: w / norm for t, w in weights.items()}


def similarity(a: dict[str, float], b: dict[str, float]) -> float:
    if len(a) > len(b):
        a, b = b, a
    return sum(w * b[t] for t, w in a.items() if t in b)


def _textrank(sentences: list[SummarySentence]) -> np.ndarray[Any, np.dtype[np.float64]]:
    import numpy as np  # on the first summary, not when Memory opens

    n = len(sentences)
    if n == 0:
        return np.zeros(0)
    # Cosine similarities through an inverted index: sentences share few
    # terms, and a small dense matrix product would go to a multi-threaded
    # BLAS that is slower than this on a busy machine.
    postings: dict[str, list[tuple[int, float]]] = {}
    for i, s in enumerate(sentences):
        for t, w in s.terms.items():
            postings.setdefault(t, []).append((i, w))
    sim = np.zeros((n, n))
    for plist in postings.values():
        if len(plist) < 2:
            continue
        for a in range(len(plist)):
            i, wi = plist[a]
            for b in range(a + 1, len(plist)):
                j, wj = plist[b]
                sim[i, j] += wi * wj
    sim = sim + sim.T
    sim[sim < 0.05] = 0.0
    rows = sim.sum(axis=1, keepdims=True)
    trans = np.divide(sim, rows, out=np.full_like(sim, 1.0 / n), where=rows > 0)
    rank = np.full(n, 1.0 / n)
    damping = 0.85
    for _ in range(50):
        new = (1 - damping) / n + damping * (trans.T @ rank)
        if float(np.abs(new - rank).sum()) < 1e-9:
            rank = new
            break
        rank = new
    result: np.ndarray[Any, np.dtype[np.float64]] = rank * n  # mean 1
    return result


def _keyphrase_weights(sentences: list[SummarySentence], language: Language) -> dict[tuple[str, ...], float]:
    scored = score_keyphrases([s.source or s.text for s in sentences], language)[:20]
    if not scored:
        return {}
    top = scored[0][1]
    out: dict[tuple[str, ...], float] = {}
    for surface, score in scored:
        key = tuple(normalize_term(w, language) for w in tokenize_words(surface))
        out[key] = score / top
    return out


def rank_sentences(prepared: Prepared, w: RankWeights) -> list[SummarySentence]:
    sentences = prepared.sentences
    graph = [s for s in sentences if s.terms]
    if not graph:
        return []
    kp = _keyphrase_weights(graph, prepared.language)
    # Term lists are order-preserving, so the keyphrase match below is stable.
    term_lists = {id(s): list(s.terms) for s in graph}
    tfidf(graph)
    central = _textrank(graph)
    total = len(graph)
    for idx, s in enumerate(graph):
        terms = term_lists[id(s)]
        coverage = 0.0
        for key, weight in kp.items():
            if key[0] not in s.terms:
                continue
            n = len(key)
            if n == 1 or any(tuple(terms[k : k + n]) == key for k in range(len(terms) - n + 1)):
                coverage += weight
        n_content = len(terms)
        length = min(1.0, n_content / w.full_length)
        if s.words > w.long_words:
            length *= w.long_words / s.words
        position = 1.0 + w.position * (1.0 - idx / total)
        s.score = (
            (w.centrality * float(central[idx]) + w.coverage * min(coverage, 3.0))
            * s.weight
            * length
            * position
        )
    return graph
