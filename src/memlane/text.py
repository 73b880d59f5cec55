"""Small text helpers shared by the keyword index, search and snippets."""

from __future__ import annotations

from memlane.compounds import compound_parts
from memlane.language import STOPWORDS, content_words, detect_language, keyword_stems, stem, words

# One tokenizer and one stopword source for everything (memlane.language).
__all__ = [
    "STOPWORDS", "compound_words", "content_words", "fts5_match", "fts5_query", "fts5_terms", "keyword_terms", "snippet", "words",
]


def fts5_terms(text: str) -> list[str]:
    """The distinct content words of ``text`` as FTS5 terms (without double quotes)."""
    seen: dict[str, None] = {}
    for w in content_words(text):
        # FTS5 splits "self-care" into two tokens; as one quoted term it would be a phrase
        # that needs both, adjacent. The parts are OR-ed like any other words.
        for part in w.split("-") if "-" in w else (w,):
            if len(part) > 1 and part not in STOPWORDS:
                seen.setdefault(part.replace('"', ""), None)
    return [w for w in seen if w]


def keyword_terms(text: str) -> list[str]:
    """The index terms of the message keyword index a query looks up: each content word's
    English and German stem (the index holds every message's words stemmed in its own
    language, memlane.language.keyword_text), then the German stems of a German query's
    compound parts ("Stromrechnung" also looks up "strom" and "rechnung")."""
    found = fts5_terms(text)
    terms = [s for w in found for s in keyword_stems(w)]
    terms += [stem(p, "de") for p in compound_words(found, text)]
    return list(dict.fromkeys(terms))


def compound_words(found: list[str], text: str) -> list[str]:
    """The parts of the German compounds among ``found`` (words of ``text``), when ``text``
    is German: English words split by German frequencies would be accidents ("under|standing").
    The language is judged first, so English queries never look up German word frequencies
    (after 20,000 lookups they become a ~23 MB dictionary, compounds.DICT_AFTER)."""
    if not found or detect_language(text) != "de" or not any(compound_parts(w) for w in found):
        return []
    return [p for w in found for p in compound_parts(w)]


def fts5_match(terms: list[str]) -> str:
    """Terms (from :func:`fts5_terms`) quoted and OR-ed: quoting makes user text with FTS5
    syntax (AND, NEAR, *, quotes) harmless."""
    return " OR ".join(f'"{w}"' for w in terms)


def fts5_query(text: str) -> str:
    """A safe FTS5 MATCH expression: each content word quoted, OR-ed."""
    return fts5_match(fts5_terms(text))


def snippet(text: str, query: str, width: int = 160) -> str:
    """A window of ``text`` around the first query word it contains."""
    if len(text) <= width:
        return text
    lowered = text.lower()
    pos = -1
    for w in content_words(query):
        pos = lowered.find(w)
        if pos >= 0:
            break
    if pos < 0:
        return text[: width - 1] + "…"
    start = max(0, pos - width // 3)
    end = min(len(text), start + width)
    out = text[start:end]
    return ("…" if start else "") + out + ("…" if end < len(text) else "")
