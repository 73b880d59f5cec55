"""The German-English word lexicon: offline translations of single words.

``data/lexicon_de_en.txt`` is built once by ``tools/build_lexicon.py`` (wordfreq's most
frequent words of each language, paired as nearest neighbours in Google's multilingual
Universal Sentence Encoder). Query expansion (search/crosslingual.py) and the memory
command "was weißt du über Kaffee" (rooms/handler.py) use it, so a German word finds
the English memory and the reverse.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from memlane.language import FILLER_DE, FILLER_EN, STOPWORDS, Language, stem

__all__ = ["LEXICON", "lexicon", "translations"]

LEXICON = "lexicon_de_en.txt"
#: Translations per query word, best first; more add noise faster than recall.
PER_WORD = 2


@dataclass(frozen=True, slots=True)
class _Lexicon:
    words: dict[tuple[Language, str], tuple[str, ...]]  # (source language, word) -> translations
    stems: dict[tuple[Language, str], tuple[str, ...]]  # (source language, stem) -> translations


@lru_cache(maxsize=1)
def lexicon() -> _Lexicon:
    """The shipped lexicon, loaded once (about 1.5 MB, 43,000 pairs, with their stems)."""
    text = resources.files("memlane").joinpath("data", LEXICON).read_text("utf-8")
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

    def best(table: dict[tuple[Language, str], list[tuple[float, str]]]) -> dict[tuple[Language, str], tuple[str, ...]]:
        return {
            k: tuple(w for _, w in sorted((x for x in v if x[1] not in own[k[0]]), reverse=True)[:PER_WORD])
            for k, v in table.items()
        }

    return _Lexicon(best(words), best(stems))


def translations(word: str, language: Language) -> tuple[str, ...]:
    """The other language's words for ``word`` (the word itself first, then its stem)."""
    lex = lexicon()
    w = word.lower()
    return lex.words.get((language, w)) or lex.stems.get((language, stem(w, language)), ())
