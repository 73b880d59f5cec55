"""German compound splitting: "Stromrechnung" -> "strom", "rechnung".

German writes compounds as one word, so a query for "Stromrechnung" misses a memory about
"die Rechnungen für den Strom" in a keyword index. A word is split where its parts are, on
the geometric mean, more frequent than the whole word (Koehn & Knight 2003, "Empirical
Methods for Compound Splitting"), with the linking elements German puts between parts
("Lieblings|farbe", "Arbeit|s|platz"). The frequencies are wordfreq's, shipped as
``data/words_de.txt`` (built once by ``tools/build_words_de.py``), so nothing is
downloaded and a split never depends on what a store holds. The file is sorted by word and
looked up in place (memlane.sorted_table) until a process has asked enough to make a
dictionary of it worthwhile, so the first German message does not pay for all 98,000 words.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from importlib import resources

from memlane.sorted_table import SortedTable
from memlane.stopwords import STOPWORDS

__all__ = ["WORDS_DE", "WordFrequencies", "compound_parts", "word_frequencies", "zipf_de"]

WORDS_DE = "words_de.txt"
#: Shorter words are rarely compounds, and their splits are mostly accidents ("Bei|spiel" is fine, "Ab|end" is not).
MIN_COMPOUND = 8
#: Shortest modifier: "Log|dateien", "Eis|becher".
MIN_PART = 3
#: Shortest head: three-letter heads are mostly inflection endings ("Druck|ern").
MIN_HEAD = 4
#: What German puts between a modifier and the head ("Arbeit-s-platz", "Sonne-n-schein", "Hund-e-hütte").
LINKS = ("", "s", "es", "n", "en", "e", "er")


#: Lookups answered from the sorted file before the dictionary is built: a bisection costs
#: a few microseconds, the dictionary of all 98,000 words ~100 ms once. A process that
#: splits a few messages' words never builds it; one that indexes many pays it after
#: about as much time went into bisections (so never more than twice the better choice).
DICT_AFTER = 20_000


class WordFrequencies:
    """Zipf frequencies from a sorted ``word\tzipf`` file: bisection in place for the first
    ``dict_after`` lookups, a dictionary after that."""

    def __init__(self, data: bytes, dict_after: int = DICT_AFTER) -> None:
        self._table = SortedTable(data)
        self._dict: dict[str, float] | None = None
        self._dict_after = dict_after
        self._lookups = 0
        self._lock = threading.Lock()

    def get(self, word: str) -> float:
        found = self._dict
        if found is not None:
            return found.get(word, 0.0)
        self._lookups += 1  # not exact across threads; it only decides when to build the dictionary
        if self._lookups > self._dict_after:
            return self.as_dict().get(word, 0.0)
        value = self._table.get(word) if "\t" not in word and "\n" not in word else None
        return 0.0 if value is None else float(value)

    def as_dict(self) -> dict[str, float]:
        """Every word's frequency (built on the first call; later lookups use it)."""
        with self._lock:
            if self._dict is None:
                text = self._table.data.decode("utf-8")
                body = text.split("\n", 1)[1] if text.startswith("#") else text  # one header line
                fields = iter(body.split())  # word, zipf, word, zipf, ...
                self._dict = dict(zip(fields, map(float, fields), strict=False))
            return self._dict


@lru_cache(maxsize=1)
def word_frequencies() -> WordFrequencies:
    """The shipped German word frequencies (one per process)."""
    # shipped sorted by word (tools/build_words_de.py): read as bytes, ~1 ms
    return WordFrequencies(resources.files("memlane").joinpath("data", WORDS_DE).read_bytes())


def zipf_de(word: str) -> float:
    """The Zipf frequency of a lower-cased German word (0.0 when it is not among the shipped words)."""
    return word_frequencies().get(word)


def _modifier(text: str) -> tuple[str, float] | None:
    """``text`` as a known modifier, with its linking element dropped when that makes it one."""
    for link in LINKS:
        if link and not text.endswith(link):
            continue
        stem = text[: len(text) - len(link)] if link else text
        z = zipf_de(stem)
        if len(stem) >= MIN_PART and z > 0 and stem not in STOPWORDS:
            return stem, z  # the text as written first: "Drucker|düsen", not "Druck|er|düsen"
    return None


@lru_cache(maxsize=16384)
def compound_parts(word: str) -> tuple[str, ...]:
    """The parts of a German compound (lower-cased), or () when ``word`` is not one.

    The best binary split is kept when its parts' mean Zipf frequency beats the whole
    word's. Parts are never function words ("Bei|spiel" stays whole)."""
    w = word.lower()
    if len(w) < MIN_COMPOUND or not w.isalpha():
        return ()
    best: tuple[float, str, str] | None = None
    for i in range(MIN_PART, len(w) - MIN_HEAD + 1):
        head = w[i:]
        z_head = zipf_de(head)
        if z_head == 0 or head in STOPWORDS:
            continue
        mod = _modifier(w[:i])
        if mod is None:
            continue
        score = (mod[1] + z_head) / 2  # Zipf is a logarithm: the mean is the geometric mean's
        if best is None or score > best[0]:
            best = (score, mod[0], head)
    if best is None or best[0] <= zipf_de(w):
        return ()
    return best[1], best[2]
