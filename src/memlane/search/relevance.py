"""Calibrated relevance: the 0-1 number ``min_score`` / ``min_similarity`` compare against.

The fused ranking score of :mod:`memlane.search.engine` orders hits well but has no fixed
scale (it is normalised to each query's pool, and sums up to about 2). A threshold needs an
absolute number, so every hit also gets a *relevance*: the probability that the message is
relevant to the query, from a logistic model over three absolute evidences:

* ``cosine`` — the raw cosine similarity of query and message vectors (0 without vectors);
* ``own`` — the share of the query's content words (crude stems) found in the message;
* ``context`` — the same share over the message and the other half of its exchange.

For a question about the conversation ("what did we discuss about Python last week?") the
evidences are taken for its topic ("Python"), see ``engine.query_focus``.

The coefficients were fitted on the hand-labelled set in ``eval/data/relevance_dev.json``
(ten short conversations, EN and DE; queries about them and queries about nothing stored)
by ``memlane eval relevance --fit``, using only its "fit" queries; ``memlane eval relevance``
reports precision and recall at several floors on its held-out queries. A model without
vectors has its own coefficients (keyword evidence only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["DEFAULT_FLOOR", "KEYWORD_ONLY", "WITH_VECTORS", "Calibration", "relevance"]

#: The floor recall uses when none is configured (``rag_min_score``): more likely relevant
#: than not. Held-out queries, MiniLM (`memlane eval relevance`): precision 0.9, recall 0.82
#: at 0.5; precision 1.0, recall 0.73 at 0.7; no hit for a query about nothing stored.
DEFAULT_FLOOR = 0.5


@dataclass(frozen=True, slots=True)
class Calibration:
    """Logistic coefficients: relevance = sigmoid(bias + cosine*c + own*o + context*x)."""

    bias: float
    cosine: float
    own: float
    context: float

    def __call__(self, cosine: float, own: float, context: float) -> float:
        z = self.bias + self.cosine * cosine + self.own * own + self.context * context
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


# Fitted by `memlane eval relevance --fit` (see the module docstring); rerun it after
# changing the embedder's recipe or the features above.
WITH_VECTORS = Calibration(bias=-4.48, cosine=7.08, own=1.7, context=2.34)
KEYWORD_ONLY = Calibration(bias=-2.87, cosine=0.0, own=3.7, context=3.52)


def relevance(cosine: float, own: float, context: float, *, vectors: bool) -> float:
    """The calibrated relevance (0-1) of one hit from its absolute evidences."""
    model = WITH_VECTORS if vectors else KEYWORD_ONLY
    return round(model(cosine, own, context), 4)
