"""The German-English word lexicon: offline translations of single words.

``data/lexicon_de_en.txt`` is built once by ``tools/build_lexicon.py`` (wordfreq's most
frequent words of each language, paired as nearest neighbours in Google's multilingual
Universal Sentence Encoder). Query expansion (search/crosslingual.py) and the memory
command "was weißt du über Kaffee" (rooms/handler.py) use it, so a German word finds
the English memory and the reverse.
"""

from __future__ import annotations

import contextlib
import hashlib
from functools import lru_cache
from importlib import resources

from memlane.language import FILLER_DE, FILLER_EN, STOPWORDS, Language, stem

__all__ = ["LEXICON", "lexicon", "translations"]

LEXICON = "lexicon_de_en.txt"
#: Translations per query word, best first; more add noise faster than recall.
PER_WORD = 2
#: Bump when the table's layout below changes (the cache key covers the data, not the code).
_TABLE_VERSION = 1


class _Table:
    """The lexicon's lookup table: sorted lines ``kind \t language \t key \t translations``,
    searched by bisection in place (``kind`` is ``w`` for a word, ``s`` for a stem).

    A first search in a fresh process used to spend ~0.45 s CPU building dictionaries of
    the whole lexicon for the two or three words of its query; the table is built once,
    kept in the user's cache directory, and a process only reads the file (2 MB).
    """

    def __init__(self, data: bytes) -> None:
        self._data = data

    def get(self, kind: str, language: Language, key: str) -> tuple[str, ...]:
        target = f"{kind}\t{language}\t{key}\t".encode()
        data = self._data
        lo, hi = 0, len(data)
        # Invariant: every line starting before lo sorts below target, every line
        # starting at or after hi sorts at or above it ("\t" ends each key and sorts below
        # any character of a word, so a key sorts before the keys it is a prefix of).
        while lo < hi:
            mid = (lo + hi) // 2
            start = data.rfind(b"\n", lo, mid)
            start = lo if start < 0 else start + 1
            end = data.find(b"\n", start)
            if data[start : start + len(target)] < target:
                lo = end + 1
            else:
                hi = start
        if data[lo : lo + len(target)] != target:
            return ()
        end = data.find(b"\n", lo)
        return tuple(data[lo + len(target) : end].decode("utf-8").split("\t"))


def _build_table(text: str) -> bytes:
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
    lines: list[bytes] = []
    for kind, table in (("w", words), ("s", stems)):
        for (language, key), found in table.items():
            best = [w for _, w in sorted((x for x in found if x[1] not in own[language]), reverse=True)[:PER_WORD]]
            if best:  # no entry and an empty one read alike: nothing to add
                lines.append("\t".join((kind, language, key, *best)).encode("utf-8") + b"\n")
    lines.sort(key=lambda line: line[: line.index(b"\t", line.index(b"\t", 2) + 1) + 1])
    return b"".join(lines)


def _cache_key(text: bytes) -> str:
    digest = hashlib.sha256(text)
    digest.update(repr((_TABLE_VERSION, PER_WORD, sorted(STOPWORDS | FILLER_EN | FILLER_DE))).encode())
    return digest.hexdigest()[:24]


@lru_cache(maxsize=1)
def lexicon() -> _Table:
    """The shipped lexicon as a lookup table (43,000 pairs and their stems), loaded once.

    Built from ``data/lexicon_de_en.txt`` by the first process and kept in the user's
    cache directory; without a writable one, built in memory.
    """
    from memlane.user_cache import keep, prune, user_cache_dir

    raw = resources.files("memlane").joinpath("data", LEXICON).read_bytes()
    cache = user_cache_dir() / f"lexicon-de-en-{_cache_key(raw)}.tsv"
    with contextlib.suppress(OSError):
        return _Table(cache.read_bytes())
    data = _build_table(raw.decode("utf-8"))
    if keep(cache, data):  # best effort: without a cache the next process builds it again
        prune(cache, "lexicon-de-en-*.tsv")
    return _Table(data)


def translations(word: str, language: Language) -> tuple[str, ...]:
    """The other language's words for ``word`` (the word itself first, then its stem)."""
    lex = lexicon()
    w = word.lower()
    return lex.get("w", language, w) or lex.get("s", language, stem(w, language))
