"""Whether a user message leaves the topic of the recent conversation (seed 004's session split).

Two signals, each in the message's own language:

* **shared stems** - Snowball stems of content words shared with the recent messages
  (German compounds are also matched by their parts: "Apfelkuchen" meets "Kuchen");
* **embedding similarity** - the best cosine to a recent message.

A message is a change when it shares no content stem with the recent messages *and* its
best cosine is below ``threshold``. The embedding alone never fired in German (MiniLM is
English-only, so any two German sentences look alike); the stems alone split on
follow-ups that reword ("Tomatenpflanzen" -> "Dünger für Gemüse"). German text is
therefore compared through its word-by-word English gloss (memlane.bilingual's lexicon),
which the English model reads by topic. ``memlane eval topics`` measures each signal and
their combination on a labelled EN/DE set.

A short reply or one that refers back ("yes", "mach das nochmal") is never a change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

# The language layer's stems: content words only, German compounds with their parts.
from memlane.bilingual import english_gloss
from memlane.language import content_stems, detect_language, words

if TYPE_CHECKING:
    from memlane.search.embedders import Embedder

__all__ = [
    "DEFAULT_THRESHOLD", "ShiftSignals", "content_stems", "decide", "is_topic_change", "shift_signals",
]

#: Below this best cosine to the recent messages (and with no shared stem) a message is a change.
DEFAULT_THRESHOLD = 0.35
#: Languages the default embedder (MiniLM) understands.
EMBEDDING_LANGUAGES: tuple[str, ...] = ("en",)
_MIN_PART = 4  # compound parts shorter than this are too unspecific to match on


def _shares(query: set[str], window: set[str]) -> bool:
    if query & window:
        return True
    # German compounds the splitter leaves whole: "Apfelkuchen" and "Kuchen" by their stems' ends.
    return any(
        len(a) > len(b) >= _MIN_PART + 1 and (a.endswith(b) or a.startswith(b))
        for a in query for b in window
    ) or any(
        len(b) > len(a) >= _MIN_PART + 1 and (b.endswith(a) or b.startswith(a))
        for a in query for b in window
    )


@dataclass(slots=True)
class ShiftSignals:
    shared_stems: bool
    best_cosine: float  # of the texts as written
    gloss_cosine: float | None = None  # of English glosses (German query, no shared stem)


def _best_cosine(embedder: Embedder, query: str, recent: Sequence[str]) -> float:
    vectors = embedder.embed([query, *recent])
    return float((vectors[1:] @ vectors[0]).max())


def shift_signals(
    query: str, recent: Sequence[str], embedder: Embedder | None,
    embedding_languages: Sequence[str] = EMBEDDING_LANGUAGES,
) -> ShiftSignals:
    """The signals for ``query`` against the ``recent`` message texts; the gloss cosine only
    where it can decide: a German query outside ``embedding_languages`` sharing no stem."""
    lng = detect_language(query)
    q = content_stems(query, lng)
    window: set[str] = set()
    for text in recent:
        window |= content_stems(text, detect_language(text, default=lng))
    shared = _shares(q, window)
    best, gloss = 1.0, None
    if embedder is not None and recent:
        best = _best_cosine(embedder, query, recent)
        if lng == "de" and lng not in embedding_languages and not shared:
            glossed = [english_gloss(t) if detect_language(t, default=lng) == "de" else t for t in recent]
            gloss = _best_cosine(embedder, english_gloss(query) or query, glossed)
    return ShiftSignals(shared, best, gloss)


def decide(signals: ShiftSignals, language: str, threshold: float = DEFAULT_THRESHOLD,
           embedding_languages: Sequence[str] = EMBEDDING_LANGUAGES) -> bool:
    """A change: no shared stem, and the embedding (of the text or its English gloss), where
    there is one for the language, finds nothing recent close enough."""
    if signals.shared_stems:
        return False
    if language in embedding_languages:
        return signals.best_cosine < threshold
    if signals.gloss_cosine is not None:
        return signals.gloss_cosine < threshold
    return True


def is_topic_change(
    query: str, recent: Sequence[str], embedder: Embedder | None,
    threshold: float = DEFAULT_THRESHOLD, embedding_languages: Sequence[str] = EMBEDDING_LANGUAGES,
) -> bool:
    """Whether ``query`` leaves the topic of ``recent`` (oldest first); see the module doc.

    The embedding reads ``embedding_languages`` (the languages the embedder was trained on;
    MiniLM, the default, is English-only, and any two German sentences look alike to it)
    as written, and German through its English gloss.
    """
    from memlane.state.references import has_reference_cues

    if not recent or len(words(query)) < 3 or has_reference_cues(query, recent):
        return False
    signals = shift_signals(query, recent, embedder, embedding_languages)
    return decide(signals, detect_language(query), threshold, embedding_languages)
