"""The German-English word lexicon: offline translations of single words.

``data/lexicon_de_en.txt`` is built once by ``tools/build_lexicon.py`` (wordfreq's most
frequent words of each language, paired as nearest neighbours in Google's multilingual
Universal Sentence Encoder). Query expansion (search/crosslingual.py) and the memory
command "was weißt du über Kaffee" (rooms/handler.py) use it, so a German word finds
the English memory and the reverse.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from memlane.language import FILLER_DE, FILLER_EN, STOPWORDS, Language, stem
from memlane.sorted_table import SortedTable, cached_table

__all__ = ["LEXICON", "english_gloss", "lexicon", "translations"]

LEXICON = "lexicon_de_en.txt"
#: Translations per query word, best first; more add noise faster than recall.
PER_WORD = 2
#: Bump when the table's rows below change shape (the cache key covers the data, not the code).
_TABLE_VERSION = 1


def _rows(text: str) -> list[tuple[str, str]]:
    """``kind \t language \t key`` -> tab-joined translations (kind ``w`` a word, ``s`` a stem)."""
    words: dict[tuple[Language, str], list[tuple[float, str]]] = {}
    stems: dict[tuple[Language, str], list[tuple[float, str]]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        de, en, cos, de_stem, en_stem = line.split("\t")
        score = float(cos)
        words.setdefault(("de", de), []).append((score, en))
        words.setdefault(("en", en), []).append((score, de))
        stems.setdefault(("de", de_stem), []).append((score, en))
        stems.setdefault(("en", en_stem), []).append((score, de))
    # A German "translation" of an English word that is an English word too ("live" ->
    # "life": German text borrows English words) would match English text: leave it out.
    # The other way round it is kept: "Kaffee" -> "coffee" is right even though German
    # text uses "coffee" now and then.
    # Function words and filler ("mein", "really") never help a search either.
    noise = set(STOPWORDS | FILLER_EN | FILLER_DE)
    own: dict[str, set[str]] = {"en": {w for (src, w) in words if src == "en"} | noise, "de": noise}
    rows: list[tuple[str, str]] = []
    for kind, table in (("w", words), ("s", stems)):
        for (language, key), found in table.items():
            best = [w for _, w in sorted((x for x in found if x[1] not in own[language]), reverse=True)[:PER_WORD]]
            if best:  # no entry and an empty one read alike: nothing to add
                rows.append((f"{kind}\t{language}\t{key}", "\t".join(best)))
    return rows


@lru_cache(maxsize=1)
def lexicon() -> SortedTable:
    """The shipped lexicon (43,000 pairs and their stems) as a lookup table, loaded once.

    A first search in a fresh process used to spend ~0.45 s CPU building dictionaries of the
    whole lexicon for the two or three words of its query; the table is built by the first
    process and kept in the user's cache directory (memlane.sorted_table).
    """
    raw = resources.files("memlane").joinpath("data", LEXICON).read_bytes()
    salt = repr((_TABLE_VERSION, PER_WORD, sorted(STOPWORDS | FILLER_EN | FILLER_DE)))
    return cached_table("lexicon-de-en", raw, salt, lambda: _rows(raw.decode("utf-8")))


def _lookup(kind: str, language: Language, key: str) -> tuple[str, ...]:
    found = lexicon().get(f"{kind}\t{language}\t{key}")
    return tuple(found.split("\t")) if found else ()


def translations(word: str, language: Language) -> tuple[str, ...]:
    """The other language's words for ``word`` (the word itself first, then its stem)."""
    w = word.lower()
    return _lookup("w", language, w) or _lookup("s", language, stem(w, language))


def english_gloss(text: str) -> str:
    """German ``text`` as its content words in English, word by word ("Welcher Dünger passt
    für Gemüse?" -> "fertilizer fits vegetables"): what an English-only sentence embedder
    can compare by topic. Words the lexicon lacks (names, commands) stay as they are."""
    from memlane.language import words

    out = []
    for word in words(text):
        if len(word) < 3 or word in STOPWORDS or word in FILLER_DE:
            continue
        found = translations(word, "de")
        out.append(found[0] if found else word)
    return " ".join(out)
